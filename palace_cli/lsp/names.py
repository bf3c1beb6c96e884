"""What the language server knows about a palace at one index version: names to resolve and complete, backlinks.

Built once per note-store version (a refresh that changed a note bumps it), never per keystroke: a
10,000-note palace is a few hundred milliseconds to load and then every lookup is a dict hit or a
bisect.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from palace_cli.editing.lint import NoteChecker
from palace_cli.core.names import Names
from palace_cli.core.text import normalize

if TYPE_CHECKING:
    from palace_cli.core.notes import Memory
    from palace_cli.palace import Palace

LIMIT = 50
FUZZY_MAX = 12  # letters; past that an abbreviation is unlikely and the scan is slow
FIELDS = ("id", "alias", "subject")  # the order a memory's names are preferred in


@dataclass
class Resolved:
    """What a link target names: one memory, several (ambiguous), a note that cannot be read, or nothing."""

    memory: Memory | None = None
    candidates: list[str] = field(default_factory=list)
    broken: str = ""  # path of an unreadable note the name points at
    problem: str = ""


@dataclass
class Match:
    """A memory offered for a typed name, and the name it matched (its id, an alias or its subject)."""

    memory: Memory
    name: str
    field: str  # "id", "alias" or "subject"
    rank: tuple


def _norm_path(ref: str) -> str:
    return re.sub(r":\d+$", "", ref).removeprefix("./")


class Snapshot:
    """The palace's memories at one note-store version, with resolvers and a completion matcher."""

    def __init__(self, palace: Palace, version: int, memories: dict[str, Memory],
                 broken: dict[str, tuple[str, int | None]],
                 link_rows: list[tuple[str, str, str | None, str | None]]):
        self.root = palace.root
        self.version = version
        self.memories = memories
        self.by_path = {m.path: m for m in memories.values()}
        self.broken = broken  # path -> (message, line) of notes that cannot be read
        self.domains = palace.domains()
        self.tokens = {i: m.verify for i, m in memories.items() if m.verify}
        self.checker = NoteChecker(memories)
        self.secrets = self.checker.secrets  # every verify token, to mask them in what hover shows
        self.names = Names(memories.values())  # the one resolver: Palace.memory, lint and links use it too
        self._stems: dict[str, list[str]] = {}
        for path in broken:
            self._stems.setdefault(normalize(Path(path).stem), []).append(path)
        # Completion tables: every name (id, aliases, subject) normalized, sorted, once from its start and once
        # from each later word; and one text of all names, one line per memory, searched at C speed.
        starts: list[tuple[str, int, str, str]] = []  # (normalized name, field order, id, name as written)
        words: list[tuple[str, int, str, str]] = []
        lines: list[str] = []
        self._line_ids: list[str] = []
        for memory in sorted(memories.values(), key=lambda m: m.id):
            subject = normalize(memory.subject)
            aliases = [normalize(a) for a in memory.aliases]
            key_id = normalize(memory.id)
            written = [(key_id, 0, memory.id), (subject, 2, memory.subject)]
            written += [(key, 1, alias) for key, alias in zip(aliases, memory.aliases)]
            for key, order, name in written:
                if key:
                    starts.append((key, order, memory.id, name))
                    words += [(key[m.end():], order, memory.id, name) for m in re.finditer(" ", key)]
            lines.append(" | ".join(key for key, _, _ in written if key))
            self._line_ids.append(memory.id)
        self._starts, self._words = sorted(starts), sorted(words)
        self._start_keys, self._word_keys = [e[0] for e in self._starts], [e[0] for e in self._words]
        self._text = "\n".join(lines) + "\n"
        self._line_offsets = [0]
        for line in lines[:-1]:
            self._line_offsets.append(self._line_offsets[-1] + len(line) + 1)
        self._by_id = [memories[i] for i in self._line_ids]
        self._ids = {i: normalize(i) for i in self._line_ids}
        self._backlinks: dict[str, set[str]] | None = None
        self._link_rows = link_rows

    @classmethod
    def load(cls, palace: Palace) -> Snapshot:
        """The snapshot of the palace's note cache as it is now (no refresh)."""
        store = palace.index.store
        version = store.version()
        memories = palace.index.scan(light=True).memories
        broken = {path: (message, line) for path, message, line in store.errors()}
        rows = store.db.execute("SELECT path, id, json_extract(data, '$.links'), json_extract(data, '$.body_links') "
                                "FROM notes WHERE data IS NOT NULL").fetchall()
        return cls(palace, version, memories, broken, rows)

    # ---- resolving: the rules of Palace.memory(), from tables --------------------------------

    def resolve(self, ref: str) -> Resolved:
        """What a reference names exactly: an id, a path, a file name, an alias, a subject or an anchor."""
        ref = (ref or "").strip()
        if not ref:
            return Resolved()
        if ref in self.memories:
            return Resolved(self.memories[ref])
        path_ref = _norm_path(ref)
        by_path = self.names.path(path_ref)
        if by_path is not None:
            return Resolved(by_path)
        if path_ref in self.broken:
            return Resolved(broken=path_ref, problem=self.broken[path_ref][0])
        if path_ref.endswith(".md") or "/" in path_ref:
            return Resolved()
        wanted = normalize(ref)
        stems = self._stems.get(wanted, []) if wanted else []
        for _rank, matches in self.names.by_rank(ref):
            if len(matches) == 1 and not stems:
                return Resolved(matches[0])
            if len(matches) > 1:
                return Resolved(candidates=sorted(m.id for m in matches))
            if stems:
                return Resolved(broken=stems[0], problem=self.broken[stems[0]][0])
        return Resolved()

    # ---- completing ---------------------------------------------------------------------------

    def match(self, typed: str, limit: int = LIMIT, near_domain: str = "") -> list[Match]:
        """Memories for a name being typed: a name equal to it, then names starting with it, then names with
        a word starting with it, then names containing its words, then its letters in order; `domain/text`
        looks in one domain. Best first (alphabetical within a kind of match), at most limit."""
        domain = ""
        if "/" in typed:
            head, typed = typed.split("/", 1)
            domain = next((d for d in self.domains if d == head), "") or next(
                (d for d in self.domains if d.startswith(head)), "")
        wanted = normalize(typed)
        found: dict[str, Match] = {}

        def offer(note_id: str, tier: int, name: str, kind: str) -> bool:
            memory = self.memories[note_id]
            if note_id not in found and (not domain or memory.domain == domain):
                if kind != "id" and self._ids[note_id].startswith(wanted):
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
                    return self._ranked(found)
        words = sorted(wanted.split(), key=len, reverse=True)
        for index in self._lines_containing(words[0]):
            line = self._text[self._line_offsets[index] : self._text.index("\n", self._line_offsets[index])]
            if all(w in line for w in words[1:]) and offer(self._line_ids[index], 3, self._line_ids[index], "id"):
                return self._ranked(found)
        letters = wanted.replace(" ", "")
        if found and len(letters) >= 5:
            return self._ranked(found)  # five letters that name something: a name being typed, not an abbreviation
        if 2 <= len(letters) <= FUZZY_MAX:  # an abbreviation: its letters in order, within one memory's names
            # The first letter starts a word; `[^\\nx]{0,n}x` finds the next x without backtracking far, and
            # n bounds how loosely the letters may sit (a looser match is noise, and slow to find).
            gap = 2 * len(letters) + 4
            pattern = "(?<![a-z0-9])" + re.escape(letters[0]) + "".join(
                f"[^\\n{re.escape(c)}]{{0,{gap}}}{re.escape(c)}" for c in letters[1:])
            loose = list(self._lines_with(pattern))
            for span, index in sorted((span, index) for index, span in loose):  # tighter first
                if offer(self._line_ids[index], 4, self._line_ids[index], "id"):
                    break
        return self._ranked(found)

    @staticmethod
    def _ranked(found: dict[str, Match]) -> list[Match]:
        return sorted(found.values(), key=lambda m: m.rank)

    def _lines_containing(self, word: str):
        """Indexes of the name lines that contain word, in order (str.find: C speed over the whole text)."""
        position = self._text.find(word)
        while position >= 0:
            index = bisect_right(self._line_offsets, position) - 1
            yield index
            position = self._text.find(word, self._text.index("\n", position) + 1)

    def _lines_with(self, pattern: str):
        """(index, length of the match) of the name lines (one per memory) where the regex matches, in order."""
        compiled = re.compile(pattern)
        position = 0
        while True:
            found = compiled.search(self._text, position)
            if found is None:
                return
            index = bisect_right(self._line_offsets, found.start()) - 1
            yield index, found.end() - found.start()
            position = self._text.index("\n", found.start()) + 1

    def closest(self, ref: str, limit: int = 3) -> list[Memory]:
        """The memories a broken link most likely meant: names starting with it or containing its words, then
        close spellings of ids and subjects."""
        from difflib import get_close_matches

        found = [m.memory for m in self.match(ref, limit) if m.rank[0] < 4]
        if len(found) < limit:
            wanted = normalize(ref)
            spellings = {normalize(m.id): m for m in self.memories.values()}
            spellings.update({normalize(m.subject): m for m in self.memories.values() if m.subject})
            for name in get_close_matches(wanted, list(spellings), n=limit, cutoff=0.6):
                if spellings[name] not in found:
                    found.append(spellings[name])
        return found[:limit]

    # ---- backlinks ------------------------------------------------------------------------------

    def backlinks(self, note_id: str) -> list[str]:
        """Paths of the notes whose frontmatter or body links to this memory (by any name it resolves by)."""
        if self._backlinks is None:
            table: dict[str, set[str]] = {}
            for path, source_id, links, body_links in self._link_rows:
                if self.memories.get(source_id) is None or self.memories[source_id].path != path:
                    continue  # a duplicate id's loser is not indexed
                for target in set(json.loads(links or "[]")) | set(json.loads(body_links or "[]")):
                    found = self.resolve(target).memory
                    if found is not None:
                        table.setdefault(found.id, set()).add(path)
            self._backlinks = table
        return sorted(self._backlinks.get(note_id, ()))
