"""Every write to a note: inside the palace, where palace reads, under the write lock, planned whole.

A command plans the bytes of every file it changes (a `Change`: what the file holds when planned, what it
will hold), then `apply` writes them. Each target is checked before the first byte (`note_target`): no write
leaves the palace through a link, none lands where palace would never read it (a hidden name, a folder palace
keeps for itself, a name the file system refuses), and none replaces a file palace did not plan to replace (a
name that differs only in case included: on a case-insensitive disk it is the same file). A file changed by
someone else since it was planned is left as it is and named. A command that changes several files writes a
journal first (editing/journal.py), so a killed process's work is finished by the next writer (`writing`).
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from palace_cli.core.disk import atomic_write, create_new, rename_in_place, synced_temps
from palace_cli.core.layout import BAD_NAME, BAD_NAME_MESSAGE, REVIEWS, SKIPPED_DIRS, refuse_path_tricks, within
from palace_cli.conversations import CONVERSATIONS
from palace_cli.core.noteedit import check_note_size, edit_frontmatter, edit_section
from palace_cli.core.notefile import decode_note, read_note_bytes
from palace_cli.errors import OutsidePalace, PalaceError, UsageError
from palace_cli.index.locks import write_lock
from palace_cli.palace import Palace

NAME_MAX = 255  # bytes in one file or folder name on Linux, macOS and Windows file systems


@dataclass
class Change:
    """One file a write changes, relative to the root: the bytes it held when planned (None: it did not exist)
    and will hold (None: removed). `source`: the same file under another name on a case-insensitive disk (a
    case-only rename), renamed rather than created."""

    path: str
    before: bytes | str | None  # or their sha256, as a journal keeps them
    after: bytes | None
    source: str = ""

    def holds_before(self, data: bytes | None) -> bool:
        """True when a file's bytes (None: absent) are what the change was planned from."""
        if isinstance(self.before, str):
            return digest(data) == self.before
        return data == self.before


class Unchanged(PalaceError):
    """Files a write left as they were because someone changed them since it planned them."""


def digest(data: bytes | None) -> str | None:
    """The sha256 of some bytes (None for a file that does not exist): how a journal remembers them."""
    return None if data is None else hashlib.sha256(data).hexdigest()


@contextmanager
def writing(palace: Palace):
    """Hold the write lock, having finished a write a killed process left half done; yields what was finished
    (a journal.Finished, or None)."""
    from palace_cli.editing.journal import finish

    with write_lock(palace.site):
        yield finish(palace)


# ---- where a write may land --------------------------------------------------------------------------------


def note_target(palace: Palace, relpath: str, new: bool = False, source: str = "",
                listing: dict | None = None, leaving: tuple[str, ...] = ()) -> Path:
    """The file a write to the note at `relpath` touches, checked: a name the disk takes, no link out of the
    palace or into a hidden folder, every folder on the way a folder; for a new note also a path palace reads
    as a note and no other file of that name in any case (`source`, the note being renamed, aside). `listing`
    keeps the folders read (a bulk write checks each folder once) and gains the new name; `leaving`: notes the
    same write removes (a rename's old name, which may differ from the new one only in case)."""
    refuse_path_tricks(relpath, "note path")
    for part in relpath.split("/"):
        if not part or part == ".":
            raise UsageError(f"{relpath!r} is not a note path")
        if len(part.encode("utf-8", "surrogateescape")) > NAME_MAX:
            raise UsageError(f"{part[:40]}…: a file name is at most {NAME_MAX} bytes; choose a shorter one")
        if BAD_NAME.search(part):
            raise UsageError(f"{relpath!r}: {BAD_NAME_MESSAGE}")
    if new:
        _read_as_a_note(palace, relpath)
    real = _resolved(palace, relpath)
    if new:
        _no_clash(palace, relpath, real, (source, *leaving), {} if listing is None else listing)
    return real


def _read_as_a_note(palace: Palace, relpath: str) -> None:
    """Refuse a new note where the walk would never read it: a hidden name, palace's own folders, outside the
    [notes] rules, or no domain."""
    parts = relpath.split("/")
    if any(part.startswith(".") for part in parts):
        raise UsageError(f"{relpath}: a name starting with '.' is hidden; palace would never read the note")
    if palace.rules.wanted(relpath) and palace.domain_of(relpath):
        return
    own = {REVIEWS: "the study log", CONVERSATIONS: "imported conversations"}
    generated = palace.config.notes.index_folder or "index"
    own[generated.split("/")[0]] = "the generated index files"
    if parts[0] in own and (palace.adopted or parts[0] != "memories"):
        why = f"palace keeps {parts[0]}/ for {own[parts[0]]}"
    elif palace.adopted:
        why = "the [notes] include and exclude globs of palace.toml leave it out"
    else:
        why = "notes live in memories/<domain>/"
    raise PalaceError(f"{relpath} would not be read as a note ({why}); nothing was written")


def _resolved(palace: Palace, relpath: str) -> Path:
    """root/relpath with every existing link on the way followed, refused when one leads out of the palace (or
    out of memories/), or into a hidden folder, or when a folder on the way is a file."""
    root = os.path.realpath(palace.root)
    base = palace.rules.base
    parts = relpath.split("/")
    current = root
    for number, part in enumerate(parts, 1):
        candidate = os.path.join(current, part)
        if not os.path.lexists(candidate):
            return Path(os.path.join(candidate, *parts[number:]))
        shown = "/".join(parts[:number])
        real = os.path.realpath(candidate)
        if not within(real, root) or (base and parts[0] == base and number > 1
                                      and not within(real, os.path.realpath(os.path.join(root, base)))):
            raise OutsidePalace(f"{shown} leads outside the palace{' (memories/)' if base else ''} through a "
                                "symlink; nothing was written")
        inside = os.path.relpath(real, root).split(os.sep)
        if any(p.startswith(".") or p in SKIPPED_DIRS for p in inside):
            raise OutsidePalace(f"{shown} leads into a hidden folder ({'/'.join(inside)}); nothing was written")
        if number < len(parts) and not os.path.isdir(real):
            raise PalaceError(f"{shown} is a file, not a folder; a note cannot go inside it")
        current = real
    return Path(current)


def _no_clash(palace: Palace, relpath: str, real: Path, sources: tuple[str, ...], listing: dict) -> None:
    """Refuse a new file when another file has its name, or its name in another case (`sources`, files being
    renamed to it, aside)."""
    folder = str(real.parent)
    if folder not in listing:
        names: dict[str, list[str]] = {}
        try:
            for name in os.listdir(folder):
                names.setdefault(name.casefold(), []).append(name)
        except OSError:
            pass  # a folder still to be made holds nothing
        listing[folder] = names
    renamed = [palace.root / source for source in sources if source and os.path.lexists(palace.root / source)]
    for name in listing[folder].get(real.name.casefold(), []):
        other = real.parent / name
        if any(os.path.samefile(other, path) for path in renamed):
            continue  # the note being renamed: a change of case (one file on a case-insensitive disk, two elsewhere)
        clash = "" if name == real.name else f" as {name} (names that differ only in case are one file on a " \
                                              "case-insensitive disk)"
        raise PalaceError(f"{relpath} already exists{clash}; nothing was written")
    listing[folder].setdefault(real.name.casefold(), []).append(real.name)


# ---- planning ----------------------------------------------------------------------------------------------


def current_bytes(palace: Palace, relpath: str) -> bytes:
    """The bytes of an existing note as a write plans from them (size-capped, regular files only)."""
    return read_note_bytes(note_target(palace, relpath), relpath)


def replacing(palace: Palace, relpath: str, after: bytes | str) -> Change:
    """A change that gives an existing note new bytes."""
    data = after.encode("utf-8") if isinstance(after, str) else after
    check_note_size(data, relpath)
    return Change(relpath, current_bytes(palace, relpath), data)


def creating(relpath: str, after: bytes | str, source: str = "") -> Change:
    """A change that writes a new note (never over an existing file)."""
    data = after.encode("utf-8") if isinstance(after, str) else after
    check_note_size(data, relpath)
    return Change(relpath, None, data, source)


def removing(palace: Palace, relpath: str) -> Change:
    """A change that removes a note."""
    return Change(relpath, current_bytes(palace, relpath), None)


def edited(palace: Palace, relpath: str, edit) -> Change | None:
    """The change `edit` (text -> new text) makes to a note, planned from its bytes as they are (a BOM and the
    bytes edit leaves alone kept); None when the text stays the same."""
    raw = current_bytes(palace, relpath)
    bom = b"\xef\xbb\xbf" if raw.startswith(b"\xef\xbb\xbf") else b""
    text = decode_note(raw[len(bom):], relpath)
    new = edit(text)
    if new == text:
        return None
    data = bom + new.encode("utf-8")
    check_note_size(data, relpath)
    return Change(relpath, raw, data)


# ---- writing -----------------------------------------------------------------------------------------------


def apply(palace: Palace, changes: list[Change], what: str, result: dict | None = None, *, journal: bool = True,
          threads: int = 1, strict: bool = True) -> list[str]:
    """Write planned changes under the write lock: every target checked first, a journal when there are several
    (unless journal=False: each change stands alone), then each file in order. Returns the files left as they
    were (someone changed them since they were planned); with strict, raises Unchanged naming them instead."""
    from palace_cli.editing.journal import clear, record

    changes = [c for c in changes if c.before != c.after]
    listing: dict = {}
    leaving = tuple(c.path for c in changes if c.after is None)
    with writing(palace):
        targets = [note_target(palace, change.path, new=change.before is None and change.after is not None,
                               source=change.source, listing=listing, leaving=leaving) for change in changes]
        logged = journal and len(changes) > 1
        if logged:
            record(palace, what, changes, result)
        staged, made = _staged(changes, targets) if threads == 1 else ({}, [])
        try:
            if threads > 1:
                with ThreadPoolExecutor(max_workers=threads) as pool:
                    left = [path for path in pool.map(lambda c: put(palace, c), changes) if path]
            else:
                left = [path for path in (put(palace, c, staged.get(c.path)) for c in changes) if path]
        except BaseException:
            for folder in reversed(made):
                _rmdir(folder)
            raise
        finally:
            for tmp in staged.values():
                Path(tmp).unlink(missing_ok=True)  # linked and removed by create_new, or not used (holds another)
        if logged:
            clear(palace)
    if left and strict:
        raise Unchanged(f"{what}: left as they were, changed by someone else since palace read them: "
                        f"{', '.join(left)}")
    return left


def _staged(changes: list[Change], files: list[Path]) -> tuple[dict[str, str], list[Path]]:
    """For a write of several new notes (`files`: where each change goes): their temp files written and flushed to
    the disk together, by path (fsynced at once, not one after the other); and the folders made for them. Empty for fewer than
    two."""
    pairs = [(c, f) for c, f in zip(changes, files) if c.before is None and c.after is not None and not c.source]
    if len(pairs) < 2:
        return {}, []
    new, targets = [c for c, _ in pairs], [f for _, f in pairs]
    made = [folder for path in dict.fromkeys(t.parent for t in targets) for folder in _make_folders(path)]
    try:
        temps = synced_temps([(target, c.after) for target, c in zip(targets, new)])
    except BaseException:
        for folder in reversed(made):
            _rmdir(folder)
        raise
    return {c.path: tmp for c, tmp in zip(new, temps)}, made


def put(palace: Palace, change: Change, staged: str | None = None) -> str:
    """Write one change when the file still holds what was planned (or already holds the result); returns its
    path when it was left because it holds something else, "" otherwise. `staged`: a new note's temp file,
    already on the disk (`_staged`), linked into place; removed by the caller when not used."""
    path = note_target(palace, change.path)
    now = _now(path)
    if now == change.after and (not change.source or _exact_name(path)):
        return ""
    if change.source:
        return _rename(palace, change, path)
    if not change.holds_before(now):
        return change.path
    if change.after is None:
        (palace.root / change.path).unlink()  # a note that is a link: the link goes, not what it points at
        return ""
    if change.before is not None:
        atomic_write(path, change.after)
        return ""
    made = _make_folders(path.parent)
    try:
        create_new(path, change.after, staged)
    except FileExistsError:
        return change.path
    except BaseException:
        for folder in reversed(made):
            _rmdir(folder)
        raise
    return ""


def _rename(palace: Palace, change: Change, path: Path) -> str:
    """A case-only rename on a case-insensitive disk (`before`: the bytes of the file under its old name): the
    file renamed in place, then given its new bytes."""
    source = palace.root / change.source
    if not _exact_name(path):
        if not change.holds_before(_now(source)):
            return change.path
        rename_in_place(source, path)
    if _now(path) != change.after:
        atomic_write(path, change.after)
    return ""


def _now(path: Path) -> bytes | None:
    try:
        return path.read_bytes() if os.path.lexists(path) else None
    except OSError:
        return None


def _exact_name(path: Path) -> bool:
    """True when a folder lists the file under exactly this name (not only in another case)."""
    try:
        return path.name in os.listdir(path.parent)
    except OSError:
        return False


def _make_folders(folder: Path) -> list[Path]:
    """Make a folder and the missing ones above it; returns those made, outermost first."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        made.mkdir(exist_ok=True)
    return list(reversed(missing))


def _rmdir(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass  # someone else wrote into it meanwhile


# ---- one-note edits ----------------------------------------------------------------------------------------


def write_note(palace: Palace, relpath: str, text: str | bytes, what: str = "write") -> None:
    """Give an existing note new bytes (str: encoded as UTF-8), under the write lock."""
    with writing(palace):
        apply(palace, [replacing(palace, relpath, text)], what)


def set_fields(palace: Palace, relpath: str, changes: dict, what: str = "edit") -> bool:
    """Set frontmatter fields of a note in place (None removes one), every other byte kept; True when it changed."""
    with writing(palace):
        change = edited(palace, relpath, lambda text: edit_frontmatter(text, changes, relpath))
        if change is not None:
            apply(palace, [change], what)
        return change is not None


def set_section(palace: Palace, relpath: str, section: str, body: str, what: str = "edit") -> bool:
    """Replace the text of one `## section` of a note, every other byte kept; True when it changed."""
    with writing(palace):
        change = edited(palace, relpath, lambda text: edit_section(text, section, body, relpath))
        if change is not None:
            apply(palace, [change], what)
        return change is not None
