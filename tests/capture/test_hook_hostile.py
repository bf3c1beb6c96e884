"""The Claude Code hook against hostile input (issue 34): it never blocks, never duplicates, never hides a loss."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conversation_fixtures import SESSION, write_claude_code
from palace_cli.conversations.sessionfile import MAX_SESSION_BYTES, load_session
from test_hook import PALACE, event, run_hook, session_files

# Runs a command and prints its peak resident memory (KB) on the last line of stderr.
PEAK = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(done.returncode)")


def _hook_with_peak(payload: dict, palace: Path) -> tuple[subprocess.CompletedProcess, int]:
    """One hook process and its peak resident memory in MB."""
    done = run_hook(payload, palace, launcher=(sys.executable, "-c", PEAK))
    *said, peak = done.stderr.splitlines()
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout, "\n".join(said) + "\n"), int(peak) // 1024


def _turn_lines(first: int, turns: int, words: int, parent: str | None) -> list[str]:
    """A Claude Code thread of user and assistant records from turn `first` on, each about `words` words."""
    lines = []
    for i in range(first, first + turns):
        for kind in ("user", "assistant"):
            uuid = f"{kind[0]}{i}"
            text = f"{kind} turn {i} " + "word " * words
            content = text if kind == "user" else [{"type": "text", "text": text}]
            record = {"parentUuid": parent, "isSidechain": False, "cwd": "/p", "sessionId": SESSION, "type": kind,
                      "uuid": uuid, "timestamp": f"2025-06-02T18:{i // 60 % 60:02d}:{i % 60:02d}.000Z",
                      "message": {"role": kind, "content": content, **({"id": f"m{i}"} if kind == "assistant" else {})}}
            lines.append(json.dumps(record))
            parent = uuid
    return lines


@pytest.mark.slow
def test_two_to_eight_hooks_at_once_write_one_session_file(palace, tmp_path):
    """Row 4: Stop and SessionEnd (and six more) for a new session at the same instant: one file, every turn once."""
    transcript = write_claude_code(tmp_path / "project")
    events = ["Stop", "SessionEnd", "PreCompact", "Stop", "SessionEnd", "Stop", "Stop", "SessionEnd"]
    with ThreadPoolExecutor(len(events)) as pool:
        done = list(pool.map(lambda name: run_hook(event(name, palace.root, transcript), palace.root), events))
    assert all(d.returncode == 0 for d in done), [d.stderr for d in done]
    files = session_files(palace.root)
    assert len(files) == 1, sorted(files)
    [text] = files.values()
    headers = [line for line in text.split(b"\n") if line.startswith(b"### ")]
    assert len(headers) == len(set(headers))
    lint = subprocess.run([PALACE, "--palace", str(palace.root), "lint"], capture_output=True, text=True)
    assert "duplicate" not in lint.stdout + lint.stderr


def test_a_palace_that_is_a_file_exits_zero(tmp_path):
    """Row 16: `--palace` naming a file is a click usage error (status 2, which Claude Code takes as "blocked")."""
    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    done = run_hook(event("Stop", tmp_path), afile)
    assert done.returncode == 0
    assert done.stderr.startswith("palace hook: ") and done.stderr.count("\n") == 1


def test_a_lock_file_that_is_a_fifo_never_blocks_the_hook(palace, tmp_path):
    """Row 21: `.palace/write.lock` replaced by a FIFO: every event exits 0 with one line (SessionStart hung)."""
    transcript = write_claude_code(tmp_path / "project")
    for name in ("write.lock", "lock"):
        lock = palace.cache_dir / name
        lock.unlink(missing_ok=True)
        os.mkfifo(lock)
        for hook in ("SessionStart", "Stop"):
            done = run_hook(event(hook, palace.root, transcript), palace.root)
            assert done.returncode == 0, done.stderr
            assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) <= 1
        lock.unlink()


@pytest.mark.slow
def test_a_200_mb_transcript_is_read_to_the_cap_in_bounded_memory_and_says_what_it_left(palace, tmp_path):
    """Row 17: Stop on a transcript far over the session size limit: the turns that fit are captured, the line says
    how much was left out and why, memory stays near the cap (1.03 GB for 200 MB), and a rerun changes nothing."""
    small = write_claude_code(tmp_path / "small" / "x")
    _, baseline = _hook_with_peak(event("Stop", palace.root, small), palace.root)
    for f in (palace.root / "conversations").rglob("*.md"):
        f.unlink()
    transcript = tmp_path / "project" / f"{SESSION}.jsonl"
    transcript.parent.mkdir()
    with transcript.open("w", encoding="utf-8") as out:
        first = 0
        while out.tell() < 5 * MAX_SESSION_BYTES:
            out.write("\n".join(_turn_lines(first, 2_000, 240, f"a{first - 1}" if first else None)) + "\n")
            first += 2_000
    done, peak = _hook_with_peak(event("Stop", palace.root, transcript), palace.root)
    assert done.returncode == 0 and done.stderr.count("\n") == 1, done.stderr
    assert "new turns (1 added" in done.stderr
    assert f"is left out: the session file would be over the {MAX_SESSION_BYTES:,} byte limit" in done.stderr
    [(name, text)] = session_files(palace.root).items()
    assert len(text) <= MAX_SESSION_BYTES
    session = load_session(palace.root, f"conversations/claude-code/{name}")
    assert len(session.turns) >= 4_000
    assert peak - baseline < 8 * MAX_SESSION_BYTES / 1e6, (peak, baseline)
    again = run_hook(event("Stop", palace.root, transcript), palace.root)
    assert "0 new turns" in again.stderr and "1 unchanged" in again.stderr and "is left out" in again.stderr
    assert session_files(palace.root) == {name: text}


def _install(project: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PALACE, "hook", *args, "claude-code", "--project"], cwd=project, capture_output=True,
                          text=True, env={**os.environ, "HOME": str(home)})


@pytest.mark.parametrize("settings, said", [
    ({"hooks": {"Stop": [{"hooks": 5}]}}, None),
    ({"hooks": {"Stop": [5, "x", {"hooks": [7, {"command": 3}]}]}}, None),
    ("[" * 50_000 + "]" * 50_000, "nested deeper than palace reads"),
    ('{"hooks": ' + "{\"a\": " * 50_000 + "1" + "}" * 50_001, "nested deeper than palace reads"),
])
def test_odd_and_deep_settings_are_one_line_or_kept(tmp_path, settings, said):
    """Row 14: a group that is not an object of hooks is kept as it is and palace's added beside it; JSON 50,000 deep
    is one line, the file left as it was (TypeError and RecursionError tracebacks)."""
    project = tmp_path / "project"
    path = project / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    text = settings if isinstance(settings, str) else json.dumps(settings)
    path.write_text(text, encoding="utf-8")
    for verb in ("install", "uninstall"):
        done = _install(project, tmp_path / "home", verb)
        assert "Traceback" not in done.stderr
        if said:
            assert done.returncode == 1 and said in done.stderr and done.stderr.count("\n") == 1
            assert path.read_text(encoding="utf-8") == text
    if not said:
        assert json.loads(path.read_text(encoding="utf-8")) == settings  # install then uninstall: as it was


def test_a_symlinked_settings_file_stays_a_link(tmp_path):
    """Row 14: settings.json kept in a dotfiles repository and linked in: the file it names is written, the link
    stays (it was replaced by a file)."""
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    kept = tmp_path / "dotfiles" / "settings.json"
    kept.parent.mkdir()
    kept.write_text(json.dumps({"permissions": {"allow": ["Bash(ls)"]}}), encoding="utf-8")
    link = project / ".claude" / "settings.json"
    link.symlink_to(kept)
    done = _install(project, tmp_path / "home", "install")
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and os.readlink(link) == str(kept)
    data = json.loads(kept.read_text(encoding="utf-8"))
    assert data["permissions"] == {"allow": ["Bash(ls)"]} and len(data["hooks"]) == 4
