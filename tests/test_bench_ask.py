"""`palace bench ask`: fitting and cross-validating abstention rules, and the command on a few questions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from palace_cli.bench.ask import Asked, cross_validate, fit, run_ask_bench
from palace_cli.cli import cli

ANSWERS = Path(__file__).resolve().parent.parent / "benchmarks" / "example-palace.answers.jsonl"


def _asked(palace, confidence, coverage, absent):
    item = Asked(palace, f"{palace}-{confidence}-{coverage}", "direct", [] if absent else ["m"])
    item.signals["dense"] = {"confidence": confidence, "coverage": coverage, "top": None if absent else "m"}
    return item


def test_fit_finds_the_threshold_between_absent_and_answerable():
    items = [_asked("a", c, 0.0, True) for c in (0.1, 0.15, 0.2)] + [_asked("a", c, 0.0, False)
                                                                    for c in (0.4, 0.5, 0.6)]
    confidence, coverage = fit(items, "dense", 2.0)
    assert 0.2 < confidence < 0.4 and coverage == 2.0


def test_coverage_rescues_a_low_cosine_answerable_question():
    absent = [_asked("a", c, 0.0, True) for c in (0.1, 0.2, 0.25)]
    answerable = [_asked("a", c, 0.0, False) for c in (0.4, 0.5)] + [_asked("a", 0.15, 0.75, False)]
    confidence, coverage = fit(absent + answerable, "dense", None)
    assert 0.25 < confidence < 0.4 and 0.0 < coverage <= 0.75


def test_cross_validation_is_perfect_on_separable_questions_and_reports_ranges():
    items = [_asked(p, 0.1 + i / 100, 0.0, True) for p in "ab" for i in range(6)]
    items += [_asked(p, 0.6 + i / 100, 0.0, False) for p in "ab" for i in range(12)]
    result = cross_validate(items, "dense", 2.0)
    assert (result["precision"], result["recall"], result["abstained_answerable"]) == (1.0, 1.0, 0)
    low, high = result["confidence_range"]
    assert 0.15 < low <= high < 0.6
    assert result["by_palace"]["b"] == {"answerable": 12, "answered": 12, "absent": 6, "abstained": 6}


def test_cross_validation_counts_each_palace_apart():
    """Palace b's absent questions score above every answerable one: no fold can abstain on them."""
    items = [_asked("a", 0.1 + i / 100, 0.0, True) for i in range(6)]
    items += [_asked("b", 0.95 + i / 1000, 0.0, True) for i in range(6)]
    items += [_asked(p, 0.6 + i / 100, 0.0, False) for p in "ab" for i in range(12)]
    counts = cross_validate(items, "dense", 2.0)["by_palace"]
    assert counts == {"a": {"answerable": 12, "answered": 12, "absent": 6, "abstained": 6},
                      "b": {"answerable": 12, "answered": 12, "absent": 6, "abstained": 0}}


@pytest.fixture
def few(example_palace):
    """Six answerable questions with answer phrases and three absent ones."""
    lines = (example_palace / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    labelled = {json.loads(l)["qid"] for l in ANSWERS.read_text(encoding="utf-8").splitlines()}
    present = [l for l in lines if json.loads(l)["qid"] in labelled][:6]
    absent = [l for l in lines if '"expected": []' in l][:3]
    path = example_palace / "few.jsonl"
    path.write_text("\n".join(present + absent) + "\n", encoding="utf-8")
    return path


def test_run_ask_bench_on_a_few_questions(example_palace, few):
    summary = run_ask_bench([(example_palace, few, None)])
    lexical = summary["abstention"]["lexical"]      # no models configured: lexical only
    assert lexical["questions"] == 9 and lexical["absent"] == 3 and "dense" not in summary["abstention"]
    assert summary["extract"] == {}                  # no answers file: nothing to quote


def test_bench_ask_command_pools_sets_and_quotes(example_palace, few):
    args = ["bench", "ask", "--set", str(example_palace), str(few), str(ANSWERS)]
    result = CliRunner().invoke(cli, args + ["--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    quoted = data["extract"]["System Design Palace"]["e2e"]["terms + position + rank (default)"]
    assert quoted["n"] == 6 and 0.0 <= quoted["hit"] <= 1.0
    table = CliRunner().invoke(cli, args)
    assert "| default: confidence or coverage (in-sample) |" in table.output
    assert "**extractive answers, System Design Palace**" in table.output
    missing = CliRunner().invoke(cli, ["bench", "ask", "--set", str(example_palace), str(few), "nope.jsonl"])
    assert missing.exit_code == 2 and "no such file: nope.jsonl" in missing.output


def test_bench_ask_answer_counts_what_ask_itself_does(example_palace, few):
    result = CliRunner().invoke(cli, ["bench", "ask", "--set", str(example_palace), str(few), "-",
                                      "--answer", "never", "--json"])
    assert result.exit_code == 0, result.output
    asked = json.loads(result.stdout)["ask"]
    assert asked["generate"] == "never"
    groups = asked["System Design Palace"]
    assert groups["answerable"]["questions"] == 6 and groups["absent"]["questions"] == 3
    for group in groups.values():
        assert sum(group["outcomes"].values()) == group["questions"]
        assert set(group["outcomes"]) <= {"grounded extractive", "abstained"}   # never: no model, never ungrounded
        assert group["model_answer_not_used"] == {}
    assert groups["answerable"]["outcomes"].get("grounded extractive", 0) >= 4
