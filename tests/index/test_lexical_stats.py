"""BM25 after incremental updates scores exactly as a fresh build of the same notes (whoosh counts deleted
documents in its statistics until a merge; livestats.py takes them back out)."""

from __future__ import annotations

import random
import shutil

import pytest

from conftest import EXAMPLE, copy_palace
from palace_cli.index import text as text_module
from palace_cli.index.text import FIELDS
from palace_cli.palace import Palace

QUERIES = ["zebrafish coordinator", "commit log", "consistency replication", "cache eviction policy",
           "leader election timeout", "lanterns zebrafish", "write ahead log crash", "partition rebalancing"]


def edit_rounds(root, rounds: int, seed: int) -> None:
    """Random edits: notes given new words, a note deleted and one added, per round."""
    rng = random.Random(seed)
    for round_ in range(rounds):
        notes = sorted(root.glob("memories/*/*.md"))
        for note in rng.sample(notes, 4):
            words = " ".join(rng.choice(["zebrafish", "coordinator", "lanterns", "commit", "log", "cache"])
                             for _ in range(rng.randint(1, 12)))
            note.write_text(note.read_text().replace("\n## Links", f"\n{words}\n\n## Links", 1))
        rng.choice(notes).unlink()
        source = rng.choice(sorted(root.glob("memories/*/*.md")))
        copy = source.with_name(f"copy-{round_}.md")
        copy.write_text(source.read_text().replace(f"id: {source.stem}", f"id: copy-{round_}", 1)
                        .replace("verify: ", f"verify: zebra {round_} ", 1))


def searches(palace: Palace) -> dict[str, list[tuple[str, float]]]:
    return {query: palace.index.text.search(query, limit=25) for query in QUERIES}


@pytest.mark.slow
def test_scores_after_incremental_updates_equal_a_fresh_build(tmp_path):
    root = copy_palace(EXAMPLE, tmp_path / "p", git=False)
    palace = Palace(root)
    palace.refresh(embedder=None)
    deletions = 0
    for seed in range(3):
        edit_rounds(root, 1, seed)
        report = palace.refresh(embedder=None)
        assert not report.rebuilt_lexical and report.updated and report.removed
        with palace.index.text.open().searcher() as searcher:
            deletions = max(deletions, searcher.doc_count_all() - searcher.doc_count())
    assert deletions > 0  # whoosh still holds deleted documents: the case this test is about
    fresh = Palace(copy_palace(root, tmp_path / "fresh", git=False))
    fresh.refresh(embedder=None)
    mine, theirs = searches(palace), searches(fresh)
    assert all(theirs.values())
    for query in QUERIES:
        assert [hit for hit, _ in mine[query]] == [hit for hit, _ in theirs[query]], query
        assert [score for _, score in mine[query]] == pytest.approx([s for _, s in theirs[query]], rel=1e-12)
    terms = palace.index.text.terms(" ".join(QUERIES))
    assert palace.index.text.document_frequencies(terms) == fresh.index.text.document_frequencies(terms)


def test_stored_lengths_are_the_lengths_whoosh_counts(readonly_palace):
    """The exact lengths each document stores add up to whoosh's own field totals on a fresh build."""
    readonly_palace.refresh(embedder=None)
    with readonly_palace.index.text.open().searcher() as searcher:
        reader = searcher.reader()
        totals = [0] * len(FIELDS)
        for stored in reader.all_stored_fields():
            for i, length in enumerate(stored["lengths"]):
                totals[i] += length
        assert totals == [reader.field_length(name) for name in FIELDS]
        assert totals[FIELDS.index("text")] > 1000


@pytest.mark.slow
def test_an_update_past_the_deleted_bound_merges_them_away(tmp_path, monkeypatch):
    monkeypatch.setattr(text_module, "MAX_DELETED", 3)
    root = copy_palace(EXAMPLE, tmp_path / "p", git=False)
    palace = Palace(root)
    palace.refresh(embedder=None)
    seen = []
    for seed in range(3):
        edit_rounds(root, 1, seed)
        palace.refresh(embedder=None)
        with palace.index.text.open().searcher() as searcher:
            seen.append(searcher.doc_count_all() - searcher.doc_count())
    assert seen[0] > 3 >= min(seen[1:])  # the second update found more than 3 deleted and merged them away
