"""The notes on disk as they are now, against the cache, changing nothing: what `palace index --check` and lint
read (a refresh would read the same files; see refresh.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from palace_cli.core.layout import Problem, Scan
from palace_cli.core.notefile import parse_note, read_note_text
from palace_cli.core.notes import Memory
from palace_cli.errors import NoteError
from palace_cli.index.refresh import file_hash
from palace_cli.index.turns import stale_sessions

if TYPE_CHECKING:
    from palace_cli.index import Index


@dataclass
class DiskNotes:
    """The notes on disk as they are now, read without changing anything (see `notes_on_disk`)."""

    scan: Scan  # one memory per id, the first path keeping a shared id; light rows where the cache is current
    behind: list[str]  # what the cache has not caught up with
    duplicates: list[Problem]  # notes whose id another note holds, naming both
    fresh: dict[str, Memory]  # path -> memory parsed from disk now (new or changed since indexed)
    changed: set[str]  # paths new, changed or gone since indexed


def notes_on_disk(index: Index) -> DiskNotes:
    """The memories the notes on disk hold now (a cached row stands in for a file whose stat or bytes match it,
    the rest is parsed), and what the cache has not caught up with. Changes nothing."""
    site, store = index.site, index.store
    problems: list[Problem] = []
    files = site.note_files(problems)
    known = store.stat_rows()
    behind = []
    fresh: dict[str, Memory] = {}
    changed: set[str] = set()
    for note_file in files:
        row = known.get(note_file.relpath)
        if row and row.mtime_ns == note_file.mtime_ns and row.size == note_file.size:
            continue
        try:
            data, warnings = read_note_text(site.root / note_file.relpath, note_file.relpath)
        except NoteError:
            data, warnings = None, []
        if row and data is not None and file_hash(data, warnings) == row.file_hash:
            continue
        changed.add(note_file.relpath)
        behind.append(f"{note_file.relpath}: {'changed since indexed' if row else 'not indexed'}")
        if data is not None:
            try:
                fresh[note_file.relpath] = parse_note(data, note_file.relpath, note_file.domain, warnings)
            except NoteError:
                pass
    gone = sorted(set(known) - {f.relpath for f in files})
    behind += [f"{path}: deleted but still indexed" for path in gone]
    behind += stale_sessions(site, store)
    changed.update(gone)
    scan, duplicates = Scan(), []
    cached = [m for m in store.light_memories() if m.path not in changed]
    for memory in sorted(cached + list(fresh.values()), key=lambda m: m.path):
        owner = scan.memories.setdefault(memory.id, memory)
        if owner is not memory:
            duplicates.append(Problem(memory.path, memory.field_line("id"), "error", "duplicate-id",
                                      f"id {memory.id!r} is already used by {owner.path}; this note is not indexed"))
    return DiskNotes(scan, behind, duplicates, fresh, changed)


def stale(index: Index) -> list[str]:
    """Generated index files that differ from what the notes on disk produce (for `palace index --check`).

    Compared with the notes, never with the cache: a fresh clone (no .palace/) and a body-only edit that
    leaves every index line as it was both pass. The cache only saves parsing notes it already holds.
    """
    from palace_cli.index.files import check_index_files

    return [f"{path}: generated index file out of date"
            for path in check_index_files(index.site, notes_on_disk(index).scan)]


def unindexed(index: Index) -> list[str]:
    """Notes the cache under .palace/ has not caught up with (new, changed, deleted): what a refresh would read."""
    return notes_on_disk(index).behind
