"""The whoosh queries of a lexical search: what a scope allows and leaves out, and whoosh's own ranking of them
(the small index's matcher; postings.py scores a big one)."""

from __future__ import annotations

from typing import Iterable

from whoosh.query import And, Or, Term, TermRange

from palace_cli.index.scope import Scope


def search_limits(scope: Scope | None, only: Iterable[str] | None, exclude: Iterable[str]):
    """(the filter of the documents a search may return or None for all, the mask of those it leaves out or None);
    None when nothing can be in scope."""
    if scope is not None and not (scope.memories or scope.turns):
        return None
    allowed = _filter(scope) if scope is not None and not scope.unbounded else None
    if only is not None:
        only = sorted(only)
        if not only:
            return None
        kept = Or([Term("id", i) for i in only])
        allowed = kept if allowed is None else And([allowed, kept])
    exclude = sorted(exclude)
    return allowed, (Or([Term("id", i) for i in exclude]) if exclude else None)


def ranked(searcher, query, limit: int | None, **options) -> list[tuple[str, float]]:
    """[(id, score)] best first, equal scores in id order: whoosh breaks ties by document number, which differs
    between an incrementally updated index and a fresh build, so ties at the cut are fetched whole."""
    if limit is not None and limit <= 0:
        return []
    want = None if limit is None else limit + 8
    while True:
        results = searcher.search(query, limit=want, **options)
        hits = sorted(((hit["id"], float(hit.score)) for hit in results), key=lambda h: (-h[1], h[0]))
        if want is None or len(hits) < want or hits[limit - 1][1] > hits[-1][1]:
            return hits if limit is None else hits[:limit]
        want *= 2


def _filter(scope: Scope):
    """The whoosh query a scope allows: (memories in its domains | turns in its sessions) within its time window."""
    parts = []
    if scope.memories:
        memory = Or([Term("kind", "memory"), Term("kind", "section")])  # a section is part of its note
        if scope.domains is not None:
            memory = And([memory, Or([Term("domain_key", d) for d in scope.domains])])
        parts.append(memory)
    if scope.turns:
        turn = Term("kind", "turn")
        if scope.sessions is not None:
            turn = And([turn, Or([Term("session", s) for s in scope.sessions])])
        parts.append(turn)
    allowed = parts[0] if len(parts) == 1 else Or(parts)
    if scope.timed:
        allowed = And([allowed, TermRange("time", scope.since, scope.upper(), startexcl=False, endexcl=False)])
    return allowed
