"""Wake-up: the palace's identity plus its core and most important memories, within a token budget.

Given the directory a session works in (`cwd`), the recent decisions and conventions distilled from that
project's sessions come right after the core memories. Every line is whole: a memory whose subject was cut
(a distilled one) is shown by the first sentence of its content, and no heading is written without lines.

An adopted vault's notes are not memories someone chose to keep: hundreds of page titles in one list tell a
session little. Its wake-up is a map: the few most linked notes, then each domain (most notes first) with its
count and its own most linked notes.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

from palace_cli.core.layout import Scan
from palace_cli.core.notefile import load_frontmatter, read_note_text, split_frontmatter
from palace_cli.core.notes import Memory
from palace_cli.core.text import split_sentences
from palace_cli.core.validity import Versions
from palace_cli.core.wording import plural
from palace_cli.errors import PalaceError
from palace_cli.palace import Palace
from palace_cli.search.profiles import BYTES_PER_TOKEN, tokens_of

DEFAULT_BUDGET = 2000  # tokens
PROJECT_KINDS = ("decision", "convention")  # what a new session in a project needs first (issue 33)
HEAD_BYTES = 16384  # read of a session note to find its frontmatter's cwd
LONGEST_SENTENCE = 300  # characters: a longer first sentence is not a line; the memory's subject is shown instead
VAULT_HUBS = 8  # a vault's most linked notes, above its domains
DOMAIN_NOTES, DOMAIN_NOTES_EVERY = 3, 25  # a domain's own most linked notes: 3, and one more per 25 notes it holds


@dataclass
class WakeUp:
    """The wake-up text and the memories it names, core first, then most important first."""

    identity: str
    memories: list[dict] = field(default_factory=list)
    text: str = ""
    tokens: int = 0
    budget_tokens: int = 0
    left_out_core: list[str] = field(default_factory=list)  # core memories the budget had no room for

    def as_dict(self) -> dict:
        return {"identity": self.identity, "memories": self.memories, "text": self.text,
                "tokens": self.tokens, "budget_tokens": self.budget_tokens, "left_out_core": self.left_out_core}


def importance(palace: Palace, scan: Scan | None = None) -> dict[str, float]:
    """Importance of each memory: explicit `importance:` (0-10) counts most, then how many memories
    link to it (a hub is a concept others depend on), then how many keywords it carries."""
    scan = scan or palace.index.scan()
    inbound = Counter(link for m in scan.memories.values() for link in set(m.link_ids or m.all_links) if link in scan.memories)
    scores = {}
    for memory in scan.memories.values():
        try:
            explicit = float(memory.meta.get("importance", 0) or 0)
        except (TypeError, ValueError):
            explicit = 0.0
        scores[memory.id] = explicit * 10 + inbound[memory.id] * 2 + min(len(memory.keywords), 5) * 0.1
    return scores


def _head(palace: Palace, scan: Scan) -> str:
    """The title, then who the palace is (its identity, else a sentence) and where its notes are, in sentences."""
    name, domains = palace.config.name, sorted(scan.by_domain())
    held = plural(len(scan.memories), "note" if palace.adopted else "memory")
    where = f" in {plural(len(domains), 'domain')}: {', '.join(domains)}" if len(domains) > 1 else \
        f" in the domain {domains[0]}" if domains else ""
    if not scan.memories:
        lines = [palace.config.identity.strip() or f"This is {name}, a memory palace with no memories yet."]
    elif palace.config.identity:
        lines = [palace.config.identity.strip(), f"It holds {held}{where}."]
    else:
        lines = [f"This is {name}, a memory palace of {held}{where}."]
    return f"# {name}\n" + "\n".join(lines) + "\n"


def said(memory: Memory) -> str:
    """The memory in a line: its subject, or, when the subject was cut short (`…`), its content's first sentence."""
    if memory.subject.endswith("…") and memory.content:
        sentences = split_sentences(memory.content)
        if sentences and len(sentences[0]) <= LONGEST_SENTENCE:
            return sentences[0]
    return memory.subject


def _line(memory: Memory, kind: str = "") -> str:
    """`- what it says [domain] (anchor) id:ID`; a note without a verify token shows its path:line instead of its
    id, which is how it is cited (and `get` takes it too). Under a domain's heading (`kind` "domain") the domain
    is not repeated; a project's decision or convention (`kind` "project") says its kind and since when."""
    where = f"id:{memory.id}" if memory.verify else memory.location
    if kind == "project":
        when = f", {memory.valid_from or memory.created}" if memory.valid_from or memory.created else ""
        return f"- {said(memory)} ({memory.meta.get('kind')}{when}) {where}\n"
    anchor = f" ({memory.anchor})" if memory.anchor else ""  # a plain note (no frontmatter) has none
    if kind == "domain":  # a page named by its path (`Space Lua/Widget.md:8`) is not named twice
        stem = memory.path.rsplit("/", 1)[-1].removesuffix(".md")
        return f"- {where}\n" if said(memory).lower() == stem.lower() and not anchor else \
            f"- {said(memory)}{anchor} {where}\n"
    return f"- {said(memory)} [{memory.domain}]{anchor} {where}\n"


def _ordered(palace: Palace, scan: Scan) -> tuple[list[str], dict[str, float]]:
    """Ids valid now, core first, then by importance (ties by id): superseded memories never wake up."""
    scores = importance(palace, scan)
    hidden = Versions.of(scan.memories.values()).hidden()
    ids = [i for i in scores if i not in hidden]
    return sorted(ids, key=lambda i: (not scan.memories[i].core, -scores[i], i)), scores


def _same_project(cwd: str, where: str) -> bool:
    """Whether a session that ran in `where` worked on the project at `cwd` (the same folder, or one inside the other)."""
    cwd, where = os.path.normpath(cwd), os.path.normpath(where)
    return cwd == where or where.startswith(cwd.rstrip(os.sep) + os.sep) or cwd.startswith(where.rstrip(os.sep) + os.sep)


def _session_cwd(palace: Palace, source: str, seen: dict[str, str]) -> str:
    """The `cwd` of the session a distilled memory's `source` (path:line) points at; "" when it has none."""
    path = source.rpartition(":")[0] if source.rpartition(":")[2].isdigit() else source
    if path not in seen:
        seen[path] = ""
        try:
            with open(palace.root / path, encoding="utf-8", errors="replace") as file:
                head = file.read(HEAD_BYTES)  # the frontmatter is at the top; a session's turns can be megabytes
            try:
                block = split_frontmatter(head, path)[0]
            except PalaceError:  # a frontmatter longer than the head: read the whole note
                block = split_frontmatter(read_note_text(palace.root / path, path)[0], path)[0]
            seen[path] = str(load_frontmatter(block, path).get("cwd") or "")
        except (OSError, PalaceError, ValueError):
            pass  # a session moved or unreadable: its memories are simply not this project's
    return seen[path]


def project_memories(palace: Palace, scan: Scan, ids: list[str], cwd: str | None) -> list[str]:
    """The decisions and conventions among `ids` distilled from sessions run in `cwd`'s project, newest first."""
    if not cwd:
        return []
    seen: dict[str, str] = {}
    found = [i for i in ids if not scan.memories[i].core and scan.memories[i].meta.get("kind") in PROJECT_KINDS
             and isinstance(scan.memories[i].meta.get("source"), str)
             and _same_project(cwd, _session_cwd(palace, scan.memories[i].meta["source"], seen) or "\0")]
    newest = sorted(found, key=lambda i: (scan.memories[i].valid_from or scan.memories[i].created, i), reverse=True)
    return newest


def _groups(palace: Palace, scan: Scan, order: list[str], cwd: str | None) -> list[tuple[str, list[str], str]]:
    """(heading, ids, kind of line) in the order they wake up: core, this project's, then the rest (in a vault
    of several domains, its most linked notes, then each domain's)."""
    core = [i for i in order if scan.memories[i].core]
    project = project_memories(palace, scan, order, cwd)
    taken = set(core) | set(project)
    rest = [i for i in order if i not in taken]
    noun = "notes" if palace.adopted else "memories"
    groups = [(f"Core {noun}:" if project else f"Most important {noun}:", core, ""),
              ("Recent decisions and conventions of this project:", project, "project")]
    heading = f"Most important {noun}:" if project or not core else ""
    domains = {m.domain for m in scan.memories.values()}
    if not palace.adopted or len(domains) < 2:
        return groups + [(heading, rest, "")]
    hubs = rest[: max(VAULT_HUBS - len(core), 0)]
    return groups + [(heading, hubs, "")] + _domain_groups(scan, rest[len(hubs):])


def _domain_groups(scan: Scan, ids: list[str]) -> list[tuple[str, list[str], str]]:
    """A vault's domains, most notes first: a heading with how many notes each holds, then its most linked
    notes among `ids` (in wake-up order), 3 and one more per 25 notes; the first heading says what follows."""
    counts = Counter(m.domain for m in scan.memories.values())
    by_domain: dict[str, list[str]] = {}
    for note_id in ids:
        by_domain.setdefault(scan.memories[note_id].domain, []).append(note_id)
    groups = []
    for domain in sorted(by_domain, key=lambda d: (-counts[d], d)):
        shown = by_domain[domain][: DOMAIN_NOTES + counts[domain] // DOMAIN_NOTES_EVERY]
        heading = f"{domain}, {plural(counts[domain], 'note')}" + (":" if len(shown) == counts[domain] else
                                                                   ", the most linked:")
        groups.append((heading if groups else f"By domain, most notes first.\n{heading}", shown, "domain"))
    return groups


def wake_up(palace: Palace, budget_tokens: int = DEFAULT_BUDGET, cwd: str | None = None) -> WakeUp:
    """Identity, then one line per memory (core ones first, then `cwd`'s project's recent decisions and
    conventions, then by importance) until the budget is used; a heading only above lines."""
    scan = palace.scan()
    order, scores = _ordered(palace, scan)
    head = _head(palace, scan)
    budget_bytes = budget_tokens * BYTES_PER_TOKEN
    parts, chosen, full = [head], [], False
    used = len(head.encode("utf-8"))
    for heading, ids, kind in _groups(palace, scan, order, cwd):
        heading_line = f"{heading}\n" if heading and ids else ""
        for note_id in ids:
            memory = scan.memories[note_id]
            line = heading_line + _line(memory, kind)
            size = len(line.encode("utf-8"))
            if full or used + size > budget_bytes:
                full = True
                break
            parts.append(line)
            heading_line = ""
            used += size
            chosen.append({"id": memory.id, "subject": memory.subject, "domain": memory.domain, "core": memory.core,
                           "importance": round(scores[note_id], 3), "path": memory.path, "line": memory.line,
                           **({"project": True} if kind == "project" else {})})
    named = {m["id"] for m in chosen}
    left_out = [i for i in order if scan.memories[i].core and i not in named]
    text = "".join(parts)
    return WakeUp(palace.config.identity or head.splitlines()[1], chosen, text, tokens_of(text), budget_tokens, left_out)


def core_overflow(palace: Palace, scan: Scan, budget_tokens: int = DEFAULT_BUDGET) -> tuple[list[Memory], int]:
    """The core memories that do not fit in wake-up's budget on their own, and the tokens all core lines need."""
    core = [i for i in _ordered(palace, scan)[0] if scan.memories[i].core]
    used = len(_head(palace, scan).encode("utf-8")) + len("Most important memories:\n")
    budget_bytes = budget_tokens * BYTES_PER_TOKEN
    left = []
    for note_id in core:
        used += len(_line(scan.memories[note_id]).encode("utf-8"))
        if used > budget_bytes:
            left.append(scan.memories[note_id])
    return left, -(-used // BYTES_PER_TOKEN)
