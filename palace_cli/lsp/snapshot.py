"""What the language server knows about a palace at one note-store version.

Built once per version (a refresh that changed a note bumps it), in the background, never per keystroke.
Names, backlinks and suggestions are the core resolver's (`core.names.Names`, as `Palace.memory`, lint,
`palace backlinks` and `palace mv` use it); this adds what an editor needs beside them: the notes that
cannot be read, lint's checker, the completion tables, a backlink table by id, the vault's files that are not
notes, and how the vault writes links (`core.names.link_style`). With no cache yet (`.palace/` new), a cold
snapshot is read from the note files themselves, so the first answer is right before the first refresh is done.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import TYPE_CHECKING

from palace_cli.core.names import Files, Names, Resolved, link_style
from palace_cli.core.notefile import load_note
from palace_cli.core.notes import Memory
from palace_cli.core.walk import attachment_files, note_files
from palace_cli.editing.lint import NoteChecker
from palace_cli.errors import Ambiguous, NoteError
from palace_cli.lsp.matcher import Matcher

if TYPE_CHECKING:
    from palace_cli.palace import Palace

NEAR_CACHE = 256  # suggestions remembered per snapshot: editors ask for code actions at every cursor move
RECHECK_S = 2.0  # a link to a file not seen looks at the folder again, at most this often (a file just added)


class LiveFiles(Files):
    """The palace's files that are not notes, walked again when a link names one not seen (at most every
    RECHECK_S): a picture pasted a moment ago resolves, without a walk per keystroke."""

    def __init__(self, palace: Palace):
        self._palace = palace
        self._walk()

    def _walk(self) -> None:
        Files.__init__(self, attachment_files(self._palace.root, self._palace.rules))
        self._walked = time.monotonic()

    def resolve(self, target: str, source: str = "", anywhere: bool = True) -> str | None:
        """The path of the file a link names (core.names.Files.resolve), looking again when it is not known."""
        found = super().resolve(target, source, anywhere)
        if found is None and time.monotonic() - self._walked > RECHECK_S:
            self._walk()
            found = super().resolve(target, source, anywhere)
        return found


class Snapshot:
    """The palace's memories at one note-store version, resolved by the core, with the server's own tables."""

    def __init__(self, version: int, names: Names, broken: dict[str, tuple[str, int | None]],
                 link_rows: list[tuple[str, str, list[str], list[str]]], files: Files | None = None,
                 cold: bool = False):
        self.version = version
        self.cold = cold  # read from the note files, not the cache (no cache yet): right, not yet indexed
        self.names = names
        self.memories: dict[str, Memory] = names.ids
        self.by_path: dict[str, Memory] = names.paths
        self.broken = broken  # path -> (message, line) of notes that cannot be read
        # The unreadable notes as the resolver sees a name: by path or file name, with the rules of real notes.
        self._unreadable = Names(Memory(id=path, subject="", anchor="", verify="", domain="", path=path)
                                 for path in broken)
        self.tokens = {i: m.verify for i, m in self.memories.items() if m.verify}
        self.files = files
        self.checker = NoteChecker(self.memories, files=files)
        self.secrets = self.checker.secrets  # every verify token, to mask them in what hover shows
        self.matcher = Matcher(self.memories.values())
        self._link_rows = link_rows
        self.style = link_style(names, ((row[0], target) for row in link_rows for target in row[3]))
        self._backlinks: dict[str, list[str]] | None = None
        self._near: OrderedDict[tuple[str, int], list[Memory]] = OrderedDict()

    @classmethod
    def load(cls, palace: Palace) -> Snapshot:
        """The snapshot of the palace's note cache as it is now (no refresh)."""
        store = palace.index.store
        version = store.version()
        broken = {path: (message, line) for path, message, line in store.errors()}
        return cls(version, palace.index.names(), broken, store.link_rows(), LiveFiles(palace))

    @classmethod
    def cold_load(cls, palace: Palace, version: int) -> Snapshot:
        """The snapshot of the note files as they are on disk, read without the cache (which is empty): what the
        first refresh will find, known before it is done. `version` is the cache's (a newer one replaces it)."""
        memories: dict[str, Memory] = {}
        broken: dict[str, tuple[str, int | None]] = {}
        for note in note_files(palace.root, palace.rules):
            try:
                memory = load_note(palace.root, note.relpath, note.domain)
            except NoteError as exc:
                broken[note.relpath] = (exc.reason, exc.line)
                continue
            memories.setdefault(memory.id, memory)  # a repeated id: the first path keeps it, as a refresh does
        rows = [(m.path, m.id, [*m.all_links, *m.supersedes, *m.superseded_by], m.body_links + m.property_links)
                for m in sorted(memories.values(), key=lambda m: m.path)]
        return cls(version, Names(memories.values()), broken, rows, LiveFiles(palace), cold=True)

    def resolve(self, target: str, source: str = "") -> Resolved | None:
        """What a link target (in the note at `source`) names, by the rules lint and every command use: None when
        nothing; Ambiguous."""
        return self.names.resolve(target, source=source)

    def link_name(self, memory: Memory, source: str | None) -> str:
        """The target a new link to `memory` from the note at `source` is written with, the way this vault writes
        its links (`core.names.Names.link_name` in the vault's style)."""
        return self.names.link_name(memory, self.style, source or "")

    def file(self, target: str, source: str | None, anywhere: bool = True) -> str | None:
        """The path of the file that is not a note a link names (`![[photo.jpg]]`), or None."""
        return self.files.resolve(target, source or "", anywhere) if self.files is not None else None

    def unreadable(self, target: str) -> str | None:
        """The path of the note that cannot be read which a link target names (by path or file name), or None."""
        try:
            found = self._unreadable.resolve(target, ranks=1)
        except Ambiguous as exc:
            return exc.candidates[0]
        return found.memory.path if found else None

    def near(self, target: str, limit: int = 3) -> list[Memory]:
        """The memories a link that names none most likely meant (the core's suggestion, remembered)."""
        key = (target, limit)
        if key not in self._near:
            self._near[key] = self.names.near(target, limit)
            if len(self._near) > NEAR_CACHE:
                self._near.popitem(last=False)
        return self._near[key]

    def backlinks(self, note_id: str) -> list[str]:
        """Paths of the notes whose frontmatter or body links to this memory (by any name it resolves by)."""
        if self._backlinks is None:
            table: dict[str, set[str]] = {}
            for path, source_id, targets, _written in self._link_rows:
                source = self.memories.get(source_id)
                if source is None or source.path != path:
                    continue  # a duplicate id's loser is not indexed
                for linked in self.names.linked_ids(targets, path):
                    table.setdefault(linked, set()).add(path)
            self._backlinks = {i: sorted(paths) for i, paths in table.items()}
        return self._backlinks.get(note_id, [])
