"""`palace bench verify`: how well verify tokens detect ungrounded answers (`palace bench ask` measures abstention).

The labelled set is built from the palace itself. For every memory M with a question about it:
- grounded: the generator answers with M's context (the positive case for citing M);
- no-context: the generator answers the same question with no memory at all;
- wrong-context: the generator answers with the context of the best-ranked memory that is not M
  (a plausible retrieval mistake);
- adversarial: a deterministic forgery that names M's subject, quotes its content and a sentence of
  its image without the token, and fakes a citation with M's anchor (public in the index files).
Every answer is checked as `palace verify --memory M` would: was this answer produced from M?
"Ungrounded" (the last three) is the positive class, as in hallucination detection.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from palace_cli.answers.ask import build_prompt
from palace_cli.answers.verify import Verdict, verify_response
from palace_cli.backends.cache import cached
from palace_cli.bench.retrieval import BOOTSTRAP, Query, load_queries
from palace_cli.core.text import split_at_stops
from palace_cli.core.tokens import contains_phrase
from palace_cli.palace import Palace
from palace_cli.search.context import build_context
from palace_cli.search.hits import Hit
from palace_cli.search.profiles import PROFILES
from palace_cli.search.retrieve import search

CONDITIONS = ("grounded", "no-context", "wrong-context", "adversarial")
BENCH_MAX_TOKENS = 80
Progress = Callable[[str, int, int], None]


@dataclass
class Item:
    """One labelled answer and what verify said about it."""

    memory: str
    condition: str
    question: str
    response: str
    verdict: Verdict
    context_of: str = ""   # whose context the generator saw ("" for none)
    cached: bool = False
    elapsed_s: float = 0.0

    @property
    def ungrounded(self) -> bool:
        return self.condition != "grounded"

    @property
    def flagged(self) -> bool:
        return not self.verdict.grounded


@dataclass
class LabelledSet:
    """The items, and what making them cost."""

    items: list[Item] = field(default_factory=list)
    model: str = ""
    generated: int = 0
    from_cache: int = 0
    generation_s: float = 0.0       # spent generating in this run
    generation_cost_s: float = 0.0  # what generating every answer took, in this run or when it was cached
    wall_s: float = 0.0


def questions_by_memory(queries: list[Query]) -> dict[str, str]:
    """One question per memory: its first "direct" query, else its first query of any kind."""
    chosen: dict[str, tuple[int, str]] = {}
    for q in queries:
        if len(q.expected) != 1:
            continue
        rank = 0 if q.kind == "direct" else 1
        memory = q.expected[0]
        if memory not in chosen or rank < chosen[memory][0]:
            chosen[memory] = (rank, q.query)
    return {m: text for m, (_, text) in chosen.items()}


def adversarial_answer(memory) -> str:
    """A forgery built without the token: subject, two content sentences, an image sentence that does
    not contain the token, and a fake citation with the (public) anchor."""
    parts = [f"{memory.subject}:"] + split_at_stops(memory.content)[:2]
    scene = [s for s in split_at_stops(memory.image) if not contains_phrase(s, memory.verify)]
    if scene:
        parts.append(scene[0])
    if memory.anchor:
        parts.append(f"[verify: {memory.anchor}]")
    return " ".join(parts)


def _context_for(memory) -> str:
    hit = Hit(memory.id, memory.subject, memory.domain, memory.path, memory.line, 1.0, {}, memory)
    return build_context([hit], PROFILES["reference"], None)


def _wrong_memory(palace: Palace, question: str, right: str, memories: dict) -> str:
    """The best-ranked memory for the question that is not the right one (lexical, so it is the
    same with or without an embedder)."""
    for hit in search(palace, question, mode="lexical", k=5, do_refresh=False).hits:
        if hit.id != right and hit.id in memories:
            return hit.id
    ids = sorted(memories)
    return ids[(ids.index(right) + len(ids) // 2) % len(ids)]


def build_set(palace: Palace, generator, queries: list[Query], *, max_tokens: int = BENCH_MAX_TOKENS,
              use_cache: bool = True, limit: int | None = None, progress: Progress | None = None) -> LabelledSet:
    """Generate (or read from the cache) and verify the labelled answers for every memory with a question."""
    started = time.perf_counter()
    palace.refresh()
    memories = palace.index.scan().memories
    tokens = palace.index.store.tokens()
    asked = questions_by_memory(queries)
    ids = [m for m in sorted(asked) if m in memories and memories[m].verify][:limit]
    model = cached(generator, use_cache) if generator is not None else None
    out = LabelledSet(model=model.model_id if model else "")
    plan = []
    for memory_id in ids:
        memory, question = memories[memory_id], asked[memory_id]
        wrong = _wrong_memory(palace, question, memory_id, memories)
        plan += [(memory_id, "grounded", question, memory_id), (memory_id, "no-context", question, ""),
                 (memory_id, "wrong-context", question, wrong), (memory_id, "adversarial", question, None)]
    if model is None:
        plan = [p for p in plan if p[1] == "adversarial"]
    for position, (memory_id, condition, question, source) in enumerate(plan, start=1):
        memory = memories[memory_id]
        item = Item(memory_id, condition, question, "", None, context_of=source or "")  # type: ignore[arg-type]
        if condition == "adversarial":
            item.response = adversarial_answer(memory)
        else:
            context = _context_for(memories[source]) if source else ""
            item.response = model.complete(build_prompt(context, question), max_tokens=max_tokens, temperature=0.0)
            item.cached, item.elapsed_s = model.last_cached, model.last_elapsed_s
            out.generated += not item.cached
            out.from_cache += item.cached
            out.generation_s += item.elapsed_s
            out.generation_cost_s += model.last_cost_s
        item.verdict = verify_response(item.response, [{"id": memory_id, "verify": memory.verify}], tokens)
        out.items.append(item)
        if progress:
            progress("answers", position, len(plan))
    out.wall_s = time.perf_counter() - started
    return out


# ---- scoring ---------------------------------------------------------------------------------


def detection_metrics(flagged: list[bool], ungrounded: list[bool]) -> dict[str, float]:
    """Precision, recall, F1 and false-positive rate of flagging, ungrounded being the positive class."""
    tp = sum(f and u for f, u in zip(flagged, ungrounded))
    fp = sum(f and not u for f, u in zip(flagged, ungrounded))
    fn = sum(u and not f for f, u in zip(flagged, ungrounded))
    tn = sum(not f and not u for f, u in zip(flagged, ungrounded))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    fpr = fp / (fp + tn) if fp + tn else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "fpr": fpr, "tp": tp, "fp": fp, "fn": fn, "tn": tn}


def bootstrap_metrics(flagged: list[bool], ungrounded: list[bool], seed: int = 7) -> dict[str, list[float]]:
    """95% percentile bootstrap intervals of precision, recall, F1 and FPR (items resampled)."""
    if not flagged:
        return {}
    rng = np.random.default_rng(seed)
    f, u = np.asarray(flagged), np.asarray(ungrounded)
    samples: dict[str, list[float]] = {"precision": [], "recall": [], "f1": [], "fpr": []}
    for _ in range(BOOTSTRAP):
        pick = rng.integers(0, len(f), len(f))
        m = detection_metrics(list(f[pick]), list(u[pick]))
        for name in samples:
            samples[name].append(m[name])
    return {name: [round(float(np.percentile(v, 2.5)), 3), round(float(np.percentile(v, 97.5)), 3)]
            for name, v in samples.items()}


def _rate(items: list[Item], test) -> float:
    return round(sum(1 for i in items if test(i)) / len(items), 4) if items else 0.0


def behaviour(items: list[Item]) -> dict:
    """What the answers of one condition look like: how often tokens are copied, forged or echoed."""
    return {
        "n": len(items),
        "flagged": _rate(items, lambda i: i.flagged),
        "cites_exact": _rate(items, lambda i: any(c.exact for c in i.verdict.cited)),
        "cites_variant_only": _rate(items, lambda i: i.verdict.cited and not any(c.exact for c in i.verdict.cited)),
        "partial_token": _rate(items, lambda i: bool(i.verdict.partial)),
        "foreign_token": _rate(items, lambda i: bool(i.verdict.foreign)),
        "bracket_citation": _rate(items, lambda i: "[verify" in i.response.lower()),
        "invented_citation": _rate(items, lambda i: bool(i.verdict.unknown_citations)),
        "echoes_context": _rate(items, lambda i: bool(re.search(r"(?im)^\s*(##\s|verify:)", i.response))),
        "empty": _rate(items, lambda i: not i.response.strip()),
        "statuses": dict(Counter(i.verdict.status for i in items)),
    }


def score_set(labelled: LabelledSet) -> dict:
    """Detection metrics with CIs over the whole set and per ungrounded condition, plus behaviour."""
    items = labelled.items
    flagged, ungrounded = [i.flagged for i in items], [i.ungrounded for i in items]
    overall = {k: round(v, 4) if isinstance(v, float) else v for k, v in detection_metrics(flagged, ungrounded).items()}
    overall["ci"] = bootstrap_metrics(flagged, ungrounded)
    grounded = [i for i in items if i.condition == "grounded"]
    per_condition = {}
    for condition in CONDITIONS[1:]:
        subset = grounded + [i for i in items if i.condition == condition]
        if len(subset) > len(grounded):
            m = detection_metrics([i.flagged for i in subset], [i.ungrounded for i in subset])
            per_condition[condition] = {k: round(m[k], 4) for k in ("precision", "recall", "f1", "fpr")}
    # Ablation: exact spelling only (no plural or compound-spacing tolerance).
    strict = [i.flagged or not any(c.exact for c in i.verdict.cited) for i in items]
    strict_m = detection_metrics(strict, ungrounded)
    # What a checker that flags every answer scores on this class balance: the floor to beat.
    flag_all = detection_metrics([True] * len(items), ungrounded)
    return {
        "items": len(items), "ungrounded": sum(ungrounded), "grounded": len(grounded),
        "overall": overall, "with_grounded_vs": per_condition,
        "flag_everything": {k: round(flag_all[k], 4) for k in ("precision", "recall", "f1", "fpr")},
        "exact_only": {k: round(strict_m[k], 4) for k in ("precision", "recall", "f1", "fpr")},
        "behaviour": {c: behaviour([i for i in items if i.condition == c]) for c in CONDITIONS
                      if any(i.condition == c for i in items)},
    }


def run_verify_bench(palace: Palace, generator=None, queries_path: Path | None = None, *,
                     max_tokens: int = BENCH_MAX_TOKENS, use_cache: bool = True, limit: int | None = None,
                     progress: Progress | None = None) -> dict:
    """The whole benchmark: the labelled set scored (abstention is `palace bench ask`'s)."""
    queries = load_queries(queries_path or palace.root / "queries.jsonl")
    labelled = build_set(palace, generator, queries, max_tokens=max_tokens, use_cache=use_cache, limit=limit,
                         progress=progress)
    summary = {"palace": palace.config.name, "model": labelled.model or "(none: adversarial items only)",
               "max_tokens": max_tokens, "generated": labelled.generated, "from_cache": labelled.from_cache,
               "generation_s": round(labelled.generation_s, 1),
               "generation_cost_s": round(labelled.generation_cost_s, 1), "wall_s": round(labelled.wall_s, 1),
               "verify": score_set(labelled),
               "examples": _examples(labelled.items)}
    return summary


def _examples(items: list[Item], per_condition: int = 2) -> list[dict]:
    """A few answers of each condition, for the report."""
    out = []
    for condition in CONDITIONS:
        for item in [i for i in items if i.condition == condition][:per_condition]:
            out.append({"memory": item.memory, "condition": condition, "status": item.verdict.status,
                        "response": item.response[:300]})
    return out


def markdown_report(summary: dict) -> str:
    """The summary as Markdown tables for docs/benchmarks.md."""
    v = summary["verify"]
    o = v["overall"]
    ci = o.get("ci", {})

    def cell(name):
        interval = ci.get(name)
        return f"{o[name]:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else f"{o[name]:.3f}"

    lines = [f"model: {summary['model']}, max_tokens {summary['max_tokens']}; {v['items']} answers "
             f"({v['grounded']} grounded, {v['ungrounded']} ungrounded); generated {summary['generated']} "
             f"in {summary['generation_s']:.0f} s, {summary['from_cache']} from cache; generating all of them "
             f"took {summary['generation_cost_s']:.0f} s", "",
             "| verify | precision | recall | F1 | FPR |", "|---|---|---|---|---|",
             f"| all conditions | {cell('precision')} | {cell('recall')} | {cell('f1')} | {cell('fpr')} |"]
    for condition, m in v["with_grounded_vs"].items():
        lines.append(f"| grounded vs {condition} | {m['precision']:.3f} | {m['recall']:.3f} | {m['f1']:.3f} | {m['fpr']:.3f} |")
    e = v["exact_only"]
    b = v["flag_everything"]
    lines.append(f"| baseline: flag every answer | {b['precision']:.3f} | {b['recall']:.3f} | {b['f1']:.3f} | {b['fpr']:.3f} |")
    lines.append(f"| exact spelling only | {e['precision']:.3f} | {e['recall']:.3f} | {e['f1']:.3f} | {e['fpr']:.3f} |")
    lines += ["", "| condition | n | flagged | cites token exactly | variant only | part of token | foreign token "
              "| writes [verify: ...] | invented citation | echoes context |", "|---" * 10 + "|"]
    for condition, b in v["behaviour"].items():
        lines.append(f"| {condition} | {b['n']} | {b['flagged']:.2f} | {b['cites_exact']:.2f} | "
                     f"{b['cites_variant_only']:.2f} | {b['partial_token']:.2f} | {b['foreign_token']:.2f} | "
                     f"{b['bracket_citation']:.2f} | {b['invented_citation']:.2f} | {b['echoes_context']:.2f} |")
    return "\n".join(lines) + "\n"
