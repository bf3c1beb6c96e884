"""Reading an editor's buffer: where the links are, what the cursor is in, the outline. Positions are
(line, column) in code points, lines split on `\\n` (a CRLF line keeps its `\\r`).

A `Buffer` splits its text and finds its frontmatter and code fences once (linear in the text); a request
then reads only the lines it is about, so a 20 MB buffer costs what its size costs, once per version.
Link syntax is the core's (`core.markdown`): a link form it learns reaches the editor with no change here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from palace_cli.core.markdown import LINK_PATTERN, code_ranges, is_attachment, joined_path, line_numbers, note_links
from palace_cli.core.notefile import frontmatter_block
from palace_cli.core.notes import VERSION_FIELDS

PATH_FORMS = ("markdown", "reference")  # links that name a note by its path, as core.markdown.note_links reads them
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
        """Whether the cursor at (line, column) is on the span (its end included)."""
        return line == self.line and self.start <= column <= self.end


@dataclass
class Link:
    """A name in the buffer: a body `[[link]]` (or `![[embed]]`), an item of a frontmatter link field, an `id:` mention."""

    target: str
    span: Span     # the target's own text (what a fix replaces)
    whole: Span    # `[[...]]` or the item (what hover highlights)
    field: str     # "body", "markdown" (`[text](path.md)`), "reference" (`[id]: path.md`), "mention" or a field
    embed: bool = False  # `![[...]]`

    def name(self, relpath: str | None) -> str:
        """What the resolver looks the link up by: a path link's path from the root (relative to the note at
        `relpath`, unless it starts with `/`), any other link's target."""
        if self.field in PATH_FORMS:
            return joined_path(relpath or "", self.target)
        return self.target

    @property
    def attachment(self) -> bool:
        """A link to a file that is not a note (`![[tomato-bed.png]]`), by the core's rule."""
        return self.field == "body" and is_attachment(self.target)


@dataclass
class Completing:
    """What the cursor is completing: a link target, a frontmatter value or a frontmatter key."""

    kind: str      # "link", "value" or "key"
    typed: str     # the text typed so far
    span: Span     # what the completion replaces
    field: str = ""
    close: bool = False  # a body link still needs its `]]`


class Buffer:
    """One version of a buffer's text, its lines, frontmatter and fenced lines (each found once, on first use)."""

    def __init__(self, text: str):
        self.text = text

    @cached_property
    def size(self) -> int:
        """The text's size in bytes, as it would be saved (UTF-8)."""
        return len(self.text.encode("utf-8", "surrogatepass"))

    @cached_property
    def lines(self) -> list[str]:
        """The buffer's lines as LSP counts them for `\\n` and `\\r\\n` files."""
        return self.text.split("\n")

    @cached_property
    def block(self) -> tuple[int, int] | None:
        """(first, last) line of the frontmatter's YAML, or None; an unclosed block runs to the end."""
        block = frontmatter_block(self.text, open_ended=True)
        if block is None:
            return None
        last = self.text.count("\n", 0, block.end)  # the closing line, or the last line of a block not closed
        return 1, last - 1 if block.closed else last

    @property
    def body_start(self) -> int:
        """The first line after the frontmatter."""
        return self.block[1] + 2 if self.block else 0

    @cached_property
    def fenced(self) -> frozenset[int]:
        """Lines inside fenced code blocks (and the fences), where palace reads no links or headings: the
        core's own rule (`code_ranges`), numbered once."""
        line_of = line_numbers(self.text, 0)
        return frozenset(number for start, end in code_ranges(self.text)
                         for number in range(line_of(start), line_of(end) + 1))

    def in_frontmatter(self, line: int) -> bool:
        """Whether a line is in the frontmatter's YAML."""
        return bool(self.block) and self.block[0] <= line <= self.block[1]

    def field_at(self, number: int) -> tuple[str, int] | None:
        """(field, line of its key) for a frontmatter line: its own key, or the key above a continuation line."""
        lines, block = self.lines, self.block
        for line_no in range(number, block[0] - 1, -1):
            found = KEY_LINE.match(lines[line_no])
            if found:
                return found.group(1), line_no
            if line_no != number and lines[line_no][:1] not in (" ", "\t", "-", ""):
                return None
        return None

    def links_on(self, number: int) -> list[Link]:
        """The names on one line: frontmatter link items, or body links and `id:` mentions outside fences."""
        if number < 0 or number >= len(self.lines):
            return []
        if self.in_frontmatter(number):
            return self._field_items(number)
        if number < self.body_start or number in self.fenced:
            return []
        line, found = self.lines[number], []
        for match in LINK_PATTERN.finditer(line):
            target = match.group(1)
            lead = len(target) - len(target.lstrip())
            span = Span(number, match.start(1) + lead, match.start(1) + len(target.rstrip()))
            embed = match.start() > 0 and line[match.start() - 1] == "!"
            found.append(Link(target.strip(), span, Span(number, match.start() - embed, match.end()), "body", embed))
        if "](" in line or "]:" in line:
            for path_link in note_links(line):
                if path_link.form in PATH_FORMS:
                    span = Span(number, path_link.start, path_link.end)
                    found.append(Link(path_link.target, span, span, path_link.form))
        for match in ID_MENTION.finditer(line):
            span = Span(number, match.start(1), match.end(1))
            found.append(Link(match.group(1), span, Span(number, match.start(), match.end()), "mention"))
        return found

    def _field_items(self, number: int) -> list[Link]:
        owner = self.field_at(number)
        if owner is None or owner[0] not in LINK_FIELDS:
            return []
        line = self.lines[number]
        start = KEY_LINE.match(line).end() if owner[1] == number else 0
        value = line[start:].split(" #")[0]
        links = []
        for item in ITEM.finditer(value):
            if item.group() == "-" and value[: item.start()].strip() == "":
                continue
            span = Span(number, start + item.start(), start + item.end())
            links.append(Link(item.group(), span, span, owner[0]))
        return links

    def field_links(self) -> list[Link]:
        """The items of the frontmatter's link fields."""
        return [link for n in range(self.block[0], self.block[1] + 1) for link in self._field_items(n)] if self.block else []

    def links(self) -> list[Link]:
        """Every name in the buffer: frontmatter link fields, body links (`[[wikilinks]]`, Markdown links and
        reference definitions to notes) outside code fences, `id:` mentions."""
        found = self.field_links()
        for number in range(self.body_start, len(self.lines)):
            line = self.lines[number]
            if "[[" in line or "id:" in line or "](" in line or "]:" in line:
                found += self.links_on(number)
        return found

    def link_at(self, line: int, column: int) -> Link | None:
        """The link under the cursor, if any."""
        return next((link for link in self.links_on(line) if link.whole.holds(line, column)), None)

    def completing(self, line: int, column: int) -> Completing | None:
        """What a completion request at the cursor is about, or None where palace has nothing to offer."""
        if line >= len(self.lines):
            return None
        current = self.lines[line]
        before = current[:column]
        if self.in_frontmatter(line):
            return self._in_frontmatter(line, column)
        if line in self.fenced:
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

    def _in_frontmatter(self, line: int, column: int) -> Completing | None:
        current = self.lines[line]
        key = KEY_LINE.match(current)
        if key is None and ":" not in current[:column] and re.fullmatch(r"[A-Za-z_][\w-]*", current[:column] or "_"):
            return Completing("key", current[:column], Span(line, 0, column))
        if key is not None and column <= key.end() - 1:
            return Completing("key", current[:column], Span(line, 0, key.end(1)))
        owner = self.field_at(line)
        if owner is None:
            return None
        word = re.search(r"""[^\s,\[\]"':]*$""", current[:column])
        typed = word.group()
        start = column - len(typed)
        rest = re.match(r"""[^\s,\[\]"'#]*""", current[column:])
        return Completing("value", typed, Span(line, start, column + len(rest.group())), field=owner[0])

    def headings(self) -> list[tuple[int, str, int]]:
        """(level, title, line) of the Markdown headings outside the frontmatter and code fences."""
        out = []
        for number in range(self.body_start, len(self.lines)):
            found = re.match(r"^(#{1,6})[ \t]+(.+?)[ \t#]*\r?$", self.lines[number])
            if found and number not in self.fenced:
                out.append((len(found.group(1)), found.group(2), number))
        return out
