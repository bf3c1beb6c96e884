"""Merge two versions of a generated index file without a conflict: what `palace git merge-driver` does.

A merge driver runs while git is still merging the notes, so the notes on disk are not yet what the
merge will make, and regenerating from them would be wrong. The generated files are lists of one line
per memory, though, so a line-level three-way merge gets them right in every case but one: when both
branches changed the same memory, both of its new lines are kept (in INDEX.md; a domain index keeps
one line per id, ours). The merged notes are then rendered exactly by the `pre-merge-commit` hook that
`palace git setup` installs (or by the next palace command, whose refresh regenerates stale files),
and `palace index --check` fails until they are.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from palace_cli.core.wording import plural

ENTRY = "- "
DOMAIN_COUNT = re.compile(r"^\d[\d,]* memor(?:y|ies)\. ", re.IGNORECASE)
ROOT_COUNT = re.compile(r"^\d[\d,]* memor(?:y|ies) in \d[\d,]* domains?\. ", re.IGNORECASE)
SESSION_COUNT = re.compile(r"^\d[\d,]* sessions, \d[\d,]* turns, from \d[\d,]* source\(s\)\. ")  # index/conversations.md
TURNS = re.compile(r"` · (\d+) turns")
ENTRY_ID = re.compile(r" id:(\S+)$")


@dataclass
class Section:
    """A `## domain` section of INDEX.md (heading None: the body of a domain index): its text, then its entries."""

    heading: str | None
    preamble: list[str] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)


@dataclass
class Parsed:
    """A generated file as a header and sections of one-line entries."""

    header: list[str] = field(default_factory=list)
    sections: dict[str | None, Section] = field(default_factory=dict)


def parse(text: str) -> Parsed:
    """Split a generated file into its header and sections of `- ` entry lines."""
    parsed = Parsed()
    current: Section | None = None
    for line in (text[:-1] if text.endswith("\n") else text).split("\n"):
        if line.startswith("## "):
            current = parsed.sections.setdefault(line, Section(line))
        elif line.startswith(ENTRY):
            if current is None:
                current = parsed.sections.setdefault(None, Section(None))
            current.entries.append(line)
        elif current is None:
            parsed.header.append(line)
        elif not current.entries:
            current.preamble.append(line)
        # other lines after a section's entries are the blank line that ends it: rendered again below
    for section in parsed.sections.values():
        if section.heading and not section.entries and section.preamble[-1:] == [""]:
            section.preamble.pop()  # an empty section's last blank line is its end, not its preamble
    return parsed


def _pick(base, ours, theirs):
    """Three-way choice of a whole part: the side that changed it, ours when both did."""
    return theirs if ours == base else ours


def _entries(base: list[str], ours: list[str], theirs: list[str]) -> list[str]:
    """Lines either side added, minus lines either side removed; in ours' order, with theirs' new lines after
    the line they follow in theirs."""
    ours_set, theirs_set = set(ours), set(theirs)
    gone = {e for e in base if e not in ours_set or e not in theirs_set}
    kept = [e for e in dict.fromkeys(ours) if e not in gone]
    kept_set = set(kept)
    after: dict[str | None, list[str]] = defaultdict(list)
    anchor = None
    for entry in dict.fromkeys(theirs):
        if entry in kept_set:
            anchor = entry
        elif entry not in gone and entry not in ours_set:
            after[anchor].append(entry)
    merged = after[None] + [line for entry in kept for line in (entry, *after.get(entry, []))]
    # Lines both sides added at the same place: in text order, which is the generator's order for the session
    # list (dates first) and usually for INDEX.md (subjects, sorted by id); a domain index is sorted by id later.
    base_set, theirs_new = set(base), {e for entries in after.values() for e in entries}
    out, run = [], []
    for line in merged + [None]:
        if line is not None and line not in base_set:
            run.append(line)
            continue
        mixed = any(e in theirs_new for e in run) and any(e not in theirs_new for e in run)
        out += sorted(run) if mixed else run
        run = []
        if line is not None:
            out.append(line)
    return out


def _by_id(entries: list[str]) -> list[str]:
    """Domain index entries sorted by id as the generator sorts them, one per id (the first, ours, kept)."""
    chosen: dict[str, str] = {}
    for entry in entries:
        found = ENTRY_ID.search(entry)
        chosen.setdefault(found.group(1) if found else entry, entry)
    return [chosen[key] for key in sorted(chosen)]


def merge_generated(base: str, ours: str, theirs: str) -> str:
    """The three-way merge of a generated file (INDEX.md or index/<domain>.md), never a conflict; counts redone."""
    b, o, t = parse(base), parse(ours), parse(theirs)
    sections: list[Section] = []
    for key in sorted({*o.sections, *t.sections}, key=lambda k: (k is not None, k or "")):
        empty = Section(key)
        bs, os_, ts = b.sections.get(key, empty), o.sections.get(key, empty), t.sections.get(key, empty)
        entries = _entries(bs.entries, os_.entries, ts.entries)
        if key is None:
            entries = _by_id(entries)
        # A section stays when it has entries, or when both sides still have it (a declared, empty domain).
        if entries or (key in o.sections and key in t.sections):
            sections.append(Section(key, _pick(bs.preamble, os_.preamble, ts.preamble), entries))
    header = list(_pick(b.header, o.header, t.header))
    total = sum(len(s.entries) for s in sections)
    domains = sum(1 for s in sections if s.heading)
    for i, line in enumerate(header):
        if ROOT_COUNT.match(line):
            header[i] = ROOT_COUNT.sub(f"{plural(total, 'memory').capitalize()} in {plural(domains, 'domain')}. ",
                                       line)
        elif DOMAIN_COUNT.match(line):
            header[i] = DOMAIN_COUNT.sub(f"{plural(total, 'memory').capitalize()}. ", line)
        elif SESSION_COUNT.match(line):
            turns = sum(int(found.group(1)) for s in sections for e in s.entries for found in [TURNS.search(e)] if found)
            header[i] = SESSION_COUNT.sub(f"{total} sessions, {turns} turns, from {domains} source(s). ", line)
    lines = header
    for section in sections:
        lines += ([section.heading] if section.heading else []) + section.preamble + section.entries
        if section.heading:
            lines.append("")  # INDEX.md: a blank line ends each domain's section
    text = "\n".join(lines) + "\n"
    return text.rstrip("\n") + "\n" if any(s.heading for s in sections) else text
