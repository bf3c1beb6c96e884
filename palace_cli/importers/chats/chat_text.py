"""Plain chat text or Markdown: `Speaker: text` lines, optional date lines and timestamps.

```
# Standup, week 12            <- optional title
2024-03-01                    <- a date line: the date of the turns after it
[09:02] Alice: the build is red again
Bob: on it; it is the flaky clock test
  more of what Bob said        <- a line that starts no turn continues the one before
**Alice:** thanks
```

Speakers are up to three words before a colon (`**Name:**` and `**Name**:` too). A timestamp
before the speaker (`[09:02]`, `09:02`, `2024-03-01 09:02`) gives the turn's time, a turn
without one has its date line's date; a time with no date known stays in the text. One file is one session; turn ids are `<session id>#<n>`. A file
that is a palace session file (say, from another palace) is read as one, keeping its ids.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from palace_cli.errors import ImportFailed, NoteError
from palace_cli.core.notefile import load_frontmatter
from palace_cli.conversations.model import ReadProblem, ReadResult, Session, Turn, clean_text, participants_of, session_id
from palace_cli.core.text import one_line, slug
from palace_cli.core.dates import iso_time
from palace_cli.conversations.sessionfile import split_text, is_session_text, parse_session
from palace_cli.core.walk import files_under
from palace_cli.importers.chats.reading import RecordGuard, read_text, shown

FORMAT = "chat-markdown"
SOURCE = "chat"
SUFFIXES = (".md", ".markdown", ".txt")
PLAIN = (".txt",)  # read as chat text without a look inside
STAMP = r"(?:\d{4}-\d\d-\d\d[ T])?\d{1,2}:\d\d(?::\d\d)?(?:\s?[AaPp]\.?[Mm]\.?)?"
TURN = re.compile(
    rf"^(?:\[(?P<stamp1>{STAMP})\]\s*|(?P<stamp2>{STAMP})\s+(?:-\s+)?)?"
    r"(?:\*\*(?P<bold>[^*:\n]{1,40}?)(?::\*\*|\*\*:)|(?P<plain>[^\W\d_][\w.'&()-]*(?: [\w.'&()-]+){0,2}):)"
    r"(?:[ \t]+(?P<text>.*))?$")
DATE_DECORATION = re.compile(r"^[#*\[\]=_\s-]+|[#*\[\]=_\s:-]+$")
DATE_FORMATS = ("%Y-%m-%d", "%d %B %Y", "%d %B, %Y", "%B %d, %Y", "%B %d %Y", "%A, %d %B %Y", "%A, %B %d, %Y",
                "%A %d %B %Y", "%d %b %Y", "%b %d, %Y", "%a, %d %b %Y", "%I:%M %p on %d %B, %Y")
TIME_FORMATS = ("%H:%M", "%H:%M:%S", "%I:%M %p", "%I:%M%p", "%I:%M:%S %p")
NOT_SPEAKERS = {"http", "https", "ftp", "mailto", "file", "note", "nb", "ps", "todo", "warning", "error"}


def read(path: Path, include: frozenset[str]) -> ReadResult:
    """One session per text or Markdown file (the file, or every such file under a directory)."""
    result = ReadResult(FORMAT)
    root = path if path.is_dir() else path.parent
    files = files_under(path, SUFFIXES) if path.is_dir() else [path]
    if not files:
        raise ImportFailed(f"{path}: no .md or .txt chat files")
    for file in files:
        with RecordGuard(result.problems, shown(file), None, "the file"):
            _read_file(file, root, result)
    return result


def _read_file(file: Path, root: Path, result: ReadResult) -> None:
    """The session of one file, into `result`."""
    where = shown(file)
    text = read_text(file, result)
    if text is None:
        return
    if is_session_text(text):
        session = parse_session(text, where)
        result.problems += session.problems
        session.problems = []
        session.imported = None
        session.stem = Path(file).stem
    else:
        session = parse_chat(text, where, file.relative_to(root).with_suffix("").as_posix(), result.problems)
        if not session.turns:
            result.problems.append(ReadProblem(where, None, "no `Speaker: text` lines; nothing imported"))
    if session.turns:
        result.add(session, where)


def sniff(head: str) -> bool:
    """True when a Markdown file's first megabyte is a palace session file or reads as a chat log."""
    return is_session_text(head) or looks_like_chat(head)


def _date(line: str) -> str | None:
    """The ISO date (or date and minute) of a line that holds only a date, else None."""
    core = DATE_DECORATION.sub("", line)
    if not core or len(core) > 40 or not any(c.isdigit() for c in core):
        return None
    for pattern in DATE_FORMATS:
        try:
            moment = datetime.strptime(core, pattern)
        except ValueError:
            continue
        return moment.strftime("%Y-%m-%dT%H:%M" if "%H" in pattern or "%I" in pattern else "%Y-%m-%d")
    return iso_time(core) if re.fullmatch(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d)?", core) else None


def _stamp(stamp: str, day: str | None) -> str | None:
    """ISO time of a turn's timestamp, on the current date line's day; None when there is no date to put it on."""
    stamp = " ".join(stamp.replace(".", "").split())
    if re.match(r"\d{4}-\d\d-\d\d", stamp):
        return iso_time(stamp)
    if not day:
        return None
    for pattern in TIME_FORMATS:
        try:
            moment = datetime.strptime(stamp.upper(), pattern)
        except ValueError:
            continue
        clock = moment.strftime("%H:%M:%S" if pattern.count("%M:%S") else "%H:%M")
        return f"{day[:10]}T{clock}"
    return None


def _speaker(match: re.Match) -> str | None:
    name = (match.group("bold") or match.group("plain") or "").strip()
    if not name or name.lower() in NOT_SPEAKERS:
        return None
    return name


def turn_lines(text: str) -> list[tuple[int, re.Match, str]]:
    """(line index, match, speaker) of every line that starts a turn."""
    found = []
    for index, line in enumerate(text.split("\n")):
        match = TURN.match(line)
        if match and (speaker := _speaker(match)):
            found.append((index, match, speaker))
    return found


def speakers(body: str) -> set[str]:
    """The speaker labels that start turns: once there are two regular speakers, a label of several
    words seen only once ("Update on the build: ...") is taken as text, not as a speaker."""
    counts: dict[str, int] = {}
    for _, _, speaker in turn_lines(body):
        counts[speaker] = counts.get(speaker, 0) + 1
    if sum(1 for c in counts.values() if c >= 2) >= 2:
        return {s for s, c in counts.items() if c >= 2 or " " not in s}
    return set(counts)


def looks_like_chat(text: str) -> bool:
    """True when a text reads as a chat log: two speakers or more, and turns are a third of its lines or more."""
    _, body, _ = split_text(text.replace("\r\n", "\n"))
    lines = [line for line in body.split("\n") if line.strip() and not line.startswith("#")]
    known = speakers(body)
    turns = [t for t in turn_lines(body) if t[2] in known]
    return len(turns) >= 2 and len(known) >= 2 and len(turns) * 3 >= len(lines)


def parse_chat(text: str, where: str, rel: str, problems: list[ReadProblem]) -> Session:
    """A session from chat text; `rel` (the file's path under the imported folder) is its source id."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    yaml_text, body, first = split_text(text)
    meta: dict = {}
    if yaml_text is not None:
        try:
            meta = load_frontmatter(yaml_text, where)
        except NoteError as exc:
            problems.append(ReadProblem(where, exc.line, exc.reason + "; frontmatter ignored"))
    session = _from_frontmatter(meta, rel, where, problems)
    day = session.started
    preamble: list[str] = []
    current: list[str] | None = None
    known = speakers(body)
    for index, line in enumerate(body.split("\n")):
        match = TURN.match(line)
        speaker = _speaker(match) if match else None
        if speaker in known:
            if current is not None:
                session.turns[-1].text = clean_text("\n".join(current))
            stamp = match.group("stamp1") or match.group("stamp2")
            time = _stamp(stamp, day) if stamp else day
            words = match.group("text") or ""
            if stamp and time is None:
                words = f"[{stamp}] {words}"
            session.turns.append(Turn(f"{session.id}#{len(session.turns) + 1}", speaker, "", time, line=first + index))
            current = [words]
            continue
        date = _date(line) if len(line) <= 60 else None
        if date:
            day = date
            session.started = session.started or date
            continue
        if current is None:
            if not session.title and line.startswith("# ") and not "".join(preamble).strip():
                session.title = one_line(line[2:], 120)
            else:
                preamble.append(line)
        else:
            current.append(line)
    if current is not None:
        session.turns[-1].text = clean_text("\n".join(current))
    _finish(session, meta, rel, where, preamble, problems)
    return session


def _finish(session: Session, meta: dict, rel: str, where: str, preamble: list[str], problems: list[ReadProblem]
            ) -> None:
    """What a chat's turns leave to settle: empty turns (reported), the preamble, the participants (named ones
    first), the title, the start, the file stem and the rest of the frontmatter."""
    for turn in [t for t in session.turns if not t.text]:
        problems.append(ReadProblem(where, turn.line, f"{turn.speaker}: says nothing; kept as an empty turn"))
    session.preamble = clean_text("\n".join(preamble))
    named = meta.get("participants")
    session.participants = ([str(p) for p in named] if isinstance(named, list) else []) + \
        [p for p in participants_of(session.turns) if not isinstance(named, list) or p not in named]
    if not session.title:
        session.title = Path(rel).name.replace("-", " ").replace("_", " ")
    session.started = session.started or next((t.time for t in session.turns if t.time), None)
    session.stem = slug(rel, 80) or "chat"
    session.meta = {k: v for k, v in meta.items() if k not in ("id", "title", "date", "started", "participants")}


def _from_frontmatter(meta: dict, rel: str, where: str, problems: list[ReadProblem]) -> Session:
    """The session a chat file's frontmatter describes (`id`, `title`, `date` or `started`), still without turns."""
    source_id = str(meta.get("id") or rel)
    when = meta.get("date") or meta.get("started")
    session = Session(id=session_id(SOURCE, source_id), source=SOURCE, source_id=source_id,
                      title=one_line(meta.get("title") or "", 120), started=iso_time(when))
    if when and session.started is None:
        problems.append(ReadProblem(where, 1, f"frontmatter date {one_line(repr(when), 60)} cannot be read or "
                                    "is out of range; the session has none from it"))
    return session
