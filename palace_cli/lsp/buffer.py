"""Reading an editor's buffer: where the links are, what the cursor is in, the outline. Positions are
(line, column) in code points, lines split on `\\n` (a CRLF line keeps its `\\r`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from palace_cli.core.markdown import FENCE, LINK_PATTERN
from palace_cli.core.notes import VERSION_FIELDS

LINK_FIELDS = ("links", *VERSION_FIELDS)  # frontmatter fields whose items are memory ids
KEY_LINE = re.compile(r"^([A-Za-z_][\w-]*)[ \t]*:")
ITEM = re.compile(r"""[^\s,\[\]"'#]+""")
ID_MENTION = re.compile(r"\bid:([a-z0-9][a-z0-9._-]*)")  # the `id:` of a line in a generated index file


@dataclass
class Span:
    """Columns [start, end) on one line."""

    line: int
    start: int
    end: int

    def holds(self, line: int, column: int) -> bool:
        return line == self.line and self.start <= column <= self.end


@dataclass
class Link:
    """A memory named in the buffer: a body `[[link]]`, an item of a frontmatter link field, an `id:` mention."""

    target: str
    span: Span     # the target's own text (what a fix replaces)
    whole: Span    # `[[...]]` or the item (what hover highlights)
    field: str     # "body", "mention" or the frontmatter field name


@dataclass
class Completing:
    """What the cursor is completing: a link target, a frontmatter value or a frontmatter key."""

    kind: str      # "link", "value" or "key"
    typed: str     # the text typed so far
    span: Span     # what the completion replaces
    field: str = ""
    close: bool = False  # a body link still needs its `]]`


def lines_of(text: str) -> list[str]:
    """The buffer's lines as LSP counts them for `\\n` and `\\r\\n` files."""
    return text.split("\n")


def frontmatter(lines: list[str]) -> tuple[int, int] | None:
    """(first, last) line of the frontmatter's YAML, or None; an unclosed block runs to the end."""
    if not lines or lines[0].rstrip(" \t\r") != "---":
        return None
    for number in range(1, len(lines)):
        if lines[number].rstrip(" \t\r") == "---":
            return 1, number - 1
    return 1, len(lines) - 1


def fenced(lines: list[str]) -> set[int]:
    """Lines inside fenced code blocks (and the fences), where palace reads no links or headings."""
    inside, marker, out = False, "", set()
    for number, line in enumerate(lines):
        found = FENCE.match(line)
        if found and (not inside or found.group(1) == marker):
            out.add(number)
            inside, marker = not inside, found.group(1)
        elif inside:
            out.add(number)
    return out


def field_at(lines: list[str], number: int, block: tuple[int, int]) -> tuple[str, int] | None:
    """(field, line of its key) for a frontmatter line: its own key, or the key above a continuation line."""
    for line_no in range(number, block[0] - 1, -1):
        found = KEY_LINE.match(lines[line_no])
        if found:
            return found.group(1), line_no
        if line_no != number and lines[line_no][:1] not in (" ", "\t", "-", ""):
            return None
    return None


def _field_items(lines: list[str], block: tuple[int, int]) -> list[Link]:
    links = []
    for number in range(block[0], block[1] + 1):
        owner = field_at(lines, number, block)
        if owner is None or owner[0] not in LINK_FIELDS:
            continue
        line = lines[number]
        start = KEY_LINE.match(line).end() if owner[1] == number else 0
        value = line[start:].split(" #")[0]
        for item in ITEM.finditer(value):
            if item.group() == "-" and value[: item.start()].strip() == "":
                continue
            span = Span(number, start + item.start(), start + item.end())
            links.append(Link(item.group(), span, span, owner[0]))
    return links


def links(text: str) -> list[Link]:
    """Every memory the buffer names: frontmatter link fields, body `[[links]]` outside code fences, `id:` mentions."""
    lines = lines_of(text)
    block = frontmatter(lines)
    found = _field_items(lines, block) if block else []
    skip = fenced(lines)
    body_start = block[1] + 2 if block else 0
    for number in range(body_start, len(lines)):
        if number in skip:
            continue
        for match in LINK_PATTERN.finditer(lines[number]):
            target = match.group(1)
            lead = len(target) - len(target.lstrip())
            span = Span(number, match.start(1) + lead, match.start(1) + len(target.rstrip()))
            found.append(Link(target.strip(), span, Span(number, match.start(), match.end()), "body"))
        for match in ID_MENTION.finditer(lines[number]):
            span = Span(number, match.start(1), match.end(1))
            found.append(Link(match.group(1), span, Span(number, match.start(), match.end()), "mention"))
    return found


def link_at(text: str, line: int, column: int) -> Link | None:
    """The link under the cursor, if any."""
    return next((link for link in links(text) if link.whole.holds(line, column)), None)


def completing(text: str, line: int, column: int) -> Completing | None:
    """What a completion request at the cursor is about, or None where palace has nothing to offer."""
    lines = lines_of(text)
    if line >= len(lines):
        return None
    current = lines[line]
    before = current[:column]
    block = frontmatter(lines)
    if block and block[0] <= line <= block[1]:
        return _in_frontmatter(lines, line, column, block)
    if line in fenced(lines):
        return None
    opening = before.rfind("[[")
    if opening < 0 or "]]" in before[opening:]:
        return None
    typed = before[opening + 2 :]
    if "|" in typed or "#" in typed:
        return None  # a label or a section is being typed
    after = current[column:]
    closing = after.find("]]")
    if closing >= 0 and "[[" not in after[:closing]:
        end = column + min(i for i in (after.find("|"), after.find("#"), closing) if i >= 0)
        return Completing("link", typed, Span(line, opening + 2, end))
    return Completing("link", typed, Span(line, opening + 2, column), close=True)


def _in_frontmatter(lines: list[str], line: int, column: int, block: tuple[int, int]) -> Completing | None:
    current = lines[line]
    key = KEY_LINE.match(current)
    if key is None and ":" not in current[:column] and re.fullmatch(r"[A-Za-z_][\w-]*", current[:column] or "_"):
        return Completing("key", current[:column], Span(line, 0, column))
    if key is not None and column <= key.end() - 1:
        return Completing("key", current[:column], Span(line, 0, key.end(1)))
    owner = field_at(lines, line, block)
    if owner is None:
        return None
    word = re.search(r"""[^\s,\[\]"':]*$""", current[:column])
    typed = word.group()
    start = column - len(typed)
    rest = re.match(r"""[^\s,\[\]"'#]*""", current[column:])
    return Completing("value", typed, Span(line, start, column + len(rest.group())), field=owner[0])


def headings(text: str) -> list[tuple[int, str, int]]:
    """(level, title, line) of the Markdown headings outside the frontmatter and code fences."""
    lines = lines_of(text)
    block = frontmatter(lines)
    skip = fenced(lines)
    out = []
    for number in range(block[1] + 2 if block else 0, len(lines)):
        found = re.match(r"^(#{1,6})[ \t]+(.+?)[ \t#]*\r?$", lines[number])
        if found and number not in skip:
            out.append((len(found.group(1)), found.group(2), number))
    return out
