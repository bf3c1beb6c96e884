"""Per-query metrics, means with bootstrap intervals, and paired comparisons of two variants."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .corpora import Corpus, tokens
from .rank import Ranked, Runner, Variant, context_size, trimmed
from .routing import routed

CUTOFFS = (1, 3, 5, 10)
LOCOMO_CUTOFFS = (1, 5, 10, 25, 50)
TOKEN_BUDGETS = (450, 900, 1800)
BOOTSTRAP = 1000


def query_metrics(corpus: Corpus, ranked: Ranked, expected: tuple[str, ...], v: Variant | None = None) -> dict[str, float]:
    """recall@k (share of expected items covered by the top k units), MRR, nDCG@10, context, route hit."""
    wanted = set(expected)
    docs = corpus.docs
    covered: set[str] = set()
    out: dict[str, float] = {}
    cutoffs = LOCOMO_CUTOFFS if corpus.name == "locomo" else CUTOFFS
    relevant = [bool(wanted & set(docs[r].covers)) for r in ranked.rows]
    for position, row in enumerate(ranked.rows, start=1):
        covered |= wanted & set(docs[row].covers)
        if position in cutoffs:
            out[f"recall@{position}"] = len(covered) / len(wanted)
    for k in cutoffs:
        out.setdefault(f"recall@{k}", len(covered) / len(wanted))
    first = next((i for i, rel in enumerate(relevant, start=1) if rel), None)
    out["mrr"] = 1 / first if first else 0.0
    dcg = sum(1 / math.log2(i + 2) for i, rel in enumerate(relevant[:10]) if rel)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(wanted), 10)))
    out["ndcg@10"] = dcg / ideal
    if corpus.name == "locomo":
        out["context"] = float(context_size(corpus, ranked.rows[:10]))
        for budget in TOKEN_BUDGETS:  # recall at equal context: units in rank order while they fit
            used, held = 0, set()
            for row in ranked.rows:
                used += tokens(docs[row].context)
                if used > budget:
                    break
                held |= wanted & set(docs[row].covers)
            out[f"recall@{budget}tok"] = len(held) / len(wanted)
    else:
        handed = trimmed(ranked, 3, v.trim_lex, v.trim_dense) if v else trimmed(ranked)
        out["context"] = float(context_size(corpus, handed))
        out["context_recall"] = float(any(wanted & set(docs[r].covers) for r in handed))
    if ranked.routed is not None:
        domains = {docs[corpus.row_of[e]].domain for e in expected if e in corpus.row_of}
        out["route_hit"] = float(bool(domains & ranked.routed))
        out["fallback"] = float(ranked.fallback)
    return out


@dataclass
class Result:
    """A variant's per-query metrics on one corpus."""

    corpus: str
    variant: Variant
    per_query: list[dict[str, float]]
    kinds: list[str]

    def mean(self, metric: str, kind: str | None = None) -> float:
        values = self.values(metric, kind)
        return float(np.mean(values)) if len(values) else float("nan")

    def values(self, metric: str, kind: str | None = None) -> np.ndarray:
        return np.array([m[metric] for m, k in zip(self.per_query, self.kinds)
                         if metric in m and (kind is None or k == kind)], dtype=np.float64)


def run(runner: Runner, variant: Variant) -> Result:
    """Every query of the runner's corpus under one variant."""
    corpus = runner.corpus
    per_query = [query_metrics(corpus, routed(runner, variant, qi), q.expected, variant)
                 for qi, q in enumerate(corpus.queries)]
    return Result(corpus.name, variant, per_query, [q.kind for q in corpus.queries])


def bootstrap_ci(values: np.ndarray, seed: int = 7) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean."""
    if len(values) == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(BOOTSTRAP, len(values)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


@dataclass
class Paired:
    """A variant against a baseline on one metric: mean delta, its 95% paired bootstrap interval, wins and losses."""

    delta: float
    low: float
    high: float
    wins: int
    losses: int

    def cell(self) -> str:
        mark = "**" if self.low > 0 or self.high < 0 else ""
        return f"{mark}{self.delta:+.3f}{mark} [{self.low:+.3f}, {self.high:+.3f}] {self.wins}/{self.losses}"


def paired(base: Result, other: Result, metric: str) -> Paired:
    """Per-query differences other - base (same queries, same order)."""
    a, b = base.values(metric), other.values(metric)
    diff = b - a
    low, high = bootstrap_ci(diff)
    return Paired(float(diff.mean()), low, high, int((diff > 1e-12).sum()), int((diff < -1e-12).sum()))
