"""`palace bench distill --sessions FILE`: distill scored against a labelled set of coding-agent sessions.

The set (benchmarks/agent-sessions.md) holds sessions in its own JSON shape, one per line, each turn labelled with
the memories a careful person would keep. Each session is written out as the Claude Code JSONL an agent would
have logged (thinking and tool calls as blocks, tool output as tool results) and read by the same reader
`palace import` uses, so what is scored is what a user's import gives distill: thinking and tool output are left
out by the reader, not by the benchmark.

Scoring is the set's own rule: a produced memory matches a labelled one when it cites the labelled turn and holds
at least half of the labelled text's content words (lowercase alphanumeric runs less `core.text.STOPWORDS`);
matching is one to one, largest overlap first; a produced memory citing a later turn that matches a labelled
memory of its session is a restatement, neither hit nor miss. Recall and precision per kind, 95% bootstrap
intervals.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from palace_cli.bench.distill import CLITIC, IRREGULAR_NEGATION, NEGATION
from palace_cli.bench.retrieval import bootstrap_ci
from palace_cli.conversations.model import Session
from palace_cli.core.text import STOPWORDS, words
from palace_cli.errors import PalaceError

KINDS = ("decision", "convention", "fact", "solution", "milestone")
SECRETS = ("sk-live-", "N7x!pQ2vR", "Hx7$kq2!Lm")  # the set's fake secrets (agent-sessions.md, "Secrets")


@dataclass
class Label:
    """One labelled memory: the turn that carries it, its kind and text."""

    session: str
    turn: str
    position: int  # the turn's index in its session
    id: str
    kind: str
    text: str


@dataclass
class Produced:
    """A memory distill produced, as the benchmark scores it."""

    session: str
    turn: str
    kind: str
    text: str


@dataclass
class LabelledSession:
    """A session of the set: its header, its turns as the set gives them, its labels."""

    name: str
    user: str
    cwd: str
    started: str
    work: str
    turns: list[dict]
    labels: list[Label] = field(default_factory=list)


def content(text: str) -> set[str]:
    """The scoring rule's content words: lowercase alphanumeric runs, stopwords out; a contraction or a possessive read
    whole as the LoCoMo rule reads it (bench.distill: "don't" is "do not", the "s" of "Shelfmark's" no word of its
    own, which a memory saying "shelfmark:" would lack)."""
    text = NEGATION.sub(lambda m: IRREGULAR_NEGATION.get(m.group(1).lower(), m.group(1)) + " not", text)
    return {w for w in words(CLITIC.sub("", text)) if w not in STOPWORDS}


def content_before_possessives(text: str) -> set[str]:
    """The scoring rule's content words as they were before contractions and possessives were read whole (for figures
    reported under both rules)."""
    return {w for w in words(text) if w not in STOPWORDS}


def load_set(path: Path) -> list[LabelledSession]:
    """The sessions of a labelled set (one JSON object a line)."""
    out = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise PalaceError(f"{path}: cannot read a session set ({exc})") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            session = LabelledSession(str(data["session"]), str(data.get("user") or ""), str(data.get("cwd") or ""),
                                      str(data["started"]), str(data.get("work") or ""), list(data["turns"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise PalaceError(f"{path}:{number}: not a labelled session ({exc})") from None
        for position, turn in enumerate(session.turns):
            for memory in turn.get("memories") or []:
                session.labels.append(Label(session.name, str(turn["id"]), position, str(memory["id"]),
                                            str(memory["kind"]), str(memory["text"])))
        out.append(session)
    if not out:
        raise PalaceError(f"{path}: no sessions")
    return out


def claude_code_lines(session: LabelledSession) -> list[str]:
    """The session as Claude Code logs it: a record per user turn, an assistant record with its thinking, text and
    tool_use blocks, and a user record holding the tool's result."""
    lines, parent = [], None
    base = {"isSidechain": False, "userType": "external", "cwd": session.cwd, "sessionId": session.name,
            "version": "2.0.61", "gitBranch": "main"}
    for turn in session.turns:
        uuid, time = str(turn["id"]), turn.get("time") or session.started
        if turn["speaker"] == "user":
            lines.append(json.dumps({**base, "parentUuid": parent, "type": "user", "uuid": uuid, "timestamp": time,
                                     "message": {"role": "user", "content": turn["text"]}}))
            parent = uuid
            continue
        blocks = []
        if turn.get("thinking"):
            blocks.append({"type": "thinking", "thinking": turn["thinking"], "signature": "x"})
        blocks.append({"type": "text", "text": turn["text"]})
        if turn.get("tool"):
            name, _, argument = str(turn["tool"]).partition(": ")
            key = "command" if name == "Bash" else "file_path"
            blocks.append({"type": "tool_use", "id": f"tool-{uuid}", "name": name, "input": {key: argument}})
        lines.append(json.dumps({**base, "parentUuid": parent, "type": "assistant", "uuid": uuid, "timestamp": time,
                                 "message": {"role": "assistant", "id": f"msg-{uuid}", "model": "claude-sonnet-4",
                                             "type": "message", "content": blocks}}))
        parent = uuid
        if turn.get("tool"):
            result = f"{uuid}-result"
            lines.append(json.dumps({**base, "parentUuid": parent, "type": "user", "uuid": result, "timestamp": time,
                                     "message": {"role": "user", "content": [
                                         {"type": "tool_result", "tool_use_id": f"tool-{uuid}",
                                          "content": turn.get("tool_output") or "(no output)"}]}}))
            parent = result
    return lines


def write_transcripts(sessions: list[LabelledSession], folder: Path) -> dict[str, Path]:
    """Each session's Claude Code JSONL in `folder` (`<session>.jsonl`), by session name."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for session in sessions:
        path = folder / f"{session.name}.jsonl"
        path.write_text("\n".join(claude_code_lines(session)) + "\n", encoding="utf-8")
        out[session.name] = path
    return out


def read_sessions(sessions: list[LabelledSession]) -> dict[str, Session]:
    """Each labelled session as the Claude Code reader of `palace import` reads its transcript."""
    from palace_cli.importers.chats.claude_code import read

    out = {}
    with tempfile.TemporaryDirectory(prefix="palace-worksessions-") as folder:
        for name, path in write_transcripts(sessions, Path(folder)).items():
            result = read(path, frozenset())
            if len(result.sessions) != 1:
                raise PalaceError(f"{name}: the Claude Code reader gave {len(result.sessions)} sessions, not one")
            session = result.sessions[0]
            session.path = f"conversations/claude-code/{name}.md"
            for number, turn in enumerate(session.turns, 1):
                turn.line = number  # only for ordering: the palace run scores the written files
            out[name] = session
    return out


def score(produced: list[Produced], sessions: list[LabelledSession], content=content) -> dict:
    """Recall and precision per kind and overall (the set's rule; `content` its content words), with intervals, kind
    agreement and secrets."""
    labels = [label for s in sessions for label in s.labels]
    position = {(s.name, str(t["id"])): i for s in sessions for i, t in enumerate(s.turns)}
    words_of = {id(label): content(label.text) for label in labels}
    made = [(p, content(p.text)) for p in produced]
    pairs = []
    for label in labels:
        wanted = words_of[id(label)]
        for index, (memory, found) in enumerate(made):
            if memory.session == label.session and memory.turn == label.turn and wanted:
                shared = len(wanted & found)
                if 2 * shared >= len(wanted):
                    pairs.append((shared / len(wanted), id(label), index))
    matched_label, matched_memory = {}, {}
    for share, label_key, index in sorted(pairs, key=lambda p: -p[0]):
        if label_key not in matched_label and index not in matched_memory:
            matched_label[label_key], matched_memory[index] = index, label_key
    by_label = {id(label): label for label in labels}
    neutral = set()
    for index, (memory, found) in enumerate(made):
        if index in matched_memory:
            continue
        where = position.get((memory.session, memory.turn), -1)
        for label in labels:
            wanted = words_of[id(label)]
            if (label.session == memory.session and where > label.position and wanted
                    and 2 * len(wanted & found) >= len(wanted)):
                neutral.add(index)
                break
    recall = {kind: [float(id(label) in matched_label) for label in labels if label.kind == kind] for kind in KINDS}
    precision = {kind: [float(i in matched_memory) for i, (m, _) in enumerate(made)
                        if m.kind == kind and i not in neutral] for kind in KINDS}
    agree = [by_label[key].kind == made[index][0].kind for index, key in matched_memory.items()]
    every_recall = [v for values in recall.values() for v in values]
    every_precision = [float(i in matched_memory) for i in range(len(made)) if i not in neutral]
    secrets = sum(1 for memory, _ in made if any(s in memory.text for s in SECRETS))
    return {"labels": len(labels), "produced": len(produced), "restatements": len(neutral),
            **_rate("recall", every_recall), **_rate("precision", every_precision),
            "kind_agreement": round(statistics.fmean(agree), 4) if agree else 0.0, "secrets": secrets,
            "by_kind": {kind: {"labels": len(recall[kind]), "produced": len(precision[kind]),
                               **_rate("recall", recall[kind]), **_rate("precision", precision[kind])}
                        for kind in KINDS},
            "matched": sorted(by_label[key].id for key in matched_label)}


def _rate(name: str, values: list[float]) -> dict:
    return {name: round(statistics.fmean(values), 4) if values else 0.0, f"{name}_ci": bootstrap_ci(values)}


def by_work(produced: list[Produced], sessions: list[LabelledSession]) -> dict:
    """Recall and precision per kind of work (debugging, design ...)."""
    groups = defaultdict(list)
    for session in sessions:
        groups[session.work].append(session)
    out = {}
    for work, members in sorted(groups.items()):
        names = {s.name for s in members}
        result = score([p for p in produced if p.session in names], members)
        out[work] = {k: result[k] for k in ("labels", "produced", "recall", "precision")}
    return out


# ---- the work scorer, fitted and cross-validated by session -------------------------------------------------

THRESHOLDS = [round(0.05 + 0.01 * i, 2) for i in range(86)]


def _units(sets: list[LabelledSession], sessions: dict[str, Session]) -> dict[str, list]:
    from palace_cli.memory.work import work_units

    return {s.name: work_units(sessions[s.name], s.user) for s in sets}


def _targets(session: LabelledSession, units: list) -> list[bool]:
    """Whether each unit, as written, matches a label of its turn: what the scorer learns to predict."""
    out = []
    for unit in units:
        found = content(unit.text)
        out.append(any(label.turn == unit.turn.id and 2 * len(content(label.text) & found) >= len(content(label.text))
                       for label in session.labels))
    return out


def _kept(session: LabelledSession, units: list, weights, threshold: float) -> list[Produced]:
    """What distill keeps of a session's units (extract.work_session's rule: scored at or above the threshold,
    a text said twice kept once)."""
    out, seen = [], set()
    for unit in units:
        key = " ".join(unit.text.lower().split())
        if (weights.probability(unit.signals) >= threshold or unit.signals.get("strong")) and key not in seen:
            seen.add(key)
            out.append(Produced(session.name, unit.turn.id, unit.kind, unit.text))
    return out


def _objective(result: dict) -> float:
    """What a threshold is chosen for: the lower of recall and precision (both targets must hold)."""
    return min(result["recall"], result["precision"])


def _fit(sets, units, names):
    from palace_cli.memory import scorer
    from palace_cli.memory.work import SIGNALS

    rows = [u.signals for s in sets if s.name in names for u in units[s.name]]
    labels = [y for s in sets if s.name in names for y in _targets(s, units[s.name])]
    return scorer.fit(rows, labels, names=SIGNALS)


def _best_threshold(sets, units, weights) -> float:
    results = {t: score([p for s in sets for p in _kept(s, units[s.name], weights, t)], sets) for t in THRESHOLDS}
    return max(THRESHOLDS, key=lambda t: (_objective(results[t]), -abs(t - 0.5)))


def cross_validate(sets: list[LabelledSession], sessions: dict[str, Session], progress=None) -> dict:
    """Leave one session out: fit the weights on the others and choose the threshold on them, distill the one left
    out; the pooled score of every held-out session, the folds' spread, and the curve over thresholds (each
    fold's weights) from which the shipped threshold is chosen."""
    units = _units(sets, sessions)
    produced, folds, curve = [], {}, {t: [] for t in THRESHOLDS}
    for number, held in enumerate(sets, 1):
        train = [s for s in sets if s is not held]
        weights = _fit(sets, units, {s.name for s in train})
        threshold = _best_threshold(train, units, weights)
        kept = _kept(held, units[held.name], weights, threshold)
        produced += kept
        result = score(kept, [held])
        folds[held.name] = {"threshold": threshold, "recall": result["recall"], "precision": result["precision"],
                            "labels": result["labels"], "produced": result["produced"]}
        for t in THRESHOLDS:
            curve[t] += _kept(held, units[held.name], weights, t)
        if progress:
            progress("folds", number, len(sets))
    pooled = score(produced, sets)
    points = {t: score(curve[t], sets) for t in THRESHOLDS}
    chosen = max(THRESHOLDS, key=lambda t: (_objective(points[t]), -abs(t - 0.5)))
    return {**{k: v for k, v in pooled.items() if k != "matched"}, "by_work": by_work(produced, sets),
            "folds": folds, "recall_range": [min(f["recall"] for f in folds.values()),
                                             max(f["recall"] for f in folds.values())],
            "precision_range": [min(f["precision"] for f in folds.values()),
                                max(f["precision"] for f in folds.values())],
            "threshold": chosen, "curve": {str(t): {"recall": points[t]["recall"], "precision": points[t]["precision"]}
                                           for t in THRESHOLDS[::5]}}


def fit_work_scorer(path: Path) -> dict:
    """The weights fitted on every session of the set, and the threshold chosen by leaving one session out: what
    scorer.py ships as WORK_FITTED and WORK_THRESHOLD."""
    sets = load_set(path)
    sessions = read_sessions(sets)
    units = _units(sets, sessions)
    weights = _fit(sets, units, {s.name for s in sets})
    return {"units": sum(len(v) for v in units.values()),
            "positives": sum(sum(_targets(s, units[s.name])) for s in sets), "weights": weights.as_dict(),
            "threshold": cross_validate(sets, sessions)["threshold"]}


def heuristic_speed(sessions: dict[str, Session], rounds: int = 5) -> dict:
    """Turns per second of the work heuristics alone (units, signals, scores), the median of `rounds` passes, each
    from empty caches: by the clock, and by the process's CPU time (what the machine's load does not change)."""
    from palace_cli.memory.extract import extract_session
    from palace_cli.memory.work import clear_caches

    turns = sum(len(s.turns) for s in sessions.values())
    wall, cpu = [], []
    for _ in range(rounds):
        clear_caches()
        started, used = time.perf_counter(), time.process_time()
        for session in sessions.values():
            extract_session(session)
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
    return {"turns": turns, "seconds": round(statistics.median(wall), 3),
            "turns_per_s": round(turns / statistics.median(wall), 1),
            "turns_per_cpu_s": round(turns / statistics.median(cpu), 1), "load": _load()}


def _load() -> float | None:
    """The machine's one-minute load average, where the system tells it."""
    import os

    try:
        return round(os.getloadavg()[0], 1)
    except (AttributeError, OSError):
        return None


# ---- the real distill, each session in a palace of its own --------------------------------------------------


def palace_run(sets: list[LabelledSession], workdir: Path, llm: bool | None = False, progress=None) -> dict:
    """Each session imported (its Claude Code JSONL, through `palace import`) into a new palace whose
    `[identity] name` is the session's user, then `palace distill`; the written memories scored."""
    from palace_cli.editing.initplan import init_palace
    from palace_cli.importers import import_path
    from palace_cli.memory.distill import distill
    from palace_cli.palace import Palace

    transcripts = write_transcripts(sets, workdir / "transcripts")
    produced, turns, seconds, cpu, stages, llm_stats = [], 0, 0.0, 0.0, defaultdict(float), defaultdict(int)
    for number, labelled in enumerate(sets, 1):
        root = init_palace(workdir / labelled.name, f"{labelled.name} bench")
        with (root / "palace.toml").open("a", encoding="utf-8") as handle:
            handle.write(f'\n[identity]\nname = {json.dumps(labelled.user)}\n')
        palace = Palace(root)
        import_path(palace, transcripts[labelled.name])
        palace.refresh(embedder=None)
        started, used = time.perf_counter(), time.process_time()
        report = distill(palace, llm=llm)
        seconds += time.perf_counter() - started
        cpu += time.process_time() - used
        turns += report.turns
        for name, value in report.seconds.items():
            stages[name] += value
        for key in ("asked", "memories"):
            llm_stats[key] += report.llm.get(key, 0)
        for memory in palace.index.scan().memories.values():
            turn = memory.meta.get("turn")
            if turn:
                produced.append(Produced(labelled.name, str(turn), str(memory.meta.get("kind") or memory.type),
                                         memory.content))
        if progress:
            progress("sessions", number, len(sets))
    result = score(produced, sets)
    return {**{k: v for k, v in result.items() if k != "matched"}, "by_work": by_work(produced, sets),
            "distill": {"turns": turns, "seconds": round(seconds, 2), "turns_per_s": round(turns / seconds, 1),
                        "cpu_seconds": round(cpu, 2), "turns_per_cpu_s": round(turns / cpu, 1), "load": _load(),
                        "stages_s": {k: round(v, 2) for k, v in stages.items()}},
            "llm": dict(llm_stats) if llm else None,
            "examples": [{"turn": p.turn, "kind": p.kind, "text": p.text} for p in produced[:12]]}


def run_sessions_bench(path: Path, workdir: str | None = None, keep: bool = False, cross: bool = True,
                       llm: bool | None = False, progress=None) -> dict:
    """The agent-session benchmark: cross-validated by session, then the shipped setting through the real import
    and distill, with the speed of both."""
    import shutil

    sets = load_set(path)
    sessions = read_sessions(sets)
    summary = {"dataset": Path(path).name, "sessions": len(sets), "turns": sum(len(s.turns) for s in sets),
               "labels": sum(len(s.labels) for s in sets), "speed": heuristic_speed(sessions)}
    if cross:
        summary["cross_validated"] = cross_validate(sets, sessions, progress)
    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="palace-bench-sessions-"))
    try:
        summary["palace"] = palace_run(sets, base, llm, progress)
        if keep:
            summary["palace_dir"] = str(base)
    finally:
        if not keep and not workdir:
            shutil.rmtree(base, ignore_errors=True)
    return summary
