"""Turns as retrieval units: indexed by the same refresh, searched and recalled beside memories, filtered in time."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from conversation_fixtures import locomo_samples
from palace_cli.editing.authoring import init_palace
from palace_cli.cli import cli
from palace_cli.conversations import session_files
from palace_cli.errors import UsageError
from palace_cli.importers import import_path
from palace_cli.palace import Palace
from palace_cli.search.retrieve import recall, search
from palace_cli.answers.verify import parse_context, verify_response


def sessions_palace(root, samples=None) -> Palace:
    """A palace holding the LoCoMo-shaped fixture's sessions (conv-1: May, June 2023; conv-2: January 2024)."""
    palace = Palace(init_palace(root, name="Talk"))
    (root.parent / "locomo.json").write_text(json.dumps(samples or locomo_samples()))
    import_path(palace, root.parent / "locomo.json")
    palace.refresh()
    return palace


@pytest.fixture
def talk(tmp_path) -> Palace:
    return sessions_palace(tmp_path / "talk")


@pytest.fixture
def mixed(small_palace, tmp_path) -> Palace:
    """The small palace (three memories in two domains, created today) plus the fixture's conversations."""
    (tmp_path / "locomo.json").write_text(json.dumps(locomo_samples()))
    palace = Palace(small_palace)
    import_path(palace, tmp_path / "locomo.json")
    palace.refresh()
    return palace


def lines_of(palace: Palace, relpath: str) -> list[str]:
    return (palace.root / relpath).read_text(encoding="utf-8").split("\n")


def test_a_turn_hit_says_what_and_when_and_points_at_its_header(talk):
    result = search(talk, "adopted dog", mode="lexical", k=5)
    top = result.hits[0]
    assert (top.kind, top.id, top.time) == ("turn", "locomo-conv-1-s01/D1:1", "2023-05-08T13:56")
    data = top.as_dict()
    assert (data["session"], data["turn"], data["speaker"], data["text"]) == \
           ("locomo-conv-1-s01", "D1:1", "Ana", "Hi Ben! I adopted a dog.")
    for hit in result.hits:
        header = lines_of(talk, hit.path)[hit.line - 1]
        assert header.startswith("### ") and header.endswith(f" · {hit.turn.turn}"), (hit.id, header)


def test_kind_since_and_until_filter_every_mode(mixed):
    every = search(mixed, "dog", mode="lexical", k=20)
    assert {h.kind for h in every.hits} == {"turn"}
    both = search(mixed, "coordinator dog", mode="lexical", k=20)
    assert {h.kind for h in both.hits} == {"memory", "turn"}
    assert {h.kind for h in search(mixed, "coordinator dog", mode="lexical", k=20, kind="memory").hits} == {"memory"}
    assert {h.kind for h in search(mixed, "coordinator dog", mode="lexical", k=20, kind="turn").hits} == {"turn"}
    june = search(mixed, "dog shoes adopted", mode="lexical", k=20, since="2023-06", until="2023-06-30")
    assert {h.id for h in june.hits} == {"locomo-conv-1-s02/D2:1", "locomo-conv-1-s02/D2:3"}
    assert {h.time[:7] for h in june.hits} == {"2023-06"}
    # until is inclusive of the whole day it names; since of the first
    may = search(mixed, "dog shoes adopted", mode="lexical", k=20, since="2023-05-08", until="2023-05-08")
    assert {h.turn.session for h in may.hits} == {"locomo-conv-1-s01"}
    # memories are dated by `created`: today, after everything said in 2023
    memories = search(mixed, "coordinator dog", mode="lexical", k=20, since="2024-02")
    assert memories.hits and {h.kind for h in memories.hits} == {"memory"}
    assert search(mixed, "coordinator dog", mode="lexical", k=20, until="2023-12-31").hits[0].kind == "turn"
    with pytest.raises(UsageError, match="--since"):
        search(mixed, "dog", since="last week")
    with pytest.raises(UsageError, match="nothing can match"):
        search(mixed, "dog", since="2024", until="2023")
    with pytest.raises(UsageError, match="turns are in no domain"):
        search(mixed, "dog", kind="turn", domain="storage")


def test_dense_and_fused_filter_like_lexical(with_models, mixed):
    for mode in ("dense", "fused"):
        hits = search(mixed, "a pet that chews shoes", mode=mode, k=20, kind="turn", since="2023-06",
                      until="2023-06-30").hits
        assert hits and {h.time[:7] for h in hits} == {"2023-06"} and {h.kind for h in hits} == {"turn"}, mode
        assert {h.kind for h in search(mixed, "atomic commit", mode=mode, k=30, kind="memory").hits} == {"memory"}
    assert search(mixed, "a pet that chews shoes", mode="dense", k=3).hits[0].turn.session == "locomo-conv-1-s02"


def test_recall_hands_turns_under_their_session_date_and_verify_stays_honest(mixed):
    result = recall(mixed, "Did Ana adopt a dog?", mode="lexical")
    assert result.hits[0].id == "locomo-conv-1-s01/D1:1"
    assert "## Conversation conv-1, session 1 (locomo-conv-1-s01), 2023-05-08 13:56, " \
           "conversations/locomo/conv-1-s01.md" in result.context
    assert "[turn locomo-conv-1-s01/D1:1] (line " in result.context and ") Ana: Hi Ben! I adopted a dog." in result.context
    data = result.as_dict()
    assert "locomo-conv-1-s01/D1:1" in data["turns"]
    turn_only = recall(mixed, "Did Ana adopt a dog?", mode="lexical", kind="turn").as_dict()
    assert turn_only["memories"] == [] and "cite it as it is marked, like [turn ID]" in recall(
        mixed, "Did Ana adopt a dog?", mode="lexical", kind="turn").context
    # A context of turns: an answer that cites none is uncited, never "grounded"; one that quotes and cites a
    # turn is checked against it (without the palace, the turn's words are not known: the quote is not checked).
    handed = parse_context(json.dumps(turn_only))
    verdict = verify_response("Yes, in May 2023.", handed, {}, "any")
    assert (verdict.grounded, verdict.status) == (False, "uncited")
    cited = verify_response('Yes: "I adopted a dog." [turn locomo-conv-1-s01/D1:1]', handed, {}, "any")
    assert cited.grounded and cited.cited_ids == ["locomo-conv-1-s01/D1:1"] and cited.quotes == []


def test_recall_hands_memories_and_turns_within_the_profile(mixed):
    # A turn that holds one word of the question while a memory holds three is not relevant beside it.
    result = recall(mixed, "coordinator commit dog adopted", mode="lexical", turns=2)
    assert [h.kind for h in result.hits] == ["memory"] and "## Conversation" not in result.context
    reasons = {o.id: o.reason for o in result.omitted}
    assert "locomo-conv-1-s01/D1:1" in reasons and "x the best hit's" in reasons["locomo-conv-1-s01/D1:1"]
    # Turns alone: --turns caps them as -k caps memories, and the JSON says what the cap left out.
    capped = recall(mixed, "dog shoes adopted", mode="lexical", turns=1)
    assert [h.kind for h in capped.hits] == ["turn"] and capped.caps == {"memory": 3, "turn": 1}
    assert any("over the cap of 1 turns" in o.reason for o in capped.omitted)
    none = recall(mixed, "dog shoes adopted", mode="lexical", turns=0).as_dict()
    assert none["turns"] == [] and any("over the cap of 0 turns" in o["reason"] for o in none["omitted"])


def test_refresh_is_incremental_for_session_files(talk):
    assert talk.refresh().changed is False
    path = talk.root / "conversations/locomo/conv-1-s02.md"
    path.write_text(path.read_text().replace("two pairs this week", "three loafers this week"))
    report = talk.refresh()
    assert (report.added, report.updated, report.removed) == ([], ["conversations/locomo/conv-1-s02.md"], [])
    assert search(talk, "loafers", mode="lexical").hits[0].id == "locomo-conv-1-s02/D2:3"
    assert search(talk, "pairs", mode="lexical").hits == []
    path.touch()  # same bytes: nothing is read again into the index
    assert talk.refresh().changed is False
    (talk.root / "conversations/locomo/conv-2-s01.md").unlink()
    path.write_text(path.read_text() + "\n### Ben · D2:4\nAnd a slipper.\n")
    assert talk.unindexed() == ["conversations/locomo/conv-1-s02.md: changed since indexed",
                               "conversations/locomo/conv-2-s01.md: deleted but still indexed"]
    assert talk.stale() == ["index/conversations.md: generated index file out of date"]
    assert talk.refresh().removed == ["conversations/locomo/conv-2-s01.md"]
    assert talk.stale() == [] and talk.unindexed() == []
    assert search(talk, "happy new year", mode="lexical").hits == []


def test_session_files_that_cannot_be_read_are_counted_and_the_rest_indexed(talk):
    broken = talk.root / "conversations/locomo/conv-1-s01.md"
    broken.write_bytes(broken.read_bytes().replace(b"### Ben \xc2\xb7 2023", b"### Ben \xc2\xb7 2023")
                       .replace(b"Wow, show me!", b"Wow, \xff show me!"))
    report = talk.refresh()
    assert [(p.path, p.code) for p in report.problems] == [("conversations/locomo/conv-1-s01.md", "session-unreadable")]
    assert "not UTF-8" in report.problems[0].message
    assert search(talk, "adopted", mode="lexical").hits[0].id == "locomo-conv-1-s01/D1:1"


def test_a_repeated_session_id_is_indexed_once_and_ownership_moves(talk):
    original = talk.root / "conversations/locomo/conv-2-s01.md"
    copy = talk.root / "conversations/locomo/conv-9-copy.md"
    shutil.copy(original, copy)
    report = talk.refresh()
    assert [(p.path, p.code) for p in report.problems] == [(copy.relative_to(talk.root).as_posix(),
                                                           "duplicate-session-id")]
    hits = search(talk, "happy new year", mode="lexical", k=10).hits
    assert hits[0].id == "locomo-conv-2-s01/D1:1" and len(hits) == 2  # the turn, and the one after it (its window)
    assert {h.path for h in hits} == {"conversations/locomo/conv-2-s01.md"}
    original.unlink()
    assert talk.refresh().problems == []
    hits = search(talk, "happy new year", mode="lexical", k=10).hits
    assert hits[0].id == "locomo-conv-2-s01/D1:1" and len(hits) == 2
    assert {h.path for h in hits} == {"conversations/locomo/conv-9-copy.md"}


def test_the_unit_setting_changes_what_a_turn_is_ranked_by(talk):
    # "shoes" is said only in D2:1; with the default window2, the turn after it is ranked by its text too.
    window = {h.id for h in search(talk, "chewing shoes", mode="lexical", k=10).hits}
    assert window == {"locomo-conv-1-s02/D2:1", "locomo-conv-1-s02/D2:3"}
    config = talk.root / "palace.toml"
    config.write_text(config.read_text() + '\n[retrieval]\nturn_unit = "turn"\n')
    alone = Palace(talk.root)
    assert {h.id for h in search(alone, "chewing shoes", mode="lexical", k=10).hits} == {"locomo-conv-1-s02/D2:1"}
    config.write_text(config.read_text().replace('"turn"', '"sentence"'))
    with pytest.raises(Exception, match="turn_unit"):
        Palace(talk.root).refresh()


def test_cli_search_and_recall_take_the_filters(mixed, monkeypatch):
    monkeypatch.chdir(mixed.root)
    runner = CliRunner()
    out = runner.invoke(cli, ["search", "dog", "--mode", "lexical", "--kind", "turn", "--since", "2023-06", "--json"])
    assert out.exit_code == 0, out.output
    hits = json.loads(out.stdout)["hits"]
    assert hits and all(h["kind"] == "turn" and h["time"] >= "2023-06" for h in hits)
    out = runner.invoke(cli, ["recall", "Did Ana adopt a dog?", "--until", "2023-05-31", "--format", "json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["turns"] == ["locomo-conv-1-s01/D1:1", "locomo-conv-1-s01/D1:2",
                                               "locomo-conv-1-s01/D1:3"]
    out = runner.invoke(cli, ["search", "dog", "--since", "soon"])
    assert out.exit_code == 2 and "--since 'soon'" in out.output
    out = runner.invoke(cli, ["search", "dog", "--mode", "lexical"])
    assert "conversations/locomo/conv-1-s01.md:" in out.output and "2023-05-08 13:56" in out.output


def test_session_files_helper_matches_what_refresh_indexes(talk):
    indexed = {path for path, _, _, _ in talk.index.store.sessions()}
    assert indexed == {relpath for relpath, _, _ in session_files(talk.root)}


# ---- index/conversations.md ---------------------------------------------------------------------


def test_the_session_list_is_generated_deterministically_and_kept_current(talk, tmp_path, parse_notes):
    from palace_cli.index.files import check_index_files

    listing = talk.root / "index/conversations.md"
    text = listing.read_text()
    assert "3 sessions, 7 turns, from 1 source(s)." in text
    assert ("- 2023-05-08 13:56 · Ana, Ben · [conv-1, session 1](../conversations/locomo/conv-1-s01.md) "
            "`conversations/locomo/conv-1-s01.md` · 3 turns") in text
    lines = text.split("\n")
    assert lines.index(next(l for l in lines if "conv-1-s02" in l)) < lines.index(next(l for l in lines if "conv-2-s01" in l))
    assert check_index_files(talk.site, parse_notes(talk)) == [] and talk.stale() == []
    # the same files give the same bytes from nothing
    again = sessions_palace(tmp_path / "again")
    assert (again.root / "index/conversations.md").read_text() == text
    # a one-session change is a one-line diff
    path = talk.root / "conversations/locomo/conv-1-s02.md"
    path.write_text(path.read_text() + "\n### Ana · D2:9\nThe beagle chewed a sandal, then another sandal.\n")
    talk.refresh()
    changed = [(a, b) for a, b in zip(text.split("\n"), listing.read_text().split("\n")) if a != b]
    assert len(changed) == 2, changed  # the totals line and the session's own line
    assert "· 3 turns · sandal" in changed[1][1]
    # a hand edit is put right by the next refresh; with no session left the file goes
    listing.write_text("scribbles\n")
    assert "index/conversations.md" in talk.refresh().index_files
    assert listing.read_text().startswith("# Conversations")
    shutil.rmtree(talk.root / "conversations")
    assert "index/conversations.md" in talk.refresh().index_files and not listing.exists()
    assert check_index_files(talk.site, parse_notes(talk)) == []


def test_key_terms_come_from_the_session_alone():
    from palace_cli.conversations import Session, Turn
    from palace_cli.index.turns import key_terms

    session = Session("s", "chat", "s", participants=["Ana", "Ben"], turns=[
        Turn("1", "Ana", "Really great! My pottery class made a bowl. Pottery is calming, Ben."),
        Turn("2", "Ben", "Thanks Ana, pottery and kilns sound great; my kiln broke."),
        Turn("3", "Ana", "A kiln? Ben's Kiln! Wow.")])
    assert key_terms(session) == ["kiln", "pottery"]


def test_a_turn_is_ranked_by_its_date_in_words_too(talk):
    from palace_cli.index.turns import date_words, unit_text

    assert date_words("2023-06-19T10:04") == "19 June 2023" and date_words("") == "" and date_words("soon") == ""
    assert unit_text("Ana", "Hi", "Ben: Hello", "2024-03-01") == "1 March 2024\nAna: Hi\nBen: Hello"
    hits = search(talk, "what was said in June 2023", mode="lexical", k=10).hits
    assert [h.turn.session for h in hits] == ["locomo-conv-1-s02"] * 2 + ["locomo-conv-1-s01"] * 3  # 2024 not at all
