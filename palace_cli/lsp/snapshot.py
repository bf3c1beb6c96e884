"""What the language server knows about a palace at one note-store version.

Built once per version (a refresh that changed a note bumps it), in the background, never per keystroke.
Names, backlinks and suggestions are the core resolver's (`core.names.Names`, as `Palace.memory`, lint,
`palace backlinks` and `palace mv` use it); this adds what an editor needs beside them: the notes that
cannot be read, lint's checker, the completion tables, and a backlink table by id.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

from palace_cli.core.names import Names, Resolved
from palace_cli.core.notes import Memory
from palace_cli.editing.lint import NoteChecker
from palace_cli.errors import Ambiguous
from palace_cli.lsp.matcher import Matcher

if TYPE_CHECKING:
    from palace_cli.palace import Palace

NEAR_CACHE = 256  # suggestions remembered per snapshot: editors ask for code actions at every cursor move


class Snapshot:
    """The palace's memories at one note-store version, resolved by the core, with the server's own tables."""

    def __init__(self, version: int, names: Names, broken: dict[str, tuple[str, int | None]],
                 link_rows: list[tuple[str, str, list[str]]]):
        self.version = version
        self.names = names
        self.memories: dict[str, Memory] = names.ids
        self.by_path: dict[str, Memory] = names.paths
        self.broken = broken  # path -> (message, line) of notes that cannot be read
        # The unreadable notes as the resolver sees a name: by path or file name, with the rules of real notes.
        self._unreadable = Names(Memory(id=path, subject="", anchor="", verify="", domain="", path=path)
                                 for path in broken)
        self.tokens = {i: m.verify for i, m in self.memories.items() if m.verify}
        self.checker = NoteChecker(self.memories)
        self.secrets = self.checker.secrets  # every verify token, to mask them in what hover shows
        self.matcher = Matcher(self.memories.values())
        self._link_rows = link_rows
        self._backlinks: dict[str, list[str]] | None = None
        self._near: OrderedDict[tuple[str, int], list[Memory]] = OrderedDict()

    @classmethod
    def load(cls, palace: Palace) -> Snapshot:
        """The snapshot of the palace's note cache as it is now (no refresh)."""
        store = palace.index.store
        version = store.version()
        broken = {path: (message, line) for path, message, line in store.errors()}
        return cls(version, palace.index.names(), broken, store.link_rows())

    def resolve(self, target: str) -> Resolved | None:
        """What a link target names, by the rules lint and every command use: None when nothing; Ambiguous."""
        return self.names.resolve(target)

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
            for path, source_id, targets in self._link_rows:
                source = self.memories.get(source_id)
                if source is None or source.path != path:
                    continue  # a duplicate id's loser is not indexed
                for linked in self.names.linked_ids(targets):
                    table.setdefault(linked, set()).add(path)
            self._backlinks = {i: sorted(paths) for i, paths in table.items()}
        return self._backlinks.get(note_id, [])
