"""Hop 1 for conversations: which sessions a question is about, and hop 2's order of turns inside the route.

Routing must never cost recall (docs/retrieval.md), so for turns it removes nothing: it reorders. The
flat hybrid ranking gives the candidates; each session is scored by the turns the flat ranking found
in it (their reciprocal-rank mass) and by the cosine of the question to the session's centroid (the
mean of its turn vectors), fused by RRF. A turn's hop-2 score is its flat RRF score plus its session's,
weighted; turns are reordered by it only within blocks of the flat ranking: the turns that will be
handed over (the first `handed`) stay exactly the flat ranking's first `handed` turns, and the rest stay
the rest. So the set recall hands over, and recall at the handed count and at the depth asked, equal
the flat ranking's by construction (tests/search/test_turn_routing.py checks it on generated palaces); what
routing can change is the order inside (recall@1, @5). On LoCoMo that order was worse than the flat
one, so the weight is 0 by default: hop 1 names the sessions, hop 2 keeps the flat order.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from palace_cli.index.turns import KEY_SEP

if TYPE_CHECKING:
    from palace_cli.index.catalog import Catalog
    from palace_cli.palace import Palace
    from palace_cli.search.hits import Hit

RRF_K = 60
# A session's RRF score against its turn's own, in a turn's hop-2 score. 0: hop 2 keeps the flat order.
# Measured on LoCoMo (docs/benchmarks.md, "Conversations"): at 1 the reorder cost recall@1 0.270 -> 0.227
# and recall@5 0.563 -> 0.548 (recall@10 equal by construction), so it is off; the route is still reported.
SESSION_WEIGHT = 0.0
ROUTE_SHOWN = 5       # sessions named in a result's route


@dataclass
class SessionRoute:
    """A session chosen (or considered) by hop 1, with its signals' shares."""

    session: str
    confidence: float
    parts: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"session": self.session, "confidence": round(self.confidence, 4),
                "parts": {k: round(v, 4) for k, v in self.parts.items()}}


def session_of(key: str) -> str:
    return key.split(KEY_SEP, 1)[0]


def route_sessions(palace: Palace, catalog: Catalog, query: str, hits: list[Hit]) -> list[SessionRoute]:
    """Sessions of the flat ranking's turns, best first: RRF of their turns' rank mass and centroid cosine."""
    mass: dict[str, float] = defaultdict(float)
    turns = [h for h in hits if h.kind == "turn"]
    for rank, hit in enumerate(turns, start=1):
        mass[session_of(hit.id)] += 1 / (RRF_K + rank)
    if not mass:
        return []
    rankings = {"turns": sorted(mass.items(), key=lambda p: (-p[1], p[0]))}
    centroid = _centroid_scores(palace, catalog, query, list(mass))
    if centroid:
        rankings["centroid"] = sorted(centroid.items(), key=lambda p: (-p[1], p[0]))
    fused: dict[str, float] = defaultdict(float)
    parts: dict[str, dict[str, float]] = defaultdict(dict)
    for name, ranking in rankings.items():
        for rank, (session, score) in enumerate(ranking, start=1):
            fused[session] += 1 / (RRF_K + rank)
            parts[session][name] = score
    total = sum(fused.values())
    return [SessionRoute(s, v / total, parts[s]) for s, v in sorted(fused.items(), key=lambda p: (-p[1], p[0]))]


def _centroid_scores(palace: Palace, catalog: Catalog, query: str, sessions: list[str]) -> dict[str, float]:
    """Cosine of the query to each session's centroid (computed once per catalog), without an embedder {}."""
    if catalog.matrix is None:
        return {}
    vector = palace.index.query_vector(query)
    if vector is None:
        return {}
    import numpy as np

    cache = catalog.session_centroids
    out = {}
    for session in sessions:
        if session not in cache:
            rows = [row for row in catalog.session_rows.get(session, ()) if catalog.has_vector(row)]
            if not rows:
                continue
            mean = catalog.matrix[rows].mean(axis=0)
            cache[session] = mean / (np.linalg.norm(mean) or 1.0)
        out[session] = float(cache[session] @ vector)
    return out


def reorder(hits: list[Hit], routes: list[SessionRoute], handed: int, weight: float = SESSION_WEIGHT) -> list[Hit]:
    """Hits with the turns reordered by turn + weight x session score inside two blocks of the flat order: the
    first `handed` turns and the rest. Memories keep their places; every block keeps its members."""
    if not routes or not weight:
        return hits
    rank_of = {r.session: rank for rank, r in enumerate(routes, start=1)}
    positions = [i for i, h in enumerate(hits) if h.kind == "turn"]
    turns = [hits[i] for i in positions]

    def score(item: tuple[int, Hit]) -> tuple[float, int]:
        flat_rank, hit = item
        session_rank = rank_of.get(session_of(hit.id))
        bonus = weight / (RRF_K + session_rank) if session_rank else 0.0
        return (-(1 / (RRF_K + flat_rank) + bonus), flat_rank)

    ordered: list[Hit] = []
    for start, end in ((0, handed), (handed, len(turns))):
        block = list(enumerate(turns[start:end], start=start + 1))
        ordered += [hit for _, hit in sorted(block, key=score)]
    out = list(hits)
    for position, hit in zip(positions, ordered):
        out[position] = hit
    return out
