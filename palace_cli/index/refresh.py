"""Incremental refresh of the note cache, the lexical index, the vectors and the generated index files.

One process at a time refreshes a palace (an flock on .palace/lock, dropped by the OS when a process dies).
Each step leaves a record of what it finished in the note cache's meta table, in the same SQLite
transaction as the change it records, so a process killed at any moment leaves a state that the next
refresh recognises and repairs: notes it had not committed are read again, lexical documents it had not
committed are still listed in `pending_lexical`, and stale vectors or index files no longer match the
recorded note version.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from palace_cli.conversations.model import TIME
from palace_cli.core.disk import REFUSED, disk_error, sweep_temps
from palace_cli.core.layout import REVIEWS, Problem
from palace_cli.core.markdown import rest_of_body
from palace_cli.core.notefile import parse_note, read_note_text
from palace_cli.core.notes import Memory
from palace_cli.errors import NoteError
from palace_cli.index import Index
from palace_cli.index.files import refresh_index_files
from palace_cli.index.locks import file_lock
from palace_cli.index.sections import section_title, section_units
from palace_cli.index.sections import unit_text as section_text
from palace_cli.index.store import NoteStore
from palace_cli.index.text import Doc, TextIndex
from palace_cli.index.turns import date_words, refresh_sessions, unit_text
from palace_cli.index.vectors import SyncReport
from palace_cli.progress import Progress

if TYPE_CHECKING:
    from palace_cli.core.site import Site

AUTO = object()
SECTION = "\0section"  # marks a section unit's place among the texts to embed (a path never starts with NUL)
COMMIT_EVERY = 2000  # notes per SQLite transaction on a big build: a killed build keeps what it committed
CONVERSATIONS_PREFIX = "conversations/"
REBUILD_SHARE = 0.3  # rebuild the lexical index instead of updating it when this share of notes changed


@dataclass
class RefreshReport:
    """What a refresh changed; `problems` covers every note that could not be indexed."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    problems: list[Problem] = field(default_factory=list)
    index_files: list[str] = field(default_factory=list)
    rebuilt_lexical: bool = False
    swept: list[str] = field(default_factory=list)  # temp files of killed writers, removed
    vectors: SyncReport | None = None
    dense: str = "off"  # "on", "off" (no model), or "disabled" (configured off)
    dense_reason: str = ""
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed)

    def as_dict(self) -> dict:
        """JSON-ready summary."""
        return {
            "added": self.added, "updated": self.updated, "removed": self.removed, "unchanged": self.unchanged,
            "problems": [p.as_dict() for p in self.problems], "index_files": self.index_files,
            "rebuilt_lexical": self.rebuilt_lexical, "swept": self.swept, "dense": self.dense,
            "dense_reason": self.dense_reason,
            "embedded": self.vectors.embedded if self.vectors else 0,
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
        }


@contextmanager
def refresh_lock(site: Site, progress: Progress | None = None):
    """Hold the palace's refresh lock; waits (saying whom for through progress) while another process holds it,
    at most as long as this process's `locks.patience`."""
    site.cache_dir.mkdir(parents=True, exist_ok=True)
    notify = (lambda message: progress(message, 0, 0)) if progress else None
    with file_lock(site.cache_dir / "lock", "refresh lock", notify):
        yield


def file_hash(data: str, warnings=()) -> str:
    """Hash of a note's text and of what reading it warned about: a BOM or line ends added or removed change
    the warnings, not the text."""
    marks = "".join(f"\0{w.code}:{w.line}" for w in warnings)
    return hashlib.sha256((data + marks).encode("utf-8")).hexdigest()[:16]


def _doc(memory: Memory, sections: list[tuple] = ()) -> Doc:
    """A note's lexical document. A note ranked by section (its stored rows: key, heading path, line, text)
    holds only its opening part and the outline of its headings: the rest of its words are in its sections'
    documents, and indexing them twice doubled a vault's build for no recall (docs/benchmarks.md)."""
    whole = not memory.structured  # a note without `## Image`/`## Content` has its whole text as content already
    content = memory.content
    if sections:
        content = "\n".join([sections[0][3], *dict.fromkeys(part for row in sections for part in row[1])])
    return Doc(memory.path, memory.id, memory.domain, memory.subject, " ".join(memory.keywords + memory.aliases),
               memory.anchor, memory.image, content, time=memory_time(memory),
               rest="" if whole else rest_of_body(memory.body))


def memory_time(memory: Memory) -> str:
    """The time a memory is filed under for --since/--until: its `created` date when it reads as one."""
    created = str(memory.created or "")
    return created if TIME.fullmatch(created) else ""


class _Stages:
    """Times each stage of a refresh into report.timings."""

    def __init__(self, report: RefreshReport):
        self.report = report
        self.last = time.perf_counter()

    def done(self, stage: str) -> None:
        now = time.perf_counter()
        self.report.timings[stage] = self.report.timings.get(stage, 0.0) + now - self.last
        self.last = now


def refresh(index: Index, embedder=AUTO, progress: Progress | None = None, rebuild: bool = False,
            index_files: bool = True) -> RefreshReport:
    """Bring every cache up to date with the notes on disk, doing work only for what changed.

    A disk that refuses a cache write (full, failing) raises DiskError; the notes are never touched, and what
    the refresh had not committed is found and redone by the next one."""
    try:
        return _refresh(index, embedder, progress, rebuild, index_files)
    except Exception as exc:
        raise disk_error(exc, f"cannot update the cache under {index.site.cache_dir}", "the notes are untouched",
                         where=index.site.cache_dir) or exc


def _refresh(idx: Index, embedder, progress: Progress | None, rebuild: bool, index_files: bool) -> RefreshReport:
    site = idx.site
    report = RefreshReport()
    stages = _Stages(report)
    with refresh_lock(site, progress):
        stages.done("lock")
        if rebuild:
            with idx.store.transaction():
                idx.store.clear()
            idx.vectors.clear()
        version_before = idx.store.version()
        temps: list[str] = []
        changed_domains = _refresh_notes(site, idx.store, report, progress, temps)
        stages.done("notes")
        refresh_sessions(site, idx.store, report, progress, temps)
        report.swept = [site.rel(Path(p)) for p in
                        sweep_temps(temps, [site.root, site.root / site.index_dir, site.root / REVIEWS])]
        stages.done("sessions")
        losers = _collect_problems(idx.store, report)
        if report.changed:
            changed_domains |= _domains_sharing_ids(site, idx.store)
        stages.done("problems")
        _refresh_lexical(idx, report, progress, rebuild)
        stages.done("lexical")
        if index_files:
            if progress:
                progress("index files", 0, 1)
            try:
                refresh_index_files(site, idx.store, report, version_before, changed_domains, losers)
            except OSError as exc:
                if exc.errno not in REFUSED:
                    raise
                site.notice(f"the generated index files are out of date and cannot be written ({exc.strerror})")
            stages.done("index files")
        if embedder is AUTO:
            _refresh_vectors_auto(site, idx, losers, report, progress)
        else:
            report.dense = "on" if embedder else "off"
            if embedder is not None:
                _refresh_vectors(idx, embedder, embedder.model_id, losers, report, progress)
        stages.done("vectors")
    idx.problems = report.problems
    return report


def _embedder_file(site: Site):
    """The model file palace.toml asks for, without loading it: a Path, None (not installed) or "disabled"."""
    from palace_cli.backends import model_setting

    setting = model_setting(site.config.models, "embedder", site.root)
    return "disabled" if setting.kind == "off" else setting.path


def _refresh_vectors_auto(site: Site, idx: Index, losers: set[str], report: RefreshReport,
                          progress: Progress | None) -> None:
    """Vectors with the configured embedder, loading the model only when some vector is missing or stale."""
    from palace_cli.backends import embedder_key

    path = _embedder_file(site)
    key = None
    if path not in ("disabled", None):
        try:
            key = embedder_key(path)  # a new file, or a new cut of the same file, re-embeds
        except OSError:
            key = None  # Index.dense() explains what is wrong with the path
    if key is not None and idx.store.get_meta("vectors_state") == _vectors_state(idx, key):
        report.dense = "on"  # up to date: no need to load the model
        return
    model, report.dense, report.dense_reason = idx.dense()
    if model is not None:
        _refresh_vectors(idx, model, key or model.model_id, losers, report, progress)


def _vectors_state(idx: Index, model_key: str) -> str:
    return f"{idx.store.version()}:{model_key}:{idx.vectors.generation()}"


def _refresh_notes(site: Site, store: NoteStore, report: RefreshReport, progress: Progress | None,
                   temps: list[str]) -> set[str]:
    """Stat every note, read the ones whose stat changed, store the ones whose bytes changed; returns touched domains."""
    rules = repr(site.config.notes)
    if store.get_meta("note_rules") != rules:  # [notes] changed: every note's domain may have too
        with store.transaction():
            store.forget_hashes()
            store.set_meta("note_rules", rules)
    files = site.note_files(report.problems, temps)
    known = store.stat_map()
    on_disk = set()
    work = []
    for note_file in files:
        on_disk.add(note_file.relpath)
        row = known.get(note_file.relpath)
        if row and row[0] == note_file.mtime_ns and row[1] == note_file.size:
            report.unchanged += 1
        else:
            work.append((note_file, row))
    gone = sorted(set(known) - on_disk)
    domains = {site.domain_of(path) for path in gone}
    if not work and not gone:
        return domains

    def read(item) -> bool:
        note_file, row = item
        if _read_one(site, store, note_file, row, report):
            domains.add(note_file.domain)
            return True
        return False

    store.store_in_batches(work, COMMIT_EVERY, read, gone, store.delete, report.removed, progress, "reading notes")
    return domains


def _read_one(site: Site, store: NoteStore, note_file, row, report: RefreshReport) -> bool:
    """Read one note whose stat changed; returns True when the cache row changed."""
    listed = report.updated if row else report.added
    try:
        text_data, warnings = read_note_text(site.root / note_file.relpath, note_file.relpath)
    except NoteError as exc:
        store.put_error(note_file.relpath, note_file.mtime_ns, note_file.size, "", exc.reason, exc.line)
        listed.append(note_file.relpath)
        return True
    digest = file_hash(text_data, warnings)
    if row and row[2] == digest:
        store.touch(note_file.relpath, note_file.mtime_ns, note_file.size)  # same bytes (touch, git checkout)
        report.unchanged += 1
        return False
    try:
        memory = parse_note(text_data, note_file.relpath, note_file.domain, warnings)
    except NoteError as exc:
        store.put_error(note_file.relpath, note_file.mtime_ns, note_file.size, digest, exc.reason, exc.line)
    else:
        rows = [unit.row(memory.subject) for unit in section_units(memory)]
        store.put_memory(memory, note_file.mtime_ns, note_file.size, digest, rows)
    listed.append(note_file.relpath)
    return True


def _collect_problems(store: NoteStore, report: RefreshReport) -> set[str]:
    """Add unreadable notes and sessions and duplicate ids to report.problems; returns the note paths kept
    out of search (a session file that repeats another's id is kept out in the store's queries)."""
    for path, message, line in store.errors():
        report.problems.append(Problem(path, line, "error", "unreadable-note", message))
    for path, line, message in store.session_problems():
        report.problems.append(Problem(path, line, "error", "session-unreadable", message))
    session_owner: dict[str, str] = {}
    for session_id, path in store.duplicate_session_ids():
        if session_id in session_owner:
            report.problems.append(Problem(path, 2, "error", "duplicate-session-id",
                                           f"session id {session_id!r} is already used by {session_owner[session_id]}; "
                                           "its turns are not indexed"))
        else:
            session_owner[session_id] = path
    owner: dict[str, str] = {}
    losers: set[str] = set()
    for note_id, path in store.duplicate_ids():
        if note_id in owner:
            losers.add(path)
            report.problems.append(Problem(path, 2, "error", "duplicate-id",
                                           f"id {note_id!r} is already used by {owner[note_id]}; this note is not indexed"))
        else:
            owner[note_id] = path
    report.problems.sort(key=lambda p: (p.path, p.line or 0))
    return losers


def _domains_sharing_ids(site: Site, store: NoteStore) -> set[str]:
    """Domains of notes that share an id (old or new) with a changed note: a duplicate may have changed owner."""
    pending = {p: i for p, i in store.pending_lexical().items() if not p.startswith(CONVERSATIONS_PREFIX)}
    ids = {i for i in pending.values() if i} | {i for i, _ in store.duplicate_ids()}
    return {site.domain_of(path) for path in pending} | store.domains_of_ids(ids)


def _note_docs(store: NoteStore, memories: list[Memory]):
    """The lexical documents of these notes and of their section units, note by note."""
    rows = store.section_rows([m.path for m in memories])
    for memory in memories:
        units = rows.get(memory.path, [])
        yield _doc(memory, units)
        for key, heading, _line, text in units:
            yield Doc(memory.path, key, memory.domain, section_title(memory.subject, heading), "", "", "", text,
                      kind="section", time=memory_time(memory))


def _owner_docs(store: NoteStore):
    """The lexical document of every readable note that owns its id (the first path, sorted, wins) and of its
    section units, then of every turn of the session files that own theirs."""
    seen = set()
    batch: list[Memory] = []
    for memory in store.iter_memories():
        if memory.id not in seen:
            seen.add(memory.id)
            batch.append(memory)
            if len(batch) >= 200:
                yield from _note_docs(store, batch)
                batch = []
    yield from _note_docs(store, batch)
    paths = store.owner_session_paths()
    for start in range(0, len(paths), 200):
        yield from (_turn_doc(row) for row in store.turn_docs(paths[start : start + 200]))


def _turn_doc(row: tuple) -> Doc:
    key, path, session, speaker, time, text, context = row
    return Doc(path, key, "", speaker, date_words(time), "", "", text, kind="turn", time=time, session=session,
               context=context)


def _expected_docs(store: NoteStore) -> int:
    """How many documents the lexical index should hold: one per note id, per section unit, per indexed turn."""
    return store.distinct_ids() + store.section_count() + store.turn_count()


def _lexical_state(text: TextIndex) -> str:
    return f"{text.generation()}:{text.doc_count()}"


def _refresh_lexical(idx: Index, report: RefreshReport, progress: Progress | None, rebuild: bool) -> None:
    store, text = idx.store, idx.text
    pending = store.pending_lexical()
    try:
        healthy = not rebuild and store.get_meta("lexical_state") == _lexical_state(text)
    except Exception:  # a corrupt or half-written index is only a cache: rebuild it below
        healthy = False
    if healthy and not pending:
        return
    if healthy and len(pending) <= max(500, REBUILD_SHARE * store.count()):
        _apply_pending(store, text, pending, progress)
        if text.doc_count() == _expected_docs(store):
            _record_lexical(store, text, sorted(pending))
            return
    # First run, a deleted or foreign index, a big change, or counts that disagree: rebuild from the cache.
    report.rebuilt_lexical = True
    total = store.count() + store.section_count() + store.turn_count()
    if progress:
        progress("lexical index", 0, total)
    text.rebuild(_owner_docs(store), progress, total)
    if progress:
        progress("lexical index", total, total)
    _record_lexical(store, text, None)


def _apply_pending(store: NoteStore, text: TextIndex, pending: dict[str, str | None], progress: Progress | None) -> None:
    """Update the lexical documents of pending paths, and of every note (session file) sharing an id with
    them, old or new: ownership of a repeated id may have moved."""
    sessions = {p: i for p, i in pending.items() if p.startswith(CONVERSATIONS_PREFIX)}
    notes = {p: i for p, i in pending.items() if p not in sessions}
    paths = sorted(notes)
    ids = {i for i in notes.values() if i} | store.ids_of_paths(paths)
    upserts = list(_note_docs(store, store.memories(sorted(store.owner_paths(ids)))))
    session_ids = {i for i in sessions.values() if i} | store.session_ids_of_paths(sessions)
    deletes = paths + sorted(set(sessions) | store.session_paths_of_ids(session_ids))
    upserts += [_turn_doc(row) for row in store.turn_docs(store.session_owner_paths(session_ids))]
    if progress:
        progress("lexical index", 0, len(upserts))
    text.apply(upserts, deletes, progress, delete_ids=ids)


def _record_lexical(store: NoteStore, text: TextIndex, applied: list[str] | None) -> None:
    with store.transaction():
        store.clear_pending_lexical(applied)
        store.set_meta("lexical_state", _lexical_state(text))


class _LazyTexts(Mapping):
    """text hash -> text to embed, reading a note (a turn, a section) from the cache only when its text is asked for."""

    def __init__(self, store: NoteStore, paths: dict[str, str | tuple]):
        self.store, self.paths = store, paths

    def __getitem__(self, key: str) -> str:
        where = self.paths[key]
        if isinstance(where, tuple) and where[0] == SECTION:  # a section unit: (SECTION, note, position)
            return section_text(*self.store.section_parts(*where[1:]))
        if isinstance(where, tuple):  # a turn: (session file, position)
            return unit_text(*self.store.turn_parts(*where))
        return self.store.memories([where])[0].search_text()

    def __iter__(self):
        return iter(self.paths)

    def __len__(self) -> int:
        return len(self.paths)


def _refresh_vectors(idx: Index, model, model_key: str, losers: set[str], report: RefreshReport,
                     progress: Progress | None) -> None:
    store, vectors = idx.store, idx.vectors
    if store.get_meta("vectors_state") == _vectors_state(idx, model_key):
        return
    paths = {}
    for path, digest in sorted(store.text_hashes().items()):
        if path not in losers:
            paths.setdefault(digest, path)
    for digest, where in store.turn_hashes().items():
        paths.setdefault(digest, where)
    for digest, (path, ord_) in store.section_hashes().items():
        if path not in losers:
            paths.setdefault(digest, (SECTION, path, ord_))
    report.vectors = vectors.sync(_LazyTexts(store, paths), model, progress)
    with store.transaction():
        store.set_meta("vectors_state", _vectors_state(idx, model_key))
