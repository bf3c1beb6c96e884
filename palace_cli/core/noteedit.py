"""Writing a note without disturbing it: frontmatter fields and sections edited in place, byte for byte.

Everything a write did not mean to change survives it: unknown keys, comments, key order, quoting, line
ends and the body. Callers write the result with `disk.atomic_write`, under the palace's write lock.
"""

from __future__ import annotations

import io
import math
import re
from bisect import bisect_left
from functools import lru_cache
from pathlib import Path

import yaml

from palace_cli.core import safeyaml
from palace_cli.core.disk import atomic_write
from palace_cli.core.links import note_links, property_links
from palace_cli.core.markdown import code_ranges, outside_code
from palace_cli.core.notefile import (
    MAX_NOTE_BYTES,
    decode_note,
    frontmatter_block,
    load_frontmatter,
    read_note_bytes,
    split_frontmatter,
)
from palace_cli.errors import NoteError

LINE_BREAKS = ("\n", "\r", "\x85", "\u2028", "\u2029")  # what YAML counts as a line break


def check_note_size(data: str | bytes, shown: str) -> None:
    """Raise NoteError when a note's text is over the size limit, so it is never written to become unreadable."""
    size = len(data.encode("utf-8")) if isinstance(data, str) else len(data)
    if size > MAX_NOTE_BYTES:
        raise NoteError(shown, f"the note would be {size:,} bytes, over the {MAX_NOTE_BYTES:,} byte limit for a "
                               "note; nothing was written")


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
    if isinstance(value, float):  # 0.0 and -0.0 are one key to a cache (equal, one hash): cached by their repr
        return _inline_float(repr(value)) if type(value) is float else _inline_scalar.__wrapped__(value)
    try:
        return _inline_scalar(value)
    except TypeError:  # not hashable
        return _inline_scalar.__wrapped__(value)


# Keys and common values repeat from note to note (distill writes thousands): yaml's emitter costs 0.3 ms a call.
@lru_cache(maxsize=1 << 12, typed=True)
def _inline_scalar(value) -> str:
    dumped = yaml.safe_dump(value, allow_unicode=True, width=2**30)
    dumped = dumped[: -len("\n...\n")] if dumped.endswith("\n...\n") else dumped.rstrip("\n")
    if any(brk in dumped for brk in LINE_BREAKS):
        return _flow(value)
    return dumped


@lru_cache(maxsize=1 << 10)
def _inline_float(text: str) -> str:
    return _inline_scalar.__wrapped__(float(text))  # repr gives back the very float (-0.0, nan and inf too)


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
    from yaml.nodes import MappingNode, ScalarNode

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
        if found:
            edits.append(_edit_of(yaml_text, *found[0], new, indent, newline))
        elif new is not None:
            appended.append(f"{' ' * indent}{inline_yaml(name)}: {inline_yaml(new)}{newline}")
    text = yaml_text
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    if appended:
        if text and not text.endswith("\n"):
            text += newline
        text += "".join(appended)
    return text


def _edit_of(yaml_text: str, key, value, new, indent: int, newline: str) -> tuple[int, int, str]:
    """The (start, end, replacement) that gives one existing key its new value (None: removes the key)."""
    from yaml.nodes import ScalarNode, SequenceNode

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
        return start, len(yaml_text) if end < 0 else end + 1, ""
    if empty:
        return colon + 1, colon + 1, " " + inline_yaml(new)
    if (value.start_mark.line == key.start_mark.line == value.end_mark.line
            and not (isinstance(value, ScalarNode) and value.style in ("|", ">"))):
        return value.start_mark.index, value.end_mark.index, inline_yaml(new)
    end = _last_content_line_end(yaml_text, key, value, indent)
    if (isinstance(value, SequenceNode) and not value.flow_style and value.value
            and isinstance(new, (list, tuple)) and new
            and not any(isinstance(item, (list, tuple, dict)) for item in new)):
        first = _line_start(yaml_text, value.start_mark.index)
        prefix = yaml_text[first : value.start_mark.index] + "- "
        if prefix.strip() != "-":
            raise _Unsafe
        return colon + 1, end, newline + newline.join(prefix + inline_yaml(item) for item in new)
    return colon + 1, end, " " + inline_yaml(new)


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
    block = frontmatter_block(text)
    if block is None:
        if "\r" in text.replace("\r\n", ""):
            raise NoteError(display, "bare CR line ends: palace cannot update this frontmatter exactly; convert the "
                                     "line ends to LF (or CRLF)", line=1)
        raise NoteError(display, "no `---` frontmatter block to update", line=1)
    yaml_text = text[block.start : block.end]
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
            return text[: block.start] + new_yaml + text[block.end :]
    raise NoteError(display, "cannot update the frontmatter without changing other fields; edit it by hand", line=2)


def _read_for_write(path: Path, shown: str) -> tuple[bytes, str]:
    raw = read_note_bytes(path, shown)
    bom = b"\xef\xbb\xbf" if raw.startswith(b"\xef\xbb\xbf") else b""
    return bom, decode_note(raw[len(bom) :], shown)


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
    block = frontmatter_block(text)
    body_start = block.body if block else 0
    body = text[body_start:]
    fences = code_ranges(body)
    headings = [m for m in re.finditer(r"^(#{1,2})[ \t]+(.+?)[ \t]*\r?$", body, re.MULTILINE)
                if outside_code(m.start(), fences)]
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


def apply_edits(text: str, edits: list[tuple[int, int, str]]) -> str:
    """Text with (start, end, new text) edits made, their offsets counted in the text with CRLFs read as `\\n`
    (as notes are parsed): every byte outside the edits is kept, line ends included."""
    shift: list[int] = []  # where each CRLF's `\n` is in the `\n` text: the shift of an offset back
    if "\r" in text:
        for index in (i for i, ch in enumerate(text) if ch == "\r" and text[i + 1 : i + 2] == "\n"):
            shift.append(index - len(shift))
    for start, end, replacement in sorted(edits, reverse=True):
        start, end = start + bisect_left(shift, start), end + bisect_left(shift, end)
        text = text[:start] + replacement + text[end:]
    return text


def rename_links(text: str, renames: dict[str, str], display: str = "note") -> str:
    """Note text whose wikilinks (in the body and in frontmatter properties) to a target in `renames` (the target
    as written -> the new one) are renamed; labels, headings, escapes (`[[x\\|label]]`), the YAML's quoting and
    every other byte kept. Links in code, comments and math are no links and stay as they are."""
    plain = text.replace("\r\n", "\n")
    try:
        yaml_text, body, _ = split_frontmatter(plain, display)
        meta = load_frontmatter(yaml_text, display)
    except NoteError:
        yaml_text, body, meta = "", plain, {}
    body_start, yaml_start = len(plain) - len(body), plain.find("\n") + 1
    edits = [(body_start + link.start, body_start + link.end, renames[link.target])
             for link in note_links(body) if link.form in ("wiki", "embed") and link.target in renames]
    edits += [(yaml_start + link.start, yaml_start + link.end, renames[link.target])
              for link in property_links(yaml_text, meta) if link.target in renames]
    return apply_edits(text, edits) if edits else text
