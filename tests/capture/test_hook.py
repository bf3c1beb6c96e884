"""`palace hook claude-code` as Claude Code runs it (a process, JSON on stdin), and `palace hook install`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import READ_ONLY_LAUNCHER, needs_namespace
from conversation_fixtures import SESSION, claude_code_lines, write_claude_code
from palace_cli.capture.settings import hook_command, install, is_ours, settings_path, uninstall
from palace_cli.cli import cli

PALACE = str(Path(sys.executable).with_name("palace"))


def run_hook(payload, palace_dir: Path | None = None, launcher=(), cwd=None) -> subprocess.CompletedProcess:
    """One hook process: the payload (a dict, or raw text) on stdin."""
    command = [*launcher, PALACE, "hook", "claude-code"] + (["--palace", str(palace_dir)] if palace_dir else [])
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run(command, input=data, capture_output=True, text=True, timeout=120, cwd=cwd)


def event(name: str, palace: Path, transcript: Path | None = None) -> dict:
    payload = {"session_id": SESSION, "hook_event_name": name, "cwd": str(palace)}
    if transcript is not None:
        payload["transcript_path"] = str(transcript)
    return payload


def session_files(palace: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((palace / "conversations").rglob("*.md"))}


def test_session_start_hands_the_wake_up_context(readonly_example):
    done = run_hook(event("SessionStart", readonly_example))
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    context = output["hookSpecificOutput"]["additionalContext"]
    assert output["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert context.startswith("# ") and "Most important memories:" in context and "id:" in context


def test_pre_compact_stop_and_session_end_import_new_turns_only(example_palace, tmp_path):
    lines = claude_code_lines()
    transcript = write_claude_code(tmp_path / "project", lines[:9])
    first = run_hook(event("PreCompact", example_palace, transcript), example_palace)
    assert first.returncode == 0 and first.stdout == ""
    assert "new turns" in first.stderr
    [(name, before)] = session_files(example_palace).items()
    transcript.write_text("\n".join(lines) + "\n", encoding="utf-8")  # the session grew
    grown = run_hook(event("Stop", example_palace, transcript), example_palace)
    assert grown.returncode == 0 and "appended" in grown.stderr
    after = session_files(example_palace)[name]
    turns = [line for line in before.split(b"\n") if line.startswith(b"### ")]
    assert turns and all(line in after.split(b"\n") for line in turns)
    assert b"Thanks, that fixed it." in after and b"Thanks, that fixed it." not in before
    again = run_hook(event("SessionEnd", example_palace, transcript), example_palace)
    assert again.returncode == 0 and "0 new turns" in again.stderr
    assert session_files(example_palace)[name] == after


def test_the_palace_is_found_from_the_sessions_cwd(example_palace, tmp_path):
    transcript = write_claude_code(tmp_path / "project")
    inside = example_palace / "memories"
    done = run_hook(event("PreCompact", inside, transcript), cwd=tmp_path)
    assert done.returncode == 0 and str(example_palace) in done.stderr
    assert session_files(example_palace)


@pytest.mark.parametrize("payload, said", [
    ("{not json", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    (json.dumps({"hook_event_name": "UserPromptSubmit", "cwd": "."}), "is not one palace handles"),
    (json.dumps({"hook_event_name": "PreCompact", "cwd": "/"}), "not inside a palace"),
])
def test_bad_input_is_one_line_and_exit_zero(payload, said):
    done = run_hook(payload)
    assert done.returncode == 0 and done.stdout == ""
    assert said in done.stderr and done.stderr.count("\n") == 1


def test_a_missing_transcript_is_one_line(readonly_example, tmp_path):
    done = run_hook(event("PreCompact", readonly_example, tmp_path / "gone.jsonl"), readonly_example)
    assert done.returncode == 0 and "no such transcript" in done.stderr and done.stderr.count("\n") == 1
    no_path = run_hook(event("SessionEnd", readonly_example), readonly_example)
    assert no_path.returncode == 0 and "no transcript_path" in no_path.stderr
    assert not (readonly_example / "conversations").exists()


def test_a_busy_palace_is_left_alone(palace, tmp_path):
    """A hook waits a few seconds at most (WAIT_S) for a lock another process holds, then says so: the write lock
    held keeps an import out (SessionStart reads, and needs none); the refresh lock held keeps out both."""
    from palace_cli.index.locks import file_lock, write_lock

    transcript = write_claude_code(tmp_path / "project")
    with write_lock(palace.site, "palace distill"):  # another palace process writing
        done = run_hook(event("PreCompact", palace.root, transcript), palace.root)
        start = run_hook(event("SessionStart", palace.root), palace.root)
    assert done.returncode == 0 and "busy" in done.stderr and "imported next time" in done.stderr
    assert "palace distill" in done.stderr and done.stderr.count("\n") == 1
    assert start.returncode == 0 and json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
    assert not (palace.root / "conversations").exists()
    with file_lock(palace.cache_dir / "lock", "refresh lock"):  # another process refreshing the index
        start = run_hook(event("SessionStart", palace.root), palace.root)
    assert start.returncode == 0 and start.stdout == "" and "no wake-up context" in start.stderr


@needs_namespace
def test_a_read_only_palace_is_one_line(readonly_example, tmp_path):
    transcript = write_claude_code(tmp_path / "project")
    done = run_hook(event("PreCompact", readonly_example, transcript), readonly_example,
                    launcher=(*READ_ONLY_LAUNCHER, str(readonly_example)))
    assert done.returncode == 0 and done.stdout == ""
    assert "Read-only file system" in done.stderr and done.stderr.count("\n") == 1
    start = run_hook(event("SessionStart", readonly_example), readonly_example,
                     launcher=(*READ_ONLY_LAUNCHER, str(readonly_example)))
    assert start.returncode == 0 and json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]


# ---- install and uninstall -------------------------------------------------------------------------------

THEIRS = {
    "permissions": {"allow": ["Bash(npm test:*)"]},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo checking"}]}],
        "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "git status"}]}],
    },
}


def test_install_merges_and_uninstall_restores(tmp_path):
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps(THEIRS), encoding="utf-8")
    command = hook_command(tmp_path / "kb", executable="/opt/bin/palace")
    change = install(path, command)
    assert change.added == ["SessionStart", "PreCompact", "SessionEnd", "Stop"] and not change.kept
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["permissions"] == THEIRS["permissions"]
    assert data["hooks"]["PreToolUse"] == THEIRS["hooks"]["PreToolUse"]
    assert data["hooks"]["SessionStart"][0] == THEIRS["hooks"]["SessionStart"][0]
    ours = data["hooks"]["Stop"][0]["hooks"][0]
    assert ours["type"] == "command" and ours["command"] == f"/opt/bin/palace hook claude-code --palace {tmp_path}/kb"
    again = install(path, command)
    assert again.kept == change.added and not again.added
    assert json.loads(path.read_text(encoding="utf-8")) == data
    removed = uninstall(path)
    assert removed.removed == change.added
    assert json.loads(path.read_text(encoding="utf-8")) == THEIRS
    assert uninstall(path).removed == []


def test_broken_settings_are_left_as_they_are(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text("{broken", encoding="utf-8")
    with pytest.raises(Exception, match="cannot read it as JSON"):
        install(path, "palace hook claude-code")
    assert path.read_text(encoding="utf-8") == "{broken"
    path.write_text(json.dumps({"hooks": {"Stop": {"not": "a list"}}}), encoding="utf-8")
    with pytest.raises(Exception, match="event lists"):
        uninstall(path)


@pytest.mark.parametrize("command, ours", [
    ("palace hook claude-code", True), ("/usr/local/bin/palace hook claude-code --palace '/a b'", True),
    ("palace recall x", False), ("other hook claude-code", False), ("echo 'unclosed", False), (None, False),
])
def test_which_commands_are_palaces(command, ours):
    assert is_ours(command) is ours


def test_cli_install_project_and_user(readonly_palace, tmp_path, monkeypatch):
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    runner = CliRunner()
    done = runner.invoke(cli, ["--palace", str(readonly_palace.root), "hook", "install", "claude-code", "--json"])
    assert done.exit_code == 0, done.output
    change = json.loads(done.output)
    assert change["path"] == str(settings_path("project", project)) and len(change["added"]) == 4
    assert change["command"].endswith(f"hook claude-code --palace {readonly_palace.root}")
    user = runner.invoke(cli, ["hook", "install", "claude-code", "--user"])
    assert user.exit_code == 0, user.output
    assert "each session's hooks use the palace around the session's directory" in user.output
    written = json.loads((tmp_path / "home" / ".claude" / "settings.json").read_text(encoding="utf-8"))
    assert written["hooks"]["PreCompact"][0]["hooks"][0]["command"].endswith("hook claude-code")
    gone = runner.invoke(cli, ["hook", "uninstall", "claude-code", "--project"])
    assert gone.exit_code == 0 and "removed from SessionStart, PreCompact, SessionEnd, Stop" in gone.output
    assert json.loads((project / ".claude" / "settings.json").read_text(encoding="utf-8")) == {}
    assert os.path.exists(tmp_path / "home" / ".claude" / "settings.json")


def test_the_hook_writes_no_secret_and_says_how_many(palace, tmp_path):
    lines = claude_code_lines()
    record = json.loads(lines[2])
    key = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e"
    record["message"]["content"] = f"Deploy with {key} <private>and my home address</private>please."
    lines[2] = json.dumps(record)
    transcript = write_claude_code(tmp_path / "project", lines)
    done = run_hook(event("Stop", palace.root, transcript), palace.root)
    assert done.returncode == 0 and "; 2 secrets redacted" in done.stderr, done.stderr
    written = b"".join(session_files(palace.root).values())
    assert key.encode() not in written and b"home address" not in written
    assert b"Deploy with [redacted] please." in written


def test_the_hook_writes_no_password_said_in_words(palace, tmp_path):
    lines = claude_code_lines()
    record = json.loads(lines[2])
    record["message"]["content"] = "ok also the redis password is Tr0ub4dor&3xyz, keep it safe."
    lines[2] = json.dumps(record)
    done = run_hook(event("Stop", palace.root, write_claude_code(tmp_path / "project", lines)), palace.root)
    assert done.returncode == 0 and "; 1 secret" in done.stderr, done.stderr
    written = b"".join(session_files(palace.root).values())
    assert b"Tr0ub4dor" not in written and b"the redis password is [redacted], keep it safe." in written
