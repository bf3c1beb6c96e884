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
from bisect import bisect_left

from palace_cli.core.layout import path_id, refuse_path_tricks
from palace_cli.core.markdown import BAD_LINK_CHARS, encoded_like, joined_path, note_links, renamed_target
from palace_cli.core.names import Names
from palace_cli.core.noteedit import check_note_size, edit_frontmatter
from palace_cli.core.notefile import parse_note, split_frontmatter
from palace_cli.core.notes import VERSION_FIELDS, Memory
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


def plan_rename(palace: Palace, names: Names, memories, memory: Memory, new_path: str) -> dict[str, str]:
    """path -> new text of every note a rename changes (the moved note under its old path); nothing written."""
    old_stem = posixpath.basename(memory.path)[:-3]
    new_stem = posixpath.basename(new_path)[:-3]
    new_id = memory.id if not memory.derived_id else path_id(new_path)
    texts: dict[str, str] = {}
    for other in sorted(memories, key=lambda m: m.path):
        text = _read(palace, other.path)
        plain = text.replace("\r\n", "\n")
        body_start = len(plain) - len(_body(plain, other.path))
        edits = _body_edits(names, other, plain[body_start:], memory, old_stem, new_stem, new_path)
        if other.path == memory.path and posixpath.dirname(new_path) != posixpath.dirname(memory.path):
            edits += _own_relative_edits(other, plain[body_start:], new_path, edits)
        new = text
        if edits:
            shift = _crlf_positions(text)  # edits are offsets in the `\n` text: mapped back, every other byte kept
            for start, end, replacement in sorted(edits, reverse=True):
                start, end = body_start + start, body_start + end
                start, end = start + bisect_left(shift, start), end + bisect_left(shift, end)
                new = new[:start] + replacement + new[end:]
        changes = _frontmatter_changes(names, other, memory, old_stem, new_stem, new_id)
        if changes:
            new = edit_frontmatter(new, changes, other.path)
        if new != text:
            texts[other.path] = new
    return texts


def _crlf_positions(text: str) -> list[int]:
    """Where each CRLF's `\n` is in the text with CRLFs made `\n` (sorted): the shift of an offset back."""
    out, removed = [], 0
    for index in (i for i, ch in enumerate(text) if ch == "\r" and text[i + 1 : i + 2] == "\n"):
        out.append(index - removed)
        removed += 1
    return out


def _body(text: str, shown: str) -> str:
    """The body of a note's text (after its frontmatter, when it has one)."""
    try:
        return split_frontmatter(text, shown)[1]
    except NoteError:
        return text


def plan_rename_changes(palace: Palace, memory: Memory, new_path: str, memories, names: Names) -> list[Change]:
    """Every change a rename of a vault note makes, checked to read back: the note at its new path, the notes
    whose links name it, then the old file removed; nothing written. Refused when another file has the new name
    in any case, when the new path is not read as a note, or when its id would be another note's."""
    if new_path == memory.path:
        raise UsageError(f"{memory.path} already has that name")
    target = note_target(palace, new_path, new=True, source=memory.path)
    same_file = os.path.lexists(target) and os.path.samefile(target, palace.root / memory.path)
    new_id = memory.id if not memory.derived_id else path_id(new_path)
    taken = next((m for m in memories if m.id == new_id and m.path != memory.path), None)
    if taken is not None:
        raise PalaceError(f"{new_path} would have the id {new_id!r}, which {taken.path} has; choose another name")
    texts = plan_rename(palace, names, memories, memory, new_path)
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
    return first + list(checked.values()) + last


# ---- planning ---------------------------------------------------------------------------------------


def _read(palace: Palace, relpath: str) -> str:
    raw = (palace.root / relpath).read_bytes()
    return raw[3:].decode("utf-8") if raw.startswith(b"\xef\xbb\xbf") else raw.decode("utf-8")


def _names_it(names: Names, name: str, memory: Memory) -> bool:
    try:
        found = names.resolve(name)
    except Ambiguous:
        return False
    return found is not None and found.memory.path == memory.path and found.how in ("id", "path", "file")


def _body_edits(names: Names, other: Memory, body: str, memory: Memory, old_stem: str, new_stem: str,
                new_path: str) -> list[tuple[int, int, str]]:
    """(start, end, new text) in the body for every link of `other` that names the renamed note by its file."""
    edits = []
    for link in note_links(body, 1):
        name = link.name(other.path)
        if name.startswith("../") or not _names_it(names, name, memory):
            continue
        written = body[link.start:link.end]
        if link.form in ("wiki", "embed"):
            new = _wiki_target(written, memory, old_stem, new_stem, new_path)
        else:
            new = _path_target(written, other.path, memory.path, new_path)
        if new != written:
            edits.append((link.start, link.end, new))
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


def _path_target(written: str, source: str, old_path: str, new_path: str) -> str:
    """A Markdown link's (or a reference definition's) path to the renamed note, in its own form: the same way up
    from the linking note (or from the root for `/...`), `%20` where it had them."""
    if posixpath.dirname(old_path) == posixpath.dirname(new_path) and "/" not in written.rstrip("/").split("/")[-1]:
        head, _, last = written.rpartition("/")
        new_last = encoded_like(last, posixpath.basename(new_path))
        if not last.lower().endswith(".md") and new_last.lower().endswith(".md"):
            new_last = new_last[:-3]
        return f"{head}/{new_last}" if head else new_last
    if written.startswith("/"):
        plain = "/" + new_path
    else:
        plain = posixpath.relpath(new_path, posixpath.dirname(source) or ".")
        if written.startswith("./") and not plain.startswith("."):
            plain = "./" + plain
    return encoded_like(written, plain)


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
        new = encoded_like(written, plain)
        if new != written:
            edits.append((link.start, link.end, new))
    return edits


def _frontmatter_changes(names: Names, other: Memory, memory: Memory, old_stem: str, new_stem: str,
                         new_id: str) -> dict:
    """Frontmatter `links` naming the note by its file, and version fields naming a derived id that changes."""
    changes: dict = {}
    links = [renamed_target(t, old_stem, new_stem) if _names_it(names, t, memory) and "/" not in t else t
             for t in other.links]
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
