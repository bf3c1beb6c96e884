"""Writing imported memories: plan each record against the palace (add, update, skip, conflict), render notes
with their import stamp, write them atomically on a few threads, declare new domains, keep benchmark queries."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

from palace_cli.core.disk import atomic_write
from palace_cli.core.noteedit import dump_frontmatter
from palace_cli.core.notes import Memory
from palace_cli.core.tokens import contains_phrase, propose_token
from palace_cli.conversations.model import digest as data_digest
from palace_cli.editing.writes import Change, apply, creating, note_target, removing, replacing
from palace_cli.errors import PalaceError
from palace_cli.importers.records import Record
from palace_cli.palace import Palace
from palace_cli.progress import Progress

WRITERS, CHUNK = 8, 256


def write_notes(palace: Palace, to_write: list[tuple[Record, Path, Memory | None]], taken: set[str],
                 progress: Progress | None) -> list[tuple[Record, Path, str]]:
    """Render in order (token proposals depend on the ones before), write each chunk through editing's writer on a
    few threads; returns the records left unwritten (a note over the size limit, a path palace would not read or
    that another file holds), with the reason.

    Each write is atomic and fsynced; the fsyncs dominate a bulk import, and threads overlap them. Each note
    stands alone (a rerun imports what is missing), so no journal.
    """
    refused = []
    listing: dict = {}
    for start in range(0, len(to_write), CHUNK):
        changes, written = [], {}
        for record, target, existing in to_write[start : start + CHUNK]:
            relpath = palace.rel(target)
            try:
                change = _change(palace, relpath, render_record(record, taken, existing), existing, listing)
            except PalaceError as exc:
                refused.append((record, target, getattr(exc, "reason", str(exc))))
                continue
            changes += change
            written[relpath] = (record, target)
        left = apply(palace, changes, "import", journal=False, threads=WRITERS, strict=False)
        refused += [(*written[path], "changed by someone else meanwhile; left as it is")
                    for path in left if path in written]
        if progress:
            progress("writing notes", min(start + CHUNK, len(to_write)), len(to_write))
    return refused


def _change(palace: Palace, relpath: str, text: str, existing: Memory | None, listing: dict) -> list[Change]:
    """The changes one record makes: its note written (over the note it imported before, or new), and that note
    removed when the source moved it to another domain."""
    if existing is not None and existing.path == relpath:
        return [replacing(palace, relpath, text)]
    note_target(palace, relpath, new=True, listing=listing)
    moved = [removing(palace, existing.path)] if existing is not None else []
    return [creating(relpath, text), *moved]


def plan(memories: dict[str, Memory], record: Record) -> tuple[str, Memory | None, str]:
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
    return data_digest({"meta": {k: v for k, v in meta.items() if k != "imported"}, "body": body, "domain": domain})


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


def usable_queries(queries: list[dict], known: set[str], warnings: list[str]) -> list[dict]:
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
