"""The walk of a palace's folder: every note file (the one walker of notes) and the note-like files left outside.

`note_files` takes the files palace.toml's rules make notes (`core.layout.NoteRules`) in one pass of
`os.scandir`, confined to the notes' folder, and reports what it cannot take with path and reason;
`stray_notes` finds files with note frontmatter outside memories/ (never indexed, only reported).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from palace_cli.core.layout import (
    BAD_NAME,
    BAD_NAME_MESSAGE,
    INDEX_DIR,
    MEMORIES,
    ROOT_INDEX,
    SKIPPED_DIRS,
    NoteFile,
    NoteRules,
    Problem,
    confined_target,
    shown_path,
)
from palace_cli.errors import NotAMemory


def note_files(root: Path, rules: NoteRules, problems: list[Problem] | None = None,
               temps: list[str] | None = None) -> list[NoteFile]:
    """Every note file under a resolved root (`memories/<domain>/**/*.md`, or what an adopted vault's [notes] globs
    take) that confinement accepts (`core.layout.confined_target`), sorted; the rest reported into problems (and
    the paths of hidden `*.tmp` files, temp files of writes, into temps when given).

    Real files and folders are read first, symlinks after: a link to a note or folder that is read
    through its own path is skipped (reported), so a note is never read twice and never loses its id
    to a link that sorts before it.
    """
    return _Walk(root, rules, problems if problems is not None else [], temps).run()


def attachment_files(root: Path, rules: NoteRules) -> list[str]:
    """The files of the notes' folder that are not Markdown (images, PDFs, canvases: what embeds name), as paths
    from the root, sorted; walked as note_files walks (hidden and palace's own folders left out)."""
    walk = _Walk(root, rules, [], None, files=[])
    walk.run()
    return sorted(walk.files)


class _Walk:
    """One walk of note_files: the folders still to read, the real paths seen, the links read last."""

    def __init__(self, root: Path, rules: NoteRules, report: list[Problem], temps: list[str] | None,
                 files: list[str] | None = None):
        self.root, self.rules, self.report, self.temps = root, rules, report, temps
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
        while self.stack or self.links:
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
            if name.startswith(".") or name in SKIPPED_DIRS:
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
                if self.rules.adopted and self.rules.pruned(relpath):
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
        if is_dir and self.rules.adopted and self.rules.pruned(relpath):
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
        """Add a regular `.md` file that is a note by the rules to found; report what is not one. True when added."""
        if self.files is not None:  # a walk for the other files: notes are neither taken nor reported
            if not name.endswith(".md") and stat.S_ISREG(info.st_mode):
                self.files.append(relpath)
            return False
        if not name.endswith(".md") or not self.rules.wanted(relpath) or not self._named_well(name, relpath, False):
            return False
        domain = self.rules.domain_of(relpath)
        if not domain:
            self.report.append(Problem(relpath, None, "error", "no-domain",
                                       "note is not in a domain folder (memories/<domain>/<id>.md); not indexed"))
            return False
        if not stat.S_ISREG(info.st_mode):
            self.report.append(Problem(relpath, None, "error", "unreadable", "not a regular file; not read"))
            return False
        self.found.append(NoteFile(relpath, domain, info.st_mtime_ns, info.st_size))
        return True


def stray_notes(root: Path) -> list[Problem]:
    """Markdown files with note frontmatter outside memories/ of a palace of the memories/ layout: reported,
    never indexed."""
    problems = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(os.path.relpath(dirpath, root)).as_posix()
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS and not d.startswith(".")
                             and not (rel_dir == "." and d in (MEMORIES, INDEX_DIR)))
        for name in sorted(filenames):
            if not name.endswith(".md") or (rel_dir == "." and name in (ROOT_INDEX, "README.md")):
                continue
            path = Path(dirpath) / name
            if _has_note_frontmatter(path):
                problems.append(Problem(shown_path(Path(os.path.relpath(path, root)).as_posix()), 1, "warning",
                                        "outside-memories", "looks like a note but is outside memories/; not indexed"))
    return problems


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
    return head.startswith("---") and re.search(r"^id\s*:", head, re.MULTILINE) is not None
