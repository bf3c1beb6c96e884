"""The review log and FSRS replay: append-only lines, torn lines, dedup, determinism, git union merges, renames."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from datetime import datetime, timedelta, timezone

import pytest
from fsrs import Card, Rating, Scheduler

from palace_cli.palace import Palace
from palace_cli.editing.reviewlog import Review, ReviewLog, parse_rating
from palace_cli.study.scheduler import card_id, replay
from palace_cli.study.stats import due_items, study_stats

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
GIT_ENV = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")


def git(root, *args) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True, env=GIT_ENV).stdout


def history(memory_id: str, ratings: list[int], start: datetime = T0, learner: str = "person") -> list[Review]:
    """Reviews spaced like a diligent learner: each one at the card's due time (plus an hour)."""
    scheduler = Scheduler(enable_fuzzing=False)
    card = Card(card_id=1)
    moment = start
    out = []
    for rating in ratings:
        out.append(Review(memory_id, moment, rating, "cloze", "due", learner, 4000, 1.0 if rating > 1 else 0.0))
        card, _ = scheduler.review_card(card, Rating(rating), moment)
        moment = card.due + timedelta(hours=1)
    return out


def card_fields(schedule, memory_id):
    card = schedule.states[memory_id].card
    return (card.state, card.step, round(card.stability, 9), round(card.difficulty, 9), card.due, card.last_review)


# ---- the log file -------------------------------------------------------------------------


def test_append_writes_one_json_line_per_review_and_reads_back(palace):
    log = ReviewLog(palace, "laptop.jsonl")
    reviews = history("paxos", [3, 3, 1, 3])
    for review in reviews:
        log.append(review)
    lines = log.path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4
    first = json.loads(lines[0])
    assert first == {"v": 1, "id": "paxos", "at": "2026-12-01T09:00:00.000Z", "rating": "good", "kind": "cloze",
                     "strategy": "due", "learner": "person", "duration_ms": 4000, "score": 1.0}
    read = log.read()
    assert read.reviews == reviews
    assert read.problems == []


def test_torn_last_line_is_reported_and_the_next_append_starts_a_fresh_line(palace):
    log = ReviewLog(palace, "laptop.jsonl")
    log.append(history("raft", [3])[0])
    with open(log.path, "ab") as handle:
        handle.write(b'{"v": 1, "id": "raft", "at": "2026-12-0')  # a crash mid-write
    read = log.read()
    assert len(read.reviews) == 1
    assert [(p.path, p.line, p.code) for p in read.problems] == [("reviews/laptop.jsonl", 2, "review-torn")]

    log.append(Review("quorum", T0 + timedelta(days=1), 2))
    read = log.read()
    assert [r.id for r in read.reviews] == ["raft", "quorum"]
    assert [(p.line, p.code) for p in read.problems] == [(2, "review-bad-line")]
    assert log.path.read_bytes().endswith(b"\n")


@pytest.mark.parametrize("line, reason", [
    ("not json at all", "not JSON"),
    ('{"id": "raft", "at": "2026-12-01T09:00:00Z", "rating": "meh"}', "bad rating"),
    ('{"at": "2026-12-01T09:00:00Z", "rating": "good"}', "missing memory `id`"),
    ('{"id": "raft", "rating": "good"}', "missing time"),
    ('{"id": "raft", "at": "9999-01-01T00:00:00Z", "rating": "good"}', "outside"),
    ('["raft"]', "JSON object"),
    ('{"id": "raft", "at": "2026-12-01T09:00:00Z", "rating": "good", "duration_ms": Infinity}', "bad duration_ms inf"),
    ('{"id": "raft", "at": "2026-12-01T09:00:00Z", "rating": "good", "duration_ms": NaN}', "bad duration_ms nan"),
    ('{"id": "raft", "at": "2026-12-01T09:00:00Z", "rating": "good", "duration_ms": 1e400}', "bad duration_ms inf"),
    ('{"id": "raft", "at": "2026-12-01T09:00:00Z", "rating": "good", "duration_ms": ' + "9" * 400 + "}",
     "bad duration_ms 999"),
    ('{"id": "raft", "at": "2026-12-01T09:00:00Z", "rating": "good", "duration_ms": "4000"}', "bad duration_ms"),
    ('{"id": "raft", "at": "2026-12-01T09:00:00Z", "rating": "good", "score": -Infinity}', "bad score"),
    ('{"id": "raft", "at": "2026-12-01T09:00:00Z", "rating": "good", "score": 7}', "bad score"),
    ('{"id": "raft", "at": "2026-12-01T09:00:00Z", "rating": "good", "learner": {"a": 1}}', "bad learner"),
    ('{"id": "raft", "at": "0001-01-01T00:00:00+14:00", "rating": "good"}', "outside"),
    ('{"id": "raft", "at": "2026-12-01T09:00:00Z", "rating": ' + "9" * 400 + "}", "bad rating"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("\ufeff" + json.dumps({"id": "raft", "at": "2026-12-01T11:00:00Z", "rating": "good"}), "not JSON"),
])
def test_bad_lines_are_reported_with_file_and_line_and_skipped(palace, line, reason):
    path = palace.root / "reviews" / "desk.jsonl"
    good = json.dumps(Review("raft", T0, 3).as_dict())
    path.write_text(f"{good}\n{line}\n{good.replace('09:00', '10:00')}\n", encoding="utf-8")
    read = ReviewLog(palace).read()
    assert len(read.reviews) == 2
    assert len(read.problems) == 1
    problem = read.problems[0]
    assert (problem.path, problem.line, problem.severity) == ("reviews/desk.jsonl", 2, "warning")
    assert reason in problem.message


@pytest.mark.parametrize("value, expected", [("good", 3), ("AGAIN", 1), (4, 4), ("2", 2)])
def test_ratings_read_as_names_or_numbers(value, expected):
    assert parse_rating(value) == expected


def test_the_same_line_in_two_files_counts_once(palace):
    reviews = history("b-tree", [3, 3])
    for name in ("a.jsonl", "b.jsonl"):
        log = ReviewLog(palace, name)
        for review in reviews:
            log.append(review)
    read = ReviewLog(palace).read()
    assert read.reviews == reviews
    assert read.duplicates == 2


# ---- FSRS replay --------------------------------------------------------------------------


def test_replay_is_deterministic_whatever_the_file_order_and_with_fuzz(readonly_palace):
    """Long histories reach intervals over 2.5 days, where fsrs fuzzes; replay must still agree with itself."""
    reviews = history("lsm-tree", [3, 3, 3, 4, 3, 1, 3, 3, 3]) + history("mvcc", [3, 2, 3, 3, 3, 3], T0 + timedelta(hours=3))
    rng = random.Random(5)
    schedules = []
    for trial in range(3):
        shuffled = reviews[:]
        rng.shuffle(shuffled)
        for name in (f"t{trial}-a.jsonl", f"t{trial}-b.jsonl"):
            (readonly_palace.root / "reviews" / name).unlink(missing_ok=True)
        for i, review in enumerate(shuffled):
            ReviewLog(readonly_palace, f"t{trial}-{'ab'[i % 2]}.jsonl").append(review)
        read = ReviewLog(readonly_palace).read()
        schedules.append(replay(read.reviews, "person", T0 + timedelta(days=400)))
        for name in (f"t{trial}-a.jsonl", f"t{trial}-b.jsonl"):
            (readonly_palace.root / "reviews" / name).unlink()
    for memory_id in ("lsm-tree", "mvcc"):
        assert card_fields(schedules[0], memory_id) == card_fields(schedules[1], memory_id) == card_fields(schedules[2], memory_id)
    unfuzzed = Scheduler(enable_fuzzing=False)
    card = Card(card_id=card_id("lsm-tree"))
    for review in [r for r in reviews if r.id == "lsm-tree"]:
        card, _ = unfuzzed.review_card(card, Rating(review.rating), review.at)
    fuzzed = schedules[0].states["lsm-tree"].card
    assert fuzzed.stability == pytest.approx(card.stability)  # fuzz moves the date, never the memory model
    assert fuzzed.due != card.due  # fuzz is on (seeded per review), not switched off for determinism
    assert abs((fuzzed.due - card.due).days) <= 0.1 * (card.due - card.last_review).days + 2
    assert schedules[0].states["lsm-tree"].lapses == 1


def test_person_and_llm_schedules_are_kept_apart(palace):
    log = ReviewLog(palace)
    for review in history("raft", [3, 3]) + history("raft", [1, 1, 1], learner="llm:tiny@1234"):
        log.append(review)
    read = log.read()
    person = replay(read.reviews, "person", T0 + timedelta(days=1))
    model = replay(read.reviews, "llm:tiny@1234", T0 + timedelta(days=1))
    assert person.states["raft"].ratings == [3, 3]
    assert model.states["raft"].ratings == [1, 1, 1]
    assert read.learners() == ["llm:tiny@1234", "person"]


def test_git_union_merge_of_two_diverging_logs_replays_like_their_union(example_palace):
    root = example_palace
    assert "reviews/*.jsonl merge=union" in (root / ".gitattributes").read_text()
    palace = Palace(root)
    shared = history("paxos", [3, 3])
    log = ReviewLog(palace, "me.jsonl")
    for review in shared:
        log.append(review)
    git(root, "add", "reviews/me.jsonl")
    git(root, "commit", "-qm", "shared history")
    base = git(root, "rev-parse", "--abbrev-ref", "HEAD").strip()

    git(root, "checkout", "-qb", "laptop")
    laptop = history("raft", [3, 1, 3], T0 + timedelta(days=2)) + [Review("paxos", T0 + timedelta(days=20), 2)]
    for review in laptop:
        log.append(review)
    git(root, "commit", "-qam", "laptop reviews")

    git(root, "checkout", "-q", base)
    desktop = history("quorum", [4, 3], T0 + timedelta(days=3)) + [Review("paxos", T0 + timedelta(days=21), 3)]
    for review in desktop:
        log.append(review)
    git(root, "commit", "-qam", "desktop reviews")

    git(root, "merge", "-q", "--no-edit", "laptop")  # raises on a conflict
    merged = ReviewLog(Palace(root), "me.jsonl").read()
    assert merged.problems == []
    assert sorted(merged.reviews, key=Review.sort_key) == sorted(shared + laptop + desktop, key=Review.sort_key)
    now = T0 + timedelta(days=60)
    got = replay(merged.reviews, "person", now)
    want = replay(sorted(shared + laptop + desktop, key=Review.sort_key), "person", now)
    for memory_id in ("paxos", "raft", "quorum"):
        assert card_fields(got, memory_id) == card_fields(want, memory_id)
    assert got.states["paxos"].ratings == [3, 3, 2, 3]


def test_editing_and_renaming_a_note_keeps_its_schedule(example_palace):
    root = example_palace
    palace = Palace(root)
    log = ReviewLog(palace)
    for review in history("bloom-filter", [3, 3, 1, 3]):
        log.append(review)
    now = T0 + timedelta(days=90)
    before = replay(log.read().reviews, "person", now)

    path = root / "memories" / "storage-engines" / "bloom-filter.md"
    path.write_text(path.read_text(encoding="utf-8").replace("## Content\n", "## Content\nEdited today. "),
                    encoding="utf-8")
    git(root, "mv", "memories/storage-engines/bloom-filter.md", "memories/caching-performance/bit-hotel.md")
    moved = Palace(root)
    memory = moved.memory("bloom-filter")
    assert memory.path == "memories/caching-performance/bit-hotel.md"
    assert "Edited today." in memory.content

    after = replay(ReviewLog(moved).read().reviews, "person", now)
    assert card_fields(after, "bloom-filter") == card_fields(before, "bloom-filter")
    items, new, _, _ = due_items(moved, now=now)
    assert [i.id for i in items] == ["bloom-filter"]
    assert items[0].path == "memories/caching-performance/bit-hotel.md"
    assert new == 75  # 76 memories valid now (13 superseded versions are not studied), 1 reviewed


def test_reviews_under_the_id_the_old_slug_rule_gave_still_count(example_palace):
    """A note without `id:` under memories/ takes its file name's slug: `Café crème.md` was `caf-cr-me` (accents
    dropped) and is `cafe-creme` now (one slug rule, accents transliterated). Its reviews, logged under the old
    id, follow it; so does a link by the old id."""
    note = example_palace / "memories" / "storage-engines" / "Café crème.md"
    note.write_text("# Café crème\n\nEspresso with hot milk; a note without an id.\n", encoding="utf-8")
    palace = Palace(example_palace)
    log = ReviewLog(palace)
    for review in history("caf-cr-me", [3, 3, 1, 3]):
        log.append(review)
    memory = palace.memory("cafe-creme")
    assert memory.path == "memories/storage-engines/Café crème.md" and memory.previous_ids == ["caf-cr-me"]
    schedule = replay(log.read().reviews, "person", T0 + timedelta(days=90))
    assert "caf-cr-me" not in schedule.states and schedule.states["cafe-creme"].ratings == [3, 3, 1, 3]
    assert palace.memory("caf-cr-me").id == "cafe-creme"
    assert [i.id for i in due_items(palace, now=T0 + timedelta(days=90))[0]] == ["cafe-creme"]


def test_stats_count_retention_lapses_due_and_charts(palace):
    log = ReviewLog(palace)
    for review in history("raft", [3, 3, 1, 3]) + history("paxos", [3, 3, 3]):
        log.append(review)
    now = max(r.at for r in log.read().reviews) + timedelta(days=1)
    data = study_stats(palace, now=now)
    assert (data.memories, data.reviewed, data.new, data.reviews, data.retired) == (76, 2, 74, 7, 13)
    assert data.lapses == 1
    # graded reviews are those of cards already learnt: raft's 3rd (Again) and paxos's 3rd (Good)
    assert data.retention == pytest.approx(1 / 2)
    assert len(data.per_day) == 14 and len(data.forecast) == 14
    assert sum(c for _, c in data.forecast) == 2
    assert {w.id for w in data.weakest} == {"raft", "paxos"}
    assert json.loads(json.dumps(data.as_dict()))["lapses"] == 1


def test_reviews_directory_may_be_missing(tmp_path, palace):
    shutil.rmtree(palace.root / "reviews")
    assert ReviewLog(palace).read().reviews == []
    ReviewLog(palace).append(Review("raft", T0, 3))
    assert len(ReviewLog(palace).read().reviews) == 1


def test_study_commands_skip_a_bad_review_line_with_one_warning_each(example_palace):
    from click.testing import CliRunner

    from palace_cli.cli import cli

    (example_palace / "reviews").mkdir(exist_ok=True)
    good = json.dumps(Review("raft", T0, 3).as_dict())
    (example_palace / "reviews" / "desk.jsonl").write_text(
        f'{good}\n{good[:-1]}, "duration_ms": Infinity}}\n', encoding="utf-8")
    for args in (["stats"], ["due"], ["quiz", "-n", "1", "--no-llm"]):
        result = CliRunner().invoke(cli, ["--palace", str(example_palace), *args], input="q\n")
        assert result.exit_code == 0 and result.exception is None, (args, result.output)
        warnings = [line for line in result.stderr.splitlines() if "reviews/desk.jsonl:2" in line]
        assert warnings == ["warning: reviews/desk.jsonl:2: unreadable review line, ignored: bad duration_ms inf "
                            "(a number of milliseconds, 0 to 2147483647)"], args
    stats = json.loads(CliRunner().invoke(cli, ["--palace", str(example_palace), "stats", "--json"]).stdout)
    assert stats["reviews"] == 1 and stats["log_problems"][0]["line"] == 2
