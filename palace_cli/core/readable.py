"""Readable text: what a quote shows of a note (answers/extract.py quotes it, answers/verify.py checks it)."""

from __future__ import annotations

import re

from palace_cli.core.links import WIKILINK, is_attachment
from palace_cli.core.markdown import code_ranges, code_spans, outside_code

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
