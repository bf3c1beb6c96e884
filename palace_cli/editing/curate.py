"""Caring for notes after they are written: backlinks, tags, `palace rm` and `palace mv`.

Links are resolved by the one resolver (`names.Names`, behind `Palace.memory` and lint). Every write goes
through the byte-preserving writers of notes.py: a moved note keeps its body byte for byte, a note whose
link is renamed changes only in that link's bytes. Everything is planned and checked before the first
byte is written, so a note that cannot be edited exactly stops the command with nothing changed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from palace_cli.core.layout import MEMORIES, Scan, path_id
from palace_cli.core.links import note_links, property_targets
from palace_cli.core.names import Files, Names
from palace_cli.core.noteedit import check_note_size, edit_frontmatter, rename_links
from palace_cli.core.walk import attachment_files
from palace_cli.core.notefile import parse_note
from palace_cli.core.notes import ID_PATTERN, VERSION_FIELDS, Memory
from palace_cli.errors import Ambiguous, NoteError, NotFound, PalaceError, UsageError
from palace_cli.palace import Palace
from palace_cli.editing.reviewlog import ReviewLog
from palace_cli.editing.writes import Change, apply, creating, current_bytes, note_target, removing, writing


BODY_FIELDS = {"wiki": "body", "embed": "embed", "markdown": "markdown", "image": "embed", "reference": "reference"}


@dataclass
class Backlink:
    """One place where a memory is linked to: the linking memory, its path and line, the field, the text written."""

    id: str
    path: str
    line: int
    field: str  # "links", "supersedes", "superseded_by", or in the body "body" (a wikilink), "embed", "markdown", "reference"
    target: str
    column: int = 0  # where the link starts in its line (1 is the first character); 0 for a frontmatter field

    @property
    def where(self) -> str:
        """`path:line:column` (`path:line` for a frontmatter field): two links on one line are two places."""
        return f"{self.path}:{self.line}:{self.column}" if self.column else f"{self.path}:{self.line}"

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {"id": self.id, "path": self.path, "line": self.line, "column": self.column, "field": self.field,
                "target": self.target}


def _links_to(target: Memory, names: Names, files: Files | None):
    """Whether a link (its text, the linking note's path, whether it names a file, whether it is a wikilink) names
    `target`: a memory, or a file of the vault (a Memory whose id is its path: `attachment_memory`)."""
    is_file = target.id == target.path and target.path not in names.paths

    def links(text: str, source: str, file: bool = False, wiki: bool = True) -> bool:
        if not file:
            try:
                found = names.link(text, source)
            except Ambiguous:
                return False
            if found is not None or not is_file:
                return found is not None and found.id == target.id
        return is_file and files is not None and files.resolve(text, source, anywhere=wiki) == target.path

    return links


def _backlinks(target: Memory, memories: dict[str, Memory], names: Names, files: Files | None = None
               ) -> list[Backlink]:
    found = []
    links = _links_to(target, names, files)
    for memory in sorted(memories.values(), key=lambda m: m.path):
        if memory.id == target.id:
            continue
        found += [Backlink(memory.id, memory.path, memory.field_line("links"), "links", text)
                  for text in memory.links if links(text, memory.path)]
        found += [Backlink(memory.id, memory.path, memory.field_line(key), key, text)
                  for key, text, file in property_targets(memory.meta) if links(text, memory.path, file)]
        for link in note_links(memory.body, memory.body_line or memory.line, files=files is not None):
            name = link.name(memory.path)
            if not name.startswith("../") and links(name, memory.path, link.file, link.form in ("wiki", "embed")):
                column = link.outer[0] - memory.body.rfind("\n", 0, link.outer[0])
                found.append(Backlink(memory.id, memory.path, link.line, BODY_FIELDS[link.form], link.target, column))
        found += [Backlink(memory.id, memory.path, memory.field_line(name), name, target.id)
                  for name in VERSION_FIELDS if target.id in getattr(memory, name)]
    return found


def attachment_memory(path: str) -> Memory:
    """A file of the vault that is not a note (an image, a PDF), as backlinks shows it: its path is its id."""
    return Memory(id=path, subject=path.rsplit("/", 1)[-1], anchor="", verify="", domain="", path=path, plain=True)


def backlinks(palace: Palace, ref: str) -> tuple[Memory, list[Backlink]]:
    """The memory `ref` names (or the file: `photo.jpg`, `assets/photo.jpg`), and every link to it from other
    memories (by id, path, file name, alias or subject; in the body, `links` and frontmatter properties)."""
    scan = palace.scan()
    files = Files(attachment_files(palace.root, palace.rules))
    try:
        target = palace.memory(ref, refresh=False)
    except NotFound:
        path = files.resolve(ref)
        if path is None:
            raise
        target = attachment_memory(path)
    return target, _backlinks(target, scan.memories, palace.index.names(), files)


@dataclass
class Tag:
    """A tag (a keyword: the two are one list) and the memories that carry it."""

    name: str
    ids: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {"tag": self.name, "count": len(self.ids), "ids": self.ids}


def tags(palace: Palace) -> list[Tag]:
    """Every tag (keyword, or an Obsidian `tags:` entry) with its memories, most used first, case ignored."""
    found: dict[str, Tag] = {}
    for memory in sorted(palace.scan(light=True).memories.values(), key=lambda m: m.id):
        for keyword in dict.fromkeys(k.lower() for k in memory.keywords):
            found.setdefault(keyword, Tag(keyword)).ids.append(memory.id)
    return sorted(found.values(), key=lambda t: (-len(t.ids), t.name))


def has_tag(memory: Memory, tag: str) -> bool:
    """True when the memory carries the tag (case ignored, a leading # ignored)."""
    wanted = tag.strip().lstrip("#").lower()
    return any(k.lower() == wanted for k in memory.keywords)


# ---- rm -------------------------------------------------------------------------------------------


@dataclass
class Removal:
    """What `palace rm` removed, the links it left broken (with --force) and the reviews kept in the log."""

    memory: Memory
    broken: list[Backlink]
    reviews: int

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {"id": self.memory.id, "path": self.memory.path, "broken_links": [b.as_dict() for b in self.broken],
                "reviews_kept": self.reviews}


def remove_memory(palace: Palace, ref: str, force: bool = False) -> Removal:
    """Delete a memory's note; refuses while another memory links to it, unless force. The review log keeps
    its history (it is append-only), so the memory's reviews come back if the note does (git revert)."""
    with writing(palace):  # nobody links to it between the check and the delete
        return _remove_memory(palace, ref, force)


def _remove_memory(palace: Palace, ref: str, force: bool = False) -> Removal:
    memory, links = backlinks(palace, ref)
    if links and not force:
        where = "; ".join(f"{b.path}:{b.line} ({b.field})" for b in links[:5])
        more = f" and {len(links) - 5} more" if len(links) > 5 else ""
        raise PalaceError(f"{memory.id} is linked from {where}{more}; remove those links first, "
                          "or use --force to leave them broken")
    reviews = review_count(palace, memory.id)
    apply(palace, [removing(palace, memory.path)], f"rm {memory.id}")
    _prune_folders(palace, (palace.root / memory.path).parent)
    return Removal(memory, links, reviews)


def _prune_folders(palace: Palace, folder: Path) -> None:
    """Remove folders a removal left empty, up to the domain folder (kept when palace.toml declares the domain)."""
    memories = palace.memories_dir.resolve()
    folder = folder.resolve()
    while folder != memories and memories in folder.parents:
        if folder.parent == memories and folder.name in palace.config.domains:
            return
        try:
            folder.rmdir()
        except OSError:
            return  # not empty
        folder = folder.parent


# ---- mv -------------------------------------------------------------------------------------------


@dataclass
class Move:
    """What `palace mv` did: the memory's old and new id and path, and the notes whose links it renamed."""

    old_id: str
    new_id: str
    old_path: str
    new_path: str
    rewritten: list[str] = field(default_factory=list)
    shared: list[str] = field(default_factory=list)  # other notes with the new file name (a vault's note)
    kept: list[str] = field(default_factory=list)  # notes whose links to those were written with a path

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {"old_id": self.old_id, "new_id": self.new_id, "old_path": self.old_path, "new_path": self.new_path,
                "rewritten": self.rewritten, "shared": self.shared, "kept": self.kept}


def _renamed(names: Names, text: str, moving: Memory, id_changed: bool, stem_changed: bool, source: str = "") -> bool:
    """True when a link `text` (in the note at `source`) names the moving memory in a way the move breaks (its id,
    file name or path); a link by alias or subject keeps working and is left as written."""
    try:
        found = names.resolve(text, source=source)
    except Ambiguous:
        return False
    if found is None or found.memory.id != moving.id:
        return False
    return (found.how == "path" or (found.how == "id" and id_changed)
            or (found.how == "file" and (id_changed or stem_changed)))


def _edited(text: str, memory: Memory, changes: dict, renames: dict[str, str]) -> str:
    if changes:
        text = edit_frontmatter(text, changes, memory.path)
    return rename_links(text, renames, memory.path) if renames else text


def move_memory(palace: Palace, ref: str, new_id: str | None = None, domain: str | None = None,
                new_domain: bool = False) -> Move:
    """Give a memory a new id (its file becomes `<new-id>.md`) and/or move it to another domain; a note outside
    memories/ (an adopted vault's) gets a new name instead (editing/rename.py: `new_id` is its new file name or
    path, links keep the form they were written in).

    Links to it by id, file name or path are renamed in every note (frontmatter `links`, `supersedes`,
    `superseded_by` and body `[[links]]`), through the byte-preserving writers; links by alias or subject
    stay as written. A new id keeps the old one in the note's `previous_ids`, so its reviews follow it
    (the log is never rewritten) and links written elsewhere by the old id, on another branch, still resolve.
    Every write is planned first and journaled: a move a killed process left half done is finished by the
    next write, and running the same `mv` again finds it done.
    """
    request = {"ref": ref, "new_id": new_id, "domain": domain}
    with writing(palace) as finished:  # every note that links to it is read and rewritten as one writer
        if finished is not None and finished.result.get("request") == request:
            return Move(**finished.result["move"])
        move, changes = _move_plan(palace, ref, new_id, domain, new_domain)
        apply(palace, changes, f"palace mv {move.old_path} {move.new_path}", {"request": request, "move": move.as_dict()})
        if move.old_path.startswith(MEMORIES + "/"):
            _prune_folders(palace, (palace.root / move.old_path).parent)
        return move


def _move_plan(palace: Palace, ref: str, new_id: str | None, domain: str | None,
               new_domain: bool) -> tuple[Move, list[Change]]:
    """What a move does and every change it makes, planned and checked to read back; nothing written."""
    scan = palace.scan()
    names = palace.index.names()
    memory = palace.memory(ref, refresh=False)
    if not memory.path.startswith(MEMORIES + "/"):  # a vault's note: named by its file, renamed the vault's way
        from palace_cli.editing.rename import new_note_path, plan_rename_changes

        target_domain = palace.resolve_domain(domain, allow_new=True, insist=new_domain) if domain else None
        new_path = new_note_path(palace, memory, new_id, target_domain)
        renamed = plan_rename_changes(palace, memory, new_path, scan.memories.values(), names)
        moved_id = memory.id if not memory.derived_id else path_id(new_path)
        rewritten = [c.path for c in renamed.changes if c.path not in (memory.path, new_path)]
        move = Move(memory.id, moved_id, memory.path, new_path, rewritten, renamed.shared, renamed.kept)
        return move, renamed.changes
    new_id = (new_id or "").strip() or memory.id
    if not ID_PATTERN.match(new_id):
        raise UsageError(f"id {new_id!r} must be lowercase letters, digits, '.', '_' or '-'")
    if new_id != memory.id and new_id in scan.memories:
        raise PalaceError(f"id {new_id!r} is already used by {scan.memories[new_id].path}")
    parts = memory.path.split("/")  # memories/<domain>/[folders/]<name>.md
    target_domain = palace.resolve_domain(domain, allow_new=True, insist=new_domain) if domain else memory.domain
    name = f"{new_id}.md" if new_id != memory.id else parts[-1]
    new_path = "/".join([parts[0], target_domain, *parts[2:-1], name])
    if new_path == memory.path:
        raise UsageError(f"{memory.id} is already {memory.path}; give a new id or --domain")
    note_target(palace, new_path, new=True, source=memory.path)  # a clash, a link out: refused before planning
    id_changed = new_id != memory.id
    stem_changed = name != parts[-1]

    plans = _link_plans(scan, names, memory, new_id, id_changed, stem_changed)
    own_changes, own_renames = plans.pop(memory.path, (memory, {}, {}))[1:]
    if id_changed and not memory.derived_id:  # a note without `id:` takes its id from its new path
        previous = [i for i in memory.previous_ids if i != new_id] + [memory.id]
        own_changes = {**own_changes, "id": new_id, "previous_ids": list(dict.fromkeys(previous))}

    # Plan every write and check each result reads back before writing anything.
    writes = [_planned(palace, relpath, relpath, other, changes, renames)
              for relpath, (other, changes, renames) in sorted(plans.items())]
    moved = _planned(palace, memory.path, new_path, memory, own_changes, own_renames)
    changes = [creating(new_path, moved.after), *writes, Change(memory.path, moved.before, None)]
    return Move(memory.id, new_id, memory.path, new_path, [c.path for c in writes]), changes


def _link_plans(scan: Scan, names: Names, memory: Memory, new_id: str, id_changed: bool,
                stem_changed: bool) -> dict[str, tuple[Memory, dict, dict[str, str]]]:
    """For every note that links to `memory` by a name the move changes: (note, frontmatter changes, body renames)."""
    plans: dict[str, tuple[Memory, dict, dict[str, str]]] = {}
    for other in scan.memories.values():
        changes: dict = {}
        links = [new_id if _renamed(names, t, memory, id_changed, stem_changed, other.path) else t
                 for t in other.links]
        if links != other.links:
            changes["links"] = links
        for field_name in VERSION_FIELDS:
            ids = getattr(other, field_name)
            if id_changed and memory.id in ids:
                changes[field_name] = [new_id if i == memory.id else i for i in ids]
        renames = {t: new_id for t in other.body_links + other.property_links
                   if _renamed(names, t, memory, id_changed, stem_changed, other.path)}
        if changes or renames:
            plans[other.path] = (other, changes, renames)
    return plans


def _planned(palace: Palace, relpath: str, new_relpath: str, memory: Memory, changes: dict,
             renames: dict[str, str]) -> Change:
    """The change to a note (BOM and line ends kept), checked to parse at new_relpath; NoteError when it cannot
    be exact."""
    raw = current_bytes(palace, relpath)
    bom = b"\xef\xbb\xbf" if raw.startswith(b"\xef\xbb\xbf") else b""
    text = raw[len(bom):].decode("utf-8")
    new = _edited(text, memory, changes, renames)
    check_note_size(new, new_relpath)
    domain = palace.domain_of(new_relpath)
    try:
        read_text = new.replace("\r\n", "\n")
        parse_note(read_text, new_relpath, domain)
    except NoteError as exc:
        raise NoteError(relpath, f"cannot rename the links here without breaking the note ({exc.reason}); "
                                 "nothing was changed", exc.line) from None
    return Change(relpath, raw, bom + new.encode("utf-8"))


def review_count(palace: Palace, memory_id: str) -> int:
    """How many reviews of a memory the log holds (renamed ids followed)."""
    return Counter(r.id for r in ReviewLog(palace).read().reviews)[memory_id]
