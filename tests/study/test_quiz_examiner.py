"""Examiner questions over the whole example palace, the grading table, strategies and the session core."""

from __future__ import annotations

import random
import re
import subprocess
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from palace_cli.palace import Palace
from palace_cli.study.evaluator import Element, grade
from palace_cli.study.examiner import KINDS, Examiner, subject_forms
from palace_cli.editing.reviewlog import Review, ReviewLog
from palace_cli.study.scheduler import replay
from palace_cli.study.session import StudySession
from palace_cli.study.strategies import keyword_neighbours, select, vector_neighbours
from palace_cli.index.vectors import VectorStore

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
STOP = set("a an and the of to in on for by with or at is are as its it be that this from".split())


def _norm(text: str) -> str:
    return " " + " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split()) + " "


def _prefixes(text: str) -> set[str]:
    return {w[:5] for w in _norm(text).split() if w not in STOP and len(w) >= 3}


def independent_leak(shown: str, answer: str) -> bool:
    """The answer phrase is shown, or every content word of it is (compared by 5-letter prefix)."""
    if _norm(answer).strip() and _norm(answer) in _norm(shown):
        return True
    wanted = _prefixes(answer)
    return bool(wanted) and wanted <= _prefixes(shown)


def answerable(question, memory, memories) -> bool:
    """Some accepted form of each expected element is written in the memory (or, for links, a linked memory)."""
    text = " ".join([memory.subject, memory.id.replace("-", " "), memory.content, " ".join(memory.keywords)])
    if question.kind == "link":
        text += " " + " ".join(memories[i].subject for i in memory.all_links if i in memories)
    return all(any(_norm(f) in _norm(text) for f in e.forms) for e in question.expected)


@pytest.fixture(scope="module")
def example():
    from conftest import EXAMPLE

    palace = Palace(EXAMPLE)
    return palace, palace.scan().memories


def test_every_question_over_the_example_palace_hides_its_answer_and_is_answerable(example):
    _, memories = example
    examiner = Examiner(memories, seed=0)
    asked = {kind: 0 for kind in KINDS}
    for memory in memories.values():
        for kind in examiner.available(memory):
            for variant in range(3):
                question = examiner.ask(memory, kind, variant)
                assert question is not None, (memory.id, kind)
                asked[kind] += 1
                for element in question.expected:
                    assert not independent_leak(question.shown, element.label), (memory.id, kind, element.label)
                    for form in element.forms:
                        assert _norm(form) not in _norm(question.shown), (memory.id, kind, form)
                assert answerable(question, memory, memories), (memory.id, kind, question.answer)
                # the stored answer, typed back, earns full credit
                assert grade(question.expected, question.answer, question.need).verdict == "correct"
    assert all(count >= 3 * 60 for kind, count in asked.items() if kind != "link"), asked
    assert asked["link"] >= 3 * 60


def test_cloze_blanks_an_informative_term_and_rotates(example):
    _, memories = example
    examiner = Examiner(memories, seed=0)
    first = examiner.cloze(memories["two-phase-commit"], 0)
    assert first.answer.lower() in ("coordinator", "participant", "participants")
    assert "_____" in first.prompt
    answers = {examiner.cloze(memories["saga-pattern"], v).answer.lower() for v in range(3)}
    assert len(answers) >= 2


def test_image_question_redacts_the_subject_words(example):
    _, memories = example
    question = Examiner(memories).image(memories["cache-stampede"])
    assert "thunder" not in question.prompt.lower()
    assert "▒▒▒" in question.prompt


def test_subject_forms_accept_parenthesis_and_bare_names(example):
    _, memories = example
    assert subject_forms(memories["two-phase-commit"])[:3] == ["Two-Phase Commit (2PC)", "Two-Phase Commit", "2PC"]
    assert "Saga" in subject_forms(memories["saga-pattern"])


# ---- grading --------------------------------------------------------------------------------

NAME = [Element("Two-Phase Commit (2PC)", ["Two-Phase Commit (2PC)", "Two-Phase Commit", "2PC"])]
REPLICATION = [Element("Leader-Follower Replication", ["Leader-Follower Replication"])]
FACTS = [Element(t, [t], partial=True) for t in ("coordinator", "prepare phase", "in doubt", "xa")]
PHRASE = [Element("probabilistic early expiration", ["probabilistic early expiration"], partial=True)]


@pytest.mark.parametrize("expected, answer, need, verdict, rating", [
    (NAME, "two-phase commit", None, "correct", 3),
    (NAME, "2pc", None, "correct", 3),
    (NAME, "Two phase comit", None, "correct", 3),        # a typo in a long word
    (NAME, "tpc", None, "correct", 3),                    # initials
    (NAME, "three-phase commit", None, "wrong", 1),       # a different number is a different thing
    (NAME, "phase commit", None, "wrong", 1),             # a name needs all its words
    (NAME, "paxos", None, "wrong", 1),
    (NAME, "", None, "empty", 1),
    (NAME, "idk", None, "empty", 1),
    (NAME, "  ?  ", None, "empty", 1),
    (REPLICATION, "multi-leader replication", None, "wrong", 1),
    (REPLICATION, "leader follower replication", None, "correct", 3),
    (FACTS, "a coordinator runs a prepare phase", 2, "correct", 3),
    (FACTS, "the coordinator decides", 2, "partial", 2),
    (FACTS, "participants get stuck in doubt, XA", 2, "correct", 3),
    (FACTS, "locks", 2, "wrong", 1),
    (PHRASE, "early expiration, probabilistically", None, "correct", 3),
    (PHRASE, "early expiration", None, "correct", 3),      # two thirds of a long phrase
    (PHRASE, "expiration", None, "wrong", 1),
    ([Element("10", ["10"])], "ten", None, "correct", 3),  # number words and digits
    ([Element("seven", ["seven"])], "7", None, "correct", 3),
    ([Element("7", ["7"])], "70", None, "wrong", 1),
    ([Element("cat", ["cat"])], "cats", None, "correct", 3),
    ([Element("cat", ["cat"])], "cut", None, "wrong", 1),  # no typo tolerance for short words
])
def test_grading_table(expected, answer, need, verdict, rating):
    result = grade(expected, answer, need)
    assert (result.verdict, result.suggested) == (verdict, rating)


def test_grading_names_the_memory_it_was_confused_with():
    confusers = {"lamport-clocks": ["Lamport Clocks"], "paxos": ["Paxos"]}
    result = grade([Element("Vector Clocks", ["Vector Clocks"])], "lamport clocks", None, confusers)
    assert (result.verdict, result.confused_with) == ("wrong", "lamport-clocks")


# ---- strategies -------------------------------------------------------------------------------


def _schedule(reviews, now):
    return replay(sorted(reviews, key=Review.sort_key), "person", now)


def test_weak_spots_orders_by_retrievability_then_fills_with_new(example):
    _, memories = example
    reviews = [Review("raft", T0, 3), Review("paxos", T0, 1), Review("quorum", T0 - timedelta(days=30), 3)]
    schedule = _schedule(reviews, T0 + timedelta(days=2))
    picks = select("weak-spots", memories, schedule, 5, random.Random(0), prior={"mvcc": 0.0})
    ids = [p.memory_id for p in picks]
    rs = [schedule.retrievability(i) for i in ids[:3]]
    assert set(ids[:3]) == {"raft", "paxos", "quorum"} and rs == sorted(rs)
    assert ids[3] == "mvcc"  # the weakest prior among never-reviewed memories


def test_due_first_then_new_and_domain_filter(example):
    _, memories = example
    schedule = _schedule([Review("raft", T0, 3), Review("b-tree", T0, 3)], T0 + timedelta(days=3))
    picks = select("due", memories, schedule, 3, random.Random(0), domain="consensus-coordination")
    assert picks[0].memory_id == "raft" and picks[0].reason.startswith("due")
    assert all(memories[p.memory_id].domain == "consensus-coordination" for p in picks)
    assert [p.reason for p in picks[1:]] == ["new", "new"]


def test_depth_first_follows_links_from_the_weakest_memory(example):
    _, memories = example
    schedule = _schedule([], T0)
    picks = select("depth-first", memories, schedule, 6, random.Random(0), domain="storage-engines")
    ids = [p.memory_id for p in picks]
    assert memories[ids[0]].domain == "storage-engines"
    for previous, pick in zip(picks, picks[1:]):
        if "linked from" in pick.reason:
            parent = pick.reason.rsplit("linked from ", 1)[1]
            assert pick.memory_id in memories[parent].all_links
    assert sum("linked from" in p.reason for p in picks) >= 3


def test_adversarial_pairs_confusable_memories_back_to_back(example):
    _, memories = example
    schedule = _schedule([], T0)
    picks = select("adversarial", memories, schedule, 6, random.Random(0))
    assert len(picks) == 6
    for first, second in zip(picks[::2], picks[1::2]):
        assert first.partner == second.memory_id and second.partner == first.memory_id
    near = keyword_neighbours(memories, ["vector-clocks", "lsm-tree"])
    assert near["vector-clocks"][0].memory_id == "lamport-clocks"
    assert near["lsm-tree"][0].memory_id == "sstable-compaction"


def test_adversarial_neighbours_come_from_bm25_when_the_search_index_is_built(readonly_example):
    from palace_cli.study.session import stored_neighbours

    palace = Palace(readonly_example)
    palace.refresh(embedder=None)  # lexical index only, no vectors
    memories = palace.scan().memories
    near = stored_neighbours(palace)(memories, ["vector-clocks", "snapshot-isolation"])
    # (write-through-cache found write-behind-cache here until issue 13's S3 notes, full of
    # read-after-write, pushed it to fourth; docs/study.md counts the pairs)
    assert near["vector-clocks"][0].memory_id == "lamport-clocks"
    assert near["snapshot-isolation"][0].memory_id == "mvcc"
    assert near["snapshot-isolation"][0].why.startswith("BM25")


def test_vector_neighbours_use_stored_vectors(tmp_path, example):
    from palace_cli.index.store import text_hash

    _, memories = example
    ids = ["raft", "paxos", "b-tree", "lsm-tree"]
    subset = {i: memories[i] for i in ids}
    vectors = np.array([[1, 0, 0], [0.9, 0.1, 0], [0, 1, 0], [0, 0.95, 0.05]], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store = VectorStore(tmp_path / "vectors")
    store._write("test-model", [text_hash(memories[i]) for i in ids], vectors)
    model, keys, matrix = store.load()
    near = vector_neighbours(subset, ["raft", "b-tree"], keys, matrix, text_hash, k=1)
    assert near["raft"][0].memory_id == "paxos" and near["b-tree"][0].memory_id == "lsm-tree"
    assert near["raft"][0].why.startswith("cosine")


# ---- the session core -------------------------------------------------------------------------


def clock_from(start: datetime):
    moments = [start]

    def clock():
        moments[0] += timedelta(seconds=20)
        return moments[0]

    return clock


def test_a_session_logs_each_review_at_once_and_never_touches_a_note(example_palace):
    palace = Palace(example_palace)
    session = StudySession(palace, strategy="random", n=3, seed=4, clock=clock_from(T0))
    seen = []
    for question in session:
        seen.append(question.memory_id)
        result = session.grade(question, question.answer)
        session.record(question, result.suggested, question.answer, result)
        assert len(ReviewLog(palace).read().reviews) == len(seen)  # written before the next question
    assert len(seen) == 3
    reviews = ReviewLog(palace).read().reviews
    assert [r.id for r in reviews] == seen and {r.rating for r in reviews} == {3}
    assert all(r.strategy == "random" and r.learner == "person" for r in reviews)
    status = subprocess.run(["git", "status", "--porcelain", "--", "memories"], cwd=example_palace,
                            capture_output=True, text=True, check=True).stdout
    assert status == ""


def test_a_failed_memory_is_asked_once_more_with_another_kind(example_palace):
    palace = Palace(example_palace)
    session = StudySession(palace, strategy="random", n=2, seed=1, clock=clock_from(T0))
    asked = []
    for question in session:
        asked.append((question.memory_id, question.kind))
        rating = 1 if len(asked) == 1 else 3
        session.record(question, rating, "")
    assert len(asked) == 3
    assert asked[2][0] == asked[0][0] and asked[2][1] != asked[0][1]


def test_interview_profile_asks_only_its_kinds(example_palace):
    session = StudySession(Palace(example_palace), strategy="random", n=8, profile="interview", seed=2)
    kinds = {q.kind for q in session if not session.record(q, 3, "x") is None}
    assert kinds <= {"anchor", "cloze", "link"}


def test_unknown_strategy_profile_or_domain_are_usage_errors(readonly_example):
    from palace_cli.errors import NotFound, UsageError

    palace = Palace(readonly_example)
    with pytest.raises(UsageError):
        StudySession(palace, strategy="hardest")
    with pytest.raises(UsageError):
        StudySession(palace, profile="marathon")
    with pytest.raises(NotFound):
        StudySession(palace, domain="astronomy")
    assert StudySession(palace, domain="kafka", n=2).domain == "messaging-events"  # an alias
