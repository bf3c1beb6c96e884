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
from dataclasses import dataclass, replace

from palace_cli.core.disk import atomic_write, create_new
from palace_cli.core.layout import path_id, refuse_path_tricks
from palace_cli.core.links import BAD_LINK_CHARS, encoded_like, joined_path, note_links, property_links, renamed_target
from palace_cli.core.names import Names
from palace_cli.core.noteedit import apply_edits, check_note_size, edit_frontmatter
from palace_cli.core.notefile import load_frontmatter, parse_note, split_frontmatter
from palace_cli.core.notes import VERSION_FIELDS, Memory
from palace_cli.errors import Ambiguous, NoteError, PalaceError, UsageError
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
        """A wikilink's target (in the note at `source`) renamed in its own form; a bare name that another note
        would take after the move (a shared name) becomes the shortest path that names the note alone."""
        new = _wiki_target(written, self.memory, self.old_name, self.new_name, self.new_path)
        core = new.strip()
        if "/" in core or new == written:
            return new
        source = self.new_path if source == self.memory.path else source
        try:
            found = self.after.resolve(core, source=source)
        except Ambiguous:
            found = None
        if found is not None and found.memory.path == self.new_path:
            return new
        lead, trail = new[: len(new) - len(new.lstrip())], new[len(new.rstrip()):]
        suffix = core[-3:] if core.lower().endswith(".md") else ""
        return lead + self.after.link_name(self.after.paths[self.new_path], "name", source) + suffix + trail


def plan_rename(palace: Palace, names: Names, memories, memory: Memory, new_path: str) -> dict[str, str]:
    """path -> new text of every note a rename changes (the moved note under its old path); nothing written."""
    memories = sorted(memories, key=lambda m: m.path)
    rename = _Rename.of(names, memories, memory, new_path)
    new_id = memory.id if not memory.derived_id else path_id(new_path)
    texts: dict[str, str] = {}
    for other in memories:
        text = _read(palace, other.path)
        plain = text.replace("\r\n", "\n")
        yaml_text, body = _parts(plain, other.path)
        body_start = len(plain) - len(body)
        edits = _body_edits(rename, other, body)
        if other.path == memory.path and posixpath.dirname(new_path) != posixpath.dirname(memory.path):
            edits += _own_relative_edits(other, body, new_path, edits)
        edits = [(body_start + start, body_start + end, new) for start, end, new in edits]
        edits += _property_edits(rename, other, yaml_text, plain.find("\n") + 1)
        new = apply_edits(text, edits)  # offsets in the `\n` text: mapped back, every other byte kept
        changes = _frontmatter_changes(names, other, memory, rename.old_name, rename.new_name, new_id)
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


def rename_note(palace: Palace, memory: Memory, new_path: str, memories, names: Names) -> list[str]:
    """Move a vault note to new_path and rewrite the links to it; returns the other notes rewritten."""
    if new_path == memory.path:
        raise UsageError(f"{memory.path} already has that name")
    target = palace.root / new_path
    case_only = new_path.lower() == memory.path.lower()
    if os.path.lexists(target) and not case_only:
        raise PalaceError(f"{new_path} already exists")
    if not palace.rules.wanted(new_path):
        raise PalaceError(f"{new_path} would not be a note of this palace ([notes] include/exclude in palace.toml)")
    texts = plan_rename(palace, names, memories, memory, new_path)
    writes: list[tuple[str, bytes]] = []
    for relpath, text in sorted(texts.items()):
        writes.append((relpath, _checked(palace, relpath, new_path if relpath == memory.path else relpath, text)))
    moved = dict(writes).pop(memory.path, None)
    (palace.root / new_path).parent.mkdir(parents=True, exist_ok=True)
    if moved is None or case_only:
        os.rename(palace.root / memory.path, target)  # the bytes as they are (a case-only rename too)
        if moved is not None:
            atomic_write(target, moved)
    else:
        create_new(target, moved)  # never replaces a file that appeared meanwhile
        (palace.root / memory.path).unlink()
    for relpath, data in writes:
        if relpath != memory.path:
            atomic_write(palace.root / relpath, data)
    return [relpath for relpath, _ in writes if relpath != memory.path]


# ---- planning ---------------------------------------------------------------------------------------


def _read(palace: Palace, relpath: str) -> str:
    raw = (palace.root / relpath).read_bytes()
    return raw[3:].decode("utf-8") if raw.startswith(b"\xef\xbb\xbf") else raw.decode("utf-8")


def _names_it(names: Names, name: str, memory: Memory, source: str = "") -> bool:
    try:
        found = names.resolve(name, source=source)
    except Ambiguous:
        return False
    return found is not None and found.memory.path == memory.path and found.how in ("id", "path", "file")


def _body_edits(rename: _Rename, other: Memory, body: str) -> list[tuple[int, int, str]]:
    """(start, end, new text) in the body for every link of `other` that names the renamed note by its file."""
    edits = []
    for link in note_links(body, 1):
        name = link.name(other.path)
        if name.startswith("../") or not _names_it(rename.names, name, rename.memory, other.path):
            continue
        written = body[link.start:link.end]
        if link.form in ("wiki", "embed"):
            new = rename.wiki(written, other.path)
        else:
            bracketed = body[link.start - 1:link.start] == "<"  # `[x](<New name.md>)` holds a space as it is
            new = _path_target(written, other.path, rename.memory.path, rename.new_path, bracketed)
        if new != written:
            edits.append((link.start, link.end, new))
    return edits


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
    for link in property_links(yaml_text, meta):
        if not _names_it(rename.names, link.target, rename.memory, other.path):
            continue
        written = yaml_text[link.start:link.end]
        new = rename.wiki(written, other.path)
        if new != written:
            edits.append((yaml_start + link.start, yaml_start + link.end, new))
    return edits


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


def _frontmatter_changes(names: Names, other: Memory, memory: Memory, old_stem: str, new_stem: str,
                         new_id: str) -> dict:
    """Frontmatter `links` naming the note by its file, and version fields naming a derived id that changes."""
    changes: dict = {}
    links = [renamed_target(t, old_stem, new_stem) if _names_it(names, t, memory, other.path) and "/" not in t else t
             for t in other.links]
    if links != other.links:
        changes["links"] = links
    if new_id != memory.id:
        for field_name in VERSION_FIELDS:
            ids = getattr(other, field_name)
            if memory.id in ids:
                changes[field_name] = [new_id if i == memory.id else i for i in ids]
    return changes


def _checked(palace: Palace, relpath: str, new_relpath: str, text: str) -> bytes:
    """The bytes to write (BOM kept), checked to parse; NoteError when the result would not read."""
    raw = (palace.root / relpath).read_bytes()
    bom = b"\xef\xbb\xbf" if raw.startswith(b"\xef\xbb\xbf") else b""
    check_note_size(text, new_relpath)
    try:
        parse_note(text.replace("\r\n", "\n"), new_relpath, palace.domain_of(new_relpath))
    except NoteError as exc:
        raise NoteError(relpath, f"cannot rename the links here without breaking the note ({exc.reason}); "
                                 "nothing was changed", exc.line) from None
    return bom + text.encode("utf-8")
