"""Palace(root): the front object of one palace: its site, its index, and the resolvers that turn a name into a
memory or a domain.

The folder (root, palace.toml, the note rules, the walker, where caches and generated files go) is the
`Site` it holds (core/site.py), shown here under the same names; the caches under .palace/ are its
`Index`, opened on first use; `refresh()` is how every room and face brings them up to date. Writing a
note goes through `editing/`.
"""

from __future__ import annotations

import os
import re
import stat
from difflib import get_close_matches
from pathlib import Path
from typing import TYPE_CHECKING

from palace_cli.core.config import find_root
from palace_cli.core.layout import Scan
from palace_cli.core.names import not_found_message
from palace_cli.core.notes import Memory
from palace_cli.core.site import Site
from palace_cli.core.text import normalize
from palace_cli.errors import Ambiguous, NotAMemory, NoteError, NotFound, UsageError

if TYPE_CHECKING:
    from palace_cli.index import Index
    from palace_cli.index.refresh import RefreshReport


def _site(name: str, settable: bool = False) -> property:
    """What the palace shows of its site under the site's own name (root, config, rel, ...)."""
    setter = (lambda self, value: setattr(self.site, name, value)) if settable else None
    return property(lambda self: getattr(self.site, name), setter, doc=f"The site's `{name}` (core.site.Site).")


class Palace:
    """A palace rooted at a directory holding palace.toml."""

    root = _site("root")
    config = _site("config", settable=True)
    rules = _site("rules")
    notify = _site("notify", settable=True)
    notices = _site("notices")
    memories_dir = _site("memories_dir")
    adopted = _site("adopted")
    root_index = _site("root_index")
    index_dir = _site("index_dir")
    cache_dir = _site("cache_dir")
    domain_of = _site("domain_of")
    new_note_path = _site("new_note_path")
    notice = _site("notice")
    rel = _site("rel")
    memory_target = _site("memory_target")
    note_files = _site("note_files")

    def __init__(self, root: Path):
        self.site = Site(root)
        self._index: Index | None = None

    @classmethod
    def find(cls, explicit: str | os.PathLike | None = None, start: Path | None = None) -> "Palace":
        """The palace given explicitly, by $PALACE_DIR, or found walking up from cwd."""
        return cls(find_root(start=start, explicit=explicit))

    def reload_config(self) -> None:
        """Read palace.toml again (the watcher does, when it changes) and drop what depended on it."""
        self.site.reload_config()
        if self._index is not None:
            self._index.forget()

    # ---- the index ----------------------------------------------------------------------------

    @property
    def index(self) -> Index:
        """The caches under .palace/ (opened on first use, once per process)."""
        if self._index is None:
            from palace_cli.index import Index

            self._index = Index(self.site)
        return self._index

    def refresh(self, **options) -> RefreshReport:
        """Bring the caches up to date with the notes on disk (see `index.refresh.refresh` for options)."""
        from palace_cli.index.refresh import refresh

        return refresh(self.index, **options)

    def stale(self) -> list[str]:
        """Generated index files that differ from what the notes on disk produce (changes nothing)."""
        from palace_cli.index.ondisk import stale

        return stale(self.index)

    def unindexed(self) -> list[str]:
        """Notes and session files the cache has not caught up with (changes nothing)."""
        from palace_cli.index.ondisk import unindexed

        return unindexed(self.index)

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
        try:
            if not candidate.is_absolute() and (self.root / candidate).exists():
                candidate = self.root / candidate  # relative to the palace first, wherever the process runs
            on_disk = os.path.lexists(candidate)
        except (OSError, ValueError):  # a name too long for any file, a NUL: no file, only a name
            on_disk = False
        if on_disk:
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

    def link_text(self, memory: Memory, source: str = "") -> str:
        """The target a new link to `memory` from the note at `source` is written with, the way this palace's
        notes write their wikilinks (core.names: `link_style` of the notes' own links, `Names.link_name`)."""
        from palace_cli.core.names import link_style

        names = self.index.names()
        rows = self.index.store.link_rows()
        style = link_style(names, ((row[0], target) for row in rows for target in row[3]))
        return names.link_name(memory, style, source)
