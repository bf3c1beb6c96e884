"""One flat ranking of every unit in scope: BM25F, cosine, or both fused; and the relevance measures of its hits.

Hop 1 never filters (docs/ranking-experiments.md, "Routing"): every rule that removed or reordered
candidates by domain lost recall on some corpus, so there is one ranking, flat, in one of three modes.
"""

from __future__ import annotations

import math
from collections import defaultdict

from palace_cli.core.names import Names
from palace_cli.core.text import question_terms
from palace_cli.errors import Ambiguous, UsageError
from palace_cli.index.catalog import Catalog
from palace_cli.index.scope import Scope
from palace_cli.palace import Palace
from palace_cli.search.hits import Hit
from palace_cli.search.relevance import ceiling, measure

RRF_K = 60
CANDIDATES = 100  # each ranker's list that fusion sees
# Fused = 0.5 x min-max(BM25) + 0.5 x min-max(cosine): the best fusion over four corpora
# (docs/ranking-experiments.md, "Fusion"); RRF k=60 was the weakest on three of them.
FUSION_WEIGHTS = {"lexical": 0.5, "dense": 0.5}
NAME_CHARS = 200  # a longer query is a question, never a note's name: not looked up among the names
# A long note cut into sections (index/sections.py), in the fused ranking: each section's cosine is blended with
# its note's own (the whole-note unit, the note's opening), so that one section of a note about something else
# does not pass for the answer; and the note's units lose SECTION_DRAWS x ln(1 + its sections), as a note ranked
# by the best of n units has n draws at a high score where a short note has one. Chosen leaving one vault out
# (scripts/vault_lovo.py, docs/benchmarks.md "Two adopted vaults"); no effect on a palace without sections.
SECTION_CONTEXT = 0.2
SECTION_DRAWS = 0.02
# A conversation turn that says little beyond chit-chat ("Thanks, Nate! That means a lot") is ranked by its window
# of neighbours (index/turns.py), so it scores as high as the turn that holds the answer next to it; its score is
# multiplied by 1 - CHATTER x (1 - substance / SUBSTANTIAL) while it has fewer than SUBSTANTIAL informative words.
# On LoCoMo dev, leaving one conversation out, recall@10 0.754 -> 0.776 and recall@1 0.335 -> 0.375
# (docs/benchmarks.md, "Turns that say little"); one setting for the fused and the lexical ranking.
CHATTER = 0.3
SUBSTANTIAL = 15


def _lexical(palace: Palace, catalog: Catalog, query: str, limit: int, scope: Scope | None = None,
             hidden: frozenset[str] = frozenset()) -> list[tuple[str, float]]:
    weights = palace.config.retrieval.get("field_weights") or None
    if len(hidden) * 2 > len(catalog.ids):  # most are left out (an early --as-of): name the few kept instead
        return palace.index.text.search(query, limit=limit, field_weights=weights, scope=scope,
                                        only=[i for i in catalog.ids if i not in hidden])
    return palace.index.text.search(query, limit=limit, field_weights=weights, scope=scope, exclude=hidden)


def _dense(palace: Palace, catalog: Catalog, query: str, limit: int, scope: Scope | None = None,
           hidden: frozenset[str] = frozenset(), context: float = 0.0) -> list[tuple[str, float]]:
    """The `limit` best units by cosine; with `context`, a section's cosine blended with its note's
    (SECTION_CONTEXT)."""
    if catalog.matrix is None:
        return []
    vector = palace.index.query_vector(query)
    if vector is None:
        return []
    import numpy as np

    scores = catalog.cosines(vector)  # -inf for a unit not embedded yet
    if context and catalog.note_of:
        scores = in_context(catalog, scores, context)
    mask = catalog.mask(scope)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    if hidden:
        rows = [catalog.row_of[i] for i in hidden if i in catalog.row_of]
        scores[rows] = -np.inf
    limit = min(limit, len(scores))
    if limit <= 0:
        return []
    top = np.argpartition(-scores, limit - 1)[:limit]
    top = top[np.argsort(-scores[top], kind="stable")]
    return [(catalog.ids[i], float(scores[i])) for i in top if np.isfinite(scores[i])]


_NOTE_ROWS: dict[int, tuple] = {}  # id(catalog) -> (catalog, its section rows, their notes' rows)


def in_context(catalog: Catalog, scores, context: float):
    """The cosines with each section's blended with its note's: (1 - context) x its own + context x the note's,
    where both were embedded (a section whose note has no vector yet keeps its own)."""
    import numpy as np

    cached = _NOTE_ROWS.get(id(catalog))
    if cached is None or cached[0] is not catalog:
        pairs = [(row, catalog.row_of[catalog.note_of[unit]]) for unit, row in catalog.row_of.items()
                 if catalog.note_of.get(unit) in catalog.row_of]
        cached = (catalog, np.array([a for a, _ in pairs], dtype=np.int64), np.array([b for _, b in pairs], dtype=np.int64))
        _NOTE_ROWS.clear()  # one catalog at a time: a refresh makes a new one
        _NOTE_ROWS[id(catalog)] = cached
    _, sections, notes = cached
    out = np.array(scores, copy=True)
    own, note = out[sections], out[notes]
    both = np.isfinite(own) & np.isfinite(note)
    out[sections[both]] = (1 - context) * own[both] + context * note[both]
    return out


def penalise_draws(catalog: Catalog, ranked: list[tuple[str, float, dict]],
                   share: float) -> list[tuple[str, float, dict]]:
    """The fused ranking with each unit of a note cut into n sections lowered by share x ln(1 + n), re-sorted
    (ties by id); units of other notes and turns keep their score."""
    if not share or not catalog.sections_of:
        return ranked
    out = []
    for unit, score, parts in ranked:
        sections = len(catalog.sections_of.get(catalog.note_of.get(unit, unit), ()))
        out.append((unit, score - share * math.log1p(sections) if sections else score, parts))
    return sorted(out, key=lambda t: (-t[1], t[0]))


def discount_chatter(catalog: Catalog, ranked: list[tuple]) -> list[tuple]:
    """The ranking (tuples of unit, score, ...) with each turn's score lowered by how little it says (CHATTER), re-sorted
    (ties by id); memories and sections keep theirs."""
    if not catalog.substance:
        return ranked
    out = []
    for unit, score, *rest in ranked:
        said = catalog.substance.get(unit)
        if said is not None and said < SUBSTANTIAL:
            score *= 1 - CHATTER * (1 - said / SUBSTANTIAL)
        out.append((unit, score, *rest))
    return sorted(out, key=lambda t: (-t[1], t[0]))


def _bm25(palace: Palace, query: str):
    """A function: unit ids -> their BM25 for the query (what a dense ranking did not score)."""
    weights = palace.config.retrieval.get("field_weights") or None
    return lambda ids: dict(palace.index.text.search(query, limit=len(ids), field_weights=weights, only=ids)) if ids else {}


def _holding(palace: Palace, query: str):
    """A function: unit ids -> those whose units hold every word the query asks about (question_terms)."""
    text = palace.index.text
    terms = question_terms(text.words, query)
    return lambda ids: text.holding_every(terms, ids)


def _cosines(palace: Palace, catalog: Catalog, query: str):
    """A function: unit ids -> their cosine to the query (None without an embedder or vectors)."""
    if catalog.matrix is None or palace.index.query_vector(query) is None:
        return None

    def cosines(ids: list[str]) -> dict[str, float]:
        vector = palace.index.query_vector(query)
        rows = [(i, catalog.row_of[i]) for i in ids if i in catalog.row_of and catalog.has_vector(catalog.row_of[i])]
        if not rows:
            return {}
        values = catalog.matrix[[row for _, row in rows]] @ vector
        return {i: float(v) for (i, _), v in zip(rows, values)}

    return cosines


def fuse_rrf(rankings: dict[str, list[tuple[str, float]]], k: int = RRF_K,
             weights: dict[str, float] | None = None) -> list[tuple[str, float, dict[str, float]]]:
    """Reciprocal rank fusion: sum of weight/(k + rank) over rankings; parts keep each raw score."""
    fused: dict[str, float] = defaultdict(float)
    parts: dict[str, dict[str, float]] = defaultdict(dict)
    for name, ranking in rankings.items():
        weight = (weights or {}).get(name, 1.0)
        for rank, (item, score) in enumerate(ranking, start=1):
            fused[item] += weight / (k + rank)
            parts[item][name] = score
            parts[item][f"{name}_rank"] = rank
    ordered = sorted(fused.items(), key=lambda pair: (-pair[1], pair[0]))
    return [(item, score, parts[item]) for item, score in ordered]


def fuse_minmax(rankings: dict[str, list[tuple[str, float]]], weights: dict[str, float] | None = None,
                unscored: dict[str, frozenset[str]] | None = None) -> list[tuple[str, float, dict[str, float]]]:
    """Weighted sum of min-max normalised scores; a ranking whose scores are all equal gives each of its items 1,
    an item missing from a ranking gets 0 from it; ties by id. Parts keep each raw score and rank.

    `unscored` names, for a ranking, the items it could not score at all (a unit with no vector yet is in no
    cosine list): such an item is not missing from that list but unmeasured by it, so its fused score is the
    weighted mean over the rankings that could score it, as the fusion of those alone would give it."""
    weights = FUSION_WEIGHTS if weights is None else weights
    fused: dict[str, float] = defaultdict(float)
    parts: dict[str, dict[str, float]] = defaultdict(dict)
    for name, ranking in rankings.items():
        if not ranking:
            continue
        weight = weights.get(name, 1.0)
        low = min(score for _, score in ranking)
        span = max(score for _, score in ranking) - low
        for rank, (item, score) in enumerate(ranking, start=1):
            fused[item] += weight * ((score - low) / span if span > 0 else 1.0)
            parts[item][name] = score
            parts[item][f"{name}_rank"] = rank
    if unscored:
        _renormalise(fused, {name: weights.get(name, 1.0) for name, ranking in rankings.items() if ranking},
                     unscored)
    ordered = sorted(fused.items(), key=lambda pair: (-pair[1], pair[0]))
    return [(item, score, parts[item]) for item, score in ordered]


def _renormalise(fused: dict[str, float], weights: dict[str, float], unscored: dict[str, frozenset[str]]) -> None:
    """Scale each fused item some ranking could not score by all the weight over the weight of those that could."""
    total = sum(weights.values())
    lacking: dict[str, float] = defaultdict(float)
    for name, items in unscored.items():
        if name in weights:
            for item in items:
                lacking[item] += weights[name]
    for item, weight in lacking.items():
        if item in fused and total > weight:
            fused[item] *= total / (total - weight)


def rank(palace: Palace, catalog: Catalog, query: str, mode: str, k: int, scope: Scope | None = None,
         hidden: frozenset[str] = frozenset()) -> tuple[list[Hit], str]:
    """The best k units in one mode, within the scope, leaving out the `hidden` ids: (hits, the mode used; fused
    is lexical when there are no vectors)."""
    dense_ok = catalog.matrix is not None and mode != "lexical"
    if mode == "dense" and not dense_ok:
        raise UsageError("dense search needs an embedding model: run `palace models install`")
    if mode == "lexical":
        ranked = [(i, s, {"lexical": s}) for i, s in _lexical(palace, catalog, query, k, scope, hidden)]
        used = "lexical"
    elif mode == "fused" and not dense_ok:  # recall without vectors: BM25, turns that say little discounted
        lexical = _lexical(palace, catalog, query, max(CANDIDATES, k), scope, hidden)
        ranked = discount_chatter(catalog, [(i, s, {"lexical": s}) for i, s in lexical])
        used = "lexical"
    elif mode == "dense":
        ranked = [(i, s, {"dense": s}) for i, s in _dense(palace, catalog, query, k, scope, hidden)]
        used = "dense"
    else:
        ranked = _fused(palace, catalog, query, max(CANDIDATES, k), scope, hidden)[:k]
        used = "fused"
    hits = []
    for unit_id, score, parts in ranked[:k]:
        row = catalog.row_of.get(unit_id)
        if row is None:
            continue
        hits.append(Hit(unit_id, "", catalog.domains[row], catalog.paths[row], 0, score, parts,
                        kind=catalog.kinds[row], time=catalog.times[row]))
    return hits, used


def _fused(palace: Palace, catalog: Catalog, query: str, depth: int, scope: Scope | None,
           hidden: frozenset[str]) -> list[tuple[str, float, dict[str, float]]]:
    """Min-max fusion of BM25 and the cosines (sections in their note's context), each unit's parts keeping its
    own cosine, then the draws of a note cut into sections discounted."""
    dense = _dense(palace, catalog, query, depth, scope, hidden, SECTION_CONTEXT)
    lexical = _lexical(palace, catalog, query, depth, scope, hidden)
    ranked = fuse_minmax({"lexical": lexical, "dense": dense}, unscored={"dense": unembedded(catalog, lexical)})
    if catalog.note_of and dense:
        own = _cosines(palace, catalog, query)([unit for unit, _ in dense if unit in catalog.note_of])
        for unit, _score, parts in ranked:
            if unit in own and "dense" in parts:
                parts["dense"] = own[unit]  # the trim and the confidence read a unit's own cosine
    return discount_chatter(catalog, penalise_draws(catalog, ranked, SECTION_DRAWS))


def unembedded(catalog: Catalog, ranking: list[tuple[str, float]]) -> frozenset[str]:
    """The units of a ranking that have no vector yet (embedded in the background): no cosine list can hold them."""
    if catalog.embedded is None:
        return frozenset()
    rows = ((unit, catalog.row_of.get(unit)) for unit, _ in ranking)
    return frozenset(unit for unit, row in rows if row is not None and not catalog.has_vector(row))


def named_first(hits: list[Hit], names: Names, query: str, catalog: Catalog, scope: Scope | None = None,
                hidden: frozenset[str] = frozenset()) -> list[Hit]:
    """The hits with the note the whole query names first: the note a `[[query]]` link would open (its id, path,
    file name, an alias or its subject, compared as links are; none when the name is ambiguous), when it is in
    scope and valid. A note's name is how a person asks for it, and a long note's own words are diluted over its
    sections (issue 35)."""
    if len(query) > NAME_CHARS or not query.strip():
        return hits
    try:
        found = names.resolve(query)
    except Ambiguous:
        return hits
    row = catalog.row_of.get(found.memory.id) if found else None
    if row is None or found.memory.id in hidden:
        return hits
    named = found.memory.id
    front = [h for h in hits if h.kind != "turn" and ((h.note or h.id) if h.kind == "section" else h.id) == named]
    if not front:
        mask = catalog.mask(scope)
        if mask is not None and not mask[row]:
            return hits
        front = [Hit(named, "", catalog.domains[row], catalog.paths[row], 0, hits[0].score if hits else 1.0,
                     {"named": 1.0}, kind=catalog.kinds[row], time=catalog.times[row])]
    moved = {id(h) for h in front}
    return front + [h for h in hits if id(h) not in moved]


def deeper(catalog: Catalog, depth: int) -> int:
    """How deep to rank so that `depth` notes remain once a note's sections are folded into it (one_per_note)."""
    return depth * 3 + 10 if catalog.note_of else depth


def measure_hits(palace: Palace, catalog: Catalog, query: str, hits: list[Hit], mode: str) -> None:
    """Fill each hit's relevance measures (search/relevance.py): words against the query's ceiling (from BM25
    even when the ranking was dense alone), meaning, and every word where it decides."""
    measure(hits, ceiling(palace.index.text, query), _cosines(palace, catalog, query),
            _bm25(palace, query) if mode == "dense" else None, _holding(palace, query))
