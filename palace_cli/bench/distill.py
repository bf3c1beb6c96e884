"""`palace bench distill --locomo FILE`: distilled memories scored against LoCoMo's own observation annotations.

An observation ("Caroline attended an LGBTQ support group recently", turn D1:3) is recalled when a memory
cites its turn and holds at least half of its content words (`scored_words`: stopwords out, words reduced to
their roots, a contraction or a possessive read whole). `recall` is the share of observations recalled,
`precision` the share of memories that recall at least one. Both come per conversation and per memory type,
with 95% bootstrap intervals, and three ways:

- `cross_validated`: each conversation distilled by a scorer fitted on the other conversations only (leave
  one conversation out): what to expect on conversations the weights never saw;
- `palace`: the shipped weights, through the real `palace distill` into a fresh palace (with its "already
  known" and superseding steps), which is also where speed is measured;
- `evidence_recall@10`: LoCoMo's questions asked of that palace before distilling (turns alone) and after
  (memories beside turns); a memory in the ranking counts as the turn it cites, and the ranking is cut at the
  same ten units, so the context budget is the same.
"""

from __future__ import annotations

import json
import re
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from palace_cli.bench.retrieval import bootstrap_ci, row_names
from palace_cli.conversations.model import Session
from palace_cli.core.text import content_words
from palace_cli.errors import PalaceError
from palace_cli.memory import scorer
from palace_cli.memory.extract import addressee, extract_session, turn_memory

THRESHOLDS = [round(0.10 + 0.01 * i, 2) for i in range(31)]
TARGET_PRECISION = 0.55  # the target; the shipped threshold is the lowest that keeps it in cross-validation


@dataclass
class Observation:
    """One LoCoMo observation: a fact about a speaker and the turns it came from."""

    conversation: str
    speaker: str
    text: str
    turns: tuple[str, ...]


@dataclass
class Scored:
    """A memory as the benchmark scores it: the turns it cites (its own, and those that confirmed it), and what
    it says."""

    conversation: str
    turns: tuple[str, ...]
    text: str
    type: str = ""


def load_observations(path: Path) -> dict[str, list[Observation]]:
    """conversation -> its observations, from a LoCoMo file's `observation` annotations."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise PalaceError(f"{path}: cannot read a LoCoMo file ({exc})") from None
    out: dict[str, list[Observation]] = {}
    for sample in data if isinstance(data, list) else []:
        conversation = str(sample.get("sample_id"))
        items = out.setdefault(conversation, [])
        for by_speaker in (sample.get("observation") or {}).values():
            for speaker, facts in (by_speaker or {}).items():
                for fact in facts or []:
                    if isinstance(fact, list) and len(fact) == 2:
                        turns = fact[1] if isinstance(fact[1], list) else [fact[1]]
                        items.append(Observation(conversation, speaker, str(fact[0]),
                                                 tuple(str(t) for t in turns)))
    if not any(out.values()):
        raise PalaceError(f"{path}: no `observation` annotations to score against")
    return out


# What a contraction or a possessive leaves when cut at its apostrophe ("Caroline's" -> caroline s, "don't" -> don t)
# is not a word: `it's` in nearly every memory made the `s` of an observation's possessive a free match.
CLITIC = re.compile(r"(?<=[A-Za-z])['’](?:s|m|d|ll|ve|re)\b", re.IGNORECASE)
NEGATION = re.compile(r"\b([A-Za-z]+)n['’]t\b")
IRREGULAR_NEGATION = {"ca": "can", "wo": "will", "sha": "shall", "ai": "am"}


def scored_words(text: str) -> set[str]:
    """The content words the LoCoMo rule compares: `content_words` with "don't" read as "do not" and the
    `'s`, `'m`, `'d`, `'ll`, `'ve`, `'re` of a contraction or a possessive dropped."""
    text = NEGATION.sub(lambda m: IRREGULAR_NEGATION.get(m.group(1).lower(), m.group(1)) + " not", text)
    return content_words(CLITIC.sub("", text))


def _recalls(observation: set[str], memory: set[str]) -> bool:
    return bool(observation) and 2 * len(observation & memory) >= len(observation)


def score(memories: list[Scored], observations: dict[str, list[Observation]]) -> dict:
    """recall, precision (with intervals), per conversation and per memory type."""
    by_turn: dict[tuple[str, str], list[tuple[int, set[str]]]] = defaultdict(list)
    for index, memory in enumerate(memories):
        words = scored_words(memory.text)
        for turn in memory.turns:
            by_turn[(memory.conversation, turn)].append((index, words))
    useful = [0] * len(memories)
    recalled: dict[str, list[float]] = defaultdict(list)
    for conversation, items in observations.items():
        for observation in items:
            words = scored_words(observation.text)
            hits = [i for turn in observation.turns for i, found in by_turn.get((conversation, turn), [])
                    if _recalls(words, found)]
            for i in hits:
                useful[i] = 1
            recalled[conversation].append(1.0 if hits else 0.0)
    per_memory: dict[str, list[float]] = defaultdict(list)
    per_type: dict[str, list[float]] = defaultdict(list)
    for memory, good in zip(memories, useful):
        per_memory[memory.conversation].append(float(good))
        per_type[memory.type or "-"].append(float(good))
    every_recall = [v for values in recalled.values() for v in values]
    return {
        "observations": len(every_recall), "memories": len(memories),
        **_rate("recall", every_recall), **_rate("precision", [float(u) for u in useful]),
        "by_conversation": {c: {"observations": len(recalled[c]), "memories": len(per_memory[c]),
                                **_rate("recall", recalled[c]), **_rate("precision", per_memory[c])}
                            for c in sorted(observations)},
        "by_type": {t: {"memories": len(v), **_rate("precision", v)} for t, v in sorted(per_type.items())},
    }


def _rate(name: str, values: list[float]) -> dict:
    return {name: round(statistics.fmean(values), 4) if values else 0.0, f"{name}_ci": bootstrap_ci(values)}


# ---- the scorer, fitted and cross-validated on the file's own sessions ------------------------------------


def locomo_sessions(path: Path) -> dict[str, list[Session]]:
    """conversation -> its sessions, read by the LoCoMo reader (what `palace import` would write)."""
    from palace_cli.importers.chats.locomo import read

    grouped: dict[str, list[Session]] = defaultdict(list)
    for session in read(Path(path), frozenset()).sessions:
        grouped[str(session.meta.get("conversation"))].append(session)
    return dict(grouped)


def labelled(sessions: list[Session], observations: list[Observation]) -> list[tuple[dict, bool]]:
    """(signals, label) of every turn: the label says whether the memory the turn would become recalls one of
    its observations, which is what the scorer should predict."""
    wanted: dict[str, list[set[str]]] = defaultdict(list)
    for observation in observations:
        for turn in observation.turns:
            wanted[turn].append(scored_words(observation.text))
    rows = []
    for session in sessions:
        mean_words = scorer.session_words([t.text for t in session.turns])
        previous = None
        for position, turn in enumerate(session.turns):
            view = scorer.TurnView(turn.text, turn.speaker, tuple(session.participants),
                                   previous.text if previous else "", position, mean_words)
            content, _, _ = turn_memory(turn, session, turn.speaker, addressee(session, turn.speaker), previous)
            words = scored_words(content)
            rows.append((scorer.signals(view), any(_recalls(w, words) for w in wanted.get(turn.id, []))))
            previous = turn
    return rows


def _distilled(sessions: list[Session], conversation: str, weights, threshold: float) -> list[Scored]:
    out = []
    for session in sessions:
        candidates, _ = extract_session(session, weights, threshold)
        out += [Scored(conversation, (c.turn,), c.content, c.type) for c in candidates]
    return out


def cross_validate(path: Path, thresholds=THRESHOLDS, progress: Callable | None = None) -> dict:
    """Leave one conversation out: fit on the others, distill it, score; the curve over thresholds, and the
    lowest threshold whose mean precision reaches TARGET_PRECISION with its per-conversation figures."""
    sessions, observations = locomo_sessions(path), load_observations(path)
    conversations = sorted(c for c in sessions if c in observations)
    if len(conversations) < 2:
        raise PalaceError(f"{path}: cross-validation needs two conversations or more")
    rows = {c: labelled(sessions[c], observations[c]) for c in conversations}
    curve: dict[float, list[dict]] = {t: [] for t in thresholds}
    for number, held_out in enumerate(conversations, 1):
        train = [row for c in conversations if c != held_out for row in rows[c]]
        weights = scorer.fit([r for r, _ in train], [y for _, y in train])
        for threshold in thresholds:
            memories = _distilled(sessions[held_out], held_out, weights, threshold)
            curve[threshold].append(score(memories, {held_out: observations[held_out]}))
        if progress:
            progress("folds", number, len(conversations))
    means = {t: {"recall": round(statistics.fmean(r["recall"] for r in results), 4),
                 "precision": round(statistics.fmean(r["precision"] for r in results), 4)}
             for t, results in curve.items()}
    chosen = min((t for t in thresholds if means[t]["precision"] >= TARGET_PRECISION), default=max(thresholds))
    folds = {c: {k: v for k, v in result.items() if k not in ("by_conversation",)}
             for c, result in zip(conversations, curve[chosen])}
    return {"threshold": chosen, "recall": means[chosen]["recall"], "precision": means[chosen]["precision"],
            "recall_range": [min(f["recall"] for f in folds.values()), max(f["recall"] for f in folds.values())],
            "precision_range": [min(f["precision"] for f in folds.values()),
                                max(f["precision"] for f in folds.values())],
            "by_conversation": folds, "curve": {str(t): means[t] for t in thresholds}}


def fit_scorer(path: Path) -> dict:
    """Weights fitted on every conversation of the file, and the cross-validated threshold: what scorer.py ships."""
    sessions, observations = locomo_sessions(path), load_observations(path)
    rows = [row for c in sessions if c in observations for row in labelled(sessions[c], observations[c])]
    weights = scorer.fit([r for r, _ in rows], [y for _, y in rows])
    return {"turns": len(rows), "positives": sum(y for _, y in rows), "weights": weights.as_dict(),
            "threshold": cross_validate(path)["threshold"]}


def ceilings(path: Path) -> dict:
    """The recall every turn would reach as a memory, whole (as distill writes one) or cut into its sentences
    (each a memory): the most any selection of turns can recall, per unit."""
    from palace_cli.core.text import split_sentences

    sessions, observations = locomo_sessions(path), load_observations(path)
    whole, cut = [], []
    for conversation, group in sessions.items():
        for session in group:
            previous = None
            for turn in session.turns:
                content, _, _ = turn_memory(turn, session, turn.speaker, addressee(session, turn.speaker), previous)
                if content:
                    whole.append(Scored(conversation, (turn.id,), content))
                    cut += [Scored(conversation, (turn.id,), s) for s in split_sentences(content)]
                previous = turn
    known = {c: v for c, v in observations.items() if c in sessions}
    return {"turn": score(whole, known)["recall"], "sentence": score(cut, known)["recall"]}


def extraction_speed(sessions: dict[str, list[Session]], rounds: int = 3) -> dict:
    """Turns per second of the heuristic stage (scoring, rewriting, dating), the median of `rounds` passes."""
    every = [s for group in sessions.values() for s in group]
    turns = sum(len(s.turns) for s in every)
    times, cpu = [], []
    for _ in range(rounds):
        started, used = time.perf_counter(), time.process_time()
        for session in every:
            extract_session(session)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
    median = statistics.median(times)
    return {"turns": turns, "seconds": round(median, 3), "turns_per_s": round(turns / median, 1),
            "turns_per_cpu_s": round(turns / statistics.median(cpu), 1)}


# ---- the real distill in a fresh palace -------------------------------------------------------------------


def run_distill_bench(path: Path, modes=("recall",), workdir: str | None = None, keep: bool = False,
                      cross: bool = True, limit: int | None = None, progress: Callable | None = None) -> dict:
    """Import the file into a new palace, ask its questions, distill, score, ask again (see the module)."""
    from palace_cli.editing.initplan import init_palace
    from palace_cli.importers import import_path
    from palace_cli.memory.distill import distill
    from palace_cli.palace import Palace

    path = Path(path)
    sessions, observations = locomo_sessions(path), load_observations(path)
    summary = {"dataset": path.name, "conversations": len(sessions), "observations":
               sum(len(v) for v in observations.values()), "speed": extraction_speed(sessions),
               "recall_if_every_turn": ceilings(path)}
    if cross:
        summary["cross_validated"] = cross_validate(path, progress=progress)
    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="palace-bench-distill-"))
    try:
        root = init_palace(base / "palace", "LoCoMo distill bench")
        palace = Palace(root)
        import_path(palace, path, progress=progress)
        modes = row_names(modes)
        before = _evidence(palace, path, modes, limit, progress)
        started, used = time.perf_counter(), time.process_time()
        report = distill(palace, progress=progress)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - used
        palace.refresh(progress=progress)
        memories = _palace_memories(palace)
        summary["palace"] = score(memories, observations)
        own_turn_only = score(_palace_memories(palace, confirmations=False), observations)
        summary["palace"]["own_turn_only"] = {k: own_turn_only[k] for k in ("recall", "recall_ci", "precision",
                                                                             "precision_ci")}
        summary["palace"]["distill"] = {"seconds": round(elapsed, 2), "turns_per_s": round(report.turns / elapsed, 1),
                                        "cpu_seconds": round(cpu, 2), "turns_per_cpu_s": round(report.turns / cpu, 1),
                                        "written": len(report.written), "known": len(report.known),
                                        "superseded": len(report.superseded), "stages_s": report.seconds}
        after = _evidence(palace, path, modes, limit, progress, memory_turns=_memory_turns(palace))
        summary["evidence_recall@10"] = {mode: {"turns": before[mode]["recall@10"],
                                                "memories+turns": after[mode]["recall@10"],
                                                "turns_ci": before[mode]["ci"], "memories+turns_ci": after[mode]["ci"],
                                                "questions": before[mode]["questions"]} for mode in before}
        for name in ("recall@10_hits", "context_recall"):
            summary[name] = {mode: {"turns": before[mode][name], "memories+turns": after[mode][name]}
                             for mode in before}
        if keep:
            summary["palace_dir"] = str(root)
    finally:
        if not keep and not workdir:
            shutil.rmtree(base, ignore_errors=True)
    return summary


def _palace_memories(palace, confirmations: bool = True) -> list[Scored]:
    """The distilled memories of a LoCoMo palace as the scorer reads them: each cites its own turn and, with
    `confirmations`, the turns listed in its `confirmed_by` (turns that said it again and were not written)."""
    conversation_of = {sid: str(header.get("conversation")) for _, sid, header, _ in palace.index.store.sessions()}
    out = []
    for memory in palace.index.scan().memories.values():
        session, turn = memory.meta.get("session"), memory.meta.get("turn")
        if session not in conversation_of or not turn:
            continue
        turns = [str(turn)]
        confirmed = memory.meta.get("confirmed_by") if confirmations else None
        for other in confirmed if isinstance(confirmed, list) else []:
            other_session, _, other_turn = str(other).partition("/")
            if conversation_of.get(other_session) == conversation_of[session]:
                turns.append(other_turn)
        out.append(Scored(conversation_of[session], tuple(turns), memory.content, memory.type))
    return out


def _memory_turns(palace) -> dict[str, str]:
    """memory id -> the turn key it cites (`<session>/<turn>`)."""
    return {m.id: f"{m.meta['session']}/{m.meta['turn']}" for m in palace.index.scan().memories.values()
            if m.meta.get("session") and m.meta.get("turn")}


def _evidence(palace, path: Path, modes, limit: int | None, progress, memory_turns: dict | None = None) -> dict:
    """LoCoMo's questions (categories 1-4) in each mode, the ranking and the context being the retrieval
    benchmark's own (bench/locomo.py), each memory counted as the turn it cites:

    - recall@10: the ranking read as turns (a turn met twice, as itself and through a memory, counts once) cut
      at ten turns;
    - recall@10_hits: the first ten hits as they come, a memory and its own turn taking two places;
    - context_recall: what the context handed within the profile's token budget holds."""
    from palace_cli.bench.locomo import _ask, load_questions

    questions = load_questions(palace, path).answerable
    questions = questions[:limit] if limit else questions
    mapping = memory_turns or {}
    out = {}
    for mode in modes:
        values: dict[str, list[float]] = {"recall@10": [], "recall@10_hits": [], "context_recall": []}
        for number, question in enumerate(questions, 1):
            ranked, handed, _, _ = _ask(palace, mode, question, None)
            turns = [mapping.get(i, i) for i in ranked]
            wanted = set(question.evidence)
            values["recall@10"].append(len(wanted & set(list(dict.fromkeys(turns))[:10])) / len(wanted))
            values["recall@10_hits"].append(len(wanted & set(turns[:10])) / len(wanted))
            values["context_recall"].append(len(wanted & {mapping.get(i, i) for i in handed}) / len(wanted))
            if progress:
                progress(f"questions ({mode})", number, len(questions))
        out[mode] = {"questions": len(questions),
                     **{name: round(statistics.fmean(v), 4) if v else 0.0 for name, v in values.items()},
                     "ci": bootstrap_ci(values["recall@10"])}
    return out


# ---- the Claude Code hook, timed as Claude Code runs it: a new process per event ----------------------------


def transcript_records(count: int, start: int = 0, session: str = "bench-session") -> list[str]:
    """JSONL lines of a Claude Code session: `count` exchanges (a user turn and an assistant turn each)."""
    lines, parent = [], f"a{start - 1}" if start else None
    for i in range(start, start + count):
        stamp = f"2025-06-02T{10 + i // 3600 % 12:02d}:{i // 60 % 60:02d}:{i % 60:02d}.000Z"
        base = {"isSidechain": False, "userType": "external", "cwd": "/home/me/code/clock", "sessionId": session,
                "version": "2.0.61", "gitBranch": "main", "timestamp": stamp}
        lines.append(json.dumps({**base, "parentUuid": parent, "type": "user", "uuid": f"u{i}", "message": {
            "role": "user", "content": f"Step {i}: I prefer small commits, so please split change {i} into parts."}}))
        lines.append(json.dumps({**base, "parentUuid": f"u{i}", "type": "assistant", "uuid": f"a{i}", "message": {
            "role": "assistant", "id": f"msg_{i}", "model": "claude-sonnet-4", "type": "message",
            "content": [{"type": "text", "text": f"Split change {i} into three commits: the parser, the writer "
                                                 f"and the tests, each passing on its own."}]}}))
        parent = f"a{i}"
    return lines


def _hook_seconds(palace_dir: Path, payload: dict) -> float:
    import subprocess
    import sys

    started = time.perf_counter()
    script = Path(sys.executable).with_name("palace")
    command = [str(script)] if script.exists() else [shutil.which("palace") or "palace"]
    done = subprocess.run([*command, "hook", "claude-code", "--palace", str(palace_dir)],
                          input=json.dumps(payload), capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise PalaceError(f"the hook exited {done.returncode}: {done.stderr.strip()}")
    return elapsed


def run_hook_bench(copy_of: str | None = None, exchanges: int = 200, grow: int = 10, rounds: int = 5,
                   workdir: str | None = None) -> dict:
    """Seconds of SessionStart (the palace's first, then again) and of PreCompact importing a grown session
    (`grow` new exchanges on a session of `exchanges`), each a new `palace` process, on a copy of `copy_of` (its
    cache too) or of the example palace."""
    from palace_cli.editing.initplan import init_palace

    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="palace-bench-hook-"))
    try:
        palace_dir = base / "palace"
        if copy_of is not None:
            shutil.copytree(copy_of, palace_dir, symlinks=True)
        else:
            example = Path(__file__).resolve().parents[2] / "example-palace"
            if example.is_dir():  # a checkout: a palace with memories to wake up with
                shutil.copytree(example, palace_dir, ignore=shutil.ignore_patterns(".palace"))
            else:
                init_palace(palace_dir, "hook bench")
        start = {"hook_event_name": "SessionStart", "session_id": "bench", "cwd": str(palace_dir), "source": "startup"}
        first = _hook_seconds(palace_dir, start)
        warm = [_hook_seconds(palace_dir, start) for _ in range(rounds)]
        transcript = base / "bench-session.jsonl"
        transcript.write_text("\n".join(transcript_records(exchanges)) + "\n", encoding="utf-8")
        compact = {"hook_event_name": "PreCompact", "session_id": "bench-session", "cwd": str(palace_dir),
                   "transcript_path": str(transcript), "trigger": "auto"}
        whole = _hook_seconds(palace_dir, compact)
        grown = []
        for round_ in range(rounds):
            with transcript.open("a", encoding="utf-8") as handle:
                handle.write("\n".join(transcript_records(grow, exchanges + round_ * grow)) + "\n")
            grown.append(_hook_seconds(palace_dir, compact))
        return {"palace": str(palace_dir), "session_start_first_s": round(first, 3),
                "session_start_s": {"median": round(statistics.median(warm), 3), "max": round(max(warm), 3)},
                "pre_compact_whole_session_s": round(whole, 3), "exchanges": exchanges, "grow": grow,
                "pre_compact_grown_s": {"median": round(statistics.median(grown), 3), "max": round(max(grown), 3)},
                "rounds": rounds}
    finally:
        if not workdir:
            shutil.rmtree(base, ignore_errors=True)
