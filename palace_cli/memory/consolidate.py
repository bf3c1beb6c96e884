"""`palace consolidate`: what the memories have become, proposed to a person; nothing is ever deleted.

Three kinds of proposal, over the memories valid now:

- merges: two memories about the same person (or two without one) that say nearly the same thing (the lexical
  score of `search.similar` at or above `[consolidate] merge`, 0.5 by default): keep the one told in more
  sessions, else the newer, and supersede the other;
- promotions: a fact told in `[consolidate] core_sessions` sessions or more (its own and those in its
  `confirmed_by`, 3 by default) and not yet `core: true`: always worth waking up with;
- fading: a memory neither confirmed (`confirmed`), nor studied (reviews/*.jsonl), nor stated (valid_from,
  created) for `[consolidate] fade_after_days` days (180 by default): a person decides whether it still holds.

`promote=True` writes `core: true` into the promoted memories' frontmatter (nothing else); merges and fading
are only reported, with the command that would act on each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta

from palace_cli.core.dates import said_on, today
from palace_cli.core.noteedit import update_frontmatter
from palace_cli.core.validity import Versions
from palace_cli.errors import UsageError
from palace_cli.palace import Palace
from palace_cli.progress import Progress

MERGE = 0.5
CORE_SESSIONS = 3
FADE_AFTER_DAYS = 180


@dataclass
class Consolidation:
    """The proposals of one consolidate run."""

    as_of: str
    merges: list[dict] = field(default_factory=list)
    promotions: list[dict] = field(default_factory=list)
    fading: list[dict] = field(default_factory=list)
    promoted: list[str] = field(default_factory=list)  # written core: true (promote=True)
    memories: int = 0

    def as_dict(self) -> dict:
        """JSON-ready form (`palace consolidate --json`)."""
        return {"as_of": self.as_of, "memories": self.memories,
                "counts": {"merges": len(self.merges), "promotions": len(self.promotions),
                           "fading": len(self.fading), "promoted": len(self.promoted)},
                "merges": self.merges, "promotions": self.promotions, "fading": self.fading,
                "promoted": self.promoted}


def _setting(palace: Palace, name: str, default, kind):
    raw = palace.config.raw.get("consolidate", {})
    value = raw.get(name, default) if isinstance(raw, dict) else default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise UsageError(f"palace.toml [consolidate] {name}: {value!r} is not a number of {kind}")
    return value


def sessions_of(memory) -> set[str]:
    """The sessions a memory was told in: its own and those of the turns that confirmed it."""
    found = {str(memory.meta["session"])} if memory.meta.get("session") else set()
    confirmed = memory.meta.get("confirmed_by")
    for key in confirmed if isinstance(confirmed, list) else []:
        found.add(str(key).split("/", 1)[0])
    return found


def last_seen(memory, reviewed: dict[str, date]) -> date | None:
    """The latest day a memory was stated, confirmed or studied."""
    days = [said_on(v) for v in (memory.valid_from, memory.created, memory.meta.get("confirmed")) if v]
    days.append(reviewed.get(memory.id))
    days = [d for d in days if d is not None]
    return max(days) if days else None


def consolidate(palace: Palace, *, as_of: str | None = None, domain: str | None = None, promote: bool = False,
                progress: Progress | None = None) -> Consolidation:
    """Propose merges, promotions to core and fading memories (see the module); write only `core: true`, and
    only with `promote`."""
    merge = _setting(palace, "merge", MERGE, "a similarity score")
    core_sessions = _setting(palace, "core_sessions", CORE_SESSIONS, "sessions")
    fade_days = _setting(palace, "fade_after_days", FADE_AFTER_DAYS, "days")
    moment = said_on(as_of) if as_of else today().date()
    if moment is None:
        raise UsageError(f"--as-of {as_of!r}: give a date like 2026-03-02")
    try:
        horizon = moment - timedelta(days=fade_days)  # last seen before it: fading
    except OverflowError:  # --as-of in the first days of year 1: nothing was seen before the calendar began
        horizon = date.min
    palace.refresh(embedder=None)
    scan = palace.index.scan()
    hidden = Versions.of(scan.memories.values()).hidden()
    memories = sorted((m for m in scan.memories.values() if m.id not in hidden
                       and (domain is None or m.domain == palace.resolve_domain(domain))), key=lambda m: m.id)
    result = Consolidation(moment.isoformat(), memories=len(memories))
    reviewed = _reviewed(palace)
    seen_pairs: set[tuple[str, str]] = set()
    for number, memory in enumerate(memories, 1):
        result.merges += _merges(palace, scan.memories, memory, hidden, merge, seen_pairs)
        told = sessions_of(memory)
        if len(told) >= core_sessions and not memory.core:
            result.promotions.append({"id": memory.id, "subject": memory.subject, "sessions": len(told),
                                      "path": memory.path})
        seen = last_seen(memory, reviewed)
        if not memory.core and seen is not None and seen < horizon:
            result.fading.append({"id": memory.id, "subject": memory.subject, "last_seen": seen.isoformat(),
                                  "days": (moment - seen).days, "path": memory.path})
        if progress:
            progress("consolidating", number, len(memories))
    if promote:
        _promote(palace, result)
    return result


def _reviewed(palace: Palace) -> dict[str, date]:
    """memory id -> the last day it was studied (reviews/*.jsonl)."""
    from palace_cli.editing.reviewlog import ReviewLog

    reviewed: dict[str, date] = {}
    for review in ReviewLog(palace).read().reviews:
        day = review.at.date()
        reviewed[review.id] = max(day, reviewed.get(review.id, day))
    return reviewed


def _merges(palace: Palace, memories: dict, memory, hidden, merge: float, seen_pairs: set[tuple[str, str]]) -> list[dict]:
    """The merges a memory takes part in that no earlier memory proposed: each near neighbour (score at least
    `merge`, valid now, about the same person) as a pair to keep one of and supersede the other."""
    from palace_cli.search.similar import similar

    out = []
    for neighbour in similar(palace, ref=memory.id, k=3, do_refresh=False).neighbours:
        other = memories.get(neighbour.id)
        pair = tuple(sorted((memory.id, neighbour.id)))
        if (other is None or neighbour.score < merge or pair in seen_pairs or other.id in hidden
                or other.meta.get("about") != memory.meta.get("about")):
            continue
        seen_pairs.add(pair)
        # Keep the one told in more sessions (its confirmations stay with it), else the newer one.
        older, newer = sorted((memory, other), key=lambda m: (len(sessions_of(m)), str(m.valid_from or m.created),
                                                              m.id))
        out.append({"keep": newer.id, "supersede": older.id, "score": round(neighbour.score, 3),
                    "shared": neighbour.shared, "about": memory.meta.get("about"),
                    "command": f"palace supersede {older.id} {newer.id}"})
    return out


def _promote(palace: Palace, result: Consolidation) -> None:
    """Write `core: true` into each proposed promotion's frontmatter (nothing else), then refresh."""
    for item in result.promotions:
        update_frontmatter(palace.root / item["path"], {"core": True}, item["path"])
        result.promoted.append(item["id"])
    if result.promoted:
        palace.refresh(embedder=None)
