"""Answers you can trust (issue 23): ask reads notes and conversations, answers only when its quotes hold the
question's names and numbers, cites a turn as [turn ID], and every quote is checked word for word: by ask,
by `palace verify`, by MCP verify, and for a generated answer from an OpenAI-compatible endpoint (a real
HTTP server of the test's own)."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from answer_fixtures import kyoto_palace
from fake_endpoint import FakeEndpoint, chat_reply, prompt_of
from palace_cli.answers.ask import ask
from palace_cli.answers.checking import handed_units, verify_answer
from palace_cli.answers.verify import verify_response
from palace_cli.cli import cli
from palace_cli.palace import Palace
from palace_cli.search.retrieve import recall

OFFSITE = "what is the budget cap for the Kyoto offsite?"
ANSWER = "The budget cap for the Kyoto offsite is 1.2 million yen, flights included."
TURN = "chat-offsite-chat/chat-offsite-chat#1"


@pytest.fixture
def team(tmp_path, with_models):
    return kyoto_palace(tmp_path / "team")


def _run(palace, *args, stdin=None):
    return CliRunner().invoke(cli, ["--palace", str(palace.root), *args], input=stdin)


def test_the_kyoto_budget_is_answered_from_the_chat_and_cites_the_turn(team):
    answer = ask(team, OFFSITE)
    assert (answer.status, answer.mode, answer.exit_code) == ("answered", "extractive", 0)
    assert answer.text.splitlines()[0] == f'"{ANSWER}" [{"turn"} {TURN}]'
    first = answer.sentences[0]
    assert (first["id"], first["kind"], first["path"]) == (TURN, "turn", "conversations/chat/offsite-chat.md")
    line = (team.root / first["path"]).read_text(encoding="utf-8").splitlines()[first["line"] - 1]
    assert line.startswith("### Mika")  # path:line is the turn's header
    assert answer.verdict.grounded and answer.verdict.quotes[0] == {"id": TURN, "kind": "turn", "quote": ANSWER,
                                                                    "found": True}
    assert not answer.evidence.missing and "Kyoto" not in answer.evidence.missing
    assert [t["id"] for t in answer.turns if t["cited"]] == [TURN]


def test_a_budget_the_palace_does_not_hold_is_abstained_naming_the_nearest_evidence(team):
    answer = ask(team, "what is the budget cap for the Osaka offsite?")
    data = answer.as_dict()
    assert (data["status"], data["mode"], answer.exit_code) == ("abstained", None, 1)
    assert data["evidence"]["missing"] == ["Osaka"] and "osaka" in data["needs"]
    assert "does not mention Osaka" in data["reason"] and TURN in data["reason"]  # the nearest evidence, named
    human = _run(team, "ask", "what is the budget cap for the Osaka offsite?")
    assert human.exit_code == 1 and "not in this palace" in human.output and "does not mention Osaka" in human.output


def test_a_question_about_the_notes_is_answered_from_them_alone(team):
    answer = ask(team, "when can we deploy to production?")
    assert answer.status == "answered" and {s["kind"] for s in answer.sentences} == {"memory"}
    assert answer.turns == [] and all("[verify: " in line for line in answer.text.splitlines())


@pytest.mark.parametrize("quote, found", [
    (ANSWER, True),
    ("the budget cap for the kyoto offsite is 1.2 million yen", True),   # case and punctuation aside
    ("The budget cap for the Kyoto offsite is 1.3 million yen, flights included.", False),   # one word off
    ("The budget cap for the Kyoto retreat is 1.2 million yen, flights included.", False),
    ("The cap for the Kyoto offsite is 1.2 million yen", False),           # a word left out
])
def test_a_quote_one_word_off_is_refused(team, quote, found):
    handed = handed_units(team, [TURN, "aardvark-project-budget"])
    verdict = verify_response(f'"{quote}" [turn {TURN}]', handed, {})
    assert verdict.grounded is found and verdict.quotes[0]["found"] is found
    assert found or verdict.status == "misquoted" and "is not in " + TURN in verdict.reason
    note = f'"The Aardvark project has a budget cap of {"40,000" if found else "45,000"} euros." [verify: ' \
           f'{handed[1]["verify"]}]'
    assert verify_response(note, handed, {}).grounded is found


def test_an_unquoted_turn_citation_checks_the_text_before_it(team):
    handed = handed_units(team, [TURN])
    assert verify_response(f"Mika: {ANSWER} [turn {TURN}]", handed, {}).grounded
    off = verify_response(f"Mika said the cap is about a million yen [turn {TURN}]", handed, {})
    assert off.status == "misquoted"


def test_verify_checks_turn_citations_foreign_and_unknown(team):
    context = _run(team, "recall", OFFSITE, "--format", "json")
    data = json.loads(context.output)
    assert TURN in data["turns"]
    (team.root / "ctx.json").write_text(context.output, encoding="utf-8")
    good = _run(team, "verify", "--context", str(team.root / "ctx.json"), "--response", "-",
                stdin=f'"{ANSWER}" [turn {TURN}]\n')
    assert good.exit_code == 0 and "grounded" in good.output and "quoted" in good.output
    wrong = _run(team, "verify", "--context", str(team.root / "ctx.json"), "--response", "-",
                 stdin=f'"The budget cap is 9 million yen." [turn {TURN}]\n')
    assert wrong.exit_code == 1 and "misquoted" in wrong.output
    # a turn of the palace that was not handed over is foreign; a turn id that names nothing is unknown
    other = "chat-offsite-chat/chat-offsite-chat#5"
    verdict = verify_answer(f'"the temple tour on Saturday starts at 9." [turn {other}]', handed_units(team, [TURN]),
                            team)
    assert verdict.status == "foreign" and [c.id for c in verdict.foreign] == [other]
    unknown = verify_answer(f'"{ANSWER}" [turn {TURN}] [turn nowhere/x#9]', handed_units(team, [TURN]), team)
    assert unknown.grounded and unknown.unknown_citations == ["turn nowhere/x#9"]
    by_id = _run(team, "verify", "--memory", TURN, "--response", "-", stdin=f'"{ANSWER}" [turn {TURN}]\n')
    assert by_id.exit_code == 0, by_id.output


def test_mcp_verify_checks_a_turn_citation(team):
    from palace_cli.mcp import PalaceTools

    tools = PalaceTools(team)
    assert tools.verify(f'"{ANSWER}" [turn {TURN}]', [TURN]).startswith("grounded")
    refused = tools.verify(f'"The budget cap is 2 million yen." [turn {TURN}]', [TURN])
    assert refused.startswith("NOT grounded (misquoted)") and "misquoted " + TURN in refused


def test_the_thresholds_can_be_set_in_palace_toml(team, tmp_path):
    toml = team.root / "palace.toml"
    toml.write_text(toml.read_text(encoding="utf-8") + "\n[retrieval]\nabstain_below = {coverage = 1.1, dense = 0.99}\n",
                    encoding="utf-8")
    answer = ask(Palace(team.root), OFFSITE)
    assert answer.status == "abstained" and "covers too little" in answer.reason


# ---- a generated answer from an OpenAI-compatible endpoint ---------------------------------------------------


@pytest.fixture
def endpoint():
    """A real HTTP server on 127.0.0.1 answering /v1/chat/completions with `state["reply"](prompt)`."""
    state = {"reply": lambda prompt: "I do not know."}
    server = FakeEndpoint(lambda body: chat_reply(state["reply"](prompt_of(body))))
    state.update(url=server.url, prompts=server.prompts)
    yield state
    server.close()


def _use(palace, endpoint) -> Palace:
    """The palace with its generator pointed at the test's endpoint (palace.toml read afresh)."""
    toml = palace.root / "palace.toml"
    text = toml.read_text(encoding="utf-8")
    lines = f'endpoint = "{endpoint["url"]}"\nendpoint_model = "fake-1"\n'
    toml.write_text(text.replace("[models]\n", "[models]\n" + lines, 1) if "[models]\n" in text
                    else text + "\n[models]\n" + lines, encoding="utf-8")
    return Palace(palace.root)


def test_a_generated_answer_that_quotes_and_cites_the_turn_is_shown(team, endpoint):
    team = _use(team, endpoint)

    def reply(prompt):
        turn = re.search(r"\[turn ([^\]]+)\] \([^)]*\) Mika: The budget cap", prompt).group(1)
        return f'Mika set it at 1.2 million yen: "The budget cap for the Kyoto offsite is 1.2 million yen" [turn {turn}]'

    endpoint["reply"] = reply
    answer = ask(team, OFFSITE, use_cache=False)
    assert (answer.status, answer.mode) == ("answered", "generated") and answer.verdict.grounded
    assert "[turn ID]" in endpoint["prompts"][0] and answer.verdict.quotes[0]["found"]


@pytest.mark.parametrize("reply, why", [
    (f'Mika said "The budget cap for the Kyoto offsite is 1.5 million yen" [turn {TURN}]', "misquoted"),
    ("The cap is 1.2 million yen.", "uncited"),
    ('It is "flights included" [turn chat-offsite-chat/chat-offsite-chat#9]', "uncited"),
])
def test_a_generated_answer_that_does_not_verify_gives_way_to_the_extractive_one(team, endpoint, reply, why):
    team = _use(team, endpoint)
    endpoint["reply"] = lambda prompt: reply
    answer = ask(team, OFFSITE, use_cache=False)
    assert (answer.status, answer.mode) == ("answered", "extractive") and endpoint["prompts"]
    assert answer.generated["status"] == why and "the model's answer was not used" in answer.note
    assert answer.text.startswith(f'"{ANSWER}"')


def test_recall_json_names_the_turn_citation_it_expects(team):
    context = recall(team, OFFSITE).context
    assert f"[turn {TURN}] (line " in context and "cite it as it is marked, like [turn ID]" in context


def test_a_line_that_is_only_a_link_is_never_quoted_as_an_answer():
    from palace_cli.answers.extract import says_something

    assert not says_something("<https://docs.github.com/en/github/working-with-github-pages/creating-a-site>")
    assert not says_something("https://example.com/a/b")
    assert says_something("The [template](https://github.com/foambubble/foam-template) is ready to publish.")
    assert says_something("42.") and says_something("Yes.")


def test_no_quote_runs_across_a_code_fence():
    from palace_cli.answers.extract import Source, candidates

    text = ("Add the gem to your Gemfile\n\n```ruby\ngem \"github-pages\", group: :jekyll_plugins\n```\n\n"
            "Then run bundle install. See <https://pages.github.com/>\n")
    quoted = [s.text for s in candidates([Source("n", "memory", 0, text, "Pages", "n.md", 1)])]
    assert quoted and not any("```" in q or q.startswith("<http") for q in quoted)
    assert any(q.startswith("gem \"github-pages\"") for q in quoted) and all(q in text for q in quoted)
