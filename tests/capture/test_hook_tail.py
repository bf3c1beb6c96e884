"""The Stop hook reads only what a transcript gained since the last import (issue 34: 6-8 s a Stop on a 50,000-turn
session with nothing new), and falls back to the whole read whenever the tail cannot be trusted alone."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conversation_fixtures import SESSION
from palace_cli.conversations.sessionfile import (load_session, note_holds, record_holds, session_digest,
                                                  turns_digest)
from palace_cli.core.noteedit import edit_frontmatter
from palace_cli.editing.authoring import init
from palace_cli.importers.chats.writer import import_conversations
from palace_cli.palace import Palace
from test_hook import event, run_hook
from test_hook_hostile import _turn_lines

READ = re.compile(r"read ([\d,]+) bytes from byte ([\d,]+)\)")
CHECK_BYTES = 9 * 4096  # what a tail read reads to check the bytes before it (resume.py: 8 samples and the last block)


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def transcript_of(tmp_path: Path, pairs: int, words: int = 5) -> Path:
    """A Claude Code transcript of `pairs` user and assistant turns each."""
    path = tmp_path / "project" / f"{SESSION}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(_turn_lines(0, pairs, words, None)) + "\n", encoding="utf-8")
    return path


def grow(path: Path, pairs: int) -> int:
    """Append `pairs` exchanges that carry the thread on; the size the file had before."""
    size = path.stat().st_size
    first = sum(1 for _ in path.open()) // 2
    with path.open("a", encoding="utf-8") as out:
        out.write("\n".join(_turn_lines(first, pairs, 5, f"a{first - 1}")) + "\n")
    return size


def stop(palace: Path, transcript: Path) -> str:
    """One Stop hook process: its summary line."""
    done = run_hook(event("Stop", palace, transcript), palace)
    assert done.returncode == 0 and done.stderr.count("\n") == 1, done.stderr
    return done.stderr


def the_session(root: Path):
    [path] = sorted((root / "conversations").rglob("*.md"))
    return path, load_session(root, path.relative_to(root).as_posix())


def whole_import(tmp_path: Path, transcript: Path, keys: bool = True) -> list:
    """The turns (their keys) a whole import of the transcript into a new palace gives."""
    root = tmp_path / "whole"
    init(root)
    report = import_conversations(Palace(root), transcript, "claude-code")
    assert report.resumed_at is None
    turns = the_session(root)[1].turns
    return [turn.key() for turn in turns] if keys else turns


def holds(session, source: list | None = None) -> bool:
    """The stamp's record and note (carried on turn by turn) are what hashing the source's turns (by default the
    session's) and the whole session give."""
    turns = session.turns if source is None else source
    return record_holds(session.imported["record"], turns) and note_holds(session.imported["note"], session)


@pytest.mark.slow
def test_stop_on_a_50000_turn_session_reads_only_the_tail(palace, tmp_path):
    transcript = transcript_of(tmp_path, 25_000, 20)
    size = transcript.stat().st_size
    first = stop(palace.root, transcript)
    assert "50000 new turns (1 added" in first and f"read whole, {size:,} bytes" in first
    path, _ = the_session(palace.root)
    before = path.read_bytes()
    said = stop(palace.root, transcript)
    read, at = map(_number, READ.search(said).groups())
    assert "0 new turns" in said and at == size and read <= CHECK_BYTES
    assert path.read_bytes() == before
    grown = grow(transcript, 5)
    said = stop(palace.root, transcript)
    read, at = map(_number, READ.search(said).groups())
    assert "10 new turns (0 added, 1 appended" in said and at == grown
    assert read <= CHECK_BYTES + transcript.stat().st_size - grown
    assert "0 new turns" in stop(palace.root, transcript)
    _, session = the_session(palace.root)
    assert len(session.turns) == 50_010 and holds(session)
    assert [turn.key() for turn in session.turns] == whole_import(tmp_path, transcript)


def test_appended_turns_are_imported_once_from_the_tail(palace, tmp_path):
    transcript = transcript_of(tmp_path, 20)
    assert "40 new turns" in stop(palace.root, transcript)
    for pairs in (3, 1):
        grown = grow(transcript, pairs)
        said = stop(palace.root, transcript)
        assert f"{2 * pairs} new turns (0 added, 1 appended" in said and _number(READ.search(said)[2]) == grown
    path, session = the_session(palace.root)
    again = stop(palace.root, transcript)
    assert "0 new turns" in again and READ.search(again) and path.read_bytes() == the_session(palace.root)[0].read_bytes()
    assert holds(session) and session.imported["turns"] == 48
    assert [turn.key() for turn in session.turns] == whole_import(tmp_path, transcript)


def _rewrite_middle(path: Path) -> None:
    """Turn 10's text replaced in place (the file keeps its inode), longer than it was."""
    path.write_text(path.read_text().replace("user turn 10 ", "user turn 10 was rewritten "), encoding="utf-8")


def _rewrite_same_size(path: Path) -> None:
    """One character of turn 10 changed in place: the same size, the same inode."""
    path.write_text(path.read_text().replace("user turn 10 word", "user turn 10 ward"), encoding="utf-8")


def _replace_with_grown_copy(path: Path) -> None:
    """The transcript replaced by another file (a new inode) holding its turns and one more exchange."""
    copy = path.with_suffix(".tmp")
    copy.write_bytes(path.read_bytes())
    grow(copy, 1)
    os.replace(copy, path)


def _rewrite_and_grow(path: Path) -> None:
    """Turn 10 rewritten in place (its length changes, so every later byte moves), then the session goes on."""
    _rewrite_middle(path)
    grow(path, 2)


@pytest.mark.parametrize("change", [_rewrite_middle, _rewrite_same_size, _replace_with_grown_copy, _rewrite_and_grow])
def test_a_transcript_changed_before_the_tail_is_read_whole(palace, tmp_path, change):
    transcript = transcript_of(tmp_path, 20)
    stop(palace.root, transcript)
    change(transcript)
    said = stop(palace.root, transcript)
    assert "read whole" in said and "0 conflicts" in said, said
    _, session = the_session(palace.root)
    assert [turn.key() for turn in session.turns] == whole_import(tmp_path, transcript) and holds(session)
    assert READ.search(stop(palace.root, transcript))  # the whole read left a record: the next Stop reads a tail


def test_a_truncated_transcript_is_read_whole_and_nothing_is_doubled(palace, tmp_path):
    transcript = transcript_of(tmp_path, 20)
    stop(palace.root, transcript)
    lines = transcript.read_text().splitlines()
    transcript.write_text("\n".join(lines[:10] + _turn_lines(100, 2, 5, "a4")) + "\n", encoding="utf-8")
    said = stop(palace.root, transcript)
    assert "read whole" in said and "0 conflicts" in said, said
    _, session = the_session(palace.root)
    ids = [turn.id for turn in session.turns]
    assert len(ids) == len(set(ids)) == 44  # the 40 the file had (a file keeps its turns) and the 4 new ones
    assert {"u100", "a100", "u101", "a101"} <= set(ids) and holds(session, whole_import(tmp_path, transcript, False))


TAILS = {
    "a rewind": lambda first: _turn_lines(first, 1, 5, "a3"),
    "a summary": lambda first: [json.dumps({"type": "summary", "summary": "Clock tests", "leafUuid": "a2"})],
    "the last message going on": lambda first: [json.dumps(
        {"parentUuid": f"a{first - 1}", "type": "assistant", "uuid": "more", "sessionId": SESSION,
         "timestamp": "2025-06-02T19:00:00.000Z",
         "message": {"role": "assistant", "id": f"m{first - 1}", "content": [{"type": "text", "text": "and more"}]}})],
}


@pytest.mark.parametrize("tail", sorted(TAILS))
def test_a_tail_that_does_not_stand_alone_is_read_whole(palace, tmp_path, tail):
    transcript = transcript_of(tmp_path, 20)
    stop(palace.root, transcript)
    with transcript.open("a", encoding="utf-8") as out:
        out.write("\n".join(TAILS[tail](20)) + "\n")
    said = stop(palace.root, transcript)
    assert "read whole" in said and "0 conflicts" in said, said
    _, session = the_session(palace.root)
    whole = whole_import(tmp_path, transcript, False)
    have = [turn.key() for turn in session.turns]
    assert all(turn.key() in have for turn in whole) and len({key[0] for key in have}) == len(have)
    assert holds(session, whole)


def test_an_old_stamp_is_read_then_carried_on(palace, tmp_path):
    """A session file stamped before the resume record (one hash over every turn, no `resume`) is read whole once,
    its stamp given a record, then read by tail; turns appended meanwhile are imported once."""
    transcript = transcript_of(tmp_path, 20)
    stop(palace.root, transcript)
    path, session = the_session(palace.root)
    stamp = {"from": session.imported["from"], "turns": 40, "record": turns_digest(session.turns),
             "note": session_digest(session)}
    path.write_text(edit_frontmatter(path.read_text(), {"imported": stamp}, "s.md"), encoding="utf-8")
    assert "resume" not in the_session(palace.root)[1].imported
    grow(transcript, 1)
    said = stop(palace.root, transcript)
    assert "2 new turns (0 added, 1 appended" in said and "read whole" in said
    assert "resume" in the_session(palace.root)[1].imported
    grow(transcript, 1)
    assert "2 new turns" in stop(palace.root, transcript)
    _, session = the_session(palace.root)
    assert [turn.key() for turn in session.turns] == whole_import(tmp_path, transcript) and holds(session)


@pytest.mark.slow
def test_eight_hooks_at_once_on_a_grown_session_append_each_turn_once(palace, tmp_path):
    transcript = transcript_of(tmp_path, 20)
    stop(palace.root, transcript)
    grow(transcript, 3)
    events = ["Stop", "SessionEnd", "PreCompact", "Stop", "SessionEnd", "Stop", "Stop", "SessionEnd"]
    with ThreadPoolExecutor(len(events)) as pool:
        done = list(pool.map(lambda name: run_hook(event(name, palace.root, transcript), palace.root), events))
    assert all(d.returncode == 0 for d in done), [d.stderr for d in done]
    assert sum(d.stderr.count("6 new turns") for d in done) == 1, [d.stderr for d in done]
    _, session = the_session(palace.root)
    assert [turn.key() for turn in session.turns] == whole_import(tmp_path, transcript) and holds(session)


# The hook in a child that kills itself (SIGKILL) at its first session file write: before it lands, or just after.
KILLED = """
import os, signal, sys
import palace_cli.importers.chats.writer as w
from palace_cli.cli import main
real, after = w.atomic_write, sys.argv[1] == "after"
def write(*args, **kwargs):
    if after:
        real(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
w.atomic_write = write
sys.argv = ["palace", *sys.argv[2:]]
sys.exit(main())
"""


@pytest.mark.parametrize("when", ["before", "after"])
def test_kill_9_in_a_tail_import_then_a_rerun_leaves_each_turn_once(palace, tmp_path, when):
    transcript = transcript_of(tmp_path, 20)
    stop(palace.root, transcript)
    grow(transcript, 2)
    killed = subprocess.run([sys.executable, "-c", KILLED, when, "hook", "claude-code", "--palace", str(palace.root)],
                            input=json.dumps(event("Stop", palace.root, transcript)), capture_output=True, text=True,
                            timeout=120)
    assert killed.returncode == -9
    said = stop(palace.root, transcript)
    assert ("4 new turns" if when == "before" else "0 new turns") in said and READ.search(said)
    _, session = the_session(palace.root)
    assert [turn.key() for turn in session.turns] == whole_import(tmp_path, transcript) and holds(session)


HOSTILE_RECORDS = [
    "not a record",
    {"at": -1, "line": 0, "file": "x", "size": 0, "mtime": 0, "sample": "", "include": [], "state": {}},
    "same file, junk state",
    "same file, at past the end",
]


@pytest.mark.parametrize("hostile", range(len(HOSTILE_RECORDS)))
def test_a_hand_edited_resume_record_reads_whole_and_exits_zero(palace, tmp_path, hostile):
    transcript = transcript_of(tmp_path, 20)
    stop(palace.root, transcript)
    path, session = the_session(palace.root)
    record = dict(session.imported["resume"])
    value = HOSTILE_RECORDS[hostile]
    if value == "same file, junk state":
        value = {**record, "state": {"leaf": ["a"], "pending": "u1", "message": {"x": 1}}}
    elif value == "same file, at past the end":
        value = {**record, "at": 10 ** 12, "line": 10 ** 9}
    stamp = {**session.imported, "resume": value}
    path.write_text(edit_frontmatter(path.read_text(), {"imported": stamp}, "s.md"), encoding="utf-8")
    grow(transcript, 1)
    said = stop(palace.root, transcript)
    assert "2 new turns" in said and "read whole" in said, said
    _, session = the_session(palace.root)
    assert [turn.key() for turn in session.turns] == whole_import(tmp_path, transcript) and holds(session)


def test_a_hand_edit_survives_a_tail_import_and_stays_an_edit(palace, tmp_path):
    """Turns appended from the tail leave a hand edit as it is, and the carried `note` still tells the file was
    edited: a later change of the source's old turns is a conflict, never written over the edit."""
    transcript = transcript_of(tmp_path, 20)
    stop(palace.root, transcript)
    path, _ = the_session(palace.root)
    path.write_text(path.read_text().replace("user turn 3 word", "user turn 3 (my note) word"), encoding="utf-8")
    grow(transcript, 1)
    said = stop(palace.root, transcript)
    assert "2 new turns (0 added, 1 appended" in said and READ.search(said)
    _, session = the_session(palace.root)
    assert "(my note)" in session.turns[6].text and len(session.turns) == 42
    assert not note_holds(session.imported["note"], session)
    _rewrite_middle(transcript)
    said = stop(palace.root, transcript)
    assert "read whole" in said and "1 conflicts" in said, said
    assert "(my note)" in the_session(palace.root)[1].turns[6].text
