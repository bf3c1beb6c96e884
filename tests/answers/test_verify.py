"""verify: normalisation, several memories, foreign tokens, partial and invented citations, exit codes."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from palace_cli.cli import cli
from palace_cli.errors import PalaceError, UsageError
from palace_cli.core.tokens import find_phrases, phrase_key
from palace_cli.core.text import fold
from palace_cli.answers.verify import parse_context, verify_response

TUX = {"id": "two-phase-commit", "verify": "mustard-yellow tuxedo"}
FIG = {"id": "paxos", "verify": "fig tart"}
OWL = {"id": "raft", "verify": "three sleepy owls"}
ALL = {m["id"]: m["verify"] for m in (TUX, FIG, OWL)}


# ---- normalisation --------------------------------------------------------------------------

@pytest.mark.parametrize("response, cited, exact", [
    ("It stands in a mustard-yellow tuxedo.", True, True),
    ("MUSTARD-YELLOW TUXEDO", True, True),
    ("mustard yellow tuxedo", True, True),                       # hyphen as a space
    ("Mustard\u2014yellow    tuxedo!", True, True),               # em dash, runs of spaces
    ("mustard\u2011yellow\ntuxedo", True, True),                  # non-breaking hyphen, line break
    ("mustard_yellow tuxedo", True, True),
    ("M\u00fastard-yellow tux\u00e9do", True, True),              # accents
    ("**mustard-yellow** _tuxedo_", True, True),                  # Markdown emphasis
    ("[verify:mustard-yellow tuxedo]", True, True),
    ('"Mustard-Yellow-Tuxedo"', True, True),
    ("mustardyellow tuxedo", True, False),                       # compound closed up
    ("mustard-yellow tuxedos", True, False),                     # plural
    ("mustard yellow tux edo", True, False),                     # a word split in two
    ("yellow tuxedo", False, False),                             # part of the token
    ("mustard tuxedo", False, False),
    ("mustard-yellow tux", False, False),
    ("a mustard-yellowish tuxedo", False, False),                # a different word
    ("nomustard-yellow tuxedo", False, False),                   # word boundary
    ("tuxedo yellow mustard", False, False),                     # order matters
    ("", False, False),
])
def test_normalisation_table(response, cited, exact):
    verdict = verify_response(response, [TUX], ALL)
    assert verdict.grounded is cited
    if cited:
        assert verdict.cited[0].exact is exact
        assert verdict.cited_ids == ["two-phase-commit"]
    else:
        assert verdict.cited == []


@pytest.mark.parametrize("word, folded", [
    ("couples", "couple"), ("couple", "couple"), ("bodies", "body"), ("glasses", "glass"), ("glass", "glass"),
    ("boxes", "box"), ("bus", "bus"), ("axis", "axis"), ("tuxedos", "tuxedo"), ("47", "47"),
])
def test_fold_plurals(word, folded):
    assert fold(word) == folded


def test_phrase_key_ignores_spelling_differences():
    assert phrase_key("Forty-Seven granite couples") == phrase_key("forty seven granite-couple") == "fortysevengranitecouple"


def test_find_phrases_reports_word_spans():
    found = find_phrases("Hello, MUSTARD-yellow tuxedo world", {"a": "mustard-yellow tuxedo"})
    assert found == [("a", 1, 4, True)]


# ---- several memories -----------------------------------------------------------------------

def test_one_of_several_cited_is_grounded_under_rule_any():
    verdict = verify_response("Paxos needs a majority. [verify: fig tart]", [TUX, FIG, OWL], ALL)
    assert verdict.grounded and verdict.status == "grounded"
    assert verdict.cited_ids == ["paxos"]
    assert verdict.uncited == ["two-phase-commit", "raft"]
    assert verdict.exit_code == 0


def test_rule_all_needs_every_handed_memory():
    response = "[verify: fig tart] and [verify: three sleepy owls]"
    verdict = verify_response(response, [TUX, FIG, OWL], ALL, rule="all")
    assert not verdict.grounded and verdict.status == "incomplete"
    assert verdict.uncited == ["two-phase-commit"]
    full = verify_response(response + " and a mustard-yellow tuxedo", [TUX, FIG, OWL], ALL, rule="all")
    assert full.grounded and set(full.cited_ids) == {"paxos", "raft", "two-phase-commit"}


def test_citations_listed_in_order_of_appearance_once_each():
    verdict = verify_response("three sleepy owls, fig tart, fig tart again", [TUX, FIG, OWL], ALL)
    assert verdict.cited_ids == ["raft", "paxos"]


def test_memories_without_a_token_cannot_be_checked():
    bare = {"id": "bare", "verify": ""}
    assert verify_response("anything", [bare], ALL).status == "unverifiable"
    mixed = verify_response("[verify: fig tart]", [bare, FIG], ALL)
    assert mixed.grounded and mixed.untokened == ["bare"]


def test_unknown_rule_is_a_usage_error():
    with pytest.raises(UsageError):
        verify_response("x", [TUX], ALL, rule="most")


# ---- foreign tokens -------------------------------------------------------------------------

def test_token_of_a_memory_outside_the_context_is_foreign():
    verdict = verify_response("Majority wins [verify: fig tart]", [TUX], ALL)
    assert not verdict.grounded and verdict.status == "foreign"
    assert [c.id for c in verdict.foreign] == ["paxos"]
    assert verdict.exit_code == 1


def test_foreign_token_fails_even_when_a_handed_token_is_cited():
    verdict = verify_response("[verify: mustard-yellow tuxedo] [verify: fig tart]", [TUX], ALL)
    assert not verdict.grounded and verdict.status == "foreign"
    assert verdict.cited_ids == ["two-phase-commit"]


def test_a_short_token_inside_a_cited_longer_one_is_not_foreign():
    tokens = dict(ALL, short="yellow tuxedo")
    verdict = verify_response("[verify: mustard-yellow tuxedo]", [TUX], tokens)
    assert verdict.grounded and verdict.foreign == []


def test_a_longer_foreign_token_wins_over_the_handed_one_inside_it():
    tokens = dict(ALL, longer="fig tart festival")
    verdict = verify_response("I saw a fig tart festival", [FIG], tokens)
    assert [c.id for c in verdict.foreign] == ["longer"] and verdict.cited == []


def test_a_token_shared_with_a_handed_memory_counts_as_handed():
    tokens = dict(ALL, twin="fig tart")
    verdict = verify_response("[verify: fig tart]", [FIG], tokens)
    assert verdict.grounded and verdict.foreign == []


def test_without_palace_tokens_foreign_tokens_are_not_checked():
    verdict = verify_response("[verify: mustard-yellow tuxedo] fig tart", [TUX], None)
    assert verdict.grounded and not verdict.foreign_checked


# ---- misses explained -----------------------------------------------------------------------

def test_partial_token_is_reported_but_not_counted():
    verdict = verify_response("I remember sleepy owls", [OWL], ALL)
    assert not verdict.grounded and verdict.status == "uncited"
    assert verdict.partial == [{"id": "raft", "token": "three sleepy owls", "words_matched": 2, "of": 3}]
    assert "part of raft's token" in verdict.reason


def test_invented_citation_is_reported():
    verdict = verify_response("Raft elects a leader. [verify: the token]", [OWL], ALL)
    assert verdict.unknown_citations == ["the token"] and not verdict.grounded


def test_empty_answer_is_not_grounded():
    verdict = verify_response("  \n ", [TUX], ALL)
    assert verdict.status == "empty" and verdict.exit_code == 1


def test_verdict_json_shape():
    data = verify_response("[verify: Mustard Yellow tuxedos]", [TUX, FIG], ALL).as_dict()
    assert data["grounded"] is True and data["rule"] == "any"
    assert data["cited"] == [{"id": "two-phase-commit", "token": "mustard-yellow tuxedo", "match": "variant"}]
    assert data["uncited"] == ["paxos"] and data["foreign"] == []


# ---- context files --------------------------------------------------------------------------

def test_parse_context_reads_recall_json_and_plain_lists():
    recall_json = json.dumps({"query": "q", "memories": [{"id": "a", "subject": "A", "verify": "x y"}]})
    assert parse_context(recall_json) == [{"id": "a", "subject": "A", "verify": "x y"}]
    assert parse_context('[{"id": "b", "verify": "p q"}]')[0]["verify"] == "p q"


@pytest.mark.parametrize("text", ["not json", '{"hits": []}', '{"memories": [{"subject": "no id"}]}'])
def test_parse_context_rejects_malformed_files(text):
    with pytest.raises(PalaceError):
        parse_context(text, source="ctx.json")


# ---- the command ----------------------------------------------------------------------------

@pytest.fixture
def run(example_palace):
    runner = CliRunner()

    def invoke(*args, stdin=None):
        return runner.invoke(cli, ["--palace", str(example_palace), *args], input=stdin)

    return invoke


def _write(tmp_path, text, name="answer.txt"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_cli_grounded_answer_exits_0(run, tmp_path):
    result = run("verify", "--response", _write(tmp_path, "Locks held. [verify: Mustard-Yellow tuxedo]"),
                 "--memory", "two-phase-commit")
    assert result.exit_code == 0, result.output
    assert "grounded" in result.output and "two-phase-commit" in result.output


def test_cli_uncited_answer_exits_1(run, tmp_path):
    result = run("verify", "--response", _write(tmp_path, "2PC has a coordinator."), "--memory", "two-phase-commit",
                 "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["status"] == "uncited" and data["uncited"] == ["two-phase-commit"]


def test_cli_foreign_token_from_the_palace_exits_1(run, tmp_path):
    # "fig tart" is the token of the paxos memory in the example palace.
    result = run("verify", "--response", "-", "--memory", "two-phase-commit", "--json",
                 stdin="Consensus [verify: mustard-yellow tuxedo] and a fig tart.")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["status"] == "foreign" and data["foreign"][0]["id"] == "paxos"


def test_cli_several_memories_and_rule_all(run, tmp_path):
    answer = _write(tmp_path, "[verify: fig tart]")
    assert run("verify", "--response", answer, "-m", "two-phase-commit", "-m", "paxos").exit_code == 0
    assert run("verify", "--response", answer, "-m", "two-phase-commit", "-m", "paxos", "--rule", "all").exit_code == 1


def test_cli_reads_the_context_written_by_recall(run, tmp_path):
    recalled = run("recall", "how does two-phase commit block when the coordinator dies", "--format", "json")
    assert recalled.exit_code == 0, recalled.output
    context = _write(tmp_path, recalled.stdout, "ctx.json")
    memories = json.loads(recalled.stdout)["memories"]
    assert memories and memories[0]["id"] == "two-phase-commit"
    cited = run("verify", "--response", "-", "--context", context, "--json",
                stdin=f"It blocks. [verify: {memories[0]['verify']}]")
    assert cited.exit_code == 0, cited.output
    assert json.loads(cited.stdout)["cited"][0]["id"] == "two-phase-commit"
    assert run("verify", "--response", "-", "--context", context, stdin="It blocks.").exit_code == 1


def test_cli_context_outside_a_palace_warns_and_still_checks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    context = _write(tmp_path, json.dumps({"memories": [TUX]}), "ctx.json")
    result = CliRunner().invoke(cli, ["verify", "--response", "-", "--context", context],
                                input="a mustard-yellow tuxedo")
    assert result.exit_code == 0
    assert "not checked" in result.output


@pytest.mark.parametrize("args", [
    ["verify", "--response", "-"],                                                    # neither
    ["verify", "--response", "-", "--memory", "paxos", "--context", "ctx.json"],       # both
    ["verify", "--response", "missing-file.txt", "--memory", "paxos"],                 # unreadable
])
def test_cli_usage_errors_exit_2(run, args):
    result = run(*args, stdin="x")
    assert result.exit_code == 2


def test_cli_unknown_memory_exits_1(run):
    result = run("verify", "--response", "-", "--memory", "no-such-memory-zzz", stdin="x")
    assert result.exit_code == 1 and "no memory 'no-such-memory-zzz'" in result.output
