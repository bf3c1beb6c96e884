"""Reading a note file: forgiving parse of its frontmatter and sections into a Memory, errors with file and line."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path
from typing import NamedTuple

import yaml

from palace_cli.core import safeyaml
from palace_cli.core.dates import normalize_moment
from palace_cli.core.disk import read_capped
from palace_cli.core.layout import former_path_id, path_id
from palace_cli.core.links import WIKILINK, body_link_lines, property_targets
from palace_cli.core.markdown import (
    TAG,
    code_ranges,
    conflict_blocks,
    inline_tags,
    outside_code,
    parse_sections,
    rest_of_body,
)
from palace_cli.core.notes import (
    DATE_FIELDS,
    ID_PATTERN,
    LIST_FIELDS,
    TEXT_FIELDS,
    TYPES,
    VERSION_FIELDS,
    Memory,
    Warning_,
)
from palace_cli.errors import NoteError

MAX_NOTE_BYTES = 1_000_000
# A top-level `key:` at column 0 of the frontmatter; used for line numbers and duplicate keys only.
TOP_KEY = re.compile(r"""^(?:"([^"\n]+)"|'([^'\n]+)'|([^\s#'"{}\[\],&*!|>%@`?:-][^:\n]*?))[ \t]*:(?=[ \t]|$)""",
                     re.MULTILINE)


def read_note_bytes(path: Path, shown: str) -> bytes:
    """The bytes of a regular file of at most MAX_NOTE_BYTES; NoteError for anything else."""
    return read_capped(path, shown, MAX_NOTE_BYTES, "a note")


def decode_note(data: bytes, shown: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise NoteError(shown, f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})", line=line) from None


def read_note_text(path: Path, display: str | None = None) -> tuple[str, list[Warning_]]:
    """Read a note file as text with `\\n` line ends; a BOM or CRLF is read and reported as a warning."""
    shown = display or str(path)
    return note_text(read_note_bytes(path, shown), shown)


def note_text(data: bytes, shown: str) -> tuple[str, list[Warning_]]:
    """A note file's bytes as read_note_text reads them: text with `\\n` line ends, and the warnings."""
    warnings = []
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
        warnings.append(Warning_(1, "bom", "file starts with a UTF-8 byte-order mark; palace reads it, some tools do not"))
    if not data.strip():
        raise NoteError(shown, "empty file", line=1)
    text = decode_note(data, shown)
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


# The frontmatter block (docs/note-format.md): a first line `---` and the next line `---`, spaces and tabs after
# either allowed; `\r\n` line ends too, so that writers find it in a file's text as it is on disk.
OPENING = re.compile(r"---[ \t]*\r?(?:\n|\Z)")
CLOSING = re.compile(r"^---[ \t]*\r?$", re.MULTILINE)


class Block(NamedTuple):
    """Where the frontmatter is in a note's text: its YAML from `start` to `end`, the body from `body`."""

    start: int
    end: int
    body: int
    closed: bool = True


def opens_frontmatter(text: str) -> bool:
    """Whether a text opens a frontmatter block: it starts with `---`, closed or not, well formed or not (what is
    wrong with it is split_frontmatter's to say)."""
    return text.startswith("---")


def frontmatter_block(text: str, open_ended: bool = False) -> Block | None:
    """Where the frontmatter block is in a text (`\\n` or `\\r\\n` line ends), None when it has none; with
    open_ended, a block never closed runs to the end of the text (a buffer in an editor, as it is typed)."""
    opening = OPENING.match(text)
    if opening is None:
        return None
    closing = CLOSING.search(text, opening.end())
    if closing is None:
        return Block(opening.end(), len(text), len(text), closed=False) if open_ended else None
    return Block(opening.end(), closing.start(), min(closing.end() + 1, len(text)))


def split_frontmatter(text: str, shown: str) -> tuple[str, str, int]:
    """Split `---` frontmatter from the body; returns (yaml_text, body, body_first_line)."""
    block = frontmatter_block(text)
    if block is not None:
        return text[block.start : block.end], text[block.body :], text.count("\n", 0, block.end) + 2
    lines = text.split("\n")
    if not opens_frontmatter(text):
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
    for name in VERSION_FIELDS:
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
    """Parse note text into a Memory; raises NoteError with file and line for what cannot be read.

    Any Markdown file is a note: frontmatter and every field are optional (docs/note-format.md). The id is
    `id:` or, without one, derived from the path (`layout.path_id`); the subject is `subject:`, `title:`, the
    first `# ` heading or the file name; `tags:` and inline #tags are keywords. A body with a `## Image` or a
    `## Content` section is read as a SMASHIN memory; any other body is all Content."""
    conflicts = conflict_blocks(text)
    yaml_text, body, body_first_line = _split(text, path, conflicts)
    meta = load_frontmatter(yaml_text, path)
    field_lines, key_warnings = frontmatter_key_lines(yaml_text)
    type_problems: list[tuple[str, str]] = []
    note_id, derived = _note_id(meta, field_lines, path, type_problems)
    fields = _fields(meta, type_problems)
    former = former_path_id(path) if derived else None
    if former and former not in fields["previous_ids"]:  # reviews and links under the id of the old slug rule
        fields["previous_ids"].append(former)
    validity, validity_warnings = _validity(meta, field_lines, type_problems)
    memory_warnings = list(warnings or []) + key_warnings + validity_warnings
    memory_warnings += [Warning_(first, "conflict-marker", _conflict_message(first, last)) for first, last in conflicts]
    line, found, structured = _read_body(body, body_first_line, path, meta, fields, type_problems, memory_warnings)
    memory = Memory(
        id=note_id, domain=domain, path=path, **fields, **validity,
        image=found["image"][0], content=found["content"][0], body=body, line=line,
        image_line=found["image"][1], content_line=found["content"][1],
        body_links=[link for link, _ in body_link_lines(body, body_first_line, path)],
        property_links=list(dict.fromkeys(target for _, target, file in property_targets(meta) if not file)),
        meta=meta, warnings=memory_warnings, body_line=body_first_line, field_lines=field_lines,
        plain=not (fields["anchor"] or fields["verify"] or found["image"][0]), derived_id=derived,
        structured=structured,
    )
    _field_warnings(memory, type_problems, field_lines)
    return memory


def _split(text: str, path: str, conflicts: list[tuple[int, int]]) -> tuple[str, str, int]:
    """(frontmatter YAML, body, the body's first line); a note without frontmatter is all body. A git conflict
    that breaks or sits in the frontmatter raises NoteError at its line."""
    try:
        yaml_text, body, body_first_line = split_frontmatter(text, path)
    except NoteError as exc:
        if conflicts:  # the conflict is why the `---` lines are not where they should be
            raise NoteError(path, _conflict_message(*conflicts[0]), line=conflicts[0][0]) from None
        if not isinstance(exc, NoFrontmatter):
            raise
        yaml_text, body, body_first_line = "", text, 1
    for first, last in conflicts:
        if first < body_first_line:
            raise NoteError(path, _conflict_message(first, last, " in the frontmatter"), line=first)
    return yaml_text, body, body_first_line


def _read_body(body: str, body_first_line: int, path: str, meta: dict, fields: dict,
               type_problems: list[tuple[str, str]], warnings: list[Warning_]) -> tuple[int, dict, bool]:
    """(the note's line, its Image and Content with their lines, whether it is a SMASHIN memory) from the body;
    fills the subject when the frontmatter has none (title, first heading, file name) and adds inline #tags."""
    heading = _title_heading(body)
    line = body_first_line + body[: heading.start()].count("\n") if heading else body_first_line
    fields["subject"] = (fields["subject"] or _scalar(meta, "title", type_problems)
                         or (heading.group(1).strip() if heading else path.rsplit("/", 1)[-1].removesuffix(".md")))
    fields["keywords"] += [tag for tag in inline_tags(body) if tag not in fields["keywords"]]
    sections = parse_sections(body, body_first_line)
    structured = "content" in sections
    started = bool(fields["anchor"] or fields["verify"]) or "image" in sections
    found = _smashin_sections(sections, line, warnings, started, ("image", "content") if structured
                              else ("image",) if started else ())
    if not structured:  # a note of its own shape: its whole text but the title (and an Image it grew) is content
        whole = rest_of_body(body) if "image" in sections else \
            (body[: heading.start()] + body[heading.end():] if heading else body).strip()
        found["content"] = (whole, line)
    return line, found, structured


def _field_warnings(memory: Memory, type_problems: list[tuple[str, str]], field_lines: dict[str, int]) -> None:
    """Add the warnings that depend on what the note turned out to be: fields of the wrong type, a missing anchor."""
    if memory.plain:  # a vault's own `type:` (Foam's `type: feature`) is no palace type to check
        memory.warnings = [w for w in memory.warnings if w.code != "unknown-type"]
    for name, message in type_problems:
        code_name = "bad-id" if name == "id" else "bad-type"
        memory.warnings.append(Warning_(field_lines.get(name, 2), code_name, message))
    if not memory.anchor and not memory.plain and not any(n == "anchor" for n, _ in type_problems):
        memory.warnings.append(Warning_(field_lines.get("anchor", 2), "missing-field", "missing field `anchor` "
                                        "(the memorable hook: a memory with a verify token or an Image needs one)"))


TITLE = re.compile(r"^#[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def _title_heading(body: str) -> re.Match | None:
    """The note's title heading: its first `# ` heading outside code, when nothing but blank lines, comments and
    #tags comes before it. In a vault whose page name is its title (SilverBullet, many Obsidian vaults) a `# `
    heading further down is a section of the page, not its title."""
    code = code_ranges(body)
    headings = [m for m in TITLE.finditer(body) if outside_code(m.start(), code)][:2]
    if len(headings) != 1:
        return None  # none, or `# ` headings used as the page's sections ("# Context", "# Decision" of an ADR)
    heading = headings[0]
    before = COMMENT.sub("", body[: heading.start()])
    prose = [line for line in before.splitlines() if line.strip() and TAG.sub("", line).strip()]
    return None if prose else heading


def _note_id(meta: dict, field_lines: dict[str, int], path: str, problems: list[tuple[str, str]]) -> tuple[str, bool]:
    """(id, derived): the frontmatter's `id`, checked, or the id derived from the path (layout.path_id) when
    there is none or it cannot be used (then a problem says why)."""
    raw_id = meta.get("id")
    if raw_id is None or (isinstance(raw_id, str) and not raw_id.strip()):
        return path_id(path), True
    if isinstance(raw_id, (dict, list, tuple, bool, float)):
        problems.append(("id", f"`id` must be text, not {_kind(raw_id)}; read with the id {path_id(path)!r} "
                               "from its path"))
        return path_id(path), True
    note_id = str(raw_id).strip()
    if not ID_PATTERN.match(note_id):
        problems.append(("id", f"id {note_id!r} must be lowercase letters, digits, '.', '_' or '-'; read with the "
                               f"id {path_id(path)!r} from its path"))
        return path_id(path), True
    return note_id, False


def _fields(meta: dict, type_problems: list[tuple[str, str]]) -> dict:
    """The text and list fields of a note's frontmatter (Memory keyword arguments); wrong types into type_problems."""
    subject, anchor, verify = (_scalar(meta, name, type_problems) for name in TEXT_FIELDS)
    keywords, links, aliases = (_as_list(meta.get(name), name, type_problems) for name in LIST_FIELDS)
    links = [link for link in links if not WIKILINK.fullmatch(link)]  # `links: ["[[X]]"]`: property links
    # Obsidian's `tags:` are keywords by another name (docs/note-format.md): one list, searched and routed alike.
    keywords += [tag for tag in (t.lstrip("#") for t in _as_list(meta.get("tags"), "tags", type_problems))
                 if tag and tag not in keywords]
    previous_ids = list(dict.fromkeys(_as_list(meta.get("previous_ids"), "previous_ids", type_problems)))
    created = _scalar(meta, "created", type_problems)
    importance = meta.get("importance")
    if importance is not None and (isinstance(importance, bool) or not isinstance(importance, (int, float))):
        type_problems.append(("importance", f"`importance` must be a number, not {_kind(importance)}"))
    return {"subject": subject, "anchor": anchor, "verify": verify, "keywords": keywords, "links": links,
            "aliases": aliases, "previous_ids": previous_ids, "created": created}


def _smashin_sections(sections: dict[str, tuple[str, int]], title_line: int, warnings: list[Warning_],
                      started: bool, names=("image", "content")) -> dict[str, tuple[str, int]]:
    """The Image and Content sections (of `names`): name -> (text, heading line); for a started memory (a hook, a
    token or an Image), missing ones are warned about; a template's hint left in place always is."""
    found = {"image": ("", 0), "content": ("", 0)}
    for name in names:
        section_text, section_line = sections.get(name, ("", 0))
        if not section_text:
            if started:
                warnings.append(Warning_(section_line or title_line, "missing-section",
                                         f"no `## {name.title()}` section" if not section_line
                                         else f"the `## {name.title()}` section is empty"))
        elif _is_placeholder(section_text):
            warnings.append(Warning_(section_line, "placeholder-section",
                                     f"the `## {name.title()}` section still holds the template's hint"))
            section_text = ""
        found[name] = (section_text, section_line)
    return found


def load_note(root: Path, relpath: str, domain: str) -> Memory:
    """Read and parse one note file under root."""
    text, warnings = read_note_text(root / relpath, relpath)
    return parse_note(text, relpath, domain, warnings)


