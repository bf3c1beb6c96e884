"""`palace bench ask`: rules fitted with each corpus left out, the per-corpus scores, and the command."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from palace_cli.bench.ask import Asked, RULES, decisions, fit, score
from palace_cli.cli import cli

from conftest import REPO

ANSWERS = REPO / "benchmarks" / "example-palace.answers.jsonl"
NEAR = REPO / "benchmarks" / "near-miss.queries.jsonl"


def _asked(corpus, confidence, absent, missing=(), standout=None, cited="m", coverage=0.0):
    item = Asked(corpus, "q", f"{corpus}-{confidence}-{len(missing)}", "direct", [] if absent else ["m"],
                 cited=[cited])
    item.features = {"confidence": confidence, "coverage": coverage, "missing": list(missing), "standout": standout,
                     "relevant": True, "signal": "dense", "sure": True}
    return item


def test_a_rule_is_fitted_on_the_corpora_it_is_given():
    items = [_asked("a", c, True) for c in (0.1, 0.15, 0.2)] + [_asked("a", c, False) for c in (0.4, 0.5, 0.6)]
    (line,) = fit(items, "names held and confidence")
    assert 0.2 < line <= 0.4


def test_names_missing_from_the_evidence_abstain_whatever_the_confidence():
    items = [_asked("a", 0.9, True, missing=["Kyoto"]), _asked("a", 0.9, False)]
    assert decisions(items, "names held and confidence", (0.5,)) == [False, True]


def test_each_corpus_is_decided_by_thresholds_fitted_without_it():
    """Corpus b's absent questions score above every answerable one: a rule fitted on a alone cannot catch them."""
    items = [_asked("a", 0.1 + i / 100, True) for i in range(6)] + [_asked("a", 0.6 + i / 100, False) for i in range(6)]
    items += [_asked("b", 0.95, True) for _ in range(6)] + [_asked("b", 0.6 + i / 100, False) for i in range(6)]
    answered = decisions(items, "names held and confidence", None)
    b = [(a, i) for a, i in zip(answered, items) if i.corpus == "b"]
    assert all(a for a, i in b)  # every b question answered: the absent ones too
    scored = score([i for _, i in b], [a for a, _ in b])
    assert scored["abstention_recall"]["value"] == 0.0 and scored["answered_right"]["value"] == 1.0


def test_score_counts_wrong_citations_among_answers_and_holds_intervals():
    items = [_asked("a", 0.9, False), _asked("a", 0.9, False, cited="other"), _asked("a", 0.1, True)]
    items[0].phrases, items[0].quoted = ["the cap is 1.2 million yen"], "The cap is 1.2 million yen, flights too."
    items[1].gold, items[1].quoted = "7 May 2023", "on 7 May, 2023 she went"
    scored = score(items, [True, True, False])
    assert scored["wrong_citation"]["value"] == 0.5 and scored["answered_right"]["value"] == 0.5
    assert scored["abstention_precision"]["value"] == 1.0 and scored["abstention_recall"]["value"] == 1.0
    assert scored["quote_holds_phrase"]["value"] == 1.0 and scored["gold_in_quote"]["value"] == 1.0
    assert len(scored["wrong_citation"]["ci"]) == 2


def test_every_rule_has_a_grid_and_a_description():
    assert all(grid and description for _, grid, description in RULES.values())


@pytest.fixture
def few(example_palace):
    """Six answerable questions with answer phrases and three absent ones."""
    lines = (example_palace / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    labelled = {json.loads(l)["qid"] for l in ANSWERS.read_text(encoding="utf-8").splitlines()}
    present = [l for l in lines if json.loads(l)["qid"] in labelled][:6]
    absent = [l for l in lines if '"expected": []' in l][:3]
    path = example_palace / "few.jsonl"
    path.write_text("\n".join(present + absent) + "\n", encoding="utf-8")
    near = example_palace / "near.jsonl"
    near.write_text("\n".join(NEAR.read_text(encoding="utf-8").splitlines()[:3]
                              + NEAR.read_text(encoding="utf-8").splitlines()[-2:]) + "\n", encoding="utf-8")
    return path, near


def test_bench_ask_command_scores_each_corpus_and_the_near_misses(readonly_example, few):
    path, near = few
    args = ["bench", "ask", "--set", str(readonly_example), str(path), str(ANSWERS),
            "--set", str(readonly_example), f"{near}#example-palace", "-"]
    result = CliRunner().invoke(cli, args + ["--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    shipped = data["rules"]["names held and (confidence or coverage 0.75) (default)"]["shipped"]
    assert shipped["System Design Palace"]["questions"] == 12 and shipped["System Design Palace"]["absent"] == 6
    assert shipped["near-domain"]["absent"] == 3 and shipped["near-domain"]["answerable"] == 6
    assert "quote_holds_phrase" in shipped["System Design Palace / few"]
    crossed = data["rules"]["names held and confidence"]["cross_validated"]["near-domain"]
    assert crossed["right_vs_default"]["n"] == 9 and len(crossed["right_vs_default"]["ci"]) == 2
    table = CliRunner().invoke(cli, args)
    assert table.exit_code == 0 and "| near-domain | 9 (3) |" in table.output
