"""Palace(root): where the notes are, their domains, and the resolvers that turn a name into a memory or a domain.

Reading notes for listing and search goes through `Palace.index` (the refreshed cache under .palace/);
writing a note goes through `notes.py` (atomic, byte-preserving) from `authoring`, `lint --fix` and
`evolve --accept`.
"""

from __future__ import annotations

import os
import re
import stat
from difflib import get_close_matches
from pathlib import Path
from typing import TYPE_CHECKING

from palace_cli.core.config import PalaceConfig, find_root, load_config
from palace_cli.core.layout import (
    BAD_NAME,
    BAD_NAME_MESSAGE,
    CACHE_DIR,
    INDEX_DIR,
    MEMORIES,
    ROOT_INDEX,
    SKIPPED_DIRS,
    NoteFile,
    NoteRules,
    Problem,
    Scan,
    confined_target,
    shown_path,
)
from palace_cli.core.names import not_found_message
from palace_cli.core.notes import Memory
from palace_cli.core.text import normalize
from palace_cli.errors import Ambiguous, NotAMemory, NoteError, NotFound, UsageError

if TYPE_CHECKING:
    from palace_cli.index import Index
    from palace_cli.index.refresh import RefreshReport


class Palace:
    """A palace rooted at a directory holding palace.toml."""

    def __init__(self, root: Path):
        self.root = Path(root).resolve()
        self.config: PalaceConfig = load_config(self.root)
        self.rules = NoteRules(self.config.notes, self.config.notes.index_folder)
        self._index: Index | None = None
        self._cache_dir: Path | None = None
        self.notices: list[str] = []  # one-line notices for the user (a face shows them, once)
        self.notify = None  # called with each notice as it arises, when a face sets it (the CLI: stderr)

    @classmethod
    def find(cls, explicit: str | os.PathLike | None = None, start: Path | None = None) -> "Palace":
        """The palace given explicitly, by $PALACE_DIR, or found walking up from cwd."""
        return cls(find_root(start=start, explicit=explicit))

    # ---- paths --------------------------------------------------------------------------------

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

    def memory_target(self, path: str | os.PathLike) -> tuple[str, os.stat_result]:
        """The confinement rule every face applies to a path under memories/: (real path, stat) when its name
        is printable and, after resolving links, it is a regular file or a folder inside the palace's own
        memories/; else NotAMemory. (note_files applies the same rule, cheaper, to what is not a link.)"""
        return confined_target(self.root, self.rules.base, path)

    # ---- discovery ----------------------------------------------------------------------------

    def note_files(self, problems: list[Problem] | None = None, temps: list[str] | None = None) -> list[NoteFile]:
        """Every note file (`memories/<domain>/**/*.md`, or what an adopted vault's [notes] globs take) that
        memory_target accepts, sorted; the rest reported into problems (and the paths of hidden `*.tmp` files,
        temp files of writes, into temps when given).

        Real files and folders are read first, symlinks after: a link to a note or folder that is read
        through its own path is skipped (reported), so a note is never read twice and never loses its id
        to a link that sorts before it.
        """
        found: list[NoteFile] = []
        report = problems if problems is not None else []
        base = self.root / self.rules.base if self.rules.base else self.root
        if not base.is_dir():
            return found
        stack = [(str(base), os.path.realpath(base))]
        visited = {stack[0][1]}
        real_files: dict[str, str] = {}  # real path -> the relpath it is read through
        links: list[tuple[str, str, str]] = []  # (path, name, relpath) of symlinks, read after the real tree
        prefix = len(str(self.root)) + 1  # plain strings here: Path objects cost more than the stat at 100k notes
        while stack or links:
            if not stack:
                self._follow_link(*links.pop(0), stack, visited, real_files, found, report)
                continue
            directory, real_dir = stack.pop()
            try:
                entries = list(os.scandir(directory))
            except OSError as exc:
                report.append(Problem(shown_path(directory[prefix:]), None, "error", "unreadable",
                                      f"cannot list: {exc.strerror}"))
                continue
            for entry in entries:
                name = entry.name
                if name.startswith(".") or name in SKIPPED_DIRS:
                    if temps is not None and name.endswith(".tmp"):
                        temps.append(entry.path)
                    continue  # editor swap files, temp files of atomic writes
                relpath = entry.path[prefix:].replace(os.sep, "/")
                try:
                    if entry.is_symlink():
                        links.append((entry.path, name, relpath))
                        continue
                    is_dir = entry.is_dir(follow_symlinks=False)
                    info = None if is_dir else entry.stat(follow_symlinks=False)
                except OSError as exc:
                    report.append(Problem(shown_path(relpath), None, "error", "unreadable", f"cannot read: {exc.strerror}"))
                    continue
                real = real_dir + os.sep + name  # os.path.join costs 0.2 s of a 100k-note no-op refresh
                if is_dir:
                    if self.rules.adopted and self.rules.pruned(relpath):
                        continue  # excluded whole (a templates folder, palace's own files)
                    if self._named_well(name, relpath, True, report):
                        visited.add(real)
                        stack.append((entry.path, real))
                elif self._note_file(name, relpath, info, report, found):
                    real_files[real] = relpath
            links.sort()
        found.sort(key=lambda f: f.relpath)
        return found

    def _follow_link(self, path: str, name: str, relpath: str, stack: list, visited: set, real_files: dict,
                     found: list, report: list) -> None:
        """Read one symlink under memories/ after the real tree: a folder to walk, a note to read, or a problem."""
        try:
            real, info = self.memory_target(path)
        except NotAMemory as exc:
            # a broken link that is not named like a note may be an image or a stale folder link
            serious = name.endswith(".md") or exc.code == "symlink-outside"
            report.append(Problem(shown_path(relpath), None, "error" if serious else "warning", exc.code, exc.reason))
            return
        is_dir = stat.S_ISDIR(info.st_mode)
        if is_dir and self.rules.adopted and self.rules.pruned(relpath):
            return
        if not self._named_well(name, relpath, is_dir, report):
            return
        if is_dir:
            if real in visited:
                report.append(Problem(relpath, None, "warning", "symlink-loop",
                                      "folder already read through another path (a symlink loop?); skipped"))
                return
            visited.add(real)
            stack.append((path, real))
            return
        if real in real_files:
            if name.endswith(".md"):
                report.append(Problem(relpath, None, "warning", "symlink-duplicate",
                                      f"a link to {real_files[real]}, which is read through its own path; skipped"))
            return
        if self._note_file(name, relpath, info, report, found):
            real_files[real] = relpath

    @staticmethod
    def _named_well(name: str, relpath: str, is_dir: bool, report: list) -> bool:
        if BAD_NAME.search(name) and (is_dir or name.endswith(".md")):
            report.append(Problem(shown_path(relpath), None, "error", "bad-name", BAD_NAME_MESSAGE))
            return False
        return True

    def _note_file(self, name: str, relpath: str, info: os.stat_result, report: list, found: list) -> bool:
        """Add a regular `.md` file that is a note by the rules to found; report what is not one. True when added."""
        if not name.endswith(".md") or not self.rules.wanted(relpath) or not self._named_well(name, relpath, False,
                                                                                             report):
            return False
        domain = self.rules.domain_of(relpath)
        if not domain:
            report.append(Problem(relpath, None, "error", "no-domain",
                                  "note is not in a domain folder (memories/<domain>/<id>.md); not indexed"))
            return False
        if not stat.S_ISREG(info.st_mode):
            report.append(Problem(relpath, None, "error", "unreadable", "not a regular file; not read"))
            return False
        found.append(NoteFile(relpath, domain, info.st_mtime_ns, info.st_size))
        return True

    def stray_notes(self) -> list[Problem]:
        """Markdown files with note frontmatter outside memories/: reported, never indexed (an adopted vault
        has no such files: its notes are wherever they lie)."""
        problems = []
        if self.adopted:
            return problems
        for dirpath, dirnames, filenames in os.walk(self.root):
            rel_dir = self.rel(Path(dirpath))
            dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS and not d.startswith(".")
                                 and not (rel_dir == "." and d in (MEMORIES, INDEX_DIR)))
            for name in sorted(filenames):
                if not name.endswith(".md") or (rel_dir == "." and name in (ROOT_INDEX, "README.md")):
                    continue
                path = Path(dirpath) / name
                try:
                    # O_NONBLOCK and the regular-file check: a FIFO named *.md must not hang lint
                    with os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as handle:
                        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                            continue
                        head = handle.read(2048).decode("utf-8", "replace").lstrip("\ufeff")
                except OSError:
                    continue
                if head.startswith("---") and re.search(r"^id\s*:", head, re.MULTILINE):
                    problems.append(Problem(shown_path(self.rel(path)), 1, "warning", "outside-memories",
                                            "looks like a note but is outside memories/; not indexed"))
        return problems

    def reload_config(self) -> None:
        """Read palace.toml again (the watcher does, when it changes) and drop what depended on it."""
        self.config = load_config(self.root)
        self.rules = NoteRules(self.config.notes, self.config.notes.index_folder)
        if self._index is not None:
            self._index.forget()

    # ---- the index ----------------------------------------------------------------------------

    @property
    def index(self) -> Index:
        """The caches under .palace/ (opened on first use, once per process)."""
        if self._index is None:
            from palace_cli.index import Index

            self._index = Index(self)
        return self._index

    def refresh(self, **options) -> RefreshReport:
        """Bring the caches up to date with the notes on disk (see `index.refresh.refresh` for options)."""
        from palace_cli.index.refresh import refresh

        return refresh(self, **options)

    def scan(self, light: bool = False) -> Scan:
        """Every readable memory (by id) and every problem, from the freshly refreshed cache.

        light=True gives memories with only what listings show (no image, content or body): several
        times faster on a big palace. Embeddings are not computed here (search and recall do that).
        """
        self.refresh(embedder=None)
        return self.index.scan(light=light)

    def domains(self) -> list[str]:
        """Domains: folders under memories/ plus those declared in palace.toml (in an adopted vault, also the
        domains of its notes and the inbox), sorted."""
        names = set(self.config.domains)
        if self.adopted:
            names |= {m.domain for m in self.scan(light=True).memories.values()}
        if self.memories_dir.is_dir():
            for entry in self.memories_dir.iterdir():
                if entry.name.startswith("."):
                    continue
                try:
                    _real, info = self.memory_target(entry)
                except NotAMemory:
                    continue  # a folder whose notes are never read is no domain to write into (lint says why)
                if stat.S_ISDIR(info.st_mode):
                    names.add(entry.name)
        return sorted(names)

    # ---- resolvers: one per concept, used by every face ----------------------------------------

    def resolve_domain(self, name: str, *, allow_new: bool = False, insist: bool = False) -> str:
        """The domain a name means: itself, an alias in palace.toml, or a unique prefix of a domain.

        With allow_new, a name that means no existing domain is returned as a new folder name (its slug),
        unless it is close to an existing domain (a typo would silently create a folder): then the
        error names the close domains; `insist` creates it anyway. Without either, an unknown name is a
        NotFound listing the domains.
        """
        from palace_cli.core.text import slugify

        wanted = (name or "").strip()
        if not wanted:
            raise UsageError("give a domain, e.g. --domain distributed-systems")
        existing = self.domains()
        if wanted in existing:
            return wanted
        lowered = wanted.lower()
        for domain in existing:
            spec = self.config.domains.get(domain)
            if lowered == domain.lower() or (spec and lowered in (a.lower() for a in spec.aliases)):
                return domain
        prefixed = [d for d in existing if d.lower().startswith(lowered)]
        if len(prefixed) == 1:
            return prefixed[0]
        close = prefixed or get_close_matches(lowered, existing, n=3, cutoff=0.75)
        if insist or (allow_new and not close):
            slug = slugify(wanted)
            if slug == "memory" and lowered != "memory":
                raise UsageError(f"{wanted!r} cannot be a domain folder name; use letters, digits and '-'")
            return slug
        if close:
            hint = " (or --new-domain to create it)" if allow_new else ""
            raise NotFound(f"no domain {wanted!r}; did you mean {', '.join(close)}?{hint}")
        raise NotFound(f"no domain {wanted!r}; domains: {', '.join(existing) or '(none yet)'}")

    def memory(self, ref: str, *, refresh: bool = True) -> Memory:
        """The memory a reference names exactly: an id, a path (`path:line` too), a file name, an alias,
        a subject or an anchor (the last four when one memory has it). Never a near match: when nothing
        is named exactly, NotFound suggests the nearest memories. A broken note named by its path or
        file name raises its NoteError. refresh=False trusts a refresh the caller just made."""
        ref = (ref or "").strip()
        if not ref:
            raise NotFound("give a memory id")
        scan = self.scan(light=True) if refresh else self.index.scan(light=True)
        found = self._exact(ref, scan)
        if found is None:
            raise NotFound(not_found_message(ref, list(scan.memories.values())))
        return self.index.store.memories([found.path])[0]  # the light entry, now in full

    def _exact(self, ref: str, scan: Scan) -> Memory | None:
        memories = scan.memories
        if ref in memories:
            return memories[ref]
        names = self.index.names()
        path_ref = re.sub(r":\d+$", "", ref)
        candidate = Path(path_ref).expanduser()
        if not candidate.is_absolute() and (self.root / candidate).exists():
            candidate = self.root / candidate  # relative to the palace first, wherever the process runs
        if os.path.lexists(candidate):
            # Folders resolved (the palace may sit under a symlinked path), the file itself not: a link to a
            # note is not that note (note_files reads each note through its own path only).
            absolute = os.path.abspath(candidate)
            rel = self.rel(Path(os.path.realpath(os.path.dirname(absolute))) / os.path.basename(absolute))
        else:
            rel = path_ref.removeprefix("./")
        broken = {p.path: p for p in scan.problems if p.path.endswith(".md")}
        if rel in names.paths:
            return names.paths[rel]
        if rel in broken:
            raise NoteError(broken[rel].path, broken[rel].message, broken[rel].line)
        if path_ref.endswith(".md") or "/" in path_ref or os.sep in path_ref:
            raise NotFound(f"no memory at {rel}")
        wanted = normalize(ref)
        if not wanted:
            return None
        stems = [p for p in broken if normalize(Path(p).stem) == wanted]
        for _rank, matches in names.by_rank(ref):
            if len(matches) == 1 and not stems:
                return matches[0]
            if len(matches) > 1:
                ids = sorted(m.id for m in matches)
                raise Ambiguous(f"{ref!r} names several memories: {', '.join(ids[:8])}; use an id", ids[:8])
            if stems:
                problem = broken[stems[0]]
                raise NoteError(problem.path, problem.message, problem.line)
        return None


