"""When a memory is true: validity dates, version links (supersedes / superseded_by), what is valid at a moment.

Pure functions over plain values. The rules (docs/note-format.md, "Facts that change"):

- A date means the start of that day in UTC; a time without a zone is UTC. So every palace, on every
  machine, agrees on when a version starts and stops.
- A memory is valid at T when start <= T < end: `valid_from` inclusive, `valid_until` exclusive.
- start is `valid_from`; in an as-of question, `created` stands in when it is missing. A question about
  now never hides a memory for its `created` date (a `created` ahead of UTC's calendar is a time zone,
  not the future), only for an explicit `valid_from` in the future.
- end is `valid_until`; when it is missing and another memory supersedes this one (a link on either
  note), the earliest start of its successors; when no successor has a date either, the memory counts
  as superseded at every moment.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from palace_cli.core.dates import NEVER, now, parse_moment


@dataclass
class Entry:
    """What one memory says about its own validity (raw, as read from its note)."""

    id: str
    valid_from: str = ""
    valid_until: str = ""
    created: str = ""
    supersedes: tuple[str, ...] = ()
    superseded_by: tuple[str, ...] = ()

    @property
    def versioned(self) -> bool:
        return bool(self.valid_from or self.valid_until or self.supersedes or self.superseded_by)


def _moment_or_none(text: str) -> datetime | None:
    try:
        return parse_moment(text)
    except ValueError:
        return None  # lint reports it; an unreadable date constrains nothing


class Versions:
    """The version graph of a palace: who supersedes whom (either note's link counts), and validity in time."""

    def __init__(self, entries):
        self.entries: dict[str, Entry] = {}
        self.successors: dict[str, list[str]] = {}
        self.predecessors: dict[str, list[str]] = {}
        self._created: dict[str, str] = {}
        self._moments: dict[tuple[str, str], datetime | None] = {}
        for entry in entries:
            if entry.id in self._created:
                continue  # a duplicated id: the first keeps it, as everywhere else
            self._created[entry.id] = entry.created
            if not entry.versioned:
                continue
            self.entries[entry.id] = entry
            for old in entry.supersedes:
                self._link(old, entry.id)
            for new in entry.superseded_by:
                self._link(entry.id, new)
        for table in (self.successors, self.predecessors):
            for key in table:
                table[key].sort()

    @classmethod
    def of(cls, memories) -> "Versions":
        """The graph of Memory objects (anything with the validity attributes)."""
        return cls(Entry(m.id, m.valid_from, m.valid_until, m.created, tuple(m.supersedes), tuple(m.superseded_by))
                   for m in memories)

    def _link(self, old: str, new: str) -> None:
        if new not in self.successors.setdefault(old, []):
            self.successors[old].append(new)
        if old not in self.predecessors.setdefault(new, []):
            self.predecessors[new].append(old)

    def _moment(self, memory_id: str, name: str) -> datetime | None:
        key = (memory_id, name)
        if key not in self._moments:
            if name == "created":
                raw = self._created.get(memory_id, "")
            else:
                entry = self.entries.get(memory_id)
                raw = getattr(entry, name) if entry else ""
            self._moments[key] = _moment_or_none(raw)
        return self._moments[key]

    def known(self, memory_id: str) -> bool:
        """True when a memory with this id was read."""
        return memory_id in self._created

    def start(self, memory_id: str, use_created: bool = True) -> datetime | None:
        """When the memory became true: valid_from, else (use_created) its created date, else None (always)."""
        explicit = self._moment(memory_id, "valid_from")
        if explicit is not None or not use_created:
            return explicit
        return self._moment(memory_id, "created")

    def end(self, memory_id: str) -> datetime | None:
        """When it stopped: valid_until, else its successors' earliest start, else None (still true).

        Superseded with no date anywhere: NEVER (it counts as superseded at every moment)."""
        explicit = self._moment(memory_id, "valid_until")
        if explicit is not None:
            return explicit
        successors = self.successors.get(memory_id)
        if not successors:
            return None
        starts = [s for s in (self.start(new) for new in successors) if s is not None]
        return min(starts) if starts else NEVER

    def valid_at(self, memory_id: str, when: datetime | None = None) -> bool:
        """Valid at `when` (created standing in for valid_from); None means now (created never hides)."""
        moment = when or now()
        start = self.start(memory_id, use_created=when is not None)
        if start is not None and moment < start:
            return False
        end = self.end(memory_id)
        return end is None or moment < end

    def hidden(self, when: datetime | None = None) -> set[str]:
        """Ids of the memories not valid at `when` (None: now)."""
        if when is None:
            candidates = self.entries.keys() | self.successors.keys()
        else:
            candidates = self._created.keys()
        return {i for i in candidates if self.known(i) and not self.valid_at(i, when)}

    def status(self, memory_id: str, when: datetime | None = None) -> str:
        """current, superseded, expired (its valid_until has passed, nothing replaced it) or future."""
        if self.valid_at(memory_id, when):
            return "current"
        moment = when or now()
        start = self.start(memory_id, use_created=when is not None)
        if start is not None and moment < start:
            return "future"
        return "superseded" if self.successors.get(memory_id) else "expired"

    def chain(self, memory_id: str) -> list[str]:
        """Every version linked to this one (both directions, transitively), oldest first."""
        seen, stack = set(), [memory_id]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            stack += self.successors.get(current, []) + self.predecessors.get(current, [])
        return self._ordered(seen)

    def _ordered(self, ids: set[str]) -> list[str]:
        """Predecessors before successors (Kahn's algorithm), ties by start then id; a cycle's members last."""
        far = datetime.max.replace(tzinfo=timezone.utc)

        def key(i: str):
            return (self.start(i) or NEVER if self.known(i) else far, i)

        waiting = {i: len([p for p in self.predecessors.get(i, []) if p in ids]) for i in ids}
        ready = sorted([i for i, n in waiting.items() if n == 0], key=key)
        out = []
        while ready:
            current = ready.pop(0)
            out.append(current)
            for new in self.successors.get(current, []):
                if new in waiting:
                    waiting[new] -= 1
                    if waiting[new] == 0:
                        ready.append(new)
                        ready.sort(key=key)
        return out + sorted((i for i in ids if i not in out), key=key)

    def cycles(self) -> list[list[str]]:
        """Every cycle of supersede links (each once, as its sorted ids)."""
        found, state = [], {}
        for origin in sorted(self.successors):
            if origin in state:
                continue
            stack = [(origin, iter(self.successors.get(origin, [])))]
            path = [origin]
            state[origin] = "open"
            while stack:
                node, children = stack[-1]
                child = next(children, None)
                if child is None:
                    stack.pop()
                    path.pop()
                    state[node] = "done"
                elif state.get(child) == "open":
                    found.append(sorted(path[path.index(child):]))
                elif child not in state:
                    state[child] = "open"
                    path.append(child)
                    stack.append((child, iter(self.successors.get(child, []))))
        return sorted({tuple(c): c for c in found}.values())

    def one_sided(self) -> list[tuple[str, str, str]]:
        """(old, new, missing side) of links written on one note only; the side is the note lacking it."""
        out = []
        for old, news in sorted(self.successors.items()):
            for new in news:
                on_new = new in self.entries and old in self.entries[new].supersedes
                on_old = old in self.entries and new in self.entries[old].superseded_by
                if on_new != on_old and self.known(old) and self.known(new):
                    out.append((old, new, old if on_new else new))
        return out

    def forks(self, when: datetime | None = None) -> list[tuple[str, list[str]]]:
        """(old, successors) where two or more successors are valid at once (two branches replaced one fact)."""
        out = []
        for old, news in sorted(self.successors.items()):
            current = [n for n in news if self.known(n) and self.valid_at(n, when)]
            if len(current) > 1:
                out.append((old, current))
        return out

