"""When `ask` should say "not in this palace": two kinds of evidence about recall's own top hit.

- confidence: the top hit's dense cosine to the question (with an embedder), else its BM25 score
  squashed into [0, 1) as 1 - exp(-bm25 / 10);
- coverage: the share of the question's terms (stemmed, question words left out) that the top memory
  holds in its text or its domain's name, the words hop 1 routes on.

The question is answered when either reaches its threshold. Meaning alone misses a short note asked in
other words (one sentence about sagas, cosine 0.20 to "how do I undo half a distributed transaction?",
which holds three of its four terms); words alone are fooled by neighbouring topics. The thresholds were
calibrated with cross-validation over two palaces' absent-knowledge questions (docs/benchmarks.md, "ask").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from palace_cli.errors import ConfigError
from palace_cli.core.text import question_terms
from palace_cli.palace import Palace
from palace_cli.search.hits import Recall

# Calibrated by `palace bench ask` over example-palace (24 absent, 164 answerable questions) and the
# memory-palace-skill corpus (25 absent, 227 answerable), pooled, coverage fixed at one half (the best
# abstention F1 on all 440; docs/benchmarks.md has the cross-validated figures). Refitted after recall
# ranked flat and BM25 became one field (k1 1.2, b 0.5): dense 0.323 -> 0.345, lexical 0.722 -> 0.6503
# (0.65 would answer an absent question at 0.6501). With bf16 embedder weights (the default where llama.cpp
# has AVX512-BF16) the dense fit moved from 0.3453 to 0.3463: 0.346 decides all 440 questions as 0.345 did
# with q8_0 vectors, and keeps abstaining on an absent question whose bf16 cosine is 0.3457.
# After word pairs joined BM25 (text.py `pairs`): lexical 0.6503 -> 0.6447; dense stays 0.346 (the bf16 fit
# with pairs is 0.3463 again; on q8_0 vectors it would be 0.3295).
# Override in palace.toml: [retrieval] abstain_below = 0.4 (the confidence signal in use) or
# abstain_below = {dense = 0.4, lexical = 0.7, coverage = 0.6}.
ABSTAIN_BELOW = {"dense": 0.346, "lexical": 0.6447, "coverage": 0.5}


@dataclass
class Evidence:
    """How well recall's top hit covers a question, and whether that is enough to answer."""

    signal: str                   # dense | lexical: which confidence was measured
    confidence: float
    coverage: float
    threshold: float              # for the confidence
    coverage_threshold: float
    terms: list[str] = field(default_factory=list)     # the question's terms
    covered: list[str] = field(default_factory=list)   # those the top memory (or its domain) holds

    @property
    def sure(self) -> bool:
        """Whether either kind of evidence reaches its threshold."""
        return self.confidence >= self.threshold or self.coverage >= self.coverage_threshold

    def describe(self) -> str:
        """One line: both measurements against their thresholds."""
        relation = ">=" if self.confidence >= self.threshold else "<"
        covers = ">=" if self.coverage >= self.coverage_threshold else "<"
        return (f"confidence {self.confidence:.2f} ({self.signal}) {relation} {self.threshold:g}, "
                f"coverage {self.coverage:.2f} {covers} {self.coverage_threshold:g}")

    def as_dict(self) -> dict:
        """The JSON form (in `palace ask --json`)."""
        return {"signal": self.signal, "confidence": round(self.confidence, 4), "threshold": self.threshold,
                "coverage": round(self.coverage, 4), "coverage_threshold": self.coverage_threshold,
                "terms": self.terms, "covered": self.covered}


def signal_of(result: Recall) -> str:
    """Which confidence a recall reports: "dense" (cosine) or "lexical" (squashed BM25)."""
    return "dense" if result.hits and "dense" in result.hits[0].parts else "lexical"


def thresholds(palace: Palace, signal: str) -> tuple[float, float]:
    """(confidence threshold for `signal`, coverage threshold) from palace.toml [retrieval] abstain_below,
    else the defaults."""
    setting = palace.config.retrieval.get("abstain_below")
    values = {"confidence": ABSTAIN_BELOW[signal], "coverage": ABSTAIN_BELOW["coverage"]}
    if isinstance(setting, dict):
        values["confidence"] = setting.get(signal, values["confidence"])
        values["coverage"] = setting.get("coverage", values["coverage"])
    elif setting is not None:
        values["confidence"] = setting
    out = []
    for name in ("confidence", "coverage"):
        try:
            out.append(float(values[name]))
        except (TypeError, ValueError):
            raise ConfigError(f"palace.toml [retrieval] abstain_below: {values[name]!r} is not a number") from None
    return out[0], out[1]


def weigh(palace: Palace, question: str, result: Recall, threshold: float | None = None) -> Evidence:
    """The evidence recall's top hit gives for `question`; `threshold` overrides the confidence threshold."""
    signal = signal_of(result)
    limit, coverage_limit = thresholds(palace, signal)
    if threshold is not None:
        limit = threshold
    text = palace.index.text
    terms = question_terms(text.words, question)
    top = result.hits[0].memory if result.hits else None
    covered: list[str] = []
    if top is not None and terms:
        held = set(text.terms(top.search_text())) | set(text.terms(top.domain.replace("-", " ")))
        covered = [t for t in terms if t in held]
    coverage = len(covered) / len(terms) if terms else 0.0
    return Evidence(signal, result.confidence if result.hits else 0.0, coverage, limit, coverage_limit,
                    terms, covered)
