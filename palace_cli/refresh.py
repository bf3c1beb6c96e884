"""Incremental refresh of the note cache, the lexical index, the vectors and the generated index files."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable

from .errors import NoteError
from .indexfiles import write_index_files
from .notes import parse_note, read_note_text
from .palace import Palace, Problem, Scan
from .store import NoteStore, text_hash
from .textindex import Doc, TextIndex
from .vectors import SyncReport, VectorStore

Progress = Callable[[str, int, int], None]
AUTO = object()


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
    vectors: SyncReport | None = None
    dense: str = "off"  # "on", "off" (no model), or "disabled" (configured off)
    dense_reason: str = ""

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed)

    def as_dict(self) -> dict:
        """JSON-ready summary."""
        return {
            "added": self.added, "updated": self.updated, "removed": self.removed, "unchanged": self.unchanged,
            "problems": [p.as_dict() for p in self.problems], "index_files": self.index_files,
            "rebuilt_lexical": self.rebuilt_lexical, "dense": self.dense, "dense_reason": self.dense_reason,
            "embedded": self.vectors.embedded if self.vectors else 0,
        }


class Indexes:
    """The caches under .palace/ for one palace, opened once per process."""

    def __init__(self, palace: Palace):
        cache = palace.cache_dir
        cache.mkdir(parents=True, exist_ok=True)
        self.store = NoteStore(cache / "notes.sqlite")
        self.text = TextIndex(cache / "whoosh")
        self.vectors = VectorStore(cache / "vectors")


def indexes(palace: Palace) -> Indexes:
    """The Indexes of a palace, cached on the Palace object."""
    existing = getattr(palace, "_indexes", None)
    if existing is None:
        existing = Indexes(palace)
        palace._indexes = existing
    return existing


def resolve_embedder(palace: Palace):
    """(embedder or None, status, reason) from palace.toml [models] embedder: default, none, or a GGUF path."""
    setting = str(palace.config.models.get("embedder", "default")).strip()
    if setting.lower() in ("none", "off", "false"):
        return None, "disabled", "dense ranking is turned off in palace.toml ([models] embedder = \"none\")"
    cached = getattr(palace, "_embedder", AUTO)
    if cached is not AUTO:
        return cached
    from pathlib import Path

    from .backends import load_embedder

    path = None if setting in ("", "default") else Path(setting).expanduser()
    if path is not None and not path.is_absolute():
        path = palace.root / path
    embedder = load_embedder(path)
    if embedder is None:
        result = (None, "off", "dense ranking is off: no embedding model installed; run `palace models install`")
    else:
        result = (embedder, "on", "")
    palace._embedder = result
    return result


def _file_hash(data: str) -> str:
    return hashlib.sha256(data.encode("utf-8")).hexdigest()[:16]


def _doc(memory) -> Doc:
    return Doc(memory.path, memory.id, memory.domain, memory.subject, " ".join(memory.keywords + memory.aliases),
               memory.anchor, memory.image, memory.content)


def _config_signature(palace: Palace) -> str:
    stat = (palace.root / "palace.toml").stat()
    return f"{stat.st_mtime_ns}:{stat.st_size}"


def refresh(palace: Palace, embedder=AUTO, progress: Progress | None = None, rebuild: bool = False,
            index_files: bool = True) -> RefreshReport:
    """Bring every cache up to date with the notes on disk, doing work only for what changed."""
    idx = indexes(palace)
    store, text = idx.store, idx.text
    report = RefreshReport()
    if rebuild:
        with store.transaction():
            store.db.execute("DELETE FROM notes")
        text.reset()
        idx.vectors.clear()

    files = palace.note_files(report.problems)
    known = store.stat_rows()
    on_disk = {f.relpath for f in files}
    changed_memories = []
    with store.transaction():
        for position, note_file in enumerate(files):
            row = known.get(note_file.relpath)
            if row and row.mtime_ns == note_file.mtime_ns and row.size == note_file.size:
                report.unchanged += 1
                continue
            try:
                text_data, warnings = read_note_text(palace.root / note_file.relpath, note_file.relpath)
            except NoteError as exc:
                store.put_error(note_file.relpath, note_file.mtime_ns, note_file.size, "", exc.reason, exc.line)
                (report.updated if row else report.added).append(note_file.relpath)
                continue
            digest = _file_hash(text_data)
            if row and row.file_hash == digest:
                store.touch(note_file.relpath, note_file.mtime_ns, note_file.size)
                report.unchanged += 1
                continue
            try:
                memory = parse_note(text_data, note_file.relpath, note_file.domain, warnings)
            except NoteError as exc:
                store.put_error(note_file.relpath, note_file.mtime_ns, note_file.size, digest, exc.reason, exc.line)
            else:
                store.put_memory(memory, note_file.mtime_ns, note_file.size, digest)
                changed_memories.append(memory)
            (report.updated if row else report.added).append(note_file.relpath)
            if progress and position % 200 == 0:
                progress("reading notes", position, len(files))
        for path in sorted(set(known) - on_disk):
            store.delete(path)
            report.removed.append(path)

    for path, message, line in store.errors():
        report.problems.append(Problem(path, line, "error", "unreadable-note", message))

    # Duplicate ids: the first path (sorted) keeps the id; the others are reported and kept out of search.
    owner: dict[str, str] = {}
    losers: set[str] = set()
    for note_id, path in store.id_paths():
        if note_id in owner:
            losers.add(path)
            report.problems.append(Problem(path, 2, "error", "duplicate-id",
                                           f"id {note_id!r} is already used by {owner[note_id]}; this note is not indexed"))
        else:
            owner[note_id] = path
    report.problems.sort(key=lambda p: (p.path, p.line or 0))

    _refresh_lexical(idx, report, changed_memories, losers, len(owner), progress)

    config_signature = _config_signature(palace)
    if index_files and (report.changed or rebuild or store.get_meta("index_files_config") != config_signature
                        or store.get_meta("index_files_done") != "1"):
        scan = current_scan(palace, report)
        report.index_files = write_index_files(palace, scan).written
        with store.transaction():
            store.set_meta("index_files_config", config_signature)
            store.set_meta("index_files_done", "1")

    chosen = resolve_embedder(palace) if embedder is AUTO else (embedder, "on" if embedder else "off", "")
    model, report.dense, report.dense_reason = chosen
    if model is not None:
        texts = {}
        for memory in store.memories() if _vectors_need_texts(idx, store, model) else []:
            if memory.path not in losers:
                texts[text_hash(memory)] = memory.search_text()
        if texts:
            report.vectors = idx.vectors.sync(texts, model, (lambda d, t: progress("embedding", d, t)) if progress else None)
    return report


def _vectors_need_texts(idx: Indexes, store: NoteStore, model) -> bool:
    """Cheap check: do the stored vector keys already equal the notes' text hashes for this model?"""
    model_id, keys, _ = idx.vectors.load()
    if model_id != model.model_id:
        return True
    wanted = set(store.text_hashes().values())
    return wanted != set(keys)


def _refresh_lexical(idx: Indexes, report: RefreshReport, changed, losers: set[str], expected: int,
                     progress: Progress | None) -> None:
    text = idx.text
    try:
        usable = text.doc_count() >= 0
    except Exception:  # a corrupt or half-written index is only a cache: rebuild it below
        usable = False
    if usable:
        deletes = report.removed + report.updated + sorted(losers)
        upserts = [_doc(m) for m in changed if m.path not in losers]
        if upserts or deletes:
            text.apply(upserts, deletes, (lambda n: progress("lexical index", n, len(upserts))) if progress else None)
        if text.doc_count() == expected:
            return
    # Counts disagree (first run, a crash, a deleted cache): rebuild the lexical index from the note cache.
    report.rebuilt_lexical = True
    text.reset()
    memories = [m for m in idx.store.memories() if m.path not in losers]
    text.apply((_doc(m) for m in memories), [], (lambda n: progress("lexical index", n, len(memories))) if progress else None)


def current_scan(palace: Palace, report: RefreshReport | None = None) -> Scan:
    """The palace as the cache holds it (call refresh first): memories by id and problems."""
    store = indexes(palace).store
    scan = Scan()
    for memory in store.memories():
        if memory.id not in scan.memories:
            scan.memories[memory.id] = memory
    scan.problems = list(report.problems) if report else []
    return scan


def stale(palace: Palace) -> list[str]:
    """What a refresh would change, without changing anything (for `palace index --check`)."""
    from .indexfiles import check_index_files

    idx = indexes(palace)
    problems: list[Problem] = []
    files = palace.note_files(problems)
    known = idx.store.stat_rows()
    out = []
    for note_file in files:
        row = known.get(note_file.relpath)
        if row is None:
            out.append(f"{note_file.relpath}: not indexed")
        elif row.mtime_ns != note_file.mtime_ns or row.size != note_file.size:
            try:
                data, _ = read_note_text(palace.root / note_file.relpath)
                if _file_hash(data) != row.file_hash:
                    out.append(f"{note_file.relpath}: changed since indexed")
            except NoteError:
                out.append(f"{note_file.relpath}: changed since indexed")
    for path in sorted(set(known) - {f.relpath for f in files}):
        out.append(f"{path}: deleted but still indexed")
    out += [f"{path}: generated index file out of date" for path in check_index_files(palace)]
    return out
