"""End to end: `palace quiz` driven through a pseudo-terminal, keys and all, as a person would use it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pexpect = pytest.importorskip("pexpect")

PALACE_BIN = Path(sys.executable).parent / "palace"
TIMEOUT = 90  # a loaded CI machine; nothing here is timed, this only bounds a hang


def spawn(palace_dir: Path, home: Path, *args: str):
    env = dict(os.environ, PALACE_HOME=str(home), COLUMNS="100", LINES="50", TERM="xterm-256color",
               PALACE_LEARNER="tester")
    env.pop("PALACE_DIR", None)
    return pexpect.spawn(str(PALACE_BIN), ["--palace", str(palace_dir), "quiz", *args], env=env,
                         encoding="utf-8", timeout=TIMEOUT, dimensions=(50, 100))


def reviews(palace_dir: Path) -> list[dict]:
    rows = []
    for path in sorted((palace_dir / "reviews").glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows


def memories_untouched(palace_dir: Path) -> bool:
    status = subprocess.run(["git", "status", "--porcelain", "--", "memories"], cwd=palace_dir,
                            capture_output=True, text=True, check=True).stdout
    return status == ""


@pytest.mark.slow
@pytest.mark.skipif(not PALACE_BIN.exists(), reason="the palace console script is not installed in this venv")
def test_three_question_session_through_a_terminal(example_palace, tmp_path):
    child = spawn(example_palace, tmp_path / "home", "-n", "3", "--seed", "11", "--no-llm", "--strategy", "random")
    child.expect("3 question")
    typed = ["I have no idea", "coordinator", "?"]
    keys = ["3", "2", "4"]  # Good, Hard, Easy: single keys, no Enter
    for answer, key in zip(typed, keys):
        child.expect("answer ›")
        child.sendline(answer)
        child.expect(r"answer: ")  # the Evaluator's verdict, then the expected answer
        child.expect("q = stop")  # the memory is shown, then the rating keys
        child.send(key)
        child.expect("next review")
    child.expect("Session done: 3 review")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    rows = reviews(example_palace)
    assert [r["rating"] for r in rows] == ["good", "hard", "easy"]
    assert all(r["learner"] == "tester" and r["strategy"] == "random" for r in rows)
    assert all(isinstance(r["duration_ms"], int) and r["kind"] for r in rows)
    assert len({r["id"] for r in rows}) == 3
    assert memories_untouched(example_palace)


@pytest.mark.slow
@pytest.mark.skipif(not PALACE_BIN.exists(), reason="the palace console script is not installed in this venv")
def test_ctrl_c_keeps_every_review_already_given(example_palace, tmp_path):
    child = spawn(example_palace, tmp_path / "home", "-n", "5", "--seed", "3", "--no-llm", "--strategy", "random")
    child.expect("answer ›")
    child.sendline("")
    child.expect("q = stop")
    child.send("\r")  # Enter takes the suggested rating (Again for an empty answer)
    child.expect("next review")
    child.expect("answer ›")
    child.sendline("something")
    child.expect("q = stop")
    child.sendintr()  # Ctrl-C while the rating is being chosen
    child.expect("Stopped: 1 review")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    rows = reviews(example_palace)
    assert [r["rating"] for r in rows] == ["again"]
    assert memories_untouched(example_palace)
