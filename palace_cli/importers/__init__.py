"""`palace import`: read a whole source, validate it, then write its memories in one pass, idempotently.

Every format reader returns a `Batch` of `Record`s (and queries and domain descriptions) or raises
ImportFailed before anything is written. The writer scans the palace once, decides per record
whether to add, update, skip or report a conflict, writes notes atomically, and refreshes once.

Each imported note carries `imported: {from, record, note}` in its frontmatter: where it came from,
a hash of the source record, and a hash of the note as written. Re-importing an unchanged record is
a skip; a changed record rewrites the note only when the note still hashes as written; otherwise it
is a conflict and the note is left alone.
"""

from __future__ import annotations

import hashlib
import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Callable

from palace_cli.conversations.sources import FORMATS as CONVERSATION_FORMATS
from palace_cli.errors import ImportFailed, NoteError, UsageError
from palace_cli.core.notes import ID_PATTERN, Memory
from palace_cli.core.noteedit import check_note_size, dump_frontmatter
from palace_cli.core.disk import atomic_write
from palace_cli.palace import Palace
from palace_cli.progress import Progress
from palace_cli.core.tokens import contains_phrase, propose_token

NOTE_FORMATS = ("memory-palace-json", "markdown", "beir")
FORMATS = NOTE_FORMATS + CONVERSATION_FORMATS
WRITERS, CHUNK = 8, 256


@dataclass
class Record:
    """One memory to import, normalised from any source format."""

    id: str
    subject: str
    origin: str  # "file: where" for messages
    source: str  # "<format>:<file>", the import stamp's `from`
    domain: str = ""
    domain_derived: bool = False  # chosen by the importer (clustering), not by the source
    anchor: str = ""
    anchor_derived: bool = False  # read off the image by the importer, not given by the source
    image: str = ""
    content: str = ""
    keywords: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    verify: str | None = None  # None: propose one from the image
    created: str = ""
    fields: dict = field(default_factory=dict)  # extra frontmatter: source_id, source, aliases ...
    body: str | None = None  # a complete body to keep verbatim (a palace note imported as is)

    def digest(self) -> str:
        """Hash of everything the source said about this record (not what the importer derived)."""
        data = {"id": self.id, "subject": self.subject, "anchor": "" if self.anchor_derived else self.anchor,
                "image": self.image,
                "content": self.content, "keywords": self.keywords, "links": self.links, "verify": self.verify,
                "created": self.created, "fields": self.fields, "body": self.body,
                "domain": "" if self.domain_derived else self.domain}
        return _hash(data)


@dataclass
class Batch:
    """What a reader found in a source: records, benchmark queries, descriptions of new domains."""

    format: str
    records: list[Record]
    queries: list[dict] = field(default_factory=list)
    domain_specs: dict[str, dict] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # (palace, all records, those still without a domain, progress) -> summary; sets their domains (BEIR)
    assign_domains: Callable[[Palace, list[Record], list[Record], Progress | None], dict] | None = None
    refresh_embedder: object = None  # an embedder that already knows this batch's vectors


@dataclass
class Conflict:
    """A record that was not written because the palace holds a different note under its id."""

    id: str
    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.id}: {self.path}: {self.reason}"


@dataclass
class ImportReport:
    """What an import did: ids added, updated, skipped, and conflicts left for a person."""

    format: str
    source: str
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    domains: dict[str, int] = field(default_factory=dict)  # domain -> notes written there by this import
    new_domains: list[str] = field(default_factory=list)  # declared in palace.toml by this import
    queries_path: str | None = None
    queries: int = 0
    clustering: dict | None = None
    dry_run: bool = False
    refresh: object = None  # RefreshReport

    def as_dict(self) -> dict:
        """JSON-ready summary (ids listed, conflicts explained)."""
        return {
            "format": self.format, "source": self.source, "dry_run": self.dry_run,
            "counts": {"added": len(self.added), "updated": len(self.updated), "skipped": len(self.skipped),
                       "conflicts": len(self.conflicts)},
            "added": self.added, "updated": self.updated, "skipped": self.skipped,
            "conflicts": [{"id": c.id, "path": c.path, "reason": c.reason} for c in self.conflicts],
            "warnings": self.warnings, "domains": self.domains, "new_domains": self.new_domains,
            "queries": {"path": self.queries_path, "count": self.queries} if self.queries_path else None,
            "clustering": self.clustering,
            "refresh": self.refresh.as_dict() if self.refresh is not None else None,
        }


# ---- helpers shared by the readers -------------------------------------------------------------


def _hash(data) -> str:
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def safe_id(source_id: str) -> str:
    """A valid note id for a source id: the id itself when valid, else a lowercase slug (capped at 80 chars)."""
    text = str(source_id).strip()
    if ID_PATTERN.match(text) and len(text) <= 120:
        return text
    slug = re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-._")
    if len(slug) > 80 or not slug:
        slug = (slug[:70].rstrip("-._") + "-" if slug else "id-") + hashlib.sha1(text.encode()).hexdigest()[:8]
    return slug


def map_ids(source_ids: list[str]) -> dict[str, str]:
    """source id -> note id, unique: a changed id that collides with another gets a short hash suffix."""
    wanted = {s: safe_id(s) for s in source_ids}
    counts: dict[str, int] = {}
    for note_id in wanted.values():
        counts[note_id] = counts.get(note_id, 0) + 1
    out = {}
    for source_id, note_id in wanted.items():
        if note_id != source_id and counts[note_id] > 1:
            note_id = f"{note_id}-{hashlib.sha1(source_id.encode()).hexdigest()[:6]}"
        out[source_id] = note_id
    return out


def json_line_error(file: str, exc: json.JSONDecodeError) -> ImportFailed:
    """ImportFailed for a JSON syntax error, with the file line."""
    return ImportFailed(f"{file}:{exc.lineno}: not valid JSON: {exc.msg} (column {exc.colno})")


def check_unique(records: list[Record]) -> None:
    """ImportFailed when two records of one source share a note id."""
    seen: dict[str, Record] = {}
    for record in records:
        first = seen.get(record.id)
        if first is not None:
            raise ImportFailed(f"{record.origin}: id {record.id!r} is also used by {first.origin}")
        seen[record.id] = record


# ---- format detection and the entry point ------------------------------------------------------


def detect_format(path: Path) -> str:
    """The format of a file or directory, from its names (and, for conversations, a look inside); UsageError when it cannot tell."""
    path = Path(path)
    from palace_cli.conversations import detect

    conversation = detect(path)
    if conversation is not None:
        return conversation
    if path.is_file():
        if path.name == "corpus.jsonl":
            return "beir"
        if path.suffix.lower() == ".json":
            return "memory-palace-json"
        if path.suffix.lower() in (".md", ".markdown"):
            return "markdown"
    elif path.is_dir():
        if (path / "corpus.jsonl").is_file():
            return "beir"
        has_json = any(p.suffix.lower() == ".json" for p in path.iterdir() if p.is_file())
        from palace_cli.importers.markdown import markdown_files

        has_md = bool(markdown_files(path))
        if has_json and not has_md:
            return "memory-palace-json"
        if has_md and not has_json:
            return "markdown"
        if has_md and has_json:
            raise UsageError(f"{path} holds both .json and .md files; pass --format")
    else:
        raise UsageError(f"{path}: no such file or directory")
    raise UsageError(f"cannot tell the format of {path}; pass --format ({', '.join(FORMATS)})")


def read(path: Path, format: str, options: dict) -> Batch:
    """Read and validate a source in the given format (ImportFailed on the first malformed record)."""
    if format == "memory-palace-json":
        from palace_cli.importers.memory_palace_json import read_memory_palace_json as reader
    elif format == "markdown":
        from palace_cli.importers.markdown import read_markdown as reader
    elif format == "beir":
        from palace_cli.importers.beir import read_beir as reader
    else:
        raise UsageError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")
    return reader(Path(path), options)


def import_path(palace: Palace, path, format: str | None = None, progress: Progress | None = None,
                *, domain: str | None = None, split: str = "auto", queries: str | Path | None = None,
                cluster_with: str = "auto", clusters: int | None = None, dry_run: bool = False,
                include: frozenset[str] | tuple = ()):
    """Import a file or directory into the palace: memories (an ImportReport; validates everything before
    writing anything) or conversations (a ConversationImport; see palace_cli.conversations.writer)."""
    from palace_cli.index.refresh import AUTO

    path = Path(path).expanduser()
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    resolved = path.resolve()
    if resolved.is_relative_to(palace.memories_dir) or palace.memories_dir.is_relative_to(resolved):
        raise UsageError(f"{path} holds or is inside this palace's memories/; import from outside it")
    format = format or detect_format(path)
    if format in CONVERSATION_FORMATS:
        return _import_conversations(palace, path, format, include, dry_run, progress,
                                     {"--domain": domain, "--queries": queries, "--clusters": clusters})
    if include:
        raise UsageError(f"--include is for conversation formats ({', '.join(CONVERSATION_FORMATS)}), not {format}")
    options = {"domain": domain, "split": split, "cluster_with": cluster_with, "clusters": clusters}
    batch = read(path, format, options)
    report = ImportReport(format, str(path), warnings=list(batch.warnings), dry_run=dry_run)

    # One scan of the palace for the whole import, through the note cache.
    palace.refresh(embedder=None, index_files=False)
    scan = palace.index.scan()
    plans = [_plan(scan.memories, record) for record in batch.records]
    needing = [record for record, (action, _, _) in zip(batch.records, plans) if action == "add" and not record.domain]
    if needing and batch.assign_domains is not None:
        report.clustering = batch.assign_domains(palace, batch.records, needing, progress)

    taken = {m.verify for m in scan.memories.values() if m.verify}
    to_write: list[tuple[Record, Path, Memory | None]] = []
    for record, (action, existing, reason) in zip(batch.records, plans):
        if action == "skip":
            report.skipped.append(record.id)
        elif action == "conflict":
            report.conflicts.append(Conflict(record.id, existing.path, reason))
        else:
            if existing is not None and record.domain_derived:
                record.domain = existing.domain  # a derived domain never moves a note the user has
            target = palace.memories_dir / record.domain / f"{record.id}.md"
            if target.exists() and (existing is None or palace.root / existing.path != target):
                report.conflicts.append(Conflict(record.id, palace.rel(target),
                                                 "a file is already there and is not this note (see `palace lint`)"))
                continue
            (report.added if action == "add" else report.updated).append(record.id)
            to_write.append((record, target, existing))
            report.domains[record.domain] = report.domains.get(record.domain, 0) + 1
    if dry_run:
        return report

    for record, target, message in _write_notes(palace, to_write, taken, progress):
        for listed in (report.added, report.updated):
            if record.id in listed:
                listed.remove(record.id)
        report.domains[record.domain] -= 1
        report.conflicts.append(Conflict(record.id, palace.rel(target), message))
    report.domains = {d: n for d, n in report.domains.items() if n}

    report.new_domains = declare_domains(palace, {d: s for d, s in batch.domain_specs.items() if d in report.domains})
    kept = _usable_queries(batch.queries, set(scan.memories) | {r.id for r in batch.records}, report.warnings)
    if kept:
        target = Path(queries).expanduser() if queries else palace.root / "queries.jsonl"
        report.queries_path = str(target)
        report.queries = write_queries(target, kept)
    embedder = batch.refresh_embedder if batch.refresh_embedder is not None else AUTO
    report.refresh = palace.refresh(embedder=embedder, progress=progress)
    return report


def _import_conversations(palace: Palace, path: Path, format: str, include, dry_run: bool,
                          progress: Progress | None, note_options: dict):
    """Conversations go to conversations/<source>/, through their own package."""
    from palace_cli.conversations.writer import import_conversations
    from palace_cli.conversations.sessionfile import CONVERSATIONS

    given = [name for name, value in note_options.items() if value is not None]
    if given:
        raise UsageError(f"{', '.join(given)} is for memory imports, not {format}")
    folder = palace.root / CONVERSATIONS
    resolved = path.resolve()
    if resolved.is_relative_to(folder) or folder.is_relative_to(resolved):
        raise UsageError(f"{path} holds or is inside this palace's {CONVERSATIONS}/; import from outside it")
    report = import_conversations(palace, path, format, frozenset(include), dry_run=dry_run, progress=progress)
    if not dry_run:  # index the turns now (and write index/conversations.md), as a memory import does
        report.refresh = palace.refresh(progress=progress)
    return report


def _write_notes(palace: Palace, to_write: list[tuple[Record, Path, Memory | None]], taken: set[str],
                 progress: Progress | None) -> list[tuple[Record, Path, str]]:
    """Render in order (token proposals depend on the ones before), write each chunk on a few threads;
    returns the records left unwritten (a note over the size limit), with the reason.

    Each write is atomic and fsynced; the fsyncs dominate a bulk import, and threads overlap them.
    """
    refused = []
    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        for start in range(0, len(to_write), CHUNK):
            chunk, texts = [], []
            for record, target, existing in to_write[start : start + CHUNK]:
                text = render_record(record, taken, existing)
                try:
                    check_note_size(text, palace.rel(target))
                except NoteError as exc:
                    refused.append((record, target, exc.reason))
                    continue
                chunk.append((record, target, existing))
                texts.append(text)
            list(pool.map(atomic_write, [target for _, target, _ in chunk], texts))
            for record, target, existing in chunk:
                if existing is not None and palace.root / existing.path != target:
                    (palace.root / existing.path).unlink(missing_ok=True)  # the source moved it to another domain
            if progress:
                progress("writing notes", min(start + CHUNK, len(to_write)), len(to_write))
    return refused


def _plan(memories: dict[str, Memory], record: Record) -> tuple[str, Memory | None, str]:
    """(action, existing memory, conflict reason): action is add, update, skip or conflict."""
    existing = memories.get(record.id)
    if existing is None:
        return "add", None, ""
    stamp = existing.meta.get("imported")
    if not isinstance(stamp, dict) or "record" not in stamp:
        return "conflict", existing, "a note with this id exists and was not imported; left as it is"
    if stamp.get("from") != record.source:
        return "conflict", existing, f"this id was imported from {stamp.get('from')}; left as it is"
    if stamp.get("record") == record.digest():
        return "skip", existing, ""
    if stamp.get("note") != note_digest(existing.meta, existing.body, existing.domain):
        return "conflict", existing, "changed in the source and edited in the palace since the last import; left as it is"
    return "update", existing, ""


def note_digest(meta: dict, body: str, domain: str) -> str:
    """Hash of a note as written (frontmatter except `imported`, body, domain): tells a user edit."""
    return _hash({"meta": {k: v for k, v in meta.items() if k != "imported"}, "body": body, "domain": domain})


def render_body(record: Record) -> str:
    """The note body: `# subject`, then the Image, Content and Links sections the record has (no placeholders)."""
    if record.body is not None:
        return record.body
    parts = [f"# {record.subject}\n"]
    if record.image.strip():
        parts.append(f"## Image\n{record.image.strip()}\n")
    if record.content.strip():
        parts.append(f"## Content\n{record.content.strip()}\n")
    if record.links:
        parts.append("## Links\n" + "".join(f"- [[{link}]]\n" for link in record.links))
    return "\n".join(parts)


def render_record(record: Record, taken: set[str], existing: Memory | None = None) -> str:
    """The note text for a record: frontmatter with the import stamp, then the body."""
    verify = record.verify
    if verify is None:
        previous = existing.verify if existing is not None else ""
        if previous and contains_phrase(record.image, previous):
            verify = previous  # keep a token the person may already know
        elif record.image.strip():
            # The anchor is shown in the index files, so a token must not be guessable from it either.
            verify = propose_token(record.image, record.subject, record.keywords + [record.anchor], record.content,
                                   taken) or ""
        else:
            verify = ""
    if verify:
        taken.add(verify)
    created = record.created or (existing.created if existing is not None else "") or date.today().isoformat()
    fields = {"id": record.id, "subject": record.subject, "anchor": record.anchor, "keywords": record.keywords,
              "verify": verify, "links": record.links, "created": created, **record.fields}
    body = render_body(record)
    fields["imported"] = {"from": record.source, "record": record.digest(),
                          "note": note_digest(_as_read(fields), body, record.domain)}
    return "---\n" + dump_frontmatter(fields) + "---\n" + body


def _as_read(fields: dict) -> dict:
    """The frontmatter as a YAML reader returns it, up to `str` of dates (which note_digest applies anyway)."""
    return json.loads(json.dumps(fields, default=str))


def declare_domains(palace: Palace, specs: dict[str, dict]) -> list[str]:
    """Append `[domains.<name>]` tables for domains palace.toml does not declare yet; returns their names."""
    new = {name: spec for name, spec in sorted(specs.items()) if name not in palace.config.domains and spec}
    if not new:
        return []
    config_path = palace.root / "palace.toml"
    text = config_path.read_text(encoding="utf-8")
    lines = [text.rstrip("\n"), ""]
    for name, spec in new.items():
        lines.append(f"[domains.{name}]")
        for key, value in spec.items():
            if value not in (None, "", []):
                lines.append(f"{key} = {json.dumps(value, ensure_ascii=False)}")
        lines.append("")
    atomic_write(config_path, "\n".join(lines))
    from palace_cli.core.config import load_config

    palace.config = load_config(palace.root)
    return list(new)


def _usable_queries(queries: list[dict], known: set[str], warnings: list[str]) -> list[dict]:
    """Queries with their expected ids narrowed to memories that exist; a query left with none is dropped."""
    kept = []
    for query in queries:
        origin = query.pop("origin", query["qid"])
        missing = [i for i in query["expected"] if i not in known]
        if missing:
            warnings.append(f"{origin}: expected memories not in the palace: {', '.join(missing)}")
        query["expected"] = [i for i in query["expected"] if i in known]
        if query["expected"]:
            kept.append(query)
        else:
            warnings.append(f"{origin}: no expected memory is in the palace; query not written")
    return kept


def write_queries(path: Path, queries: list[dict]) -> int:
    """Write benchmark queries as JSONL, keeping other queries already in the file (same qid: replaced)."""
    ours = {q["qid"] for q in queries}
    kept = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except (ValueError, RecursionError):  # not ours to judge: kept as it is
                kept.append(line)
                continue
            if not (isinstance(entry, dict) and entry.get("qid") in ours):
                kept.append(line)
    text = "\n".join(kept + [json.dumps(q, ensure_ascii=False) for q in queries]) + "\n"
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        atomic_write(path, text)
    return len(queries)
