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
from palace_cli.errors import NotAMemory, OutsidePalace

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
    """Whether a real (resolved) path is `base` or lies under it."""
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


def domain_of(relpath: str) -> str:
    """The domain of a note from its path relative to the root: `memories/<domain>/...` gives `<domain>`;
    "" for a path that is in no domain folder."""
    parts = relpath.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == MEMORIES else ""


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


def refuse_path_tricks(value: str, what: str) -> None:
    """Refuse absolute paths, `..`, home and NUL: checked on the text before anything touches the disk."""
    if "\x00" in value:
        raise OutsidePalace(f"{what} {value!r} contains a NUL byte; refused")
    if value.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:", value) or os.path.isabs(value):
        raise OutsidePalace(f"{what} {value!r} is an absolute path; only names and paths inside the palace are accepted")
    if ".." in re.split(r"[\\/]", value):
        raise OutsidePalace(f"{what} {value!r} climbs out with '..'; refused")



def confined(root: Path, relpath: str, what: str = "path", under: str = MEMORIES) -> Path:
    """A path someone else gave (an agent's argument) resolved inside `<root>/<under>`, symlinks followed;
    OutsidePalace when it is absolute, climbs with `..` or escapes through a link."""
    refuse_path_tricks(relpath, what)
    real_root = os.path.realpath(root)
    base = os.path.realpath(os.path.join(real_root, under))
    target = Path(os.path.realpath(os.path.join(real_root, relpath)))
    if not within(base, real_root) or not within(str(target), base):
        raise OutsidePalace(f"{what} {relpath!r} resolves outside {under}/ of this palace (a symlink?); refused")
    return target
