"""Which ranked units are relevant: two readable measures per unit and one rule for memories and turns alike.

Each unit a query ranks gets two measures a person can read (docs/retrieval.md, "Relevance"):

- words: its BM25 score over the BM25 a text would score holding each of the question's words once at
  average length (the sum of their idf; a word the palace never uses counts at the rarest idf), capped
  at 1. 0.5: about half the question's vocabulary, weighted by rarity; 1: all of it.
- meaning: the cosine of its embedding to the question's (all-MiniLM-L6-v2): unrelated texts sit
  around 0.1-0.3, texts on the question's topic from about 0.4.

A unit is *about* the question when it holds every one of the question's words, or its words reach
WORDS_FLOOR, or its meaning reaches MEANING_FLOOR: a query whose best unit is not about it gets nothing
("no results"). Holding every word counts whatever the field and the length (a rare word only in a long
note's own sections scores a tenth of the Content's BM25, and the note was still asked for by name). Recall hands a unit (memory,
turn or section) only when it is about the question, its rank score is at least RELATIVE of the best
hit's, and, after the first, its words reach NEAR_WORDS or its meaning NEAR_MEANING (WORDLESS_MEANING
when it holds none of the question's words). Fitted by cross-validation over three corpora
(docs/ranking-experiments.md, section 7).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from palace_cli.core.text import question_terms

if TYPE_CHECKING:
    from palace_cli.search.hits import Hit

# A unit is about the question when it holds this share of its words or is this close in meaning. On the
# benchmark corpora no answerable question's best unit falls below both; 24 of 60 nonsense questions (30 in two
# palaces: "xylophone quantum entanglement", "platypus venom spurs") do, and none of them reaches 0.35 in
# meaning (their best cosine is 0.13-0.33); the others share a word such as "world" or "capital" with a note
# or a turn (docs/ranking-experiments.md, section 7).
WORDS_FLOOR = 0.1
MEANING_FLOOR = 0.35
# Recall hands a unit whose rank score is at least this share of the best hit's (in hybrid mode the min-max
# fusion, which weighs both signals at once) ...
RELATIVE = 0.4
# ... and which, after the first, holds this share of the question's words or is this close in meaning.
# Fitted by cross-validation over example-palace beside a LoCoMo conversation, the skill corpus and LoCoMo
# dev: the smallest context whose recall stays within 0.005 of the earlier rule on the corpora fitted on.
NEAR_WORDS = 0.4
NEAR_MEANING = 0.3
# A later unit that holds no word of the question at all is handed only when its meaning alone is this close:
# MiniLM finds "We can do this!" as close to "when can we deploy?" (0.37) as the deploy note (0.35). From 0.45
# to 0.55 it changed no corpus's recall by more than 0.002 and handed fewer units (section 7).
WORDLESS_MEANING = 0.5


@dataclass
class Omitted:
    """A ranked unit recall did not hand over, and why."""

    id: str
    kind: str
    reason: str

    def as_dict(self) -> dict:
        return {"id": self.id, "kind": self.kind, "reason": self.reason}


def ceiling(text_index, query: str) -> float:
    """The BM25 a unit would score holding each of the query's terms once at average length: the sum of their
    Robertson idf, question words left out; a term no unit holds counts as the rarest a unit can hold (one
    unit holds it): it is part of what was asked."""
    terms = question_terms(text_index.words, query)
    if not terms:
        return 0.0
    count, frequencies = text_index.document_frequencies(terms)
    return sum(math.log(1 + (count - held + 0.5) / (held + 0.5))
               for held in (max(frequencies.get(t, 0), 1) for t in terms))


def measure(hits: list[Hit], top: float, cosines=None, bm25=None, holding=None) -> None:
    """Fill each hit's `words` from its BM25 and the query's ceiling `top` (0 when it holds none): its BM25 part,
    or `bm25(ids)` (id -> BM25) for a ranking that scored no words (dense alone), so that a unit's words do not
    depend on the mode; its `meaning` from `cosines(ids)` (id -> cosine; None without an embedder); and, for a
    unit that holds some of the question's words but is under both floors, its `every_word` from
    `holding(ids)` (the ids whose units hold every word of the query). Only there can holding every word
    change what the unit is; asking it of every unit was half of a recall's time."""
    scored = bm25([h.id for h in hits]) if bm25 is not None else None
    for hit in hits:
        score = scored.get(hit.id, 0.0) if scored is not None else hit.parts.get("lexical", 0.0)
        hit.words = min(1.0, score / top) if top > 0 and score > 0 else 0.0
    if cosines is not None:
        found = cosines([h.id for h in hits])
        for hit in hits:
            hit.meaning = found.get(hit.id)
    weak = [h for h in hits if 0 < (h.words or 0.0) < WORDS_FLOOR and (h.meaning or 0.0) < MEANING_FLOOR]
    if holding is not None and weak:
        held = holding([h.id for h in weak])
        for hit in weak:
            hit.every_word = hit.id in held


def meaning(hit: Hit) -> float | None:
    """The hit's cosine to the question, or None without an embedder."""
    return hit.meaning


def about(hit: Hit) -> bool:
    """Whether a unit is about the question at all: enough of its words, or close enough in meaning."""
    close = meaning(hit)
    return hit.every_word or (hit.words or 0.0) >= WORDS_FLOOR or (close is not None and close >= MEANING_FLOOR)


def describe(hit: Hit) -> str:
    """`words 0.42, meaning 0.31` (each left out when it was not measured); `every word` when holding every word
    of the question is what makes the unit about it (its words under WORDS_FLOOR)."""
    close = meaning(hit)
    said = [f"words {hit.words:.2f}"] if hit.words is not None else []
    said += ["every word"] if hit.every_word and (hit.words or 0.0) < WORDS_FLOOR else []  # when it is why
    return ", ".join(said + ([f"meaning {close:.2f}"] if close is not None else []))


def why_not_about(hit: Hit) -> str:
    """The reason a unit is not about the question, with each measure against its floor."""
    close = meaning(hit)
    said = [f"words {hit.words:.3f} < {WORDS_FLOOR:g}"] if hit.words is not None else []
    return " and ".join(said + ([f"meaning {close:.3f} < {MEANING_FLOOR:g}"] if close is not None else []))


def _refused(hit: Hit, best: Hit, first: bool) -> str:
    """Why a unit fails the relevance rule against the best hit, or "" when it passes."""
    if not about(hit):
        return f"not about the question ({why_not_about(hit)})"
    if first:
        return ""
    if best.score > 0 and hit.score < RELATIVE * best.score:
        return f"score {hit.score:.3f} < {RELATIVE:g} x the best hit's {best.score:.3f}"
    close = meaning(hit)
    if (hit.words or 0.0) < NEAR_WORDS and (close is None or close < NEAR_MEANING):
        near = f" and meaning {close:.3f} < {NEAR_MEANING:g}" if close is not None else ""
        return f"far from the question (words {hit.words or 0.0:.3f} < {NEAR_WORDS:g}{near})"
    if hit.words == 0 and (close is None or close < WORDLESS_MEANING):
        return f"holds no word of the question, and meaning {close or 0.0:.3f} < {WORDLESS_MEANING:g}"
    return ""


def judge(ranked: list[Hit], caps: dict[str, int], close=None) -> tuple[list[Hit], list[Omitted]]:
    """The units to offer, in rank order, and those left out with the reason: each unit by the relevance rule
    against the best hit, each kind up to its cap (memories -k, turns --turns; a section counts as a
    memory). With `close(hit, best)` (the trim), memories after the first that is not close to the best hit
    are left out too: memories are long, and the trim was fitted to hand fewer of them (issue 16)."""
    offered: list[Hit] = []
    omitted: list[Omitted] = []
    counts: dict[str, int] = {}
    best = ranked[0] if ranked else None
    trimmed = False
    for position, hit in enumerate(ranked):
        kind = "turn" if hit.kind == "turn" else "memory"
        reason = _refused(hit, best, position == 0)
        if not reason and kind == "memory" and close is not None and position > 0:
            trimmed = trimmed or not close(hit, best)
            if trimmed:
                reason = "not close to the best hit (the memory trim: BM25 under 0.6 of its, cosine over 0.06 below)"
        if not reason and counts.get(kind, 0) >= caps.get(kind, 0):
            reason = f"over the cap of {caps.get(kind, 0)} {'turns' if kind == 'turn' else 'memories'}"
        if reason:
            omitted.append(Omitted(hit.id, hit.kind, reason))
            continue
        counts[kind] = counts.get(kind, 0) + 1
        offered.append(hit)
    return offered, omitted
