"""A question to the palace, checked once: its words, how to rank, where to look, at what moment, how much to hand.

`search` and `recall` (search/retrieve.py) take the same Query and share every step up to the ranking; they
differ only in what they hand back. Faces and the library's keyword arguments build it with `make_query`,
the one place where options are normalised and refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from palace_cli.core.dates import parse_moment
from palace_cli.errors import UsageError
from palace_cli.index.scope import Scope, make_scope
from palace_cli.search.profiles import BYTES_PER_TOKEN, PROFILES, Profile

# How one flat ranking scores units: BM25F and cosine fused (falls back to lexical without an embedder),
# BM25F alone, cosine alone.
MODES = ("fused", "lexical", "dense")
# Older names still accepted, so scripts keep working: `hybrid` is `fused`.
MODE_ALIASES = {"hybrid": "fused"}


def mode_named(name: str) -> str:
    """The mode a name means (an older name too); UsageError for a name no mode has."""
    mode = MODE_ALIASES.get(name, name)
    if mode not in MODES:
        raise UsageError(f"unknown mode {name!r}; choose from {', '.join(MODES)}")
    return mode


@dataclass(frozen=True)
class Query:
    """What a caller asked, checked and with every default filled in (make_query builds it)."""

    text: str
    mode: str                 # one of MODES
    k: int                    # recall: memories handed over at most; search: hits
    turns: int                # recall: conversation turns handed over at most
    profile: Profile          # what each handed memory shows; the defaults of k, turns, mode, budget, trim
    budget: int | None        # recall's context budget in bytes (None: unlimited)
    trim: bool                # recall hands only memories close to the best one
    depth: int | None         # recall keeps a ranking at least this long in `ranked` (benchmarks)
    scope: Scope              # kind, time window, sessions, and the domain as written (resolved when ranking)
    domain: str | None        # the domain asked for, as written
    when: datetime | None     # the moment asked about (None: now)
    include_superseded: bool  # rank every memory, those not valid at `when` too (marked)


def make_query(text: str, *, k: int | None = None, turns: int | None = None, mode: str | None = None,
               profile: str = "reference", budget: int | None = None, budget_tokens: int | None = None,
               trim: bool | None = None, depth: int | None = None, domain: str | None = None,
               kind: str | None = None, since: str | None = None, until: str | None = None, sessions=None,
               as_of=None, include_superseded: bool = False) -> Query:
    """A Query from a caller's options; what is not given is the profile's. budget is in bytes, budget_tokens
    (4 bytes each) wins over it; as_of is a date, datetime or ISO text; sessions limits turns to those sessions.
    A bad option raises UsageError naming it."""
    if profile not in PROFILES:
        raise UsageError(f"unknown profile {profile!r}; choose from {', '.join(PROFILES)}")
    spec = PROFILES[profile]
    if budget_tokens is not None:
        budget = budget_tokens * BYTES_PER_TOKEN
    return Query(text=text, mode=mode_named(mode or spec.mode), k=spec.k if k is None else k,
                 turns=spec.turns if turns is None else turns, profile=spec,
                 budget=spec.budget if budget is None else budget, trim=spec.trim if trim is None else trim,
                 depth=depth, scope=make_scope(kind, since, until, domain, sessions), domain=domain,
                 when=_moment(as_of), include_superseded=include_superseded)


def as_query(query: Query | str, options: dict, **defaults) -> Query:
    """`query` itself when it is a Query (then no options may be given), else make_query of the text with the
    caller's options over `defaults`."""
    if isinstance(query, Query):
        if options:
            raise UsageError(f"options ({', '.join(sorted(options))}) go into the Query, not beside it")
        return query
    return make_query(query, **{**defaults, **options})


def _moment(as_of) -> datetime | None:
    """The moment of an as-of question (a date, datetime or ISO text; None: now)."""
    try:
        return parse_moment(as_of)
    except ValueError as exc:
        raise UsageError(f"--as-of: {exc}") from None
