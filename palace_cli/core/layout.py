"""Where things live in a palace: its folders and generated files, which paths may be read (confinement), and
the Problem and Scan every reader reports into."""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from palace_cli.core.notes import Memory
from palace_cli.errors import NotAMemory


MEMORIES = "memories"
INDEX_DIR = "index"
ROOT_INDEX = "INDEX.md"
REVIEWS = "reviews"
CACHE_DIR = ".palace"
SKIPPED_DIRS = {".git", CACHE_DIR, "node_modules", ".venv", "__pycache__"}
# In a file or folder name: control characters and line breaks (they would split the one-line-per-note index
# files) and lone surrogates (how Python spells bytes that are not UTF-8).
BAD_NAME = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
BAD_NAME_MESSAGE = ("the name has a control character, a line break or bytes that are not UTF-8 (it would break "
                    "the one-line-per-note index files); rename it")


@dataclass
class Problem:
    """Something wrong in the palace, with where it is; `str()` is the one-line report."""

    path: str
    line: int | None
    severity: str  # "error" or "warning"
    code: str
    message: str
    fixable: bool = False

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.severity}: {self.message} [{self.code}]"

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {"path": self.path, "line": self.line, "severity": self.severity, "code": self.code,
                "message": self.message, "fixable": self.fixable}


def within(real: str, base: str) -> bool:
    return real == base or real.startswith(base + os.sep)


def confined_target(root: Path, folder: str, path: str | os.PathLike) -> tuple[str, os.stat_result]:
    """(real path, stat) of `path` when its name (relative to root) is printable and, after resolving links,
    it is a regular file or a folder inside root/folder; else NotAMemory with the lint code and reason."""
    if BAD_NAME.search(os.path.relpath(path, root)):
        raise NotAMemory("bad-name", BAD_NAME_MESSAGE)
    real = os.path.realpath(path)
    if not within(real, os.path.realpath(os.path.join(root, folder))):
        raise NotAMemory("symlink-outside", f"symlink points outside the palace's {folder}/; not read")
    try:
        info = os.stat(path)
    except OSError as exc:
        what = "a symlink loop" if exc.errno == errno.ELOOP else exc.strerror
        raise NotAMemory("unreadable", f"cannot read: {what}") from None
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        raise NotAMemory("unreadable", "not a regular file or folder; not read")
    return real, info


def shown_path(relpath: str) -> str:
    """A path printable on one line: bytes that are not UTF-8 and control characters escaped."""
    text = relpath.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


@dataclass
class NoteFile:
    """A candidate note file found on disk, with the stat fields used for incremental refresh."""

    relpath: str
    domain: str
    mtime_ns: int
    size: int


@dataclass
class Scan:
    """Every readable memory (by id) and every problem found while reading."""

    memories: dict[str, Memory] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    def by_domain(self) -> dict[str, list[Memory]]:
        """Memories grouped by domain, domains and memories sorted."""
        grouped: dict[str, list[Memory]] = {}
        for memory in sorted(self.memories.values(), key=lambda m: (m.domain, m.id)):
            grouped.setdefault(memory.domain, []).append(memory)
        return grouped
