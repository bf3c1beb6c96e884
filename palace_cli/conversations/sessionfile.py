"""The session file: one Markdown file per session, written by render_session, read back by parse_session.

```
---
id: locomo-conv-26-s01
source: locomo
source_id: conv-26/session_1
title: conv-26, session 1
started: 2023-05-08T13:56
participants: [Caroline, Melanie]
imported: {from: 'locomo:locomo-dev5.json', turns: 18, record: c1.5c0d..., note: c1.5c0d....91aa...}
---
# conv-26, session 1

### Caroline · D1:1
Hey Mel! Good to see you! How have you been?

### Melanie · D1:2
...
```

A turn is a header line `### <speaker> · <time> · <turn id>` (the time is left out when the
source has none, or written `-` when the id itself looks like a time) and its text up to the next
header. A line of text or of the preamble that would read as a header is written with a leading
backslash, which the parser takes off again. See docs/conversations.md.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import yaml

from palace_cli.core import safeyaml
from palace_cli.core.layout import Problem
from palace_cli.errors import NoteError
from palace_cli.core.notefile import frontmatter_block, load_frontmatter
from palace_cli.core.noteedit import dump_frontmatter
from palace_cli.core.disk import read_at, read_capped
from palace_cli.conversations.model import RESERVED, TIME, ReadProblem, Session, Turn, digest
from palace_cli.core.text import one_line
from palace_cli.core.dates import iso_time
from palace_cli.core.walk import walk_files

CONVERSATIONS = "conversations"
# A session file over this is reported and not indexed: a week of a busy agent's turns is a few MB; a file
# of gigabytes is a mistake or an attack, and reading it would take the palace's memory down.
MAX_SESSION_BYTES = 32_000_000
HEADER_BYTES = 1 << 16  # what load_header reads of a session file first: its frontmatter is a few hundred bytes
SEP = " · "
HEAD = "### "
NO_TIME = "-"  # the time slot of a turn without a time whose id looks like one (`### Bob · - · 2024-01-01`)
STAMP_KEYS = ("from", "turns", "record", "note")


# ---- digests: what the import stamp records -----------------------------------------------------


# A stamp written since the import record learned to resume (importers/chats/resume.py) hashes turns one after
# another (`chained`), so that an import that read only a source's new turns carries `record` and `note` on from
# their values alone. A stamp without this prefix is the older form (one hash over every turn), still read.
CHAINED = "c1."


def turns_digest(turns: list[Turn]) -> str:
    """The older stamp's `record`: one hash of the turns as a source gave them (still compared, never written)."""
    return digest([turn.key() for turn in turns])


def session_digest(session: Session) -> str:
    """The older stamp's `note`: one hash of a session as its file holds it (frontmatter but the stamp, preamble,
    turns)."""
    return digest([session.header(), session.preamble, [turn.key() for turn in session.turns]])


def chained(turns: list[Turn], start: str = "") -> str:
    """The turns' keys hashed one after another onto `start`: a hash the next turns carry on from its value alone."""
    value = start
    for turn in turns:
        data = "\x1f".join((value, turn.id, turn.speaker, "\x00" if turn.time is None else turn.time, turn.text))
        value = hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return value


def turns_record(turns: list[Turn]) -> str:
    """The stamp's `record`: a hash of the first `turns` turns of the source as it gave them."""
    return CHAINED + chained(turns)


def session_note(session: Session) -> str:
    """The stamp's `note`: a hash of a session as its file holds it (its turns chained, then the frontmatter but the
    stamp, and the preamble)."""
    return f"{CHAINED}{chained(session.turns)}.{digest([session.header(), session.preamble])}"


def record_holds(record, turns: list[Turn]) -> bool:
    """True when a stamp's `record` (either form) is the hash of these turns."""
    if isinstance(record, str) and record.startswith(CHAINED):
        return turns_record(turns) == record
    return turns_digest(turns) == record


def note_holds(note, session: Session) -> bool:
    """True when a stamp's `note` (either form) is the hash of the session as its file now holds it: not edited."""
    if isinstance(note, str) and note.startswith(CHAINED):
        return session_note(session) == note
    return session_digest(session) == note


def carried(value: str, turns: list[Turn]) -> str | None:
    """A chained `record` or `note` carried on over turns appended after the ones it hashes; None for the older form
    (it cannot be carried on: the turns before must be hashed again)."""
    if not (isinstance(value, str) and value.startswith(CHAINED)):
        return None
    chain, dot, rest = value[len(CHAINED):].partition(".")
    return f"{CHAINED}{chained(turns, chain)}{dot}{rest}"


# ---- writing ---------------------------------------------------------------------------------


def _looks_like_header(line: str) -> bool:
    return line.lstrip("\\").startswith(HEAD) and SEP in line


def header_line(turn: Turn) -> str:
    """The first line of a turn's block: `### speaker · time · id` (no time part when there is none, `-` when
    the id would be taken for one)."""
    speaker = one_line(turn.speaker).replace(SEP, " - ") or "?"
    time = turn.time or (NO_TIME if TIME.fullmatch(turn.id) else None)
    parts = [speaker] + ([time] if time else []) + [turn.id]
    return HEAD + SEP.join(parts)


def escaped(text: str) -> list[str]:
    """The lines of a text, those that would read as a turn header escaped with a backslash."""
    return ["\\" + line if _looks_like_header(line) else line for line in text.split("\n")]


def turn_block(turn: Turn) -> list[str]:
    """A turn's lines: the header, then its text with header-like lines escaped."""
    return [header_line(turn)] + (escaped(turn.text) if turn.text else [])


def frontmatter(session: Session) -> str:
    """The YAML frontmatter block (with `---` lines) for a session."""
    fields = session.header()
    if session.imported is not None:
        fields["imported"] = session.imported
    return "---\n" + dump_frontmatter(fields) + "---\n"


def render_session(session: Session) -> str:
    """The text of a session file; sets each turn's `line` to the line of its header."""
    head = frontmatter(session)
    lines = []
    if session.title:
        lines += [f"# {one_line(session.title)}", ""]
    if session.preamble:
        lines += escaped(session.preamble) + [""]
    line_number = head.count("\n") + len(lines) + 1
    for turn in session.turns:
        block = turn_block(turn)
        turn.line = line_number
        lines += block + [""]
        line_number += len(block) + 1
    if lines and lines[-1] == "":
        lines.pop()
    return head + "\n".join(lines) + "\n"


def append_turns(text: str, turns: list[Turn]) -> str:
    """A session file's text with turns added at its end, leaving every existing byte as it is."""
    text = text if text.endswith("\n") else text + "\n"
    number = text.count("\n") + 1  # the line the next written line will have
    lines: list[str] = []
    for turn in turns:
        block = turn_block(turn)
        turn.line = number + 1  # after a blank separator line
        lines += [""] + block
        number += 1 + len(block)
    return text + "\n".join(lines) + "\n" if lines else text


# ---- reading ---------------------------------------------------------------------------------


def split_text(text: str) -> tuple[str | None, str, int]:
    """(frontmatter YAML or None, body, file line where the body starts)."""
    block = frontmatter_block(text)
    if block is None:
        return None, text, 1
    yaml_text = text[block.start : block.end]
    return yaml_text, text[block.body :], yaml_text.count("\n") + 3


def _header(line: str) -> tuple[str, str | None, str] | None:
    """(speaker, time, id) of a header line, or None when it is not a readable header."""
    parts = line[len(HEAD):].split(SEP)
    if len(parts) < 2:
        return None
    turn_id = parts[-1].strip()
    slot = parts[-2].strip() if len(parts) >= 3 else None
    if slot is not None and (slot == NO_TIME or TIME.fullmatch(slot)):
        time = None if slot == NO_TIME else slot
        speaker = SEP.join(parts[:-2]).strip()
    else:  # no time slot: an id that looks like a time is a time written without its id (`### Bob · 2024-03-01`)
        time, speaker = None, SEP.join(parts[:-1]).strip()
        if TIME.fullmatch(turn_id):
            return None
    if not speaker or not turn_id or any(c.isspace() for c in turn_id):
        return None
    return speaker, time, turn_id


def _fields(session: Session, meta: dict, path: str, problems: list[ReadProblem]) -> None:
    """Fill the session's fields from its frontmatter; odd values are reported and read as best they can be."""
    for key in ("id", "source", "source_id", "title"):
        value = meta.get(key)
        if value is None or isinstance(value, (dict, list)):
            if key != "title" or isinstance(value, (dict, list)):
                problems.append(ReadProblem(path, 1, f"frontmatter has no `{key}`" if value is None
                                            else f"frontmatter `{key}` must be text"))
            continue
        setattr(session, key, str(value))
    started = meta.get("started")
    session.started = None if started is None else iso_time(started) or str(started)
    people = meta.get("participants")
    if isinstance(people, list):
        session.participants = [str(p) for p in people]
    elif people is not None:
        session.participants = [str(people)]
        problems.append(ReadProblem(path, 1, "frontmatter `participants` should be a list"))
    stamp = meta.get("imported")
    if isinstance(stamp, dict) and all(k in stamp for k in STAMP_KEYS):
        session.imported = dict(stamp)
    elif stamp is not None:
        problems.append(ReadProblem(path, 1, "frontmatter `imported` is not an import stamp "
                                    f"({', '.join(STAMP_KEYS)}); the file is treated as not imported"))
    session.meta = {k: v for k, v in meta.items() if k not in RESERVED}


def parse_session(text: str, path: str) -> Session:
    """Read a session file's text: every turn with its header line; what cannot be read is in `.problems`.

    Forgiving: broken frontmatter still yields the turns (with an id made from the path), a
    header that cannot be read stays text of the turn before it, and each such thing is reported.
    Pure (no I/O), and fast: it runs over every session file on each index refresh.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    session, body, first = _header_and_body(text.removeprefix("\ufeff"), path)
    problems = session.problems
    lines = body.split("\n")
    preamble: list[str] = []
    current: list[str] = preamble
    turns = session.turns
    seen: dict[str, int] = {}
    for index, line in enumerate(lines):
        if line.startswith(HEAD) and SEP in line:
            parsed = _header(line)
            if parsed is not None:
                if current is not preamble:
                    turns[-1].text = _tidy(current)
                speaker, time, turn_id = parsed
                number = first + index
                if turn_id in seen:
                    problems.append(ReadProblem(path, number, f"turn id {turn_id!r} is also on line {seen[turn_id]}"))
                else:
                    seen[turn_id] = number
                turns.append(Turn(turn_id, speaker, "", time, line=number))
                current = []
                continue
            problems.append(ReadProblem(path, first + index, "looks like a turn header (`### speaker · time · id`) "
                                        "but has no readable turn id; read as text of the turn before"))
        elif line.startswith("\\") and _looks_like_header(line):
            line = line[1:]
        current.append(line)
    if current is not preamble:
        turns[-1].text = _tidy(current)
    head = _tidy(preamble)
    title_line = f"# {one_line(session.title)}"
    if session.title and (head == title_line or head.startswith(title_line + "\n")):
        head = head[len(title_line):].lstrip("\n")
    session.preamble = head
    if not turns and not problems:
        problems.append(ReadProblem(path, first, "no turns (`### speaker · time · id` lines)"))
    return session


def turn_ids(text: str) -> set[str]:
    """The id of every turn header of a session file's text, its turns left unparsed (a quick look)."""
    ids = set()
    for line in text.split("\n"):
        if line.startswith(HEAD) and SEP in line:
            parsed = _header(line.rstrip("\r"))
            if parsed is not None:
                ids.add(parsed[2])
    return ids


def parse_header(text: str, path: str) -> Session:
    """A session file's frontmatter alone, as parse_session reads it (no turns); problems in `.problems`."""
    return _header_and_body(text.removeprefix("\ufeff").replace("\r\n", "\n"), path)[0]


def _header_and_body(text: str, path: str) -> tuple[Session, str, int]:
    """(the session its frontmatter describes, the body, the file line the body starts on)."""
    stem = os.path.splitext(os.path.basename(path))[0]
    folder = os.path.basename(os.path.dirname(path)) or "unknown"
    session = Session(id=f"{folder}-{stem}", source=folder, source_id=stem, path=path)
    yaml_text, body, first = split_text(text)
    if yaml_text is None:
        session.problems.append(ReadProblem(path, 1, "no frontmatter (`---` lines); id and source taken from the path"))
        return session, body, first
    try:
        meta = load_frontmatter(yaml_text, path)
    except NoteError as exc:
        session.problems.append(ReadProblem(path, exc.line, exc.reason + "; id and source taken from the path"))
    else:
        _fields(session, meta, path, session.problems)
    return session, body, first


def _tidy(lines: list[str]) -> str:
    """Block lines as turn text: blank lines at either end and trailing spaces dropped."""
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return "\n".join(line.rstrip() for line in lines[start:end])


# ---- files in a palace -----------------------------------------------------------------------


class SessionRules:
    """The walk's rules for session files: `conversations/<source>/**/*.md`, each in its source's folder."""

    base = CONVERSATIONS

    def pruned(self, reldir: str) -> bool:
        return False

    def wanted(self, relpath: str) -> bool:
        return relpath.endswith(".md") and relpath.count("/") >= 2


def session_files(root: Path, problems: list[Problem] | None = None, temps: list | None = None
                  ) -> list[tuple[str, int, int]]:
    """(relative path, mtime_ns, size) of every `conversations/<source>/**/*.md`, sorted: for incremental refresh.

    Session files are walked as notes are (`core.walk.walk_files`): a link out of conversations/, a link loop,
    a FIFO or a name that cannot be printed is skipped and reported into `problems` when a list is given; hidden
    `*.tmp` files (temp files of writes) go into `temps`."""
    return [(f.relpath, f.mtime_ns, f.size) for f in walk_files(Path(root), SessionRules(), problems, temps)]


def load_session(root: Path, relpath: str) -> Session:
    """Read and parse one session file of a palace (unreadable bytes are reported, never raised)."""
    try:
        data = read_session_bytes(root, relpath)
    except NoteError as exc:
        session = parse_session("", relpath)
        session.problems[:] = [ReadProblem(relpath, None, exc.reason)]
        return session
    return session_from_bytes(data, relpath)


def load_header(root: Path, relpath: str) -> Session:
    """A session file's frontmatter alone (parse_header), reading only the file's first HEADER_BYTES when its
    frontmatter closes there: an import plans against every session file's header, and a long session's turns are
    megabytes. A file that cannot be read, or is over MAX_SESSION_BYTES, has the header its path gives."""
    try:
        fd = os.open(Path(root) / relpath, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not block
    except OSError:
        return parse_header("", relpath)
    try:
        info = os.fstat(fd)
        regular = stat.S_ISREG(info.st_mode) and info.st_size <= MAX_SESSION_BYTES
        head = read_at(fd, HEADER_BYTES, 0) if regular else b""
    except OSError:
        regular = False
    finally:
        os.close(fd)
    if not regular:
        return parse_header("", relpath)
    if len(head) == HEADER_BYTES:  # cut at a line's end, so that no line is taken for a shorter one
        head = head[: head.rfind(b"\n") + 1]
    text = head.decode("utf-8", "replace")
    if len(head) < info.st_size and frontmatter_block(text.removeprefix("\ufeff").replace("\r\n", "\n")) is None:
        try:  # no frontmatter closed in the head: read as a whole file is
            text = read_session_bytes(root, relpath).decode("utf-8", "replace")
        except NoteError:
            text = ""
    return parse_header(text, relpath)


def read_session_bytes(root: Path, relpath: str) -> bytes:
    """A session file's bytes; NoteError (with the reason) when it cannot be read or is over MAX_SESSION_BYTES."""
    return read_capped(Path(root) / relpath, relpath, MAX_SESSION_BYTES, "a session file")


def session_from_bytes(data: bytes, relpath: str) -> Session:
    """Parse a session file's bytes (the index reads them once to hash them too); never raises."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", "replace")
        session = parse_session(text, relpath)
        line = data[: exc.start].count(b"\n") + 1
        session.problems.insert(0, ReadProblem(relpath, line, "not UTF-8; undecodable bytes read as U+FFFD"))
        return session
    return parse_session(text, relpath)


def is_session_text(text: str) -> bool:
    """True when a Markdown text is a palace session file (frontmatter with `source` and a turn header)."""
    yaml_text, body, _ = split_text(text.removeprefix("\ufeff").replace("\r\n", "\n"))
    if yaml_text is None or "source" not in yaml_text:
        return False
    try:
        meta = safeyaml.load(yaml_text)  # with limits: detection reads files before anyone chose to import them
    except yaml.YAMLError:
        return False
    if not isinstance(meta, dict) or not meta.get("source") or not meta.get("id"):
        return False
    return any(line.startswith(HEAD) and SEP in line and _header(line) for line in body.split("\n"))
