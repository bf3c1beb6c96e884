"""The one walk of a folder tree: every note file, and by the same walk every session file, the note-like files
left outside memories/ and the files of a folder to import.

`walk_files` takes the files a set of rules wants (`FolderRules` for a plain folder, the session files' rules in
conversations/) in one pass of `os.scandir`: hidden names and SKIPPED_DIRS left out, links followed only inside
the walked folder and each file read once, and what it cannot take reported with path and reason. `note_files`
is that walk by the rules of notes (`core.layout.NoteRules`), each file given its domain; `stray_notes` finds
files with note frontmatter outside memories/ (never indexed, only reported); `files_under` lists the files of a
folder to import.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from palace_cli.core.layout import (
    BAD_NAME,
    BAD_NAME_MESSAGE,
    INDEX_DIR,
    MEMORIES,
    ROOT_INDEX,
    NoteFile,
    NoteRules,
    Problem,
    confined_target,
    shown_path,
    skipped,
)
from palace_cli.core.notefile import opens_frontmatter
from palace_cli.errors import NotAMemory


class Rules(Protocol):
    """What a walk takes: the folder under the root it walks (and confines links to), the folders it need not
    read and the files it wants (`NoteRules` are the rules of notes)."""

    base: str

    def pruned(self, reldir: str) -> bool: ...

    def wanted(self, relpath: str) -> bool: ...


@dataclass(frozen=True)
class FolderRules:
    """The rules of a walk of a plain folder: files whose names end with one of `suffixes` (in any case, unless
    exact_case), outside the folders `left_out` (paths relative to the root)."""

    suffixes: tuple[str, ...]
    exact_case: bool = False
    left_out: frozenset[str] = frozenset()
    base: str = ""

    def pruned(self, reldir: str) -> bool:
        return reldir in self.left_out

    def wanted(self, relpath: str) -> bool:
        return (relpath if self.exact_case else relpath.lower()).endswith(self.suffixes)


def note_files(root: Path, rules: NoteRules, problems: list[Problem] | None = None,
               temps: list[str] | None = None) -> list[NoteFile]:
    """Every note file under a resolved root (`memories/<domain>/**/*.md`, or what an adopted vault's [notes] globs
    take) with its domain, by walk_files; a file in no domain is reported, not taken."""
    return _Walk(root, rules, problems if problems is not None else [], temps, domains=rules.domain_of).run()


def walk_files(root: Path, rules: Rules, problems: list[Problem] | None = None, temps: list[str] | None = None,
               limit: int | None = None) -> list[NoteFile]:
    """Every file the rules want under a root (in `rules.base`) that confinement accepts
    (`core.layout.confined_target`), sorted, its domain left ""; the rest reported into problems (and the paths of
    hidden `*.tmp` files, temp files of writes, into temps when given). With a limit, the walk stops once it has
    found that many.

    Real files and folders are read first, symlinks after: a link to a file or folder that is read
    through its own path is skipped (reported), so a file is never read twice and a note never loses its id
    to a link that sorts before it.
    """
    return _Walk(root, rules, problems if problems is not None else [], temps, limit=limit).run()


def files_under(directory: Path, suffixes: tuple[str, ...], limit: int | None = None) -> list[Path]:
    """The files under a folder whose names end with one of the suffixes (in any case), sorted as paths, found by
    the one walk (hidden names and SKIPPED_DIRS left out, links followed only inside the folder)."""
    found = walk_files(Path(directory), FolderRules(suffixes), limit=limit)
    return sorted(Path(directory) / f.relpath for f in found)


def attachment_files(root: Path, rules: NoteRules) -> list[str]:
    """The files of the notes' folder that are not Markdown (images, PDFs, canvases: what embeds name), as paths
    from the root, sorted; walked as note_files walks (hidden and palace's own folders left out)."""
    walk = _Walk(root, rules, [], None, files=[])
    walk.run()
    return sorted(walk.files)


class _Walk:
    """One walk of walk_files: the folders still to read, the real paths seen, the links read last."""

    def __init__(self, root: Path, rules: Rules, report: list[Problem], temps: list[str] | None,
                 limit: int | None = None, domains: Callable[[str], str] | None = None,
                 files: list[str] | None = None):
        self.root, self.rules, self.report, self.temps, self.limit = root, rules, report, temps, limit
        self.domains = domains  # the domain of a file the rules want, for notes; None leaves it ""
        self.files = files  # the other files' paths, when they are wanted (attachment_files)
        self.found: list[NoteFile] = []
        self.stack: list[tuple[str, str]] = []  # (path, real path) of folders to read
        self.visited: set[str] = set()
        self.real_files: dict[str, str] = {}  # real path -> the relpath it is read through
        self.links: list[tuple[str, str, str]] = []  # (path, name, relpath) of symlinks, read after the real tree
        self.prefix = len(str(root)) + 1  # plain strings here: Path objects cost more than the stat at 100k notes

    def run(self) -> list[NoteFile]:
        base = self.root / self.rules.base if self.rules.base else self.root
        if not base.is_dir():
            return self.found
        self.stack = [(str(base), os.path.realpath(base))]
        self.visited = {self.stack[0][1]}
        while (self.stack or self.links) and (self.limit is None or len(self.found) < self.limit):
            if not self.stack:
                self._follow_link(*self.links.pop(0))
                continue
            self._read_folder(*self.stack.pop())
        self.found.sort(key=lambda f: f.relpath)
        return self.found

    def _read_folder(self, directory: str, real_dir: str) -> None:
        """Take the notes of one folder, queue its subfolders and set its symlinks aside."""
        try:
            entries = list(os.scandir(directory))
        except OSError as exc:
            self.report.append(Problem(shown_path(directory[self.prefix:]), None, "error", "unreadable",
                                       f"cannot list: {exc.strerror}"))
            return
        for entry in entries:
            name = entry.name
            if skipped(name):
                if self.temps is not None and name.endswith(".tmp"):
                    self.temps.append(entry.path)
                continue  # editor swap files, temp files of atomic writes
            relpath = entry.path[self.prefix:].replace(os.sep, "/")
            try:
                if entry.is_symlink():
                    self.links.append((entry.path, name, relpath))
                    continue
                is_dir = entry.is_dir(follow_symlinks=False)
                info = None if is_dir else entry.stat(follow_symlinks=False)
            except OSError as exc:
                self.report.append(Problem(shown_path(relpath), None, "error", "unreadable",
                                           f"cannot read: {exc.strerror}"))
                continue
            real = real_dir + os.sep + name  # os.path.join costs 0.2 s of a 100k-note no-op refresh
            if is_dir:
                if self.rules.pruned(relpath):
                    continue  # excluded whole (a templates folder, palace's own files)
                if self._named_well(name, relpath, True):
                    self.visited.add(real)
                    self.stack.append((entry.path, real))
            elif self._note_file(name, relpath, info):
                self.real_files[real] = relpath
        self.links.sort()

    def _follow_link(self, path: str, name: str, relpath: str) -> None:
        """Read one symlink after the real tree: a folder to walk, a note to read, or a problem."""
        try:
            real, info = confined_target(self.root, self.rules.base, path)
        except NotAMemory as exc:
            # a broken link that is not named like a note may be an image or a stale folder link
            serious = name.endswith(".md") or exc.code == "symlink-outside"
            self.report.append(Problem(shown_path(relpath), None, "error" if serious else "warning", exc.code,
                                       exc.reason))
            return
        is_dir = stat.S_ISDIR(info.st_mode)
        if is_dir and self.rules.pruned(relpath):
            return
        if not self._named_well(name, relpath, is_dir):
            return
        if is_dir:
            if real in self.visited:
                self.report.append(Problem(relpath, None, "warning", "symlink-loop",
                                           "folder already read through another path (a symlink loop?); skipped"))
                return
            self.visited.add(real)
            self.stack.append((path, real))
            return
        if real in self.real_files:
            if name.endswith(".md"):
                self.report.append(Problem(relpath, None, "warning", "symlink-duplicate",
                                           f"a link to {self.real_files[real]}, which is read through its own path; "
                                           "skipped"))
            return
        if self._note_file(name, relpath, info):
            self.real_files[real] = relpath

    def _named_well(self, name: str, relpath: str, is_dir: bool) -> bool:
        if BAD_NAME.search(name) and (is_dir or name.endswith(".md")):
            self.report.append(Problem(shown_path(relpath), None, "error", "bad-name", BAD_NAME_MESSAGE))
            return False
        return True

    def _note_file(self, name: str, relpath: str, info: os.stat_result) -> bool:
        """Add a regular file the rules want to found; report what is not one. True when added."""
        if self.files is not None:  # a walk for the other files: notes are neither taken nor reported
            if not name.endswith(".md") and stat.S_ISREG(info.st_mode):
                self.files.append(relpath)
            return False
        if not self.rules.wanted(relpath) or not self._named_well(name, relpath, False):
            return False
        domain = self.domains(relpath) if self.domains else ""
        if self.domains and not domain:
            self.report.append(Problem(relpath, None, "error", "no-domain",
                                       "note is not in a domain folder (memories/<domain>/<id>.md); not indexed"))
            return False
        if not stat.S_ISREG(info.st_mode):
            self.report.append(Problem(relpath, None, "error", "unreadable", "not a regular file; not read"))
            return False
        self.found.append(NoteFile(relpath, domain, info.st_mtime_ns, info.st_size))
        return True


# Where the stray-note scan looks: every `.md` file of the palace but memories/ and the generated index/.
OUTSIDE_MEMORIES = FolderRules((".md",), exact_case=True, left_out=frozenset({MEMORIES, INDEX_DIR}))


def stray_notes(root: Path) -> list[Problem]:
    """Markdown files with note frontmatter outside memories/ of a palace of the memories/ layout: reported,
    never indexed."""
    found = walk_files(root, OUTSIDE_MEMORIES)
    return [Problem(shown_path(f.relpath), 1, "warning", "outside-memories",
                    "looks like a note but is outside memories/; not indexed")
            for f in found if f.relpath not in (ROOT_INDEX, "README.md") and _has_note_frontmatter(root / f.relpath)]


def _has_note_frontmatter(path: Path) -> bool:
    """True when a regular file starts with a `---` block that has an `id:` line (its first 2 KB read)."""
    try:
        # O_NONBLOCK and the regular-file check: a FIFO named *.md must not hang lint
        with os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return False
            head = handle.read(2048).decode("utf-8", "replace").lstrip("\ufeff")
    except OSError:
        return False
    return opens_frontmatter(head) and re.search(r"^id\s*:", head, re.MULTILINE) is not None
