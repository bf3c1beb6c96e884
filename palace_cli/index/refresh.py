"""Incremental refresh of the note cache, the lexical index, the vectors and the generated index files.

One process at a time refreshes a palace (an flock on .palace/lock, dropped by the OS when a process dies).
Each step leaves a record of what it finished in the note cache's meta table, in the same SQLite
transaction as the change it records, so a process killed at any moment leaves a state that the next
refresh recognises and repairs: notes it had not committed are read again, lexical documents it had not
committed are still listed in `pending_lexical`, and stale vectors or index files no longer match the
recorded note version.

Vectors come after the lock is let go, by the holder of the embed lock (embedding.py): here and now (`vectors=
"wait"`, the library's default), in a background worker this refresh starts (`"background"`, what the commands
do: nothing waits for meaning), or by the caller (`"later"`: the watcher embeds between its refreshes).
"""

from __future__ import annotations

import hashlib
import os
import time
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
from palace_cli.index.segments import WorkerFailed, Workers
from palace_cli.index.store import NoteStore
from palace_cli.index.text import Doc, TextIndex
from palace_cli.index.turns import date_words, refresh_sessions
from palace_cli.index.vectors import SyncReport
from palace_cli.progress import Progress

if TYPE_CHECKING:
    from palace_cli.core.site import Site

AUTO = object()
COMMIT_EVERY = 2000  # notes per SQLite transaction on a big build: a killed build keeps what it committed
CONVERSATIONS_PREFIX = "conversations/"
MAX_PROCS = 8  # processes a big build uses at most (one per core)
PARALLEL_NOTES = 1_000  # changed notes from which a process per core reads and parses its share of them
PARALLEL_UNITS = 5_000  # lexical documents from which a full build is written by a process per core (segments.py)
REBUILD_SHARE = 0.3  # rebuild the lexical index instead of updating it when this share of notes changed
VECTOR_MODES = ("wait", "background", "later")


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
    waiting: bool = False  # some unit has no vector yet (vectors "background" or "later")
    worker: int | None = None  # the pid of the background worker this refresh started

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
            "vectors_waiting": self.waiting, "worker_started": self.worker,
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
            index_files: bool = True, vectors: str = "wait", rewrite_index_files: bool = False) -> RefreshReport:
    """Bring every cache up to date with the notes on disk, doing work only for what changed.

    `embedder`: AUTO (palace.toml's), None (no vectors) or one to embed with now. `vectors` (with AUTO): "wait"
    embeds what is missing before returning, "background" starts a worker for it (index/worker.py) unless one
    runs, "later" leaves it to the caller (report.waiting says whether anything waits).
    A disk that refuses a cache write (full, failing) raises DiskError; the notes are never touched, and what
    the refresh had not committed is found and redone by the next one. `rewrite_index_files` renders every
    generated file again (a hand edit that kept a file's size and time is undone too), under the lock like every
    write of them: a file rendered from a scan taken outside it could undo another writer's newer one."""
    if vectors not in VECTOR_MODES:
        raise ValueError(f"vectors must be one of {', '.join(VECTOR_MODES)}, not {vectors!r}")
    try:
        return _refresh(index, embedder, progress, rebuild, index_files, vectors, rewrite_index_files)
    except Exception as exc:
        raise disk_error(exc, f"cannot update the cache under {index.site.cache_dir}", "the notes are untouched",
                         where=index.site.cache_dir) or exc


def _refresh(idx: Index, embedder, progress: Progress | None, rebuild: bool, index_files: bool,
             vectors: str, rewrite_index_files: bool = False) -> RefreshReport:
    site = idx.site
    report = RefreshReport()
    stages = _Stages(report)
    with refresh_lock(site, progress):
        stages.done("lock")
        if rebuild:
            with idx.store.transaction():
                idx.store.clear()
            _clear_vectors(idx, progress)
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
        if index_files or rewrite_index_files:
            if progress:
                progress("index files", 0, 1)
            try:
                refresh_index_files(site, idx.store, report, version_before, changed_domains, losers,
                                    every=rewrite_index_files)
            except OSError as exc:
                if exc.errno not in REFUSED:
                    raise
                site.notice(f"the generated index files are out of date and cannot be written ({exc.strerror})")
            stages.done("index files")
    idx.problems = report.problems
    _refresh_vectors(idx, embedder, vectors, report, progress)  # the refresh lock let go: readers go on meanwhile
    stages.done("vectors")
    return report


def _clear_vectors(idx: Index, progress: Progress | None) -> None:
    """Drop every vector, as the holder of the embed lock (a background worker is stopped first)."""
    from palace_cli.index.embedding import holding, wait_lock
    from palace_cli.index.worker import stop

    stop(idx.site)
    with holding(idx.site, wait_lock(idx.site, progress), "rebuild"):
        idx.vectors.clear()


def _refresh_vectors(idx: Index, embedder, mode: str, report: RefreshReport, progress: Progress | None) -> None:
    """Vectors for the units that have none: with a caller's embedder now; with the configured one as `mode`
    says, loading the model only when some vector is missing or stale."""
    from palace_cli.index.embedding import configured, embed_now, up_to_date

    if embedder is None:
        report.dense = "off"
        return
    if embedder is not AUTO:
        report.dense = "on"
        if not up_to_date(idx, embedder.model_id):
            report.vectors = embed_now(idx, embedder, embedder.model_id, progress, configured_key=False)
        return
    setting = configured(idx.site)
    report.dense, report.dense_reason = setting.status, setting.reason
    if setting.status != "on" or up_to_date(idx, setting.key):
        return
    if setting.key is None or mode == "wait":
        model, report.dense, report.dense_reason = idx.dense()  # a path that is not a model file raises here
        if model is not None:
            report.vectors = embed_now(idx, model, setting.key or model.model_id, progress)
        return
    report.waiting = True
    if mode == "background":
        from palace_cli.index.worker import start

        report.worker = start(idx.site)


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

    results = _reads(site, work)

    def read(item) -> bool:
        note_file, row = item
        if _store_read(store, note_file, row, report, next(results)):
            domains.add(note_file.domain)
            return True
        return False

    try:
        store.store_in_batches(work, COMMIT_EVERY, read, gone, store.delete, report.removed, progress,
                               "reading notes")
    finally:
        results.close()  # stops the workers of a refresh that failed half-way
    return domains


def _reads(site: Site, work: list):
    """`_read` of each note of `work`, in order: from PARALLEL_NOTES notes every core's share of them is read and
    parsed by a worker process (every n-th note), while this process reads its own and stores them all."""
    items = [(note_file.relpath, note_file.domain, row[2] if row else None) for note_file, row in work]
    procs = min(os.cpu_count() or 1, MAX_PROCS)
    workers = None
    if len(items) >= PARALLEL_NOTES and procs > 1:
        try:
            workers = Workers([(_read_all, (str(site.root), items[k::procs])) for k in range(1, procs)])
        except WorkerFailed:
            workers = None
    try:
        streams = [workers.stream(k) for k in range(procs - 1)] if workers else []
        for index, item in enumerate(items):
            share = index % procs if streams else 0
            if share:
                try:
                    yield next(streams[share - 1])
                    continue
                except (WorkerFailed, StopIteration):
                    site.notice("a worker reading notes failed; reading the rest in one process")
                    streams = []
            yield _read(str(site.root), *item)
    finally:
        if workers is not None:
            workers.stop()


def _read_all(root: str, items: list):
    """In a worker: `_read` of each (path, domain, known hash)."""
    for item in items:
        yield _read(root, *item)


def _read(root: str, relpath: str, domain: str, known: str | None) -> tuple:
    """Read and parse one note whose stat changed: (file hash, memory, its section rows, error). The hash is None
    when the file cannot be read; the memory None when its bytes are the known ones or it cannot be parsed (the
    error then is (reason, line))."""
    try:
        text_data, warnings = read_note_text(Path(root) / relpath, relpath)
    except NoteError as exc:
        return None, None, None, (exc.reason, exc.line)
    digest = file_hash(text_data, warnings)
    if digest == known:
        return digest, None, None, None
    try:
        memory = parse_note(text_data, relpath, domain, warnings)
    except NoteError as exc:
        return digest, None, None, (exc.reason, exc.line)
    return digest, memory, [unit.row(memory.subject) for unit in section_units(memory)], None


def _store_read(store: NoteStore, note_file, row, report: RefreshReport, read: tuple) -> bool:
    """Store what `_read` gave for one note; returns True when the cache row changed."""
    digest, memory, rows, error = read
    if digest is not None and row and row[2] == digest:
        store.touch(note_file.relpath, note_file.mtime_ns, note_file.size)  # same bytes (touch, git checkout)
        report.unchanged += 1
        return False
    if memory is None:
        store.put_error(note_file.relpath, note_file.mtime_ns, note_file.size, digest or "", *error)
    else:
        store.put_memory(memory, note_file.mtime_ns, note_file.size, digest, rows)
    (report.updated if row else report.added).append(note_file.relpath)
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


def _slices(store: NoteStore, units: int) -> list[tuple[list[str], list[str]]]:
    """The owner notes and session files cut into one contiguous slice of about equal bytes per process, in
    `_owner_docs`'s order (their documents keep their numbers across the segments); none for a build too small to
    be worth starting processes, or on one core."""
    procs = min(os.cpu_count() or 1, MAX_PROCS)
    if units < PARALLEL_UNITS or procs < 2:
        return []
    items = [(kind, path, size or 0) for kind, path, size in store.build_order()]
    share, slices, total, done = sum(i[2] for i in items) / procs, [], 0, 0
    for index in range(procs):
        end = done
        while end < len(items) and (index == procs - 1 or total + items[end][2] <= share * (index + 1)):
            total += items[end][2]
            end += 1
        part = items[done:end]
        slices.append(([p for kind, p, _ in part if kind == 0], [p for kind, p, _ in part if kind == 1]))
        done = end
    return [part for part in slices if part[0] or part[1]]


def _slice_docs(db_path: str, notes: list[str], sessions: list[str]):
    """In a build worker: the lexical documents of these owner notes and session files, as `_owner_docs` gives them."""
    store = NoteStore(Path(db_path))
    for start in range(0, len(notes), 200):
        yield from _note_docs(store, sorted(store.memories(notes[start : start + 200]), key=lambda m: m.path))
    for start in range(0, len(sessions), 200):
        yield from (_turn_doc(row) for row in store.turn_docs(sessions[start : start + 200]))
    store.close()


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
    slices = _slices(store, total)
    try:
        if slices:
            text.rebuild_parallel([(_slice_docs, (str(store.path), *part)) for part in slices], progress, total)
    except WorkerFailed as exc:  # no interpreter to start, a worker killed: one process can still build it all
        idx.site.notice(f"{exc}; building the lexical index in one process")
        slices = []
    if not slices:
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
