"""Similar memories: the nearest neighbours of a memory or of a text, with a score and the words they share.

`palace add` names the close ones so that a duplicate is noticed by a person, who can supersede or link;
nothing is ever merged. No threshold separates a rewrite from a close neighbour reliably (measured in
docs/benchmarks.md, "Similar-note warnings"), so the threshold decides only what is worth a warning.

The score is lexical by default: the cosine of the two texts' tf-idf vectors over the search index's terms
(sublinear tf, smoothed idf from the index's document frequencies), which, unlike a BM25 score, is
comparable from one query to the next; candidates come from BM25 over the whole text. It told rewrites
from neighbours far better than the dense cosine of all-MiniLM-L6-v2 on both corpora measured (AUC 0.99
and 0.91 against 0.74 and 0.78), so dense is only used when asked for (`method="dense"`).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from palace_cli.errors import UsageError
from palace_cli.index.scope import Scope
from palace_cli.core.notes import Memory
from palace_cli.palace import Palace

METHODS = ("dense", "lexical")
# Score at or above which `add` warns. Measured on the example palace and the memory-palace-skill corpus
# (`palace bench similar`, docs/benchmarks.md): see there for what each catches and what it wrongly flags.
THRESHOLDS = {"dense": 0.65, "lexical": 0.3}
CANDIDATES = 30
SHARED_SHOWN = 5


@dataclass
class Neighbour:
    """A memory near the one asked about: how near, by which method, and the rarest words both use."""

    id: str
    subject: str
    domain: str
    path: str
    line: int
    score: float
    shared: list[str] = field(default_factory=list)
    close: bool = False         # at or above the warning threshold
    superseded: bool = False    # not valid now (shown only with include_superseded)

    @property
    def why(self) -> str:
        """One line: the score and the words both texts use, rarest first."""
        words = f"; both mention {', '.join(self.shared)}" if self.shared else ""
        return f"{self.score:.2f}{words}"

    def as_dict(self) -> dict:
        return {"id": self.id, "subject": self.subject, "domain": self.domain, "path": self.path, "line": self.line,
                "score": round(self.score, 4), "close": self.close, "superseded": self.superseded,
                "shared": self.shared, "why": self.why}


@dataclass
class Similar:
    """The neighbours of one memory (or text), best first, and the threshold that makes one close."""

    source: str                 # the memory id, or "" for a text
    method: str                 # dense or lexical
    threshold: float
    neighbours: list[Neighbour] = field(default_factory=list)

    @property
    def close(self) -> list[Neighbour]:
        """The neighbours at or above the threshold."""
        return [n for n in self.neighbours if n.close]

    def as_dict(self) -> dict:
        """JSON-ready form (`palace similar --json`)."""
        return {"source": self.source or None, "method": self.method, "threshold": self.threshold,
                "neighbours": [n.as_dict() for n in self.neighbours]}


def threshold(palace: Palace, method: str) -> float:
    """The warning threshold for a method: palace.toml [similar] dense/lexical, else the measured default."""
    setting = palace.config.raw.get("similar", {})
    value = setting.get(method) if isinstance(setting, dict) else None
    try:
        return float(value) if value is not None else THRESHOLDS[method]
    except (TypeError, ValueError):
        raise UsageError(f"palace.toml [similar] {method}: {value!r} is not a number") from None


def _weights(palace: Palace, texts: list[str]) -> tuple[list[Counter], dict[str, str], dict[str, float]]:
    """Term counts of each text, a written form of each term, and every term's smoothed idf."""
    text_index = palace.index.text
    counts, surface = [], {}
    for text in texts:
        pairs = text_index.words(text)
        counts.append(Counter(term for term, _ in pairs))
        for term, word in pairs:
            surface.setdefault(term, word.lower())
    total, frequencies = text_index.document_frequencies(set().union(*counts) if counts else set())
    idf = {t: math.log((1 + total) / (1 + df)) + 1 for t, df in frequencies.items()}
    return counts, surface, idf


def _vector(counts: Counter, idf: dict[str, float]) -> dict[str, float]:
    return {t: (1 + math.log(c)) * idf[t] for t, c in counts.items()}


def _cosine(a: dict[str, float], b: dict[str, float]) -> float:
    dot = sum(w * b[t] for t, w in a.items() if t in b)
    norm = math.sqrt(sum(w * w for w in a.values())) * math.sqrt(sum(w * w for w in b.values()))
    return dot / norm if norm else 0.0


def _shared(a: dict[str, float], b: dict[str, float], surface: dict[str, str]) -> list[str]:
    common = sorted((t for t in a if t in b), key=lambda t: (-a[t] * b[t], t))  # what the cosine sums, largest first
    return [surface[t] for t in common[:SHARED_SHOWN]]


def similar(palace: Palace, ref: str | None = None, text: str | None = None, k: int = 5,
            include_superseded: bool = False, exclude=(), method: str | None = None,
            do_refresh: bool = True) -> Similar:
    """The k memories nearest to a memory (by reference) or to a text, best first, each with its score and
    shared words; those at or above the method's threshold are `close`. Lexical unless method="dense".
    `do_refresh=False` when the caller refreshed already (distill checks many texts between its writes)."""
    _check(ref, text, k, method)
    if do_refresh:
        palace.refresh()
    memory = palace.memory(ref, refresh=False) if ref is not None else None
    source_text = memory.search_text() if memory else " ".join((text or "").split())
    if not source_text:
        raise UsageError("the text is empty")
    catalog = palace.index.catalog()
    now_hidden = catalog.hidden()
    left_out = set(() if include_superseded else now_hidden) | set(exclude) | ({memory.id} if memory else set())
    method = method or "lexical"
    scored = _dense_scores(palace, catalog, memory, source_text, left_out) if method == "dense" else None
    candidates = scored if scored is not None else _lexical_candidates(palace, source_text, left_out)
    paths = [catalog.paths[catalog.row_of[i]] for i, _ in candidates if i in catalog.row_of]
    memories = {m.id: m for m in palace.index.store.memories(paths)}
    source_vector, vectors, surface = _tf_idf(palace, source_text, [i for i, _ in candidates if i in memories],
                                              memories)
    if scored is None:  # lexical: the tf-idf cosine is the score
        candidates = sorted(((i, _cosine(source_vector, v)) for i, v in vectors.items()), key=lambda p: (-p[1], p[0]))
    limit = threshold(palace, method)
    result = Similar(memory.id if memory else "", method, limit)
    for memory_id, score in candidates[:k]:
        found = memories.get(memory_id)
        if found is None:
            continue
        result.neighbours.append(Neighbour(
            found.id, found.subject, found.domain, found.path, found.line, float(score),
            shared=_shared(source_vector, vectors[memory_id], surface), close=score >= limit,
            superseded=memory_id in now_hidden))
    return result


def _check(ref: str | None, text: str | None, k: int, method: str | None) -> None:
    """Refuse what similar cannot answer: both or neither of a memory and a text, an unknown method, k under 1."""
    if (ref is None) == (text is None):
        raise UsageError("give a memory or a text (one of them)")
    if method is not None and method not in METHODS:
        raise UsageError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    if k < 1:
        raise UsageError("k must be at least 1")


def _tf_idf(palace: Palace, source_text: str, ids: list[str], memories: dict[str, Memory]):
    """(the source's tf-idf vector, id -> each candidate's, term -> the word as written) over the source and the
    candidates `ids`, in that order."""
    counts, surface, idf = _weights(palace, [source_text] + [memories[i].search_text() for i in ids])
    return _vector(counts[0], idf), {i: _vector(counts[n], idf) for n, i in enumerate(ids, 1)}, surface


def _dense_scores(palace: Palace, catalog, memory: Memory | None, text: str, left_out: set[str]):
    """(id, cosine) of the CANDIDATES nearest memories by the stored vectors; UsageError without them."""
    import numpy as np

    stored = memory is not None and memory.id in catalog.row_of and catalog.has_vector(catalog.row_of[memory.id])
    if catalog.matrix is None or not (stored or palace.index.dense().embedder is not None):
        raise UsageError("dense similarity needs an embedding model: run `palace models install`")

    row = catalog.row_of.get(memory.id) if memory else None
    vector = catalog.matrix[row] if row is not None and catalog.has_vector(row) else palace.index.query_vector(text)
    scores = catalog.cosines(vector)
    rows = [catalog.row_of[i] for i in left_out if i in catalog.row_of]
    scores[rows] = -np.inf
    limit = min(CANDIDATES, len(scores))
    top = np.argpartition(-scores, limit - 1)[:limit] if limit else []
    ordered = sorted(((catalog.ids[i], float(scores[i])) for i in top if np.isfinite(scores[i])),
                     key=lambda p: (-p[1], p[0]))
    return ordered


def _lexical_candidates(palace: Palace, text: str, left_out: set[str]):
    """(id, BM25) of the CANDIDATES best lexical matches of the whole text: the pool the cosine re-scores."""
    weights = palace.config.retrieval.get("field_weights") or None
    # Memories only: in a palace of imported conversations, turns would fill the pool and hide every memory.
    return palace.index.text.search(text, limit=CANDIDATES, field_weights=weights, exclude=left_out,
                                    scope=Scope(kind="memory"))


def warning_lines(result: Similar, new_id: str) -> list[str]:
    """What `add` says about the close neighbours of a new memory: who, how close, and what to do."""
    lines = []
    for neighbour in result.close:
        lines.append(f"similar: {neighbour.id} ({neighbour.subject}) {neighbour.why}")
    if lines:
        first = result.close[0].id
        lines.append(f"if {new_id} replaces {first}: `palace supersede {first} {new_id}`; if they are related, "
                     f"link them; if it is a duplicate, remove one (nothing was merged)")
    return lines
