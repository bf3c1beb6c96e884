"""Extractive answers: the sentences of what recall handed over (memories, turns, sections) that answer a question,
each quoted and cited: `"sentence" [verify: token]` for a memory with a token, `"sentence" [turn ID]` for a turn,
`"sentence" [note ID]` for a note without a token.

A sentence's score mixes the share of the question's terms it holds (stemmed, weighted by rarity in the palace),
its position (a note's first sentences define its subject) and its unit's rank among those handed over
(docs/benchmarks.md, "ask"). The answer is the best sentence, the next best when it scores close to it (the
second sentence often says what the first only names), and then, while the question's terms are not all held,
the sentence that holds the most of the missing ones: one to three sentences. They keep rank, then note, order.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from palace_cli.core.readable import readable
from palace_cli.core.text import question_terms, split_sentences
from palace_cli.index.turns import date_words

# Chosen on the labelled questions of both benchmark palaces (`palace bench ask`, docs/benchmarks.md): the
# embedding's cosine per sentence ("dense") gained at most 1.5 points for about a second of embedding per
# question, so it is measured but not used by default.
WEIGHTS = {"terms": 1.0, "position": 0.15, "rank": 0.5}
MAX_SENTENCES = 3
# The second-best sentence joins the best when it scores at least this share of it (docs/answers.md).
SECOND = 0.5


@dataclass
class Source:
    """A handed unit whose words can be quoted: a memory (or a note), a turn, or a section of a long note."""

    id: str
    kind: str                 # memory | turn | section
    rank: int                 # its place among the units handed over, 0 first
    text: str                 # what is quoted from
    frame: str                # what frames a quote from it: a note's subject, a turn's speaker and date
    path: str
    line: int                 # the unit's line: a note's first, a turn's header
    token: str = ""           # a memory's verify token
    memory: object = None     # the Memory, for the line of a quoted sentence
    speaker: str = ""         # a turn's speaker

    @property
    def citation(self) -> str:
        """How a quote from this unit is cited in an answer."""
        if self.token:
            return f"[verify: {self.token}]"
        return f"[{'turn' if self.kind == 'turn' else self.kind if self.kind == 'section' else 'note'} {self.id}]"


@dataclass
class Sentence:
    """One candidate sentence of a handed unit and how it scored."""

    source: Source
    position: int             # the sentence's place in its unit's text, 0 first
    text: str
    score: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)

    @property
    def rank(self) -> int:
        return self.source.rank

    @property
    def memory_id(self) -> str:
        """The id of the unit it is quoted from (kept for older callers)."""
        return self.source.id


def memory_source(memory, rank: int = 0, kind: str = "memory") -> Source:
    """A memory (or a section) as a quotable unit: its Content (a note without one: its body) under its subject and
    its domain's name."""
    frame = " ".join(part for part in (memory.subject, (memory.domain or "").replace("-", " ")) if part)
    return Source(memory.id, kind, rank, memory.content or memory.body or "", frame, memory.path,
                  memory.line, memory.verify or "", memory)


def sources_of(hits: list) -> list[Source]:
    """The quotable units among recall's handed hits, in rank order."""
    out: list[Source] = []
    for hit in hits:
        if hit.turn is not None:
            turn = hit.turn
            out.append(Source(hit.id, "turn", len(out), turn.text,
                              f"{turn.speaker} {date_words(turn.time or turn.started)}".strip(), hit.path, hit.line,
                              speaker=turn.speaker))
        elif hit.memory is not None:
            out.append(memory_source(hit.memory, len(out), "section" if hit.kind == "section" else "memory"))
    return out


# A web address, bare or in <angle brackets>, or a Markdown link's target: words a reader cannot quote as an answer.
ADDRESS = re.compile(r"<?\b(?:https?|ftp)://[^\s>)]*>?|\]\([^)\s]*\)")
WORD = re.compile(r"[^\W_]")  # a letter or a digit


def says_something(sentence: str) -> bool:
    """Whether a sentence holds a word outside its web addresses (a line that is only a link answers nothing)."""
    return WORD.search(ADDRESS.sub(" ", sentence)) is not None


# A code fence's own line (```python, ~~~): a boundary no quote runs across, and never part of one.
FENCE_LINE = re.compile(r"^[ \t]*(?:`{3,}|~{3,}).*$", re.MULTILINE)


def candidates(sources: list[Source]) -> list[Sentence]:
    """Every sentence of every source's readable text (core/readable.py: links as their labels, no callout
    markers or block ids, a table row by row) that says something in words, tagged with its position in the
    unit; the text inside a code fence is split apart from the prose around it."""
    out = []
    for source in sources:
        sentences = [text for piece in FENCE_LINE.split(readable(source.text)) for text in split_sentences(piece)]
        out += [Sentence(source, position, text) for position, text in enumerate(sentences) if says_something(text)]
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


def choose(sentences: list[Sentence], limit: int = 2) -> list[Sentence]:
    """The `limit` best sentences, in unit rank then note order (a fixed number: benchmarks compare with it)."""
    ranked = sorted(sentences, key=lambda s: (-s.score, s.rank, s.position))
    return sorted(ranked[:limit], key=lambda s: (s.rank, s.position))


def cover(sentences: list[Sentence], terms: list[str], analyze, idf: dict[str, float],
          limit: int = MAX_SENTENCES) -> list[Sentence]:
    """One to `limit` sentences: the best, the second best when it scores SECOND of the best, then while the
    question's terms are not all held (by the sentences or their units' frames) the sentence holding the
    most rarity of the missing ones. In unit rank, then note, order."""
    if not sentences:
        return []
    ranked = sorted(sentences, key=lambda s: (-s.score, s.rank, s.position))
    chosen = [ranked[0]]
    if len(ranked) > 1 and ranked[1].score >= SECOND * ranked[0].score:
        chosen.append(ranked[1])
    wanted = set(terms)
    held = _held(chosen, analyze) & wanted
    while len(chosen) < limit and held != wanted:
        def gain(sentence: Sentence) -> float:
            return sum(idf.get(t, 1.0) for t in (_held([sentence], analyze) & wanted) - held)
        best = max((s for s in ranked if s not in chosen), key=gain, default=None)
        if best is None or gain(best) <= 0:
            break
        chosen.append(best)
        held |= _held([best], analyze) & wanted
    return sorted(chosen, key=lambda s: (s.rank, s.position))


def _held(sentences: list[Sentence], analyze) -> set[str]:
    """The terms the sentences hold, with their units' frames (a quote is read under its note's subject, or its
    speaker's name)."""
    return {term for s in sentences for term, _ in analyze(s.text + "\n" + s.source.frame)}


def idf_of(document_frequencies, terms: list[str]) -> dict[str, float]:
    """Rarity weights for the terms: log(1 + N / (df + 1)), from the palace's index."""
    if not terms:
        return {}
    n, frequencies = document_frequencies(terms)
    return {t: math.log(1 + n / (frequencies.get(t, 0) + 1)) for t in terms}


def extract(text_index, question: str, sources: list[Source], *, every: bool = False,
            leave_out: frozenset[str] = frozenset()) -> list[Sentence]:
    """The sentences of `sources` (ranked, best first) that answer `question`, in answer order.

    Memories with a verify token are quoted before those without (a token is what verify checks) when any
    has one; turns and sections are always candidates. `every` adds each tokened memory's best sentence
    (rule "all"); sentences in `leave_out` are skipped."""
    tokened = any(s.token for s in sources)
    usable = [s for s in sources if s.token or s.kind != "memory" or not tokened]
    pool = [s for s in candidates(usable) if s.text not in leave_out]
    terms = question_terms(text_index.words, question)
    idf = idf_of(text_index.document_frequencies, terms)
    score(pool, terms, text_index.words, idf)
    chosen = cover(pool, terms, text_index.words, idf)
    if every:
        for source in usable:
            if source.token and not any(s.source is source for s in chosen):
                chosen += choose([s for s in pool if s.source is source], 1)
        chosen.sort(key=lambda s: (s.rank, s.position))
    return chosen


def compose(chosen: list[Sentence]) -> str:
    """The extractive answer: one quoted sentence a line, each followed by its unit's citation."""
    return "\n".join(f'"{s.text}" {s.source.citation}' for s in chosen)


def sentence_line(source: Source, sentence: str) -> int:
    """The line of the file where `sentence` starts: in a note, searched in its readable text (line for line
    the body's) after its Content heading (else the heading's line); a turn's header line."""
    memory = source.memory
    if memory is None:
        return source.line
    head = " ".join(sentence.split()[:4])
    lines = readable(memory.body or "").split("\n")
    start = next((i for i, line in enumerate(lines) if re.match(r"^#{2,}\s*content\s*$", line.strip(), re.I)), 0)
    for index in range(start, len(lines)):
        if head and head in " ".join(lines[index].split()):
            return memory.body_line + index
    return memory.content_line or memory.line
