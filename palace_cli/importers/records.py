"""What a memory importer reads a source into (Record, Batch) and reports (ImportReport), and the id helpers the
format readers share."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from palace_cli.conversations.model import digest as data_digest, scrub
from palace_cli.core.notes import ID_PATTERN
from palace_cli.core.secrets import redact
from palace_cli.core.text import slug
from palace_cli.errors import ImportFailed
from palace_cli.progress import Progress

if TYPE_CHECKING:
    from palace_cli.palace import Palace


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
        return data_digest(data)


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
    redacted: int = 0  # secrets redacted and private spans dropped in the records (core/secrets.py)

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
            "clustering": self.clustering, "redacted": self.redacted,
            "refresh": self.refresh.as_dict() if self.refresh is not None else None,
        }


# ---- helpers the readers share ----------------------------------------------------------------


def safe_id(source_id: str) -> str:
    """A valid note id for a source id: the id itself when valid, else its slug (`.` and `_` kept; over 80
    characters, cut and told apart by a hash)."""
    text = str(source_id).strip()
    if ID_PATTERN.match(text) and len(text) <= 120:
        return text
    slugged = slug(text, None, keep="._")
    if len(slugged) > 80 or not slugged:
        slugged = (slugged[:70].rstrip("-._") + "-" if slugged else "id-") + hashlib.sha1(text.encode()).hexdigest()[:8]
    return slugged


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


def scrub_records(batch: Batch) -> None:
    """Replace lone surrogates (a JSON `\\ud800` escape, which no file can hold) in every record with U+FFFD,
    with a warning naming the record."""
    for record in batch.records:
        found = False
        for name in ("id", "subject", "anchor", "image", "content", "verify", "created", "body", "keywords", "links",
                     "fields"):
            value, changed = scrub(getattr(record, name))
            if changed:
                setattr(record, name, value)
                found = True
        if found:
            batch.warnings.append(f"{record.origin}: lone surrogate escapes (`\\ud800`) are not characters; "
                                  "read as U+FFFD")


def redact_records(batch: Batch) -> int:
    """Redact the secrets in every record's words (subject, anchor, Image, Content, a kept body, keywords, extra
    fields) and drop their `<private>` spans, before anything is written; how many were (core/secrets.py)."""
    total = 0
    for record in batch.records:
        for name in ("subject", "anchor", "image", "content", "body", "keywords", "fields"):
            value, count = _redacted(getattr(record, name))
            if count:
                setattr(record, name, value)
                total += count
    return total


def _redacted(value):
    """(value with its strings redacted, how many were), through lists and dicts."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        pairs = [_redacted(item) for item in value]
        return [item for item, _ in pairs], sum(count for _, count in pairs)
    if isinstance(value, dict):
        pairs = {key: _redacted(item) for key, item in value.items()}
        return {key: item for key, (item, _) in pairs.items()}, sum(count for _, count in pairs.values())
    return value, 0
