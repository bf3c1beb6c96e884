"""Retrieval: one ranking (lexical, dense, or both fused), the route it implies, and the context budget.

Hop 1 never filters (docs/ranking-experiments.md, "Routing"): every rule that removed or reordered
candidates by domain lost recall on some corpus. recall ranks flat and reports as its route the
domains of the memories it hands over.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from datetime import datetime

from palace_cli.core.dates import format_moment, parse_moment
from palace_cli.core.text import one_line, question_terms
from palace_cli.errors import UsageError
from palace_cli.index.catalog import Catalog
from palace_cli.index.scope import Scope, make_scope
from palace_cli.palace import Palace
from palace_cli.search.context import assemble_context
from palace_cli.search.hits import DomainRoute, Hit, Recall, SearchResult, Turn, attach_section, one_per_note
from palace_cli.search.profiles import BYTES_PER_TOKEN, PROFILES, Profile
from palace_cli.search.relevance import Omitted, about, ceiling, judge, measure, why_not_about
from palace_cli.search.sessions import reorder, route_sessions

MODES = ("lexical", "dense", "hybrid")
RRF_K = 60
CANDIDATES = 100  # each ranker's list that fusion sees
# Hybrid = 0.5 x min-max(BM25) + 0.5 x min-max(cosine): the best fusion over four corpora
# (docs/ranking-experiments.md, "Fusion"); RRF k=60 was the weakest on three of them.
FUSION_WEIGHTS = {"lexical": 0.5, "dense": 0.5}


# ---- flat rankings --------------------------------------------------------------------------


def _lexical(palace: Palace, catalog: Catalog, query: str, limit: int, scope: Scope | None = None,
             hidden: frozenset[str] = frozenset()) -> list[tuple[str, float]]:
    weights = palace.config.retrieval.get("field_weights") or None
    if len(hidden) * 2 > len(catalog.ids):  # most are left out (an early --as-of): name the few kept instead
        return palace.index.text.search(query, limit=limit, field_weights=weights, scope=scope,
                                        only=[i for i in catalog.ids if i not in hidden])
    return palace.index.text.search(query, limit=limit, field_weights=weights, scope=scope, exclude=hidden)


def _dense(palace: Palace, catalog: Catalog, query: str, limit: int, scope: Scope | None = None,
           hidden: frozenset[str] = frozenset()) -> list[tuple[str, float]]:
    if catalog.matrix is None:
        return []
    vector = palace.index.query_vector(query)
    if vector is None:
        return []
    import numpy as np

    scores = catalog.matrix @ vector
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
        rows = [(i, catalog.row_of[i]) for i in ids if i in catalog.row_of]
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


def fuse_minmax(rankings: dict[str, list[tuple[str, float]]],
                weights: dict[str, float] | None = None) -> list[tuple[str, float, dict[str, float]]]:
    """Weighted sum of min-max normalised scores; a ranking whose scores are all equal gives each of its items 1,
    an item missing from a ranking gets 0 from it; ties by id. Parts keep each raw score and rank."""
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
    ordered = sorted(fused.items(), key=lambda pair: (-pair[1], pair[0]))
    return [(item, score, parts[item]) for item, score in ordered]


def _rank(palace: Palace, catalog: Catalog, query: str, mode: str, k: int, scope: Scope | None = None,
          hidden: frozenset[str] = frozenset()) -> tuple[list[Hit], str]:
    """Ranked hits in one mode, within the scope, leaving out the `hidden` ids; returns (hits, mode actually used)."""
    dense_ok = catalog.matrix is not None and mode != "lexical"
    if mode == "dense" and not dense_ok:
        raise UsageError("dense search needs an embedding model: run `palace models install`")
    if mode == "lexical" or (mode == "hybrid" and not dense_ok):
        ranked = [(i, s, {"lexical": s}) for i, s in _lexical(palace, catalog, query, k, scope, hidden)]
        used = "lexical"
    elif mode == "dense":
        ranked = [(i, s, {"dense": s}) for i, s in _dense(palace, catalog, query, k, scope, hidden)]
        used = "dense"
    else:
        depth = max(CANDIDATES, k)
        ranked = fuse_minmax({"lexical": _lexical(palace, catalog, query, depth, scope, hidden),
                              "dense": _dense(palace, catalog, query, depth, scope, hidden)})[:k]
        used = "hybrid"
    hits = []
    for unit_id, score, parts in ranked[:k]:
        row = catalog.row_of.get(unit_id)
        if row is None:
            continue
        hits.append(Hit(unit_id, "", catalog.domains[row], catalog.paths[row], 0, score, parts,
                        kind=catalog.kinds[row], time=catalog.times[row]))
    return hits, used


def _attach(palace: Palace, hits: list[Hit], catalog: Catalog | None = None, when: datetime | None = None) -> None:
    """Load the memories, sections and turns of the hits (only these) from the cache; with a catalog, memories'
    version links."""
    if not hits:
        return
    store = palace.index.store
    memories = {m.path: m for m in store.memories([h.path for h in hits if h.kind in ("memory", "section")])}
    sections = store.sections([h.id for h in hits if h.kind == "section"])
    turns = store.turns([h.id for h in hits if h.kind == "turn"])
    for hit in hits:
        if hit.kind == "section":
            attach_section(hit, memories.get(hit.path), sections.get(hit.id))
            if catalog is not None and hit.memory is not None:
                _versions(hit, hit.memory.id, catalog, when)
            continue
        if hit.kind == "turn":
            row = turns.get(hit.id)
            if row:
                header = row["header"]
                hit.line = row["line"]
                hit.turn = Turn(row["session"], row["turn"], row["speaker"], row["text"], row["time"],
                                header.get("title") or "", header.get("started") or "",
                                header.get("conversation") or "")
                hit.subject = f"{row['speaker']}: {one_line(row['text'], 80)}"
            continue
        memory = memories.get(hit.path)
        if memory:
            hit.memory, hit.subject, hit.line = memory, memory.subject, memory.line
        if catalog is not None:
            _versions(hit, hit.id, catalog, when)


def _versions(hit: Hit, memory_id: str, catalog: Catalog, when: datetime | None) -> None:
    versions = catalog.versions
    hit.replaces = list(versions.predecessors.get(memory_id, []))
    hit.superseded_by = list(versions.successors.get(memory_id, []))
    hit.valid = versions.valid_at(memory_id, when)


def _prepare(palace: Palace, do_refresh: bool) -> Catalog:
    if do_refresh:
        palace.refresh()
    return palace.index.catalog()


def _moment(as_of) -> datetime | None:
    """The moment of an as-of question (a date, datetime or ISO text; None: now)."""
    try:
        return parse_moment(as_of)
    except ValueError as exc:
        raise UsageError(f"--as-of: {exc}") from None


def scope_of(palace: Palace, kind: str | None = None, since: str | None = None, until: str | None = None,
             domain: str | None = None, sessions=None) -> Scope:
    """The filter of search and recall's options: --kind, --since, --until and --domain (resolved), and
    `sessions` (only these sessions' turns)."""
    return make_scope(kind, since, until, palace.resolve_domain(domain) if domain is not None else None, sessions)


def search(palace: Palace, query: str, mode: str = "hybrid", k: int = 10, domain: str | None = None,
           do_refresh: bool = True, as_of=None, include_superseded: bool = False, kind: str | None = None,
           since: str | None = None, until: str | None = None, sessions=None) -> SearchResult:
    """Flat search over every memory valid now (or `as_of` a date; or all of them) and every turn, within the
    scope (kind, time window, one domain), in the given mode: the best k units that are about the query
    (search/relevance.py), none when no unit is ("no results", `relevant` false)."""
    if mode not in MODES:
        raise UsageError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    started = time.perf_counter()
    when = _moment(as_of)
    catalog = _prepare(palace, do_refresh)
    scope = scope_of(palace, kind, since, until, domain, sessions)
    hidden = frozenset() if include_superseded else catalog.hidden(when)
    # Rank deeper than k: a unit that is not about the query is dropped, and the next one may be.
    ranked, used = _rank(palace, catalog, query, mode, _deeper(catalog, max(k, CANDIDATES)), scope, hidden)
    ranked = one_per_note(ranked, catalog.note_of)
    measure(ranked, ceiling(palace.index.text, query), _cosines(palace, catalog, query),
            _bm25(palace, query) if used == "dense" else None, _holding(palace, query))
    hits = [h for h in ranked if about(h)][:k]
    _attach(palace, list({id(h): h for h in hits + ranked[:k]}.values()), catalog, when)
    _, dense, reason = palace.index.dense()
    result = SearchResult(query, used, hits, dense, reason, (time.perf_counter() - started) * 1000,
                          format_moment(when), include_superseded, len(hidden), ranked=ranked[:k])
    if not hits:
        result.relevant = False
        result.why = _nothing_about(ranked)
    return result


def _nothing_about(ranked: list[Hit]) -> str:
    """Why nothing was found: no unit in scope, or the best unit's measures below both floors."""
    if not ranked:
        return "no unit in scope holds a word of the query"
    return f"nothing is about the query: the closest unit, {ranked[0].id}, has {why_not_about(ranked[0])}"


# ---- recall: the ranking, the route it implies, the context ---------------------------------


def recall(palace: Palace, query: str, k: int | None = None, domain: str | None = None, budget: int | None = None,
           profile: str = "reference", do_refresh: bool = True, mode: str | None = None,
           trim: bool | None = None, as_of=None, include_superseded: bool = False,
           budget_tokens: int | None = None, kind: str | None = None, since: str | None = None,
           until: str | None = None, turns: int | None = None, depth: int | None = None, sessions=None) -> Recall:
    """Rank the memories and turns in scope flat, build the context within the budget (budget_tokens, 4 bytes each; `budget` in bytes is kept for older callers;
    default: the profile's): at most k memories and `turns` turns, best first. The route is the domains
    of the memories handed over (hop 1 orders nothing and filters nothing); `fallback` is always false.

    Only memories valid now are ranked and handed over, or valid `as_of` a date (created standing in for
    a missing valid_from); include_superseded ranks every memory, marking those not valid.
    kind/since/until/sessions filter as in `search`; depth keeps a longer ranking in `result.ranked` (benchmarks)."""
    if profile not in PROFILES:
        raise UsageError(f"unknown profile {profile!r}; choose from {', '.join(PROFILES)}")
    spec: Profile = PROFILES[profile]
    k = k or spec.k
    turns = spec.turns if turns is None else turns
    mode = mode or spec.mode
    if budget_tokens is not None:
        budget = budget_tokens * BYTES_PER_TOKEN
    budget = budget if budget is not None else spec.budget
    started = time.perf_counter()
    when = _moment(as_of)
    catalog = _prepare(palace, do_refresh)
    hidden = frozenset() if include_superseded else catalog.hidden(when)
    scope = scope_of(palace, kind, since, until, domain, sessions)
    memory_count = catalog.memory_count
    has_turns = catalog.has_turns
    depth = max(depth or 0, k + (turns if scope.turns and has_turns else 0))
    _, dense, dense_reason = palace.index.dense()
    result = Recall(query=query, mode=mode, hits=[], dense=dense, dense_reason=dense_reason, profile=profile,
                    as_of=format_moment(when), include_superseded=include_superseded, left_out=len(hidden), hops=1)
    if domain is not None:
        result.reason = "domain given"
    elif not scope.memories or not memory_count:
        result.reason = ("turns only: no domain to route to" if scope.memories or scope.kind == "turn"
                         else "no memory in scope: nothing to route")
    else:
        result.reason = "ranked flat; the route is the domains of the memories handed over"
    hits, result.mode = _rank(palace, catalog, query, mode, _deeper(catalog, depth), scope, hidden)
    hits = one_per_note(hits, catalog.note_of)[:depth]
    if scope.turns and has_turns:
        result.sessions = route_sessions(palace, catalog, query, hits)
        hits = reorder(hits, result.sessions, turns)
    result.ranked = hits
    measure(hits, ceiling(palace.index.text, query), _cosines(palace, catalog, query),
            _bm25(palace, query) if result.mode == "dense" else None, _holding(palace, query))
    result.caps = {"memory": k, "turn": turns if scope.turns and has_turns else 0}
    _offer(result, spec.trim if trim is None else trim)
    _attach(palace, result.ranked, catalog, when)
    result.confidence = hit_confidence(result.hits)
    if spec.include_links:
        result.linked = _linked(palace, catalog, result.hits, hidden, when)
    result.context, result.handed = assemble_context(result.hits + result.linked, spec, budget, result.as_of)
    result.context_bytes = len(result.context.encode("utf-8"))
    handed = {id(h) for h in result.handed}
    result.omitted += [Omitted(h.id, h.kind, f"did not fit the budget of {-(-budget // BYTES_PER_TOKEN)} tokens")
                       for h in result.hits if id(h) not in handed and budget is not None]
    offered = {id(h) for h in result.hits}
    result.route = route_of([h for h in result.handed if id(h) in offered])
    if domain is not None and not result.route:
        result.route = [DomainRoute(scope.domains[0], 1.0, {"given": 1.0})]
    result.elapsed_ms = (time.perf_counter() - started) * 1000
    return result


def _offer(result: Recall, trim: bool) -> None:
    """Fill the recall's hits (the units to offer, in rank order) and what was omitted and why; when no unit is
    about the question, nothing is offered and `relevant` is false."""
    ranked = result.ranked
    if ranked and not about(ranked[0]):
        result.relevant, result.why = False, _nothing_about(ranked)
        result.omitted = [Omitted(h.id, h.kind, "not about the question") for h in ranked]
        return
    if not ranked:
        result.relevant, result.why = False, _nothing_about(ranked)
        return
    result.hits, result.omitted = judge(ranked, result.caps, _close if trim else None)


def _deeper(catalog: Catalog, depth: int) -> int:
    """How deep to rank so that `depth` notes remain once a note's sections are folded into it (one_per_note)."""
    return depth * 3 + 10 if catalog.note_of else depth


def route_of(hits: list[Hit]) -> list[DomainRoute]:
    """The domains of the memories among `hits`, in the order of their best hit; confidence is each domain's
    share of the hits' scores, parts count its hits."""
    scores: dict[str, float] = {}
    counts: dict[str, int] = defaultdict(int)
    for hit in hits:
        if hit.kind != "turn" and hit.domain:
            scores[hit.domain] = scores.get(hit.domain, 0.0) + max(hit.score, 0.0)
            counts[hit.domain] += 1
    total = sum(scores.values())
    return [DomainRoute(d, scores[d] / total if total > 0 else counts[d] / sum(counts.values()), {"hits": counts[d]})
            for d in scores]


def pick(hits: list[Hit], k: int, turns: int) -> list[Hit]:
    """The hits to offer, in rank order: the first k memories (a section counts as its memory) and the first `turns`
    turns."""
    counts = {"memory": 0, "turn": 0}
    limits = {"memory": k, "turn": turns}
    out = []
    for hit in hits:
        kind = "turn" if hit.kind == "turn" else "memory"
        if counts[kind] < limits[kind]:
            counts[kind] += 1
            out.append(hit)
    return out


# A later hit is handed over only when it is close to the best: within this share of the best
# BM25 score, or this far below the best cosine. Measured in docs/ranking-experiments.md ("the trim").
TRIM_LEXICAL_SHARE = 0.6
TRIM_DENSE_GAP = 0.06


def trim_hits(hits: list[Hit]) -> list[Hit]:
    """Keep the best hit and those close to it: the smallest context likely to hold the answer."""
    if len(hits) <= 1:
        return hits
    kept = [hits[0]]
    for hit in hits[1:]:
        if not _close(hit, hits[0]):
            break  # hits are ranked: once one is far from the best, later ones are too
        kept.append(hit)
    return kept


def _close(hit: Hit, best: Hit) -> bool:
    """Whether a hit is close to the best: TRIM_LEXICAL_SHARE of its BM25, or within TRIM_DENSE_GAP of its cosine."""
    close = False
    if "lexical" in hit.parts and "lexical" in best.parts:
        close |= hit.parts["lexical"] >= TRIM_LEXICAL_SHARE * best.parts["lexical"]
    if "dense" in hit.parts and "dense" in best.parts:
        close |= hit.parts["dense"] >= best.parts["dense"] - TRIM_DENSE_GAP
    return close


def hit_confidence(hits: list[Hit]) -> float:
    """How sure retrieval is that the top hit answers: dense cosine when known, else squashed BM25."""
    if not hits:
        return 0.0
    parts = hits[0].parts
    if "dense" in parts:
        return float(parts["dense"])
    if "lexical" in parts:
        return float(1 - math.exp(-parts["lexical"] / 10))
    return 0.0


def _linked(palace: Palace, catalog: Catalog, hits: list[Hit], hidden: frozenset[str] = frozenset(),
            when: datetime | None = None) -> list[Hit]:
    have = {h.memory_id for h in hits}
    linked = []
    names = palace.index.names()
    for hit in hits:
        for link in names.link_ids(hit.memory) if hit.memory else []:
            row = catalog.row_of.get(link)
            if row is None or link in have or link in hidden:
                continue
            have.add(link)
            linked.append(Hit(link, "", catalog.domains[row], catalog.paths[row], 0, 0.0, {"linked_from": 1.0}))
    _attach(palace, linked, catalog, when)
    return linked


