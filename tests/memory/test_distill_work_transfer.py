"""Rules of the fifth step of work distill (memory/work.py, cues.py): what a memory says carries the words the turn
said (the project's name, the check after a rollout, the whole report of an event), and what only looks like a
memory is none; each on sentences written for these tests."""

from __future__ import annotations

import pytest

from palace_cli.conversations.model import Session, Turn
from palace_cli.memory.work import project_of, work_units


def _units(*turns, user="Ada", cwd=""):
    session = Session("cc", "claude-code", "x", started="2026-03-02T10:00:00Z", participants=["user", "assistant"])
    session.meta["cwd"] = cwd
    session.turns = [Turn(f"t{i}", role, text) for i, (role, text) in enumerate(turns)]
    return work_units(session, user)


@pytest.mark.parametrize("cwd, project", [("/home/ada/orchard/platform", "orchard"), ("/srv/orchard/api", "orchard"),
                                          ("/home/ada/infra", "infra"), ("/home/ada/src/app", "app"),
                                          ("/home/ada/src/orchard", "orchard"), ("", "")])
def test_a_folder_that_names_a_part_of_a_project_takes_its_parents_name(cwd, project):
    session = Session("cc", "claude-code", "x", started="2026-03-02T10:00:00Z", participants=["user", "assistant"])
    session.meta["cwd"] = cwd
    assert project_of(session) == project


def test_a_rollout_report_keeps_the_check_that_shows_it():
    units = _units(("assistant", "2.4.1 is deployed to production in all three zones. The latency panel shows p95 for "
                                 "POST /orders at 180 ms over the last ten minutes."), cwd="/home/ada/src/orchard")
    assert [u.kind for u in units] == ["milestone"]
    assert "2.4.1 is deployed to production" in units[0].text and "180 ms" in units[0].text


@pytest.mark.parametrize("text", ["Then a blue-green switch fits: keep the old pool serving while the new one is live "
                                  "on half the hosts.",
                                  "keep the staging names in the runbook, production ones once the production "
                                  "terraform is merged."])
def test_an_event_in_a_clause_of_condition_is_no_milestone(text):
    role = "assistant" if text.startswith("Then") else "user"
    assert [u for u in _units((role, text)) if u.kind == "milestone"] == []


def test_first_time_ever_is_no_rule():
    units = _units(("user", "It's live in production! First time ever the signup page loads under one second. Noor "
                            "found nothing on mobile either."))
    assert [u.kind for u in units] == ["milestone"]
    assert "under one second" in units[0].text


def test_a_verified_fix_that_says_its_cause_and_what_the_code_now_does_is_a_solution():
    units = _units(("user", "the nightly export writes empty files since tuesday."),
                   ("assistant", "Fixed and verified: the bucket policy never allowed the new role, so every write "
                                 "was dropped. `export_job` now assumes the writer role, and the new test with a "
                                 "real policy passes."))
    assert [u.kind for u in units if u.turn.id == "t1"] == ["solution"]
    assert "now assumes the writer role" in units[-1].text


@pytest.mark.parametrize("text", ["Please review the PR. It adds 'remember this device' tokens for the app.",
                                  "newest first. the whole thing runs overnight so the reports don't care"])
def test_a_phrase_that_only_looks_like_a_recap_makes_no_solution(text):
    assert [u for u in _units(("user", text)) if u.kind == "solution"] == []


def test_an_offer_of_the_agent_is_no_solution():
    units = _units(("user", "the staging table still holds yesterday's rows."),
                   ("assistant", "It could stay, but it holds the last day loaded until the next run, and anyone with "
                                 "read access sees it. I can truncate it at the end instead of dropping it."))
    assert [u for u in units if u.kind == "solution"] == []


PROPOSED = ("assistant", "A cheap guard: at the end of the nightly import, count the rows with no region and fail the "
                         "job when they are above 5%, posting to #data-alerts.")


@pytest.mark.parametrize("answer", ["yes. 5% is fine but post to #billing-alerts, nobody reads #data-alerts",
                                    "Yes, that. And post to #billing-alerts.",
                                    "Agreed on failing the job. What about the weekend runs?"])
def test_a_yes_then_its_change_or_a_part_taken_by_name_takes_the_proposal(answer):
    units = _units(("user", "the import sometimes loads rows with no region."), PROPOSED, ("user", answer))
    taken = [u for u in units if u.turn.id == "t2"]
    assert len(taken) == 1 and taken[0].kind in ("decision", "convention") and taken[0].signals["accepted"] == 1.0
    assert "fail the job when they are above 5%" in taken[0].text


def test_a_yes_followed_by_a_statement_of_its_own_takes_nothing():
    units = _units(("user", "the import sometimes loads rows with no region."), PROPOSED,
                   ("user", "yes. the import is run by Noor's team."))
    assert all(u.signals["accepted"] == 0.0 for u in units)


def test_i_should_have_said_is_no_hypothetical():
    units = _units(("user", "And a team rule I should have said first: every migration that drops a column needs "
                            "a second reviewer."))
    assert [u.kind for u in units] == ["convention"] and "every migration that drops a column" in units[0].text
    assert _units(("user", "we should have added a second reviewer to that migration.")) == []


def test_please_and_a_new_verb_is_a_request_not_a_yes():
    units = _units(("assistant", "The release is tagged as v2.3.0 and the changelog is published."),
                   ("user", "Thank you. Please write a short page on how the release script works."))
    assert all(u.signals["accepted"] == 0.0 for u in units)


def test_a_maybe_said_beside_a_yes_is_not_part_of_the_decision():
    units = _units(("assistant", "I'd store the drafts in IndexedDB so they survive a reload."),
                   ("user", "Yes please. Honestly if we ever build the desktop app we'll redo all of this. Anyway."))
    assert [u.kind for u in units] == ["decision"]
    assert "desktop" not in units[0].text and "Anyway" not in units[0].text


def test_a_word_of_one_time_in_a_rules_reason_does_not_make_it_one_off():
    units = _units(("user", "The release tag should be exactly the changelog heading, that's how we find releases "
                            "later."))
    assert [u.kind for u in units] == ["convention"]
    assert _units(("user", "tag it with the changelog heading later.")) == []


@pytest.mark.parametrize("text, kind", [
    ("Noor will review it, she does our load testing on Thursdays.", "fact"),
    ("Sade is our DBA and she'll run the upgrade.", "fact"),
    ("our partman setup has never been tested on 17.", "fact"),
    ("we never run migrations on Fridays.", "convention")])
def test_who_does_what_and_a_schedule_are_facts_and_never_been_is_a_report(text, kind):
    assert [u.kind for u in _units(("user", text))] == [kind]


def test_a_pasted_timeline_and_a_rule_word_in_quotes_are_no_rule():
    units = _units(("user", "Can you help with the incident notes? Here's the channel log:\n\n"
                            "09:14 alerts fire on the checkout API\n"
                            "09:30 Ravi: from now on nobody deploys on a Friday without asking me!!\n\n"
                            "(ignore Ravi's 'from now on' line, it's not a rule, nobody agreed to it)"))
    assert [u for u in units if u.kind in ("convention", "decision")] == []


def test_a_verbless_rule_completes_the_statement_before_it():
    units = _units(("user", "branch names here are `area/what`, like `billing/round-totals`. always the area"))
    assert [u.kind for u in units] == ["convention"]
    assert "`area/what`" in units[0].text and "always the area" in units[0].text


def test_a_rule_and_the_instruction_that_says_what_to_do_instead_are_one_memory():
    units = _units(("user", "No. We never log session ids, not even a prefix. Log the request id, that is what it "
                            "is for."))
    assert [u.kind for u in units] == ["convention"] and "Log the request id" in units[0].text


def test_a_turn_opening_verified_with_its_cause_is_a_checked_fix():
    units = _units(("user", "the orders page got slow after the last release."),
                   ("assistant", "Verified on staging: p95 is 180 ms (1.2 s before). Cause: the serializer started "
                                 "loading each order's items one by one; `prefetch_related` on items brings it to two "
                                 "queries."))
    assert [u.kind for u in units if u.turn.id == "t1"] == ["solution"]


def test_the_agents_report_that_a_run_is_complete_is_a_milestone():
    units = _units(("assistant", "The dry run is complete: 9 minutes from the freeze to the new cluster serving, and "
                                 "all smoke tests pass."))
    assert "milestone" in [u.kind for u in units]


def test_a_table_row_is_pasted_material():
    units = _units(("user", "the billing job fails every night."),
                   ("assistant", "| time | event |\n|---|---|\n| 02:10 | job fails with a timeout |\n\n"
                                 "Raised the job's timeout to 30 minutes; last night's run passed."))
    assert units and all("|" not in u.text for u in units)


def test_a_summary_of_the_plan_is_no_checked_fix():
    units = _units(("user", "add a rollback line to step 4."),
                   ("assistant", "Added the rollback line. Summary of the plan as it stands: replicate to the new "
                                 "cluster, sync the sequences, switch the app on Sunday; the smoke tests passed on "
                                 "staging."))
    assert [u for u in units if u.kind == "solution"] == []


@pytest.mark.parametrize("text", ["newest first, the reports everyone reads are the last 7 days",
                                  "drop step 4, once the operator does everything a manual checklist will rot"])
def test_everyone_or_everything_in_a_description_is_no_rule(text):
    assert [u for u in _units(("user", text)) if u.kind == "convention"] == []


def test_everything_with_a_rule_word_is_still_a_rule():
    units = _units(("user", "from now on everything goes through the connection pooler."))
    assert [u.kind for u in units] == ["convention"]


def test_a_change_to_a_system_is_a_fact_about_it():
    units = _units(("user", "the payments API v3 renamed amount_cents to amount_minor and our importer never noticed."))
    assert [u.kind for u in units] == ["fact"]
    assert _units(("user", "I renamed the helper to parse_amount.")) == []


def test_a_proposal_loses_its_short_lead_in_before_i_would():
    from palace_cli.memory.proposals import cleaned_proposal

    assert cleaned_proposal("For the second finding, I'd hash the tokens at rest.") == "hash the tokens at rest."
    assert cleaned_proposal("For now the job runs hourly.") == "For now the job runs hourly."


def test_and_a_second_rule_is_a_memory_of_its_own():
    units = _units(("user", "Two things! Dates in our release notes are always ISO, never US style. And no names in "
                            "the changelog, ever: 'a maintainer', 'a contributor', roles only."))
    assert [u.kind for u in units] == ["convention", "convention"]
    assert "changelog" not in units[0].text and "ISO" not in units[1].text


def test_a_clause_with_its_own_subject_does_not_complete_the_sentence_before_it():
    units = _units(("user", "The old key was rotated this morning. And we squash-merge everything, so that commit "
                            "never reaches main."))
    assert all("rotated" not in u.text for u in units if u.kind == "convention")
