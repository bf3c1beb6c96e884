"""Markdown structure palace reads in any note: code (fences and inline), inline #tags, `## sections` and the
heading tree, git conflict markers. Links are core/links.py's."""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass

INLINE_CODE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)
# An inline #tag as Obsidian reads one: after a space or at a line's start, letters, digits, `_`, `-` and `/`
# (nested tags), not only digits (`#1` is not a tag).
TAG = re.compile(r"(?:(?<=\s)|^)#([^\W\d_][\w/-]*|[\d_][\w/-]*[^\W\d][\w/-]*)", re.MULTILINE)
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)
SECTION_PATTERN = re.compile(r"^##[ \t]+(.+?)[ \t]*$", re.MULTILINE)
FENCE = re.compile(r"^[ \t]{0,3}(```|~~~)")
# A fence's whole run of backticks or tildes and what follows: a fence closes only with a run of the same
# character at least as long and nothing after it (CommonMark), so ```` can hold a ``` example.
FENCE_RUN = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})(.*)$")
# git's conflict markers; `=======` alone is also a setext heading underline, so it counts only inside a conflict
CONFLICT_EDGE = re.compile(r"^(<{7}|>{7}|\|{7})(?:[ \t].*)?$", re.MULTILINE)


def code_ranges(body: str) -> list[tuple[int, int]]:
    """Character ranges of fenced code blocks, where headings and links are not headings and links."""
    if "```" not in body and "~~~" not in body:
        return []
    ranges, start, marker, offset = [], None, "", 0
    for line in body.split("\n"):
        found = FENCE_RUN.match(line)
        if found:
            run, rest = found.groups()
            if start is None:
                if not (run[0] == "`" and "`" in rest):  # a backtick fence's info string holds no backtick
                    start, marker = offset, run
            elif run[0] == marker[0] and len(run) >= len(marker) and not rest.strip():
                ranges.append((start, offset + len(line)))
                start = None
        offset += len(line) + 1
    if start is not None:
        ranges.append((start, len(body)))
    return ranges


def line_numbers(text: str, first: int = 1) -> Callable[[int], int]:
    """A function from a character offset in text to its line number (`first` for the first line): a bisect
    over the newlines, so numbering many matches stays linear in the text (slicing and counting per match is not)."""
    newlines = [m.start() for m in re.finditer("\n", text)]
    return lambda offset: first + bisect_left(newlines, offset)


def outside_code(position: int, fences: list[tuple[int, int]]) -> bool:
    """True when position is in no fenced range (fences sorted, as code_ranges gives them; a bisect, not a scan)."""
    index = bisect_right(fences, (position, float("inf"))) - 1
    return index < 0 or not fences[index][0] <= position <= fences[index][1]


def code_spans(text: str) -> list[tuple[int, int]]:
    """Ranges of code, fenced and inline (`like this`), sorted: what is no link, no tag and no heading."""
    fences = code_ranges(text)
    if "`" not in text:
        return fences
    spans = [(m.start(), m.end() - 1) for m in INLINE_CODE.finditer(text)
             if "\n\n" not in m.group(2) and outside_code(m.start(), fences)]
    return sorted(fences + spans) if spans else fences


def inline_tags(body: str) -> list[str]:
    """The inline `#tags` of a body, outside code, in order, each once (as written, without `#`)."""
    if "#" not in body:
        return []
    code = code_spans(body)
    tags: dict[str, None] = {}
    for match in TAG.finditer(body):
        if outside_code(match.start(), code):
            tags.setdefault(match.group(1).rstrip("/-"), None)
    return [tag for tag in tags if tag]


def rest_of_body(body: str) -> str:
    """Every word of a body outside its Image and Content sections and its `# ` title: the Links section with
    its reasons, sections of your own (with their headings), text before the first section. Indexed too."""
    fences = code_ranges(body)
    headings = [m for m in SECTION_PATTERN.finditer(body) if outside_code(m.start(), fences)]
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


@dataclass(frozen=True)
class Section:
    """A part of a note under one heading: the headings above it and its own (`Setup › Linux`), the file line of
    its heading (the first body line for the text before any heading), its text without the heading, and the
    file line that text starts on."""

    path: tuple[str, ...]
    line: int
    text: str
    text_line: int


def heading_sections(body: str, body_first_line: int = 1) -> list[Section]:
    """The body cut at every heading outside code (any level), in order: the text before the first heading (when
    there is any) and each heading's own text, with the path of headings above it."""
    code = code_ranges(body)
    line = line_numbers(body, body_first_line)
    headings = [m for m in HEADING.finditer(body) if outside_code(m.start(), code)]

    def text_of(start: int, end: int) -> tuple[str, int]:
        raw = body[start:end]
        return raw.strip(), line(start + len(raw) - len(raw.lstrip()))

    out: list[Section] = []
    lead, lead_line = text_of(0, headings[0].start() if headings else len(body))
    if lead:
        out.append(Section((), lead_line, lead, lead_line))
    stack: list[tuple[int, str]] = []
    for i, match in enumerate(headings):
        level, title = len(match.group(1)), match.group(2).strip()
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        text, text_line = text_of(match.end(), headings[i + 1].start() if i + 1 < len(headings) else len(body))
        out.append(Section(tuple(t for _, t in stack), line(match.start()), text, text_line))
    return out


def parse_sections(body: str, body_first_line: int) -> dict[str, tuple[str, int]]:
    """`## Heading` sections of the body: lowercased name -> (text, file line of the heading)."""
    sections = {}
    fences = code_ranges(body)
    matches = [m for m in SECTION_PATTERN.finditer(body) if outside_code(m.start(), fences)]
    line = line_numbers(body, body_first_line)
    for i, match in enumerate(matches):
        name = match.group(1).strip().lower()
        if name not in sections:  # the first section of a name counts: its text is cut only once
            end = matches[i + 1].start() if i + 1 < len(matches) else len(body)
            sections[name] = (body[match.end() : end].strip(), line(match.start()))
    return sections


def conflict_blocks(text: str) -> list[tuple[int, int]]:
    """(first, last) line of every git merge conflict left in a text (`<<<<<<<` ... `>>>>>>>`), outside code fences."""
    if "<<<<<<<" not in text and ">>>>>>>" not in text and "|||||||" not in text:
        return []
    fences = code_ranges(text)
    blocks: list[tuple[int, int]] = []
    start = None
    line_of = line_numbers(text)
    for match in CONFLICT_EDGE.finditer(text):
        if not outside_code(match.start(), fences):
            continue
        line = line_of(match.start())
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


# ---- readable text: what a quote shows of a note (answers/extract.py quotes it, answers/verify.py checks it) ----

# Blockquote markers at a line's start, and a callout's `[!type]` (with its fold mark) after them.
QUOTE_MARKS = re.compile(r"^[ \t]*>(?:[ \t]*>)*[ \t]?(?:(\[![^\]\n]*\][+-]?)[ \t]*)?")
# An Obsidian block id ending a line (`text ^abc-1`, or alone on its line).
BLOCK_ID = re.compile(r"(?:^|[ \t]+)\^[A-Za-z0-9][A-Za-z0-9-]*[ \t]*$")
DELIMITER_CELL = re.compile(r":?-+:?")  # a cell of a table's delimiter row: `---`, `:--`, `:-:`
PIPE = re.compile(r"(?<!\\)\|")
# What a reader sees of a link: a wikilink or embed (WIKILINK's groups), a Markdown link or image, a reference link.
SHOWN = re.compile(WIKILINK.pattern + r"|(!?)\[((?:[^\]\\\n]|\\.)*)\]\((?:<[^>\n]*>|[^\s)]*)(?:[ \t]+(?:\"[^\"\n]*\"|"
                   r"'[^'\n]*'))?[ \t]*\)|\[((?:[^\]\\\n]|\\.)+)\]\[[^\]\n]*\]")


def readable(text: str) -> str:
    """Markdown as a reader sees it, line for line (the same number of lines, so a line found here is the
    source's): callout and blockquote markers and block ids dropped (a callout's title is left as a `# ` heading,
    which no sentence runs across), a table's rows each one line `- Header:
    cell; Header: cell` (its header and delimiter lines blank), links shown as their labels (`[[a|b]]` -> b,
    `[[a]]` -> a, `[[a#H]]` -> a > H, `[text](url)` -> text, an attachment's embed dropped). Code is kept as it is."""
    if not any(mark in text for mark in ">^|["):
        return text
    lines = text.split("\n")
    fences, offset, inside = code_ranges(text), 0, []
    for line in lines:
        inside.append(not outside_code(offset, fences))
        offset += len(line) + 1
    for i, line in enumerate(lines):
        if not inside[i]:
            lines[i] = BLOCK_ID.sub("", QUOTE_MARKS.sub(_quote_marks, line))
    _table_rows(lines, inside)
    text = "\n".join(lines)
    code = code_spans(text)
    return SHOWN.sub(lambda m: _shown(m) if outside_code(m.start(), code) else m.group(0), text)


def _quote_marks(match: re.Match) -> str:
    """A callout's title is a heading of its own (a line no sentence runs across); other quote marks go."""
    return "# " if match.group(1) and match.end() < len(match.string) else ""


def _cells(line: str) -> list[str]:
    cells = [cell.strip().replace("\\|", "|") for cell in PIPE.split(line.strip())]
    return cells[1 if line.strip().startswith("|") else 0 : -1 if line.strip().endswith("|") and len(cells) > 1 else None]


def _delimiter(line: str) -> bool:
    cells = _cells(line) if "|" in line else []
    return bool(cells) and all(DELIMITER_CELL.fullmatch(cell) for cell in cells)


def _table_rows(lines: list[str], inside: list[bool]) -> None:
    """Each table (a header line, a delimiter line, rows) in place: blank header lines, a row per line."""
    i = 0
    while i + 1 < len(lines):
        if inside[i] or "|" not in lines[i] or not _delimiter(lines[i + 1]):
            i += 1
            continue
        header = _cells(lines[i])
        lines[i] = lines[i + 1] = ""
        i += 2
        while i < len(lines) and not inside[i] and "|" in lines[i] and lines[i].strip():
            pairs = [(name, cell) for name, cell in zip(header + [""] * len(lines[i]), _cells(lines[i])) if cell]
            lines[i] = ("- " + "; ".join(f"{name}: {cell}" if name else cell for name, cell in pairs)) if pairs else ""
            i += 1


def _shown(match: re.Match) -> str:
    """What a reader sees of one SHOWN match."""
    embed, target, fragment, label, image, text, reference = match.groups()
    if text is not None:
        return text
    if reference is not None:
        return reference
    if label:
        return "" if embed and is_attachment(target) else label[1:].strip()
    if embed and is_attachment(target):
        return ""
    section = fragment[1:].strip()
    section = "" if section.startswith("^") else section
    name = target.strip()
    return f"{name} > {section}" if name and section else name or section
