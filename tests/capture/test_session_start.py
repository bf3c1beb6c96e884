"""SessionStart as Claude Code runs it (a process): the palace's core memories, then the recent decisions and
conventions of the session's project (judged by its cwd), then the most important; whole sentences, no empty
heading, within the token budget; and on anything that goes wrong, exit 0 with one line and no context."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from palace_cli.capture.claude_code import WAKE_UP_TOKENS
from palace_cli.editing.authoring import init_palace, write_plain_memory
from palace_cli.memory.distill import distill
from palace_cli.palace import Palace
from palace_cli.search.profiles import tokens_of

PALACE = str(Path(sys.executable).with_name("palace"))
SHOP, CLOCK = "/home/me/code/shop", "/home/me/code/clock"
SHOP_SAID = [
    ("user", "Decision: we keep the audit logs for 90 days, because the auditors ask for a full quarter."),
    ("assistant", "Understood. I will set the retention to 90 days in the config."),
    ("user", "We use ruff for linting, with a line length of 100, in this repository."),
    ("assistant", "Noted, I will run ruff before each commit."),
    ("user", "Make sure the output is sorted."),
    ("assistant", "Sorted it."),
]
CLOCK_SAID = [
    ("user", "Decision: the clock service stores every time in UTC, because daylight saving broke the tests twice."),
    ("assistant", "Agreed, I will convert at the edges only."),
]


def transcript(path: Path, cwd: str, session: str, said: list[tuple[str, str]]) -> Path:
    """A Claude Code session file run in `cwd`: one record per turn, each the child of the one before."""
    lines, parent = [], None
    for number, (role, text) in enumerate(said):
        uuid = f"{session[:8]}-{number}"
        content = text if role == "user" else [{"type": "text", "text": text}]
        record = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": cwd,
                  "sessionId": session, "version": "2.0.61", "gitBranch": "main", "type": role, "uuid": uuid,
                  "timestamp": f"2025-06-02T18:{40 + number}:00.000Z", "message": {"role": role, "content": content}}
        if role == "assistant":
            record["message"].update({"id": f"msg-{uuid}", "model": "claude-sonnet-4", "type": "message"})
        lines.append(json.dumps(record))
        parent = uuid
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def hook(payload, root: Path | None, *options: str) -> subprocess.CompletedProcess:
    command = [PALACE, "hook", "claude-code", *options] + (["--palace", str(root)] if root else [])
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run(command, input=data, capture_output=True, text=True, timeout=120)


def context_of(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)["hookSpecificOutput"]
    assert output["hookEventName"] == "SessionStart"
    return output["additionalContext"]


def whole(context: str) -> None:
    """Every heading has lines under it, and no line is cut (distilled subjects end in `…`)."""
    lines = context.splitlines()
    assert "…" not in context and "Domains: ." not in context
    for number, line in enumerate(lines):
        if line.endswith(":"):
            assert number + 1 < len(lines) and lines[number + 1].startswith("- "), context


@pytest.mark.slow
def test_session_start_brings_core_then_this_projects_decisions(tmp_path):
    root = init_palace(tmp_path / "kb", name="Work")
    write_plain_memory(Palace(root), "Ada reviews every schema change", "team",
                       "Ada reviews every schema change before it is merged.", core=True)
    for cwd, session, said in ((SHOP, "11111111-aaaa-4bbb-8ccc-000000000001", SHOP_SAID),
                               (CLOCK, "22222222-aaaa-4bbb-8ccc-000000000002", CLOCK_SAID)):
        path = transcript(tmp_path / "projects" / session[:8] / f"{session}.jsonl", cwd, session, said)
        stop = {"hook_event_name": "Stop", "session_id": session, "cwd": cwd, "transcript_path": str(path)}
        done = hook(stop, root)
        assert done.returncode == 0 and "new turns" in done.stderr, done.stderr
    kinds = {m["kind"] for m in distill(Palace(root)).written}
    assert {"decision", "convention"} <= kinds

    shop = context_of(hook({"hook_event_name": "SessionStart", "session_id": "new", "cwd": f"{SHOP}/src"}, root))
    whole(shop)
    core = shop.index("Ada reviews every schema change")
    project = shop.index("Recent decisions and conventions of this project:")
    assert core < project < shop.index("we keep the audit logs for 90 days, because the auditors ask for a full "
                                       "quarter.") and "line length of 100, in this repository." in shop
    section = shop[project:].split("\n\n")[0].split("Most important")[0]
    assert "UTC" not in section and "sorted" not in shop  # another project's decision is not this one's
    assert tokens_of(shop) <= WAKE_UP_TOKENS < 1500

    clock = context_of(hook({"hook_event_name": "SessionStart", "session_id": "new", "cwd": CLOCK}, root))
    section = clock[clock.index("Recent decisions and conventions of this project:"):].split("Most important")[0]
    assert "stores every time in UTC" in section and "audit logs" not in section
    elsewhere = context_of(hook({"hook_event_name": "SessionStart", "session_id": "new", "cwd": "/srv/other"}, root))
    whole(elsewhere)
    assert "of this project" not in elsewhere and elsewhere.index("Ada reviews") < elsewhere.index("audit logs")


def test_session_start_in_an_empty_palace_says_so_in_a_sentence(tmp_path):
    root = init_palace(tmp_path / "empty", name="Empty")
    context = context_of(hook({"hook_event_name": "SessionStart", "session_id": "s", "cwd": str(root)}, None))
    assert context == "# Empty\nThis is Empty, a memory palace with no memories yet.\n"


def test_session_start_past_its_deadline_starts_the_session_without_context(readonly_example):
    payload = {"hook_event_name": "SessionStart", "session_id": "s", "cwd": str(readonly_example)}
    done = hook(payload, readonly_example, "--deadline", "0.000001")
    assert done.returncode == 0 and done.stdout == ""
    assert "no wake-up context this time: it took over 1e-06 s" in done.stderr and done.stderr.count("\n") == 1
    assert context_of(hook(payload, readonly_example))  # the default deadline leaves room for it


def test_session_start_exits_zero_on_anything(tmp_path):
    for payload in ("", "{", "null", json.dumps({"hook_event_name": "SessionStart"}),
                    json.dumps({"hook_event_name": "SessionStart", "cwd": 7}),
                    json.dumps({"hook_event_name": "SessionStart", "cwd": str(tmp_path / "none")})):
        done = hook(payload, None)
        assert done.returncode == 0 and done.stdout == "" and done.stderr.count("\n") == 1, (payload, done.stderr)
