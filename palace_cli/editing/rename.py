"""Renames that keep a vault's naming: `palace mv "Garden/Watering schedule.md" "Irrigation plan"`.

A note outside memories/ is named by its file, as Obsidian, Foam and zk name notes: a rename gives it a
new file name (and, with a folder, a new place), and every link to it is rewritten in the form it was
written in: a wikilink keeps its label, heading, block and folder prefix, its `.md` and its case style
(`[[watering schedule]]` becomes `[[irrigation plan]]`); a Markdown link keeps its `%20`s and stays
relative to its note. Only the bytes of those links change, so renaming back gives every file the
bytes it had. The note's own bytes move as they are (a relative Markdown link in it is rewritten only
when it moves to another folder). Every write is planned and checked before the first byte is written.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field, replace
from functools import cached_property

from palace_cli.core.layout import path_id, refuse_path_tricks
from palace_cli.core.links import BAD_LINK_CHARS, encoded_like, joined_path, note_links, property_links, renamed_target
from palace_cli.core.names import Names
from palace_cli.core.noteedit import apply_edits, check_note_size, edit_frontmatter
from palace_cli.core.notefile import load_frontmatter, parse_note, split_frontmatter
from palace_cli.core.notes import VERSION_FIELDS, Memory
from palace_cli.core.text import normalize
from palace_cli.errors import Ambiguous, NoteError, PalaceError, UsageError
from palace_cli.editing.writes import Change, creating, current_bytes, note_target
from palace_cli.palace import Palace


def new_note_path(palace: Palace, memory: Memory, new_name: str | None, domain: str | None) -> str:
    """Where a vault note goes: `new_name` in its folder (a name), or at a path from the root (`Archive/Plan`);
    `domain` moves it under another top folder. `.md` is added when missing."""
    folder, name = posixpath.split(memory.path)
    if new_name:
        new_name = new_name.strip()
        refuse_path_tricks(new_name, "new name")
        new_name = new_name[:-3] if new_name.lower().endswith(".md") else new_name
        if not new_name.rsplit("/", 1)[-1].strip() or BAD_LINK_CHARS.search(new_name.rsplit("/", 1)[-1]):
            raise UsageError(f"{new_name!r} cannot be a note's name: no `[`, `]`, `|`, `#`, `^` or control character")
        folder, name = (posixpath.split(new_name) if "/" in new_name else (folder, new_name))
        name += ".md"
    if domain:
        parts = folder.split("/") if folder else []
        rest = parts[1:] if parts and palace.domain_of(memory.path) == parts[0] else parts
        folder = "/".join([domain, *rest]) if domain != palace.rules.root_domain else "/".join(rest)
    return posixpath.join(folder, name) if folder else name


@dataclass
class _Rename:
    """What rewriting the links of one rename needs: the names before it and after it, the note, its new path."""

    names: Names
    after: Names
    memory: Memory
    new_path: str
    kept_in: set[str] = field(default_factory=set)  # notes with links to other notes written again (_kept_edits)

    @classmethod
    def of(cls, names: Names, memories, memory: Memory, new_path: str) -> _Rename:
        new_id = memory.id if not memory.derived_id else path_id(new_path)
        moved = [replace(m, path=new_path, id=new_id) if m.path == memory.path else m for m in memories]
        return cls(names, Names(moved), memory, new_path)

    @property
    def old_name(self) -> str:
        return posixpath.basename(self.memory.path)[:-3]

    @property
    def new_name(self) -> str:
        return posixpath.basename(self.new_path)[:-3]

    def wiki(self, written: str, source: str) -> str:
        """A wikilink's target (in the note at `source`) renamed in its own form; where the new name is another
        note's too, or the form would name another note after the move, the shortest path that names the note
        alone (`[[Trial/Keyboard Shortcuts]]`: Obsidian writes a path where a name is shared, and no rule of any
        vault then reads it as the other note)."""
        new = _wiki_target(written, self.memory, self.old_name, self.new_name, self.new_path)
        core = new.strip()
        source = self.new_path if source == self.memory.path else source
        moved = self.after.paths[self.new_path]
        if _names_alone(self.after, core, source, moved):
            return new
        lead, trail = new[: len(new) - len(new.lstrip())], new[len(new.rstrip()):]
        name = self.after.link_name(moved, "name", source)
        suffix = core[-3:] if core.lower().endswith(".md") and not name.lower().endswith(".md") else ""
        styled = name.rsplit("/", 1)[0] + "/" + core.rsplit("/", 1)[-1] if "/" in name and not suffix else ""
        if styled and not styled.lower().endswith(".md") and _names_alone(self.after, styled, source, moved):
            return lead + styled + trail  # the folder added, the name in the case style it was written in
        return lead + name + suffix + trail

    @cached_property
    def shared(self) -> list[str]:
        """The paths of the other notes whose file name the note takes (`Keyboard Shortcuts.md` for a move to
        `Trial/Keyboard Shortcuts.md`)."""
        stem = normalize(self.new_name)
        return sorted(p for p, m in self.names.paths.items()
                      if p != self.memory.path and normalize(posixpath.basename(p)[:-3]) == stem)

    def kept(self, written: str, form: str, named: Memory, source: str, bracketed: bool) -> str:
        """A link that named `named` (another note) before the rename, written again to name it after: the
        shortest path for a wikilink, the path from its note (or from the root for `/...`) for a Markdown link."""
        if form in ("wiki", "embed", "property"):
            core = written.strip()
            lead, trail = written[: len(written) - len(written.lstrip())], written[len(written.rstrip()):]
            name = self.after.link_name(named, "name", source)
            suffix = core[-3:] if core.lower().endswith(".md") and not name.lower().endswith(".md") else ""
            return lead + name + suffix + trail
        plain = "/" + named.path if written.startswith("/") else posixpath.relpath(named.path,
                                                                                   posixpath.dirname(source) or ".")
        if not written.split("#", 1)[0].lower().endswith(".md"):
            plain = plain[:-3]
        return encoded_like(written, plain, bracketed)


def plan_rename(palace: Palace, rename: _Rename, memories) -> dict[str, str]:
    """path -> new text of every note a rename changes (the moved note under its old path); nothing written."""
    memory, new_path = rename.memory, rename.new_path
    new_id = memory.id if not memory.derived_id else path_id(new_path)
    texts: dict[str, str] = {}
    for other in memories:
        text = _read(palace, other.path)
        plain = text.replace("\r\n", "\n")
        yaml_text, body = _parts(plain, other.path)
        body_start = len(plain) - len(body)
        edits = _body_edits(rename, other, body)
        edits = [(body_start + start, body_start + end, new) for start, end, new in edits]
        edits += _property_edits(rename, other, yaml_text, plain.find("\n") + 1)
        new = apply_edits(text, edits)  # offsets in the `\n` text: mapped back, every other byte kept
        changes = _frontmatter_changes(rename, other, new_id)
        if changes:
            new = edit_frontmatter(new, changes, other.path)
        if new != text:
            texts[other.path] = new
    return texts


def _parts(text: str, shown: str) -> tuple[str, str]:
    """The frontmatter's YAML and the body of a note's text (no YAML and the whole text without a frontmatter)."""
    try:
        return split_frontmatter(text, shown)[:2]
    except NoteError:
        return "", text


@dataclass
class Renamed:
    """A rename planned: its changes (the note at its new path, the notes whose links change, the old file
    removed), the other notes whose file name the note takes, and the notes whose links to those were written
    again so that the new namesake does not take them."""

    changes: list[Change]
    shared: list[str]
    kept: list[str]


def plan_rename_changes(palace: Palace, memory: Memory, new_path: str, memories, names: Names) -> Renamed:
    """Every change a rename of a vault note makes, checked to read back; nothing written. Refused when another
    file has the new name in any case, when the new path is not read as a note, or when its id would be another
    note's."""
    if new_path == memory.path:
        raise UsageError(f"{memory.path} already has that name")
    target = note_target(palace, new_path, new=True, source=memory.path)
    same_file = os.path.lexists(target) and os.path.samefile(target, palace.root / memory.path)
    new_id = memory.id if not memory.derived_id else path_id(new_path)
    taken = next((m for m in memories if m.id == new_id and m.path != memory.path), None)
    if taken is not None:
        raise PalaceError(f"{new_path} would have the id {new_id!r}, which {taken.path} has; choose another name")
    memories = sorted(memories, key=lambda m: m.path)
    rename = _Rename.of(names, memories, memory, new_path)
    texts = plan_rename(palace, rename, memories)
    checked = {relpath: _checked(palace, relpath, new_path if relpath == memory.path else relpath, text)
               for relpath, text in sorted(texts.items())}
    raw = current_bytes(palace, memory.path)
    moved = checked.pop(memory.path, None)
    moved = raw if moved is None else moved.after
    if same_file:  # a change of case on a case-insensitive disk: one file, renamed in place
        first = [Change(new_path, raw, moved, source=memory.path)]
    else:
        first = [creating(new_path, moved)]
    last = [] if same_file else [Change(memory.path, raw, None)]
    return Renamed(first + list(checked.values()) + last, rename.shared, sorted(rename.kept_in))


# ---- planning ---------------------------------------------------------------------------------------


def _read(palace: Palace, relpath: str) -> str:
    raw = (palace.root / relpath).read_bytes()
    return raw[3:].decode("utf-8") if raw.startswith(b"\xef\xbb\xbf") else raw.decode("utf-8")


def _named(names: Names, target: str, source: str) -> Memory | None:
    """The note a link target in the note at `source` names; None when none, or several, do."""
    try:
        found = names.resolve(target, source=source)
    except Ambiguous:
        return None
    return found.memory if found is not None else None


def _names_alone(names: Names, target: str, source: str, memory: Memory) -> bool:
    """True when a link target in the note at `source` names `memory` however a vault tool reads a name several
    notes share: by palace's rule (the linking note's folder first: Obsidian's) and by the shortest path from
    the root alone (as some tools, and readers, take a bare name)."""
    for where in (source, ""):
        try:
            found = names.resolve(target, source=where)
        except Ambiguous:
            return False
        if found is None or found.memory is not memory:
            return False
        if not found.shared:
            return True
    return True


def _names_it(names: Names, name: str, memory: Memory, source: str = "") -> bool:
    try:
        found = names.resolve(name, source=source)
    except Ambiguous:
        return False
    return found is not None and found.memory.path == memory.path and found.how in ("id", "path", "file")


def _kept_edits(rename: _Rename, other: Memory, links, text: str, done) -> list[tuple[int, int, str]]:
    """(start, end, new text) for every link of `other` (in `text`) that named another note before the rename and
    would name another, or none, after it (the new name taking a bare link by Obsidian's rule, or a file name
    taking a link by alias or subject): written again so that it names what it named. A rename never changes
    which note a link names."""
    taken = {(start, end) for start, end, _ in done}
    after_source = rename.new_path if other.path == rename.memory.path else other.path
    edits = []
    for link in links:
        if (link.start, link.end) in taken or link.file:
            continue
        before = _named(rename.names, link.name(other.path), other.path)
        if before is None or before.path == rename.memory.path:
            continue
        if _named(rename.after, link.name(after_source), after_source) is rename.after.paths.get(before.path):
            continue
        written = text[link.start:link.end]
        new = rename.kept(written, link.form, before, after_source, text[link.start - 1:link.start] == "<")
        if new != written:
            edits.append((link.start, link.end, new))
            rename.kept_in.add(other.path)
    return edits


def _body_edits(rename: _Rename, other: Memory, body: str) -> list[tuple[int, int, str]]:
    """(start, end, new text) in the body for every link of `other` that names the renamed note by its file."""
    edits = []
    links = note_links(body, 1)
    for link in links:
        name = link.name(other.path)
        if name.startswith("../") or not _names_it(rename.names, name, rename.memory, other.path):
            continue
        written = body[link.start:link.end]
        if link.form in ("wiki", "embed"):
            new = rename.wiki(written, other.path)
        else:
            bracketed = body[link.start - 1:link.start] == "<"  # `[x](<New name.md>)` holds a space as it is
            new = _path_target(written, other.path, rename.memory.path, rename.new_path, bracketed)
        edits.append((link.start, link.end, new))
    if other.path == rename.memory.path and posixpath.dirname(rename.new_path) != posixpath.dirname(other.path):
        edits += _own_relative_edits(other, body, rename.new_path, edits)
    edits += _kept_edits(rename, other, [link for link in links if not link.name(other.path).startswith("../")],
                         body, edits)
    return [(start, end, new) for start, end, new in edits if new != body[start:end]]


def _property_edits(rename: _Rename, other: Memory, yaml_text: str, yaml_start: int) -> list[tuple[int, int, str]]:
    """(start, end, new text) in the note's text for every frontmatter property link (`up: "[[Old]]"`) that names
    the renamed note by its file: only the target's bytes, the YAML's quoting kept."""
    if "[[" not in yaml_text:
        return []
    try:
        meta = load_frontmatter(yaml_text, other.path)
    except NoteError:
        return []
    edits = []
    links = property_links(yaml_text, meta)
    for link in links:
        if _names_it(rename.names, link.target, rename.memory, other.path):
            edits.append((link.start, link.end, rename.wiki(yaml_text[link.start:link.end], other.path)))
    edits += _kept_edits(rename, other, links, yaml_text, edits)
    return [(yaml_start + start, yaml_start + end, new) for start, end, new in edits
            if new != yaml_text[start:end]]


def _wiki_target(written: str, memory: Memory, old_stem: str, new_stem: str, new_path: str) -> str:
    """A wikilink's target renamed in its own form: a bare name, a name with `.md`, a path (a folder prefix, kept
    while the note stays in its folder, else the new folder from the root)."""
    lead = written[: len(written) - len(written.lstrip())]
    trail = written[len(written.rstrip()):]
    core = written.strip()
    suffix = core[-3:] if core.lower().endswith(".md") else ""
    core = core[: len(core) - len(suffix)]
    if "/" not in core:
        if core == memory.id and memory.derived_id:
            return lead + path_id(new_path) + suffix + trail
        return lead + renamed_target(core, old_stem, new_stem) + suffix + trail
    folder, stem = core.rsplit("/", 1)
    if posixpath.dirname(memory.path) != posixpath.dirname(new_path):
        folder = posixpath.dirname(new_path)
    return lead + (f"{folder}/" if folder else "") + renamed_target(stem, old_stem, new_stem) + suffix + trail


def _path_target(written: str, source: str, old_path: str, new_path: str, bracketed: bool = False) -> str:
    """A Markdown link's (or a reference definition's) path to the renamed note, in its own form: the same way up
    from the linking note (or from the root for `/...`), `%20` where it had them (or where a bare path needs)."""
    if posixpath.dirname(old_path) == posixpath.dirname(new_path) and "/" not in written.rstrip("/").split("/")[-1]:
        head, _, last = written.rpartition("/")
        new_last = encoded_like(last, posixpath.basename(new_path), bracketed)
        if not last.lower().endswith(".md") and new_last.lower().endswith(".md"):
            new_last = new_last[:-3]
        return f"{head}/{new_last}" if head else new_last
    if written.startswith("/"):
        plain = "/" + new_path
    else:
        plain = posixpath.relpath(new_path, posixpath.dirname(source) or ".")
        if written.startswith("./") and not plain.startswith("."):
            plain = "./" + plain
    return encoded_like(written, plain, bracketed)


def _own_relative_edits(memory: Memory, body: str, new_path: str, done: list) -> list[tuple[int, int, str]]:
    """The moved note's own relative Markdown links, pointed from its new folder at what they pointed at."""
    taken = {(start, end) for start, end, _ in done}
    edits = []
    for link in note_links(body, 1):
        if link.form in ("wiki", "embed") or (link.start, link.end) in taken:
            continue
        written = body[link.start:link.end]
        if written.startswith("/"):
            continue
        target = joined_path(memory.path, link.target)
        plain = posixpath.relpath(target, posixpath.dirname(new_path) or ".")
        new = encoded_like(written, plain, body[link.start - 1:link.start] == "<")
        if new != written:
            edits.append((link.start, link.end, new))
    return edits


def _frontmatter_changes(rename: _Rename, other: Memory, new_id: str) -> dict:
    """Frontmatter `links` naming the note by its file (or naming another note the new name would take), and
    version fields naming a derived id that changes."""
    changes: dict = {}
    memory, source = rename.memory, (rename.new_path if other.path == rename.memory.path else other.path)
    links = []
    for target in other.links:
        named = _named(rename.names, target, other.path)
        if _names_it(rename.names, target, memory, other.path):
            target = rename.wiki(target, other.path)
        elif named is not None and _named(rename.after, target, source) is not rename.after.paths.get(named.path):
            target = rename.kept(target, "wiki", named, source, False)
            rename.kept_in.add(other.path)
        links.append(target)
    if links != other.links:
        changes["links"] = links
    if new_id != memory.id:
        for field_name in VERSION_FIELDS:
            ids = getattr(other, field_name)
            if memory.id in ids:
                changes[field_name] = [new_id if i == memory.id else i for i in ids]
    return changes


def _checked(palace: Palace, relpath: str, new_relpath: str, text: str) -> Change:
    """The change to write (BOM kept), checked to parse; NoteError when the result would not read."""
    raw = current_bytes(palace, relpath)
    bom = b"\xef\xbb\xbf" if raw.startswith(b"\xef\xbb\xbf") else b""
    check_note_size(text, new_relpath)
    try:
        parse_note(text.replace("\r\n", "\n"), new_relpath, palace.domain_of(new_relpath))
    except NoteError as exc:
        raise NoteError(relpath, f"cannot rename the links here without breaking the note ({exc.reason}); "
                                 "nothing was changed", exc.line) from None
    return Change(relpath, raw, bom + text.encode("utf-8"))
