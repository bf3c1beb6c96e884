"""Extractive answers: the sentences of the handed memories that answer a question, each cited with its token.

A sentence's score mixes the share of the question's terms it holds (stemmed, weighted by rarity in the
palace), its position (a note's first sentences define its subject) and its memory's rank among those
handed over; docs/benchmarks.md ("ask") has the measurement behind each. The answer keeps the chosen
sentences in rank, then note, order.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from palace_cli.core.text import question_terms, split_sentences

# Chosen on the labelled questions of both benchmark palaces (`palace bench ask`, docs/benchmarks.md): the
# embedding's cosine per sentence ("dense") gained at most 1.5 points for about a second of embedding per
# question, so it is measured but not used by default.
WEIGHTS = {"terms": 1.0, "position": 0.15, "rank": 0.5}
MAX_SENTENCES = 2


@dataclass
class Sentence:
    """One candidate sentence of a handed memory and how it scored."""

    memory_id: str
    rank: int             # the memory's place among the handed memories, 0 first
    position: int         # the sentence's place in its memory's Content, 0 first
    text: str
    score: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)


def candidates(memories: list) -> list[Sentence]:
    """Every sentence of every handed memory's Content, tagged with the memory's rank and its position."""
    out = []
    for rank, memory in enumerate(memories):
        for position, text in enumerate(split_sentences(memory.content or "")):
            out.append(Sentence(memory.id, rank, position, text))
    return out


def score(sentences: list[Sentence], terms: list[str], analyze, idf: dict[str, float],
          cosines: list[float] | None = None, weights: dict[str, float] | None = None) -> None:
    """Fill each sentence's score and parts (terms, dense, position, rank)."""
    weights = weights or WEIGHTS
    total = sum(idf.get(t, 1.0) for t in terms) or 1.0
    for i, sentence in enumerate(sentences):
        held = {term for term, _ in analyze(sentence.text)}
        parts = {"terms": sum(idf.get(t, 1.0) for t in terms if t in held) / total,
                 "position": 1.0 / (1 + sentence.position), "rank": 1.0 / (1 + sentence.rank)}
        if cosines is not None:
            parts["dense"] = float(cosines[i])
        sentence.parts = parts
        sentence.score = sum(weights.get(name, 0.0) * value for name, value in parts.items())


def choose(sentences: list[Sentence], limit: int = MAX_SENTENCES) -> list[Sentence]:
    """The `limit` best sentences, in memory rank then note order."""
    ranked = sorted(sentences, key=lambda s: (-s.score, s.rank, s.position))
    return sorted(ranked[:limit], key=lambda s: (s.rank, s.position))


def idf_of(document_frequencies, terms: list[str]) -> dict[str, float]:
    """Rarity weights for the terms: log(1 + N / (df + 1)), from the palace's index."""
    if not terms:
        return {}
    n, frequencies = document_frequencies(terms)
    return {t: math.log(1 + n / (frequencies.get(t, 0) + 1)) for t in terms}


def extract(text_index, question: str, memories: list, *, limit: int = MAX_SENTENCES, every: bool = False,
            leave_out: frozenset[str] = frozenset()) -> list[Sentence]:
    """The sentences of `memories` (ranked, best first) that best answer `question`, in answer order.

    Only memories with a verify token are quoted when any has one; `every` takes each one's best sentence
    too (for rule "all"); sentences in `leave_out` are skipped."""
    tokened = [m for m in memories if m.verify] or list(memories)
    pool = [s for s in candidates(tokened) if s.text not in leave_out]
    terms = question_terms(text_index.words, question)
    score(pool, terms, text_index.words, idf_of(text_index.document_frequencies, terms))
    chosen = choose(pool, limit)
    if every:
        for memory in tokened:
            if memory.verify and not any(s.memory_id == memory.id for s in chosen):
                own = [s for s in pool if s.memory_id == memory.id]
                chosen += choose(own, 1)
        chosen.sort(key=lambda s: (s.rank, s.position))
    return chosen


def compose(chosen: list[Sentence], memories: list) -> str:
    """The extractive answer: one sentence a line, each followed by its memory's `[verify: token]`."""
    tokens = {m.id: m.verify for m in memories}
    return "\n".join(s.text + (f" [verify: {tokens[s.memory_id]}]" if tokens.get(s.memory_id) else "")
                     for s in chosen)


def sentence_line(memory, sentence: str) -> int:
    """The line of the note where `sentence` starts (searched after the Content heading), else the heading's."""
    head = " ".join(sentence.split()[:4])
    lines = (memory.body or "").splitlines()
    start = next((i for i, line in enumerate(lines) if re.match(r"^#{2,}\s*content\s*$", line.strip(), re.I)), 0)
    for index in range(start, len(lines)):
        if head and head in " ".join(lines[index].split()):
            return memory.body_line + index
    return memory.content_line or memory.line
