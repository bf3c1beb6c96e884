"""Markdown structure palace reads in any note: code fences, `[[links]]`, `## sections`, git conflict markers."""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable

ATTACHMENT = re.compile(r"\.(?:png|jpe?g|gif|svg|webp|bmp|avif|pdf|mp3|wav|ogg|m4a|flac|mp4|webm|mov|mkv|canvas|"
                        r"excalidraw|base|csv|xlsx?|docx?|pptx?|zip)$", re.IGNORECASE)
LINK_PATTERN = re.compile(r"\[\[([^\]|#]+)(?:[|#][^\]]*)?\]\]")
SECTION_PATTERN = re.compile(r"^##[ \t]+(.+?)[ \t]*$", re.MULTILINE)
FENCE = re.compile(r"^[ \t]{0,3}(```|~~~)")
# git's conflict markers; `=======` alone is also a setext heading underline, so it counts only inside a conflict
CONFLICT_EDGE = re.compile(r"^(<{7}|>{7}|\|{7})(?:[ \t].*)?$", re.MULTILINE)


def code_ranges(body: str) -> list[tuple[int, int]]:
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


def body_link_lines(body: str, body_first_line: int) -> list[tuple[str, int]]:
    """Every `[[link]]` to a note in a body, outside code fences, with its file line (attachments left out)."""
    fences = code_ranges(body)
    line = line_numbers(body, body_first_line)
    return [(m.group(1).strip(), line(m.start()))
            for m in LINK_PATTERN.finditer(body) if outside_code(m.start(), fences) and not is_attachment(m.group(1))]


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
