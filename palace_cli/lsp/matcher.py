"""Completion after `[[`: the memories for a name being typed, from tables built once per index version.

What a link names is the core resolver's business (`core.names`); this only ranks candidates for a few
typed letters, fast enough for every keystroke at 100,000 names: a bisect in sorted names, `str.find` in
one text of all names, and a bounded regex for abbreviations.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass

from palace_cli.core.notes import Memory
from palace_cli.core.text import normalize

LIMIT = 50
FUZZY_MAX = 12  # letters; past that an abbreviation is unlikely and the scan is slow
FIELDS = ("id", "name", "alias", "subject")  # the order a memory's names are preferred in ("name": its file's)


@dataclass
class Match:
    """A memory offered for a typed name, and the name it matched (its id, file name, an alias or its subject)."""

    memory: Memory
    name: str
    field: str  # "id", "name", "alias" or "subject"
    rank: tuple


class Matcher:
    """Every name (id, file name, aliases, subject) of a set of memories, normalized and sorted: once from its
    start and once from each later word; and one text of all names, one line per memory, searched at C speed."""

    def __init__(self, memories: Iterable[Memory]):
        starts: list[tuple[str, int, str, str]] = []  # (normalized name, field order, id, name as written)
        words: list[tuple[str, int, str, str]] = []
        lines: list[str] = []
        self._by_id: list[Memory] = sorted(memories, key=lambda m: m.id)
        self._memories = {m.id: m for m in self._by_id}
        self._stems: dict[str, str] = {}
        for memory in self._by_id:
            stem = memory.path.rsplit("/", 1)[-1].removesuffix(".md")
            written = [(normalize(memory.id), 0, memory.id), (normalize(memory.subject), 3, memory.subject)]
            if normalize(stem) != normalize(memory.id):
                written.append((normalize(stem), 1, stem))
            self._stems[memory.id] = normalize(stem)
            written += [(normalize(alias), 2, alias) for alias in memory.aliases]
            for key, order, name in written:
                if key:
                    starts.append((key, order, memory.id, name))
                    words += [(key[m.end():], order, memory.id, name) for m in re.finditer(" ", key)]
            lines.append(" | ".join(key for key, _, _ in written if key))
        self._starts, self._words = sorted(starts), sorted(words)
        self._start_keys, self._word_keys = [e[0] for e in self._starts], [e[0] for e in self._words]
        self._text = "\n".join(lines) + "\n"
        self._line_offsets = [0]
        for line in lines[:-1]:
            self._line_offsets.append(self._line_offsets[-1] + len(line) + 1)
        self._ids = {m.id: normalize(m.id) for m in self._by_id}

    def match(self, typed: str, limit: int = LIMIT, near_domain: str = "", domain: str = "") -> list[Match]:
        """Memories for a name being typed: a name equal to it, then names starting with it, then names with
        a word starting with it, then names containing its words, then its letters in order; only `domain`'s
        when given. Best first (alphabetical within a kind of match), at most limit."""
        wanted = normalize(typed)
        found: dict[str, Match] = {}

        def offer(note_id: str, tier: int, name: str, kind: str) -> bool:
            memory = self._memories[note_id]
            if note_id not in found and (not domain or memory.domain == domain):
                if kind in ("alias", "subject") and self._stems[note_id].startswith(wanted):
                    name, kind = memory.path.rsplit("/", 1)[-1].removesuffix(".md"), "name"  # it says it as well
                elif kind in ("alias", "subject") and self._ids[note_id].startswith(wanted):
                    name, kind = note_id, "id"  # the id says it as well: insert the id alone
                found[note_id] = Match(memory, name, kind, (tier, len(found)))
            return len(found) >= limit

        if not wanted:
            near = domain or near_domain
            for memory in [m for m in self._by_id if m.domain == near] + [m for m in self._by_id if m.domain != near]:
                if offer(memory.id, 0, memory.id, "id"):
                    break
            return list(found.values())
        for tier, keys, entries in ((1, self._start_keys, self._starts), (2, self._word_keys, self._words)):
            for key, order, note_id, name in entries[bisect_left(keys, wanted):]:
                if not key.startswith(wanted):
                    break
                if offer(note_id, 0 if key == wanted and tier == 1 else tier, name, FIELDS[order]):
                    return _ranked(found)
        words = sorted(wanted.split(), key=len, reverse=True)
        for index in self._lines_containing(words[0]):
            line = self._text[self._line_offsets[index] : self._text.index("\n", self._line_offsets[index])]
            if all(w in line for w in words[1:]) and offer(self._by_id[index].id, 3, self._by_id[index].id, "id"):
                return _ranked(found)
        letters = wanted.replace(" ", "")
        if found and len(letters) >= 5:
            return _ranked(found)  # five letters that name something: a name being typed, not an abbreviation
        if 2 <= len(letters) <= FUZZY_MAX:  # an abbreviation: its letters in order, within one memory's names
            # The first letter starts a word; `[^\\nx]{0,n}x` finds the next x without backtracking far, and
            # n bounds how loosely the letters may sit (a looser match is noise, and slow to find).
            gap = 2 * len(letters) + 4
            pattern = "(?<![a-z0-9])" + re.escape(letters[0]) + "".join(
                f"[^\\n{re.escape(c)}]{{0,{gap}}}{re.escape(c)}" for c in letters[1:])
            for span, index in sorted((span, index) for index, span in self._lines_with(pattern)):  # tighter first
                if offer(self._by_id[index].id, 4, self._by_id[index].id, "id"):
                    break
        return _ranked(found)

    def _lines_containing(self, word: str):
        """Indexes of the name lines that contain word, in order (str.find: C speed over the whole text)."""
        position = self._text.find(word)
        while position >= 0:
            yield bisect_right(self._line_offsets, position) - 1
            position = self._text.find(word, self._text.index("\n", position) + 1)

    def _lines_with(self, pattern: str):
        """(index, length of the match) of the name lines (one per memory) where the regex matches, in order."""
        compiled = re.compile(pattern)
        position = 0
        while True:
            found = compiled.search(self._text, position)
            if found is None:
                return
            yield bisect_right(self._line_offsets, found.start()) - 1, found.end() - found.start()
            position = self._text.index("\n", found.start()) + 1


def _ranked(found: dict[str, Match]) -> list[Match]:
    return sorted(found.values(), key=lambda m: m.rank)
