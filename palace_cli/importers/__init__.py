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

from pathlib import Path

from palace_cli.errors import UsageError
from palace_cli.importers.formats import CONVERSATION_FORMATS, FORMATS, NOTE_FORMATS, detect_format, read
from palace_cli.importers.records import (Batch, Conflict, ImportReport, Record, check_unique, json_line_error, map_ids,
                                          redact_records, safe_id, scrub_records)
from palace_cli.importers.writer import declare_domains, plan, usable_queries, write_notes, write_queries
from palace_cli.palace import Palace
from palace_cli.progress import Progress

__all__ = ["Batch", "CONVERSATION_FORMATS", "Conflict", "FORMATS", "ImportReport", "NOTE_FORMATS", "Record",
           "check_unique", "detect_format", "import_path", "json_line_error", "map_ids", "read", "safe_id"]


def import_path(palace: Palace, path, format: str | None = None, progress: Progress | None = None,
                *, domain: str | None = None, split: str = "auto", queries: str | Path | None = None,
                cluster_with: str = "auto", clusters: int | None = None, dry_run: bool = False,
                include: frozenset[str] | tuple = (), keep_secrets: bool = False):
    """Import a file or directory into the palace: memories (an ImportReport; validates everything before
    writing anything) or conversations (a ConversationImport; see palace_cli.importers.chats.writer). Secrets
    in what is read are redacted and `<private>` spans dropped before anything is written, unless `keep_secrets`
    (core/secrets.py); the report's `redacted` counts them."""
    path = Path(path).expanduser()
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    resolved = path.resolve()
    if resolved.is_relative_to(palace.memories_dir) or palace.memories_dir.is_relative_to(resolved):
        raise UsageError(f"{path} holds or is inside this palace's memories/; import from outside it")
    format = format or detect_format(path)
    if format in CONVERSATION_FORMATS:
        return _import_conversations(palace, path, format, include, dry_run, progress,
                                     {"--domain": domain, "--queries": queries, "--clusters": clusters}, keep_secrets)
    if include:
        raise UsageError(f"--include is for conversation formats ({', '.join(CONVERSATION_FORMATS)}), not {format}")
    batch = read(path, format, {"domain": domain, "split": split, "cluster_with": cluster_with, "clusters": clusters})
    scrub_records(batch)
    report = ImportReport(format, str(path), warnings=list(batch.warnings), dry_run=dry_run,
                          redacted=0 if keep_secrets else redact_records(batch))
    return _import_memories(palace, batch, report, queries, progress)


def _import_memories(palace: Palace, batch: Batch, report: ImportReport, queries, progress: Progress | None
                     ) -> ImportReport:
    """Plan every record against one scan of the palace, then write, declare domains, keep queries, refresh."""
    from palace_cli.index.refresh import AUTO

    palace.refresh(embedder=None, index_files=False)  # one scan for the whole import, through the note cache
    scan = palace.index.scan()
    plans = [plan(scan.memories, record) for record in batch.records]
    needing = [record for record, (action, _, _) in zip(batch.records, plans) if action == "add" and not record.domain]
    if needing and batch.assign_domains is not None:
        report.clustering = batch.assign_domains(palace, batch.records, needing, progress)
    taken = {m.verify for m in scan.memories.values() if m.verify}
    to_write = _decide(palace, batch.records, plans, report)
    if report.dry_run:
        return report
    for record, target, message in write_notes(palace, to_write, taken, progress):
        for listed in (report.added, report.updated):
            if record.id in listed:
                listed.remove(record.id)
        report.domains[record.domain] -= 1
        report.conflicts.append(Conflict(record.id, palace.rel(target), message))
    report.domains = {d: n for d, n in report.domains.items() if n}

    report.new_domains = declare_domains(palace, {d: s for d, s in batch.domain_specs.items() if d in report.domains})
    kept = usable_queries(batch.queries, set(scan.memories) | {r.id for r in batch.records}, report.warnings)
    if kept:
        target = Path(queries).expanduser() if queries else palace.root / "queries.jsonl"
        report.queries_path = str(target)
        report.queries = write_queries(target, kept)
    embedder = batch.refresh_embedder if batch.refresh_embedder is not None else AUTO
    report.refresh = palace.refresh(embedder=embedder, progress=progress)
    return report


def _decide(palace: Palace, records: list[Record], plans: list, report: ImportReport) -> list:
    """(record, target file, existing memory) to write; skips and conflicts go into the report."""
    to_write = []
    for record, (action, existing, reason) in zip(records, plans):
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
    return to_write


def _import_conversations(palace: Palace, path: Path, format: str, include, dry_run: bool,
                          progress: Progress | None, note_options: dict, keep_secrets: bool = False):
    """Conversations go to conversations/<source>/, through the chat readers and the session-file writer (importers/chats)."""
    from palace_cli.importers.chats.writer import import_conversations
    from palace_cli.conversations.sessionfile import CONVERSATIONS

    given = [name for name, value in note_options.items() if value is not None]
    if given:
        raise UsageError(f"{', '.join(given)} is for memory imports, not {format}")
    folder = palace.root / CONVERSATIONS
    resolved = path.resolve()
    if resolved.is_relative_to(folder) or folder.is_relative_to(resolved):
        raise UsageError(f"{path} holds or is inside this palace's {CONVERSATIONS}/; import from outside it")
    report = import_conversations(palace, path, format, frozenset(include), dry_run=dry_run, progress=progress,
                                  keep_secrets=keep_secrets)
    if not dry_run:  # index the turns now (and write index/conversations.md), as a memory import does
        report.refresh = palace.refresh(progress=progress)
    return report
