"""The LLM parts of study with the real default generator (SmolLM2-135M): validated or refused, never trusted."""

from __future__ import annotations

import json
import subprocess

import pytest
from click.testing import CliRunner

from palace_cli.cli import cli
from palace_cli.palace import Palace
from palace_cli.study.examiner import leaks, validate
from palace_cli.study.llm import parse_generated, repetitive
from palace_cli.study.redqueen import run_red_queen
from palace_cli.editing.reviewlog import ReviewLog
from palace_cli.study.scheduler import replay


@pytest.mark.parametrize("reply, parsed", [
    ("Which river flows through Paris?\nAnswer: The Seine", ("Which river flows through Paris?", "The Seine")),
    ("Question: What sends PREPARE?\n\nAnswer: the coordinator.", ("What sends PREPARE?", "the coordinator")),
    ("What is the purpose of a two-phase commit?", None),  # no answer line
    ("Answer: yes", None),  # no question
])
def test_parse_generated(reply, parsed):
    assert parse_generated(reply) == parsed


ROUTE_PROMPT = "Which anchor?\nA) twin stages and a lever\nB) royal taster bird\nReply with one letter."


@pytest.mark.parametrize("reply, chosen", [
    ("B", "royal taster bird"),
    ("A) twin stages and a lever", "twin stages and a lever"),
    ("(B).", "royal taster bird"),
    ("A) royal taster bird", ""),  # the letter and the text disagree: no choice
    ("royal taster bird", "royal taster bird"),  # no letter: the text is graded
])
def test_route_choice(reply, chosen):
    from palace_cli.study.llm import route_choice

    assert route_choice(reply, ROUTE_PROMPT) == chosen


def test_repetition_is_detected():
    assert repetitive("It is big. It is big. It is big. Then it fell.")
    assert not repetitive("You run. A cat sings. The bell rings. Rain falls.")


@pytest.mark.slow
def test_generated_questions_are_validated_or_refused(real_generator, palace):
    from palace_cli.study.llm import generate_question

    memories = palace.scan().memories
    outcomes = []
    for memory_id in ("two-phase-commit", "raft", "bloom-filter"):
        question, problem = generate_question(real_generator, memories[memory_id], memories)
        if question is None:
            assert problem  # a refusal always says why
            outcomes.append(problem)
            continue
        memory = memories[memory_id]
        assert validate(question, memory, memories) == []
        assert not leaks(question.prompt, [question.answer])
        assert question.source.startswith("llm:") and question.kind == "generated"
        outcomes.append("used")
    assert len(outcomes) == 3


@pytest.mark.slow
def test_red_queen_logs_model_reviews_apart_from_the_person(real_generator, example_palace):
    palace = Palace(example_palace)
    report = run_red_queen(palace, real_generator, rounds=2, n=2, seed=1)
    assert len(report.attempts) == 4
    assert [a.kind for a in report.attempts[:2]] == ["anchor", "anchor"]  # a first attempt names the concept
    for attempt in report.attempts[2:]:  # a retest picks the anchor instead; new ground starts with naming
        first = next(a for a in report.attempts if a.memory_id == attempt.memory_id)
        assert attempt.kind == ("route" if first is not attempt else "anchor")
    read = ReviewLog(palace).read()
    learner = f"llm:{real_generator.model_id}"
    assert [r.learner for r in read.reviews] == [learner] * 4
    assert replay(read.reviews, "person").states == {}
    assert len(replay(read.reviews, learner).states) >= 2
    for weak in report.weak:
        assert weak.mean_score < 0.5 and 0 <= weak.smashin <= 12
    assert [a.round for a in report.attempts] == [1, 1, 2, 2]
    routes = [a for a in report.attempts if a.kind == "route"]
    assert all(a.chance == pytest.approx(1 / 6) for a in routes)  # six anchors to choose from
    assert json.loads(json.dumps(report.as_dict()))["learner"] == learner
    status = subprocess.run(["git", "status", "--porcelain", "--", "memories"], cwd=example_palace,
                            capture_output=True, text=True, check=True).stdout
    assert status == ""


def test_redqueen_with_the_small_installed_model_says_so_in_one_line(with_models, readonly_example):
    before = sorted((readonly_example / "reviews").glob("*"))
    result = CliRunner().invoke(cli, ["--palace", str(readonly_example), "redqueen"])
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1
    assert result.output.startswith("palace: SmolLM2-135M-Instruct.Q4_1 (135M parameters) is too small to recall "
                                    "memories from their anchors; set [models] endpoint")
    assert sorted((readonly_example / "reviews").glob("*")) == before   # nothing was logged


def test_evolve_with_the_small_installed_model_shows_the_factors_and_one_line(with_models, readonly_example):
    result = CliRunner().invoke(cli, ["--palace", str(readonly_example), "evolve", "secondary-index"])
    assert result.exit_code == 0 and "Movement" in result.output and "asking the generator" not in result.output
    assert "(135M parameters) is too small to propose a better image; set [models] endpoint" in result.output


@pytest.mark.slow
def test_redqueen_command_with_the_installed_model(with_models, example_palace):
    toml = example_palace / "palace.toml"
    toml.write_text(toml.read_text(encoding="utf-8") + '\n[models]\nuse_generator = "always"\n', encoding="utf-8")
    result = CliRunner().invoke(cli, ["--palace", str(example_palace), "redqueen", "--rounds", "1", "-n", "1", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output[result.output.index("{"):])
    assert data["rounds"] == 1 and len(data["attempts"]) == 1 and data["learner"].startswith("llm:")


def test_redqueen_without_a_model_says_how_to_get_one(readonly_example):
    result = CliRunner().invoke(cli, ["--palace", str(readonly_example), "redqueen"])
    assert result.exit_code == 1 and "palace models install" in result.output


@pytest.mark.slow
def test_evolve_with_the_real_generator_keeps_the_note_safe(real_generator, palace):
    from palace_cli.errors import PalaceError
    from palace_cli.study.evolver import evolve

    memory = palace.memory("secondary-index")
    path = palace.root / memory.path
    before = path.read_text(encoding="utf-8")
    preview = evolve(palace, "secondary-index", real_generator)
    assert path.read_text(encoding="utf-8") == before  # a preview never writes
    assert preview.score.score == 3 and "movement" in preview.tips
    if preview.proposal is None or preview.problem:
        assert preview.problem  # refused, and says why
        with pytest.raises(PalaceError):
            evolve(palace, "secondary-index", real_generator, accept=True)
        assert path.read_text(encoding="utf-8") == before
        return
    accepted = evolve(palace, "secondary-index", real_generator, accept=True)
    assert accepted.from_cache and accepted.accepted  # exactly what was shown
    after = path.read_text(encoding="utf-8")
    assert after.split("## Image")[0] == before.split("## Image")[0]
    assert after.split("## Content")[1] == before.split("## Content")[1]
    reread = Palace(palace.root).memory("secondary-index")
    assert memory.verify.lower() in reread.image.lower()


@pytest.mark.slow
def test_a_session_offers_every_third_question_to_the_generator(real_generator, example_palace):
    from palace_cli.study.session import StudySession

    session = StudySession(Palace(example_palace), strategy="random", n=3, seed=2, generator=real_generator)
    asked = []
    for question in session:
        asked.append(question)
        session.record(question, 3, "")
    assert len(asked) == 3
    summary = session.summary
    assert summary.generated_offered == 1
    assert summary.generated_used + len(summary.generated_rejected) == 1
    third = asked[2]
    if summary.generated_used:
        assert third.kind == "generated" and third.source.startswith("llm:")
    else:
        assert third.kind != "generated" and third.note.startswith("generated question rejected")
    assert [r.kind for r in ReviewLog(session.palace).read().reviews] == [q.kind for q in asked]
