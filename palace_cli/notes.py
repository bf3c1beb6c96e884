"""One memory note: forgiving parse, strict atomic write that keeps everything it did not change."""

from __future__ import annotations

import hashlib
import io
import os
import re
import tempfile
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import yaml

from .errors import NoteError

MAX_NOTE_BYTES = 1_000_000
REQUIRED_FIELDS = ("id", "subject", "anchor", "verify")
ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
LINK_PATTERN = re.compile(r"\[\[([^\]|#]+)(?:[|#][^\]]*)?\]\]")
SECTION_PATTERN = re.compile(r"^##\s+(.+?)\s*$", re.MULTILINE)


@dataclass
class Warning_:
    """Something odd about a note that did not stop it from being read."""

    line: int
    code: str
    message: str


@dataclass
class Memory:
    """A parsed memory note. `path` is relative to the palace root, with forward slashes."""

    id: str
    subject: str
    anchor: str
    verify: str
    domain: str
    path: str
    keywords: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    created: str = ""
    image: str = ""
    content: str = ""
    body: str = ""
    line: int = 1
    image_line: int = 0
    content_line: int = 0
    body_links: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    content_hash: str = ""
    warnings: list[Warning_] = field(default_factory=list)

    @property
    def location(self) -> str:
        """`path:line`, clickable in editors and terminals."""
        return f"{self.path}:{self.line}"

    @property
    def all_links(self) -> list[str]:
        """Frontmatter links, then body [[links]] not already listed."""
        seen = list(self.links)
        for link in self.body_links:
            if link not in seen:
                seen.append(link)
        return seen

    def search_text(self) -> str:
        """The text embedded and shown: subject, anchor, keywords, image, content."""
        return "\n".join(
            part for part in (self.subject, self.anchor, ", ".join(self.keywords), self.image, self.content) if part
        )


def slugify(text: str) -> str:
    """A note id from a subject: lowercase words joined by hyphens."""
    text = re.sub(r"\(([^)]*)\)", " ", text.lower())
    slug = re.sub(r"[^a-z0-9]+", "-", text).strip("-")
    return slug[:80] or "memory"


def read_note_text(path: Path, display: str | None = None) -> tuple[str, list[Warning_]]:
    """Read a note file as text, forgiving BOM and CRLF (reported as warnings), strict on the rest."""
    shown = display or str(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise NoteError(shown, f"cannot read: {exc.strerror}") from None
    if size > MAX_NOTE_BYTES:
        raise NoteError(shown, f"file is {size:,} bytes, over the {MAX_NOTE_BYTES:,} byte limit for a note")
    data = path.read_bytes()
    if not data.strip():
        raise NoteError(shown, "empty file", line=1)
    warnings = []
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
        warnings.append(Warning_(1, "bom", "file starts with a UTF-8 byte-order mark; palace reads it but editors may not"))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise NoteError(shown, f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})", line=line) from None
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
        warnings.append(Warning_(1, "crlf", "CRLF line endings; palace reads them, writes keep them"))
    return text, warnings


def split_frontmatter(text: str, shown: str) -> tuple[str, str, int]:
    """Split `---` frontmatter from the body; returns (yaml_text, body, body_first_line)."""
    if not text.startswith("---"):
        stray = re.search(r"^\s*---\s*$", text, re.MULTILINE)
        if stray is None and re.search(r"\S---", text[:400]):
            raise NoteError(shown, "frontmatter `---` must start at the beginning of a line", line=1)
        raise NoteError(shown, "no YAML frontmatter: a note must start with a `---` line", line=1)
    first_newline = text.find("\n")
    if text[:first_newline].strip() != "---":
        raise NoteError(shown, "the opening `---` must be alone on the first line", line=1)
    closing = re.search(r"^---[ \t]*$", text[first_newline + 1 :], re.MULTILINE)
    if closing is None:
        raise NoteError(shown, "frontmatter is not closed by a `---` line", line=1)
    yaml_text = text[first_newline + 1 : first_newline + 1 + closing.start()]
    rest_start = first_newline + 1 + closing.end()
    if text[rest_start : rest_start + 1] == "\n":
        rest_start += 1
    body = text[rest_start:]
    body_first_line = text[:rest_start].count("\n") + 1
    return yaml_text, body, body_first_line


def load_frontmatter(yaml_text: str, shown: str) -> dict:
    """Parse the YAML block; errors carry the file line (frontmatter starts on line 2)."""
    try:
        meta = yaml.safe_load(yaml_text) if yaml_text.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise NoteError(shown, f"frontmatter is not valid YAML: {problem}", line=line) from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise NoteError(shown, f"frontmatter must be a mapping of fields, not a {type(meta).__name__}", line=2)
    return meta


def parse_sections(body: str, body_first_line: int) -> dict[str, tuple[str, int]]:
    """`## Heading` sections of the body: lowercased name -> (text, file line of the heading)."""
    sections = {}
    matches = list(SECTION_PATTERN.finditer(body))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(body)
        text = body[match.end() : end].strip()
        line = body_first_line + body[: match.start()].count("\n")
        sections.setdefault(match.group(1).strip().lower(), (text, line))
    return sections


def _as_list(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if v is not None and str(v).strip()]
    return [str(value)]


def parse_note(text: str, path: str, domain: str, warnings: list[Warning_] | None = None) -> Memory:
    """Parse note text into a Memory; raises NoteError with file and line for what cannot be read."""
    yaml_text, body, body_first_line = split_frontmatter(text, path)
    meta = load_frontmatter(yaml_text, path)
    missing = [name for name in REQUIRED_FIELDS if not str(meta.get(name) or "").strip()]
    if "id" in missing:
        raise NoteError(path, "missing required field `id`", line=2)
    note_id = str(meta["id"]).strip()
    if not ID_PATTERN.match(note_id):
        raise NoteError(path, f"id {note_id!r} must be lowercase letters, digits, '.', '_' or '-'", line=2)
    sections = parse_sections(body, body_first_line)
    image, image_line = sections.get("image", ("", 0))
    content, content_line = sections.get("content", ("", 0))
    heading = re.search(r"^#\s+\S", body, re.MULTILINE)
    line = body_first_line + body[: heading.start()].count("\n") if heading else body_first_line
    created = meta.get("created", "")
    memory = Memory(
        id=note_id,
        subject=str(meta.get("subject") or "").strip(),
        anchor=str(meta.get("anchor") or "").strip(),
        verify=str(meta.get("verify") or "").strip(),
        domain=domain,
        path=path,
        keywords=_as_list(meta.get("keywords")),
        links=_as_list(meta.get("links")),
        aliases=_as_list(meta.get("aliases")),
        created=created.isoformat() if isinstance(created, date) else str(created or ""),
        image=image,
        content=content,
        body=body,
        line=line,
        image_line=image_line,
        content_line=content_line,
        body_links=[m.group(1).strip() for m in LINK_PATTERN.finditer(body)],
        meta=meta,
        content_hash=hashlib.sha256(text.encode("utf-8")).hexdigest()[:16],
        warnings=list(warnings or []),
    )
    for name in missing:
        memory.warnings.append(Warning_(2, "missing-field", f"missing required field `{name}`"))
    if not image:
        memory.warnings.append(Warning_(line, "missing-section", "no `## Image` section"))
    if not content:
        memory.warnings.append(Warning_(line, "missing-section", "no `## Content` section"))
    return memory


def load_note(root: Path, relpath: str, domain: str) -> Memory:
    """Read and parse one note file under root."""
    text, warnings = read_note_text(root / relpath, relpath)
    return parse_note(text, relpath, domain, warnings)


# ---- writing ---------------------------------------------------------------------------------


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write via a temp file in the same directory, fsync, then rename: readers never see half a file."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _round_trip_yaml():
    from ruamel.yaml import YAML

    rt = YAML(typ="rt")
    rt.preserve_quotes = True
    rt.width = 4096
    rt.indent(mapping=2, sequence=4, offset=2)
    return rt


def update_frontmatter(path: Path, changes: dict, display: str | None = None) -> None:
    """Set frontmatter fields in place, keeping other keys, comments, key order and the body byte-for-byte."""
    shown = display or str(path)
    raw = path.read_bytes()
    bom = b"\xef\xbb\xbf" if raw.startswith(b"\xef\xbb\xbf") else b""
    text = raw[len(bom) :].decode("utf-8")
    newline = "\r\n" if "\r\n" in text.split("\n", 1)[0] + "\n" else "\n"
    match = re.match(r"---[ \t]*\r?\n(.*?)(^---[ \t]*(?:\r?\n|$))", text, re.DOTALL | re.MULTILINE)
    if match is None:
        raise NoteError(shown, "no frontmatter block to update", line=1)
    yaml_text, closing = match.group(1), match.group(2)
    rest = text[match.end() :]
    load_frontmatter(yaml_text.replace("\r\n", "\n"), shown)  # same error messages as reading
    rt = _round_trip_yaml()
    data = rt.load(yaml_text) or {}
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    out = io.StringIO()
    rt.dump(data, out)
    dumped = out.getvalue()
    if newline == "\r\n":
        dumped = dumped.replace("\r\n", "\n").replace("\n", "\r\n")
    head = text[: match.start(1)]
    atomic_write(path, bom + (head + dumped + closing + rest).encode("utf-8"))


def replace_section(path: Path, section: str, new_text: str, display: str | None = None) -> None:
    """Replace the text of one `## section` of a note, keeping every other byte as it was."""
    shown = display or str(path)
    text = path.read_bytes().decode("utf-8")
    matches = list(re.finditer(r"^##[ \t]+(.+?)[ \t]*\r?$", text, re.MULTILINE))
    for i, match in enumerate(matches):
        if match.group(1).strip().lower() == section.lower():
            start = match.end()
            end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
            newline = "\r\n" if text[match.end() : match.end() + 2] == "\r\n" else "\n"
            separator = newline if i + 1 < len(matches) else ""
            body = new_text.strip().replace("\n", newline)
            atomic_write(path, text[:start] + newline + body + newline + separator + text[end:])
            return
    raise NoteError(shown, f"no `## {section}` section to replace")


def dump_frontmatter(fields: dict) -> str:
    """YAML for a new note's frontmatter, lists in flow style, keys in the given order."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedSeq

    writer = YAML(typ="rt")
    writer.width = 4096
    data = {}
    for key, value in fields.items():
        if isinstance(value, list):
            seq = CommentedSeq(value)
            seq.fa.set_flow_style()
            value = seq
        data[key] = value
    out = io.StringIO()
    writer.dump(data, out)
    return out.getvalue()


def render_note(fields: dict, image: str, content: str, link_reasons: dict[str, str] | None = None,
                template: str | None = None) -> str:
    """The text of a new SMASHIN note from its fields and sections."""
    links = fields.get("links") or []
    reasons = link_reasons or {}
    link_lines = "\n".join(f"- [[{link}]]" + (f": {reasons[link]}" if reasons.get(link) else "") for link in links)
    body_template = template or DEFAULT_BODY
    body = body_template.format(
        subject=fields.get("subject", ""),
        image=image.strip() or "(a vivid scene: substitute, move, exaggerate, engage the senses)",
        content=content.strip() or "(the facts, in your own words)",
        links=link_lines or "- (none yet)",
    )
    return "---\n" + dump_frontmatter(fields) + "---\n" + body


DEFAULT_BODY = """# {subject}

## Image
{image}

## Content
{content}

## Links
{links}
"""
