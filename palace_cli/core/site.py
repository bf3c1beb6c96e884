"""Site(root): what the index and the writers need of a palace's folder, and nothing of its index.

A site is the root, palace.toml, which files are notes and their domains (`NoteRules`), the note walker,
where the caches and the generated files go, and a way to tell the user something once. `Palace` holds
one and adds the index and the resolvers; the index takes a site, never a Palace.
"""

from __future__ import annotations

import os
from pathlib import Path

from palace_cli.core.config import PalaceConfig, load_config
from palace_cli.core.layout import CACHE_DIR, INDEX_DIR, MEMORIES, ROOT_INDEX, NoteFile, NoteRules, Problem, confined_target
from palace_cli.core.walk import note_files, stray_notes


class Site:
    """The folder of one palace: its root (resolved), palace.toml and the rules it gives."""

    def __init__(self, root: Path):
        self.root = Path(root).resolve()
        self.config: PalaceConfig = load_config(self.root)
        self.rules = NoteRules(self.config.notes, self.config.notes.index_folder)
        self._cache_dir: Path | None = None
        self.notices: list[str] = []  # one-line notices for the user (a face shows them, once)
        self.notify = None  # called with each notice as it arises, when a face sets it (the CLI: stderr)

    def reload_config(self) -> None:
        """Read palace.toml again (the watcher does, when it changes)."""
        self.config = load_config(self.root)
        self.rules = NoteRules(self.config.notes, self.config.notes.index_folder)

    # ---- where things are ----------------------------------------------------------------------

    @property
    def memories_dir(self) -> Path:
        return self.root / MEMORIES

    @property
    def adopted(self) -> bool:
        """True for an adopted vault (palace.toml [notes] include): notes wherever they lie, not only in memories/."""
        return self.rules.adopted

    @property
    def root_index(self) -> str:
        """Where the generated level-0 index is, relative to the root: INDEX.md, or inside [notes] index_folder."""
        folder = self.config.notes.index_folder
        return f"{folder}/{ROOT_INDEX}" if folder else ROOT_INDEX

    @property
    def index_dir(self) -> str:
        """Where the generated domain index files are, relative to the root: index/, or inside [notes] index_folder."""
        folder = self.config.notes.index_folder
        return f"{folder}/{INDEX_DIR}" if folder else INDEX_DIR

    def domain_of(self, relpath: str) -> str:
        """The domain of a note at a path relative to the root (see core.layout.NoteRules)."""
        return self.rules.domain_of(relpath)

    def new_note_path(self, domain: str, name: str) -> str:
        """Where a new note called `name` (without .md) in a domain goes, relative to the root: memories/<domain>/
        in the memories/ layout (and in an adopted vault that has that folder), else the domain's folder (the
        root for the root domain)."""
        if not self.adopted or (self.memories_dir / domain).is_dir():
            return f"{MEMORIES}/{domain}/{name}.md"
        return f"{name}.md" if domain == self.rules.root_domain else f"{domain}/{name}.md"

    @property
    def cache_dir(self) -> Path:
        """Where the caches live: .palace/, or elsewhere when the palace cannot be written (see disk.locate_cache)."""
        if self._cache_dir is None:
            from palace_cli.core.disk import locate_cache

            self._cache_dir, notice = locate_cache(self.root / CACHE_DIR)
            if notice:
                self.notice(notice)
        return self._cache_dir

    def notice(self, message: str) -> None:
        """Tell the user something once (a face decides how: the CLI prints it on stderr)."""
        if message not in self.notices:
            self.notices.append(message)
            if self.notify is not None:
                self.notify(message)

    def rel(self, path: Path) -> str:
        """Path relative to the root, forward slashes."""
        return Path(os.path.relpath(path, self.root)).as_posix()

    # ---- the notes on disk ---------------------------------------------------------------------

    def memory_target(self, path: str | os.PathLike) -> tuple[str, os.stat_result]:
        """The confinement rule every face applies to a path under memories/: (real path, stat) when its name
        is printable and, after resolving links, it is a regular file or a folder inside the palace's own
        memories/; else NotAMemory. (note_files applies the same rule, cheaper, to what is not a link.)"""
        return confined_target(self.root, self.rules.base, path)

    def note_files(self, problems: list[Problem] | None = None, temps: list[str] | None = None) -> list[NoteFile]:
        """Every note file, sorted; what is not one reported into problems (see core.walk.note_files)."""
        return note_files(self.root, self.rules, problems, temps)

    def stray_notes(self) -> list[Problem]:
        """Markdown files with note frontmatter outside memories/: reported, never indexed (an adopted vault
        has no such files: its notes are wherever they lie)."""
        return [] if self.adopted else stray_notes(self.root)
