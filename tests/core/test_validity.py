"""Validity in time, pure: dates and moments, boundaries, the version graph (palace_cli/core/validity.py)."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from palace_cli.core.validity import Entry, Versions
from palace_cli.core.dates import NEVER, format_moment, parse_moment


def utc(*parts) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


@pytest.mark.parametrize("value, expected", [
    (date(2026, 3, 2), utc(2026, 3, 2)),                                  # YAML's date: the start of the UTC day
    (datetime(2026, 3, 2, 10, 0), utc(2026, 3, 2, 10)),                    # a naive time is UTC
    (datetime(2026, 3, 2, 10, 0, tzinfo=timezone(timedelta(hours=2))), utc(2026, 3, 2, 8)),
    ("2026-03-02", utc(2026, 3, 2)),
    ("2026-03-02T10:00Z", utc(2026, 3, 2, 10)),
    ("2026-03-02 10:00:00+0200", utc(2026, 3, 2, 8)),
    ("2026-03-02T01:30:00-05:00", utc(2026, 3, 2, 6, 30)),
    ("", None),
    (None, None),
])
def test_moments_are_utc(value, expected):
    assert parse_moment(value) == expected


@pytest.mark.parametrize("value", ["2026-02-30", "yesterday", "2026-3-2", "02/03/2026", "2026-03-02T25:00Z", 20260302,
                                   ["2026-03-02"]])
def test_what_is_not_a_date_says_so(value):
    with pytest.raises(ValueError, match="is not a date"):
        parse_moment(value)


@pytest.mark.parametrize("moment, text", [
    (utc(2026, 3, 2), "2026-03-02"), (utc(2026, 3, 2, 8, 15), "2026-03-02T08:15:00Z"), (None, ""), (NEVER, ""),
])
def test_format_moment(moment, text):
    assert format_moment(moment) == text
    assert text == "" or parse_moment(text) == moment


def graph(*entries: Entry) -> Versions:
    return Versions(entries)


SPAN = graph(Entry("a", valid_from="2026-03-02", valid_until="2026-09-01"))


@pytest.mark.parametrize("when, valid", [
    (utc(2026, 3, 1, 23, 59, 59), False),
    (utc(2026, 3, 2), True),                      # valid_from is inclusive
    (utc(2026, 8, 31, 23, 59, 59), True),
    (utc(2026, 9, 1), False),                     # valid_until is exclusive
])
def test_boundaries(when, valid):
    assert SPAN.valid_at("a", when) is valid


def test_a_zoned_start_is_an_instant():
    versions = graph(Entry("a", valid_from="2026-03-02T10:00:00Z"))
    assert not versions.valid_at("a", utc(2026, 3, 2, 9, 59))
    assert versions.valid_at("a", utc(2026, 3, 2, 10))
    assert not versions.valid_at("a", utc(2026, 3, 2))  # an as-of date is the start of that day


def test_a_successor_ends_its_predecessor_when_it_starts():
    versions = graph(Entry("old", created="2025-01-01", superseded_by=("new",)),
                     Entry("new", valid_from="2026-03-02", supersedes=("old",)))
    assert versions.end("old") == utc(2026, 3, 2)
    assert versions.valid_at("old", utc(2026, 3, 1)) and not versions.valid_at("old", utc(2026, 3, 2))
    assert versions.valid_at("new", utc(2026, 3, 2)) and not versions.valid_at("new", utc(2026, 3, 1))
    assert versions.hidden() == {"old"}
    assert versions.status("old") == "superseded" and versions.status("new") == "current"


def test_a_link_on_either_note_counts():
    only_new = graph(Entry("old"), Entry("new", valid_from="2026-03-02", supersedes=("old",)))
    only_old = graph(Entry("old", superseded_by=("new",)), Entry("new", valid_from="2026-03-02"))
    for versions in (only_new, only_old):
        assert versions.successors == {"old": ["new"]} and versions.predecessors == {"new": ["old"]}
        assert versions.hidden() == {"old"}
    assert only_new.one_sided() == [("old", "new", "old")] and only_old.one_sided() == [("old", "new", "new")]


def test_superseded_with_no_date_anywhere_is_never_valid():
    versions = graph(Entry("old", superseded_by=("new",)), Entry("new"))
    assert versions.end("old") == NEVER
    assert not versions.valid_at("old") and not versions.valid_at("old", utc(1990, 1, 1))


def test_created_stands_in_for_as_of_but_never_hides_now():
    tomorrow = (datetime.now(timezone.utc) + timedelta(days=1)).date().isoformat()
    versions = graph(Entry("fresh", created=tomorrow), Entry("older", created="2020-01-01"))
    assert versions.valid_at("fresh")                                   # now: a created date is not the future
    assert not versions.valid_at("fresh", utc(2025, 1, 1))              # as of a date before it was written
    assert versions.hidden() == set() and versions.hidden(utc(2025, 1, 1)) == {"fresh"}
    future = graph(Entry("planned", valid_from=tomorrow))
    assert future.hidden() == {"planned"} and future.status("planned") == "future"  # an explicit valid_from does


def test_an_expired_memory_without_a_successor():
    versions = graph(Entry("promo", valid_from="2020-01-01", valid_until="2020-02-01"))
    assert versions.status("promo") == "expired" and versions.hidden() == {"promo"}


def test_chain_order_cycles_and_forks():
    versions = graph(Entry("v1", valid_from="2024-01-01"),
                     Entry("v3", valid_from="2026-01-01", supersedes=("v2",)),
                     Entry("v2", valid_from="2025-01-01", supersedes=("v1",)),
                     Entry("x", supersedes=("y",)), Entry("y", supersedes=("x",)),
                     Entry("b1", valid_from="2025-01-01", supersedes=("base",)),
                     Entry("b2", valid_from="2025-02-01", supersedes=("base",)), Entry("base"))
    assert versions.chain("v2") == versions.chain("v1") == ["v1", "v2", "v3"]
    assert versions.cycles() == [["x", "y"]]
    assert versions.forks() == [("base", ["b1", "b2"])]
    assert set(versions.chain("x")) == {"x", "y"}


def test_a_duplicated_id_keeps_its_first_note():
    versions = graph(Entry("a", valid_until="2020-01-01"), Entry("a"))
    assert versions.hidden() == {"a"}
