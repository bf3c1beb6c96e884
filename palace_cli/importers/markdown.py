"""A folder of ordinary Markdown notes: a memory per file, or per `##` section where a file holds several.

- subject: frontmatter `subject`/`title`, else the H1 (per file) or H2 (per section), else the file name;
- content: the text, with its own headings pushed one level down so they stay inside `## Content`;
- domain: the folder under the imported directory (nested folders joined by `-`), or `--domain`;
- keywords: frontmatter `tags` and `keywords`; other frontmatter keys are kept under `source:`.
A note already in palace format (`## Image` / `## Content` sections) is imported as it is.
"""

from __future__ import annotations

import re
from pathlib import Path

from palace_cli.errors import ImportFailed, NoteError, UsageError
from palace_cli.core.notes import ID_PATTERN
from palace_cli.core.notefile import load_frontmatter, opens_frontmatter, split_frontmatter
from palace_cli.core.text import slugify
from palace_cli.core.walk import files_under
from palace_cli.core.markdown import parse_sections
from palace_cli.importers.records import Batch, Record

FORMAT = "markdown"
SUFFIXES = (".md", ".markdown")
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
FENCE = re.compile(r"^[ \t]{0,3}(```+|~~~+)")
# frontmatter keys the importer turns into note fields; anything else goes under `source:`
MAPPED = {"id", "subject", "title", "tags", "keywords", "anchor", "verify", "links", "aliases", "created", "date"}
PALACE_SECTIONS = {"image", "content"}
SPLITS = ("auto", "file", "section")


def read_markdown(path: Path, options: dict) -> Batch:
    """Read one Markdown file or every Markdown file under a directory."""
    split = options.get("split") or "auto"
    if split not in SPLITS:
        raise UsageError(f"--split must be one of {', '.join(SPLITS)}")
    root = path if path.is_dir() else path.parent
    files = files_under(path, SUFFIXES) if path.is_dir() else [path]
    if not files:
        raise ImportFailed(f"{path}: no Markdown files to import")
    batch = Batch(FORMAT, [])
    found: list[tuple[Record, str]] = []
    for file in files:
        rel = file.relative_to(root).as_posix()
        domain = slugify(options["domain"]) if options.get("domain") else _domain(file, root)
        found += _read_file(file, rel, domain, split, batch.warnings)
    batch.records = _unique_ids(found)
    return batch


def _domain(file: Path, root: Path) -> str:
    folders = file.relative_to(root).parts[:-1]
    return slugify("-".join(folders) if folders else root.resolve().name)


def _read_text(file: Path, rel: str) -> str:
    raw = file.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ImportFailed(f"{rel}:{line}: not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
    return text.replace("\r\n", "\n")


def _read_file(file: Path, rel: str, domain: str, split: str, warnings: list[str]) -> list[tuple[Record, str]]:
    """(record, id to fall back to when its id collides) for each memory in one file."""
    text = _read_text(file, rel)
    if not text.strip():
        warnings.append(f"{rel}: empty file; nothing imported")
        return []
    meta: dict = {}
    body = text
    if opens_frontmatter(text):
        try:
            yaml_text, body, _ = split_frontmatter(text, rel)
            meta = load_frontmatter(yaml_text, rel)
        except NoteError as exc:
            raise ImportFailed(str(exc)) from None
    headings = _headings(body)
    h2 = [h for h in headings if h[1] == 2]
    source = f"{FORMAT}:{rel}"
    qualified = slugify(str(Path(rel).with_suffix("")))
    if {title.lower() for _, _, title in h2} & PALACE_SECTIONS and meta.get("subject"):
        return [(_palace_note(meta, body, rel, domain, source), "")]
    lines = body.split("\n")
    preamble = lines[: h2[0][0]] if h2 else lines
    preamble_text = "\n".join(line for line in preamble if not HEADING.match(line)).strip()
    per_section = split == "section" or (split == "auto" and len(h2) >= 2 and not preamble_text)
    common = _common(meta)
    if not per_section:
        h1 = next(((i, title) for i, level, title in headings if level == 1), None)
        subject = str(meta.get("subject") or meta.get("title") or (h1[1] if h1 else "") or _humanise(file.stem))
        if h1 and h1[1].strip() == subject.strip():
            lines = lines[: h1[0]] + lines[h1[0] + 1 :]  # the title is the subject, not content
        note_id = str(meta.get("id") or "").strip()
        if note_id and not ID_PATTERN.match(note_id):
            raise ImportFailed(f"{rel}: id {note_id!r} must be lowercase letters, digits, '.', '_' or '-'")
        record = _record(note_id or slugify(file.stem), subject, "\n".join(lines), rel, domain, source, common)
        return [(record, "" if note_id else qualified)]
    found = []
    for n, (start, _, title) in enumerate(h2):
        end = h2[n + 1][0] if n + 1 < len(h2) else len(lines)
        section = "\n".join(lines[start + 1 : end])
        if not section.strip():
            warnings.append(f"{rel}: section `## {title}` is empty; nothing imported")
            continue
        record = _record(slugify(title), title, section, f"{rel}: ## {title}", domain, f"{source}#{slugify(title)}",
                         common)
        found.append((record, slugify(f"{qualified} {title}")))
    return found


def _headings(body: str) -> list[tuple[int, int, str]]:
    """(line index, level, text) of ATX headings outside fenced code."""
    found, fence = [], ""
    for i, line in enumerate(body.split("\n")):
        marker = FENCE.match(line)
        if marker:
            if not fence:
                fence = marker.group(1)[0] * 3
            elif marker.group(1).startswith(fence):
                fence = ""
            continue
        if not fence and (m := HEADING.match(line)):
            found.append((i, len(m.group(1)), m.group(2).strip()))
    return found


def _demote(text: str) -> str:
    """Push headings down a level (never to `##`) so a note's own sections stay inside `## Content`."""
    out, fence = [], ""
    for line in text.split("\n"):
        marker = FENCE.match(line)
        if marker:
            fence = "" if fence and marker.group(1).startswith(fence) else (fence or marker.group(1)[0] * 3)
        elif not fence and (m := HEADING.match(line)):
            level = min(6, max(3, len(m.group(1)) + 1))
            line = "#" * level + " " + m.group(2)
        out.append(line)
    return "\n".join(out).strip()


def _humanise(stem: str) -> str:
    return re.sub(r"[-_]+", " ", stem).strip().capitalize() or stem


def _as_list(value) -> list[str]:
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else value if isinstance(value, list) else [value]
    return [str(v).strip().lstrip("#") for v in items if v is not None and str(v).strip().lstrip("#")]


def _common(meta: dict) -> dict:
    """What every memory of one file shares: anchor, verify, keywords, links, created, other keys."""
    keywords = []
    for key in ("keywords", "tags"):
        for word in _as_list(meta.get(key)):
            if word not in keywords:
                keywords.append(word)
    unknown = {k: v for k, v in meta.items() if k not in MAPPED}
    fields = {"aliases": _as_list(meta["aliases"])} if meta.get("aliases") else {}
    if unknown:
        fields["source"] = unknown
    return {"keywords": keywords, "links": _as_list(meta.get("links")),
            "created": str(meta.get("created") or meta.get("date") or ""),
            "anchor": str(meta.get("anchor") or "").strip(),
            "verify": str(meta["verify"]).strip() if meta.get("verify") else None, "fields": fields}


def _record(note_id: str, subject: str, text: str, origin: str, domain: str, source: str, common: dict) -> Record:
    return Record(id=note_id, subject=subject.strip(), origin=origin, source=source, domain=domain,
                  anchor=common["anchor"], content=_demote(text), keywords=list(common["keywords"]),
                  links=list(common["links"]), verify=common["verify"], created=common["created"],
                  fields=dict(common["fields"]))


def _palace_note(meta: dict, body: str, rel: str, domain: str, source: str) -> Record:
    """A note already in palace format: its frontmatter and body are kept as they are."""
    note_id = str(meta.get("id") or slugify(Path(rel).stem)).strip()
    if not ID_PATTERN.match(note_id):
        raise ImportFailed(f"{rel}: id {note_id!r} must be lowercase letters, digits, '.', '_' or '-'")
    sections = parse_sections(body, 1)
    fixed = {"id", "subject", "anchor", "keywords", "verify", "links", "created", "imported"}
    return Record(id=note_id, subject=str(meta.get("subject")).strip(), origin=rel, source=source, domain=domain,
                  anchor=str(meta.get("anchor") or "").strip(), image=sections.get("image", ("", 0))[0],
                  content=sections.get("content", ("", 0))[0], keywords=_as_list(meta.get("keywords")),
                  links=_as_list(meta.get("links")), verify=str(meta.get("verify") or "").strip() or None,
                  created=str(meta.get("created") or ""),
                  fields={k: v for k, v in meta.items() if k not in fixed}, body=body)


def _unique_ids(found: list[tuple[Record, str]]) -> list[Record]:
    """Ids unique within the import: colliding ids take their file-qualified form, then a -2, -3 suffix."""
    counts: dict[str, int] = {}
    for record, _ in found:
        counts[record.id] = counts.get(record.id, 0) + 1
    seen: dict[str, Record] = {}
    for record, qualified in found:
        if counts[record.id] > 1 and qualified:
            record.id = qualified
        if record.id in seen and not qualified:
            raise ImportFailed(f"{record.origin}: id {record.id!r} is also used by {seen[record.id].origin}")
        base, n = record.id, 2
        while record.id in seen:
            record.id = f"{base}-{n}"
            n += 1
        seen[record.id] = record
    return [record for record, _ in found]
