"""palace import of conversations: session files, idempotence, appends, conflicts, the CLI, the LoCoMo dev set."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SHARED
from conversation_fixtures import (CHAT, SESSION, chatgpt_conversations, claude_code_lines, locomo_samples,
                                   write_chatgpt, write_claude_code)

from palace_cli.editing.authoring import init_palace
from palace_cli.cli import cli
from palace_cli.conversations import load_session, parse_session, session_files
from palace_cli.importers.chats import writer as importer
from palace_cli.errors import UsageError
from palace_cli.importers import import_path
from palace_cli.editing.lint import lint
from palace_cli.palace import Palace
from palace_cli.search.retrieve import search

LOCOMO = SHARED / "data" / "locomo" / "locomo-dev5.json"


@pytest.fixture
def empty(tmp_path) -> Palace:
    return Palace(init_palace(tmp_path / "p", name="Conversations"))


def files(palace: Palace) -> dict[str, tuple[bytes, int]]:
    """Every session file: bytes and mtime."""
    return {rel: ((palace.root / rel).read_bytes(), mtime) for rel, mtime, _ in session_files(palace.root)}


def claude_code(tmp_path: Path, lines: list[str]) -> Path:
    write_claude_code(tmp_path / "project", lines)
    return tmp_path / "project"


def grown_lines(extra: int = 2) -> list[str]:
    """The fixture session with `extra` more exchanges after u4."""
    lines = claude_code_lines()
    parent = "u4"
    for n in range(extra):
        kind = "assistant" if n % 2 == 0 else "user"
        record = json.loads(lines[2])
        record.update({"type": kind, "uuid": f"g{n}", "parentUuid": parent, "timestamp": f"2025-06-02T19:0{n}:00Z"})
        record["message"] = {"role": kind, "content": f"grown turn {n}"}
        if kind == "assistant":
            record["message"]["id"] = f"msg_g{n}"
        lines.append(json.dumps(record))
        parent = f"g{n}"
    return lines


def test_each_format_lands_under_conversations_source(empty, tmp_path):
    write_chatgpt(tmp_path / "gpt")
    (tmp_path / "locomo.json").write_text(json.dumps(locomo_samples()))
    (tmp_path / "standup.txt").write_text(CHAT)
    for source, format in ((claude_code(tmp_path, claude_code_lines()), "claude-code"), (tmp_path / "gpt", "chatgpt"),
                           (tmp_path / "locomo.json", "locomo"), (tmp_path / "standup.txt", "chat-markdown")):
        report = import_path(empty, source)
        assert report.format == format and report.counts()["added"] == len(report.sessions) > 0
    assert sorted(files(empty)) == [
        "conversations/chat/standup.md",
        "conversations/chatgpt/2024-05-29-lisbon-trip-6f1c2d3e.md",
        "conversations/chatgpt/2024-05-29-porto-6f1c2d3e.md",
        "conversations/claude-code/2025-06-02-fix-the-flaky-clock-test-0c3b1a52.md",
        "conversations/locomo/conv-1-s01.md", "conversations/locomo/conv-1-s02.md", "conversations/locomo/conv-2-s01.md"]
    session = load_session(empty.root, "conversations/claude-code/2025-06-02-fix-the-flaky-clock-test-0c3b1a52.md")
    assert session.problems == [] and [t.id for t in session.turns] == ["u1", "a1", "a5", "u4"]
    assert session.imported == {"from": "claude-code:project", "turns": 4, "record": session.imported["record"],
                                "note": session.imported["note"], "resume": session.imported["resume"]}
    assert session.imported["resume"]["at"] == next((tmp_path / "project").rglob("*.jsonl")).stat().st_size
    assert lint(empty).problems == []  # session files are not stray notes, and they read cleanly


def test_reimport_changes_no_byte_and_no_mtime(empty, tmp_path):
    project = claude_code(tmp_path, claude_code_lines())
    import_path(empty, project)
    before = files(empty)
    report = import_path(empty, project)
    assert report.counts() == {"sessions": 1, "added": 0, "appended": 0, "updated": 0, "skipped": 1, "conflict": 0,
                               "refused": 0, "turns_written": 0}
    assert files(empty) == before


def test_a_grown_session_gets_its_new_turns_appended(empty, tmp_path):
    project = claude_code(tmp_path, claude_code_lines())
    import_path(empty, project)
    [(relpath, (old, _))] = files(empty).items()
    claude_code(tmp_path, grown_lines())
    report = import_path(empty, project)
    assert [(o.action, o.written, o.turns) for o in report.sessions] == [("appended", 2, 6)]
    new = (empty.root / relpath).read_text()
    body = old.decode().split("---\n", 2)[2]
    assert new.split("---\n", 2)[2].startswith(body)  # every turn block as it was, new ones after
    session = parse_session(new, relpath)
    assert [t.id for t in session.turns] == ["u1", "a1", "a5", "u4", "g0", "g1"]
    assert new.split("\n")[session.turns[-1].line - 1] == "### user · 2025-06-02T19:01:00Z · g1"
    assert session.imported["turns"] == 6


def test_a_hand_edit_is_kept_when_the_session_grows(empty, tmp_path):
    project = claude_code(tmp_path, claude_code_lines())
    import_path(empty, project)
    [relpath] = files(empty)
    path = empty.root / relpath
    edited = path.read_text().replace("Thanks, that fixed it.", "Thanks, that fixed it (it was DST).")
    edited = edited.replace("### user · 2025-06-02T18:46:59Z · u1\nThe clock test fails on CI; why?\n\n", "")
    path.write_text(edited)
    assert import_path(empty, project).counts()["skipped"] == 1  # a deleted turn is not brought back
    assert path.read_text() == edited
    claude_code(tmp_path, grown_lines())
    report = import_path(empty, project)
    assert [o.action for o in report.sessions] == ["appended"] and report.conflicts == []
    text = path.read_text()
    assert text.startswith(edited.split("imported:")[0]) and edited.split("---\n", 2)[2] in text
    assert [t.id for t in parse_session(text, relpath).turns] == ["a1", "a5", "u4", "g0", "g1"]
    # The file stays marked as edited: when the source changes a turn it gave before, every turn where the
    # two differ is a conflict (the stamp cannot tell which side changed which), and nothing is written.
    changed = [line.replace("grown turn 0", "grown turn zero") for line in grown_lines()]
    claude_code(tmp_path, changed)
    report = import_path(empty, project)
    lines = {t.id: t.line for t in parse_session(text, relpath).turns}
    assert [(c.turn, c.line) for c in report.conflicts] == [("u4", lines["u4"]), ("g0", lines["g0"]), ("u1", None)]
    assert path.read_text() == text


def test_an_edited_turn_is_never_overwritten(empty, tmp_path):
    write_chatgpt(tmp_path / "gpt")
    import_path(empty, tmp_path / "gpt")
    relpath = "conversations/chatgpt/2024-05-29-lisbon-trip-6f1c2d3e.md"
    path = empty.root / relpath
    path.write_text(path.read_text().replace("Try Cervejaria Ramiro for seafood.", "Ramiro: book ahead!"))
    edited = path.read_bytes()
    conversations = chatgpt_conversations()
    conversations[0]["mapping"]["n5"]["message"]["content"]["parts"] = ["Try Ramiro or Cervejaria Trindade."]
    write_chatgpt(tmp_path / "gpt", conversations)
    report = import_path(empty, tmp_path / "gpt")
    [conflict] = report.conflicts
    line = edited.decode().split("\n").index("### assistant · 2024-05-29T16:26:49Z · n5") + 1
    assert str(conflict) == (f"{relpath}:{line}: chatgpt-6f1c2d3e-0000-4000-8000-000000000001 turn n5: differs from "
                             "the source, which changed turns it had given before, and the file was edited since it "
                             "was imported; left as it is")
    assert path.read_bytes() == edited
    assert [o.action for o in report.sessions] == ["conflict", "skipped"]


def test_an_untouched_session_follows_the_source(empty, tmp_path):
    write_chatgpt(tmp_path / "gpt")
    import_path(empty, tmp_path / "gpt")
    conversations = chatgpt_conversations()
    conversations[0]["current_node"] = "n4old"  # the person went back and asked about Porto instead
    conversations[0]["title"] = "Lisbon and Porto"
    write_chatgpt(tmp_path / "gpt", conversations)
    report = import_path(empty, tmp_path / "gpt")
    assert [(o.action, o.written) for o in report.sessions] == [("updated", 2), ("skipped", 0)]
    session = load_session(empty.root, "conversations/chatgpt/2024-05-29-lisbon-trip-6f1c2d3e.md")
    # the source's thread, with the turns only the palace still has kept after the turn they followed
    assert [t.id for t in session.turns] == ["n1", "n2", "n3", "n4", "n5", "n3old", "n4old"]
    assert session.title == "Lisbon and Porto"
    assert import_path(empty, tmp_path / "gpt").counts()["skipped"] == 2


def test_a_file_without_a_stamp_is_not_taken_over(empty, tmp_path):
    write_chatgpt(tmp_path / "gpt")
    import_path(empty, tmp_path / "gpt")
    path = empty.root / "conversations/chatgpt/2024-05-29-porto-6f1c2d3e.md"
    path.write_text(re.sub(r"imported: .*\n", "", path.read_text()))
    report = import_path(empty, tmp_path / "gpt")
    assert [c.reason.split(",")[0] for c in report.conflicts] == ["this session's file has no import stamp (`imported`)"]
    assert len(session_files(empty.root)) == 2


def test_dry_run_writes_nothing(empty, tmp_path):
    report = import_path(empty, claude_code(tmp_path, claude_code_lines()), dry_run=True)
    assert report.dry_run and report.counts()["added"] == 1 and files(empty) == {}


def test_import_refuses_its_own_conversations_and_note_options(empty, tmp_path):
    write_chatgpt(tmp_path / "gpt")
    import_path(empty, tmp_path / "gpt")
    with pytest.raises(UsageError, match="inside this palace's conversations/"):
        import_path(empty, empty.root / "conversations" / "chatgpt")
    with pytest.raises(UsageError, match="--domain is for memory imports"):
        import_path(empty, tmp_path / "gpt", domain="x")


def test_lint_reports_a_broken_turn_header(empty, tmp_path):
    (tmp_path / "locomo.json").write_text(json.dumps(locomo_samples()))
    import_path(empty, tmp_path / "locomo.json")
    path = empty.root / "conversations/locomo/conv-1-s01.md"
    path.write_text(path.read_text().replace("### Ben · D1:2", "### Ben · "))
    problems = lint(empty).problems  # and index/conversations.md is stale: the session lost a turn
    [problem] = [p for p in problems if p.path.startswith("conversations/")]
    assert [(p.path, p.code) for p in problems if p not in [problem]] == [("index/conversations.md", "stale-index")]
    assert (problem.path, problem.code, problem.severity) == ("conversations/locomo/conv-1-s01.md",
                                                              "session-unreadable", "error")
    assert path.read_text().split("\n")[problem.line - 1] == "### Ben · "


# ---- CLI ---------------------------------------------------------------------------------------


def test_cli_json_counts_problems_and_left_out(empty, tmp_path):
    project = claude_code(tmp_path, claude_code_lines())
    runner = CliRunner()
    args = ["--palace", str(empty.root), "import", str(project), "--json"]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["counts"] == {"sessions": 1, "added": 1, "appended": 0, "updated": 0, "skipped": 0, "conflict": 0,
                              "refused": 0, "turns_written": 4}
    assert data["left_out"] == {"branches": 1, "sidechains": 2, "system": 2, "thinking": 1, "tools": 1}
    assert data["problems"] == [(f"{project / (SESSION + '.jsonl')}:8: not valid JSON (Unterminated string "
                                 "starting at, column 201); line left out")]
    assert f"{SESSION}.jsonl:8: not valid JSON" in result.stderr
    again = runner.invoke(cli, ["--palace", str(empty.root), "import", str(project), "--format", "claude-code",
                                "--include", "thinking", "--include", "tools"])
    assert again.exit_code == 0, again.output
    assert "1 session: 0 added, 0 appended, 1 updated, 0 skipped (unchanged), 0 with conflicts" in again.stdout
    assert "left out (see --include): branches 1, sidechains 2, system 2" in again.stdout


def test_cli_conflict_exits_1_and_usage_errors_exit_2(empty, tmp_path):
    write_chatgpt(tmp_path / "gpt")
    runner = CliRunner()
    base = ["--palace", str(empty.root), "import"]
    assert runner.invoke(cli, base + [str(tmp_path / "gpt")]).exit_code == 0
    path = empty.root / "conversations/chatgpt/2024-05-29-porto-6f1c2d3e.md"
    path.write_text(path.read_text().replace("port cellar", "port lodge"))
    conversations = chatgpt_conversations()
    conversations[2]["mapping"]["p2"]["message"]["content"]["parts"] = ["Yes, go."]
    write_chatgpt(tmp_path / "gpt", conversations)
    result = runner.invoke(cli, base + [str(tmp_path / "gpt")])
    assert result.exit_code == 1 and "conflict: conversations/chatgpt/2024-05-29-porto-6f1c2d3e.md:" in result.stdout
    assert runner.invoke(cli, base + [str(tmp_path / "gpt"), "--include", "everything"]).exit_code == 2
    wrong = runner.invoke(cli, base + [str(tmp_path / "gpt"), "--format", "markdown", "--include", "tools"])
    assert wrong.exit_code == 2 and "--include is for conversation formats" in wrong.stderr


def test_a_session_over_the_size_cap_is_refused_by_import_and_reported_by_refresh(empty, tmp_path, monkeypatch):
    write_chatgpt(tmp_path / "gpt")
    scratch = Palace(init_palace(tmp_path / "scratch", name="Scratch"))  # what an import writes, uncapped
    import_path(scratch, tmp_path / "gpt")
    sizes = {rel: size for rel, _, size in session_files(scratch.root)}
    cap = (min(sizes.values()) + max(sizes.values())) // 2  # between the smallest and the biggest session file
    monkeypatch.setattr(importer, "MAX_SESSION_BYTES", cap)
    result = CliRunner().invoke(cli, ["--palace", str(empty.root), "import", str(tmp_path / "gpt")])
    assert result.exit_code == 1, result.output
    written = {rel for rel, _, _ in session_files(empty.root)}
    assert written == {rel for rel, size in sizes.items() if size <= cap} and written != set(sizes)
    refused = sorted(set(sizes) - written)
    assert f"{len(refused)} refused (too big)" in result.stdout
    assert f"{refused[0]}: the session file would be {sizes[refused[0]]:,} bytes, over the {cap:,} byte" in result.stderr
    # A file that arrives some other way (a pull) and is over the reader's cap: reported, never read whole.
    kept = empty.root / sorted(written)[0]
    huge = kept.with_name("huge.md")
    huge.write_bytes(kept.read_bytes().replace(b"\nid: ", b"\nid: huge-", 1))
    os.truncate(huge, 40_000_000)  # sparse: no disk, and the reader refuses on the size before reading
    report = empty.refresh()
    problem = next(p for p in report.problems if p.path.endswith("huge.md"))
    assert (problem.code, problem.message) == (
        "session-unreadable", "file is 40,000,000 bytes, over the 32,000,000 byte limit for a session file")
    assert any("huge.md" in str(p) and "byte limit" in str(p) for p in lint(empty).problems)
    words = load_session(empty.root, sorted(written)[0]).turns[0].text
    assert {h.path for h in search(empty, words, mode="lexical").hits} & written  # the others are indexed


# ---- the LoCoMo dev set --------------------------------------------------------------------------


@pytest.mark.skipif(not LOCOMO.is_file(), reason=f"{LOCOMO} is absent (the shared data is not in a user's clone)")
def test_locomo_dev_set_every_turn_lands_with_its_dia_id(empty):
    samples = json.loads(LOCOMO.read_text())
    expected = {}
    for sample in samples:
        conversation = sample["conversation"]
        for key, entries in conversation.items():
            if re.fullmatch(r"session_\d+", key):
                for entry in entries:
                    expected[(sample["sample_id"], entry["dia_id"])] = entry
    report = import_path(empty, LOCOMO)
    assert report.problems == [] and report.counts()["turns_written"] == len(expected) == 2760
    found = {}
    for relpath, _, _ in session_files(empty.root):
        text = (empty.root / relpath).read_text()
        session = parse_session(text, relpath)
        assert session.problems == [] and session.started is not None
        lines = text.split("\n")
        for turn in session.turns:
            entry = expected[(session.meta["conversation"], turn.id)]
            assert lines[turn.line - 1] == f"### {entry['speaker']} · {turn.id}"
            caption = f"\n[shares a photo: {' '.join(entry['blip_caption'].split())}]" if entry.get("blip_caption") else ""
            said = "\n".join(line.rstrip() for line in entry["text"].split("\n")).strip("\n")  # verbatim but line ends
            assert turn.text == said + caption
            found[(session.meta["conversation"], turn.id)] = turn
    assert set(found) == set(expected)
    assert import_path(empty, LOCOMO).counts()["skipped"] == report.counts()["sessions"]


def test_a_session_file_from_elsewhere_cannot_write_outside_conversations(empty, tmp_path):
    text = ("---\nid: x-1\nsource: ../../memories/evil\nsource_id: one\ntitle: T\nstarted: null\n"
            "participants: [Ann]\n---\n### Ann · t1\nhello\n")
    (tmp_path / "Odd Name.md").write_text(text)
    report = import_path(empty, tmp_path / "Odd Name.md")
    assert [o.path for o in report.sessions] == ["conversations/memories-evil/odd-name.md"]
    assert not (empty.root / "memories" / "evil").exists()
