"""The study commands through click: due, stats, quiz without a terminal; and the core/face boundary."""

from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner

from palace_cli.cli import cli


def run(palace_dir, *args, input=None):
    return CliRunner().invoke(cli, ["--palace", str(palace_dir), *args], input=input)


def test_quiz_reads_answers_and_ratings_from_a_pipe(example_palace):
    result = run(example_palace, "quiz", "-n", "2", "--seed", "1", "--no-llm", input="whatever\n3\n\n4\n")
    assert result.exit_code == 0, result.output
    assert "Session done: 2 reviews" in result.output
    rows = [json.loads(line) for path in (example_palace / "reviews").glob("*.jsonl")
            for line in path.read_text(encoding="utf-8").splitlines()]
    assert [r["rating"] for r in rows] == ["good", "easy"]


def test_quiz_stops_cleanly_at_end_of_input(example_palace):
    result = run(example_palace, "quiz", "-n", "3", "--no-llm", input="first\n2\n")
    assert result.exit_code == 0  # end of input (Ctrl-D) or q is a chosen stop; Ctrl-C exits 130
    assert "Stopped: 1 review kept" in result.output


def test_due_and_stats_json(example_palace):
    run(example_palace, "quiz", "-n", "1", "--seed", "2", "--no-llm", input="x\n1\n")
    due = json.loads(run(example_palace, "due", "--json").output)
    assert due["learner"] == "person" and due["new"] == 75 and due["due"] == 0
    stats = json.loads(run(example_palace, "stats", "--json").output)
    assert (stats["reviews"], stats["reviewed"], stats["new"]) == (1, 1, 75)
    assert len(stats["per_day"]) == 14 and stats["per_day"][-1]["reviews"] == 1
    text = run(example_palace, "stats").output
    assert "retention" in text and "coming due" in text
    assert "Nothing due" in run(example_palace, "due").output


def test_unknown_domain_is_an_error_with_the_list(readonly_example):
    result = run(readonly_example, "quiz", "--domain", "astronomy", "--no-llm")
    assert result.exit_code == 1 and "storage-engines" in result.output


def test_study_core_imports_neither_click_nor_rich():
    code = ("import sys, palace_cli.core.smashin, palace_cli.study.session, palace_cli.study.stats, "
            "palace_cli.study.redqueen, palace_cli.study.evolver; "
            "print(sorted(m for m in ('click', 'rich') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
