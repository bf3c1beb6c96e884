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
from palace_cli.core.text import slug, slugify, slugify_without_accents
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


def skipped(name: str) -> bool:
    """True for a file or folder name no walk reads: hidden ones (.git, .obsidian, temp files of writes) and
    SKIPPED_DIRS."""
    return name.startswith(".") or name in SKIPPED_DIRS


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


def glob_pattern(pattern: str, exact_case: bool = False) -> re.Pattern:
    """A glob over paths relative to the root as a regex, compared without case: `**` any folders (none too),
    `*` and `?` within one name, `[abc]` a class. A pattern without `/` matches a file name at any depth; a
    leading `/` anchors it at the root."""
    return re.compile(glob_source(pattern, exact_case), re.DOTALL)


def glob_source(pattern: str, exact_case: bool = False) -> str:
    """The regex source of glob_pattern (case folded inside it unless exact_case), to be joined with others."""
    pattern = pattern.strip()
    anchored = pattern.startswith("/")
    pattern = pattern.strip("/")
    if "/" not in pattern and not anchored and not pattern.startswith("**"):
        pattern = "**/" + pattern
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            out.append("[" + ("^" + re.escape(body[1:]) if body[:1] in "!^" and len(body) > 1 else re.escape(body)) + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out) if exact_case else f"(?i:{''.join(out)})"


# Always left out of an adopted vault's notes, by exact name: what palace writes, and session files.
PALACE_OWN = (f"{REVIEWS}/**", "conversations/**")


class NoteRules:
    """Which files are notes and what domain each is in, from palace.toml's [notes] (`config.NotesConfig`).

    The memories/ layout (no `include`): notes are `memories/<domain>/**/*.md`. An adopted vault: every
    file the include globs match and the exclude globs do not, wherever it is, palace's own files left out;
    its domain is `memories/<domain>` under memories/, else its top folder (or one domain: `single`), and
    a note at the root is in the root domain."""

    def __init__(self, notes=None, generated: str = ""):
        self.adopted = bool(notes is not None and notes.adopted)
        self.base = "" if self.adopted else MEMORIES  # the folder notes are confined to ("" is the root)
        self.rule = notes.domains if notes is not None else "folder"
        self.root_domain = notes.root_domain if notes is not None else "root"
        own = PALACE_OWN + ((f"{generated}/**",) if generated else (f"/{ROOT_INDEX}", f"{INDEX_DIR}/**"))
        excluded = [glob_source(p) for p in (notes.exclude if self.adopted else ())]
        excluded += [glob_source(p, exact_case=True) for p in own]
        # One regex for all the includes and one for all the excludes: a vault's no-op refresh tests every file.
        self._include = re.compile("|".join(f"(?:{glob_source(p)})" for p in (notes.include if self.adopted
                                                                                 else ())) or "(?!)", re.DOTALL)
        self._exclude = re.compile("|".join(f"(?:{source})" for source in excluded), re.DOTALL)
        self._excludes = [re.compile(source, re.DOTALL) for source in excluded]
        template = notes.template if notes is not None else ()
        self._template = re.compile("|".join(f"(?:{glob_source(p)})" for p in template), re.DOTALL) if template \
            else None

    def templated(self, memory: Memory) -> bool:
        """True when a note opted into palace's template, so lint checks it and lint --fix or study may write it: a
        `verify` field in its frontmatter (empty too), the SMASHIN sections in palace's own memories/, or a path
        palace.toml's [notes] template globs match. Any other note is the person's alone: read, never written.
        (A full memory: a light one has no frontmatter lines or sections.)"""
        if "verify" in memory.field_lines:
            return True
        if memory.path.startswith(MEMORIES + "/") and (memory.structured or memory.image_line):
            return True
        return self._template is not None and self._template.fullmatch(memory.path) is not None

    def wanted(self, relpath: str) -> bool:
        """True when a path (relative to the root) is a note by these rules: a `.md` file they take."""
        if not relpath.endswith(".md"):
            return False
        if not self.adopted:
            return relpath.startswith(MEMORIES + "/")
        return self._include.fullmatch(relpath) is not None and self._exclude.fullmatch(relpath) is None

    def pruned(self, reldir: str) -> bool:
        """True when no file under a folder (relative to the root) can be a note: it need not be walked."""
        if not self.adopted:
            return False  # notes are memories/<domain>/**: the walk starts in memories/ and reads all of it
        probes = (f"{reldir}/\x00", f"{reldir}/\x00/\x00.md")
        return any(all(p.fullmatch(probe) for probe in probes) for p in self._excludes)

    def domain_of(self, relpath: str) -> str:
        """The domain of a note at a path relative to the root ("" when it is in none)."""
        parts = relpath.split("/")
        if parts[0] == MEMORIES and len(parts) > 2:
            return parts[1]
        if not self.adopted:
            return ""
        return parts[0] if len(parts) > 1 and self.rule == "folder" else self.root_domain


def path_id(relpath: str) -> str:
    """The id of a note that does not name one in its frontmatter, from its path (docs/note-format.md, "Ids").

    Under memories/ the file name's slug, as `palace add` names files (`Outbox polling.md`: `outbox-polling`,
    `Café.md`: `cafe`); elsewhere every folder and the file name, each slugged with letters of any script kept
    and joined by `.`: `Garden/Watering schedule.md` is `garden.watering-schedule`. Stable while the file keeps
    its path, the same on case-insensitive file systems, and two notes of one name in two folders get two ids."""
    parts = relpath.removesuffix(".md").split("/")
    if parts[0] == MEMORIES and len(parts) > 2:
        return slugify(parts[-1])
    return ".".join(slug(part, None, scripts=True) or "-" for part in parts) or "note"


def former_path_id(relpath: str) -> str | None:
    """The id path_id gave this path before slugs transliterated accents (`memories/d/Café.md` was `caf`), when it
    was another: a note read with a derived id lists it among its previous ids, so its reviews and links follow."""
    parts = relpath.removesuffix(".md").split("/")
    if parts[0] != MEMORIES or len(parts) <= 2 or parts[-1].isascii():
        return None  # ids outside memories/ always transliterated; an ASCII name slugs as it did
    former = slugify_without_accents(parts[-1])
    return former if former != slugify(parts[-1]) else None


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
