"""A unit whose vector is still being made (embedded in the background) competes on its words, as it would in
lexical mode: never dropped from the fused ranking or gated out as "nothing relevant" for lacking a vector."""

from __future__ import annotations

import pytest

from palace_cli.palace import Palace
from palace_cli.search.ranking import fuse_minmax
from palace_cli.search.retrieve import recall, search

BACKUP = ("---\nsubject: Backup rota\n---\n# Backup rota\n\nThe nightly backup runs at 02:00 on the NAS called "
          "bluefin; the weekly copy goes offsite on Sunday.\n")
CAPYBARA = "# Capy\n\nThe capybara eats grass and lives near rivers in South America.\n"


def test_an_item_a_ranking_could_not_score_fuses_over_the_rankings_that_could():
    rankings = {"lexical": [("new", 9.0), ("old", 5.0), ("far", 1.0)], "dense": [("far", 0.6), ("old", 0.5)]}
    before = {i: s for i, s, _ in fuse_minmax(rankings)}
    after = {i: s for i, s, _ in fuse_minmax(rankings, unscored={"dense": frozenset({"new"})})}
    assert before["new"] == 0.5 and after["new"] == 1.0  # its lexical share alone, renormalised
    assert {i: after[i] for i in ("old", "far")} == {i: before[i] for i in ("old", "far")}  # the others as before
    assert fuse_minmax(rankings, unscored={"dense": frozenset()}) == fuse_minmax(rankings)


def _embedded_then(root, name: str, text: str) -> Palace:
    """The palace fully embedded, then a note written whose vector waits (vectors 'later': no worker)."""
    palace = Palace(root)
    palace.refresh(vectors="wait")
    (root / "memories" / "reliability-operations" / name).write_text(text)
    palace.refresh(vectors="later")
    catalog = palace.index.catalog()
    unit = next(i for i, p in zip(catalog.ids, catalog.paths) if p == f"memories/reliability-operations/{name}")
    assert not catalog.has_vector(catalog.row_of[unit]) and catalog.vector_count == len(catalog.ids) - 1
    return palace


@pytest.mark.slow
def test_a_note_written_after_a_full_embed_is_recalled_first_for_its_own_words(example_palace, with_models):
    palace = _embedded_then(example_palace, "backup-rota.md", BACKUP)
    for question in ("where does the nightly backup run?", "which NAS is bluefin?", "nightly backup"):
        result = recall(palace, question, do_refresh=False)
        assert result.relevant and result.hits[0].path == "memories/reliability-operations/backup-rota.md", \
            (question, [(h.id, h.words, h.meaning) for h in result.ranked[:3]])
        assert result.hits[0].meaning is None  # it ranked by its words: no vector yet


@pytest.mark.slow
def test_a_word_only_an_unembedded_note_holds_is_never_nothing_relevant(example_palace, with_models):
    palace = Palace(example_palace)
    (example_palace / "memories" / "reliability-operations" / "capy.md").write_text(CAPYBARA)
    palace.refresh(vectors="later")  # zero vectors: lexical
    assert palace.index.catalog().vector_count == 0
    assert recall(palace, "capybara", do_refresh=False).hits[0].path == "memories/reliability-operations/capy.md"
    (example_palace / "memories" / "reliability-operations" / "capy.md").unlink()
    palace = _embedded_then(example_palace, "capy.md", CAPYBARA)  # every other unit has its vector
    for question in ("capybara", "what does the capybara eat?"):
        result = recall(palace, question, do_refresh=False)
        assert result.relevant and not result.why, result.why
        assert result.hits[0].path == "memories/reliability-operations/capy.md"
        assert search(palace, question, do_refresh=False).hits[0].path == "memories/reliability-operations/capy.md"
