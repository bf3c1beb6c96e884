"""`palace bench retrieval --locomo FILE`: evidence recall of turns on LoCoMo, per mode and per question category.

The palace must already hold the file's conversations (`palace import FILE`): the benchmark reads only
the questions (`qa`) from the file and maps each evidence id (`D3:12` of sample `conv-26`) to the turn
the import wrote (`conversation: conv-26` in the session's frontmatter, turn id `D3:12`). recall@k is
LoCoMo's own: the share of a question's evidence turns in the top k, averaged over questions.
Categories 1-4 are scored; category 5 (adversarial: the question presumes something never said) is
scored apart as abstention, by how well the top hit's confidence separates it from the answerable ones.

Each question searches the whole palace by default (what an assistant's memory does: it does not
know which conversation a question is about); `own_conversation` repeats every mode limited to the
question's own conversation (LoCoMo's original setting), for comparison.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from palace_cli.errors import PalaceError
from palace_cli.index.scope import Scope
from palace_cli.palace import Palace
from palace_cli.search.profiles import PROFILES
from palace_cli.search.retrieve import hit_confidence, pick, recall, search
from palace_cli.search.context import assemble_context
from palace_cli.search.wakeup import BYTES_PER_TOKEN
from palace_cli.bench.retrieval import _auc, bootstrap_ci, row_names

MODES = ("recall", "lexical", "dense", "fused")
CUTOFFS = (1, 5, 10, 25, 50)
SESSION_CUTOFFS = (5, 10)
DEPTH = max(CUTOFFS)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
ADVERSARIAL = 5
EVIDENCE = re.compile(r"D(\d+):(\d+)")
WARM_UP = 20


@dataclass
class Question:
    """One LoCoMo question with its evidence as palace turn keys."""

    qid: str
    text: str
    category: int
    conversation: str
    evidence: list[str]


@dataclass
class Questions:
    """The questions of a LoCoMo file that the palace can score, and what was skipped and why."""

    answerable: list[Question] = field(default_factory=list)
    adversarial: list[Question] = field(default_factory=list)
    malformed_ids: int = 0      # evidence entries that are not `D<session>:<turn>`
    unknown_ids: int = 0        # well-formed ids naming no turn the palace holds
    without_evidence: int = 0   # questions left with no usable evidence id


def load_questions(palace: Palace, path: Path) -> Questions:
    """Read the questions of a LoCoMo file and map their evidence to turns of the palace (which must hold them)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise PalaceError(f"{path}: cannot read a LoCoMo file ({exc})") from None
    if not isinstance(data, list):
        raise PalaceError(f"{path}: not a LoCoMo file (a JSON list of samples with `qa`)")
    turns = _turns_by_conversation(palace)
    missing = [str(s.get("sample_id")) for s in data if isinstance(s, dict) and str(s.get("sample_id")) not in turns]
    if missing:
        raise PalaceError(f"this palace holds no conversation {', '.join(missing[:3])}"
                          f"{' ...' if len(missing) > 3 else ''} of {path}; run `palace import {path}` first "
                          "(the benchmark imports nothing itself)")
    out = Questions()
    for sample in data:
        conversation = str(sample.get("sample_id"))
        for number, qa in enumerate(sample.get("qa") or []):
            if not isinstance(qa, dict) or qa.get("category") not in (*CATEGORIES, ADVERSARIAL):
                out.without_evidence += 1
                continue
            keys = []
            for raw in qa.get("evidence") or []:
                for item in filter(None, re.split(r"[;,]\s*|\s+", str(raw).strip())):
                    if not EVIDENCE.fullmatch(item):
                        out.malformed_ids += 1
                    elif item not in turns[conversation]:
                        out.unknown_ids += 1
                    elif turns[conversation][item] not in keys:
                        keys.append(turns[conversation][item])
            if not keys:
                out.without_evidence += 1
                continue
            question = Question(f"{conversation}#{number}", str(qa.get("question", "")), qa["category"], conversation,
                                keys)
            (out.adversarial if question.category == ADVERSARIAL else out.answerable).append(question)
    return out


def _turns_by_conversation(palace: Palace) -> dict[str, dict[str, str]]:
    """conversation -> LoCoMo turn id -> palace turn key, for the indexed sessions that name their conversation."""
    store = palace.index.store
    conversation_of = {sid: header.get("conversation") for _, sid, header, _ in store.sessions()}
    out: dict[str, dict[str, str]] = defaultdict(dict)
    for key in palace.index.catalog().ids:
        if "/" in key:
            session, turn = key.split("/", 1)
            if conversation_of.get(session):
                out[str(conversation_of[session])][turn] = key
    return out


@dataclass
class Run:
    """Per-question results of one mode in one scope."""

    metrics: list[dict[str, float]] = field(default_factory=list)
    categories: list[int] = field(default_factory=list)
    context_tokens: list[float] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    confidence: list[float] = field(default_factory=list)
    adversarial_confidence: list[float] = field(default_factory=list)
    irrelevant: list[float] = field(default_factory=list)   # memories, and turns of another conversation, handed
    handed_units: list[float] = field(default_factory=list)


def question_metrics(ranked: list[str], handed: list[str], evidence: list[str]) -> dict[str, float]:
    """recall@k, session_recall@k and context recall of one ranking of turn keys."""
    wanted = set(evidence)
    sessions = {key.split("/", 1)[0] for key in evidence}
    out = {f"recall@{k}": len(wanted & set(ranked[:k])) / len(wanted) for k in CUTOFFS}
    for k in SESSION_CUTOFFS:
        found = {key.split("/", 1)[0] for key in ranked[:k]}
        out[f"session_recall@{k}"] = len(sessions & found) / len(sessions)
    out["context_recall"] = len(wanted & set(handed)) / len(wanted)
    return out


def _ask(palace: Palace, mode: str, question: Question, scope: Scope | None):
    """(ranked turn keys, handed keys, context tokens, confidence) of one question in one mode."""
    spec = PROFILES["reference"]
    sessions = scope.sessions if scope else None
    if mode == "recall":
        result = recall(palace, question.text, depth=DEPTH, do_refresh=False, sessions=sessions)
        ranked, context, handed = result.ranked, result.context, result.handed
    else:
        result = search(palace, question.text, mode=mode, k=DEPTH, do_refresh=False, sessions=sessions)
        ranked = result.hits
        context, handed = assemble_context(pick(ranked, spec.k, spec.turns), spec, spec.budget)
    tokens = len(context.encode("utf-8")) / BYTES_PER_TOKEN
    return [h.id for h in ranked], [h.id for h in handed], tokens, hit_confidence(ranked)


def run_locomo_bench(palace: Palace, path: Path, modes=MODES, scopes=("palace", "conversation"),
                     limit: int | None = None, progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Every mode over every question, in each scope; means with 95% bootstrap intervals, per category."""
    palace.refresh()
    questions = load_questions(palace, path)
    embedder, dense, _ = palace.index.dense()
    modes = [m for m in row_names(modes) if m in MODES and (embedder is not None or m != "dense")]
    asked = questions.answerable[:limit] if limit else questions.answerable
    adversarial = questions.adversarial[:limit] if limit else questions.adversarial
    own = _own_sessions(palace)
    conversation_of = {session: conversation for conversation, sessions in own.items() for session in sessions}
    for question in asked[:WARM_UP]:  # load readers, catalogs and models: latency is warm
        recall(palace, question.text, do_refresh=False)
    runs = {(scope, mode): Run() for scope in scopes for mode in modes}
    everything = [(q, False) for q in asked] + [(q, True) for q in adversarial]
    for position, (question, is_adversarial) in enumerate(everything):
        for scope_name in scopes:
            scope = Scope(sessions=own[question.conversation]) if scope_name == "conversation" else None
            for turn in range(len(modes)):
                mode = modes[(position + turn) % len(modes)]  # rotate so machine drift falls on every mode alike
                run = runs[(scope_name, mode)]
                palace.index.forget_query_vectors()  # warm means models loaded, not answers remembered
                started = time.perf_counter()
                ranked, handed, tokens, confidence = _ask(palace, mode, question, scope)
                elapsed = (time.perf_counter() - started) * 1000
                if is_adversarial:
                    run.adversarial_confidence.append(confidence)
                    continue
                run.irrelevant.append(float(sum(
                    "/" not in key or conversation_of.get(key.split("/", 1)[0]) != question.conversation
                    for key in handed)))
                run.handed_units.append(float(len(handed)))
                run.metrics.append(question_metrics(ranked, handed, question.evidence))
                run.categories.append(question.category)
                run.context_tokens.append(tokens)
                run.latencies_ms.append(elapsed)
                run.confidence.append(confidence)
        if progress:
            progress("questions", position + 1, len(everything))
    summary = {"dataset": Path(path).name, "questions": len(asked), "adversarial_questions": len(adversarial),
               "evidence_skipped": {"malformed_ids": questions.malformed_ids, "unknown_ids": questions.unknown_ids,
                                    "questions_without_evidence": questions.without_evidence},
               "dense": dense, "profile": "reference", "depth": DEPTH, "scope": "palace",
               "modes": {mode: summarise(runs[("palace", mode)]) for mode in modes if "palace" in scopes}}
    if "conversation" in scopes:
        summary["own_conversation"] = {mode: summarise(runs[("conversation", mode)]) for mode in modes}
    return summary


def _own_sessions(palace: Palace) -> dict[str, tuple[str, ...]]:
    """conversation -> the ids of its sessions."""
    out: dict[str, list[str]] = defaultdict(list)
    for _, sid, header, _ in palace.index.store.sessions():
        if header.get("conversation"):
            out[str(header["conversation"])].append(sid)
    return {c: tuple(s) for c, s in out.items()}


METRICS = [f"recall@{k}" for k in CUTOFFS] + [f"session_recall@{k}" for k in SESSION_CUTOFFS] + ["context_recall"]


def _means(metrics: list[dict[str, float]]) -> tuple[dict, dict]:
    out, ci = {}, {}
    for name in METRICS:
        values = [m[name] for m in metrics]
        out[name] = round(statistics.fmean(values), 4) if values else 0.0
        ci[name] = bootstrap_ci(values)
    return out, ci


def summarise(run: Run) -> dict:
    """Means with CIs, context tokens, latency percentiles, per category, and abstention on adversarial questions."""
    out, ci = _means(run.metrics)
    out["context_tokens"] = round(statistics.fmean(run.context_tokens), 1) if run.context_tokens else 0.0
    out["handed_units"] = round(statistics.fmean(run.handed_units), 2) if run.handed_units else 0.0
    out["irrelevant_handed"] = round(statistics.fmean(run.irrelevant), 4) if run.irrelevant else 0.0
    ci["irrelevant_handed"] = bootstrap_ci(run.irrelevant)
    lat = sorted(run.latencies_ms)
    out["p50_ms"] = round(float(np.percentile(lat, 50)), 2) if lat else 0.0
    out["p95_ms"] = round(float(np.percentile(lat, 95)), 2) if lat else 0.0
    out["by_category"] = {}
    for number, name in CATEGORIES.items():
        picked = [m for m, c in zip(run.metrics, run.categories) if c == number]
        means, intervals = _means(picked)
        out["by_category"][f"{number} {name}"] = {"questions": len(picked), **means, "ci": intervals}
    if run.adversarial_confidence:
        out["adversarial"] = {
            "questions": len(run.adversarial_confidence),
            "abstain_auc": round(_auc(run.confidence, run.adversarial_confidence), 4),
            "confidence_answerable": round(statistics.fmean(run.confidence), 4),
            "confidence_adversarial": round(statistics.fmean(run.adversarial_confidence), 4)}
    out["ci"] = ci
    return out


def markdown(summary: dict) -> str:
    """The summary as Markdown tables: one row per mode, then recall@10 per category."""
    lines = [f"dataset: {summary['dataset']}, {summary['questions']} questions (categories 1-4), "
             f"{summary['adversarial_questions']} adversarial; dense {summary['dense']}; skipped evidence: "
             + ", ".join(f"{k} {v}" for k, v in summary["evidence_skipped"].items())]
    for title, block in (("whole palace", summary["modes"]), ("own conversation", summary.get("own_conversation"))):
        if not block:
            continue
        columns = [f"recall@{k}" for k in CUTOFFS] + ["session_recall@10", "context_recall", "context_tokens",
                                                      "irrelevant_handed", "p50_ms", "p95_ms"]
        lines += ["", f"{title}:", "", "| mode | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
        for mode, row in block.items():
            cells = []
            for column in columns:
                interval = row["ci"].get(column)
                cells.append(f"{row[column]:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]" if interval
                             else f"{row[column]:g}")
            lines.append(f"| {mode} | " + " | ".join(cells) + " |")
        names = list(next(iter(block.values()))["by_category"])
        lines += ["", "| mode | " + " | ".join(f"recall@10 {n}" for n in names) + " | abstention AUC (cat 5) |",
                  "|---" * (len(names) + 2) + "|"]
        for mode, row in block.items():
            cells = []
            for name in names:
                cat = row["by_category"][name]
                cells.append(f"{cat['recall@10']:.3f} [{cat['ci']['recall@10'][0]:.3f}, {cat['ci']['recall@10'][1]:.3f}]"
                             f" (n={cat['questions']})")
            auc = row.get("adversarial", {}).get("abstain_auc")
            lines.append(f"| {mode} | " + " | ".join(cells) + f" | {auc if auc is not None else '-'} |")
    return "\n".join(lines) + "\n"
