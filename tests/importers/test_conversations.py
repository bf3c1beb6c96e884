"""Conversation readers (Claude Code, ChatGPT, Claude.ai, LoCoMo, chat text) and the session file format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conversation_fixtures import (CHAT, SESSION, chatgpt_conversations, claude_ai_conversations, claude_code_lines,
                                   locomo_samples, write_chatgpt, write_claude_code)

from palace_cli.conversations import parse_session, render_session
from palace_cli.importers.formats import read_conversations
from palace_cli.importers.chats.locomo import locomo_time
from palace_cli.conversations.model import Session, Turn
from palace_cli.core.dates import iso_time
from palace_cli.conversations.sessionfile import session_digest
from palace_cli.importers.chats.reading import tool_line
from palace_cli.importers import detect_format
from palace_cli.errors import UsageError

EVERYTHING = frozenset({"thinking", "tools", "system", "branches", "sidechains", "attachments"})


@pytest.fixture
def sources(tmp_path) -> dict[str, Path]:
    """One source of each format, written into tmp_path."""
    write_claude_code(tmp_path / "project")
    write_chatgpt(tmp_path / "chatgpt-export")
    (tmp_path / "claude-export").mkdir()
    (tmp_path / "claude-export" / "conversations.json").write_text(json.dumps(claude_ai_conversations()))
    (tmp_path / "locomo.json").write_text(json.dumps(locomo_samples()))
    (tmp_path / "standup.txt").write_text(CHAT)
    return {"claude-code": tmp_path / "project", "chatgpt": tmp_path / "chatgpt-export",
            "claude-ai": tmp_path / "claude-export", "locomo": tmp_path / "locomo.json",
            "chat-markdown": tmp_path / "standup.txt"}


def turns(session: Session) -> list[tuple[str, str, str | None]]:
    return [(t.id, t.speaker, t.time) for t in session.turns]


# ---- Claude Code ---------------------------------------------------------------------------------


def test_claude_code_keeps_the_thread_and_says_what_it_left_out(sources):
    result = read_conversations(sources["claude-code"], "claude-code")
    assert [str(p) for p in result.problems] == [
        (f"{sources['claude-code'] / (SESSION + '.jsonl')}:8: not valid JSON (Unterminated string starting at, "
         "column 201); "
         "line left out")]
    assert len(result.sessions) == 1
    session = result.sessions[0]
    assert (session.source, session.source_id, session.title) == ("claude-code", SESSION, "Fix the flaky clock test")
    assert session.meta == {"cwd": "/home/me/code/clock", "git_branch": "main"}
    assert turns(session) == [("u1", "user", "2025-06-02T18:46:59Z"), ("a1", "assistant", "2025-06-02T18:47:01Z"),
                              ("a5", "assistant", "2025-06-02T18:47:20Z"), ("u4", "user", "2025-06-02T18:50:00Z")]
    # message msg_1: its thinking record is left out, its text and tool call records make one turn, named
    # after its first record (so the id is the same with --include thinking)
    assert session.turns[1].text == "Let me run the test.\n\n[tool: Bash — pytest tests/test_clock.py -x]"
    assert session.turns[1].role == "assistant"
    assert dict(result.left_out) == {"thinking": 1, "tools": 1, "system": 2, "branches": 1, "sidechains": 2}


def test_claude_code_includes_on_request(sources):
    result = read_conversations(sources["claude-code"], "claude-code", EVERYTHING)
    main, branch, side = result.sessions
    assert [t.id for t in main.turns] == ["u1", "a1", "u2/tool", "a5", "s1", "u3", "u4"]
    assert main.turns[1].text.startswith("<thinking>\nProbably time zones.\n</thinking>\n\nLet me run the test.")
    assert main.turns[2].text == "[tool result: Bash]\n1 failed: expected 09:00, got 10:00"
    assert (main.turns[2].speaker, main.turns[2].role) == ("tool", "tool")
    assert (main.turns[4].text, main.turns[4].role) == ("PostToolUse hook: ok", "system")
    assert [t.id for t in branch.turns] == ["ub"] and branch.meta["forks_at"] == "a5"
    assert branch.meta["branch_of"] == main.id and branch.source_id == f"{SESSION}/branch-ub"
    assert [t.text for t in side.turns] == ["Find every use of time.time()", "Three uses, all in clock.py."]
    assert not result.left_out


def test_a_subagent_file_is_a_sidechain(tmp_path):
    line = json.loads(claude_code_lines()[-3])  # the sidechain's first record
    (tmp_path / "agent-1a2b.jsonl").write_text(json.dumps(line) + "\n")
    write_claude_code(tmp_path)
    result = read_conversations(tmp_path, "claude-code")
    assert [s.source_id for s in result.sessions] == [SESSION]
    assert result.left_out["sidechains"] == 3


# ---- ChatGPT -----------------------------------------------------------------------------------


def test_chatgpt_follows_current_node_up_to_the_root(sources):
    result = read_conversations(sources["chatgpt"], "chatgpt")
    lisbon, porto = result.sessions
    assert [t.id for t in lisbon.turns] == ["n1", "n2", "n3", "n4", "n5"]  # not n2a, n3old, n4old
    assert lisbon.turns[2].time is None  # create_time: null
    assert lisbon.turns[3].text == "[tool: browser — search('best seafood Lisbon')]"
    assert (lisbon.title, lisbon.started, lisbon.meta) == ("Lisbon trip", "2024-05-29T16:26:40Z", {"model": "gpt-4o"})
    assert [t.text for t in porto.turns] == ["Is Porto worth a day trip?", "Yes: the Ribeira and a port cellar."]
    [problem] = result.problems
    line = (sources["chatgpt"] / "conversations.json").read_text().split("\n").index(' {', 5) + 1
    assert (problem.line, problem.message) == (
        line, "conversation 2: 6f1c2d3e-0000-4000-8000-000000000002: no `mapping`; left out")
    assert dict(result.left_out) == {"system": 1, "thinking": 1, "tools": 1, "branches": 3}


def test_chatgpt_branches_become_their_own_sessions_on_request(sources):
    result = read_conversations(sources["chatgpt"], "chatgpt", frozenset({"branches"}))
    ids = [(s.source_id.split("/")[-1], [t.id for t in s.turns], s.meta.get("forks_at")) for s in result.sessions]
    assert ids == [("6f1c2d3e-0000-4000-8000-000000000001", ["n1", "n2", "n3", "n4", "n5"], None),
                   ("branch-n2a", ["n2a"], "n1"), ("branch-n3old", ["n3old", "n4old"], "n2"),
                   ("6f1c2d3e-0000-4000-8000-000000000003", ["p1", "p2"], None)]
    assert result.sessions[1].title == "Lisbon trip (edited-away branch)"


def test_chatgpt_edited_question_is_the_thread_when_current(tmp_path):
    conversations = chatgpt_conversations()
    conversations[0]["current_node"] = "n4old"
    write_chatgpt(tmp_path, conversations)
    lisbon = read_conversations(tmp_path, "chatgpt").sessions[0]
    assert [t.id for t in lisbon.turns] == ["n1", "n2", "n3old", "n4old"]


def test_chatgpt_file_cut_short_keeps_what_came_before(tmp_path):
    file = write_chatgpt(tmp_path)
    text = file.read_text()
    cut = text[: text.index('"Porto"') + 20]
    file.write_text(cut)
    result = read_conversations(tmp_path, "chatgpt")
    assert [s.title for s in result.sessions] == ["Lisbon trip"]
    problem = result.problems[-1]
    assert problem.line == cut.count("\n") + 1  # where the file stops
    assert problem.message.endswith("this record and the rest of the file left out")


# ---- Claude.ai -----------------------------------------------------------------------------------


def test_claude_ai_export(sources):
    result = read_conversations(sources["claude-ai"], "claude-ai")
    starter, proof = result.sessions
    assert turns(starter) == [("m1", "user", "2024-05-01T09:00:01Z"), ("m2", "assistant", "2024-05-01T09:00:09Z")]
    assert starter.turns[0].text == "My starter smells like acetone.\n\n[attachment: feeding-log.txt]"
    assert starter.turns[1].text == "It is hungry: feed it twice a day.\n\n[tool: web_search — sourdough acetone]"
    assert (proof.title, [t.text for t in proof.turns]) == ("How long to proof?",
                                                            ["How long to proof?", "About four hours at 24 C."])
    assert dict(result.left_out) == {"attachments": 1, "thinking": 1, "tools": 1}
    full = read_conversations(sources["claude-ai"], "claude-ai", EVERYTHING).sessions[0]
    assert "day 1: fed 50 g flour" in full.turns[0].text and "<thinking>" in full.turns[1].text
    assert full.turns[2].text == "[tool result: web_search]\nr"


# ---- LoCoMo ------------------------------------------------------------------------------------


def test_locomo_sessions_keep_dia_ids_dates_and_photos(sources):
    result = read_conversations(sources["locomo"], "locomo")
    assert [(s.id, s.started) for s in result.sessions] == [
        ("locomo-conv-1-s01", "2023-05-08T13:56"), ("locomo-conv-1-s02", "2023-06-19T10:04"),
        ("locomo-conv-2-s01", "2024-01-03T20:30")]  # session 3 has a date and no turns
    first = result.sessions[0]
    assert (first.participants, first.meta, first.source_id) == (["Ana", "Ben"], {"conversation": "conv-1"},
                                                                 "conv-1/session_1")
    assert [t.id for t in first.turns] == ["D1:1", "D1:2", "D1:3"]
    assert first.turns[2].text == "Here he is.\n[shares a photo: a photo of a brown dog on a beach]"
    assert all(t.time is None and first.time_of(t) == "2023-05-08T13:56" for t in first.turns)
    assert [str(p) for p in result.problems] == [f"{sources['locomo']}:1: conv-1 session_2[1]: no dia_id; left out"]


@pytest.mark.parametrize("text, expected", [
    ("1:56 pm on 8 May, 2023", "2023-05-08T13:56"),
    ("10:04 am on 19 June, 2023", "2023-06-19T10:04"),
    ("12:09 am on 1 January, 2024", "2024-01-01T00:09"),
    ("sometime in May", None),
])
def test_locomo_time(text, expected):
    assert locomo_time(text) == expected


# ---- chat text ---------------------------------------------------------------------------------


def test_chat_text_speakers_dates_and_continuations(sources):
    [session] = read_conversations(sources["chat-markdown"], "chat-markdown").sessions
    assert (session.id, session.title, session.started) == ("chat-standup", "Standup, week 12", "2024-03-01")
    assert turns(session) == [("chat-standup#1", "Alice", "2024-03-01T09:02"), ("chat-standup#2", "Bob", "2024-03-01"),
                              ("chat-standup#3", "Alice", "2024-03-01"), ("chat-standup#4", "Bob", "2024-03-04T09:15"),
                              ("chat-standup#5", "Carol", "2024-03-04")]
    assert session.turns[1].text == "on it; it is the flaky clock test\n  it reads the wall clock"
    assert session.turns[2].text == "thanks\n\n### not a turn · just text · x"
    assert session.turns[3].text == "fixed: froze the clock\nBuild is now: green"  # a one-off label of three words


def test_chat_time_without_a_date_stays_in_the_text(tmp_path):
    (tmp_path / "c.md").write_text("[10:02] Ann: hi\nBo: hello\nAnn: bye\n")
    [session] = read_conversations(tmp_path / "c.md", "chat-markdown").sessions
    assert [(t.speaker, t.time, t.text) for t in session.turns] == [
        ("Ann", None, "[10:02] hi"), ("Bo", None, "hello"), ("Ann", None, "bye")]


def test_a_palace_session_file_is_read_as_itself(tmp_path, sources):
    session = read_conversations(sources["locomo"], "locomo").sessions[0]
    (tmp_path / "exported.md").write_text(render_session(session))
    [again] = read_conversations(tmp_path / "exported.md", "chat-markdown").sessions
    assert (again.id, again.source, again.source_id) == (session.id, "locomo", session.source_id)
    assert [t.key() for t in again.turns] == [t.key() for t in session.turns]


# ---- detection ---------------------------------------------------------------------------------


def test_detect(sources, tmp_path):
    for format, path in sources.items():
        assert detect_format(path) == format
    assert detect_format(sources["chatgpt"] / "conversations.json") == "chatgpt"
    assert detect_format(sources["claude-code"] / f"{SESSION}.jsonl") == "claude-code"
    (tmp_path / "note.md").write_text("# DNS\n\nNote: resolvers cache answers.\n")
    assert detect_format(tmp_path / "note.md") == "markdown"
    with pytest.raises(UsageError, match="cannot include"):
        read_conversations(sources["locomo"], "locomo", frozenset({"everything"}))


# ---- the session file --------------------------------------------------------------------------


@pytest.mark.parametrize("format", ["claude-code", "chatgpt", "claude-ai", "locomo", "chat-markdown"])
@pytest.mark.parametrize("include", [frozenset(), EVERYTHING])
def test_parse_reads_back_exactly_what_render_wrote(sources, format, include):
    for session in read_conversations(sources[format], format, include).sessions:
        text = render_session(session)
        again = parse_session(text, f"conversations/{session.source}/{session.stem}.md")
        assert again.problems == []
        assert [(t.key(), t.role, t.line) for t in again.turns] == [(t.key(), t.role, t.line) for t in session.turns]
        assert session_digest(again) == session_digest(session)
        assert render_session(again) == text
        lines = text.split("\n")
        assert all(lines[t.line - 1].startswith(f"### {t.speaker} · ") and lines[t.line - 1].endswith(t.id)
                   for t in again.turns)


def test_text_that_looks_like_a_header_is_escaped_and_restored():
    texts = ["### Bob · 2024-01-01 · x1", "\\### Bob · x2", "\\\\### a · b", "### plain heading", "a · b"]
    session = Session("chat-t", "chat", "t", "T", turns=[Turn("t1", "Ann", "\n".join(texts))])
    text = render_session(session)
    assert "\n\\### Bob · 2024-01-01 · x1\n\\\\### Bob · x2\n\\\\\\### a · b\n### plain heading\n" in text
    [turn] = parse_session(text, "conversations/chat/t.md").turns
    assert turn.text == "\n".join(texts)


SESSION_TEXT = """---
id: chat-t
source: chat
source_id: t
title: T
started: '2024-03-01'
participants: [Ann, Bo]
imported: {from: 'chat-markdown:t.txt', turns: 3, record: 0, note: 0}
---
# T

### Ann · 2024-03-01T09:00 · t#1
one

### Bo · 2024-03-01 · t#2
two
### Ann · t#3


three
"""


def test_parse_forgives_spacing_and_reports_what_it_cannot_read():
    session = parse_session(SESSION_TEXT, "conversations/chat/t.md")
    assert session.problems == []
    assert [(t.id, t.line, t.text) for t in session.turns] == [("t#1", 12, "one"), ("t#2", 15, "two"),
                                                               ("t#3", 17, "three")]
    broken = SESSION_TEXT.replace("### Bo · 2024-03-01 · t#2", "### Bo · 2024-03-01").replace("### Ann · t#3", "### Ann · t#1")
    session = parse_session(broken, "conversations/chat/t.md")
    assert [str(p) for p in session.problems] == [
        ("conversations/chat/t.md:15: looks like a turn header (`### speaker · time · id`) but has no readable turn "
         "id; read as text of the turn before"),
        "conversations/chat/t.md:17: turn id 't#1' is also on line 12"]
    assert [t.text for t in session.turns] == ["one\n\n### Bo · 2024-03-01\ntwo", "three"]


def test_parse_survives_broken_frontmatter_crlf_and_no_frontmatter():
    broken = SESSION_TEXT.replace("participants: [Ann, Bo]", "participants: [Ann, Bo")
    session = parse_session(broken, "conversations/chat/broken.md")
    [problem] = session.problems
    assert problem.line == 8  # where the YAML parser gave up, as for notes
    assert problem.message.startswith("frontmatter is not valid YAML")
    assert (session.id, session.source, len(session.turns)) == ("chat-broken", "chat", 3)
    crlf = parse_session(SESSION_TEXT.replace("\n", "\r\n"), "conversations/chat/t.md")
    assert crlf.problems == [] and [t.text for t in crlf.turns] == ["one", "two", "three"]
    bare = parse_session("### Ann · t#1\nhello\n", "conversations/chat/bare.md")
    assert [str(p) for p in bare.problems] == [
        "conversations/chat/bare.md:1: no frontmatter (`---` lines); id and source taken from the path"]
    assert (bare.id, bare.turns[0].text) == ("chat-bare", "hello")


@pytest.mark.parametrize("value, expected", [
    (1717000000.5, "2024-05-29T16:26:40Z"),
    ("2025-06-02T18:46:59.937Z", "2025-06-02T18:46:59Z"),
    ("2024-05-01T09:00:01.123456+00:00", "2024-05-01T09:00:01Z"),
    ("2024-05-01T09:00:01+02:00", "2024-05-01T09:00:01+02:00"),
    ("2024-05-01 09:00", "2024-05-01T09:00"),
    ("2024-05-01", "2024-05-01"),
    (None, None), ("", None), ("yesterday", None), (True, None),
])
def test_iso_time(value, expected):
    assert iso_time(value) == expected


@pytest.mark.parametrize("name, arguments, expected", [
    ("Bash", {"command": "ls -la\n/tmp", "description": "list"}, "[tool: Bash — ls -la /tmp]"),
    ("Read", {"file_path": "/a/b.py"}, "[tool: Read — /a/b.py]"),
    ("TodoWrite", {"todos": []}, "[tool: TodoWrite]"),
    ("python", "x" * 200, "[tool: python — " + "x" * 79 + "…]"),
])
def test_tool_line(name, arguments, expected):
    assert tool_line(name, arguments) == expected
