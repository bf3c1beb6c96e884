"""Retrieval: one ranking (lexical, dense, or both fused), the route it implies, and the context budget.

Hop 1 never filters (docs/ranking-experiments.md, "Routing"): every rule that removed or reordered
candidates by domain lost recall on some corpus. recall ranks flat and reports as its route the
domains of the memories it hands over.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from palace_cli.errors import UsageError
from palace_cli.index.catalog import Catalog
from palace_cli.index.scope import Scope, make_scope
from palace_cli.core.notes import Memory
from palace_cli.palace import Palace
from palace_cli.search.profiles import BYTES_PER_TOKEN, PROFILES, Profile, tokens_of
from palace_cli.search.sessions import ROUTE_SHOWN, SessionRoute, reorder, route_sessions
from palace_cli.core.validity import format_moment, parse_moment

if TYPE_CHECKING:
    pass

MODES = ("lexical", "dense", "hybrid")
RRF_K = 60
CANDIDATES = 100  # each ranker's list that fusion sees
# Hybrid = 0.5 x min-max(BM25) + 0.5 x min-max(cosine): the best fusion over four corpora
# (docs/ranking-experiments.md, "Fusion"); RRF k=60 was the weakest on three of them.
FUSION_WEIGHTS = {"lexical": 0.5, "dense": 0.5}


@dataclass
class Turn:
    """A turn of a conversation as a hit carries it: who said what, when, in which session."""

    session: str
    turn: str
    speaker: str
    text: str
    time: str
    title: str
    started: str = ""
    conversation: str = ""  # the source's grouping of sessions (LoCoMo's sample id), when it has one


@dataclass
class Hit:
    """One ranked unit, a memory or a turn, with where it is and the parts its score came from.

    For a turn, `id` is its key `<session id>/<turn id>`, `subject` a one-line preview, `domain` "",
    `path:line` its header line, and `turn` the rest.
    """

    id: str
    subject: str
    domain: str
    path: str
    line: int
    score: float
    parts: dict[str, float] = field(default_factory=dict)
    memory: Memory | None = None
    replaces: list[str] = field(default_factory=list)       # versions this memory superseded
    superseded_by: list[str] = field(default_factory=list)  # versions that superseded it
    valid: bool = True                                       # valid at the question's moment (now, or as of)
    kind: str = "memory"
    time: str = ""
    turn: Turn | None = None

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}"

    def as_dict(self) -> dict:
        """The JSON contract: kind, id, subject, domain, path, line, time, score, parts (and version links when
        there are any); for a turn also session, turn, speaker, text."""
        data = {"kind": self.kind, "id": self.id, "subject": self.subject, "domain": self.domain, "path": self.path,
                "line": self.line, "time": self.time or None, "score": round(self.score, 6),
                "parts": {k: round(v, 6) for k, v in self.parts.items()}}
        if self.turn is not None:
            data.update(session=self.turn.session, turn=self.turn.turn, speaker=self.turn.speaker, text=self.turn.text)
        if self.replaces:
            data["replaces"] = self.replaces
        if self.superseded_by:
            data["superseded_by"] = self.superseded_by
        if not self.valid:
            data["valid"] = False
        return data


@dataclass
class DomainRoute:
    """A domain of the hits handed over, with its share of their scores."""

    domain: str
    confidence: float
    parts: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"domain": self.domain, "confidence": round(self.confidence, 4),
                "parts": {k: round(v, 4) for k, v in self.parts.items()}}


@dataclass
class SearchResult:
    """A ranked list of hits and how it was made."""

    query: str
    mode: str
    hits: list[Hit]
    dense: str = "on"
    dense_reason: str = ""
    elapsed_ms: float = 0.0
    as_of: str = ""               # the moment asked about ("" = now)
    include_superseded: bool = False
    left_out: int = 0             # memories not valid at that moment, left out of the ranking

    def as_dict(self) -> dict:
        return {"query": self.query, "mode": self.mode, "hits": [h.as_dict() for h in self.hits],
                "dense": self.dense, "elapsed_ms": round(self.elapsed_ms, 2), "as_of": self.as_of or None,
                "include_superseded": self.include_superseded, "left_out": self.left_out}


@dataclass
class Recall(SearchResult):
    """Recall: the hits, the domains they sit in (the route), and the context they make within the budget."""

    profile: str = "reference"
    hops: int = 1                 # one flat ranking (hop 1 no longer filters: see the module docstring)
    route: list[DomainRoute] = field(default_factory=list)
    fallback: bool = False        # kept in the JSON for older callers: never true now
    reason: str = ""
    context: str = ""
    context_bytes: int = 0
    confidence: float = 0.0
    linked: list[Hit] = field(default_factory=list)
    handed: list[Hit] = field(default_factory=list)  # the hits whose memory (turn) is in the context
    ranked: list[Hit] = field(default_factory=list)  # hop 2's ranking before picking and trimming (to `depth`)
    sessions: list[SessionRoute] = field(default_factory=list)  # hop 1 for turns: sessions, best first

    def as_dict(self) -> dict:
        data = super().as_dict()
        data.update({
            "profile": self.profile, "hops": self.hops, "route": [r.as_dict() for r in self.route],
            "fallback": self.fallback, "reason": self.reason, "context_bytes": self.context_bytes,
            "context_tokens": tokens_of(self.context),
            "confidence": round(self.confidence, 4),
            "memories": [context_entry(h.memory) for h in self.handed if h.memory],
            "turns": [h.id for h in self.handed if h.turn is not None],
        })
        if self.sessions:
            data["sessions"] = [r.as_dict() for r in self.sessions[:ROUTE_SHOWN]]
        if self.linked:
            data["linked"] = [h.as_dict() for h in self.linked]
        return data


def context_entry(memory: Memory) -> dict:
    """What `verify --context` needs of a handed-over memory: its id and verify token."""
    return {"id": memory.id, "subject": memory.subject, "verify": memory.verify}


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
    """Load the memories and turns of the hits (only these) from the cache; with a catalog, memories' version links."""
    if not hits:
        return
    store = palace.index.store
    memories = {m.path: m for m in store.memories([h.path for h in hits if h.kind == "memory"])}
    turns = store.turns([h.id for h in hits if h.kind == "turn"])
    for hit in hits:
        if hit.kind == "turn":
            row = turns.get(hit.id)
            if row:
                header = row["header"]
                hit.line = row["line"]
                hit.turn = Turn(row["session"], row["turn"], row["speaker"], row["text"], row["time"],
                                header.get("title") or "", header.get("started") or "",
                                header.get("conversation") or "")
                hit.subject = f"{row['speaker']}: {_preview(row['text'])}"
            continue
        memory = memories.get(hit.path)
        if memory:
            hit.memory, hit.subject, hit.line = memory, memory.subject, memory.line
        if catalog is not None:
            versions = catalog.versions
            hit.replaces = list(versions.predecessors.get(hit.id, []))
            hit.superseded_by = list(versions.successors.get(hit.id, []))
            hit.valid = versions.valid_at(hit.id, when)


def _preview(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


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
    scope (kind, time window, one domain), in the given mode."""
    if mode not in MODES:
        raise UsageError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    started = time.perf_counter()
    when = _moment(as_of)
    catalog = _prepare(palace, do_refresh)
    scope = scope_of(palace, kind, since, until, domain, sessions)
    hidden = frozenset() if include_superseded else catalog.hidden(when)
    hits, used = _rank(palace, catalog, query, mode, k, scope, hidden)
    _attach(palace, hits, catalog, when)
    _, dense, reason = palace.index.dense()
    return SearchResult(query, used, hits, dense, reason, (time.perf_counter() - started) * 1000,
                        format_moment(when), include_superseded, len(hidden))


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
    memory_count = catalog.memory_count  # counted over every row on each call: 2-3 ms at 100,000 notes
    has_turns = memory_count < len(catalog.ids)
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
    hits, result.mode = _rank(palace, catalog, query, mode, depth, scope, hidden)
    if scope.turns and has_turns:
        result.sessions = route_sessions(palace, catalog, query, hits)
        hits = reorder(hits, result.sessions, turns)
    result.ranked = hits
    picked = pick(hits, k, turns)
    result.hits = _trim_memories(picked) if (spec.trim if trim is None else trim) else picked
    _attach(palace, result.ranked, catalog, when)
    result.confidence = hit_confidence(result.hits)
    if spec.include_links:
        result.linked = _linked(palace, catalog, result.hits, hidden, when)
    result.context, result.handed = assemble_context(result.hits + result.linked, spec, budget, result.as_of)
    result.context_bytes = len(result.context.encode("utf-8"))
    offered = {id(h) for h in result.hits}
    result.route = route_of([h for h in result.handed if id(h) in offered])
    if domain is not None and not result.route:
        result.route = [DomainRoute(scope.domains[0], 1.0, {"given": 1.0})]
    result.elapsed_ms = (time.perf_counter() - started) * 1000
    return result


def route_of(hits: list[Hit]) -> list[DomainRoute]:
    """The domains of the memories among `hits`, in the order of their best hit; confidence is each domain's
    share of the hits' scores, parts count its hits."""
    scores: dict[str, float] = {}
    counts: dict[str, int] = defaultdict(int)
    for hit in hits:
        if hit.kind == "memory" and hit.domain:
            scores[hit.domain] = scores.get(hit.domain, 0.0) + max(hit.score, 0.0)
            counts[hit.domain] += 1
    total = sum(scores.values())
    return [DomainRoute(d, scores[d] / total if total > 0 else counts[d] / sum(counts.values()), {"hits": counts[d]})
            for d in scores]


def _trim_memories(hits: list[Hit]) -> list[Hit]:
    """trim_hits over the memories; turns are short and their evidence often ranks low, so all are kept."""
    kept = {id(h) for h in trim_hits([h for h in hits if h.kind == "memory"])}
    return [h for h in hits if h.kind == "turn" or id(h) in kept]


def pick(hits: list[Hit], k: int, turns: int) -> list[Hit]:
    """The hits to offer, in rank order: the first k memories and the first `turns` turns."""
    counts = {"memory": 0, "turn": 0}
    limits = {"memory": k, "turn": turns}
    out = []
    for hit in hits:
        if counts[hit.kind] < limits[hit.kind]:
            counts[hit.kind] += 1
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
    top = hits[0].parts
    kept = [hits[0]]
    for hit in hits[1:]:
        close = False
        if "lexical" in hit.parts and "lexical" in top:
            close |= hit.parts["lexical"] >= TRIM_LEXICAL_SHARE * top["lexical"]
        if "dense" in hit.parts and "dense" in top:
            close |= hit.parts["dense"] >= top["dense"] - TRIM_DENSE_GAP
        if not close:
            break  # hits are ranked: once one is far from the best, later ones are too
        kept.append(hit)
    return kept


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
    have = {h.id for h in hits}
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


def build_context(hits: list[Hit], spec: Profile, budget: int | None, as_of: str = "") -> str:
    """The context block for an LLM: each memory's sections and verify token, within a byte budget."""
    return assemble_context(hits, spec, budget, as_of)[0]


def _version_line(hit: Hit) -> str:
    """`replaces: a` / `superseded by: b` for a memory with versions; "" for one without."""
    parts = []
    if hit.superseded_by:
        parts.append(f"superseded by: {', '.join(hit.superseded_by)}"
                     + ("" if hit.valid else " (not valid at the time asked about)"))
    if hit.replaces:
        parts.append(f"replaces: {', '.join(hit.replaces)}")
    return "; ".join(parts)


MEMORY_HEADER = ("Answer from these memories only. Each memory has a verify token: when you use a memory, "
                 "quote its token exactly, like [verify: the token]. If they do not answer the question, say so.\n")
TURN_HEADER = ("Answer from these conversation turns only; each session shows its date (and each turn its time "
               "when known), so say when things were said. Turns carry no verify token. If they do not answer "
               "the question, say so.\n")
BOTH_HEADER = ("Answer from these memories and conversation turns only. Each memory has a verify token: when you "
               "use a memory, quote its token exactly, like [verify: the token]. Turns carry no token; each "
               "session shows its date. If they do not answer the question, say so.\n")


def assemble_context(hits: list[Hit], spec: Profile, budget: int | None, as_of: str = "") -> tuple[str, list[Hit]]:
    """The context block and the hits that made it in; a unit dropped for the budget is not handed over.

    Memories come as blocks in rank order; turns are grouped under their session (a line with its
    title, date and path, once), the sessions in the order of their best turn, the turns in the order
    they were said."""
    kinds = {h.kind for h in hits if h.memory is not None or h.turn is not None}
    header = MEMORY_HEADER if kinds <= {"memory"} else TURN_HEADER if kinds == {"turn"} else BOTH_HEADER
    if as_of:
        header += f"The question asks about {as_of}; answer as things stood then.\n"
    blocks: list[str] = []
    handed: list[Hit] = []
    used = len(header.encode("utf-8"))
    for hit in _grouped(hits):
        if hit.memory is not None:
            block = _memory_block(hit, spec)
        elif hit.turn is not None:
            block = _turn_block(hit, handed)
        else:
            continue
        follows = hit.turn is not None and bool(handed) and handed[-1].path == hit.path  # same session: no gap
        separator = 1 if blocks and not follows else 0  # the newline joining blocks
        size = len(block.encode("utf-8")) + separator
        if budget is not None and used + size > budget:
            room = budget - used - separator
            if room < 160 or blocks and room < size // 3:
                break  # a stub of a memory helps no one; stop at whole units
            block = _truncate(block, room)
            size = budget - used
        if follows:
            blocks[-1] += block
        else:
            blocks.append(block)
        handed.append(hit)
        used += size
        if budget is not None and used >= budget:
            break
    return (header + "\n".join(blocks), handed) if blocks else ("", [])


def _grouped(hits: list[Hit]) -> list[Hit]:
    """Hits in context order: memories and sessions by rank, a session's turns together in file order."""
    sessions: dict[str, list[Hit]] = {}
    order: list[Hit | str] = []
    for hit in hits:
        if hit.turn is None:
            order.append(hit)
            continue
        if hit.path not in sessions:
            sessions[hit.path] = []
            order.append(hit.path)
        sessions[hit.path].append(hit)
    out: list[Hit] = []
    for item in order:
        out += sorted(sessions[item], key=lambda h: h.line) if isinstance(item, str) else [item]
    return out


def _memory_block(hit: Hit, spec: Profile) -> str:
    memory = hit.memory
    lines = [f"## {memory.subject} ({memory.id}) {memory.location}", f"verify: {memory.verify}"]
    versions = _version_line(hit)
    if versions:
        lines.append(versions)
    if "anchor" in spec.sections and memory.anchor:
        lines.append(f"anchor: {memory.anchor}")
    if "image" in spec.sections and memory.image:
        lines.append(f"Image: {memory.image}")
    if "content" in spec.sections and memory.content:
        lines.append(f"Content: {memory.content}")
    if "links" in spec.sections and memory.all_links:
        lines.append("links: " + ", ".join(memory.all_links))
    return "\n".join(lines) + "\n"


def _turn_block(hit: Hit, handed: list[Hit]) -> str:
    """A turn's line, after its session's heading (title, id, date, path) when the turn handed before it
    was of another session; the turn's own time is shown when it differs from the session's start."""
    turn = hit.turn
    lines = []
    if not handed or handed[-1].path != hit.path:
        title = f"{turn.title} " if turn.title else ""
        lines.append(f"## Conversation {title}({turn.session}), {_when(turn.started) or 'date unknown'}, {hit.path}")
    own = f", {_when(turn.time)}" if turn.time and turn.time != turn.started else ""
    lines.append(f"[{turn.turn}, line {hit.line}{own}] {turn.speaker}: {turn.text}")
    return "\n".join(lines) + "\n"


def _when(time: str) -> str:
    """An ISO time as a reader says it: `2023-05-08 13:56`."""
    return time.replace("T", " ") if time else ""


def _truncate(block: str, room: int) -> str:
    """Cut a block to `room` bytes at a word boundary, keeping its header and verify line."""
    data = block.encode("utf-8")[: max(room - 4, 0)].decode("utf-8", "ignore")
    cut = data.rsplit(" ", 1)[0] if " " in data else data
    return cut + " …\n"
