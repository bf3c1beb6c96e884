"""Sections as retrieval units: a long note is also ranked part by part, each part under its headings.

Vault notes run to 20 KB: ranked whole, a note's BM25 is diluted by everything it says, and its
embedding sees only its first 256 tokens. So besides the note itself, a note of NOTE_BYTES or more
whose body is cut by headings into two parts or more gives one unit per part (kind "section"), like a
conversation gives one unit per turn (index/turns.py). A part is a heading's own text, under the path
of headings above it (`Setup › Linux`); a part shorter than MIN_BYTES joins the next one (an empty
`## Setup` above its `### Linux`), and one longer than MAX_BYTES is cut at blank lines. Each part is
handed over as `path:line` of where it starts (its heading), within the budget, with its note's verify
token.

A SMASHIN memory (`## Image`, `## Content`) is not cut: its sections are already fields of its own,
and such notes are short by design. Links and backlinks stay the note's.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from palace_cli.core.markdown import heading_sections
from palace_cli.core.notes import Memory
from palace_cli.index.vectors import vector_key

NOTE_BYTES = 2000   # a note this long (its body, in UTF-8) is also ranked by section
MIN_BYTES = 200     # a shorter part joins the next one
MAX_BYTES = 4000    # a longer part is cut at blank lines
# What a section unit is made of is part of the note cache's rows: a change here bumps store.SCHEMA_VERSION.
KEY_SEP = "#"       # a section's key is `<note id>#<line>`; ids never hold a `#`
SHOWN_SEP = " › "   # between the headings of a section's path, where a person reads it


@dataclass(frozen=True)
class SectionUnit:
    """One ranked part of a note: its key, the heading path, the file line where it starts, its text."""

    key: str
    heading: tuple[str, ...]
    line: int
    text: str

    def row(self, subject: str) -> tuple:
        """What the note cache stores: key, heading path (JSON), line, text, hash of the embedded text, its vector key."""
        embedded = unit_text(subject, self.heading, self.text)
        digest = hashlib.sha256(embedded.encode("utf-8")).hexdigest()[:20]
        return (self.key, json.dumps(list(self.heading), ensure_ascii=False), self.line, self.text, digest,
                vector_key(embedded))


def section_key(note_id: str, line: int) -> str:
    """The address of a section unit: its note's id and the line it starts on."""
    return f"{note_id}{KEY_SEP}{line}"


def section_title(subject: str, heading) -> str:
    """A section's title: its note's subject and the headings down to it (`Telemetry › How to opt out`), the
    note's title heading left out where it repeats the subject."""
    heading = tuple(heading)
    if heading and heading[0].strip() == subject.strip():
        heading = heading[1:]
    return SHOWN_SEP.join(part for part in (subject, *heading) if part)


def unit_text(subject: str, heading, text: str) -> str:
    """The text a section is embedded and ranked by: its title (section_title), then its text."""
    title = section_title(subject, heading)
    return f"{title}\n{text}" if title else text


def section_units(memory: Memory) -> list[SectionUnit]:
    """The section units of a note: none for a short note, a SMASHIN memory, or a body with one part."""
    if memory.structured or len(memory.body.encode("utf-8")) < NOTE_BYTES:
        return []
    parts: list[tuple[tuple[str, ...], int, str]] = []
    carry: tuple[tuple[str, ...], int, str] | None = None  # a short part waiting for the next one
    for section in heading_sections(memory.body, memory.body_line or 1):
        heading, line, text = section.path, section.line, section.text
        if carry is not None and carry[2]:  # a short part with text of its own leads the next one
            heading, line = carry[0], carry[1]
            text = "\n\n".join(part for part in (carry[2], section.path[-1] if section.path else "", text) if part)
        carry = None
        if len(text.encode("utf-8")) < MIN_BYTES:
            carry = (heading, line, text)
            continue
        parts += _cut(heading, line, text, section.text_line if text == section.text else line)
    if carry is not None and carry[2]:
        if parts:
            heading, line, text = parts[-1]
            parts[-1] = (heading, line, f"{text}\n\n{carry[2]}")
        else:
            parts.append(carry)
    if len(parts) < 2:
        return []
    return [SectionUnit(section_key(memory.id, line), heading, line, text) for heading, line, text in parts]


def _cut(heading: tuple[str, ...], line: int, text: str, text_line: int) -> list[tuple[tuple[str, ...], int, str]]:
    """A part as one unit, or cut at blank lines into units of at most about MAX_BYTES: the first starts at the
    heading's line, each other at its own first line."""
    if len(text.encode("utf-8")) <= MAX_BYTES:
        return [(heading, line, text)]
    out: list[tuple[tuple[str, ...], int, str]] = []
    chunk: list[str] = []
    size, start, offset = 0, line, text_line
    for paragraph in text.split("\n\n"):
        length = len(paragraph.encode("utf-8")) + 2
        if chunk and size + length > MAX_BYTES:
            out.append((heading, start, "\n\n".join(chunk)))
            chunk, size, start = [], 0, offset
        chunk.append(paragraph)
        size += length
        offset += paragraph.count("\n") + 2
    out.append((heading, start, "\n\n".join(chunk)))
    return out
