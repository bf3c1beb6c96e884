"""The seventh step of work distill (memory/markup.py): a user's item-by-item answer to what the agent listed reads
with the item it answers, on sentences written for these tests, with the negatives that must stay as they were."""

from __future__ import annotations

from palace_cli.conversations.model import Session, Turn
from palace_cli.memory.markup import answers_in, listed_items, marked_answers, stated, unmarked
from palace_cli.memory.work import work_units

PLAN = """Here is what I would do:
1. Move the nightly export to the queue worker, so it stops blocking web requests.
2. Alternative to 1: keep it in cron but give it its own read replica.
3. Add a retry with backoff around the S3 upload, five attempts
   at most, then page whoever is on call.
4. Rename the bucket to orchard-exports-prod.
5. Turn on object versioning for the bucket."""

DRAFT = """Draft of the release note:
1. Exports: the nightly export moves to the queue worker.
2. Retention: exports are kept 30 days, then deleted.
3. Alerts: a failed export pages the on-call engineer."""


def _units(*turns, user="Ada", cwd="/home/ada/src/orchard"):
    session = Session("cc", "claude-code", "x", started="2026-03-02T10:00:00Z", participants=["user", "assistant"])
    session.meta["cwd"] = cwd
    session.turns = [Turn(f"t{i}", role, text) for i, (role, text) in enumerate(turns)]
    return work_units(session, user)


def test_a_numbered_list_is_read_with_its_wrapped_lines():
    items = listed_items(PLAN)
    assert list(items) == ["1", "2", "3", "4", "5"]
    assert items["3"].endswith("five attempts at most, then page whoever is on call.")


def test_one_listed_item_or_a_list_not_numbered_from_one_is_no_list():
    assert listed_items("Plan:\n1. Move the export to the queue worker.") == {}
    assert listed_items("3. Move the export.\n4. Rename the bucket.") == {}


def test_a_yes_to_an_item_is_a_decision_in_the_items_words_with_what_was_added():
    answers = marked_answers("1 yes. 2 no, we never add replicas for one job. 3 ok but three attempts, not five. "
                             "4 later. 5 yes.", PLAN)
    assert [a.verdict for a in answers] == ["yes", "no", "yes", "later", "yes"]
    assert stated(answers[0], "Ada") == ("Ada agreed: Move the nightly export to the queue worker, so it stops "
                                         "blocking web requests.")
    assert stated(answers[2], "Ada").endswith("then page whoever is on call. But three attempts, not five")
    assert stated(answers[3], "Ada") == ""  # put off: nothing settled
    assert stated(answers[1], "Ada").startswith("We never add replicas for one job (instead of: Alternative to 1")


def test_the_answers_become_units_on_the_users_turn_and_what_follows_is_still_read():
    units = _units(("user", "the nightly export keeps timing out the web workers, any ideas?"),
                   ("assistant", PLAN),
                   ("user", "1 yes. 2 no. 3 yes but three attempts, not five. 4 later, separate PR. 5 yes. "
                            "And from now on every bucket we create gets versioning, always."))
    texts = [u.text for u in units if u.turn.id == "t2"]
    assert any("queue worker" in t and "Ada agreed" in t for t in texts)
    assert any("three attempts, not five" in t and "retry with backoff" in t for t in texts)
    assert not any("orchard-exports-prod" in t for t in texts)  # item 4 was put off
    assert any(u.kind == "convention" and "every bucket" in u.text for u in units if u.turn.id == "t2")


def test_answers_keyed_by_the_items_first_word():
    answers = marked_answers("Looks right. Exports yes. Retention: 90 days, not 30, legal asked for it. "
                             "Alerts: page only in working hours.", DRAFT)
    assert [a.verdict for a in answers] == ["yes", "other", "other"]
    assert stated(answers[1], "Ada") == ("90 days, not 30, legal asked for it (on: Retention: exports are kept "
                                         "30 days, then deleted)")


def test_a_comment_in_the_users_words_keeps_the_rest_of_the_turn():
    text = "1. Fine, yes.\n2. No, keep it in cron.\nAlso: Lena owns the export job."
    answers = marked_answers(text, PLAN)
    assert [a.verdict for a in answers] == ["yes", "no"]
    assert unmarked(text, answers) == "Also: Lena owns the export job."


def test_one_number_in_a_sentence_is_no_answer_to_a_list():
    assert marked_answers("3 workers were enough last year, so let's leave it.", PLAN) == []
    assert marked_answers("We had 2 outages. 5 engineers looked at it.", PLAN) == []  # one mark only


def test_numbers_after_a_turn_with_no_list_are_no_answers():
    assert marked_answers("1 yes. 2 no.", "Should I move the export to the queue worker?") == []


def test_a_first_word_two_items_share_names_neither():
    draft = "1. Exports move to the queue.\n2. Exports are kept 30 days."
    assert marked_answers("Exports yes. Exports: 90 days.", draft) == []


def test_a_hedged_or_one_off_answer_is_no_memory():
    units = _units(("user", "the nightly export keeps timing out"), ("assistant", PLAN),
                   ("user", "1 yes for now. 2 maybe, not sure yet. 3 no."))
    assert [u for u in units if u.turn.id == "t2"] == []


NOTES = """Here are the notes from Monday's design review:
```
1. Queues: one SQS queue per tenant. AGREED
2. Retries: five attempts, then the dead-letter queue. AGREED
3. Move to Kafka next year? OPEN
4. Every message carries a trace id. AGREED
```
"""


def test_items_answered_together_in_any_order():
    answers = marked_answers("2 and 4 are fine. 1 is dead, we dropped it. 3 yes.", PLAN)
    assert [(a.item.split()[0], a.verdict) for a in answers] == [
        ("Alternative", "yes"), ("Rename", "yes"), ("Move", "no"), ("Add", "yes")]


def test_a_list_pasted_in_the_users_own_turn_is_answered_after_it():
    text = NOTES + "1, 2 and 4 stand as written. 3 is still open, we come back to it after the audit."
    answers, rest = answers_in(text.replace("```", ""), text, "")
    assert [a.verdict for a in answers] == ["yes", "yes", "yes", "later"]
    assert answers[0].item == "Queues: one SQS queue per tenant"  # the notes' status word left out
    assert rest == "Here are the notes from Monday's design review:"
    units = _units(("user", text))
    kinds = {u.text.split("agreed: ")[-1]: u.kind for u in units}
    assert kinds.get("Every message carries a trace id.") == "convention"  # a rule taken is a rule
    assert not any("Kafka" in u.text for u in units)  # still open


def test_the_numbers_of_a_pasted_list_itself_are_no_answers():
    text = "Our review notes:\n1. Queues: one SQS queue per tenant.\n2. Retries: five attempts, then the DLQ.\n"
    assert answers_in(text, text, "") == ([], "")


def test_an_item_turned_down_by_someone_is_no_memory():
    answers = marked_answers("1 yes. 4 is dead, Omar dropped it.", PLAN)
    assert [a.verdict for a in answers] == ["yes", "no"] and stated(answers[1], "Ada") == ""


REVIEW = """Review of the migration:
a. The FK types don't match.
b. Nothing stops two bookings of the same room on the same night.
c. The notes column has an index nobody uses."""


def test_items_marked_with_letters():
    answers = marked_answers("a: fix. b: yes, unique on (room_id, night), that's the point of the table. "
                             "c: drop that index, nobody searches notes.", REVIEW)
    assert [a.verdict for a in answers] == ["other", "yes", "other"]  # "drop that index" is no "drop it"
    assert "unique on (room_id, night)" in stated(answers[1], "Ada").lower()


def test_a_letter_that_is_a_word_is_no_mark():
    assert marked_answers("a yes from me. b yes too.", REVIEW) == []  # "a" as an article: marks need a stop


def test_an_answer_that_asks_back_is_no_memory():
    answers = marked_answers("a: fix. c: should we just drop the column?", REVIEW)
    assert stated(answers[1], "Ada") == ""
