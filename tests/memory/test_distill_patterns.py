"""The pure parts of distill: relative dates, person rewriting, filler, memory types, attributes, the scorer."""

from __future__ import annotations

from datetime import date

import pytest

from palace_cli.conversations.model import Session, Turn
from palace_cli.core.dates import resolve_relative
from palace_cli.memory import scorer
from palace_cli.memory.scorer import WORK_FITTED
from palace_cli.memory.extract import _valid_from, extract_session, subject_of, turn_memory, work_session
from palace_cli.memory.patterns import attribute, is_filler, memory_type, rewrite, with_subject

MONDAY = "2023-05-08T13:56"  # a Monday


@pytest.mark.parametrize("said, expected, day, precision, past", [
    ("I went yesterday.", "I went on 7 May 2023.", date(2023, 5, 7), "day", True),
    ("the day before yesterday", "on 6 May 2023", date(2023, 5, 6), "day", True),
    ("See you tomorrow!", "See you on 9 May 2023!", date(2023, 5, 9), "day", False),
    ("We met last night", "We met on 7 May 2023", date(2023, 5, 7), "day", True),
    ("It is busy today", "It is busy on 8 May 2023", date(2023, 5, 8), "day", False),
    ("I moved two days ago", "I moved on 6 May 2023", date(2023, 5, 6), "day", True),
    ("a few weeks ago", "in the week of 17 April 2023", date(2023, 4, 17), "week", True),
    ("three months ago", "in February 2023", date(2023, 2, 1), "month", True),
    ("a year ago", "in 2022", date(2022, 1, 1), "year", True),
    ("last week I quit", "in the week of 1 May 2023 I quit", date(2023, 5, 1), "week", True),
    ("this week", "in the week of 8 May 2023", date(2023, 5, 8), "week", False),
    ("next week", "in the week of 15 May 2023", date(2023, 5, 15), "week", False),
    ("last weekend", "on the weekend of 6 May 2023", date(2023, 5, 6), "weekend", True),
    ("this weekend", "on the weekend of 13 May 2023", date(2023, 5, 13), "weekend", False),
    ("Lost my job last month", "Lost my job in April 2023", date(2023, 4, 1), "month", True),
    ("next month I perform", "in June 2023 I perform", date(2023, 6, 1), "month", False),
    ("I painted it last year", "I painted it in 2022", date(2022, 1, 1), "year", True),
    ("last Friday we met", "on Friday, 5 May 2023 we met", date(2023, 5, 5), "day", True),
    ("next Monday", "on Monday, 15 May 2023", date(2023, 5, 15), "day", False),
    ("this Friday", "on Friday, 12 May 2023", date(2023, 5, 12), "day", False),
    ("last summer", "in the summer of 2022", date(2022, 6, 1), "season", True),
    ("this summer", "in the summer of 2023", date(2023, 6, 1), "season", False),
    ("last winter", "in the winter of 2022/23", date(2022, 12, 1), "season", True),
    ("I have lived here since last year", "I have lived here since 2022", date(2022, 1, 1), "year", True),
    ("until next week", "until the week of 15 May 2023", date(2023, 5, 15), "week", False),
])
def test_relative_dates_resolve_against_the_moment_said(said, expected, day, precision, past):
    text, found = resolve_relative(said, MONDAY)
    assert text == expected
    assert [(f.day, f.precision, f.past) for f in found] == [(day, precision, past)]


def test_vague_or_undated_text_is_left_alone():
    assert resolve_relative("I went there recently, a while ago", MONDAY) == ("I went there recently, a while ago", [])
    assert resolve_relative("yesterday", None) == ("yesterday", [])
    assert resolve_relative("yesterday", "2023-05-08T23:30:00-07:00")[0] == "on 7 May 2023"  # the speaker's day


@pytest.mark.parametrize("sentence, expected", [
    ("I love my dog Luna.", "Jon loves their dog Luna."),  # named once, "they" after (gender is not known)
    ("I'm swamped with the kids & work.", "Jon is swamped with the kids & work."),
    ("I've been dancing since I was a kid.", "Jon has been dancing since they were a kid."),
    ("I really try to go every week.", "Jon really tries to go every week."),
    ("I don't like it, but I do yoga.", "Jon doesn't like it, but they do yoga."),
    ("I watch movies and I go out. I'm happy.", "Jon watches movies and they go out. They're happy."),
    ("I went to a support group.", "Jon went to a support group."),
    ("My dog and I went out.", "Jon's dog and Jon went out."),  # a possessive does not name the subject
    ("Your drive is awesome and you're doing great.", "Gina's drive is awesome and Gina is doing great."),
    ("I think you are great and I love your dog.", "Jon thinks Gina is great and Jon loves Gina's dog."),  # two
    ("Lost my job as a banker.", "Jon lost their job as a banker."),
    ("Gonna open a studio.", "Jon is gonna open a studio."),
    ("Been only to Rome once.", "Been only to Rome once."),  # "I've been" or "it's been": left alone
    ("Glad I have you in my corner!", "Glad Jon has Gina in Jon's corner!"),  # "you" an object: "in" stays
    ("I gotta tell you about it.", "Jon gotta tell Gina about it."),
])
def test_first_and_second_person_become_names(sentence, expected):
    assert rewrite(with_subject(sentence), "Jon", "Gina") == expected


def test_without_an_addressee_second_person_stays():
    assert rewrite("You should see my studio.", "Jon") == "You should see Jon's studio."


@pytest.mark.parametrize("sentence, filler", [
    ("Hey Mel!", True), ("Good to see you!", True), ("Wow, that's so cool, Caroline!", True), ("Thanks!", True),
    ("Keep it up!", True), ("Long time no talk!", True), ("Sounds great, Jon!", True), ("What's up?", True),
    ("Been only to Rome once.", False), ("I'll always be there for you.", False),
    ("Congrats on the recognition!", False), ("I started a pottery class.", False),
])
def test_filler(sentence, filler):
    assert is_filler(sentence, ["Mel", "Caroline", "Jon"]) is filler


@pytest.mark.parametrize("text, kind", [
    ("We decided to use SQLite for the cache.", "decision"),
    ("I'm gonna open a dance studio next month.", "plan"),
    ("I ran my first half marathon with my sister.", "event"),
    ("Contemporary is my favorite dance style.", "preference"),
    ("My daughter is three now.", "relationship"),
    ("Kindness can make a huge difference, it's important.", "opinion"),
    ("The studio is downtown near the river.", "fact"),
])
def test_memory_types(text, kind):
    assert memory_type(text) == kind


@pytest.mark.parametrize("text, found", [
    ("I work as a nurse at the city hospital.", ("job", "nurse")),
    ("I started a new job as a teacher at the school.", ("job", "teacher")),
    ("We live in Lisbon with two cats.", ("home", "lisbon")),
    ("My favorite color is deep green.", ("favorite color", "deep green")),
    ("My dog's name is Pepper.", ("name dog", "pepper")),
    ("I just got engaged!", ("status", "engaged")),
    ("I love green.", None),
    ("Lost my job as a banker yesterday.", None),
    ("I used to work as a waiter.", None),
])
def test_attributes(text, found):
    assert attribute(text) == found


def test_subject_is_the_first_words_that_say_something():
    assert subject_of("Thanks for the advice, Gina! Jon started a new class at the gym downtown.") == \
        "Jon started a new class at the gym downtown"
    assert subject_of("Ada went to Norway on 7 May 2023 with Ada's sister and they hiked the fjords. More.") == \
        "Ada went to Norway on 7 May 2023 with Ada's…"
    assert subject_of("Ada hikes.") == "Ada hikes"


def _session(turns, started=MONDAY):
    session = Session("s1", "locomo", "x/session_1", started=started, participants=["Ada", "Ben"])
    session.turns = [Turn(f"D1:{i}", speaker, text) for i, (speaker, text) in enumerate(turns, 1)]
    return session


def test_a_turn_keeps_its_statements_and_the_question_it_answers():
    session = _session([("Ben", "Hey Ada! How long have you been married?"),
                        ("Ada", "Thanks for asking! 5 years already! We got married in Lisbon last year. "
                                "Do you remember the photos?")])
    content, original, dates = turn_memory(session.turns[1], session, "Ada", "Ben", session.turns[0])
    # The speaker named when no sentence does; "last year" kept as said, the year it names beside it.
    assert content == ('Ada: 5 years already! We got married in Lisbon last year (2022). '
                       '(asked by Ben: "How long have you been married?")')
    assert "Thanks" not in content and "remember" not in content
    assert [d.day for d in dates] == [date(2022, 1, 1)]


def test_chit_chat_scores_low_and_news_high():
    session = _session([("Ada", "Hey Ben! Good to see you!"), ("Ben", "Hi! How are you?"),
                        ("Ada", "I started a new job as a teacher at the primary school downtown last week, "
                                "and yesterday my class went to the science museum."),
                        ("Ben", "Wow, congrats!")])
    candidates, uncertain = extract_session(session, uncertain_from=0.0)
    assert [c.turn for c in candidates] == ["D1:3"]
    assert {u.turn.id for u in uncertain} == {"D1:1", "D1:2", "D1:4"}
    memory = candidates[0]
    assert memory.about == "Ada" and memory.attribute == "job" and memory.type == "event"
    assert memory.valid_from == date(2023, 5, 1)  # the earliest past date it names
    assert "yesterday (7 May 2023) their class went to the science museum" in memory.content
    assert 0 < memory.confidence <= 1


def test_a_question_answered_is_quoted_even_without_you():
    session = _session([("Ben", "Wow, great job! What was it called?"),
                        ("Ada", "The game was called Counter-Strike, and the team had a blast!")])
    content, _, _ = turn_memory(session.turns[1], session, "Ada", "Ben", session.turns[0])
    assert content == ('Ada: The game was called Counter-Strike, and the team had a blast! '
                       '(asked by Ben: "What was it called?")')


def test_at_most_half_a_sessions_turns_become_memories():
    news = ["I started a new job as a teacher at the primary school downtown last week.",
            "My sister moved to Lisbon in March and I visited her for my birthday.",
            "I adopted a puppy named Rex from the shelter near my flat on Saturday.",
            "I finished my first half marathon in two hours and my knees still hurt.",
            "I signed up for a pottery class that meets every Tuesday at the art centre.",
            "My brother and I are planning a road trip through Portugal next summer."]
    session = _session([("Ada" if i % 2 == 0 else "Ben", text) for i, text in enumerate(news)])
    kept, left = extract_session(session, threshold=0.0, uncertain_from=0.0)
    assert len(kept) == 3 and len(left) == 3  # six telling turns: the three likeliest kept, the rest left to a model
    assert min(c.confidence for c in kept) >= round(max(u.probability for u in left), 2)


def test_user_sessions_keep_the_users_rules_and_preferences():
    session = Session("cc", "claude-code", "abc", started="2025-06-02T18:46:59Z", participants=["user", "assistant"])
    session.turns = [Turn("u1", "user", "The clock test fails on CI; why? I prefer small commits. Always run the "
                                        "tests with -x before pushing."),
                     Turn("a1", "assistant", "I'll use freezegun: I prefer it to monkeypatching time.")]
    candidates, _ = extract_session(session, names={"user": "Ada"})
    assert [(c.about, c.kind, c.type, c.content) for c in candidates] == [
        ("Ada", "convention", "preference", "Ada prefers small commits."),
        ("Ada", "convention", "preference", "Always run the tests with -x before pushing.")]


def test_the_shipped_weights_cover_every_signal():
    assert set(scorer.FITTED.weights) == set(scorer.SIGNALS) == set(scorer.FITTED.mean) == set(scorer.FITTED.scale)
    assert 0 < scorer.THRESHOLD < 1


def test_a_choice_holds_from_the_day_it_was_made_not_from_a_date_in_its_reason():
    session = Session("cc", "claude-code", "x", started="2026-11-20T10:00:00Z", participants=["user", "assistant"])
    session.turns = [Turn("t1", "user", "Let's go with Vault for the shopfront secrets, because env vars leak into "
                                        "crash reports and we got burned by that last year.")]
    candidates, _ = work_session(session, "Kim", WORK_FITTED, 0.0)
    decision = next(c for c in candidates if c.type == "decision")
    assert decision.valid_from == date(2026, 11, 20)


def test_a_date_right_after_since_dates_the_rule_and_a_fix_holds_from_its_day():
    said = "2026-11-20T10:00:00Z"
    reason = resolve_relative("we got burned by that last year", said)[1]
    since = resolve_relative("we have squash-merged every PR since last year", said)[1]
    assert _valid_from("decision", reason, said, "go with Vault because we got burned by that last year") \
        == date(2026, 11, 20)
    assert _valid_from("preference", since, said, "we have squash-merged every PR since last year") \
        == date(2025, 1, 1)
    assert _valid_from("fact", reason, said, "Kim joined because we got burned by that last year") == date(2025, 1, 1)
    assert _valid_from("procedure", since, said, "the cert expired last year, renewed it") == date(2026, 11, 20)
