"""What the commands print: paths never cut, plain output when piped, --palace anywhere, --json, one budget unit,
plurals, intervals on the quiz's rating keys."""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from palace_cli.cli import cli

PALACE_BIN = Path(sys.executable).parent / "palace"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
BOX = set("┏┃┡│└┗━─╭╮╰╯")


def run(*args, input=None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)


def in_terminal(palace_dir: Path, columns: int, *args: str) -> str:
    """The command's output in a real pseudo-terminal `columns` wide, colours stripped."""
    pexpect = pytest.importorskip("pexpect")
    env = dict(os.environ, COLUMNS=str(columns), LINES="50", TERM="xterm-256color")
    child = pexpect.spawn(str(PALACE_BIN), ["--palace", str(palace_dir), *args], env=env, encoding="utf-8",
                          timeout=120, dimensions=(50, columns))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    return ANSI.sub("", child.before).replace("\r\n", "\n")


@pytest.mark.skipif(not PALACE_BIN.exists(), reason="the palace console script is not installed in this venv")
@pytest.mark.parametrize("columns", [60, 100, 200])
def test_a_table_in_a_terminal_never_cuts_a_path_or_an_id(readonly_palace, columns):
    shown = in_terminal(readonly_palace.root, columns, "list")
    for memory in readonly_palace.scan(light=True).memories.values():
        assert memory.location in shown, (columns, memory.location)
        assert re.search(rf"(?<![\w-]){re.escape(memory.id)}(?![\w-])", shown), (columns, memory.id)


def test_piped_tables_are_plain_lines_never_wrapped(readonly_palace):
    result = run("--palace", readonly_palace.root, "domains")
    lines = result.stdout.splitlines()
    assert len(lines) == 6 and not BOX & set(result.stdout)
    assert max(len(line) for line in lines) > 80  # a description is long and stays on its line
    assert all(len(line.split("\t")) == 4 for line in lines)


def test_piped_due_and_stats_are_plain(palace):
    long_ago = datetime.now(timezone.utc) - timedelta(days=40)
    log = palace.root / "reviews" / "t.jsonl"
    log.write_text("".join(json.dumps({"v": 1, "id": i, "at": long_ago.isoformat(), "rating": "good",
                                       "learner": "person"}) + "\n" for i in ("saga-pattern", "paxos")))
    due = run("--palace", palace.root, "due")
    assert due.exit_code == 0 and not BOX & set(due.stdout)
    rows = [line.split("\t") for line in due.stdout.splitlines()]
    assert sorted(row[0] for row in rows) == ["paxos", "saga-pattern"]
    assert {row[-1] for row in rows} == {"memories/messaging-events/saga-pattern.md", "memories/consensus-coordination/paxos.md"}
    stats = run("--palace", palace.root, "stats")
    assert not BOX & set(stats.stdout) and "memories: 76 · 2 studied · 74 new · 13 superseded (not studied)" in stats.stdout


@pytest.mark.parametrize("args", [["list", "--palace", "{p}"], ["list", "--palace={p}", "-d", "storage"],
                                  ["models", "list", "--palace", "{p}"], ["--palace", "{p}", "list"]])
def test_palace_option_anywhere_on_the_line(readonly_palace, tmp_path, args, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not inside a palace: only the option can name it
    result = run(*[a.format(p=readonly_palace.root) for a in args])
    assert result.exit_code == 0, result.output


def test_palace_option_after_the_command_wins_over_the_one_before(readonly_palace, tmp_path):
    result = run("--palace", tmp_path, "list", "--palace", readonly_palace.root)
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 89


def test_recall_json_is_format_json(readonly_palace):
    by_flag = json.loads(run("--palace", readonly_palace.root, "recall", "why retries need jitter", "--json").stdout)
    by_format = json.loads(run("--palace", readonly_palace.root, "recall", "why retries need jitter",
                               "--format", "json").stdout)
    for data in (by_flag, by_format):
        data.pop("elapsed_ms")
    assert by_flag == by_format and by_flag["hits"]


@pytest.mark.parametrize("budget, limit_bytes", [("150", 600), ("100", 400), ("500B", 500)])
def test_recall_budget_is_tokens_or_bytes_with_b(readonly_palace, budget, limit_bytes):
    data = json.loads(run("--palace", readonly_palace.root, "recall", "how do quorums overlap", "-p", "study",
                          "--budget", budget, "--json").stdout)
    assert 0 < data["context_bytes"] <= limit_bytes
    assert data["context_tokens"] == -(-data["context_bytes"] // 4)


def test_wake_up_budget_takes_the_same_units(readonly_palace):
    tokens = json.loads(run("--palace", readonly_palace.root, "wake-up", "--budget", "150", "--json").stdout)
    same = json.loads(run("--palace", readonly_palace.root, "wake-up", "--budget", "600B", "--json").stdout)
    assert tokens == same and tokens["budget_tokens"] == 150 and tokens["tokens"] <= 150


def test_a_bad_budget_is_a_usage_error(readonly_palace):
    result = CliRunner().invoke(cli, ["--palace", str(readonly_palace.root), "recall", "x", "--budget", "lots"])
    assert result.exit_code == 2 and "not a number of tokens" in result.output


def test_counts_read_as_english(tmp_path):
    from palace_cli import Palace, add_memory, init_palace
    from palace_cli.core.wording import plural

    assert [plural(n, "memory") for n in (0, 1, 2)] == ["0 memories", "1 memory", "2 memories"]
    palace = Palace(init_palace(tmp_path / "kb"))
    add_memory(palace, "Saga", "systems", anchor="relay race", image="A relay race of lemon cakes.",
               content="Compensating steps.")
    palace.refresh()
    assert "1 memory in 1 domain." in (palace.root / "INDEX.md").read_text()
    assert "\n1 memory. " in (palace.root / "index/systems.md").read_text()


def test_the_interval_on_each_rating_key_is_the_one_the_rating_gives(readonly_palace):
    from palace_cli.editing.reviewlog import Review
    from palace_cli.study.scheduler import replay

    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    reviews = [Review("saga", start + timedelta(days=d), 3) for d in (0, 1, 4, 15)]
    for rating in (1, 2, 3, 4):
        schedule = replay(reviews, "person", now=start + timedelta(days=60))
        at = start + timedelta(days=60)
        shown = schedule.preview("saga", at)
        assert schedule.after(Review("saga", at, rating)).due == shown[rating]
    assert shown[1] < shown[2] < shown[3] < shown[4]


@pytest.mark.skipif(not PALACE_BIN.exists(), reason="the palace console script is not installed in this venv")
def test_quiz_keys_show_their_intervals(example_palace, tmp_path):
    pexpect = pytest.importorskip("pexpect")
    env = dict(os.environ, PALACE_HOME=str(tmp_path / "home"), COLUMNS="120", TERM="xterm-256color",
               PALACE_LEARNER="tester")
    child = pexpect.spawn(str(PALACE_BIN), ["--palace", str(example_palace), "quiz", "-n", "1", "--seed", "2",
                                            "--no-llm", "--strategy", "random"],
                          env=env, encoding="utf-8", timeout=120, dimensions=(50, 120))
    child.expect("answer ›")
    child.sendline("no idea")
    child.expect("q = stop")
    keys = re.search(r"1 again (\S+)\s+2 hard (\S+)\s+3 good (\S+)\s+4 easy (\S+)", ANSI.sub("", child.before)).groups()
    child.send("4")
    child.expect(r"next review in (\d+) (\w+)")
    count, unit = child.match.groups()
    child.expect(pexpect.EOF)
    assert keys[3] == f"{count}{unit[0]}"  # "4 easy 8d" then "next review in 8 days"
    assert keys[0] in ("<1m", "1m")
