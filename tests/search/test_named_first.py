"""A note's own name asked for whole ranks that note first (search/ranking.named_first, issue 35 item 3)."""

from __future__ import annotations

from click.testing import CliRunner

from palace_cli.cli import cli
from palace_cli.palace import Palace
from palace_cli.search.retrieve import recall, search


def _vault(root):
    root.mkdir()
    (root / "Cistern.md").write_text("---\naliases: [rain tank]\n---\n# Cistern\n\nIt holds the water from the roof "
                                     "for the dry months, under the yard.\n")
    (root / "Pumps.md").write_text("# Pumps\n\nThe cistern pump lifts cistern water; a cistern float stops the pump "
                                   "when the cistern runs low. A rain tank pump does the same for the rain tank.\n")
    for topic in ("roof", "yard", "hedge", "orchard", "bees", "compost", "gate", "well"):
        (root / f"{topic}.md").write_text(f"# {topic}\n\nNotes on the {topic} and its upkeep.\n")
    for name in ("ADR one", "ADR two"):  # two notes whose title is the same heading
        (root / f"{name}.md").write_text("# Context\n\nThe cistern was too small.\n")
    assert CliRunner().invoke(cli, ["init", str(root)]).exit_code == 0
    palace = Palace(root)
    palace.refresh()
    return palace


def test_a_notes_title_alias_or_file_name_ranks_it_first(tmp_path):
    palace = _vault(tmp_path / "vault")
    assert search(palace, "cistern water", mode="lexical", do_refresh=False).hits[0].id == "pumps"  # words alone
    for name in ("cistern", "Cistern", "rain tank"):
        assert recall(palace, name, do_refresh=False).ranked[0].id == "cistern", name
        found = search(palace, name, mode="lexical", do_refresh=False)
        assert found.hits and found.hits[0].id == "cistern", (name, found.why, [(h.id, h.words) for h in found.ranked])
    # without the rule the note whose words say it most would be first
    from palace_cli.search.ranking import rank
    catalog = palace.index.catalog()
    assert rank(palace, catalog, "rain tank", "lexical", 5)[0][0].id == "pumps"


def test_an_ambiguous_name_or_a_question_leaves_the_ranking_alone(tmp_path):
    from palace_cli.search.ranking import named_first

    palace = _vault(tmp_path / "vault")
    hits = search(palace, "context cistern", mode="lexical", do_refresh=False).hits
    names, catalog = palace.index.names(), palace.index.catalog()
    assert named_first(hits, names, "Context", catalog) == hits             # two notes have that title: no guess
    assert named_first(hits, names, "what is a cistern?", catalog) == hits  # a question names no note
    assert named_first(hits, names, "cistern", catalog, hidden=frozenset({"cistern"})) == hits  # not valid now
    moved = named_first(hits, names, "cistern", catalog)
    assert moved[0].id == "cistern" and sorted(h.id for h in moved) == sorted(h.id for h in hits)
    unranked = [h for h in hits if h.id != "cistern"]
    assert [h.id for h in named_first(unranked, names, "cistern", catalog)] == ["cistern"] + [h.id for h in unranked]
