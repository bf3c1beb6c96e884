"""Recall hands over only what is relevant, and says when nothing is (issue 26): the rule on hand-made hits on
either side of each threshold, then a small mixed palace (notes and a chat) through the core, the CLI and MCP."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from answer_fixtures import kyoto_palace
from palace_cli.cli import cli
from palace_cli.search import relevance as rel
from palace_cli.search.hits import Hit
from palace_cli.search.retrieve import recall, search

DEPLOY = "when can we deploy to production?"
OFFSITE = "what is the budget cap for the Kyoto offsite?"
NONSENSE = "xylophone quantum entanglement"


def hit(unit_id: str, score: float, words: float | None, meaning: float | None, kind: str = "memory") -> Hit:
    unit = Hit(unit_id, unit_id, "", f"{unit_id}.md", 1, score, {}, kind=kind)
    unit.words, unit.meaning = words, meaning
    return unit


@pytest.mark.parametrize("words, meaning, about", [
    (rel.WORDS_FLOOR, None, True), (rel.WORDS_FLOOR - 0.01, None, False),
    (0.0, rel.MEANING_FLOOR, True), (0.0, rel.MEANING_FLOOR - 0.01, False),
    (rel.WORDS_FLOOR - 0.01, rel.MEANING_FLOOR - 0.01, False), (None, rel.MEANING_FLOOR, True),
])
def test_a_unit_is_about_the_question_by_words_or_by_meaning(words, meaning, about):
    assert rel.about(hit("a", 1.0, words, meaning)) is about


@pytest.mark.parametrize("second, handed", [
    (hit("b", 0.4, 0.5, 0.5), True),                                        # at RELATIVE of the best's score
    (hit("b", 0.39, 0.5, 0.5), False),                                      # just under it
    (hit("b", 0.9, rel.NEAR_WORDS, 0.1), True),                             # near by words
    (hit("b", 0.9, rel.NEAR_WORDS - 0.01, rel.NEAR_MEANING - 0.01), False),
    (hit("b", 0.9, 0.15, rel.NEAR_MEANING), True),                          # near by meaning
    (hit("b", 0.9, 0.0, rel.WORDLESS_MEANING), True),                       # no word, but close in meaning
    (hit("b", 0.9, 0.0, rel.WORDLESS_MEANING - 0.01, kind="turn"), False),  # no word and not close enough
])
def test_a_later_unit_is_judged_against_the_best_hit(second, handed):
    offered, omitted = rel.judge([hit("a", 1.0, 0.8, 0.6), second], {"memory": 3, "turn": 3})
    assert ([h.id for h in offered] == ["a", "b"]) is handed
    assert not handed or not omitted
    assert handed or omitted[0].id == "b" and omitted[0].reason


def test_caps_apply_per_kind_and_say_so():
    ranked = [hit("m1", 1.0, 0.9, 0.6), hit("t1", 0.9, 0.9, 0.6, "turn"), hit("t2", 0.8, 0.9, 0.6, "turn"),
              hit("m2", 0.7, 0.9, 0.6)]
    offered, omitted = rel.judge(ranked, {"memory": 1, "turn": 1})
    assert [h.id for h in offered] == ["m1", "t1"]
    assert {o.id: o.reason for o in omitted} == {"t2": "over the cap of 1 turns", "m2": "over the cap of 1 memories"}


def test_a_unit_holding_every_word_is_about_the_question_whatever_its_score():
    weak = hit("long-note", 0.2, rel.WORDS_FLOOR - 0.01, 0.0)
    assert not rel.about(weak) and "every word" not in rel.describe(weak)
    weak.every_word = True
    assert rel.about(weak) and "every word" in rel.describe(weak)
    strong = hit("short-note", 0.9, 1.0, 0.5)
    strong.every_word = True
    assert rel.describe(strong) == "words 1.00, meaning 0.50"  # said only where it is the reason
    units = [hit("a", 0, None, None), hit("b", 0, None, None), hit("c", 0, None, None)]
    units[0].parts, units[1].parts, units[2].parts = {"lexical": 0.2}, {"lexical": 0.3}, {"lexical": 3.0}
    asked = []
    rel.measure(units, 4.0, holding=lambda ids: asked.extend(ids) or {"b", "c"} & set(ids))
    assert [u.every_word for u in units] == [False, True, False]
    assert asked == ["a", "b"]  # only units under both floors are asked: "c" is about the question anyway


def test_measure_reads_words_against_the_questions_ceiling():
    units = [hit("a", 0, None, None), hit("b", 0, None, None), hit("c", 0, None, None)]
    units[0].parts, units[1].parts = {"lexical": 6.0}, {"lexical": 1.5}
    rel.measure(units, 4.0)
    assert [u.words for u in units] == [1.0, 0.375, 0.0]  # capped at 1; nothing held is 0
    rel.measure(units, 4.0, bm25=lambda ids: {"c": 2.0})
    assert [u.words for u in units] == [0.0, 0.0, 0.5]  # a dense ranking's units: their BM25 asked for


@pytest.fixture
def team(tmp_path, with_models):
    return kyoto_palace(tmp_path / "team")


@pytest.mark.parametrize("mode", ["fused", "lexical"])
def test_a_question_about_the_notes_gets_no_chat_turn(team, mode):
    result = recall(team, DEPLOY, k=2, mode=mode)
    assert [h.id for h in result.hits] == ["deploy-window"] and "## Conversation" not in result.context
    # by meaning the chat's turns rank (MiniLM finds "We can do this"-like lines close); by words they do not
    assert ({o.kind for o in result.omitted} >= {"turn"}) is (mode == "fused")
    assert all(o.reason for o in result.omitted)


def test_a_question_about_the_chat_is_answered_from_the_chat(team):
    result = recall(team, OFFSITE)
    assert result.hits[0].kind == "turn" and "1.2 million yen" in result.hits[0].turn.text
    assert "## Conversation" in result.context
    # the other budgets share two words with the question, but not the ones that matter, and rank far below
    assert "aardvark-project-budget" not in [h.id for h in result.handed]


def test_turns_cap_turns_as_k_caps_memories(team):
    result = recall(team, "Kyoto offsite ryokan temple tour budget", turns=1)
    turns = [h for h in result.hits if h.kind == "turn"]
    assert len(turns) == 1 and result.caps["turn"] == 1
    assert any(o.reason == "over the cap of 1 turns" for o in result.omitted)
    assert recall(team, "Kyoto offsite ryokan temple tour budget", turns=0).as_dict()["turns"] == []


def test_nothing_relevant_hands_nothing_and_says_why(team):
    result = recall(team, NONSENSE)
    data = result.as_dict()
    assert (data["relevant"], data["hits"], data["memories"], data["turns"], result.context) == (False, [], [], [], "")
    assert "nothing is about the query" in data["why"] and "meaning" in data["why"]
    assert search(team, NONSENSE).hits == []


def test_search_prints_no_results_and_exits_1(team):
    runner = CliRunner()
    out = runner.invoke(cli, ["--palace", str(team.root), "search", NONSENSE])
    assert out.exit_code == 1 and out.output.startswith("no results: nothing is about the query")
    found = runner.invoke(cli, ["--palace", str(team.root), "search", "Kyoto offsite budget"])
    assert found.exit_code == 0 and "words " in found.output and "meaning " in found.output


@pytest.mark.parametrize("mode", ["fused", "dense", "lexical"])
def test_a_filter_that_leaves_only_unrelated_units_shows_nothing(team, mode):
    # Only the chat's turns are in scope and none mentions a concert hall: before, the dense ranking filled k
    # with whatever turns the filter left.
    result = search(team, "Camellia Hall concert", mode=mode, kind="turn", since="2025-03-01")
    assert result.hits == [] and result.relevant is False
    kept = search(team, "temple tour Saturday", mode=mode, kind="turn", since="2025-03-03", until="2025-03-03")
    assert kept.hits and all(h.kind == "turn" and h.time.startswith("2025-03-03") for h in kept.hits)
    assert all(rel.about(h) for h in kept.hits)


def test_recall_json_and_table_say_what_was_left_out(team):
    runner = CliRunner()
    out = runner.invoke(cli, ["--palace", str(team.root), "recall", DEPLOY, "-k", "2", "--turns", "3", "--json"])
    data = json.loads(out.output)
    assert out.exit_code == 0 and data["caps"] == {"memory": 2, "turn": 3} and data["turns"] == []
    assert data["hits"][0]["relevance"]["words"] == 1.0 and data["hits"][0]["relevance"]["meaning"] > 0.35
    assert {o["kind"] for o in data["omitted"]} >= {"turn"} and all(o["reason"] for o in data["omitted"])
    table = runner.invoke(cli, ["--palace", str(team.root), "recall", NONSENSE])
    assert table.exit_code == 0 and table.output.startswith("nothing relevant: nothing is about the query")
    prompt = runner.invoke(cli, ["--palace", str(team.root), "recall", NONSENSE, "--format", "prompt"])
    assert "nothing in this palace is relevant" in prompt.output


def test_mcp_recall_caps_turns_and_says_when_nothing_is_relevant(team):
    from palace_cli.mcp import PalaceTools

    tools = PalaceTools(team)
    text = tools.recall("Kyoto offsite ryokan temple tour budget", turns=1)
    assert text.count("] (line ") == 1 and "left out" in text
    nothing = tools.recall(NONSENSE)
    assert "Nothing in this palace is relevant" in nothing and "## " not in nothing


def test_recall_json_hits_carry_the_words_they_would_cite(team):
    """An agent reading --json gets each memory's Content and each turn's words beside its path and line."""
    out = CliRunner().invoke(cli, ["--palace", str(team.root), "recall", DEPLOY, "--json"])
    data = json.loads(out.output)
    memories = [h for h in data["hits"] if h["kind"] in ("memory", "section")]
    assert out.exit_code == 0 and memories
    for found in memories:
        note = (team.root / found["path"]).read_text(encoding="utf-8")
        assert found["text"].strip() and found["text"].strip().splitlines()[0] in note
    assert all(h["text"] for h in data["hits"] if h["kind"] == "turn")
