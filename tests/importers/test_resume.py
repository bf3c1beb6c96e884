"""A transcript read by its tail gives what reading it whole gives (importers/chats/resume.py): cut anywhere, even
inside a line or a message, and imported again once it grew, the session file has the same turns and header."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conversation_fixtures import SESSION, _cc, claude_code_lines
from palace_cli.conversations.model import Session, Turn
from palace_cli.conversations.sessionfile import (HEADER_BYTES, load_header, load_session, note_holds, parse_header,
                                                  render_session)
from palace_cli.editing.authoring import init
from palace_cli.importers.chats.writer import import_conversations
from palace_cli.palace import Palace


def _assistant(uuid: str, parent: str, blocks: list, message_id: str, ts: str) -> dict:
    record = _cc("assistant", uuid, parent, blocks, ts)
    record["message"].update({"id": message_id, "type": "message"})
    return record


def working_session() -> list[str]:
    """A session of work: thinking, a message in three records, a tool call and its result, a system record, a meta
    record, a file-history snapshot, a sidechain, a compaction boundary (logicalParentUuid)."""
    records = [
        {"type": "file-history-snapshot", "messageId": "u1", "snapshot": {}, "isSnapshotUpdate": False},
        _cc("user", "u1", None, "Why is the build red?", "2025-06-02T18:00:00Z"),
        _assistant("a1", "u1", [{"type": "thinking", "thinking": "Look at CI.", "signature": "s"}], "m1",
                   "2025-06-02T18:00:01Z"),
        _assistant("a2", "a1", [{"type": "text", "text": "Let me look."}], "m1", "2025-06-02T18:00:02Z"),
        _assistant("a3", "a2", [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "make"}}], "m1",
                   "2025-06-02T18:00:03Z"),
        _cc("user", "u2", "a3", [{"type": "tool_result", "tool_use_id": "t1", "content": "1 failed"}],
            "2025-06-02T18:00:04Z"),
        _assistant("a4", "u2", [{"type": "text", "text": "The clock test fails."}], "m2", "2025-06-02T18:00:05Z"),
        dict(_cc("system", "s1", "a4", None, "2025-06-02T18:00:06Z"), content="hook: ok"),
        dict(_cc("user", "u3", "s1", "Caveat: local command output.", "2025-06-02T18:00:07Z"), isMeta=True),
        dict(_cc("user", "x1", None, "find time.time", "2025-06-02T18:00:08Z"), isSidechain=True),
        _cc("user", "u4", "u3", "Freeze the clock then.", "2025-06-02T18:00:09Z"),
        dict(_cc("system", "c1", None, None, "2025-06-02T18:00:10Z"), content="compacted", logicalParentUuid="u4"),
        _cc("user", "u5", "c1", "And the docs?", "2025-06-02T18:00:11Z"),
        _assistant("a5", "u5", [{"type": "text", "text": "Updated."}], "m3", "2025-06-02T18:00:12Z"),
    ]
    return [json.dumps(r) for r in records]


def _sessions(root: Path) -> dict:
    """source id -> session, of every session file."""
    out = {}
    for path in sorted((root / "conversations").rglob("*.md")):
        session = load_session(root, path.relative_to(root).as_posix())
        out[session.source_id] = session
    return out


def _grow_and_import(root: Path, folder: Path, head: bytes, rest: bytes, include: frozenset[str], by_file: bool):
    """Import the transcript's first bytes, then it grown by the rest (appended: the same file), by the file (a
    tail read when it can) or by its folder (always whole); the second import's report."""
    init(root)
    transcript = folder / f"{SESSION}.jsonl"
    folder.mkdir(parents=True)
    transcript.write_bytes(head)
    import_conversations(Palace(root), transcript if by_file else folder, "claude-code", include)
    with transcript.open("ab") as out:
        out.write(rest)
    return import_conversations(Palace(root), transcript if by_file else folder, "claude-code", include)


STAMPED = ("turns", "record", "note")
SOURCES = {"work": working_session, "fixture": claude_code_lines}
# Sidechains included make a second session of a file, which leaves no resume record (the file is read whole).
INCLUDES = {"default": frozenset(), "more": frozenset({"thinking", "tools", "system", "branches"}),
            "sidechains": frozenset({"sidechains"})}


@pytest.mark.slow
@pytest.mark.parametrize("source", sorted(SOURCES))
@pytest.mark.parametrize("include", sorted(INCLUDES))
def test_a_tail_read_gives_what_a_whole_read_gives_wherever_the_transcript_was_cut(tmp_path, source, include):
    data = ("\n".join(SOURCES[source]()) + "\n").encode()
    ends = [n + 1 for n, byte in enumerate(data) if byte == ord("\n")]
    cuts = sorted(set(ends[:-1]) | {end - 7 for end in ends[1:]})  # after each line, and inside the next one
    tails = 0
    for cut in cuts:
        here = tmp_path / str(cut)
        whole = _grow_and_import(here / "a", here / "pa", data[:cut], data[cut:], INCLUDES[include], False)
        tail = _grow_and_import(here / "b", here / "pb", data[:cut], data[cut:], INCLUDES[include], True)
        assert whole.resumed_at is None and tail.counts()["conflict"] == 0
        tails += tail.resumed_at is not None
        ours, theirs = _sessions(here / "b"), _sessions(here / "a")
        assert sorted(ours) == sorted(theirs), cut
        for a, b in ((theirs[key], ours[key]) for key in ours):
            assert [t.key() for t in b.turns] == [t.key() for t in a.turns], cut
            assert b.header() == a.header() and b.preamble == a.preamble, cut
            assert note_holds(b.imported["note"], b), cut
            assert [b.imported[k] for k in STAMPED] == [a.imported[k] for k in STAMPED], cut
    if source == "work" and include != "sidechains":  # the fixture's rewind and summary read it whole
        assert tails >= len(cuts) // 3


def test_a_tail_read_says_what_it_read(tmp_path):
    data = ("\n".join(working_session()) + "\n").encode()
    cut = data.index(b'"u4"')
    cut = data.rindex(b"\n", 0, cut) + 1
    report = _grow_and_import(tmp_path / "kb", tmp_path / "p", data[:cut], data[cut:], frozenset(), True)
    assert report.resumed_at == cut and report.read_bytes <= 9 * 4096 + len(data) - cut
    assert report.as_dict()["resumed_at"] == cut and report.counts()["appended"] == 1


@pytest.mark.parametrize("padding", [0, HEADER_BYTES - 700, HEADER_BYTES - 300, HEADER_BYTES + 50, 3 * HEADER_BYTES])
def test_a_header_read_from_the_head_of_a_file_is_the_whole_files(tmp_path, padding):
    """An import plans against every session file's frontmatter, read from its first bytes when it closes there:
    a frontmatter that ends past them (a long field) is read from the whole file, as it was."""
    session = Session(id="chat-x", source="chat", source_id="x", title="X", meta={"note": "n" * padding},
                      turns=[Turn(f"t{n}", "Ann", "word " * 400) for n in range(200)])
    text = render_session(session)
    path = tmp_path / "conversations" / "chat" / "x.md"
    path.parent.mkdir(parents=True)
    for data in (text, text.replace("\n", "\r\n"), "\ufeff" + text, text[: len(text) // 2]):
        path.write_text(data, encoding="utf-8", newline="")
        head, whole = load_header(tmp_path, "conversations/chat/x.md"), parse_header(data, "conversations/chat/x.md")
        assert (head.header(), head.imported, head.problems) == (whole.header(), whole.imported, whole.problems)
    path.unlink()
    os.mkfifo(path)
    assert load_header(tmp_path, "conversations/chat/x.md").header() == parse_header("", "conversations/chat/x.md").header()
