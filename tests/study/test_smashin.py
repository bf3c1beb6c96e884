"""The SMASHIN SCOPE scorer: cues per factor, evidence locations, agreement with hand labels, lint, evolve."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from palace_cli.cli import cli
from palace_cli.editing.lint import lint
from palace_cli.palace import Palace
from palace_cli.core.smashin import FACTOR_KEYS, agreement, detect, score_memory

from conftest import DATA

LABELS = DATA / "smashin_labels.jsonl"


def present(text: str) -> set[str]:
    return {f.key for f in detect(text) if f.present}


@pytest.mark.parametrize("text, factor, expected", [
    ("You push the door.", "interact", True),
    ('The priest asks, "Can you promise?"', "interact", False),  # a character speaking, not the learner
    ("A giant kettle.", "oversize", True),
    ("A kettle the size of a house.", "oversize", True),
    ("A kettle.", "oversize", False),
    ("The room smells of burnt toast.", "sensory", True),
    ("A bell rings twice.", "sensory", True),
    ("Ten rowboats are tied to iron rings.", "sensory", False),
    ("A mustard-yellow tuxedo.", "color", True),
    ("You black out before the bell.", "color", False),
    ("Forty-seven couples.", "numbers", True),
    ("One by one they leave.", "numbers", False),
    ("A lamp on the left wall, a clock above the door.", "position", True),
    ("There are no cars left.", "position", False),
    ("An octopus bartender pours.", "absurd", True),
    ("A hamster in a tuxedo sprints.", "humor", True),
    ("A clerk stamps it DONE.", "symbols", True),
    ("A trough marked 'homepage'.", "symbols", True),
    ("The clerk files the form.", "symbols", False),
    ("He trips on his shoelace.", "humor", True),
    ("The crowd panics.", "emotion", True),
    ("The crowd waits.", "emotion", False),
    ("The waiter sprints to the kitchen.", "movement", True),
    ("The waiter stands.", "movement", False),
])
def test_factor_cues(text, factor, expected):
    assert (factor in present(text)) is expected


def test_evidence_points_at_the_cue_in_the_note_file(readonly_palace):
    memory = readonly_palace.memory("two-phase-commit")
    lines = (readonly_palace.root / memory.path).read_text(encoding="utf-8").splitlines()
    result = score_memory(memory)
    checked = 0
    for item in result.factors:
        for evidence in item.evidence:
            line = lines[evidence.line - 1]
            assert line[evidence.column - 1 :].startswith(evidence.text), (item.key, evidence)
            checked += 1
    assert checked >= 12
    assert result.as_dict()["factors"][0]["evidence"][0]["line"] == memory.image_line + 1


def read_labels(split: str | None = None) -> dict[str, dict[str, int]]:
    rows = [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {r["id"]: r["factors"] for r in rows if split in (None, r["split"])}


def test_hand_labels_cover_at_least_thirty_example_images(readonly_palace):
    labels = read_labels()
    memories = readonly_palace.scan().memories
    assert len(labels) >= 30
    assert set(labels) <= set(memories)
    for factors in labels.values():
        assert set(factors) == set(FACTOR_KEYS) and set(factors.values()) <= {0, 1}


@pytest.mark.parametrize("split, min_accuracy, min_kappa", [
    (None, 0.87, 0.72),    # all 66 (measured 0.904 / 0.794)
    ("test", 0.85, 0.68),  # held out from tuning (measured 0.886 / 0.762)
])
def test_scorer_agrees_with_hand_labels(readonly_palace, split, min_accuracy, min_kappa):
    labels = read_labels(split)
    memories = readonly_palace.scan().memories
    result = agreement(labels, {i: score_memory(memories[i]) for i in labels})
    assert result["overall"]["accuracy"] >= min_accuracy
    assert result["overall"]["kappa"] >= min_kappa
    assert result["total_score"]["mean_abs_error"] <= 1.2
    assert result["total_score"]["pearson"] >= 0.7


def test_agreement_statistics_on_a_known_table():
    from palace_cli.core.smashin import SmashinScore, FactorResult

    def scored(keys):
        return SmashinScore("m", "p", [FactorResult(k, k, k in keys) for k in FACTOR_KEYS])

    labels = {"a": {k: 1 for k in FACTOR_KEYS}, "b": {k: 0 for k in FACTOR_KEYS}}
    scores = {"a": scored(set(FACTOR_KEYS)), "b": scored({"humor"})}
    result = agreement(labels, scores)
    assert result["overall"]["accuracy"] == round(23 / 24, 3)
    assert result["factors"]["humor"]["precision"] == 0.5
    assert result["factors"]["color"]["kappa"] == 1.0
    assert result["total_score"]["mean_abs_error"] == 0.5


def test_lint_warns_on_weak_images_without_failing(readonly_palace):
    report = lint(readonly_palace)
    weak = [p for p in report.problems if p.code == "smashin-weak"]
    assert {p.path.rsplit("/", 1)[1] for p in weak} == {"secondary-index.md", "rebalancing.md", "write-through-cache.md"}
    assert all(p.severity == "warning" and "palace evolve" in p.message for p in weak)
    assert report.errors == 0


def test_lint_threshold_comes_from_palace_toml(example_palace):
    toml = example_palace / "palace.toml"
    toml.write_text(toml.read_text(encoding="utf-8") + "\n[study]\nsmashin_threshold = 0\n", encoding="utf-8")
    assert not [p for p in lint(Palace(example_palace)).problems if p.code == "smashin-weak"]


def test_score_command_json_and_table(readonly_example):
    runner = CliRunner()
    result = runner.invoke(cli, ["--palace", str(readonly_example), "score", "bloom-filter", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["id"] == "bloom-filter" and 0 <= data["score"] <= 12 and len(data["factors"]) == 12
    result = runner.invoke(cli, ["--palace", str(readonly_example), "score", "--all"])
    assert result.exit_code == 0 and "secondary-index" in result.output
    result = runner.invoke(cli, ["--palace", str(readonly_example), "score", "--against", str(LABELS), "--json"])
    assert result.exit_code == 0 and json.loads(result.output)["memories"] == 66
    assert runner.invoke(cli, ["--palace", str(readonly_example), "score"]).exit_code == 2


def test_evolve_without_a_generator_names_missing_factors_and_refuses_to_accept(readonly_example):
    runner = CliRunner()
    result = runner.invoke(cli, ["--palace", str(readonly_example), "evolve", "secondary-index"])
    assert result.exit_code == 0
    assert "Movement" in result.output and "palace models install" in result.output
    before = (readonly_example / "memories/storage-engines/secondary-index.md").read_bytes()
    result = runner.invoke(cli, ["--palace", str(readonly_example), "evolve", "secondary-index", "--accept"])
    assert result.exit_code == 1 and "evolve --accept: no generator model: run `palace models install`" in result.output
    assert (readonly_example / "memories/storage-engines/secondary-index.md").read_bytes() == before


def test_accepting_an_image_changes_only_the_image_section(palace):
    from palace_cli.study.evolver import _note_hash, accept_image

    memory = palace.memory("secondary-index")
    path = palace.root / memory.path
    before = path.read_text(encoding="utf-8")
    image = ("You stand in a towering library at midnight, clutching a giant red phone book that hums. "
             f"A second, thinner booklet glows on the shelf to your left. {memory.verify.capitalize()} "
             "scream from the pages as you flip them.")
    accept_image(palace, memory.id, image, _note_hash(palace, memory.path))
    after = path.read_text(encoding="utf-8")
    head, _, rest = before.partition("## Image\n")
    old_image, _, tail = rest.partition("\n\n## Content")
    assert after == f"{head}## Image\n{image}\n\n## Content{tail}"
    reread = Palace(palace.root).memory("secondary-index")
    assert reread.verify == memory.verify and memory.verify.lower() in reread.image.lower()
    assert score_memory(reread).score > score_memory(memory).score


def test_accept_refuses_an_image_without_the_verify_token_or_a_changed_note(palace):
    from palace_cli.errors import PalaceError
    from palace_cli.study.evolver import _note_hash, accept_image

    memory = palace.memory("rebalancing")
    path = palace.root / memory.path
    before = path.read_bytes()
    with pytest.raises(PalaceError, match="verify token"):
        accept_image(palace, memory.id, "A plain new image without the phrase.", _note_hash(palace, memory.path))
    with pytest.raises(PalaceError, match="changed since"):
        accept_image(palace, memory.id, f"An image with {memory.verify}.", "0" * 16)
    assert path.read_bytes() == before
