"""Versions of a fact: `palace supersede OLD NEW` links two memories, `palace history ID` shows the chain.

Superseding never deletes and never touches a body: it writes `superseded_by` (and `valid_until`, when the
old note has none) into the old note's frontmatter and `supersedes` (and `valid_from`) into the new one's,
through the byte-preserving frontmatter writer. The rules of validity are in `validity.py`.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from palace_cli.core.dates import format_moment, parse_moment, today, yaml_moment
from palace_cli.core.noteedit import edit_frontmatter
from palace_cli.core.notes import Memory
from palace_cli.core.validity import Versions
from palace_cli.editing.writes import Change, apply, edited, writing
from palace_cli.errors import UsageError
from palace_cli.palace import Palace


@dataclass
class Link:
    """What superseding OLD by NEW wrote: the date NEW took over, and the files and fields it changed."""

    old: str
    new: str
    valid_from: str
    changed: dict[str, list[str]] = field(default_factory=dict)  # path -> fields written
    kept_until: str = ""  # OLD already had a valid_until of its own, left as it was

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {"old": self.old, "new": self.new, "valid_from": self.valid_from, "changed": self.changed,
                "kept_valid_until": self.kept_until}


def moment_option(value, what: str = "date") -> datetime | None:
    """A date option (`--valid-from`, `--as-of`) as a UTC moment; UsageError naming the option when it is no date."""
    try:
        return parse_moment(value)
    except ValueError as exc:
        raise UsageError(f"{what}: {exc}") from None


def _start(memory: Memory) -> datetime | None:
    for value in (memory.valid_from, memory.created):
        try:
            moment = parse_moment(value)
        except ValueError:
            continue
        if moment is not None:
            return moment
    return None


def check_link(versions: Versions, old: Memory, new_id: str, when: datetime) -> None:
    """Refuse a link that would make no sense: a memory replacing itself, a cycle, a successor older than OLD."""
    if old.id == new_id:
        raise UsageError(f"{old.id} cannot supersede itself")
    if new_id in _before(versions, old.id):
        raise UsageError(f"{new_id} already comes before {old.id} in its chain of versions; "
                         "superseding it would make a cycle (see `palace history`)")
    start = _start(old)
    if start is not None and when < start:
        whence = "valid_from" if old.valid_from else "created date, standing in for valid_from"
        raise UsageError(f"{new_id} would take over on {format_moment(when)}, before {old.id} became true "
                         f"({format_moment(start)}, its {whence}); give a later --valid-from, or set "
                         f"{old.id}'s valid_from to when it became true")


def _before(versions: Versions, memory_id: str) -> set[str]:
    """Every transitive predecessor of a memory."""
    seen, stack = set(), list(versions.predecessors.get(memory_id, []))
    while stack:
        current = stack.pop()
        if current not in seen:
            seen.add(current)
            stack += versions.predecessors.get(current, [])
    return seen


def old_note_changes(old: Memory, new_id: str, when: datetime) -> dict:
    """The frontmatter fields superseding writes on the old note (nothing when it already says so)."""
    changes = {}
    if new_id not in old.superseded_by:
        changes["superseded_by"] = [*old.superseded_by, new_id]
    if not old.valid_until:
        changes["valid_until"] = yaml_moment(when)
    return changes


def planned_edit(palace: Palace, memory: Memory, changes: dict) -> Change | None:
    """The frontmatter edit of a note, planned without writing (None when nothing changes).

    Raises NoteError when the note cannot be edited exactly, before anything else has been written."""
    if not changes:
        return None
    return edited(palace, memory.path, lambda text: edit_frontmatter(text, changes, memory.path))


def handover_date(new: Memory, given: datetime | None) -> datetime:
    """When NEW took over: the date given, else its valid_from, else its created date (never later than
    today in UTC: a created date ahead of UTC is a time zone, not the future), else today."""
    if given is not None:
        return given
    try:
        explicit = parse_moment(new.valid_from)
    except ValueError:
        explicit = None
    if explicit is not None:
        return explicit
    try:
        created = parse_moment(new.created)
    except ValueError:
        created = None
    return min(created, today()) if created is not None else today()


def supersede(palace: Palace, old_ref: str, new_ref: str, valid_from=None) -> Link:
    """Record that NEW replaces OLD from a date on: frontmatter of both notes only, bodies untouched."""
    with writing(palace):  # read, plan and write both notes as one writer: concurrent supersedes all land
        return _supersede(palace, old_ref, new_ref, valid_from)


def _supersede(palace: Palace, old_ref: str, new_ref: str, valid_from=None) -> Link:
    old = palace.memory(old_ref)
    new = palace.memory(new_ref, refresh=False)
    when = handover_date(new, moment_option(valid_from, "--valid-from"))
    versions = Versions.of(palace.index.scan(light=True).memories.values())
    check_link(versions, old, new.id, when)
    new_changes = {}
    if old.id not in new.supersedes:
        new_changes["supersedes"] = [*new.supersedes, old.id]
    if not new.valid_from:
        new_changes["valid_from"] = yaml_moment(when)
    old_changes = old_note_changes(old, new.id, when)
    # Both edits are computed before either is written: a note that cannot be edited exactly stops both.
    edits = [(memory, changes, planned_edit(palace, memory, changes))
             for memory, changes in ((new, new_changes), (old, old_changes))]
    link = Link(old.id, new.id, format_moment(when))
    if old.valid_until and "valid_until" not in old_changes:
        link.kept_until = old.valid_until
    apply(palace, [edit for _, _, edit in edits if edit is not None], f"palace supersede {old.id} {new.id}")
    link.changed = {memory.path: sorted(changes) for memory, changes, edit in edits if edit is not None}
    palace.refresh()
    return link


# ---- history ------------------------------------------------------------------------------------


@dataclass
class Version:
    """One version in a chain: where it is, when it was true, and what git remembers of its file."""

    id: str
    subject: str = ""
    path: str = ""
    line: int = 0
    valid_from: str = ""
    valid_until: str = ""
    status: str = ""  # current, superseded, expired, future, missing (a link names an id no note has)
    supersedes: list[str] = field(default_factory=list)
    superseded_by: list[str] = field(default_factory=list)
    type: str = ""
    commits: list[dict] | None = None

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class History:
    """The chain of versions a memory belongs to, oldest first."""

    id: str
    versions: list[Version]
    git: bool

    def as_dict(self) -> dict:
        """JSON-ready form (`palace history --json`)."""
        return {"id": self.id, "git": self.git, "versions": [v.as_dict() for v in self.versions]}


def _in_git(root: Path) -> bool:
    if not shutil.which("git"):
        return False
    done = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=root, capture_output=True, text=True)
    return done.returncode == 0 and done.stdout.strip() == "true"


def git_log(root: Path, relpath: str) -> list[dict]:
    """Commits that touched a file, newest first, following renames: commit, date, author, subject."""
    done = subprocess.run(["git", "log", "--follow", "--format=%H%x1f%aI%x1f%an%x1f%s", "--", relpath],
                          cwd=root, capture_output=True, text=True, encoding="utf-8", errors="replace")
    commits = []
    for line in done.stdout.splitlines():
        parts = line.split("\x1f")
        if len(parts) == 4:
            commits.append({"commit": parts[0], "date": parts[1], "author": parts[2], "subject": parts[3]})
    return commits


def history(palace: Palace, ref: str, with_git: bool = True) -> History:
    """The versions linked to a memory (both directions), oldest first, each with its validity and git log."""
    memory = palace.memory(ref)
    memories = palace.index.scan(light=True).memories
    versions = Versions.of(memories.values())
    git = with_git and _in_git(palace.root)
    out = []
    for memory_id in versions.chain(memory.id):
        found = memories.get(memory_id)
        if found is None:
            out.append(Version(memory_id, status="missing", supersedes=versions.predecessors.get(memory_id, []),
                               superseded_by=versions.successors.get(memory_id, [])))
            continue
        end = versions.end(memory_id)
        out.append(Version(
            memory_id, found.subject, found.path, found.line,
            valid_from=format_moment(versions.start(memory_id)), valid_until=format_moment(end),
            status=versions.status(memory_id), supersedes=versions.predecessors.get(memory_id, []),
            superseded_by=versions.successors.get(memory_id, []), type=found.type,
            commits=git_log(palace.root, found.path) if git else None))
    return History(memory.id, out, git)
