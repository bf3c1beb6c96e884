"""Sessions and turns: what every conversation reader returns and every session file holds."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import date

from palace_cli.core.dates import iso_time
from palace_cli.core.text import one_line, slug

ROLES = ("user", "assistant", "system", "tool")
# The frontmatter fields a session file gives every session, in order; the import stamp `imported` follows the others.
HEADER_FIELDS = ("id", "source", "source_id", "title", "started", "participants")
RESERVED = HEADER_FIELDS + ("imported",)  # no other field of a session (a source's `meta`) may take these names
MAX_META_DEPTH = 50  # a value nested deeper is no session metadata (and YAML readers refuse past 100)
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# What a reader leaves out unless asked (`--include`); the keys of ReadResult.left_out.
INCLUDABLE = ("thinking", "tools", "system", "branches", "sidechains", "attachments")
TIME_TEXT = r"\d{4}-\d\d-\d\d(?:T\d\d:\d\d(?::\d\d)?)?(?:Z|[+-]\d\d:\d\d)?"
TIME = re.compile(TIME_TEXT)


def role_of(speaker: str) -> str:
    """The role a speaker name implies: user, assistant, system, tool, or "" for a named person."""
    word = speaker.strip().lower()
    return word if word in ROLES else ""


@dataclass
class Turn:
    """One thing one speaker said. `id` is stable: the source's own where it has one."""

    id: str
    speaker: str
    text: str
    time: str | None = None  # ISO 8601 to the precision the source gave (at most seconds), or None
    line: int = 0  # the file line of the turn's header, once written or parsed
    role: str = field(init=False, default="")  # from the speaker: see role_of

    def __post_init__(self):
        # Normalised as a session file writes them, so parse(render(turn)) gives back an equal turn.
        self.id = text_id(self.id)
        self.speaker = one_line(self.speaker).replace(" · ", " - ") or "?"
        if self.time is not None and not TIME.fullmatch(self.time):
            self.time = iso_time(self.time)
        if self.text:
            self.text = clean_text(self.text)
        self.role = role_of(self.speaker)

    def key(self) -> list:
        """What a session file records of the turn: compared and hashed to tell a change."""
        return [self.id, self.speaker, self.time, self.text]


@dataclass
class Session:
    """One conversation session: the unit of one file under conversations/<source>/."""

    id: str
    source: str
    source_id: str
    title: str = ""
    started: str | None = None
    participants: list[str] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    meta: dict = field(default_factory=dict)  # other frontmatter fields (cwd, conversation ...), in order
    preamble: str = ""  # text between the title and the first turn (a person's note about the session)
    imported: dict | None = None  # the import stamp: from, turns, record, note (and resume)
    resume: dict | None = None  # where the read that gave this session ended (importers/chats/resume.py)
    resumed_from: dict | None = None  # a tail read: the record it carried on from (its turns are the new ones)
    path: str = ""  # where it is (relative to the palace root) or came from
    stem: str = ""  # the file name a reader suggests (without .md)
    problems: list[ReadProblem] = field(default_factory=list)  # what parse_session could not read

    def __post_init__(self):
        self.title = one_line(self.title)

    def time_of(self, turn: Turn) -> str | None:
        """The turn's own time, else the session's start (LoCoMo turns carry only their session's date)."""
        return turn.time or self.started

    def header(self) -> dict:
        """The frontmatter fields a source controls (everything but the import stamp)."""
        own = {"id": self.id, "source": self.source, "source_id": self.source_id, "title": self.title,
               "started": self.started, "participants": list(self.participants)}
        return {**own, **{key: value for key, value in self.meta.items() if key not in RESERVED}}


@dataclass
class ReadProblem:
    """Something a reader or parse_session could not read; `str()` is `path:line: message`."""

    path: str
    line: int | None
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}" if self.line else f"{self.path}: {self.message}"


@dataclass
class ReadResult:
    """The sessions a reader found, what it could not read, and what it left out on purpose (counts)."""

    format: str
    sessions: list[Session] = field(default_factory=list)
    problems: list[ReadProblem] = field(default_factory=list)
    left_out: Counter = field(default_factory=Counter)
    bad_times: dict[str, list] = field(default_factory=dict)  # file -> [count, line and value of the first]
    redacted: int = 0  # secrets redacted and private spans dropped (importers.chats.reading.redact_sessions)
    read_bytes: int = 0  # bytes of the source read (a tail read: the tail, and the blocks that checked it)
    resumed_at: int | None = None  # a tail read: the byte it started at (None: read whole)

    def add(self, session: Session, where: str, line: int | None = None) -> None:
        """Keep a session a reader read, made safe to write first (see `check_session`)."""
        check_session(session, where, line, self.problems)
        self.sessions.append(session)

    def time(self, value, where: str, line: int | None = None) -> str | None:
        """The ISO time of a source's timestamp; one that is given but cannot be read, or is out of range, is
        counted (`time_problems` reports each file's once)."""
        moment = iso_time(value)
        if moment is None and value is not None and value != "":
            counted = self.bad_times.setdefault(where, [0, line, value])
            counted[0] += 1
        return moment

    def time_problems(self) -> list[ReadProblem]:
        """One problem per file whose timestamps could not all be read."""
        out = []
        for where, (count, line, value) in self.bad_times.items():
            shown = one_line(repr(value), 60)
            out.append(ReadProblem(where, line, f"{count} timestamp{'' if count == 1 else 's'} cannot be read or "
                                   f"{'is' if count == 1 else 'are'} out of range (the first: {shown}); "
                                   "left without a time"))
        return out


# ---- helpers for readers ---------------------------------------------------------------------


def digest(data) -> str:
    """A short stable hash of JSON-able data."""
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def clean_text(text: str) -> str:
    """Turn text as a session file keeps it: `\\n` line ends, no trailing spaces, no blank lines at either end."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = [line.rstrip() for line in text.split("\n")]
    start, end = 0, len(lines)
    while start < end and not lines[start]:
        start += 1
    while end > start and not lines[end - 1]:
        end -= 1
    return "\n".join(lines[start:end])


def session_id(source: str, source_id: str) -> str:
    """A palace session id from the source and its session id: stable, unique per source."""
    base = slug(source_id, 200)
    if not base or len(base) > 80 or base != str(source_id).lower():
        short = hashlib.sha1(str(source_id).encode("utf-8")).hexdigest()[:8]
        base = f"{base[:60].rstrip('-')}-{short}" if base else short
    return f"{source}-{base}"


def text_id(value: str) -> str:
    """A turn id usable in a header line: no whitespace (runs become `-`)."""
    return "-".join(str(value).split())


def unique_turn_ids(turns: list[Turn], where: str, problems: list[ReadProblem]) -> None:
    """Give a repeated turn id a `~2`, `~3` suffix (reported): ids address turns, so they must differ."""
    seen: set[str] = set()
    for turn in turns:
        if turn.id in seen:
            base, n = turn.id, 2
            while f"{base}~{n}" in seen:
                n += 1
            turn.id = f"{base}~{n}"
            problems.append(ReadProblem(where, None, f"turn id {base!r} repeats; this one is {turn.id!r}"))
        seen.add(turn.id)


def participants_of(turns: list[Turn]) -> list[str]:
    """Speakers in order of first appearance."""
    seen: dict[str, None] = {}
    for turn in turns:
        seen.setdefault(turn.speaker, None)
    return list(seen)


# ---- what every session passes before it is kept ------------------------------------------------


def check_session(session: Session, where: str, line: int | None, problems: list[ReadProblem]) -> None:
    """Make a session safe to write and to read back: turn ids present and unique, no lone surrogate (a JSON
    `\\ud800` escape, which no file can hold), metadata that YAML writes and reads back as it was."""
    for index, turn in enumerate(session.turns, 1):
        if not turn.id:
            turn.id = f"{session.id}#{index}"
            problems.append(ReadProblem(where, line, f"session {session.source_id}: turn {index} has no id; "
                                        f"it is {turn.id!r}"))
    unique_turn_ids(session.turns, where, problems)
    if _surrogates(session):
        problems.append(ReadProblem(where, line, f"session {session.source_id}: lone surrogate escapes "
                                    "(`\\ud800`-`\\udfff`) are not characters; read as U+FFFD"))
    for key in list(session.meta):
        why = "is a field palace writes itself" if key in RESERVED else _unwritable(session.meta[key], MAX_META_DEPTH)
        if why:
            del session.meta[key]
            problems.append(ReadProblem(where, line, f"session {session.source_id}: `{one_line(str(key), 60)}` "
                                        f"{why}; not kept"))


def _surrogates(session: Session) -> bool:
    """Replace lone surrogates in every text of a session with U+FFFD; True when there were any."""
    texts = [session.id, session.source, session.source_id, session.title, session.preamble, session.stem,
             *session.participants, *(piece for turn in session.turns for piece in (turn.id, turn.speaker, turn.text))]
    found = any(LONE_SURROGATE.search(text) for text in texts if text)
    found = _scrub_meta(session.meta) or found
    if not found:
        return False
    for name in ("id", "source", "source_id", "title", "preamble", "stem"):
        setattr(session, name, LONE_SURROGATE.sub("\ufffd", getattr(session, name)))
    session.participants = [LONE_SURROGATE.sub("\ufffd", p) for p in session.participants]
    for turn in session.turns:
        turn.id, turn.speaker, turn.text = (LONE_SURROGATE.sub("\ufffd", s) for s in (turn.id, turn.speaker, turn.text))
    return True


def _scrub_meta(meta: dict) -> bool:
    """Replace lone surrogates in the metadata's values (in place); True when there were any."""
    found = False
    for key, value in list(meta.items()):
        meta[key], changed = scrub(value)
        found = found or changed
    return found


def scrub(value):
    """(value with every lone surrogate in its text replaced by U+FFFD, whether there was any); walks lists and
    dicts without recursion, however deep a decoder let them nest."""
    if isinstance(value, str):
        return (LONE_SURROGATE.sub("\ufffd", value), True) if LONE_SURROGATE.search(value) else (value, False)
    if not isinstance(value, (list, dict)):
        return value, False
    found, stack = False, [value]
    while stack:
        container = stack.pop()
        for key in (list(container) if isinstance(container, dict) else range(len(container))):
            item = container[key]
            if isinstance(item, str) and LONE_SURROGATE.search(item):
                container[key], found = LONE_SURROGATE.sub("\ufffd", item), True
            elif isinstance(item, (list, dict)):
                stack.append(item)
    return value, found


def _unwritable(value, depth: int) -> str:
    """Why a metadata value cannot go into a session's frontmatter as it is ("" when it can)."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return "is not a finite number"
    if isinstance(value, str) and LONE_SURROGATE.search(value):
        return "holds a lone surrogate"
    if isinstance(value, (list, dict)):
        if depth <= 1:
            return f"is nested more than {MAX_META_DEPTH} levels deep"
        for item in value.values() if isinstance(value, dict) else value:
            why = _unwritable(item, depth - 1)
            if why:
                return why
        return ""
    if value is None or isinstance(value, (str, int, float, date)):
        return ""
    return f"is {type(value).__name__}, not a value YAML keeps"
