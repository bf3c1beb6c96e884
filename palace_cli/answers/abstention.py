"""When `ask` may say `answered`: the quoted evidence must hold the question's names and numbers.

The key terms of a question are its terms (stemmed, stopwords and question words left out), each weighted
by its rarity in the palace; its names and numbers ("Kyoto", "Q3", "PgBouncer", "LGBTQ") are the ones that
must be there. The evidence is what the answer would quote (extract.py: one to three sentences) read with
its units' frames (a note's subject and domain, a turn's speaker and date). Measured:

- missing: the names and numbers of the question the evidence does not hold;
- confidence: the top hit's cosine to the question (with an embedder), else its BM25 squashed into [0, 1);
- coverage: the rarity-weighted share of the question's terms the evidence holds.

`ask` answers when nothing is missing and the confidence or the coverage reaches its threshold. Chosen by
leaving one corpus out of four (the example palace and the skill corpus with their near misses, the Foam
docs, LoCoMo): docs/answers.md lists every rule tried, with its cross-validated scores and its paired
difference with this one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from palace_cli.core.text import STOPWORDS, question_terms, words
from palace_cli.errors import ConfigError
from palace_cli.palace import Palace
from palace_cli.search.hits import Recall

# Fitted in docs/answers.md ("The rule"): dense on four corpora's questions, each corpus weighing the same
# (balanced accuracy); coverage 0.75 rescues a short note asked in other words (the README's one-note palace)
# and changed no corpus's score but Foam's (+2 questions). lexical is the earlier pooled fit (not refitted:
# every corpus here has an embedder). Override in palace.toml:
# [retrieval] abstain_below = {dense = 0.4, coverage = 0.6, missing = 1}.
ABSTAIN_BELOW = {"dense": 0.26, "lexical": 0.6447, "coverage": 0.75, "missing": 0}
# The measure of a rule tried and not kept (docs/answers.md): below this many units a standard deviation of
# cosines says little.
MIN_UNITS = 30


@dataclass
class KeyTerm:
    """A term of the question, its rarity, and whether it must be in the evidence."""

    term: str       # as the index stems it
    word: str       # as the question writes it
    idf: float
    strong: bool    # a name or a number: it must be in the evidence
    known: bool     # some unit of the palace holds it


@dataclass
class Evidence:
    """How well the evidence `ask` would quote covers a question, and whether that is enough to answer."""

    signal: str                   # dense | lexical: which confidence was measured
    confidence: float
    coverage: float
    threshold: float              # for the confidence
    coverage_threshold: float
    terms: list[str] = field(default_factory=list)     # the question's terms
    covered: list[str] = field(default_factory=list)   # those the evidence holds
    missing: list[str] = field(default_factory=list)   # strong terms (as written) the evidence does not hold
    missing_allowed: int = 0
    nearest: str = ""             # the unit the evidence starts from, `id (path:line)`

    @property
    def sure(self) -> bool:
        """Whether the evidence answers: no more names or numbers missing than allowed, and the confidence or the
        coverage reaches its threshold."""
        return len(self.missing) <= self.missing_allowed and (
            self.confidence >= self.threshold or self.coverage >= self.coverage_threshold)

    def describe(self) -> str:
        """One line: the measurements against their thresholds."""
        lack = f"; missing {', '.join(self.missing)}" if self.missing else ""
        relation = ">=" if self.confidence >= self.threshold else "<"
        covers = ">=" if self.coverage >= self.coverage_threshold else "<"
        return (f"confidence {self.confidence:.2f} ({self.signal}) {relation} {self.threshold:g}, "
                f"coverage {self.coverage:.2f} {covers} {self.coverage_threshold:g}{lack}")

    def as_dict(self) -> dict:
        """The JSON form (in `palace ask --json`)."""
        return {"signal": self.signal, "confidence": round(self.confidence, 4), "threshold": self.threshold,
                "coverage": round(self.coverage, 4), "coverage_threshold": self.coverage_threshold,
                "terms": self.terms, "covered": self.covered, "missing": self.missing,
                "missing_allowed": self.missing_allowed, "nearest": self.nearest}


def signal_of(result: Recall) -> str:
    """Which confidence a recall reports: "dense" (cosine) or "lexical" (squashed BM25)."""
    return "dense" if result.hits and "dense" in result.hits[0].parts else "lexical"


def thresholds(palace: Palace, signal: str) -> tuple[float, float, int]:
    """(confidence threshold for `signal`, coverage threshold, names and numbers allowed missing) from palace.toml
    [retrieval] abstain_below, else the defaults."""
    setting = palace.config.retrieval.get("abstain_below")
    values = {"confidence": ABSTAIN_BELOW[signal], "coverage": ABSTAIN_BELOW["coverage"],
              "missing": ABSTAIN_BELOW["missing"]}
    if isinstance(setting, dict):
        values["confidence"] = setting.get(signal, values["confidence"])
        for name in ("coverage", "missing"):
            values[name] = setting.get(name, values[name])
    elif setting is not None:
        values["confidence"] = setting
    out = []
    for name in ("confidence", "coverage", "missing"):
        try:
            out.append(float(values[name]))
        except (TypeError, ValueError):
            raise ConfigError(f"palace.toml [retrieval] abstain_below: {values[name]!r} is not a number") from None
    return out[0], out[1], int(out[2])


def standout_of(palace: Palace, question: str) -> float | None:
    """How many standard deviations the closest unit's cosine to the question stands above the mean of every
    unit's; None without an embedder or below MIN_UNITS units. Measured by `palace bench ask`, not used by
    `ask`: the rule on it did no better than the confidence, left one corpus out at a time."""
    catalog = palace.index.catalog()
    vector = palace.index.query_vector(question) if catalog.matrix is not None else None
    if vector is None or len(catalog.ids) < MIN_UNITS:
        return None
    cosines = catalog.matrix @ vector
    spread = float(cosines.std())
    return float((cosines.max() - cosines.mean()) / spread) if spread > 0 else None


def key_terms(text_index, question: str) -> list[KeyTerm]:
    """The question's terms with their rarity (Robertson idf over the palace's units), strong ones marked."""
    import math

    pairs = text_index.words(question)
    terms = question_terms(lambda _: pairs, question)
    count, frequencies = text_index.document_frequencies(terms)
    out = []
    for term in terms:
        position, written = next((i, word) for i, (t, word) in enumerate(pairs) if t == term)
        held = frequencies.get(term, 0)
        idf = math.log(1 + (count - max(held, 1) + 0.5) / (max(held, 1) + 0.5))
        # a capital inside the question marks a name (the first word's says nothing); "LGBTQ", "RPO" anywhere
        named = (written[:1].isupper() and position > 0) or (written.isupper() and len(written) > 1)
        out.append(KeyTerm(term, written, idf, named or any(c.isdigit() for c in written), held > 0))
    return out


def weigh(palace: Palace, question: str, result: Recall, quoted: list, threshold: float | None = None) -> Evidence:
    """The evidence for `question` of the sentences `ask` would quote (extract.Sentence, with their units)."""
    signal = signal_of(result)
    limit, coverage_limit, allowed = thresholds(palace, signal)
    if threshold is not None:
        limit = threshold
    text = palace.index.text
    keys = key_terms(text, question)
    held = {term for s in quoted for term, _ in text.words(s.text + "\n" + s.source.frame)}
    total = sum(k.idf for k in keys) or 1.0
    covered = [k for k in keys if k.term in held]
    nearest = f"{quoted[0].source.id} ({quoted[0].source.path}:{quoted[0].source.line})" if quoted else ""
    return Evidence(signal, result.confidence if result.hits else 0.0, sum(k.idf for k in covered) / total,
                    limit, coverage_limit, [k.term for k in keys], [k.term for k in covered],
                    [k.word for k in keys if k.strong and k.term not in held], allowed, nearest)


def needs_of(question: str, evidence: Evidence, analyze) -> list[str]:
    """The question's words (as written) whose terms the evidence does not hold: what a memory would need."""
    covered = set(evidence.covered)
    seen: list[str] = []
    for term, word in analyze(question):
        if term in evidence.terms and term not in covered and word.lower() not in seen:
            seen.append(word.lower())
    return seen or [w for w in words(question) if w not in STOPWORDS][:4]
