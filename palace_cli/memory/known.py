"""What the palace already holds about each person: the memories distill checks a candidate against.

The score is `search.similar`'s lexical one (the cosine of tf-idf vectors over the search index's own terms,
sublinear tf, smoothed idf from the index's document frequencies), computed here against the memories about
the same person only, kept in memory for the whole run: asking the search index once per candidate cost 0.3 s
each (docs/benchmarks.md, "distill", speed). Memories written during the run are added as they are written.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

from palace_cli.palace import Palace


class Known:
    """The valid memories of a palace by the person they are about, as tf-idf vectors."""

    def __init__(self, palace: Palace, memories):
        self._index = palace.index.text
        self._df: dict[str, int] = {}
        self._total = 0
        self._people: dict[str, list[tuple[str, dict[str, float]]]] = defaultdict(list)
        # Vectors are made for a person when a candidate about them is first checked: most runs ask about few.
        self._waiting: dict[str, list[tuple[str, str]]] = defaultdict(list)
        self._last: tuple = ()  # (text, total, vector) of the last text checked: the memory written next says it
        for memory in memories:
            about = memory.meta.get("about")
            if about and not memory.superseded_by and memory.content:
                self._waiting[str(about)].append((memory.id, memory.content))

    def nearest(self, person: str, text: str) -> tuple[str, float] | None:
        """(id, score) of the memory about `person` closest to `text`, or None when there is none."""
        self._ready(person)
        held = self._people.get(person)
        if not held:
            return None
        vector = self._text_vector(text)
        return max(((memory_id, _cosine(vector, other)) for memory_id, other in held), key=lambda p: p[1])

    def _ready(self, person: str) -> None:
        """The vectors of a person's memories, made once."""
        waiting = self._waiting.pop(person, None)
        if waiting:
            counts = [(memory_id, self._terms(text)) for memory_id, text in waiting]
            self._learn(set().union(*(c for _, c in counts)))
            self._people[person] = [(memory_id, self._vector(c)) for memory_id, c in counts] + self._people[person]

    def add(self, memory_id: str, person: str, text: str) -> None:
        """Remember a memory written during the run."""
        self._ready(person)
        self._people[person].append((memory_id, self._text_vector(text)))

    def drop(self, memory_id: str) -> None:
        """Forget a memory (superseded during the run): what it said holds no longer."""
        for held in [*self._people.values(), *self._waiting.values()]:
            held[:] = [pair for pair in held if pair[0] != memory_id]

    def _text_vector(self, text: str) -> dict[str, float]:
        """The tf-idf vector of a text (the last one's kept: a candidate checked is often written next)."""
        if self._last[:2] == (text, self._total):
            return self._last[2]
        counts = self._terms(text)
        self._learn(set(counts))
        vector = self._vector(counts)
        self._last = (text, self._total, vector)
        return vector

    def _terms(self, text: str) -> Counter:
        return Counter(term for term, _ in self._index.words(text))

    def _learn(self, terms: set[str]) -> None:
        """Document frequencies of terms not seen yet, asked of the index once per run."""
        missing = terms - self._df.keys()
        if missing:
            self._total, found = self._index.document_frequencies(missing)
            self._df.update(found)

    def _vector(self, counts: Counter) -> dict[str, float]:
        """The unit-length tf-idf vector of a text's term counts."""
        vector = {t: (1 + math.log(c)) * (math.log((1 + self._total) / (1 + self._df.get(t, 0))) + 1)
                  for t, c in counts.items()}
        norm = math.sqrt(sum(w * w for w in vector.values()))
        return {t: w / norm for t, w in vector.items()} if norm else {}


def _cosine(a: dict[str, float], b: dict[str, float]) -> float:
    if len(b) < len(a):
        a, b = b, a
    return sum(w * b[t] for t, w in a.items() if t in b)
