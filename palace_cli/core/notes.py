"""One memory note: forgiving parse, strict atomic write that keeps everything it did not change."""

from __future__ import annotations

import io
import math
import os
import re
import stat
import tempfile
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import yaml

from palace_cli.core import safeyaml
from palace_cli.errors import NoteError
from palace_cli.core.validity import DATE_FIELDS, LINK_FIELDS, TYPES, normalize_moment

MAX_NOTE_BYTES = 1_000_000
ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
ATTACHMENT = re.compile(r"\.(?:png|jpe?g|gif|svg|webp|bmp|avif|pdf|mp3|wav|ogg|m4a|flac|mp4|webm|mov|mkv|canvas|"
                        r"excalidraw|base|csv|xlsx?|docx?|pptx?|zip)$", re.IGNORECASE)
LINK_PATTERN = re.compile(r"\[\[([^\]|#]+)(?:[|#][^\]]*)?\]\]")
SECTION_PATTERN = re.compile(r"^##[ \t]+(.+?)[ \t]*$", re.MULTILINE)
TEXT_FIELDS = ("subject", "anchor", "verify")
LIST_FIELDS = ("keywords", "links", "aliases")
# A top-level `key:` at column 0 of the frontmatter; used for line numbers and duplicate keys only.
TOP_KEY = re.compile(r"""^(?:"([^"\n]+)"|'([^'\n]+)'|([^\s#'"{}\[\],&*!|>%@`?:-][^:\n]*?))[ \t]*:(?=[ \t]|$)""",
                     re.MULTILINE)
LINE_BREAKS = ("\n", "\r", "\x85", "\u2028", "\u2029")  # what YAML counts as a line break
FENCE = re.compile(r"^[ \t]{0,3}(```|~~~)")
# git's conflict markers; `=======` alone is also a setext heading underline, so it counts only inside a conflict
CONFLICT_EDGE = re.compile(r"^(<{7}|>{7}|\|{7})(?:[ \t].*)?$", re.MULTILINE)


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
    previous_ids: list[str] = field(default_factory=list)  # ids it had before `palace mv`: links and reviews follow
    created: str = ""
    valid_from: str = ""
    valid_until: str = ""
    supersedes: list[str] = field(default_factory=list)
    superseded_by: list[str] = field(default_factory=list)
    type: str = ""
    core: bool = False
    plain: bool = False  # no frontmatter (an Obsidian note): id from the file name, no anchor or token to check
    image: str = ""
    content: str = ""
    body: str = ""
    line: int = 1
    image_line: int = 0
    content_line: int = 0
    body_links: list[str] = field(default_factory=list)
    link_ids: list[str] = field(default_factory=list)  # the ids all_links resolve to: filled by a scan, not by parsing
    meta: dict = field(default_factory=dict)
    warnings: list[Warning_] = field(default_factory=list)
    body_line: int = 0
    field_lines: dict[str, int] = field(default_factory=dict)

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

    def field_line(self, name: str) -> int:
        """The file line of a frontmatter field (line 2, the first field line, when it is absent)."""
        return self.field_lines.get(name, 2)

    def search_text(self) -> str:
        """The text embedded: subject, anchor, keywords, content, image.

        The Content comes before the Image because the embedder reads only the first 256 tokens: most
        example-palace notes are longer, and their facts matter more than their scene (dense MRR 0.880 ->
        0.908 there, no loss on shorter notes; docs/ranking-experiments.md)."""
        return "\n".join(
            part for part in (self.subject, self.anchor, ", ".join(self.keywords), self.content, self.image) if part
        )


def slugify(text: str) -> str:
    """A note id from a subject: lowercase words joined by hyphens."""
    text = re.sub(r"\(([^)]*)\)", " ", text.lower())
    slug = re.sub(r"[^a-z0-9]+", "-", text).strip("-")
    return slug[:80] or "memory"


# ---- reading ---------------------------------------------------------------------------------


def _read_bytes(path: Path, shown: str) -> bytes:
    """The bytes of a regular file of at most MAX_NOTE_BYTES; NoteError for anything else."""
    return read_capped(path, shown, MAX_NOTE_BYTES, "a note")


def read_capped(path: Path, shown: str, limit: int, what: str) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (`what` names it in errors); NoteError otherwise,
    before reading a byte of a file that is too big, so a huge or endless file never fills memory."""
    try:
        # O_NONBLOCK: opening a FIFO named like a note must not wait for a writer forever.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise NoteError(shown, f"cannot read: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise NoteError(shown, "not a regular file; not read")
            if info.st_size > limit:
                raise NoteError(shown, f"file is {info.st_size:,} bytes, over the {limit:,} byte limit for {what}")
            data = handle.read(info.st_size + 1)  # not read(limit + 1): that allocates the whole limit per file
            if len(data) > info.st_size:  # it grew since the fstat: read on, up to just past the limit
                data += handle.read(limit + 1 - len(data))
    except OSError as exc:
        raise NoteError(shown, f"cannot read: {exc.strerror}") from None
    if len(data) > limit:  # it grew after the size check
        raise NoteError(shown, f"file is over the {limit:,} byte limit for {what}")
    return data


def _decode(data: bytes, shown: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise NoteError(shown, f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})", line=line) from None


def read_note_text(path: Path, display: str | None = None) -> tuple[str, list[Warning_]]:
    """Read a note file as text with `\\n` line ends; a BOM or CRLF is read and reported as a warning."""
    shown = display or str(path)
    data = _read_bytes(path, shown)
    warnings = []
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
        warnings.append(Warning_(1, "bom", "file starts with a UTF-8 byte-order mark; palace reads it, some tools do not"))
    if not data.strip():
        raise NoteError(shown, "empty file", line=1)
    text = _decode(data, shown)
    if "\r" in text:
        first = text[: text.index("\r")].count("\n") + 1
        if "\r\n" in text:
            warnings.append(Warning_(first, "crlf", "CRLF line endings; palace reads them and keeps them when it writes"))
        if "\r" in text.replace("\r\n", ""):
            warnings.append(Warning_(first, "cr", "bare CR line endings; palace reads them but will not update this note"))
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text, warnings


class NoFrontmatter(NoteError):
    """A file with no `---` frontmatter at all (not a broken one): in memories/ it is read as a plain note."""


def split_frontmatter(text: str, shown: str) -> tuple[str, str, int]:
    """Split `---` frontmatter from the body; returns (yaml_text, body, body_first_line)."""
    lines = text.split("\n")
    if not text.startswith("---"):
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            if line.strip() == "---":
                where = "is indented" if line[0] in " \t" else "is not the first line"
                raise NoteError(shown, f"`---` must start at the beginning of the first line (line {number} {where})",
                                line=number)
            if re.search(r"\S[ \t]*---[ \t]*$", line):
                raise NoteError(shown, f"`---` must start at the beginning of a line (line {number} has text before it)",
                                line=number)
            break
        raise NoFrontmatter(shown, "no YAML frontmatter: a note must start with a `---` line", line=1)
    if lines[0].rstrip(" \t") != "---":
        raise NoteError(shown, "the opening `---` must be alone on the first line", line=1)
    for number, line in enumerate(lines[1:], 2):
        if line.rstrip(" \t") == "---":
            yaml_text = "\n".join(lines[1 : number - 1])
            yaml_text += "\n" if number > 2 else ""
            body = "\n".join(lines[number:])
            return yaml_text, body, number + 1
    for number, line in enumerate(lines[1:], 2):
        if line.strip() == "---" or (re.search(r"\S[ \t]*---[ \t]*$", line) and ":" not in line
                                     and not line.lstrip().startswith("#")):
            raise NoteError(shown, f"the closing `---` must start at the beginning of a line (line {number})",
                            line=number)
    raise NoteError(shown, "frontmatter is not closed by a `---` line", line=1)


def load_frontmatter(yaml_text: str, shown: str) -> dict:
    """Parse the YAML block within the limits of safeyaml; errors carry the file line (frontmatter starts on line 2)."""
    if not yaml_text.strip():
        return {}
    try:
        meta = safeyaml.load(yaml_text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:  # where the parser gave up, but never past the frontmatter's last line
            line = min(mark.line + 2, yaml_text.count("\n") + 1)
        elif getattr(exc, "position", None) is not None:
            line = yaml_text[: exc.position].count("\n") + 2
        else:
            line = 2
        problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or str(exc).splitlines()[0]
        what = "is refused" if isinstance(exc, safeyaml.LimitExceeded) else "is not valid YAML"
        raise NoteError(shown, f"frontmatter {what}: {problem}", line=line) from None
    except RecursionError:  # the pure-Python loader (no libyaml) recurses per nesting level
        raise NoteError(shown, f"frontmatter is refused: nested more than {safeyaml.MAX_DEPTH} levels deep",
                        line=2) from None
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        kind = {list: "list", str: "string"}.get(type(meta), type(meta).__name__)
        raise NoteError(shown, f"frontmatter must be a mapping of `key: value` fields, not a {kind}", line=2)
    return meta


def frontmatter_key_lines(yaml_text: str) -> tuple[dict[str, int], list[Warning_]]:
    """File line of every top-level key (frontmatter starts on line 2), and duplicate-key warnings."""
    lines: dict[str, int] = {}
    warnings = []
    number, position = 2, 0
    for match in TOP_KEY.finditer(yaml_text):
        key = next(g for g in match.groups() if g is not None).strip()
        number += yaml_text.count("\n", position, match.start())
        position = match.start()
        if key in lines:
            warnings.append(Warning_(number, "duplicate-key",
                                     f"frontmatter key `{key}` is repeated (first on line {lines[key]}); "
                                     "YAML readers disagree on which value wins"))
        lines[key] = number
    return lines, warnings


def _fences(body: str) -> list[tuple[int, int]]:
    """Character ranges of fenced code blocks, where headings and links are not headings and links."""
    if "```" not in body and "~~~" not in body:
        return []
    ranges, start, marker, offset = [], None, "", 0
    for line in body.split("\n"):
        found = FENCE.match(line)
        if found:
            if start is None:
                start, marker = offset, found.group(1)
            elif found.group(1) == marker:
                ranges.append((start, offset + len(line)))
                start = None
        offset += len(line) + 1
    if start is not None:
        ranges.append((start, len(body)))
    return ranges


def _outside(position: int, fences: list[tuple[int, int]]) -> bool:
    return not any(a <= position <= b for a, b in fences)


def is_attachment(target: str) -> bool:
    """True for a `[[link]]` to a file that is not a note (`![[diagram.png]]`, as Obsidian embeds one)."""
    return bool(ATTACHMENT.search(target.strip()))


def body_link_lines(body: str, body_first_line: int) -> list[tuple[str, int]]:
    """Every `[[link]]` to a note in a body, outside code fences, with its file line (attachments left out)."""
    fences = _fences(body)
    return [(m.group(1).strip(), body_first_line + body[: m.start()].count("\n"))
            for m in LINK_PATTERN.finditer(body) if _outside(m.start(), fences) and not is_attachment(m.group(1))]


def rest_of_body(body: str) -> str:
    """Every word of a body outside its Image and Content sections and its `# ` title: the Links section with
    its reasons, sections of your own (with their headings), text before the first section. Indexed too."""
    fences = _fences(body)
    headings = [m for m in SECTION_PATTERN.finditer(body) if _outside(m.start(), fences)]
    first = headings[0].start() if headings else len(body)
    parts = [line for line in body[:first].split("\n") if not re.match(r"#[ \t]", line)]  # the title is the subject
    taken: set[str] = set()
    for i, match in enumerate(headings):
        name = match.group(1).strip().lower()
        end = headings[i + 1].start() if i + 1 < len(headings) else len(body)
        if name in ("image", "content") and name not in taken:
            taken.add(name)  # the first of each is memory.image / memory.content, indexed in their own fields
            continue
        if name != "links":
            parts.append(match.group(1))  # the name of a section of your own is words you wrote too
        parts.append(body[match.end() : end])
    return "\n".join(part.strip() for part in parts if part.strip())


def rename_body_links(text: str, renames: dict[str, str]) -> str:
    """Note text whose body `[[target]]` links (outside code fences) have their target renamed per `renames`
    (the target as written -> the new one); labels (`|...`), sections (`#...`) and every other byte are kept."""
    opening = re.match(r"---[ \t]*\r?\n", text)
    closing = re.compile(r"^---[ \t]*\r?$", re.MULTILINE).search(text, opening.end()) if opening else None
    start = closing.end() if closing else 0
    body = text[start:]
    fences = _fences(body)
    pieces, last = [], 0
    for match in LINK_PATTERN.finditer(body):
        target = match.group(1)
        new = renames.get(target.strip())
        if new is None or not _outside(match.start(), fences):
            continue
        lead = target[: len(target) - len(target.lstrip())]
        trail = target[len(target.rstrip()):]
        pieces += [body[last : match.start(1)], lead + new + trail]
        last = match.end(1)
    if not pieces:
        return text
    return text[:start] + "".join(pieces) + body[last:]


def parse_sections(body: str, body_first_line: int) -> dict[str, tuple[str, int]]:
    """`## Heading` sections of the body: lowercased name -> (text, file line of the heading)."""
    sections = {}
    fences = _fences(body)
    matches = [m for m in SECTION_PATTERN.finditer(body) if _outside(m.start(), fences)]
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(body)
        text = body[match.end() : end].strip()
        line = body_first_line + body[: match.start()].count("\n")
        sections.setdefault(match.group(1).strip().lower(), (text, line))
    return sections


def _is_placeholder(text: str) -> bool:
    """True when a section is one parenthesised hint, as the template leaves it."""
    if not (text.startswith("(") and text.endswith(")")):
        return False
    depth = 0
    for position, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        if depth == 0 and position < len(text) - 1:
            return False
    return True


def _kind(value) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, bool):
        return "true/false"
    return f"a {type(value).__name__}"


def _scalar(meta: dict, name: str, problems: list[tuple[str, str]]) -> str:
    value = meta.get(name)
    if value is None:
        return ""
    if isinstance(value, (dict, list, tuple, bool)):
        problems.append((name, f"`{name}` must be text, not {_kind(value)}"))
        return ""
    if isinstance(value, date):
        return value.isoformat()
    return str(value).strip()


def _as_list(value, name: str = "", problems: list[tuple[str, str]] | None = None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, (list, tuple)):
        out = []
        for item in value:
            if isinstance(item, (dict, list, tuple)):
                if problems is not None:
                    problems.append((name, f"`{name}` must be a list of text items; one item is {_kind(item)}"))
                continue
            if item is not None and str(item).strip():
                out.append(str(item).strip())
        return out
    if isinstance(value, dict) or isinstance(value, bool):
        if problems is not None:
            problems.append((name, f"`{name}` must be a list like [a, b], not {_kind(value)}"))
        return []
    return [str(value)]


def conflict_blocks(text: str) -> list[tuple[int, int]]:
    """(first, last) line of every git merge conflict left in a text (`<<<<<<<` ... `>>>>>>>`), outside code fences."""
    if "<<<<<<<" not in text and ">>>>>>>" not in text and "|||||||" not in text:
        return []
    fences = _fences(text)
    blocks: list[tuple[int, int]] = []
    start = None
    for match in CONFLICT_EDGE.finditer(text):
        if not _outside(match.start(), fences):
            continue
        line = text.count("\n", 0, match.start()) + 1
        if match.group(1).startswith("<"):
            if start is not None:
                blocks.append((start, start))
            start = line
        elif match.group(1).startswith(">"):
            blocks.append((start if start is not None else line, line))
            start = None
        elif start is None:  # a lone `|||||||` (diff3 base marker)
            blocks.append((line, line))
    if start is not None:
        blocks.append((start, start))
    return blocks


def _conflict_message(first: int, last: int, part: str = "") -> str:
    lines = f"lines {first}-{last}" if last > first else f"line {first}"
    return f"unresolved git merge conflict{part} ({lines}): resolve it and remove the <<<<<<< ======= >>>>>>> lines"


def _validity(meta: dict, field_lines: dict[str, int], problems: list[tuple[str, str]]) -> tuple[dict, list[Warning_]]:
    """The validity fields of a note (docs/note-format.md, "Facts that change") and what is wrong with them."""
    fields: dict = {}
    warnings = []
    for name in DATE_FIELDS:
        raw = meta.get(name)
        if isinstance(raw, (dict, list, tuple, bool)):
            problems.append((name, f"`{name}` must be a date, not {_kind(raw)}"))
            raw = None
        try:
            fields[name] = normalize_moment(raw)
        except ValueError as exc:
            fields[name] = str(raw).strip()
            warnings.append(Warning_(field_lines.get(name, 2), "bad-date", f"`{name}`: {exc}"))
    for name in LINK_FIELDS:
        fields[name] = list(dict.fromkeys(_as_list(meta.get(name), name, problems)))
    fields["type"] = _scalar(meta, "type", problems)
    if fields["type"] and fields["type"] not in TYPES:
        warnings.append(Warning_(field_lines.get("type", 2), "unknown-type",
                                 f"type {fields['type']!r} is not one of {', '.join(TYPES)}"))
    core = meta.get("core")
    if core is not None and not isinstance(core, bool):
        problems.append(("core", f"`core` must be true or false, not {_kind(core)}"))
    fields["core"] = core is True
    return fields, warnings


def parse_note(text: str, path: str, domain: str, warnings: list[Warning_] | None = None) -> Memory:
    """Parse note text into a Memory; raises NoteError with file and line for what cannot be read."""
    conflicts = conflict_blocks(text)
    try:
        yaml_text, body, body_first_line = split_frontmatter(text, path)
    except NoteError as exc:
        if conflicts:  # the conflict is why the `---` lines are not where they should be
            raise NoteError(path, _conflict_message(*conflicts[0]), line=conflicts[0][0]) from None
        if isinstance(exc, NoFrontmatter):
            return plain_note(text, path, domain, warnings)
        raise
    for first, last in conflicts:
        if first < body_first_line:
            raise NoteError(path, _conflict_message(first, last, " in the frontmatter"), line=first)
    meta = load_frontmatter(yaml_text, path)
    field_lines, key_warnings = frontmatter_key_lines(yaml_text)
    raw_id = meta.get("id")
    if raw_id is None or (isinstance(raw_id, str) and not raw_id.strip()):
        raise NoteError(path, "missing required field `id`", line=field_lines.get("id", 2))
    if isinstance(raw_id, (dict, list, tuple, bool, float)):
        raise NoteError(path, f"`id` must be text, not {_kind(raw_id)}", line=field_lines.get("id", 2))
    note_id = str(raw_id).strip()
    if not ID_PATTERN.match(note_id):
        raise NoteError(path, f"id {note_id!r} must be lowercase letters, digits, '.', '_' or '-'",
                        line=field_lines.get("id", 2))
    type_problems: list[tuple[str, str]] = []
    subject, anchor, verify = (_scalar(meta, name, type_problems) for name in TEXT_FIELDS)
    keywords, links, aliases = (_as_list(meta.get(name), name, type_problems) for name in LIST_FIELDS)
    # Obsidian's `tags:` are keywords by another name (docs/note-format.md): one list, searched and routed alike.
    keywords += [tag for tag in (t.lstrip("#") for t in _as_list(meta.get("tags"), "tags", type_problems))
                 if tag and tag not in keywords]
    previous_ids = list(dict.fromkeys(_as_list(meta.get("previous_ids"), "previous_ids", type_problems)))
    created = _scalar(meta, "created", type_problems)
    importance = meta.get("importance")
    if importance is not None and (isinstance(importance, bool) or not isinstance(importance, (int, float))):
        type_problems.append(("importance", f"`importance` must be a number, not {_kind(importance)}"))
    validity, validity_warnings = _validity(meta, field_lines, type_problems)

    memory_warnings = list(warnings or []) + key_warnings + validity_warnings
    memory_warnings += [Warning_(first, "conflict-marker", _conflict_message(first, last)) for first, last in conflicts]
    sections = parse_sections(body, body_first_line)
    heading = re.search(r"^#[ \t]+\S", body, re.MULTILINE)
    line = body_first_line + body[: heading.start()].count("\n") if heading else body_first_line
    found = {}
    for name in ("image", "content"):
        section_text, section_line = sections.get(name, ("", 0))
        if not section_text:
            memory_warnings.append(Warning_(section_line or line, "missing-section",
                                            f"no `## {name.title()}` section" if not section_line
                                            else f"the `## {name.title()}` section is empty"))
        elif _is_placeholder(section_text):
            memory_warnings.append(Warning_(section_line, "placeholder-section",
                                            f"the `## {name.title()}` section still holds the template's hint"))
            section_text = ""
        found[name] = (section_text, section_line)
    memory = Memory(
        id=note_id,
        subject=subject,
        anchor=anchor,
        verify=verify,
        domain=domain,
        path=path,
        keywords=keywords,
        links=links,
        aliases=aliases,
        previous_ids=previous_ids,
        created=created,
        **validity,
        image=found["image"][0],
        content=found["content"][0],
        body=body,
        line=line,
        image_line=found["image"][1],
        content_line=found["content"][1],
        body_links=[link for link, _ in body_link_lines(body, body_first_line)],
        meta=meta,
        warnings=memory_warnings,
        body_line=body_first_line,
        field_lines=field_lines,
    )
    for name, message in type_problems:
        memory.warnings.append(Warning_(field_lines.get(name, 2), "bad-type", message))
    for name in ("subject", "anchor"):
        if not getattr(memory, name) and not any(n == name for n, _ in type_problems):
            memory.warnings.append(Warning_(field_lines.get(name, 2), "missing-field", f"missing required field `{name}`"))
    return memory


def plain_note(text: str, path: str, domain: str, warnings: list[Warning_] | None = None) -> Memory:
    """A Markdown file without frontmatter, as an Obsidian vault holds many: id from the file name, subject from
    the first `# ` heading (else the file name), the text as its Content (or its `## Content` section)."""
    stem = path.rsplit("/", 1)[-1].removesuffix(".md")
    note_id = slugify(stem)
    heading = next((m for m in re.finditer(r"^#[ \t]+(.+?)[ \t#]*$", text, re.MULTILINE)
                    if _outside(m.start(), _fences(text))), None)
    line = text[: heading.start()].count("\n") + 1 if heading else 1
    sections = parse_sections(text, 1)
    content, content_line = sections.get("content", ("", 0))
    if not content:
        content = (text[: heading.start()] + text[heading.end():] if heading else text).strip()
        content_line = line
    image, image_line = sections.get("image", ("", 0))
    notice = Warning_(1, "no-frontmatter", f"no frontmatter: read as a plain note with id {note_id!r} (from the file "
                                           "name); add frontmatter with an anchor and a verify token to study and "
                                           "cite it as a memory")
    return Memory(id=note_id, subject=heading.group(1).strip() if heading else stem, anchor="", verify="",
                  domain=domain, path=path, plain=True, image=image, content=content, body=text, line=line,
                  image_line=image_line, content_line=content_line,
                  body_links=[link for link, _ in body_link_lines(text, 1)],
                  warnings=list(warnings or []) + [notice], body_line=1)


def load_note(root: Path, relpath: str, domain: str) -> Memory:
    """Read and parse one note file under root."""
    text, warnings = read_note_text(root / relpath, relpath)
    return parse_note(text, relpath, domain, warnings)


# ---- writing ---------------------------------------------------------------------------------


def check_note_size(data: str | bytes, shown: str) -> None:
    """Raise NoteError when a note's text is over the size limit, so it is never written to become unreadable."""
    size = len(data.encode("utf-8")) if isinstance(data, str) else len(data)
    if size > MAX_NOTE_BYTES:
        raise NoteError(shown, f"the note would be {size:,} bytes, over the {MAX_NOTE_BYTES:,} byte limit for a "
                               "note; nothing was written")


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write via a temp file in the same directory, fsync, then rename: readers never see half a file.

    A disk that refuses (read-only, full) raises DiskError with the file as it was and no temp file left."""
    from palace_cli.core.disk import disk_error, temp_prefix

    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path), suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise disk_error(exc, f"cannot write {path}", "nothing was written") or exc
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
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise disk_error(exc, f"cannot write {path}", "it is as it was") or exc


def _flow(value) -> str:
    """One-line YAML for a value in flow context (inside [ ] or { })."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_flow(k)}: {_flow(v)}" for k, v in value.items()) + "}"
    dumped = yaml.safe_dump([value], default_flow_style=True, allow_unicode=True, width=2**30).strip()
    if any(brk in dumped for brk in LINE_BREAKS):
        dumped = yaml.safe_dump([value], default_flow_style=True, default_style='"', allow_unicode=True,
                                width=2**30).strip()
    return dumped[1:-1]


def inline_yaml(value) -> str:
    """One-line YAML for a value after `key: ` (plain when safe, quoted otherwise)."""
    if isinstance(value, (list, tuple, dict)):
        return _flow(value)
    dumped = yaml.safe_dump(value, allow_unicode=True, width=2**30)
    dumped = dumped[: -len("\n...\n")] if dumped.endswith("\n...\n") else dumped.rstrip("\n")
    if any(brk in dumped for brk in LINE_BREAKS):
        return _flow(value)
    return dumped


class _Unsafe(Exception):
    """The line-level editor cannot make this change without touching other bytes."""


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def _line_end(text: str, index: int) -> int:
    end = text.find("\n", index)
    end = len(text) if end < 0 else end
    return end - 1 if end > 0 and text[end - 1] == "\r" else end


def _last_content_line_end(text: str, key, value, key_indent: int) -> int:
    """End (before the newline) of the last line that belongs to value, leaving trailing comments and blanks."""
    from yaml.nodes import ScalarNode

    block_scalar = isinstance(value, ScalarNode) and value.style in ("|", ">")
    start = _line_start(text, value.start_mark.index)
    end = value.end_mark.index
    if value.end_mark.column == 0 and end > start:
        end -= 1  # the node ends at the start of the next line
    position = _line_start(text, max(end, start))
    while position > start:
        line = text[position : _line_end(text, position)]
        stripped = line.strip()
        indent = len(line) - len(line.lstrip(" "))
        if stripped and (not stripped.startswith("#") or (block_scalar and indent > key_indent)):
            break
        position = _line_start(text, position - 1)
    return _line_end(text, position)


def _edit_mapping(yaml_text: str, changes: dict) -> str:
    """Apply changes by rewriting only the lines of the changed keys; raise _Unsafe when that is not possible."""
    from yaml.nodes import MappingNode, ScalarNode, SequenceNode

    try:
        root = yaml.compose(yaml_text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        raise _Unsafe from None
    if root is None:
        pairs, indent = [], 0
    elif isinstance(root, MappingNode) and not root.flow_style:
        pairs = root.value
        indent = pairs[0][0].start_mark.column if pairs else 0
    else:
        raise _Unsafe
    newline = "\r\n" if "\r\n" in yaml_text else "\n"
    edits: list[tuple[int, int, str]] = []
    appended = []
    for name, new in changes.items():
        found = [(k, v) for k, v in pairs if isinstance(k, ScalarNode) and k.value == name]
        if len(found) > 1:
            raise _Unsafe
        if not found:
            if new is not None:
                appended.append(f"{' ' * indent}{inline_yaml(name)}: {inline_yaml(new)}{newline}")
            continue
        key, value = found[0]
        if key.start_mark.line == value.start_mark.line or value.start_mark.index == value.end_mark.index:
            colon = yaml_text.find(":", key.end_mark.index)
        else:
            colon = yaml_text.find(":", key.end_mark.index, value.start_mark.index)
        if colon < 0 or "\n" in yaml_text[key.end_mark.index : colon]:
            raise _Unsafe
        empty = isinstance(value, ScalarNode) and value.start_mark.index == value.end_mark.index
        if new is None:
            start = _line_start(yaml_text, key.start_mark.index)
            if yaml_text[start : key.start_mark.index].strip():
                raise _Unsafe
            end = _line_end(yaml_text, colon) if empty else _last_content_line_end(yaml_text, key, value, indent)
            end = yaml_text.find("\n", end)
            edits.append((start, len(yaml_text) if end < 0 else end + 1, ""))
        elif empty:
            edits.append((colon + 1, colon + 1, " " + inline_yaml(new)))
        elif (value.start_mark.line == key.start_mark.line == value.end_mark.line
              and not (isinstance(value, ScalarNode) and value.style in ("|", ">"))):
            edits.append((value.start_mark.index, value.end_mark.index, inline_yaml(new)))
        else:
            end = _last_content_line_end(yaml_text, key, value, indent)
            if (isinstance(value, SequenceNode) and not value.flow_style and value.value
                    and isinstance(new, (list, tuple)) and new
                    and not any(isinstance(item, (list, tuple, dict)) for item in new)):
                first = _line_start(yaml_text, value.start_mark.index)
                prefix = yaml_text[first : value.start_mark.index] + "- "
                if prefix.strip() != "-":
                    raise _Unsafe
                items = [prefix + inline_yaml(item) for item in new]
                edits.append((colon + 1, end, newline + newline.join(items)))
            else:
                edits.append((colon + 1, end, " " + inline_yaml(new)))
    text = yaml_text
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    if appended:
        if text and not text.endswith("\n"):
            text += newline
        text += "".join(appended)
    return text


def _round_trip_mapping(yaml_text: str, changes: dict) -> str:
    """Fallback editor: ruamel.yaml round trip (keeps comments and order, may respace other keys)."""
    from ruamel.yaml import YAML

    rt = YAML(typ="rt")
    rt.preserve_quotes = True
    rt.width = 4096
    data = rt.load(yaml_text) or {}
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    out = io.StringIO()
    rt.dump(data, out)
    dumped = out.getvalue()
    if "\r\n" in yaml_text:
        dumped = dumped.replace("\r\n", "\n").replace("\n", "\r\n")
    return dumped


def edit_frontmatter(text: str, changes: dict, display: str = "note") -> str:
    """Note text with frontmatter fields set (value None deletes); every other byte is kept where possible."""
    match = re.match(r"---[ \t]*\r?\n", text)
    closing = re.compile(r"^---[ \t]*\r?$", re.MULTILINE).search(text, match.end()) if match else None
    if match is None or closing is None:
        if "\r" in text.replace("\r\n", ""):
            raise NoteError(display, "bare CR line ends: palace cannot update this frontmatter exactly; convert the "
                                     "line ends to LF (or CRLF)", line=1)
        raise NoteError(display, "no `---` frontmatter block to update", line=1)
    yaml_text = text[match.end() : closing.start()]
    meta = load_frontmatter(yaml_text.replace("\r\n", "\n"), display)
    expected = dict(meta)
    for key, value in changes.items():
        if value is None:
            expected.pop(key, None)
        else:
            expected[key] = value
    if _same(meta, expected):
        return text
    for editor in (_edit_mapping, _round_trip_mapping):
        try:
            new_yaml = editor(yaml_text, changes)
            result = safeyaml.load(new_yaml.replace("\r\n", "\n")) or {}
        except Exception:  # _Unsafe, or YAML the fallback cannot round-trip: try the next editor
            continue
        if _same(result, expected):
            return text[: match.end()] + new_yaml + text[closing.start() :]
    raise NoteError(display, "cannot update the frontmatter without changing other fields; edit it by hand", line=2)


def _read_for_write(path: Path, shown: str) -> tuple[bytes, str]:
    raw = _read_bytes(path, shown)
    bom = b"\xef\xbb\xbf" if raw.startswith(b"\xef\xbb\xbf") else b""
    return bom, _decode(raw[len(bom) :], shown)


def planned_frontmatter(path: Path, changes: dict, display: str | None = None) -> bytes | None:
    """The bytes `update_frontmatter` would write (None when nothing changes), computed without writing."""
    shown = display or str(path)
    bom, text = _read_for_write(Path(path), shown)
    new = edit_frontmatter(text, changes, shown)
    if new == text:
        return None
    data = bom + new.encode("utf-8")
    check_note_size(data, shown)
    return data


def update_frontmatter(path: Path, changes: dict, display: str | None = None) -> None:
    """Set frontmatter fields in place, keeping other keys, comments, key order and the body byte-for-byte."""
    data = planned_frontmatter(path, changes, display)
    if data is not None:
        atomic_write(Path(path), data)


def edit_section(text: str, section: str, new_text: str, display: str = "note", create: bool = False) -> str:
    """Note text with the body of one `## section` replaced; headings and every other section kept byte-for-byte."""
    new_text = new_text.replace("\r\n", "\n").strip()
    if re.search(r"^#{1,2}[ \t]", new_text, re.MULTILINE):
        raise NoteError(display, f"the new `## {section}` text contains a `#` or `##` heading line")
    opening = re.match(r"---[ \t]*\r?\n", text)
    closing = re.compile(r"^---[ \t]*\r?$", re.MULTILINE).search(text, opening.end()) if opening else None
    body_start = min(closing.end() + 1, len(text)) if closing else 0
    body = text[body_start:]
    fences = _fences(body)
    headings = [m for m in re.finditer(r"^(#{1,2})[ \t]+(.+?)[ \t]*\r?$", body, re.MULTILINE)
                if _outside(m.start(), fences)]
    for i, match in enumerate(headings):
        if match.group(1) != "##" or match.group(2).strip().lower() != section.lower():
            continue
        newline = "\r\n" if body[match.end() - 1 : match.end()] == "\r" else "\n"
        start = body_start + match.end() + (1 if body[match.end() : match.end() + 1] == "\n" else 0)
        has_next = i + 1 < len(headings)
        end = body_start + headings[i + 1].start() if has_next else len(text)
        lead = "" if text[start - 1 : start] == "\n" else newline
        content = new_text.replace("\n", newline)
        replacement = lead + (content + newline if content else "") + (newline if has_next else "")
        return text[:start] + replacement + text[end:]
    if not create:
        raise NoteError(display, f"no `## {section}` section to replace")
    newline = "\r\n" if "\r\n" in text else "\n"
    tail = "" if text.endswith("\n") or not text else newline
    return text + tail + newline + f"## {section}" + newline + new_text.replace("\n", newline) + newline


def replace_section(path: Path, section: str, new_text: str, display: str | None = None) -> None:
    """Replace the text of one `## section` of a note, keeping every other byte as it was."""
    shown = display or str(path)
    bom, text = _read_for_write(Path(path), shown)
    new = edit_section(text, section, new_text, shown)
    if new != text:
        data = bom + new.encode("utf-8")
        check_note_size(data, shown)
        atomic_write(Path(path), data)


def dump_frontmatter(fields: dict) -> str:
    """YAML for a new note's frontmatter, one `key: value` line per field in the given order."""
    return "".join(f"{inline_yaml(key)}: {inline_yaml(value)}\n" for key, value in fields.items())
