"""The rules distill reads a work session with (memory/work.py, cues.py), one test a rule, on sentences written for
these tests: an answer names its question, a pronoun takes what it points at, a list answered is one memory, and
what only looks like a memory (a purpose clause, a symptom asked about, a rule said again) is none."""

from __future__ import annotations

import pytest

from palace_cli.conversations.model import Session, Turn
from palace_cli.memory.work import work_units


def _units(*turns, user="Ada"):
    session = Session("cc", "claude-code", "x", started="2026-03-02T10:00:00Z", participants=["user", "assistant"])
    session.turns = [Turn(f"t{i}", role, text) for i, (role, text) in enumerate(turns)]
    return work_units(session, user)


def test_a_terse_answer_names_the_question_it_settles():
    units = _units(("user", "should we drop the legacy feed endpoint?"),
                   ("assistant", "It still gets about forty calls a day, all from two partners."),
                   ("user", "keep the feed then, it's cheap to run."))
    assert [u.kind for u in units] == ["decision"]
    assert 'asked by Ada: "should we drop the legacy feed endpoint?"' in units[0].text


def test_the_question_asked_without_its_mark_is_still_the_question():
    units = _units(("user", "when does the code freeze start again."),
                   ("assistant", "You haven't mentioned the freeze date in this session."),
                   ("user", "Noor says the freeze starts on the 20th of March."))
    assert units and "code freeze start again" in units[0].text


def test_the_agents_question_is_named_but_not_its_request_to_act():
    asked = _units(("assistant", "Which branch do releases get cut from here?"),
                   ("user", "Always from stable, never from main."))
    assert asked and 'asked by the assistant: "Which branch' in asked[0].text
    request = _units(("assistant", "Before I guess, can you paste the failing job's log?"),
                     ("user", "We always cut releases from the stable branch."))
    assert request and "asked by" not in request[0].text


def test_an_instruction_on_it_takes_the_sentence_it_points_back_to():
    units = _units(("user", "there's a shared redis on the ops cluster, nobody uses it yet. use it for the session "
                            "store, writes only from the web pods."))
    assert units and "shared redis" in units[0].text and "session store" in units[0].text


def test_an_instruction_about_a_hypothetical_is_no_memory():
    units = _units(("user", "if we ever shard the orders table we'd need a router. note that in the design doc as "
                            "an open question, not a decision."))
    assert [u for u in units if u.kind in ("decision", "convention")] == []


def test_a_rule_said_again_is_no_new_memory():
    units = _units(("user", "Review note: no floats for money, use Decimal. Same rule as I said."))
    assert [u for u in units if u.kind in ("decision", "convention")] == []


@pytest.mark.parametrize("text", ["stop the old mailer cron so we don't send invoices twice.",
                                  "pause the sync job so that you don't overwrite my edits."])
def test_a_purpose_clause_is_no_rule(text):
    assert all(u.kind != "convention" for u in _units(("user", text)))


def test_once_now_is_for_the_task_at_hand():
    units = _units(("user", "reindex it once now with the full rebuild please."))
    assert units == []


def test_what_a_turn_asks_why_about_is_a_symptom_not_a_fact():
    assert _units(("user", "the nightly export takes 40 minutes, it took 10 last month. why")) == []
    assert _units(("user", "support says invoices in March are 4% lower than the ledger. find out why")) == []


def test_instead_of_verifies_a_fix_only_with_a_measure():
    assert _units(("assistant", "Changed the report query to read the summary table instead of scanning events, "
                                "with the date filter set on the index.")) == []
    units = _units(("user", "The monthly report times out."),
                   ("assistant", "Changed the report to read the summary table."),
                   ("assistant", "Fixed: with the summary table the report now takes 2 s instead of 95 s."))
    assert [u.kind for u in units] == ["solution"]


def test_a_day_range_and_prod_are_written_out():
    units = _units(("user", "rule is no prod migrations outside tue-thu, and never after 15:00."))
    assert units and "production" in units[0].text and "Tuesday to Thursday" in units[0].text


def test_it_is_chooses_only_where_a_choice_closes():
    assert all(u.kind != "decision" for u in _units(("user", "the media cache is 2 GB and most of it is old "
                                                             "thumbnails from the beta.")))
    assert [u.kind for u in _units(("assistant", "Six or twelve months of retention?"),
                                   ("user", "twelve months it is."))] == ["decision"]


def test_what_the_user_wants_done_under_a_context_list_is_no_fact():
    units = _units(("user", "context:\n- the billing service is Go 1.22 on Cloud Run\n- i want a plan to move it to "
                            "GKE, slowly"))
    assert [u.text for u in units if "plan" in u.text] == []
    assert any("Cloud Run" in u.text for u in units)


def test_a_sentence_that_names_what_it_points_at_is_a_fact():
    units = _units(("user", "The slow one is the export endpoint. It is POST /api/exports, about 30 calls a minute "
                            "at peak."))
    assert any(u.kind == "fact" and "/api/exports" in u.text for u in units)


def test_a_bare_list_answering_the_agent_is_one_memory():
    units = _units(("assistant", "How do you want the test fixtures laid out?"),
                   ("user", "- one factory per model\n- factories live in tests/factories/\n- no shared mutable "
                            "fixtures anymore"))
    assert [u.kind for u in units] == ["convention"]
    assert "tests/factories/" in units[0].text and "shared mutable" in units[0].text
    headed = _units(("assistant", "Anything else for the README?"),
                    ("user", "make it a rule:\n- every job has an owner\n- every alert links its runbook"))
    assert len(headed) == 2


def test_no_x_anymore_is_a_rule():
    assert [u.kind for u in _units(("user", "no more manual version bumps, the release job sets them."))] == [
        "convention"]


def test_a_settled_choice_after_a_rule_makes_the_group_a_decision():
    units = _units(("user", "support matters most, we only renew vendor contracts every three years. The enterprise "
                            "plan it is."))
    assert [u.kind for u in units] == ["decision"] and "enterprise plan" in units[0].text


def test_keeping_a_rule_the_agent_names_is_no_new_rule():
    units = _units(("user", "every migration is reversible."),
                   ("assistant", "This one drops a column, which breaks the reversible-migrations rule you set; do "
                                 "you want an exception?"),
                   ("user", "no, no exceptions. write the down step. keep it consistent"))
    assert [u.turn.id for u in units if u.kind in ("decision", "convention")] == ["t0"]


def test_a_verbless_lead_in_joins_the_rule_after_it():
    units = _units(("assistant", "Do any of the webhooks need retries?"),
                   ("user", "Yes. Five retries over two hours for billing events, with jitter. Audit events always "
                            "go once, no retry."))
    assert [u.kind for u in units] == ["convention"] and "Five retries" in units[0].text


def test_a_yes_answer_keeps_the_question_it_confirms():
    units = _units(("assistant", "Are all the images served through the CDN, including the thumbnails?"),
                   ("user", "Yes, all through the CDN, thumbnails too. We use Fastly."))
    assert units and 'asked by the assistant: "Are all the images served' in units[0].text


def test_an_instruction_with_only_its_purpose_is_for_the_task_at_hand():
    assert _units(("user", "turn off the old importer in cron so we don't load the files twice.")) == []
    kept = _units(("user", "turn off the old importer in cron, we never run two importers because they race."))
    assert [u.kind for u in kept] == ["convention"]


def test_what_the_user_wants_done_does_not_join_the_fact_before_it():
    units = _units(("user", "the report service is a 3,000-line Flask app. i want to split it up."))
    assert [u.kind for u in units] == ["fact"] and "split" not in units[0].text


def test_all_the_x_are_y_describes_it_is_no_rule():
    assert all(u.kind != "convention" for u in _units(("user", "so all the old invoices are stored in euros.")))
    assert [u.kind for u in _units(("user", "all new services log JSON to stdout."))] == ["convention"]


@pytest.mark.parametrize("text", ["We agreed to keep the raw exports for 13 months, legal asked for a year.",
                                  "I'd rather put the queue on SQS, fewer moving parts than Kafka.",
                                  "we're going to use Terraform Cloud for the state files."])
def test_a_choice_said_as_agreed_rather_or_going_to_use_is_a_decision(text):
    assert [u.kind for u in _units(("user", text))] == ["decision"]


def test_banned_or_not_allowed_is_a_rule():
    assert [u.kind for u in _units(("user", "force pushes to main are not allowed, open a revert PR."))] == [
        "convention"]


def test_lets_go_with_is_a_decision_said_outright():
    units = _units(("user", "let's go with Tuesday for the cutover."))
    assert [(u.kind, u.signals["strong"]) for u in units] == [("decision", 1.0)]
    hedged = _units(("user", "let's go with Tuesday for now, maybe."))
    assert all(not u.signals["strong"] for u in hedged)


def test_a_choice_word_in_the_agents_report_is_no_choice():
    units = _units(("user", "The nightly import fails on the new schema."),
                   ("assistant", "Switched the import to the v2 reader instead of the legacy parser; the nightly "
                                 "import passes on last night's files."))
    assert units and all(u.signals["choice"] == 0.0 for u in units)


def test_picking_an_option_of_an_either_or_question_is_a_choice():
    units = _units(("assistant", "Should the report keep the old column order, or follow the new dashboard?"),
                   ("user", "follow the dashboard. finance reads both side by side."))
    assert [u.kind for u in units] == ["decision"] and "asked by the assistant" in units[0].text
    assert _units(("assistant", "Should the report keep the old column order, or follow the new dashboard?"),
                  ("user", "follow the dashboard for now.")) == []


def test_a_choice_between_offered_options_keeps_only_the_option_chosen():
    units = _units(("user", "the nightly sync keeps failing quietly, how do we notice next time?"),
                   ("assistant", "Two options: a CloudWatch alarm on the task's exit code, or a heartbeat check in "
                                 "Cronitor pinged at the end of the job."),
                   ("user", "go with the heartbeat check, we already pay for cronitor."))
    decision = next(u for u in units if u.kind == "decision")
    assert "(A heartbeat check in Cronitor pinged at the end of the job.)" in decision.text
    assert "CloudWatch" not in decision.text


def test_a_heads_up_lead_in_is_no_part_of_the_memory():
    units = _units(("user", "fyi Ibrahim owns the billing data contract, ask him before changing an export column."))
    assert units and all(not u.text.lower().split(": ", 1)[-1].startswith("fyi") for u in units)


@pytest.mark.parametrize("offered, choice, kept", [
    ("a nightly cron, or a queue consumer.", "the queue consumer", "A queue consumer."),
    ("either a nightly cron or a queue consumer", "queue consumer please", "A queue consumer."),
    ("a nightly cron, or a queue consumer.", "yes", "a nightly cron, or a queue consumer."),  # names none
    ("a cron that runs the queue, or a queue consumer.", "the queue", "a cron that runs the queue, or a queue "
                                                                      "consumer."),  # names both
    ("Add a nightly cron.", "cron it is", "Add a nightly cron."),  # no options
])
def test_chosen_option_narrows_an_either_or_only_to_one_named_option(offered, choice, kept):
    from palace_cli.memory.proposals import chosen_option

    assert chosen_option(offered, choice) == kept
