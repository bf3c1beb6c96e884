"""The note cache: parsed notes in SQLite under .palace/, keyed by path, with the stat used to skip work."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from .notes import Memory, Warning_

SCHEMA_VERSION = "1"


def text_hash(memory: Memory) -> str:
    """Hash of the text that is embedded: a note whose frontmatter alone changed keeps its vector."""
    return hashlib.sha256(memory.search_text().encode("utf-8")).hexdigest()[:20]


def memory_to_json(memory: Memory) -> str:
    return json.dumps(asdict(memory), ensure_ascii=False, default=str)


def memory_from_json(data: str) -> Memory:
    fields = json.loads(data)
    fields["warnings"] = [Warning_(**w) for w in fields.get("warnings", [])]
    return Memory(**fields)


@dataclass
class StatRow:
    """What the cache knows about one file without decoding the memory."""

    path: str
    mtime_ns: int
    size: int
    file_hash: str
    id: str | None
    error: str | None


class NoteStore:
    """SQLite cache of parsed notes (WAL, so readers never block on a refresh)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self._create()

    def _create(self) -> None:
        self.db.executescript(
            """
            CREATE TABLE IF NOT EXISTS notes (
                path TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER, file_hash TEXT,
                id TEXT, domain TEXT, text_hash TEXT, data TEXT, error TEXT, error_line INTEGER);
            CREATE INDEX IF NOT EXISTS notes_id ON notes(id);
            CREATE INDEX IF NOT EXISTS notes_domain ON notes(domain);
            CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
            """
        )
        if self.get_meta("schema") != SCHEMA_VERSION:
            with self.transaction():
                self.db.execute("DELETE FROM notes")
                self.set_meta("schema", SCHEMA_VERSION)

    @contextmanager
    def transaction(self):
        """BEGIN IMMEDIATE ... COMMIT; rolled back on any exception."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def stat_rows(self) -> dict[str, StatRow]:
        """Every cached file's stat, hash, id and error, without decoding memories."""
        rows = self.db.execute("SELECT path, mtime_ns, size, file_hash, id, error FROM notes")
        return {r[0]: StatRow(*r) for r in rows}

    def put_memory(self, memory: Memory, mtime_ns: int, size: int, file_hash: str) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO notes VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL)",
            (memory.path, mtime_ns, size, file_hash, memory.id, memory.domain, text_hash(memory), memory_to_json(memory)),
        )

    def put_error(self, path: str, mtime_ns: int, size: int, file_hash: str, message: str, line: int | None) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO notes VALUES (?, ?, ?, ?, NULL, NULL, NULL, NULL, ?, ?)",
            (path, mtime_ns, size, file_hash, message, line),
        )

    def touch(self, path: str, mtime_ns: int, size: int) -> None:
        self.db.execute("UPDATE notes SET mtime_ns=?, size=? WHERE path=?", (mtime_ns, size, path))

    def delete(self, path: str) -> None:
        self.db.execute("DELETE FROM notes WHERE path=?", (path,))

    def errors(self) -> list[tuple[str, str, int | None]]:
        """(path, message, line) of cached notes that could not be read."""
        return list(self.db.execute("SELECT path, error, error_line FROM notes WHERE error IS NOT NULL ORDER BY path"))

    def id_paths(self) -> list[tuple[str, str]]:
        """(id, path) of every readable note, sorted by path."""
        return list(self.db.execute("SELECT id, path FROM notes WHERE id IS NOT NULL ORDER BY path"))

    def memories(self, paths: list[str] | None = None) -> list[Memory]:
        """Decoded memories, all or for the given paths."""
        if paths is None:
            rows = self.db.execute("SELECT data FROM notes WHERE data IS NOT NULL ORDER BY path")
            return [memory_from_json(r[0]) for r in rows]
        found = []
        for start in range(0, len(paths), 500):
            chunk = paths[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.db.execute(f"SELECT data FROM notes WHERE path IN ({marks})", chunk)
            found += [memory_from_json(r[0]) for r in rows]
        return found

    def text_hashes(self) -> dict[str, str]:
        """path -> text hash of readable notes."""
        return dict(self.db.execute("SELECT path, text_hash FROM notes WHERE data IS NOT NULL"))

    def close(self) -> None:
        self.db.close()
