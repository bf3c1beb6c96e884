"""Hop 1 variants applied to any flat ranking: today's route-then-filter with its guard, and the alternatives."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .rank import Ranked, Runner, Variant

# palace_cli/search/retrieve.py's routing rule until issue 16 removed it (commit 5e9cd30 has it)
ROUTE_CONFIDENT, ROUTE_COVER, ROUTE_MAX_DOMAINS, GUARD_SHARE = 0.5, 0.8, 3, 0.9


def palace_routes(corpus, cache_dir: Path) -> dict[str, list[tuple[str, float]]]:
    """qid -> palace's own hop-1 confidences (exact phrases, descriptor BM25, centroid cosine), cached on disk."""
    if corpus.palace is None:
        return {}
    dense = corpus.palace.index.dense().embedder
    model = (dense.model_id if dense else "lexical").replace("/", "_").replace("@", "_").replace(":", "_")
    path = Path(cache_dir) / f"routes-{corpus.name}-{len(corpus.docs)}-{len(corpus.queries)}-{model}.json"
    cached = json.loads(path.read_text()) if path.exists() else {}
    missing = [q for q in corpus.queries if q.qid not in cached]
    if missing:
        try:
            from palace_cli.retrieve import route  # the module before issue 21
        except ImportError:  # recall stopped routing (issue 16, this harness's recommendation 5)
            raise SystemExit(f"{path} lacks {len(missing)} routes and palace no longer has hop 1 "
                             "(palace_cli.retrieve.route): run the harness at commit 5e9cd30 to compute them") from None
        catalog = corpus.palace.index.catalog()
        for q in missing:
            _, considered = route(corpus.palace, catalog, q.text)
            cached[q.qid] = [(r.domain, r.confidence) for r in considered]
        path.write_text(json.dumps(cached))
    return {qid: [tuple(x) for x in value] for qid, value in cached.items()}


def _today_choice(considered: list[tuple[str, float]]) -> list[str]:
    if not considered:
        return []
    if considered[0][1] >= ROUTE_CONFIDENT:
        return [considered[0][0]]
    chosen, mass = [], 0.0
    for domain, confidence in considered:
        chosen.append(domain)
        mass += confidence
        if mass >= ROUTE_COVER:
            break
    return chosen


def _mask(runner: Runner, qi: int, domains: set[str]) -> np.ndarray:
    corpus = runner.corpus
    rows = corpus.groups[corpus.queries[qi].group]
    return np.array([corpus.docs[r].domain in domains for r in rows], dtype=bool)


def routed(runner: Runner, v: Variant, qi: int) -> Ranked:
    """The variant's ranking of query qi after hop 1 (route=flat is the flat ranking itself)."""
    corpus = runner.corpus
    kind, _, arg = v.route.partition(":")
    flat = runner.rank(v, qi)
    if kind == "flat":
        return flat
    considered = runner.routes.get(corpus.queries[qi].qid, [])
    n_domains = len({d.domain for d in corpus.docs})
    if kind in ("boost", "reorder"):
        return _reweighted(runner, flat, considered, float(arg or 1.0) if kind == "boost" else 1.0,
                           int(arg or 3) if kind == "reorder" else None)
    if kind in ("today", "today-noguard"):
        chosen = _today_choice(considered)
        if n_domains < 2 or not chosen or len(chosen) > ROUTE_MAX_DOMAINS:
            return _fallback(flat, corpus)
    elif kind == "keep":
        chosen, mass = [], 0.0
        for domain, confidence in considered:
            chosen.append(domain)
            mass += confidence
            if mass >= float(arg):
                break
    elif kind == "top":
        chosen = [d for d, _ in considered[: int(arg)]]
    elif kind == "aggregate":
        # Domains from the flat ranking itself: each of the top N hits votes 1/(60 + rank) for its domain.
        votes: dict[str, float] = {}
        for rank, row in enumerate(flat.rows[: int(arg or 10)], start=1):
            votes[corpus.docs[row].domain] = votes.get(corpus.docs[row].domain, 0.0) + 1 / (60 + rank)
        total, chosen, mass = sum(votes.values()), [], 0.0
        for domain, vote in sorted(votes.items(), key=lambda p: (-p[1], p[0])):
            chosen.append(domain)
            mass += vote / total
            if mass >= ROUTE_COVER:
                break
        if len(chosen) > ROUTE_MAX_DOMAINS:
            return _fallback(flat, corpus)
    else:
        raise SystemExit(f"unknown route {v.route!r}")
    if not chosen:
        return _fallback(flat, corpus)
    domains = set(chosen)
    result = runner.rank(v, qi, _mask(runner, qi, domains))
    fell_back = False
    if kind == "today":
        lexical = runner.lexical_scores(v, qi)
        rows = corpus.groups[corpus.queries[qi].group]
        best = int(np.argmax(lexical))
        outside = corpus.docs[rows[best]].domain
        if lexical[best] > 0 and outside not in domains:
            inside = lexical[_mask(runner, qi, domains)]
            if not len(inside) or inside.max() < lexical[best] * GUARD_SHARE:
                domains.add(outside)
                fell_back = True
                result = runner.rank(v, qi, _mask(runner, qi, domains))
    result.routed, result.fallback = domains, fell_back
    return result


def _fallback(flat: Ranked, corpus) -> Ranked:
    flat.routed, flat.fallback = {d.domain for d in corpus.docs}, True
    return flat


def _reweighted(runner: Runner, flat: Ranked, considered, strength: float, window: int | None) -> Ranked:
    """Route as a prior on the flat ranking: rank score 1/(60+r) times (1 + strength * domain confidence).

    With a window, only the flat top `window` is reordered, so the flat top-k set is kept exactly.
    """
    confidence = dict(considered)
    docs = runner.corpus.docs
    rows = flat.rows if window is None else flat.rows[:window]
    score = {row: (1 / (60 + rank)) * (1 + strength * confidence.get(docs[row].domain, 0.0))
             for rank, row in enumerate(rows, start=1)}
    order = sorted(rows, key=lambda r: -score[r])
    if window is not None:
        order += flat.rows[window:]
    top_domain = considered[0][0] if considered else None
    return Ranked(order, flat.lexical, flat.dense, {top_domain} if top_domain else None, False)
