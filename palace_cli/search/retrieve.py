"""The query pipeline: `search` and `recall` share every step up to the ranking, then hand back different things.

One Query (search/query.py) is prepared once (refresh, the catalog, the scope, what is valid at the moment
asked about, whether dense ranking is on), ranked flat (search/ranking.py) and measured for relevance
(search/relevance.py). search hands back the best units that are about the query; recall keeps what is
relevant within the profile's caps and budget, builds the context an LLM is handed, and reports as its
route the domains of the memories it hands over (a route never filters: docs/ranking-experiments.md).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import datetime

from palace_cli.core.dates import format_moment
from palace_cli.core.text import one_line
from palace_cli.index.catalog import Catalog
from palace_cli.index.scope import Scope
from palace_cli.palace import Palace
from palace_cli.search.context import assemble_context
from palace_cli.search.hits import DomainRoute, Hit, Recall, SearchResult, Turn, attach_section, one_per_note
from palace_cli.search.profiles import BYTES_PER_TOKEN
from palace_cli.search.query import Query, as_query
from palace_cli.search.ranking import CANDIDATES, deeper, measure_hits, named_first, rank
from palace_cli.search.relevance import Omitted, about, judge, why_not_about
from palace_cli.search.sessions import reorder, route_sessions

SEARCH_K = 10  # search's hits when the caller names no k (recall's k is the profile's)


@dataclass
class Prepared:
    """The steps search and recall share, done once for a Query: the refreshed catalog, the scope with its domain
    resolved, what is left out at the moment asked about (memories not valid then, turns not said yet), and
    whether dense ranking is on."""

    query: Query
    catalog: Catalog
    scope: Scope
    hidden: frozenset[str]
    dense: str
    dense_reason: str
    started: float
    mode: str = ""  # the mode the ranking used: fused is lexical without vectors
    left_out: int = 0  # of `hidden`, the memories not valid at the moment (the rest are turns said after it)

    def rank(self, palace: Palace, depth: int) -> list[Hit]:
        """The flat ranking, one hit per note, ranked deep enough that `depth` notes remain."""
        hits, self.mode = rank(palace, self.catalog, self.query.text, self.query.mode, deeper(self.catalog, depth),
                               self.scope, self.hidden)
        return named_first(one_per_note(hits, self.catalog.note_of), palace.index.names(), self.query.text,
                           self.catalog, self.scope, self.hidden)

    def measure(self, palace: Palace, hits: list[Hit]) -> None:
        """Fill the hits' relevance measures (words, meaning, every word)."""
        measure_hits(palace, self.catalog, self.query.text, hits, self.mode)

    def fields(self) -> dict:
        """What every result says of how it was made: the query, the mode used, dense, the moment, what was left out."""
        return dict(query=self.query.text, mode=self.mode, dense=self.dense, dense_reason=self.dense_reason,
                    as_of=format_moment(self.query.when), include_superseded=self.query.include_superseded,
                    left_out=self.left_out)

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000


def prepare(palace: Palace, query: Query, do_refresh: bool = True) -> Prepared:
    """Refresh (unless the caller just did), then what every ranking of `query` needs from the palace as it is."""
    started = time.perf_counter()
    if do_refresh:
        palace.refresh()
    catalog = palace.index.catalog()
    scope = query.scope
    if query.domain is not None:
        scope = replace(scope, domains=(palace.resolve_domain(query.domain),))
    hidden = frozenset() if query.include_superseded else catalog.hidden(query.when)
    _, dense, reason = palace.index.dense()
    # A turn said after the moment asked about was not known then, whatever --include-superseded says of memories.
    return Prepared(query, catalog, scope, hidden | catalog.said_after(query.when), dense, reason, started,
                    left_out=len(hidden))


def search(palace: Palace, query: Query | str, *, do_refresh: bool = True, **options) -> SearchResult:
    """Flat search over every memory valid now (or as of a date; or all of them) and every turn, within the
    scope (kind, time window, one domain), in the query's mode: the best k units that are about the query
    (search/relevance.py), none when no unit is ("no results", `relevant` false). `query` is a Query or its
    text with make_query's options (k defaults to 10 here)."""
    query = as_query(query, options, k=SEARCH_K)
    prepared = prepare(palace, query, do_refresh)
    # Rank deeper than k: a unit that is not about the query is dropped, and the next one may be.
    ranked = prepared.rank(palace, max(query.k, CANDIDATES))
    prepared.measure(palace, ranked)
    hits = [h for h in ranked if about(h)][:query.k]
    attach_hits(palace, list({id(h): h for h in hits + ranked[:query.k]}.values()), prepared.catalog, query.when)
    result = SearchResult(hits=hits, ranked=ranked[:query.k], **prepared.fields())
    if not hits:
        result.relevant, result.why = False, _nothing_about(ranked)
    result.elapsed_ms = prepared.elapsed_ms()
    return result


def _nothing_about(ranked: list[Hit]) -> str:
    """Why nothing was found: no unit in scope, or the best unit's measures below both floors."""
    if not ranked:
        return "no unit in scope holds a word of the query"
    return f"nothing is about the query: the closest unit, {ranked[0].id}, has {why_not_about(ranked[0])}"


# ---- recall: the ranking, the route it implies, the context ---------------------------------


def recall(palace: Palace, query: Query | str, *, do_refresh: bool = True, **options) -> Recall:
    """Rank the memories and turns in scope flat and hand over what is relevant, best first, within the budget:
    at most k memories and `turns` turns, as context for an LLM. `query` is a Query or its text with
    make_query's options (what is not given is the profile's). The route is the domains of the memories
    handed over (it orders nothing and filters nothing); `fallback` is always false.

    Only memories valid now are ranked and handed over, or valid as of a date (created standing in for a
    missing valid_from); include_superseded ranks every memory, marking those not valid. depth keeps a
    longer ranking in `result.ranked` (benchmarks)."""
    query = as_query(query, options)
    prepared = prepare(palace, query, do_refresh)
    with_turns = prepared.scope.turns and prepared.catalog.has_turns
    depth = max(query.depth or 0, query.k + (query.turns if with_turns else 0))
    # ranked as deep as search ranks, so that fusion normalises over the same candidates: one ranking for both
    hits = prepared.rank(palace, max(depth, CANDIDATES))[:depth]
    sessions = route_sessions(palace, prepared.catalog, query.text, hits) if with_turns else []
    if with_turns:
        hits = reorder(hits, sessions, query.turns)
    prepared.measure(palace, hits)
    result = Recall(hits=[], ranked=hits, sessions=sessions, profile=query.profile.name,
                    reason=_reason(prepared), caps={"memory": query.k, "turn": query.turns if with_turns else 0},
                    **prepared.fields())
    _offer(result, query.trim)
    _hand_over(palace, prepared, result)
    result.elapsed_ms = prepared.elapsed_ms()
    return result


def _reason(prepared: Prepared) -> str:
    """What the route of a recall means: the domains handed over, the domain given, or why there is none."""
    scope = prepared.scope
    if prepared.query.domain is not None:
        return "domain given"
    if not scope.memories or not prepared.catalog.memory_count:
        return ("turns only: no domain to route to" if scope.memories or scope.kind == "turn"
                else "no memory in scope: nothing to route")
    return "ranked flat; the route is the domains of the memories handed over"


def _hand_over(palace: Palace, prepared: Prepared, result: Recall) -> None:
    """Load the ranked units, build the context from the offered ones (and their links) within the budget, say
    which did not fit, and name the route: the domains of the memories handed over."""
    query, catalog = prepared.query, prepared.catalog
    attach_hits(palace, result.ranked, catalog, query.when)
    result.confidence = hit_confidence(result.hits)
    if query.profile.include_links:
        result.linked = _linked(palace, catalog, result.hits, prepared.hidden, query.when)
    result.context, result.handed = assemble_context(result.hits + result.linked, query.profile, query.budget,
                                                     result.as_of)
    result.context_bytes = len(result.context.encode("utf-8"))
    handed = {id(h) for h in result.handed}
    if query.budget is not None:
        result.omitted += [Omitted(h.id, h.kind, f"did not fit the budget of {-(-query.budget // BYTES_PER_TOKEN)} "
                                                 "tokens") for h in result.hits if id(h) not in handed]
    offered = {id(h) for h in result.hits}
    result.route = route_of([h for h in result.handed if id(h) in offered])
    if query.domain is not None and not result.route:
        result.route = [DomainRoute(prepared.scope.domains[0], 1.0, {"given": 1.0})]


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
    attach_hits(palace, linked, catalog, when)
    return linked


# ---- loading the text of the hits -------------------------------------------------------------


def attach_hits(palace: Palace, hits: list[Hit], catalog: Catalog | None = None,
                when: datetime | None = None) -> None:
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
