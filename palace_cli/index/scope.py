"""Which units a ranking may return: one filter (kind, time window, domains, sessions) that every ranking applies."""

from __future__ import annotations

from dataclasses import dataclass

from palace_cli.core.dates import time_bound
from palace_cli.errors import UsageError

KINDS = ("memory", "turn")
PAST_END = "~"  # sorts after every character an ISO time holds: "2023-05-08~" is the end of that day


@dataclass(frozen=True)
class Scope:
    """A filter over retrieval units.

    kind: "memory", "turn" or None (both). since/until: ISO times or their prefixes (`2023`, `2023-05`,
    `2023-05-08`, `2023-05-08T13:56`), both ends inclusive at the bound's precision; a unit without a
    time is outside every time window. Times compare as written (the source's local time). domains:
    the memory domains allowed (None: all; a memory outside them is out); sessions: the session ids
    whose turns are allowed (None: all).
    """

    kind: str | None = None
    since: str | None = None
    until: str | None = None
    domains: tuple[str, ...] | None = None
    sessions: tuple[str, ...] | None = None

    @property
    def timed(self) -> bool:
        return self.since is not None or self.until is not None

    @property
    def memories(self) -> bool:
        """Whether any memory can be in scope."""
        return self.kind in (None, "memory") and (self.domains is None or bool(self.domains))

    @property
    def turns(self) -> bool:
        """Whether any turn can be in scope."""
        return self.kind in (None, "turn") and (self.sessions is None or bool(self.sessions))

    @property
    def unbounded(self) -> bool:
        """True when the scope lets every unit through."""
        return self.kind is None and not self.timed and self.domains is None and self.sessions is None

    def upper(self) -> str | None:
        """The inclusive upper bound as a string every time inside the window sorts at or below."""
        return None if self.until is None else self.until + PAST_END

    def within(self, time: str) -> bool:
        """Whether a unit's time (ISO, or "" for none) lies in the window."""
        if not self.timed:
            return True
        if not time:
            return False
        return (self.since is None or time >= self.since) and (self.until is None or time <= self.until + PAST_END)


def make_scope(kind: str | None = None, since: str | None = None, until: str | None = None,
               domain: str | None = None, sessions=None) -> Scope:
    """A Scope from the faces' options (--kind, --since, --until, --domain; sessions: only these sessions'
    turns), checked."""
    if kind is not None and kind not in KINDS:
        raise UsageError(f"unknown kind {kind!r}; choose from {', '.join(KINDS)}")
    since, until = time_bound(since, "--since"), time_bound(until, "--until")
    if since and until and since > until + PAST_END:
        raise UsageError(f"--since {since} is after --until {until}: nothing can match")
    if domain is not None and kind == "turn":
        raise UsageError("--domain names a memory domain; turns are in no domain (drop --domain or --kind turn)")
    turns = () if domain is not None else (tuple(sessions) if sessions is not None else None)
    return Scope(kind, since, until, (domain,) if domain is not None else None, turns)
