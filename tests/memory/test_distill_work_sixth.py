"""Rules of the sixth step of work distill (memory/work.py, cues.py), written after reading the second held-out set's
misses: the agent's report of what it shipped or of a change that removed a problem, a question the user answers
in the same breath, and a short answer that picks one of the options the agent offered; each on sentences written
for these tests, with the negatives that must stay no memory."""

from __future__ import annotations

import pytest

from palace_cli.conversations.model import Session, Turn
from palace_cli.memory.work import work_units


def _units(*turns, user="Ada", cwd="/home/ada/src/orchard"):
    session = Session("cc", "claude-code", "x", started="2026-03-02T10:00:00Z", participants=["user", "assistant"])
    session.meta["cwd"] = cwd
    session.turns = [Turn(f"t{i}", role, text) for i, (role, text) in enumerate(turns)]
    return work_units(session, user)


def _kinds(units, turn):
    return [u.kind for u in units if u.turn.id == turn]


# ---- the agent's reports ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "Deployed orchard-web 2.7.0 to production: all 4 replicas report the new build.",
    "Released billing-worker 1.4.2 to prod; the queue drained within a minute.",
    "Tagged v1.0.0; the pipeline built the wheels and published the release.",
    "The first production sync succeeded: 1,204 accounts copied, none skipped.",
])
def test_the_agents_report_of_a_release_or_a_first_production_run_is_a_milestone(text):
    units = _units(("assistant", text))
    assert _kinds(units, "t0") == ["milestone"]


@pytest.mark.parametrize("text", [
    "I'll deploy orchard-web 2.7.0 to production once you say go.",  # a plan
    "Deployed orchard-web 2.7.0 to staging; the production rollout waits for Thursday.",  # staging, not production
    "Should I tag v1.0.0 and publish the release?",  # an offer
    "The first staging sync succeeded: 1,204 accounts copied.",  # not production
])
def test_a_plan_an_offer_or_a_staging_run_is_no_milestone(text):
    assert "milestone" not in _kinds(_units(("assistant", text)), "t0")


@pytest.mark.parametrize("text", [
    "Night batch after six hours: no timeouts in 40 runs. The deadlock is gone since the two jobs became one queue "
    "consumer.",
    "Checked on staging: exports finish, and the retry storm is over. So the fix holds on staging: one lock per "
    "tenant instead of one global lock.",
    "This morning's numbers: egress cost in prod is down 64% since the CDN went in (images no longer leave the "
    "bucket directly).",
])
def test_a_check_that_a_change_removed_the_problem_is_a_solution(text):
    units = _units(("user", "the night batch keeps timing out, two jobs seem to fight over the same rows."),
                   ("assistant", "Both jobs lock the same tenant rows, so they deadlock. Merged them into one queue "
                                 "consumer with one lock per tenant."),
                   ("assistant", text))
    assert _kinds(units, "t2") == ["solution"]


def test_a_change_with_its_cause_and_a_passing_repro_in_one_turn_is_a_solution():
    units = _units(("assistant", "Switched the parser to the streaming decoder and ran the 2 GB replay: no OOM, peak "
                                 "memory 310 MB. The OOM came from reading the whole file into memory; streaming "
                                 "fixes it."))
    assert _kinds(units, "t0") == ["solution"]


@pytest.mark.parametrize("text", [
    "Added a section on retries to the README and linked it from the index.",  # a change, no problem, no check
    "Switched the parser to the streaming decoder; I haven't run the replay yet.",  # nothing checked
    "The deadlock should be gone once the two jobs become one consumer.",  # a prediction
])
def test_a_change_without_a_check_or_a_prediction_is_no_solution(text):
    assert "solution" not in _kinds(_units(("assistant", text)), "t0")


# ---- a question the user asks and answers ------------------------------------------------------------------


@pytest.mark.parametrize("text, kind, words", [
    ("The staging cluster idles all night. Could we just stop it between 21:00 and 06:00? Yes, let's do that.",
     "decision", ["stop it between 21:00 and 06:00"]),
    ("Shall we pin the base image then? The digest of 3.12-slim from this morning - yes, that's what we'll do.",
     "decision", ["pin the base image", "3.12-slim"]),
    ("And every service gets a readiness probe, right? Yes: every service gets one, checked by the chart linter.",
     "convention", ["readiness probe", "chart linter"]),
    ("Should the soak test gate merges? No, it takes an hour. The smoke suite gates every merge instead.",
     "convention", ["smoke suite gates every merge", "soak test"]),
])
def test_a_question_the_user_answers_in_the_same_breath_is_a_decision(text, kind, words):
    units = _units(("user", text))
    assert [u.kind for u in units] == [kind]
    assert all(w in units[0].text.lower() for w in words)
    assert units[0].signals["strong"] == 1.0


@pytest.mark.parametrize("text", [
    "Could we just stop staging at night? No.",  # turned down, nothing in its place
    "Should we retry the upload? Yes, for now, until the vendor fixes their endpoint.",  # for now
    "Can we cache the token? Maybe, I'd have to ask Priya first.",  # no yes or no
    "Could we run the migration now? Yes please, go ahead.",  # a request to act now, not a proposal kept
    "Is the nightly job still failing? Yes, since Tuesday.",  # a question about the state of things
])
def test_a_question_turned_down_hedged_or_about_now_makes_no_decision(text):
    assert [u for u in _units(("user", text)) if u.kind in ("decision", "convention")
            and u.signals["strong"] == 1.0] == []


@pytest.mark.parametrize("text", ["From today every migration gets a down step, that's the rule.",
                                  "Starting tomorrow nobody merges to main without a green build, no exceptions.",
                                  "Every new bucket is private by default, that's the rule from today."])
def test_from_today_starts_a_rule_and_is_no_one_off(text):
    assert [u.kind for u in _units(("user", text))] == ["convention"]


@pytest.mark.parametrize("text", ["Skip the flaky test today, we'll look at it tomorrow.",
                                  "Deploy it today after lunch."])
def test_today_alone_is_still_one_off(text):
    assert [u for u in _units(("user", text)) if u.kind == "convention"] == []


# ---- a short answer that picks an offered option ----------------------------------------------------------

OPTIONS = ("Two ways out:\n(a) raise the pool to 40 connections and keep the sync driver;\n(b) move the hot path to "
           "the async driver, which needs no pool at all.\nI'd lean to (b).")


@pytest.mark.parametrize("answer", ["b", "(b)", "option b", "B please", "the second one", "the async one",
                                    "ok, the latter"])
def test_a_short_answer_picking_an_offered_option_is_a_decision_in_its_words(answer):
    units = _units(("user", "the checkout endpoint runs out of db connections at peak."), ("assistant", OPTIONS),
                   ("user", answer))
    taken = [u for u in units if u.turn.id == "t2"]
    assert [u.kind for u in taken] == ["decision"]
    assert "async driver" in taken[0].text and "raise the pool to 40" in taken[0].text  # and what it was chosen over
    assert "lean" not in taken[0].text


def test_an_option_named_by_a_word_of_an_either_or_keeps_the_answers_own_detail():
    units = _units(("assistant", "The export can run from a cron job on the worker VM, or from the queue's "
                                 "scheduled tasks, which retry on their own."),
                   ("user", "The queue one, nightly at 02:00. Set it up."))
    assert [u.kind for u in units if u.turn.id == "t1"] == ["decision"]
    assert "scheduled tasks" in units[-1].text and "02:00" in units[-1].text


@pytest.mark.parametrize("offered, answer", [
    (OPTIONS, "c"),  # no option (c)
    ("Run the migration on a replica first? It takes about ten minutes.", "b"),  # nothing offered
    (OPTIONS, "b is interesting, but what does the async driver do to our tests?"),  # a question, not a pick
    (OPTIONS, "the blue one"),  # names no option
])
def test_an_answer_that_picks_nothing_offered_is_no_option_decision(offered, answer):
    units = _units(("assistant", offered), ("user", answer))
    assert not any("chose" in u.text for u in units)


@pytest.mark.parametrize("answer", ["Yes, this we do.", "ok, like this.", "yep, we'll do that."])
def test_more_ways_to_take_a_proposal(answer):
    units = _units(("assistant", "Proposed layout: one table per tenant for invoices, a shared table for "
                                 "products, and a nightly job that archives invoices older than two years."),
                   ("user", answer))
    assert [u.kind for u in units if u.turn.id == "t1"] == ["decision"]
    assert "archives invoices" in units[-1].text


# ---- rules said in more shapes -----------------------------------------------------------------------------


@pytest.mark.parametrize("text, words", [
    ("Release is next week then: we only cut releases on Wednesdays, 14:00 to 16:00 UTC, and tomorrow is a holiday "
     "anyway.", ["only cut releases on wednesdays", "14:00"]),
    ("Since you're in the changelog anyway: entries are only ever added under Unreleased, never under a version.",
     ["only ever added under unreleased"]),
])
def test_a_rule_after_a_colon_or_beside_a_plan_for_now_is_kept_with_its_details(text, words):
    units = [u for u in _units(("user", text)) if u.kind == "convention"]
    assert len(units) == 1 and all(w in units[0].text.lower() for w in words)
    assert "holiday" not in units[0].text


def test_settled_things_announced_before_a_colon_are_kept_without_the_lead_in():
    units = _units(("user", "Nice. Two things Omar and I decided at lunch, please add them to CONTRIBUTING.md: "
                            "commit messages are written in the imperative, and the changelog is edited by the "
                            "release manager only, never by hand in a PR."))
    assert [u.kind for u in units] == ["convention"]
    assert units[0].text.startswith("orchard: Commit messages") and "CONTRIBUTING" not in units[0].text


def test_an_acceptance_before_a_colon_announces_nothing():
    units = _units(("assistant", "I'd split the settings page into a general tab and a billing tab, with the "
                                 "billing tab visible to admins only."),
                   ("user", "Agreed, do that for the admin pages too: two tabs, billing for admins."))
    assert all(not u.text.startswith("orchard: Two tabs") for u in units)


def test_a_counterfactual_reason_after_a_dash_does_not_make_a_rule_hypothetical():
    units = _units(("user", "From now on every schema change gets a dry run on the staging copy first, no exceptions "
                            "— last month's outage would have shown up there."))
    assert [u.kind for u in units] == ["convention"]


@pytest.mark.parametrize("text", ["If we ever add a second region, every bucket would have to be replicated.",
                                  "Golden files were never regenerated after the move, which is why they drift."])
def test_a_hypothetical_rule_or_a_report_with_never_stays_no_rule(text):
    assert [u for u in _units(("user", text)) if u.kind == "convention"] == []


@pytest.mark.parametrize("text", ["If one day we open the API to partners, every key must have a quota, but not now.",
                                  "If ever we split the monolith, each service must own its schema."])
def test_if_one_day_or_if_ever_is_hypothetical(text):
    assert [u for u in _units(("user", text)) if u.kind == "convention"] == []


def test_the_reason_of_a_no_does_not_make_what_is_done_instead_one_off():
    units = _units(("user", "Should the full fuzz run gate releases then? No, far too slow later on. A 5-minute fuzz "
                            "smoke on every release tag."))
    assert [u.kind for u in units] == ["convention"]
    assert "5-minute fuzz smoke" in units[0].text and "fuzz run gate releases" in units[0].text


@pytest.mark.parametrize("text", ["Stack: Rails 7.1, Sidekiq, MySQL 8 on RDS.", "gpu: 2x h100, node train-03.",
                                  "Region: eu-central-1, one account per environment."])
def test_a_value_under_a_short_name_is_a_fact(text):
    assert [u.kind for u in _units(("user", text))] == ["fact"]


@pytest.mark.parametrize("text", ["Next: the CSV export, with 3 columns.", "For 2: page at 5 errors a minute.",
                                  "Problem: the 3.1 build fails on arm64.", "Question: is node-7 still in the pool?",
                                  "Plan: migrate 2 tables tonight."])
def test_a_task_an_item_reference_a_problem_or_a_question_under_a_name_is_no_fact(text):
    assert [u for u in _units(("user", text)) if u.kind == "fact"] == []


@pytest.mark.parametrize("text, kind", [("ok. lint with ruff from now, not flake8.", "convention"),
                                        ("The cert expires two weeks from now, renew it.", "")])
def test_from_now_starts_a_rule_and_weeks_from_now_is_a_date(text, kind):
    assert "convention" in [u.kind for u in _units(("user", text))] if kind else \
        [u for u in _units(("user", text)) if u.kind == "convention"] == []
