"""Reading an editor's buffer: where the links are, what the cursor is in, the outline. Positions are
(line, column) in code points, lines split on `\\n` (a CRLF line keeps its `\\r`).

A `Buffer` splits its text and finds its frontmatter, code fences and the rest of what holds no link (code,
comments, math) once (linear in the text); a request then reads only the lines it is about, so a 20 MB buffer
costs what its size costs, once per version. Link syntax is the core's (`core.links`): a link form it learns
reaches the editor with no change here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from palace_cli.core.links import (WIKILINK, is_attachment, link_free_ranges, note_links, path_link_name,
                                   silverbullet_target)
from palace_cli.core.markdown import code_ranges, line_numbers, outside_code
from palace_cli.core.notefile import frontmatter_block
from palace_cli.core.notes import VERSION_FIELDS

PATH_FORMS = ("markdown", "image", "reference")  # links that name a note or file by its path (core.links.note_links)
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
    """A name in the buffer: a body `[[link]]` (or `![[embed]]`), a property's `[[link]]`, an item of a frontmatter
    link field, an `id:` mention."""

    target: str
    span: Span     # the target's own text (what a fix replaces)
    whole: Span    # `[[...]]` or the item (what hover highlights)
    field: str     # "body", "markdown" (`[text](path.md)`), "image", "reference" (`[id]: path.md`), "mention" or a
    #                frontmatter key (its items, or its `"[[...]]"` values: `wiki` is set for those)
    embed: bool = False  # `![[...]]`
    file: bool = False   # names a file that is not a note (`![[photo.jpg]]`, `![alt](a.png)`)
    wiki: bool = False   # a `[[wikilink]]` (in the body or a property): a file it names is looked for anywhere

    def name(self, relpath: str | None) -> str:
        """What the resolver looks the link up by: a path link's path from the root (relative to the note at
        `relpath`, unless it starts with `/`), any other link's target."""
        if self.field in PATH_FORMS:
            return path_link_name(relpath or "", self.target, self.file)
        return self.target

    @property
    def attachment(self) -> bool:
        """A link to a file that is not a note (`![[tomato-bed.png]]`), by the core's rule."""
        return self.file


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
    def _free(self) -> tuple[int, list[tuple[int, int]], list[int]]:
        """(the body's first character, the core's ranges of the body where nothing is a link, every line's first
        character): found once per version."""
        starts = [0]
        for line in self.lines[:-1]:
            starts.append(starts[-1] + len(line) + 1)
        first = starts[self.body_start] if self.body_start < len(starts) else len(self.text)
        return first, link_free_ranges(self.text[first:]), starts

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
        """The names on one line: frontmatter link items and property links, or body links (files too) and `id:`
        mentions outside what holds no link (code, comments, math)."""
        if number < 0 or number >= len(self.lines):
            return []
        if self.in_frontmatter(number):
            return self._field_items(number)
        if number < self.body_start or number in self.fenced:
            return []
        line, found = self.lines[number], []
        if "[" in line:
            first, free, starts = self._free
            for link in note_links(line, files=True, free=[]):
                if not outside_code(starts[number] + link.outer[0] - first, free):
                    continue
                span = Span(number, link.start, link.end)
                wiki = link.form in ("wiki", "embed")
                whole = Span(number, *link.outer) if wiki else span
                field = "body" if wiki else link.form
                found.append(Link(link.target, span, whole, field, link.form == "embed", link.file, wiki))
        for match in ID_MENTION.finditer(line):
            span = Span(number, match.start(1), match.end(1))
            found.append(Link(match.group(1), span, Span(number, match.start(), match.end()), "mention"))
        return found

    def _field_items(self, number: int) -> list[Link]:
        owner = self.field_at(number)
        if owner is None:
            return []
        line = self.lines[number]
        start = KEY_LINE.match(line).end() if owner[1] == number else 0
        value = line[start:]
        links = []
        for match in WIKILINK.finditer(value) if "[[" in value else ():  # a property link (`up: "[[P]]"`)
            if " #" in value[: match.start()].replace('" #', "").replace("' #", ""):
                break  # a YAML comment
            target = match.group(2)[:-1] if match.group(4).startswith("|") and not match.group(3) \
                and match.group(2).endswith("\\") else match.group(2)
            target, lead, _ = silverbullet_target(target)  # `[[^Name]]`, `[[Name@12]]` name `Name`
            if not target.strip():
                continue
            lead += len(target) - len(target.lstrip())
            span = Span(number, start + match.start(2) + lead, start + match.start(2) + lead + len(target.strip()))
            links.append(Link(target.strip(), span, Span(number, start + match.start(), start + match.end()),
                              owner[0], bool(match.group(1)), is_attachment(target), True))
        if links or owner[0] not in LINK_FIELDS:
            return links
        for item in ITEM.finditer(value.split(" #")[0]):
            if item.group() == "-" and value[: item.start()].strip() == "":
                continue
            span = Span(number, start + item.start(), start + item.end())
            links.append(Link(item.group(), span, span, owner[0]))
        return links

    def field_links(self) -> list[Link]:
        """The items of the frontmatter's link fields."""
        return [link for n in range(self.block[0], self.block[1] + 1) for link in self._field_items(n)] if self.block else []

    def links(self) -> list[Link]:
        """Every name in the buffer: frontmatter link fields and property links, body links (`[[wikilinks]]`,
        Markdown links and reference definitions, to notes and files) where links are, `id:` mentions."""
        found = self.field_links()
        for number in range(self.body_start, len(self.lines)):
            line = self.lines[number]
            if "[" in line or "id:" in line:
                found += self.links_on(number)
        return found

    def link_at(self, line: int, column: int) -> Link | None:
        """The link under the cursor, if any."""
        return next((link for link in self.links_on(line) if link.whole.holds(line, column)), None)

    def completing(self, line: int, column: int) -> Completing | None:
        """What a completion request at the cursor is about, or None where palace has nothing to offer."""
        if line >= len(self.lines):
            return None
        if self.in_frontmatter(line):
            return self._open_link(line, column, property_=True) or self._in_frontmatter(line, column)
        if line in self.fenced:
            return None
        return self._open_link(line, column)

    def _open_link(self, line: int, column: int, property_: bool = False) -> Completing | None:
        """A `[[` link being typed at the cursor (in a property's value too: `up: "[[Wee`), or None."""
        current = self.lines[line]
        before = current[:column]
        opening = before.rfind("[[")
        if opening < 0 or "]]" in before[opening:]:
            return None
        typed = before[opening + 2 :]
        if "|" in typed or "#" in typed:
            return None  # a label or a section is being typed
        field = (self.field_at(line) or ("", 0))[0] if property_ else ""
        after = current[column:]
        closing = after.find("]]")
        if closing >= 0 and "[[" not in after[:closing]:
            end = column + min(i for i in (after.find("|"), after.find("#"), closing) if i >= 0)
            return Completing("link", typed, Span(line, opening + 2, end), field=field)
        return Completing("link", typed, Span(line, opening + 2, column), field=field, close=True)

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
