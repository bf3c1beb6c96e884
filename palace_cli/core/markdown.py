"""Markdown structure palace reads in any note: code (fences and inline), inline #tags, `## sections` and the
heading tree, git conflict markers, SilverBullet's `${...}` Lua expressions. Links are core/links.py's."""

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
LUA_LONG_STRING = re.compile(r"\[(=*)\[")  # `[[...]]`, `[==[...]==]`: a Lua string, whatever it holds
LUA_QUOTED = {quote: re.compile(rf"(?:[^{quote}\\\n]|\\.)*{quote}") for quote in "\"'"}  # the rest of a "string"
BLANK_LINE = re.compile(r"\n[ \t]*\n")
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


def _expression_end(body: str, start: int) -> int | None:
    """Where the `${` expression opening at start closes (its `}`), skipping Lua strings (`"}"`, `[[...]]`,
    `[==[...]==]`), which may hold braces and `[[`; None when it does not close before a blank line."""
    depth, at = 0, start + 1
    stop = BLANK_LINE.search(body, start)
    stop = stop.start() if stop else len(body)
    while at < stop:
        char = body[at]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return at
        elif char == "[" and (long := LUA_LONG_STRING.match(body, at)):
            close = body.find("]" + long.group(1) + "]", long.end(), stop)
            if close < 0:
                return None
            at = close + len(long.group(1)) + 1
        elif char in "\"'":
            close = LUA_QUOTED[char].match(body, at + 1)
            if close is not None:  # a quote with no close on its line is no Lua string: read on
                at = close.end() - 1
        at += 1
    return None


def expression_ranges(body: str, code: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Ranges of SilverBullet's `${...}` Lua expressions outside code (`code`: code_spans' ranges), over lines
    until a blank one: code, where nothing is a link or a tag; an expression never closed hides nothing."""
    found, at = [], body.find("${")
    while at >= 0:
        end = _expression_end(body, at) if outside_code(at, code) else None
        if end is not None:
            found.append((at, end))
        at = body.find("${", end + 1 if end is not None else at + 2)
    return found


def inline_tags(body: str) -> list[str]:
    """The inline `#tags` of a body, outside code (and `${...}` expressions), in order, each once (as written,
    without `#`)."""
    if "#" not in body:
        return []
    code = code_spans(body)
    if "${" in body:  # `select {Count = #group}`: Lua's length operator
        code = sorted(code + expression_ranges(body, code))
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
