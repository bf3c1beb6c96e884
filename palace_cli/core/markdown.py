"""Markdown structure palace reads in any note: code (fences and inline), links in every form vaults write them,
inline #tags, `## sections` and the heading tree, git conflict markers."""

from __future__ import annotations

import posixpath
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote, unquote

ATTACHMENT = re.compile(r"\.(?:png|jpe?g|gif|svg|webp|bmp|avif|pdf|mp3|wav|ogg|m4a|flac|mp4|webm|mov|mkv|canvas|"
                        r"excalidraw|base|csv|xlsx?|docx?|pptx?|zip)$", re.IGNORECASE)
LINK_PATTERN = re.compile(r"\[\[([^\]|#]+)(?:[|#][^\]]*)?\]\]")
# Every [[wikilink]] (and ![[embed]]), the self links `[[#Heading]]` too: the target, then `#heading` or `|label`.
WIKILINK = re.compile(r"(!?)\[\[([^\]|#\n]*)((?:#[^\]|\n]*)?)((?:\|[^\]\n]*)?)\]\]")
# [text](target "title") and [text](<target with spaces>), not images (`![alt](...)`).
MARKDOWN_LINK = re.compile(r"(?<![!\]\\])\[(?:[^\]\\\n]|\\.)*\]\([ \t]*(?:<([^>\n]*)>|([^\s)<>]+))(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'))?[ \t]*\)")
# A link reference definition (`[label]: path/to/note.md "Title"`), as Foam writes them; footnotes (`[^1]:`) are not.
REFERENCE = re.compile(r"^[ ]{0,3}\[(?!\^)[^\]\n]+\]:[ \t]*(?:<([^>\n]*)>|(\S+))(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^)\n]*\)))?[ \t]*$",
                       re.MULTILINE)
BAD_LINK_CHARS = re.compile(r"[\[\]|#^\x00-\x1f]")  # what a note's name cannot hold and still be linked to
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
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


def is_attachment(target: str) -> bool:
    """True for a `[[link]]` to a file that is not a note (`![[diagram.png]]`, as Obsidian embeds one)."""
    return bool(ATTACHMENT.search(target.strip()))


def code_spans(text: str) -> list[tuple[int, int]]:
    """Ranges of code, fenced and inline (`like this`), sorted: what is no link, no tag and no heading."""
    fences = code_ranges(text)
    if "`" not in text:
        return fences
    spans = [(m.start(), m.end() - 1) for m in INLINE_CODE.finditer(text)
             if "\n\n" not in m.group(2) and outside_code(m.start(), fences)]
    return sorted(fences + spans) if spans else fences


@dataclass(frozen=True)
class Link:
    """A link to a note as written in a body: its target (what names the note: `Name`, `Folder/Name`,
    `Name.md`; for a Markdown link or a reference definition, the path as written, decoded), the file line, the
    form (`wiki`, `embed`, `markdown`, `reference`), the heading or `^block` after `#`, and where the target's
    text is in the body (start, end), for renaming it in place."""

    target: str
    line: int
    form: str
    fragment: str
    start: int
    end: int

    def name(self, source: str = "") -> str:
        """What the resolver looks the link up by: a wikilink's target; a path link's path from the root (relative
        to `source`, the linking note's path, unless it starts with `/`)."""
        if self.form in ("wiki", "embed"):
            return self.target.strip()
        return joined_path(source, self.target)


def joined_path(source: str, target: str) -> str:
    """A path link's target from the root: relative to the folder of `source` (a path from the root), or from
    the root when it starts with `/`; `..` folded."""
    if target.startswith("/"):
        return posixpath.normpath(target.lstrip("/"))
    folder = source.rsplit("/", 1)[0] if "/" in source else ""
    return posixpath.normpath(posixpath.join(folder, target)) if folder else posixpath.normpath(target)


def _path_target(raw: str) -> tuple[str, str] | None:
    """(path, fragment) of a Markdown link's or reference definition's target when it may name a note: no
    scheme (`https:`, `mailto:`), not only a `#fragment`, a `.md` file (or no extension) that is not an
    attachment; None otherwise."""
    if not raw or SCHEME.match(raw) or raw.startswith(("#", "?")):
        return None
    path, _, fragment = raw.partition("#")
    path = unquote(path.split("?", 1)[0])
    last = path.rsplit("/", 1)[-1]
    if not last or (not last.lower().endswith(".md") and "." in last.lstrip(".")):
        return None  # a folder, or a file that is not a note (an image, a PDF, LICENSE.txt)
    return path, unquote(fragment)


def note_links(body: str, body_first_line: int = 1) -> list[Link]:
    """Every link to a note in a body, in order, outside code (fenced and inline): wikilinks and note embeds
    (`[[Name]]`, `[[Name|label]]`, `[[Name#Heading]]`, `[[Name#^block]]`, `[[Folder/Name]]`, `[[Name.md]]`,
    `![[Name]]`), Markdown links to `.md` files (`[text](Folder/Name%20x.md#Heading)`) and link reference
    definitions. Attachments (`![[image.png]]`, `[pdf](a.pdf)`) and self links (`[[#Heading]]`) are left out."""
    if "[" not in body:
        return []
    code = code_spans(body)
    line = line_numbers(body, body_first_line)
    found: list[Link] = []
    for match in WIKILINK.finditer(body):
        target = match.group(2)
        if not target.strip() or is_attachment(target) or not outside_code(match.start(), code):
            continue
        found.append(Link(target.strip(), line(match.start()), "embed" if match.group(1) else "wiki",
                          match.group(3)[1:].strip(), match.start(2), match.end(2)))
    for pattern, form in ((MARKDOWN_LINK, "markdown"), (REFERENCE, "reference")):
        for match in pattern.finditer(body):
            group = 1 if match.group(1) is not None else 2
            parsed = _path_target(match.group(group))
            if parsed is None or not outside_code(match.start(), code):
                continue
            raw = match.group(group)
            cut = min((i for i in (raw.find("#"), raw.find("?")) if i >= 0), default=len(raw))
            start = match.start(group)
            found.append(Link(parsed[0], line(match.start()), form, parsed[1], start, start + cut))
    found.sort(key=lambda link: link.start)
    return found


def body_link_lines(body: str, body_first_line: int, source: str = "") -> list[tuple[str, int]]:
    """Every link to a note in a body (note_links), as (the name the resolver looks up, file line); `source` is
    the linking note's path, which Markdown links are relative to (one that climbs out of the palace is left out)."""
    found = ((link.name(source), link.line) for link in note_links(body, body_first_line))
    return [(name, line) for name, line in found if not name.startswith("../")]  # out of the palace: no note


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


def renamed_target(written: str, old: str, new: str) -> str:
    """A name as written (`watering schedule`) renamed from `old` to `new` in the same style: as written, all
    lowercase, all uppercase, or slugged with hyphens; so renaming back gives the bytes it had."""
    if written == old:
        return new
    if written == old.lower():
        return new.lower()
    if written == old.upper():
        return new.upper()
    if written == re.sub(r"\s+", "-", old.strip()).lower():
        return re.sub(r"\s+", "-", new.strip()).lower()
    return new


def encoded_like(written: str, plain: str) -> str:
    """`plain` spelled the way a path link `written` was: percent-encoded when it was (`Name%20x.md`)."""
    return quote(plain, safe="/-._~()!*'") if "%" in written else plain


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


def rename_body_links(text: str, renames: dict[str, str]) -> str:
    """Note text whose body `[[target]]` links (outside code fences) have their target renamed per `renames`
    (the target as written -> the new one); labels (`|...`), sections (`#...`) and every other byte are kept."""
    opening = re.match(r"---[ \t]*\r?\n", text)
    closing = re.compile(r"^---[ \t]*\r?$", re.MULTILINE).search(text, opening.end()) if opening else None
    start = closing.end() if closing else 0
    body = text[start:]
    fences = code_ranges(body)
    pieces, last = [], 0
    for match in LINK_PATTERN.finditer(body):
        target = match.group(1)
        new = renames.get(target.strip())
        if new is None or not outside_code(match.start(), fences):
            continue
        lead = target[: len(target) - len(target.lstrip())]
        trail = target[len(target.rstrip()):]
        pieces += [body[last : match.start(1)], lead + new + trail]
        last = match.end(1)
    if not pieces:
        return text
    return text[:start] + "".join(pieces) + body[last:]


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
