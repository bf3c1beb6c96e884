"""Writing imported sessions into a palace: idempotent, append-only for grown sessions, never over a hand edit.

Each session file carries `imported: {from, turns, record, note}`: how many of the source's turns
were imported, a hash of those turns as the source gave them (`record`), and a hash of the file as
last written whole (`note`). On re-import:

- the source's first `turns` turns still hash to `record`: the source only grew. Its new turns are
  appended; nothing else is touched, whatever the person changed in the file (edits, deletions).
  No new turns: nothing is written at all.
- they do not (the source changed turns it had given before: a regenerated answer, an edited
  ChatGPT branch): if the file still hashes to `note`, nobody edited it, and it is rewritten to
  the source's turns (turns only the file has are kept in place), and the turns it replaced are
  reported. If it was edited, every turn that differs, or that the source has and the file lacks,
  is a conflict and the file is left alone.
- the file came from another source (its stamp's `from`) and this one has other text under the same
  turn ids: it is another conversation with the same id, kept apart as a new session.

Every file written whole has its frontmatter read back first: one that would not read back as its
session is refused and reported, never written to come back as a duplicate.

A source file a reader can read the tail of (a Claude Code transcript) leaves a `resume` record in the stamp
(chats/resume.py): the next import reads only what was appended after it, appends those turns in place and carries
`record` and `note` on over them (they hash turns one after another), never reading the file's turns again.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple

from palace_cli.core.noteedit import edit_frontmatter
from palace_cli.core.disk import atomic_write
from palace_cli.core.layout import confined
from palace_cli.conversations.model import ReadProblem, Session, Turn, participants_of
from palace_cli.core.text import slug
from palace_cli.conversations.sessionfile import (CONVERSATIONS, MAX_SESSION_BYTES, append_turns, carried, load_header,
                                                  load_session, note_holds, parse_header, record_holds, render_session,
                                                  session_files, session_note, turn_ids, turns_record)
from palace_cli.index.locks import write_lock
from palace_cli.importers.chats.reading import EXPORT
from palace_cli.importers.chats.resume import file_identity
from palace_cli.importers.formats import read_conversations, resume_conversations

WRITERS = 8
Progress = Callable[[str, int, int], None]


@dataclass
class TurnConflict:
    """A turn (or a session) left as the palace has it, because the source and a hand edit disagree."""

    session: str
    turn: str | None
    path: str
    line: int | None
    reason: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.session}" + (f" turn {self.turn}" if self.turn else "") + f": {self.reason}"

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {"session": self.session, "turn": self.turn, "path": self.path, "line": self.line,
                "reason": self.reason}


@dataclass
class SessionOutcome:
    """What an import did to one session: added, appended, updated, skipped, conflict or refused (too big)."""

    id: str
    path: str
    action: str
    turns: int  # turns the source has (after what is left out)
    written: int  # turns this import wrote (new or changed)

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {"id": self.id, "path": self.path, "action": self.action, "turns": self.turns,
                "written": self.written}


@dataclass
class ConversationImport:
    """What a conversation import did, session by session, and what it could not read or left out."""

    format: str
    source: str
    dry_run: bool = False
    sessions: list[SessionOutcome] = field(default_factory=list)
    conflicts: list[TurnConflict] = field(default_factory=list)
    problems: list[ReadProblem] = field(default_factory=list)
    left_out: dict[str, int] = field(default_factory=dict)
    refresh: object = None  # the RefreshReport of the refresh that indexed the imported turns
    redacted: int = 0  # secrets redacted and private spans dropped in what was read (core/secrets.py)
    read_bytes: int = 0  # bytes of the source read (a tail read: the tail and the blocks that checked it)
    resumed_at: int | None = None  # a tail read: the byte it started at; None when the source was read whole

    def counts(self) -> dict[str, int]:
        """Sessions per action, and turns written."""
        counts = {action: 0 for action in ("added", "appended", "updated", "skipped", "conflict", "refused")}
        for outcome in self.sessions:
            counts[outcome.action] += 1
        return {"sessions": len(self.sessions), **counts, "turns_written": sum(o.written for o in self.sessions)}

    def as_dict(self) -> dict:
        """JSON-ready summary."""
        return {"format": self.format, "source": self.source, "dry_run": self.dry_run, "counts": self.counts(),
                "sessions": [o.as_dict() for o in self.sessions],
                "conflicts": [c.as_dict() for c in self.conflicts],
                "problems": [str(p) for p in self.problems], "left_out": self.left_out, "redacted": self.redacted,
                "read_bytes": self.read_bytes, "resumed_at": self.resumed_at}


def existing_sessions(root: Path) -> list[Session]:
    """Every session file of a palace, its frontmatter only (no turns): what a plan matches sources against."""
    return [load_header(root, relpath) for relpath, _, _ in session_files(root)]


def import_conversations(palace, path, format: str, include: frozenset[str] = frozenset(), dry_run: bool = False,
                         progress: Progress | None = None, keep_secrets: bool = False) -> ConversationImport:
    """Import every session of a conversation source into `conversations/<source>/`, its secrets redacted unless
    `keep_secrets` (formats.read_conversations); safe to rerun.

    The source is read first: only its tail when a session's import stamp holds a resume record for the file
    (chats/resume.py), else whole. The plan (which file each session goes to) and the writes are made under the
    palace's write lock, so imports of one session at once (two hooks at the same instant) write one file: the
    second plans against the first one's file and finds its turns there. A tail whose record another import
    moved meanwhile is read again from where that one ended; one the plan cannot take, whole."""
    path = Path(path)
    whole = keep_secrets  # a read that keeps secrets leaves no resume record and never reads a tail
    for attempt in range(3):
        result = None if whole or attempt == 2 else _tail(palace, path, format, include)
        if result is None:
            result, whole = read_conversations(path, format, include, keep_secrets), True
            if keep_secrets:
                for session in result.sessions:
                    session.resume = None
        report = ConversationImport(format, str(path), dry_run, problems=list(result.problems),
                                    left_out=dict(sorted(result.left_out.items())), redacted=result.redacted,
                                    read_bytes=result.read_bytes, resumed_at=result.resumed_at)
        try:
            if dry_run:
                _plan(palace, path, format, result.sessions, report)
                return report
            with write_lock(palace.site, f"import of {path.name}"):
                _write(palace, _plan(palace, path, format, result.sessions, report), progress)
            return report
        except _Stale as stale:
            whole = whole or stale.whole
    raise AssertionError("a whole read is never stale")  # the third attempt reads whole


def _tail(palace, path: Path, format: str, include: frozenset[str]):
    """The tail of a source file after the resume record a session's stamp holds for it; None: read it whole."""
    if not path.is_file():
        return None
    file = file_identity(path)
    for session in existing_sessions(palace.root):
        record = (session.imported or {}).get("resume")
        if isinstance(record, dict) and record.get("file") == file:
            tail = resume_conversations(path, format, include, record)
            if tail is not None:  # else an older session whose transcript's inode was freed and given again
                return tail
    return None


def _write(palace, plan: "_Plan", progress: Progress | None) -> None:
    """Write what a plan holds (each file atomically; threads overlap their fsyncs)."""
    if not plan.writes:
        return
    for target, _text in plan.writes:  # no session file is written through a link out of conversations/
        confined(palace.root, palace.rel(target), "session file", under=CONVERSATIONS)
    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        for done, _ in enumerate(pool.map(lambda item: atomic_write(*item), plan.writes), 1):
            if progress:
                progress("writing sessions", done, len(plan.writes))


class _Stale(Exception):
    """A tail read the plan cannot take: its record moved (another import wrote since: read the tail again) or
    `whole` (the file must be read whole)."""

    def __init__(self, whole: bool):
        super().__init__("whole" if whole else "moved")
        self.whole = whole


def _plan(palace, path: Path, format: str, sessions: list[Session], report: ConversationImport) -> "_Plan":
    """Each session of the source matched to its file (or a new one) and merged: what to write."""
    plan = _Plan(palace.root, f"{format}:{source_name(path)}", report)
    seen: set[tuple[str, str]] = set()
    for session in sessions:
        key = (session.source, session.source_id)
        if key in seen:
            report.problems.append(ReadProblem(str(path), None, f"session {session.source_id} of {session.source} "
                                               "appears twice in the source; the second is left out"))
            continue
        seen.add(key)
        plan.take(session)
    return plan


def source_name(path: Path) -> str:
    """How an import stamp's `from` names a source: its file or folder name; an export's `conversations.json`
    with its folder's name too (every ChatGPT and Claude.ai export has a file of that name)."""
    if path.name == EXPORT and path.parent.name:
        return f"{path.parent.name}/{path.name}"
    return path.name


class _Plan:
    """What an import will write: each session of the source matched to its file (or a new one) and merged."""

    def __init__(self, root: Path, stamp_from: str, report: ConversationImport):
        self.root, self.stamp_from, self.report = root, stamp_from, report
        on_disk = existing_sessions(root)
        self.by_key: dict[tuple[str, str], list[Session]] = {}
        for existing in on_disk:
            self.by_key.setdefault((existing.source, existing.source_id), []).append(existing)
        self.ids = {s.id for s in on_disk}
        self.paths = {s.path for s in on_disk}
        self.writes: list[tuple[Path, str]] = []  # (file, text)

    def take(self, session: Session) -> None:
        """Plan one session of the source: added, merged into its file, or kept apart from another export's."""
        if session.resumed_from is not None:
            self._take_tail(session)
            return
        old = self._match(session)
        if old is not None:
            old = load_session(self.root, old.path)  # the match was made on frontmatter; merging needs the turns
            apart = _claimed_elsewhere(old, session, self.stamp_from)
            if apart is None:
                merged = _merge(self.root, old, session, self.stamp_from, self.report.problems)
                self.report.sessions.append(merged.outcome)
                self.report.conflicts += merged.conflicts
                if merged.text is not None:
                    self._write(old.path, merged.text, merged.session)
                return
        relpath = _new_path(self.root, session, self.ids, self.paths)
        if old is not None:
            self.report.problems.append(ReadProblem(old.path, None, f"session {session.source_id} of "
                                                    f"{session.source} is also in {old.imported.get('from')}, with "
                                                    f"{apart}; this import's is kept apart, as {relpath}"))
        session.imported = None
        session.imported = _stamp(self.stamp_from, session.turns, session_note(session), session.resume)
        self.report.sessions.append(SessionOutcome(session.id, relpath, "added", len(session.turns),
                                                   len(session.turns)))
        self._write(relpath, render_session(session), session)

    def _take_tail(self, session: Session) -> None:
        """Plan the turns a tail read found after its file's resume record: appended in place, every byte before
        them left as it is, the stamp carried on over them. _Stale when another import moved the record, or when
        the file cannot take them so (a turn id it has, a new speaker, a stamp of the older form)."""
        old = next((s for s in self.by_key.get((session.source, session.source_id), [])
                    if (s.imported or {}).get("resume") == session.resumed_from), None)
        if old is None:
            raise _Stale(whole=False)
        stamp, fresh = old.imported, session.turns
        record = carried(stamp.get("record"), fresh)
        if record is None or not _is_count(stamp.get("turns")):
            raise _Stale(whole=True)
        total = int(stamp["turns"]) + len(fresh)
        self.report.sessions.append(SessionOutcome(old.id, old.path, "appended" if fresh else "skipped", total,
                                                   len(fresh)))
        if not fresh:
            return
        if not set(participants_of(fresh)) <= set(old.participants):
            raise _Stale(whole=True)
        read = _read(self.root, old.path)  # once: the file is megabytes in a long session, and is appended to below
        if turn_ids(read[1]) & {turn.id for turn in fresh}:
            raise _Stale(whole=True)
        note = carried(stamp.get("note"), fresh) or stamp.get("note")  # the older form: kept (an edited file's)
        new_stamp = {"from": self.stamp_from, "turns": total, "record": record, "note": note, "resume": session.resume}
        self._write(old.path, _in_place(self.root, old.path, new_stamp, fresh, read), None)

    def _match(self, session: Session) -> Session | None:
        """The file of this session (its frontmatter): the one this export wrote, else one whose turns it still
        has, else the first."""
        candidates = self.by_key.get((session.source, session.source_id), [])
        for old in candidates:
            if (old.imported or {}).get("from") == self.stamp_from:
                return old
        for old in candidates:
            if _still_has(old, session):
                return old
        return candidates[0] if candidates else None

    def _write(self, relpath: str, text: str, whole: Session | None) -> None:
        """Queue a write, unless the file would be over the size cap, or (a session rendered `whole`) would not
        read back as that session."""
        why = _too_big(text) or (_unreadable(text, relpath, whole) if whole else "")
        if not why:
            self.writes.append((self.root / relpath, text))
            return
        self.report.problems.append(ReadProblem(relpath, None, why))
        for outcome in self.report.sessions:
            if outcome.path == relpath:
                outcome.action, outcome.written = "refused", 0


def _too_big(text: str) -> str:
    """Why a session file's text is over the cap ("" when it is not)."""
    if len(text) * 4 <= MAX_SESSION_BYTES:  # UTF-8 takes at most 4 bytes a character: no need to encode
        return ""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size <= MAX_SESSION_BYTES:
        return ""
    return (f"the session file would be {size:,} bytes, over the {MAX_SESSION_BYTES:,} byte limit for a session "
            "file; not written (split the session in the source, or import it with fewer parts)")


def _unreadable(text: str, relpath: str, session: Session) -> str:
    """Why a session file's text would not read back as the session it was written for ("" when it would).

    The frontmatter is what a hostile value can break (turn headers are escaped as they are written);
    it is read back as the index will read it, and must name the same session."""
    back = parse_header(text, relpath)
    if back.problems:
        return f"the session file would not read back ({back.problems[0].message}); not written"
    if back.header() != session.header():
        return ("the session file's frontmatter would read back as other values (session "
                f"{back.id!r}); not written")
    return ""


def _still_has(old: Session, new: Session) -> bool:
    """True when the source still has the turns last imported into this file (perhaps more)."""
    stamp = old.imported or {}
    if not _is_count(stamp.get("turns")):
        return False
    imported = int(stamp["turns"])
    return 0 <= imported <= len(new.turns) and record_holds(stamp.get("record"), new.turns[:imported])


def _claimed_elsewhere(old: Session, new: Session, stamp_from: str) -> str | None:
    """What tells that the source's session is not the one in this file, though it has its id: another export
    gave the file other text under the same turn ids (not a revision: neither text holds the other). None when
    it is the same session (the same export, a grown or revised one, or no stamp to tell)."""
    stamp = old.imported
    if stamp is None or stamp.get("from") == stamp_from or _still_has(old, new):
        return None
    have = _first_turns(old)
    differ = [t for t in new.turns if t.id in have and not _revises(have[t.id], t)]
    if not differ:
        return None
    return f"other text under {len(differ)} of its turn ids (the first: {differ[0].id})"


def _revises(mine: Turn, theirs: Turn) -> bool:
    """True when a turn of the source is this turn, perhaps grown or cut (a message still being written, a block
    taken in or left out by --include): the same speaker, one text within the other."""
    return mine.speaker == theirs.speaker and (mine.text in theirs.text or theirs.text in mine.text)


def _stamp(stamp_from: str, turns: list[Turn], note: str, resume: dict | None) -> dict:
    stamp = {"from": stamp_from, "turns": len(turns), "record": turns_record(turns), "note": note}
    return {**stamp, "resume": resume} if resume is not None else stamp


def _new_path(root: Path, session: Session, ids: set[str], paths: set[str]) -> str:
    """A free session id and file path for a new session (a short suffix when either is taken).

    Folder and file names are slugs: a session file from elsewhere cannot name a path outside
    conversations/<source>/ through its `source`.
    """
    base_id, n = session.id, 2
    while session.id in ids:
        session.id = f"{base_id}-{n}"
        n += 1
    ids.add(session.id)
    folder = f"{CONVERSATIONS}/{slug(session.source) or 'unknown'}"
    stem = slug(session.stem, 120) or slug(session.id, 120) or "session"
    relpath, n = f"{folder}/{stem}.md", 2
    while relpath in paths or (root / relpath).exists():
        relpath = f"{folder}/{stem}-{n}.md"
        n += 1
    paths.add(relpath)
    session.path = relpath
    return relpath


class _Merged(NamedTuple):
    """What merging a source's session into its file gives: the outcome, the file's new text (None: leave it),
    conflicts, and the session when the text renders it whole."""

    outcome: SessionOutcome
    text: str | None = None
    conflicts: list[TurnConflict] = []
    session: Session | None = None  # the session the text renders whole (None: the file edited in place)


def _merge(root: Path, old: Session, new: Session, stamp_from: str, problems: list[ReadProblem]) -> _Merged:
    """How a session already in the palace takes the source's version of it."""
    new.id, new.path = old.id, old.path
    stamp = old.imported
    reason = None
    if stamp is None:
        reason = "this session's file has no import stamp (`imported`), so it is not known what was imported"
    elif not _is_count(stamp.get("turns")):
        reason = "the import stamp's `turns` is not a number"
    if reason is not None:
        return _Merged(_outcome(old, new, "conflict"), None, [TurnConflict(old.id, None, old.path, 1,
                                                                            reason + "; left as it is")])
    untouched = note_holds(stamp.get("note"), old)
    if _still_has(old, new):
        return _grown(root, old, new, int(stamp["turns"]), untouched, stamp_from)
    return _changed(root, old, new, untouched, stamp_from, problems)


def _is_count(value) -> bool:
    try:
        int(value)
    except (TypeError, ValueError, OverflowError):
        return False
    return True


def _outcome(old: Session, new: Session, action: str, written: int = 0) -> SessionOutcome:
    return SessionOutcome(old.id, old.path, action, len(new.turns), written)


def _first_turns(session: Session) -> dict[str, Turn]:
    """Each turn id's first turn in a session."""
    have: dict[str, Turn] = {}
    for turn in session.turns:
        have.setdefault(turn.id, turn)
    return have


def _grown(root: Path, old: Session, new: Session, imported: int, untouched: bool, stamp_from: str) -> _Merged:
    """The source still has the turns last imported, perhaps more: append the new ones, touch nothing else."""
    have = _first_turns(old)
    fresh, conflicts = [], []
    for turn in new.turns[imported:]:
        mine = have.get(turn.id)
        if mine is None:
            fresh.append(turn)
        elif mine.key() != turn.key():
            conflicts.append(TurnConflict(old.id, turn.id, old.path, mine.line,
                                          "the source has a different turn with this id; left as it is"))
    if conflicts:
        return _Merged(_outcome(old, new, "conflict"), None, conflicts)
    header_moved = untouched and new.header() != old.header()
    if not fresh and not header_moved:
        if new.resume is None or old.imported.get("resume") == new.resume:
            return _Merged(_outcome(old, new, "skipped"))
        # Nothing new, but the file was read whole: its resume record is written, so the next read is a tail.
        note = session_note(old) if untouched else old.imported.get("note")
        return _Merged(_outcome(old, new, "skipped"), _in_place(root, old.path, _stamp(stamp_from, new.turns, note,
                                                                                      new.resume), []))
    if untouched:
        merged = _whole(new, old.turns + fresh, old.preamble)
        merged.imported = _stamp(stamp_from, new.turns, session_note(merged), new.resume)
        return _Merged(_outcome(old, new, "appended" if fresh else "updated", len(fresh)), render_session(merged),
                       session=merged)
    stamp = _stamp(stamp_from, new.turns, old.imported.get("note"), new.resume)
    return _Merged(_outcome(old, new, "appended", len(fresh)), _in_place(root, old.path, stamp, fresh))


def _in_place(root: Path, relpath: str, stamp: dict, fresh: list[Turn], read: tuple[str, str] | None = None) -> str:
    """A session file's text with its import stamp replaced and turns appended, every other byte as it is (`read`:
    the file's (BOM, text) when the caller has just read it)."""
    bom, text = read if read is not None else _read(root, relpath)
    text = edit_frontmatter(text, {"imported": stamp}, relpath)
    plain = text.replace("\r\n", "\n")
    full = append_turns(plain, fresh)
    if plain != text:  # a file with CRLF line ends: its bytes as they are, the new lines with CRLF too
        full = text + full[len(plain):].replace("\n", "\r\n")
    return bom + full


def _changed(root: Path, old: Session, new: Session, untouched: bool, stamp_from: str,
             problems: list[ReadProblem]) -> _Merged:
    """The source changed turns it had given before: follow it if nobody edited the file (saying which turns
    it replaced), else report conflicts."""
    have = _first_turns(old)
    changed = [(have[t.id], t) for t in new.turns if t.id in have and have[t.id].key() != t.key()]
    missing = [t for t in new.turns if t.id not in have]
    if untouched:
        merged = _whole(new, _interleave(old.turns, new.turns), old.preamble)
        merged.imported = _stamp(stamp_from, new.turns, session_note(merged), new.resume)
        if changed:
            problems.append(ReadProblem(old.path, changed[0][0].line or None, f"{len(changed)} turn"
                                        f"{'' if len(changed) == 1 else 's'} changed in the source since the last "
                                        f"import (the first: {changed[0][0].id}); the file now has the source's "
                                        "(the old text is in git, once committed)"))
        return _Merged(_outcome(old, new, "updated", len(changed) + len(missing)), render_session(merged),
                       session=merged)
    if changed or missing:
        conflicts = [TurnConflict(old.id, mine.id, old.path, mine.line,
                                  "differs from the source, which changed turns it had given before, and the "
                                  "file was edited since it was imported; left as it is") for mine, _ in changed]
        conflicts += [TurnConflict(old.id, turn.id, old.path, None,
                                   "in the source but not in the file, which was edited since it was imported "
                                   "(deleted there?); not added") for turn in missing]
        return _Merged(_outcome(old, new, "conflict"), None, conflicts)
    # Edited, and the source only lost turns the file still has: record the source as it now is.
    stamp = _stamp(stamp_from, new.turns, old.imported.get("note"), new.resume)
    return _Merged(_outcome(old, new, "updated"), _in_place(root, old.path, stamp, []))


def _whole(header: Session, turns: list[Turn], preamble: str) -> Session:
    """A session to render whole: the source's header fields, these turns."""
    return Session(id=header.id, source=header.source, source_id=header.source_id, title=header.title,
                   started=header.started, participants=list(header.participants), turns=turns,
                   meta=dict(header.meta), preamble=preamble, path=header.path)


def _interleave(mine: list[Turn], source: list[Turn]) -> list[Turn]:
    """The source's turns in its order, with turns only the file has kept after the turn they followed."""
    in_source = {t.id for t in source}
    after: dict[str | None, list[Turn]] = {}
    anchor = None
    for turn in mine:
        if turn.id in in_source:
            anchor = turn.id
        else:
            after.setdefault(anchor, []).append(turn)
    out = list(after.get(None, []))
    for turn in source:
        out.append(turn)
        out += after.get(turn.id, [])
    return out


def _read(root: Path, relpath: str) -> tuple[str, str]:
    """(BOM or "", text) of a session file about to be edited in place."""
    text = (root / relpath).read_bytes().decode("utf-8")
    return ("\ufeff", text[1:]) if text.startswith("\ufeff") else ("", text)
