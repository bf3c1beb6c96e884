"""The note cache: parsed notes in SQLite under .palace/, keyed by path, with the stat used to skip work."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from palace_cli.core.layout import Scan
from palace_cli.core.notes import Memory, Warning_
from palace_cli.index.vectors import vector_key

SCHEMA_VERSION = "18"  # 18: a turn's substance (for ranking); 17: SilverBullet's `[[^X]]`, `[[X@12]]`, `${...}`;
# 16: `# ` headings as sections are no title, YAML sets are lists; 15: a vector key beside the text hash; 14: derived
# ids transliterate accents; 13: a `# ` heading below prose is a section; 12: property links; 11: any .md
RACY_NS = 2_000_000_000  # stat of a file changed in the last 2 s is not trusted (coarse clocks, network disks)
MEMORY_FIELDS = frozenset(f.name for f in dataclasses.fields(Memory))
# What the generated index files need; stored apart from `data` so they can be read without decoding bodies.
LIGHT_FIELDS = ("id", "subject", "anchor", "verify", "domain", "path", "keywords", "aliases", "previous_ids", "links",
                "line", "created", "valid_from", "valid_until", "supersedes", "superseded_by", "type", "core", "plain",
                "derived_id")


def settled(mtime_ns: int) -> int:
    """The mtime to record for a file: -1 (read it again next time) when it is too recent to trust.

    A file rewritten within the file system's timestamp tick of being read, at the same size, would otherwise
    look unchanged to the next refresh (git calls such an entry "racily clean")."""
    return -1 if mtime_ns > time.time_ns() - RACY_NS else mtime_ns


def text_hash(memory: Memory) -> str:
    """Hash of the text that is embedded: a note whose frontmatter alone changed keeps its vector."""
    return hashlib.sha256(memory.search_text().encode("utf-8")).hexdigest()[:20]


def _finite(value):
    """JSON-safe data: NaN and infinities become text (SQLite's JSON functions reject them)."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def memory_to_json(memory: Memory) -> str:
    fields = dict(memory.__dict__)
    fields["warnings"] = [w.__dict__ for w in memory.warnings]
    try:
        return json.dumps(fields, ensure_ascii=False, default=str, allow_nan=False)
    except ValueError:  # a non-finite number somewhere in the frontmatter
        return json.dumps(_finite(fields), ensure_ascii=False, default=str, allow_nan=False)


def memory_from_json(data: str) -> Memory:
    fields = json.loads(data)
    fields["warnings"] = [Warning_(**w) for w in fields.get("warnings", [])]
    return Memory(**{k: v for k, v in fields.items() if k in MEMORY_FIELDS})


def light_memory(data: str) -> Memory:
    """A Memory with only the LIGHT_FIELDS filled (no image, content or body)."""
    return Memory(**json.loads(data))


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
    """SQLite cache of parsed notes (WAL, so readers never block on a refresh).

    Every change to `notes` also records the path in `pending_lexical` in the same transaction, and bumps
    the `version` meta counter: derived state (whoosh, vectors, index files) that a crash left behind is
    found and repaired by the next refresh.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self._create()

    def _create(self) -> None:
        self.db.executescript("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);")
        if self.get_meta("schema") == SCHEMA_VERSION:
            return
        with self.transaction():
            if self.get_meta("schema") == SCHEMA_VERSION:
                return  # another process upgraded it while we waited
            self.db.execute("DROP TABLE IF EXISTS notes")
            self.db.execute("DROP TABLE IF EXISTS pending_lexical")
            self.db.execute("DROP TABLE IF EXISTS root_sections")
            self.db.execute("DROP TABLE IF EXISTS sessions")
            self.db.execute("DROP TABLE IF EXISTS turns")
            self.db.execute("DROP TABLE IF EXISTS sections")
            self.db.execute("DELETE FROM meta")
            self.db.execute(
                "CREATE TABLE notes (path TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER, file_hash TEXT, "
                "id TEXT, domain TEXT, text_hash TEXT, data TEXT, error TEXT, error_line INTEGER, light TEXT, "
                "vector_key TEXT)")
            self.db.execute("CREATE INDEX notes_id ON notes(id, path)")
            # Covers the no-op refresh's query: without it SQLite reads every row's page, `data` included
            # (half a gigabyte at 100,000 notes).
            self.db.execute("CREATE INDEX notes_stat ON notes(path, mtime_ns, size, file_hash, id, text_hash, "
                            "vector_key)")
            self.db.execute("CREATE INDEX notes_domain ON notes(domain)")
            self.db.execute("CREATE INDEX notes_error ON notes(error) WHERE error IS NOT NULL")
            # old_id: the id the lexical index may still hold for the path (ownership of a duplicated id moves).
            self.db.execute("CREATE TABLE pending_lexical (path TEXT PRIMARY KEY, old_id TEXT)")
            self.db.execute("CREATE TABLE root_sections (domain TEXT PRIMARY KEY, count INTEGER, lines TEXT)")
            # Session files under conversations/: one row per file (its header and what could not be read)...
            self.db.execute(
                "CREATE TABLE sessions (path TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER, file_hash TEXT, "
                "id TEXT, data TEXT, problems TEXT)")
            self.db.execute("CREATE INDEX sessions_id ON sessions(id, path)")
            # ...and one row per turn, the retrieval unit: `text` is what is shown, `unit` what is ranked.
            self.db.execute(
                "CREATE TABLE turns (path TEXT, ord INTEGER, key TEXT, session TEXT, turn TEXT, speaker TEXT, "
                "time TEXT, line INTEGER, text TEXT, context TEXT, text_hash TEXT, substance INTEGER, PRIMARY KEY (path, ord))")
            # The section units of long notes (index/sections.py): ranked beside the notes, handed as `path:line`.
            self.db.execute(
                "CREATE TABLE sections (path TEXT, ord INTEGER, key TEXT, heading TEXT, line INTEGER, text TEXT, "
                "text_hash TEXT, vector_key TEXT, PRIMARY KEY (path, ord))")
            self.db.execute("CREATE INDEX sections_key ON sections(key)")
            self.set_meta("schema", SCHEMA_VERSION)
            self.set_meta("version", "0")

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

    def version(self) -> int:
        """A counter bumped by every transaction that changed a note row."""
        return int(self.get_meta("version") or 0)

    def bump_version(self) -> None:
        """Call inside the transaction that changed notes."""
        self.set_meta("version", str(self.version() + 1))

    def store_in_batches(self, work: list, every: int, read_one, gone: list[str], forget, removed: list[str],
                         progress=None, stage: str = "", report_every: int = 200) -> None:
        """Read `work` into the store in transactions of `every` items (a killed build keeps what it committed):
        `read_one(item)` stores one and says whether anything changed; the `gone` paths are forgotten in the
        last transaction and appended to `removed`; the version moves in each transaction that changed."""
        done = 0
        for start in range(0, max(len(work), 1), every):
            with self.transaction():
                changed = False
                for item in work[start : start + every]:
                    changed |= read_one(item)
                    done += 1
                    if progress and done % report_every == 0:
                        progress(stage, done, len(work))
                if start + every >= len(work):
                    for path in gone:
                        forget(path)
                        removed.append(path)
                    changed |= bool(gone)
                if changed:
                    self.bump_version()
        if progress and work:
            progress(stage, len(work), len(work))

    def stat_map(self) -> dict[str, tuple[int, int, str]]:
        """path -> (mtime_ns, size, file_hash) of every cached file: the no-op refresh reads only this."""
        rows = self.db.execute("SELECT path, mtime_ns, size, file_hash FROM notes INDEXED BY notes_stat")
        return {r[0]: (r[1], r[2], r[3]) for r in rows}

    def stat_rows(self) -> dict[str, StatRow]:
        """Every cached file's stat, hash, id and error, without decoding memories."""
        rows = self.db.execute("SELECT path, mtime_ns, size, file_hash, id, error FROM notes")
        return {r[0]: StatRow(*r) for r in rows}

    def _mark_pending(self, path: str) -> None:
        self.db.execute("INSERT OR IGNORE INTO pending_lexical SELECT path, id FROM notes WHERE path=?", (path,))
        self.db.execute("INSERT OR IGNORE INTO pending_lexical VALUES (?, NULL)", (path,))

    def put_memory(self, memory: Memory, mtime_ns: int, size: int, file_hash: str, sections: list[tuple] = ()) -> None:
        """Store a parsed note and its section units (rows of key, heading JSON, line, text, text hash, vector key)."""
        self._mark_pending(memory.path)
        light = json.dumps({name: getattr(memory, name) for name in LIGHT_FIELDS}, ensure_ascii=False)
        self.db.execute(
            "INSERT OR REPLACE INTO notes VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?)",
            (memory.path, settled(mtime_ns), size, file_hash, memory.id, memory.domain, text_hash(memory),
             memory_to_json(memory), light, vector_key(memory.search_text())),
        )
        self.db.execute("DELETE FROM sections WHERE path=?", (memory.path,))
        if sections:
            self.db.executemany("INSERT INTO sections VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                [(memory.path, ord_, *row) for ord_, row in enumerate(sections)])

    def put_error(self, path: str, mtime_ns: int, size: int, file_hash: str, message: str, line: int | None) -> None:
        self._mark_pending(path)
        self.db.execute("DELETE FROM sections WHERE path=?", (path,))
        self.db.execute(
            "INSERT OR REPLACE INTO notes VALUES (?, ?, ?, ?, NULL, NULL, NULL, NULL, ?, ?, NULL, NULL)",
            (path, settled(mtime_ns), size, file_hash, message, line),
        )

    def forget_hashes(self) -> None:
        """Make every note be parsed again by the next read (inside a transaction): what a note is changed with
        the rules that read it (palace.toml [notes]: its domain)."""
        self.db.execute("UPDATE notes SET mtime_ns = -1, file_hash = ''")

    def touch(self, path: str, mtime_ns: int, size: int) -> None:
        self.db.execute("UPDATE notes SET mtime_ns=?, size=? WHERE path=?", (settled(mtime_ns), size, path))

    def delete(self, path: str) -> None:
        self._mark_pending(path)
        self.db.execute("DELETE FROM notes WHERE path=?", (path,))
        self.db.execute("DELETE FROM sections WHERE path=?", (path,))

    def clear(self) -> None:
        """Forget every note (inside a transaction); derived state is rebuilt from nothing."""
        self.db.execute("DELETE FROM notes")
        self.db.execute("DELETE FROM sessions")
        self.db.execute("DELETE FROM turns")
        self.db.execute("DELETE FROM sections")
        self.db.execute("DELETE FROM pending_lexical")
        self.db.execute("DELETE FROM root_sections")
        self.db.execute("DELETE FROM meta WHERE key NOT IN ('schema', 'version')")
        self.bump_version()

    def pending_lexical(self) -> dict[str, str | None]:
        """path -> id the lexical index may hold for it, for paths changed since the last whoosh commit."""
        return dict(self.db.execute("SELECT path, old_id FROM pending_lexical ORDER BY path"))

    def root_sections(self) -> dict[str, tuple[int, list[str]]]:
        """domain -> (memory count, INDEX.md section lines) as last written."""
        return {d: (c, json.loads(lines)) for d, c, lines in self.db.execute("SELECT domain, count, lines FROM root_sections")}

    def put_root_sections(self, sections: dict[str, tuple[int, list[str]]], replace_all: bool) -> None:
        """Record INDEX.md sections (inside the transaction that records the files as written)."""
        if replace_all:
            self.db.execute("DELETE FROM root_sections")
        self.db.executemany("INSERT OR REPLACE INTO root_sections VALUES (?, ?, ?)",
                            [(d, c, json.dumps(lines, ensure_ascii=False)) for d, (c, lines) in sections.items()])

    def clear_pending_lexical(self, paths: list[str] | None = None) -> None:
        """Forget pending paths once whoosh has committed them (all when paths is None)."""
        if paths is None:
            self.db.execute("DELETE FROM pending_lexical")
        else:
            self.db.executemany("DELETE FROM pending_lexical WHERE path=?", [(p,) for p in paths])

    def errors(self) -> list[tuple[str, str, int | None]]:
        """(path, message, line) of cached notes that could not be read."""
        return sorted(self.db.execute("SELECT path, error, error_line FROM notes INDEXED BY notes_error "
                                      "WHERE error IS NOT NULL"))

    def duplicate_ids(self) -> list[tuple[str, str]]:
        """(id, path) of readable notes sharing an id with another note, sorted by path (the first keeps it)."""
        return list(self.db.execute(
            "SELECT id, path FROM notes WHERE id IN "
            "(SELECT id FROM notes WHERE id IS NOT NULL GROUP BY id HAVING count(*) > 1) ORDER BY path"))

    def count(self) -> int:
        """Number of readable notes (duplicates included)."""
        return self.db.execute("SELECT count(*) FROM notes WHERE id IS NOT NULL").fetchone()[0]

    def memories(self, paths: list[str] | None = None) -> list[Memory]:
        """Decoded memories, all or for the given paths."""
        if paths is None:
            rows = self.db.execute("SELECT data FROM notes WHERE data IS NOT NULL ORDER BY path")
            return [memory_from_json(r[0]) for r in rows]
        return [memory_from_json(r[0]) for r in
                self._chunked("SELECT data FROM notes WHERE path IN ({marks}) AND data IS NOT NULL", paths)]

    def iter_memories(self, batch: int = 500):
        """Every decoded memory, sorted by path, without holding them all in memory."""
        last = ""
        while True:
            rows = self.db.execute("SELECT path, data FROM notes WHERE data IS NOT NULL AND path > ? ORDER BY path "
                                   "LIMIT ?", (last, batch)).fetchall()
            if not rows:
                return
            for _path, data in rows:
                yield memory_from_json(data)
            last = rows[-1][0]

    def light_memories(self, domains: list[str] | None = None,
                       reuse: dict[str, tuple[int, Memory]] | None = None) -> list[Memory]:
        """Memories with only the fields the generated index files show, all or for some domains.

        `reuse` (path -> (hash of the row's text, memory)), kept by a long-lived process between calls, is
        read and then replaced by this call's rows: a row whose text did not change keeps its Memory, as
        decoding the JSON is most of the cost (a 10,000-note rebuild of the language server's tables).
        """
        if domains is None:
            rows = self.db.execute("SELECT path, light FROM notes WHERE light IS NOT NULL ORDER BY path")
        else:
            marks = ",".join("?" * len(domains))
            rows = self.db.execute(f"SELECT path, light FROM notes WHERE light IS NOT NULL AND domain IN ({marks}) "
                                   "ORDER BY path", list(domains))
        if reuse is None:
            return [light_memory(text) for _, text in rows]
        out, seen = [], {}
        for path, text in rows:
            key = hash(text)
            old = reuse.get(path)
            memory = old[1] if old is not None and old[0] == key else light_memory(text)
            seen[path] = (key, memory)
            out.append(memory)
        reuse.clear()
        reuse.update(seen)
        return out

    def distinct_ids(self) -> int:
        """Number of distinct ids among readable notes (what the lexical index should hold)."""
        return self.db.execute("SELECT count(DISTINCT id) FROM notes WHERE id IS NOT NULL").fetchone()[0]

    def _chunked(self, sql: str, values: list, batch: int = 500):
        """Rows of `sql` (with one `{marks}` placeholder list) over values, 500 at a time (SQLite's variable limit)."""
        values = list(values)
        for start in range(0, len(values), batch):
            chunk = values[start : start + batch]
            yield from self.db.execute(sql.format(marks=",".join("?" * len(chunk))), chunk)

    def domains_of_ids(self, ids) -> set[str]:
        """Domains of the notes holding any of these ids."""
        return {r[0] for r in self._chunked("SELECT DISTINCT domain FROM notes WHERE id IN ({marks})", sorted(ids))
                if r[0]}

    def ids_of_paths(self, paths) -> set[str]:
        """Ids of the readable notes at these paths."""
        return {r[0] for r in self._chunked("SELECT id FROM notes WHERE id IS NOT NULL AND path IN ({marks})",
                                            sorted(paths))}

    def owner_paths(self, ids) -> set[str]:
        """For each id, the path that owns it (the first path, sorted, when an id is duplicated)."""
        return {r[0] for r in self._chunked("SELECT min(path) FROM notes WHERE id IN ({marks}) GROUP BY id",
                                            sorted(ids))}

    def delete_root_sections(self, domains) -> None:
        """Forget the INDEX.md sections of domains that no longer exist (inside a transaction)."""
        self.db.executemany("DELETE FROM root_sections WHERE domain=?", [(d,) for d in domains])

    def tokens(self) -> dict[str, str]:
        """id -> verify token ("" when none) of every readable note."""
        rows = self.db.execute("SELECT id, json_extract(data, '$.verify') FROM notes "
                               "WHERE id IS NOT NULL AND data IS NOT NULL")
        return {memory_id: token or "" for memory_id, token in rows}

    def catalog_rows(self) -> list[tuple]:
        """(id, path, domain, vector key, subject, anchor, keywords JSON, aliases JSON, created) of readable notes,
        by path."""
        return self.db.execute(
            "SELECT id, path, domain, vector_key, json_extract(data, '$.subject'), json_extract(data, '$.anchor'), "
            "json_extract(data, '$.keywords'), json_extract(data, '$.aliases'), json_extract(data, '$.created') "
            "FROM notes WHERE data IS NOT NULL ORDER BY path").fetchall()

    def validity_rows(self) -> list[tuple]:
        """(id, created, valid_from, valid_until, supersedes JSON, superseded_by JSON) of readable notes, by path."""
        return self.db.execute(
            "SELECT id, json_extract(light, '$.created'), json_extract(light, '$.valid_from'), "
            "json_extract(light, '$.valid_until'), json_extract(light, '$.supersedes'), "
            "json_extract(light, '$.superseded_by') FROM notes WHERE light IS NOT NULL ORDER BY path").fetchall()

    def link_rows(self) -> list[tuple[str, str, list[str], list[str]]]:
        """(path, id, link targets as written, the targets of the note's text) of readable notes, by path: every
        target (`links`, body links, property links, then the version links `supersedes`, `superseded_by`) and
        those the note's own text writes (body and property links: how the vault writes links); what a backlink
        table is built from without decoding bodies."""
        rows = self.db.execute(
            "SELECT path, id, json_extract(data, '$.links'), json_extract(data, '$.body_links'), "
            "json_extract(data, '$.property_links'), json_extract(light, '$.supersedes'), "
            "json_extract(light, '$.superseded_by') FROM notes WHERE data IS NOT NULL ORDER BY path")
        out = []
        for path, note_id, *parts in rows:
            lists = [json.loads(part or "[]") for part in parts]
            out.append((path, note_id, [t for part in lists for t in part], lists[1] + lists[2]))
        return out

    def text_hashes(self) -> dict[str, str]:
        """path -> text hash of readable notes."""
        return dict(self.db.execute("SELECT path, text_hash FROM notes INDEXED BY notes_stat WHERE id IS NOT NULL"))

    def vector_units(self) -> list[tuple[str, str, str, str, int]]:
        """(vector key, text hash, kind, path, ord) of every unit that is embedded: readable notes ("note", ord -1),
        the section units of the notes that own their id, the turns of the session files that own theirs."""
        notes = self.db.execute("SELECT vector_key, text_hash, 'note', path, -1 FROM notes INDEXED BY notes_stat "
                                "WHERE id IS NOT NULL ORDER BY path").fetchall()
        sections = self.db.execute(f"SELECT vector_key, text_hash, 'section', path, ord FROM sections WHERE path IN "
                                   f"({self.OWNERS}) ORDER BY path, ord").fetchall()
        turns = self.db.execute("SELECT text_hash, text_hash, 'turn', path, ord FROM turns WHERE path IN "
                                "(SELECT min(path) FROM sessions GROUP BY id) ORDER BY path, ord").fetchall()
        return notes + sections + turns

    # ---- section units of long notes --------------------------------------------------------------

    OWNERS = "SELECT min(path) FROM notes WHERE id IS NOT NULL GROUP BY id"  # the note that keeps each id

    def section_rows(self, paths) -> dict[str, list[tuple]]:
        """path -> [(key, heading path, line, text)] of the section units of these notes, in order."""
        out: dict[str, list[tuple]] = {}
        for path, key, heading, line, text in self._chunked(
                "SELECT path, key, heading, line, text FROM sections WHERE path IN ({marks}) ORDER BY path, ord",
                sorted(set(paths))):
            out.setdefault(path, []).append((key, tuple(json.loads(heading)), line, text))
        return out

    def build_order(self) -> list[tuple[int, str, int]]:
        """(0, path, size) of each note owning its id, then (1, path, size) of each session file owning its id: the
        lexical build's order (index/refresh.py `_owner_docs`)."""
        notes = self.db.execute(f"SELECT 0, path, size FROM notes WHERE path IN ({self.OWNERS}) ORDER BY path")
        return notes.fetchall() + self.db.execute("SELECT 1, min(path), size FROM sessions GROUP BY id ORDER BY 2").fetchall()

    def section_count(self) -> int:
        """Number of indexed section units (those of the notes that own their id)."""
        return self.db.execute(f"SELECT count(*) FROM sections WHERE path IN ({self.OWNERS})").fetchone()[0]

    def section_catalog_rows(self) -> list[tuple]:
        """(key, path, domain, vector key, note id, created) of every indexed section unit, by path and order."""
        return self.db.execute(
            "SELECT s.key, s.path, n.domain, s.vector_key, n.id, json_extract(n.light, '$.created') FROM sections s "
            f"JOIN notes n ON n.path = s.path WHERE s.path IN ({self.OWNERS}) ORDER BY s.path, s.ord").fetchall()

    def section_parts(self, path: str, ord_: int) -> tuple[str, tuple[str, ...], str] | None:
        """(note subject, heading path, text) of one stored section unit: what its embedded text is made of."""
        row = self.db.execute(
            "SELECT json_extract(n.light, '$.subject'), s.heading, s.text FROM sections s JOIN notes n "
            "ON n.path = s.path WHERE s.path=? AND s.ord=?", (path, ord_)).fetchone()
        if row is None:
            return None  # gone since it was listed (another process refreshed)
        subject, heading, text = row
        return subject or "", tuple(json.loads(heading)), text

    def sections(self, keys) -> dict[str, dict]:
        """key -> the section unit's row (key, path, heading path, line, text)."""
        out = {}
        for key, path, heading, line, text in self._chunked(
                "SELECT key, path, heading, line, text FROM sections WHERE key IN ({marks}) "
                f"AND path IN ({self.OWNERS}) ORDER BY path, ord", sorted(set(keys))):
            out.setdefault(key, {"key": key, "path": path, "heading": tuple(json.loads(heading)), "line": line,
                                 "text": text})
        return out

    # ---- session files and their turns ----------------------------------------------------------

    def session_stat_map(self) -> dict[str, tuple[int, int, str]]:
        """path -> (mtime_ns, size, file_hash) of every cached session file."""
        return {r[0]: (r[1], r[2], r[3]) for r in self.db.execute("SELECT path, mtime_ns, size, file_hash FROM sessions")}

    def _mark_pending_session(self, path: str) -> None:
        self.db.execute("INSERT OR IGNORE INTO pending_lexical SELECT path, id FROM sessions WHERE path=?", (path,))
        self.db.execute("INSERT OR IGNORE INTO pending_lexical VALUES (?, NULL)", (path,))

    def put_session(self, path: str, mtime_ns: int, size: int, file_hash: str, session_id: str, header: dict,
                    problems: list, turns: list[tuple]) -> None:
        """Store a parsed session file and its turns (rows of TURN_COLUMNS after path, ord), replacing what was there."""
        self._mark_pending_session(path)
        self.db.execute("INSERT OR REPLACE INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (path, settled(mtime_ns), size, file_hash, session_id,
                         json.dumps(header, ensure_ascii=False, default=str),
                         json.dumps(problems, ensure_ascii=False) if problems else None))
        self.db.execute("DELETE FROM turns WHERE path=?", (path,))
        self.db.executemany("INSERT INTO turns VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            [(path, ord_, *row) for ord_, row in enumerate(turns)])

    def touch_session(self, path: str, mtime_ns: int, size: int) -> None:
        self.db.execute("UPDATE sessions SET mtime_ns=?, size=? WHERE path=?", (settled(mtime_ns), size, path))

    def delete_session(self, path: str) -> None:
        self._mark_pending_session(path)
        self.db.execute("DELETE FROM sessions WHERE path=?", (path,))
        self.db.execute("DELETE FROM turns WHERE path=?", (path,))

    def forget_sessions(self) -> None:
        """Drop every session row (inside a transaction): the next read parses every session file again."""
        for (path,) in self.db.execute("SELECT path FROM sessions").fetchall():
            self.delete_session(path)

    def session_problems(self) -> list[tuple[str, int | None, str]]:
        """(path, line, message) of what could not be read in session files, by path."""
        out = []
        for path, problems in self.db.execute("SELECT path, problems FROM sessions WHERE problems IS NOT NULL "
                                              "ORDER BY path"):
            out += [(path, line, message) for line, message in json.loads(problems)]
        return out

    def duplicate_session_ids(self) -> list[tuple[str, str]]:
        """(id, path) of session files sharing an id with another, sorted by path (the first keeps it)."""
        return list(self.db.execute(
            "SELECT id, path FROM sessions WHERE id IN (SELECT id FROM sessions GROUP BY id HAVING count(*) > 1) "
            "ORDER BY path"))

    def session_owner_paths(self, ids) -> set[str]:
        """For each session id, the path that owns it (the first, sorted)."""
        return {r[0] for r in self._chunked("SELECT min(path) FROM sessions WHERE id IN ({marks}) GROUP BY id",
                                            sorted(ids))}

    def session_paths_of_ids(self, ids) -> set[str]:
        """Every session file holding one of these ids."""
        return {r[0] for r in self._chunked("SELECT path FROM sessions WHERE id IN ({marks})", sorted(ids))}

    def session_ids_of_paths(self, paths) -> set[str]:
        return {r[0] for r in self._chunked("SELECT id FROM sessions WHERE path IN ({marks})", sorted(paths))}

    def sessions(self) -> list[tuple[str, str, dict, int]]:
        """(path, id, header, turn count) of every session file that owns its id, by path."""
        rows = self.db.execute(
            "SELECT s.path, s.id, s.data, (SELECT count(*) FROM turns t WHERE t.path = s.path) FROM sessions s "
            "WHERE s.path = (SELECT min(path) FROM sessions o WHERE o.id = s.id) ORDER BY s.path")
        return [(path, sid, json.loads(data), count) for path, sid, data, count in rows]

    def turn_docs(self, paths) -> list[tuple]:
        """(key, path, session, speaker, time, text, context) of the turns in these session files, in order."""
        return list(self._chunked("SELECT key, path, session, speaker, time, text, context FROM turns "
                                  "WHERE path IN ({marks}) ORDER BY path, ord", sorted(paths)))

    def owner_session_paths(self) -> list[str]:
        """Session files whose turns are indexed (each id's first path), sorted."""
        return [r[0] for r in self.db.execute("SELECT min(path) FROM sessions GROUP BY id ORDER BY 1")]

    def turn_catalog_rows(self) -> list[tuple]:
        """(key, path, session, time, text_hash, substance) of every indexed turn, by path and order."""
        return self.db.execute(
            "SELECT key, path, session, time, text_hash, substance FROM turns WHERE path IN "
            "(SELECT min(path) FROM sessions GROUP BY id) ORDER BY path, ord").fetchall()

    def turn_count(self) -> int:
        """Number of indexed turns (those of the session files that own their id)."""
        return self.db.execute("SELECT count(*) FROM turns WHERE path IN "
                               "(SELECT min(path) FROM sessions GROUP BY id)").fetchone()[0]

    def turn_parts(self, path: str, ord_: int) -> tuple[str, str, str, str]:
        """(speaker, text, context, time) of one stored turn: what its unit text is made of."""
        return self.db.execute("SELECT speaker, text, context, time FROM turns WHERE path=? AND ord=?",
                               (path, ord_)).fetchone()

    def turns(self, keys) -> dict[str, dict]:
        """key -> the turn's row (key, path, session, turn, speaker, time, line, text, context) with its session's header."""
        out = {}
        sql = ("SELECT t.key, t.path, t.session, t.turn, t.speaker, t.time, t.line, t.text, t.context, s.data "
               "FROM turns t JOIN sessions s ON s.path = t.path WHERE t.key IN ({marks}) ORDER BY t.path")
        names = ("key", "path", "session", "turn", "speaker", "time", "line", "text", "context")
        for row in self._chunked(sql, sorted(set(keys))):
            out.setdefault(row[0], {**dict(zip(names, row[:-1])), "header": json.loads(row[-1])})
        return out

    def close(self) -> None:
        self.db.close()


def light_scan(store: NoteStore, domains: list[str] | None = None, losers: set[str] = frozenset(),
               reuse: dict | None = None) -> Scan:
    """Memories with the fields the index files show (the first path keeps a duplicated id); `reuse`: see
    NoteStore.light_memories."""
    scan = Scan()
    for memory in store.light_memories(domains, reuse):
        if memory.path not in losers:
            scan.memories.setdefault(memory.id, memory)
    return scan


def cached_memories(store: NoteStore, light: bool = False, reuse: dict | None = None) -> dict[str, Memory]:
    """Memories by id as the cache holds them (the first path keeps a duplicated id).

    With light=True the memories carry only what listings show (no image, content or body), which is
    several times faster on a big palace; `reuse` keeps unchanged ones from the last call (light only).
    """
    if light:
        return light_scan(store, reuse=reuse).memories
    memories: dict[str, Memory] = {}
    for memory in store.iter_memories():
        memories.setdefault(memory.id, memory)
    return memories
