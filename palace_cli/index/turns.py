"""Turns as retrieval units: the rows a session file gives the index, the text each unit is ranked by, and
the refresh of session files (stat, then hash, then parse; journalled like notes, see index/refresh.py).

A turn is always handed over as itself (speaker, time, its own text, `path:line` of its header); what
the unit setting changes is only the text it is *ranked* by (`[retrieval] turn_unit` in palace.toml):

- `turn`: the turn alone;
- `window1`, `window2`: the turn plus the text of 1 (2) turns either side, in the same session;
- `exchange`: the turn plus the other turn of its pair (turns 1-2, 3-4, ... of a session).

The lexical index holds the speaker, the date in words and the turn's own text, then the neighbours'
`Speaker: text` lines, whose words count half (index/text.py); the embedding is of the date, then the
turn's `Speaker: text` line, then its neighbours' lines. (The window in the order it was said, as
docs/ranking-experiments.md recommended, measured worse through palace: LoCoMo recall@10 0.748 against
0.763, dense alone 0.498 against 0.522.) docs/benchmarks.md ("Conversations") measures each unit on LoCoMo.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from datetime import datetime
from typing import TYPE_CHECKING

from palace_cli.conversations import Session
from palace_cli.conversations.model import TIME
from palace_cli.errors import ConfigError, NoteError
from palace_cli.core.text import CHAT_WORDS, KEY_WORD, STOPWORDS, substance

if TYPE_CHECKING:
    from palace_cli.core.site import Site
    from palace_cli.progress import Progress
    from palace_cli.index.refresh import RefreshReport
    from palace_cli.index.store import NoteStore

SESSIONS_EVERY = 200  # session files per transaction (each holds many turns)
UNITS = ("turn", "window1", "window2", "exchange")
DEFAULT_UNIT = "window2"
UNIT_FORMAT = "2"  # bump when what a unit is made of changes: every turn row is made again
KEY_SEP = "/"  # a turn's key is `<session id>/<turn id>`; memory ids never hold a slash


def turn_unit(retrieval: dict) -> str:
    """The configured unit (palace.toml [retrieval] turn_unit), checked."""
    unit = retrieval.get("turn_unit", DEFAULT_UNIT)
    if unit not in UNITS:
        raise ConfigError(f"palace.toml: [retrieval] turn_unit = {unit!r}; choose from {', '.join(UNITS)}")
    return unit


def turn_key(session_id: str, turn_id: str) -> str:
    """The stable address of a turn in the palace: session id and turn id."""
    return f"{session_id}{KEY_SEP}{turn_id}"


def _neighbours(index: int, count: int, unit: str) -> list[int]:
    if unit.startswith("window"):
        width = int(unit[6:])
        return [j for j in range(index - width, index + width + 1) if 0 <= j < count and j != index]
    if unit == "exchange":
        partner = index + 1 if index % 2 == 0 else index - 1
        return [partner] if 0 <= partner < count else []
    return []


def session_rows(session: Session, unit: str) -> list[tuple]:
    """One row per turn (key, session, turn, speaker, time, line, text, context, text hash, substance); a
    repeated turn id keeps its first turn (parse_session reports the repeat). The substance (core/text.py) is of
    the turn's own words, the speakers' names left out: ranking discounts turns that say little."""
    rows, seen = [], set()
    turns = session.turns
    names = {part for person in [*session.participants, *(t.speaker for t in turns)] for part in str(person).split()}
    for index, turn in enumerate(turns):
        if turn.id in seen:
            continue
        seen.add(turn.id)
        around = _neighbours(index, len(turns), unit)
        context = "\n".join(f"{turns[j].speaker}: {turns[j].text}" for j in around)
        time = session.time_of(turn) or ""
        time = time if TIME.fullmatch(time) else ""
        text = unit_text(turn.speaker, turn.text, context, time)
        rows.append((turn_key(session.id, turn.id), session.id, turn.id, turn.speaker, time, turn.line, turn.text,
                     context, hashlib.sha256(text.encode("utf-8")).hexdigest()[:20], substance(turn.text, names)))
    return rows


def unit_text(speaker: str, text: str, context: str, time: str = "") -> str:
    """The text a turn is embedded as: its date in words, `Speaker: text`, then its neighbours' lines."""
    lines = [date_words(time), f"{speaker}: {text}", context]
    return "\n".join(line for line in lines if line)


def date_words(time: str) -> str:
    """A time's date as words (`8 May 2023`), for ranking: questions say dates that way; "" when none."""
    try:
        moment = datetime.strptime(time[:10], "%Y-%m-%d")
    except ValueError:
        return ""
    return f"{moment.day} {moment.strftime('%B')} {moment.year}"


def session_header(session: Session) -> dict:
    """What the index keeps of a session: id, source, title, started, participants, conversation, the number
    of turns and its key terms."""
    header = {"id": session.id, "source": session.source, "title": session.title, "started": session.started,
              "participants": list(session.participants)}
    if session.meta.get("conversation") is not None:
        header["conversation"] = str(session.meta["conversation"])
    header["turns"] = len(session.turns)
    header["terms"] = key_terms(session)
    return header


KEY_TERMS = 6


def key_terms(session: Session, limit: int = KEY_TERMS) -> list[str]:
    """The words a session is most about, from its own text alone (so a one-session change is a one-line
    diff of index/conversations.md): words of four letters or more, not stopwords, chat words or the
    speakers' names, ranked by how many turns use them, then how often, then alphabetically; each shown
    in the spelling used most. A word must be used twice."""
    names = {part.lower() for person in session.participants for part in str(person).split()}
    turns_with: Counter = Counter()
    uses: Counter = Counter()
    spellings: dict[str, Counter] = {}
    for turn in session.turns:
        seen = set()
        for match in KEY_WORD.finditer(turn.text):
            word = match.group()
            key = word.lower().strip("'-")
            if key.endswith("'s"):
                key = key[:-2]
            if len(key) < 4 or key in STOPWORDS or key in CHAT_WORDS or key in names:
                continue
            uses[key] += 1
            spellings.setdefault(key, Counter())[word.strip("'-").removesuffix("'s")] += 1
            if key not in seen:
                seen.add(key)
                turns_with[key] += 1
    ranked = sorted((k for k in uses if uses[k] >= 2), key=lambda k: (-turns_with[k], -uses[k], k))
    return [min(spellings[k].items(), key=lambda item: (-item[1], item[0]))[0] for k in ranked[:limit]]


# ---- the refresh of session files (index.refresh calls these) ----------------------------------------


def refresh_sessions(site: Site, store: NoteStore, report: RefreshReport, progress: Progress | None,
                     temps: list[str] | None = None) -> None:
    """Stat every session file under conversations/, parse the ones whose bytes changed, store their turns
    (hidden temp files found on the way go into temps)."""
    from palace_cli.conversations import session_files

    unit = turn_unit(site.config.retrieval)
    if store.get_meta("turn_unit") != f"{unit} {UNIT_FORMAT}":  # the first refresh, or a new unit: rows made again
        with store.transaction():
            if store.session_stat_map():
                store.forget_sessions()
                store.bump_version()
            store.set_meta("turn_unit", f"{unit} {UNIT_FORMAT}")
    files = session_files(site.root, report.problems, temps)
    known = store.session_stat_map()
    work = [(relpath, mtime_ns, size) for relpath, mtime_ns, size in files
            if known.get(relpath, (None, None))[:2] != (mtime_ns, size)]
    report.unchanged += len(files) - len(work)
    gone = sorted(set(known) - {relpath for relpath, _, _ in files})
    if not work and not gone:
        return
    store.store_in_batches(
        work, SESSIONS_EVERY, lambda item: _read_session(site, store, *item, known.get(item[0]), unit, report),
        gone, store.delete_session, report.removed, progress, "reading sessions", report_every=20)


def _read_session(site: Site, store: NoteStore, relpath: str, mtime_ns: int, size: int, row, unit: str,
                  report: RefreshReport) -> bool:
    """Read one session file whose stat changed; returns True when the cache changed."""
    from palace_cli.conversations import parse_session
    from palace_cli.conversations.sessionfile import read_session_bytes, session_from_bytes

    listed = report.updated if row else report.added
    try:
        data = read_session_bytes(site.root, relpath)
    except NoteError as exc:  # unreadable, or too big to read: reported by every refresh until it changes
        session = parse_session("", relpath)
        store.put_session(relpath, mtime_ns, size, "", session.id, session_header(session), [(None, exc.reason)], [])
        listed.append(relpath)
        return True
    digest = hashlib.sha256(data).hexdigest()[:16]
    if row and row[2] == digest:
        store.touch_session(relpath, mtime_ns, size)
        report.unchanged += 1
        return False
    session = session_from_bytes(data, relpath)
    store.put_session(relpath, mtime_ns, size, digest, session.id, session_header(session),
                      [(p.line, p.message) for p in session.problems], session_rows(session, unit))
    listed.append(relpath)
    return True


def stale_sessions(site: Site, store: NoteStore) -> list[str]:
    """Session files not indexed, changed since indexed, or deleted but still indexed (none without a cache)."""
    from palace_cli.conversations import session_files
    from palace_cli.conversations.sessionfile import read_session_bytes

    known = store.session_stat_map()
    if not known and not store.stat_map():
        return []
    out, seen = [], set()
    for relpath, mtime_ns, size in session_files(site.root):
        seen.add(relpath)
        row = known.get(relpath)
        if row and row[:2] == (mtime_ns, size):
            continue
        try:
            digest = hashlib.sha256(read_session_bytes(site.root, relpath)).hexdigest()[:16]
        except NoteError:
            digest = None
        if row and digest == row[2]:
            continue
        out.append(f"{relpath}: {'changed since indexed' if row else 'not indexed'}")
    return out + [f"{path}: deleted but still indexed" for path in sorted(set(known) - seen)]
