"""A long note's sections in the fused ranking: each section's cosine read in its note's context, and the note's
many draws discounted (search/ranking.in_context, penalise_draws; issue 35)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from palace_cli.index.catalog import Catalog
from palace_cli.search.ranking import SECTION_CONTEXT, SECTION_DRAWS, in_context, penalise_draws


def _catalog(ids, note_of, embedded=None) -> Catalog:
    sections_of: dict[str, list[str]] = {}
    for key, note in note_of.items():
        sections_of.setdefault(note, []).append(key)
    kinds = ["section" if i in note_of else "memory" for i in ids]
    return Catalog(ids, [f"{i}.md" for i in ids], [""] * len(ids), [""] * len(ids), {i: r for r, i in enumerate(ids)},
                   [], {}, kinds=kinds, sections_of=sections_of, note_of=note_of, embedded=embedded)


def test_a_sections_cosine_is_blended_with_its_notes_and_others_keep_theirs():
    catalog = _catalog(["long", "long#5", "long#9", "short"], {"long#5": "long", "long#9": "long"})
    scores = np.array([0.2, 0.6, 0.3, 0.5])
    blended = in_context(catalog, scores, 0.3)
    assert blended[1] == pytest.approx(0.7 * 0.6 + 0.3 * 0.2) and blended[2] == pytest.approx(0.7 * 0.3 + 0.3 * 0.2)
    assert blended[0] == 0.2 and blended[3] == 0.5          # a note and a short note: their own
    assert list(scores) == [0.2, 0.6, 0.3, 0.5]            # the caller's array is left alone
    # the best section of a note about something else no longer passes the short note about the question
    assert scores[1] > scores[3] and blended[1] < blended[3]


def test_a_unit_not_embedded_yet_is_neither_blended_nor_blends():
    catalog = _catalog(["long", "long#5", "other", "other#3"], {"long#5": "long", "other#3": "other"})
    scores = np.array([-np.inf, 0.6, 0.4, -np.inf])
    blended = in_context(catalog, scores, SECTION_CONTEXT)
    assert blended[1] == 0.6                                  # its note has no vector yet: its own cosine
    assert blended[3] == -np.inf and blended[0] == -np.inf and blended[2] == 0.4


def test_a_note_cut_into_sections_loses_a_share_of_the_log_of_its_draws():
    catalog = _catalog(["long", "long#5", "long#9", "short"], {"long#5": "long", "long#9": "long"})
    ranked = [("long#5", 0.80, {}), ("short", 0.79, {}), ("long", 0.5, {}), ("turn-1", 0.4, {})]
    out = penalise_draws(catalog, ranked, SECTION_DRAWS)
    assert [u for u, _, _ in out] == ["short", "long#5", "long", "turn-1"]
    assert out[1][1] == pytest.approx(0.80 - SECTION_DRAWS * math.log(3))
    assert dict((u, s) for u, s, _ in out)["turn-1"] == 0.4 and out[0][1] == 0.79


def test_a_palace_without_sections_ranks_as_before():
    catalog = _catalog(["a", "b"], {})
    ranked = [("b", 0.9, {}), ("a", 0.3, {})]
    assert penalise_draws(catalog, ranked, SECTION_DRAWS) is ranked
    scores = np.array([0.1, 0.9])
    assert list(in_context(catalog, scores, SECTION_CONTEXT)) == [0.1, 0.9]


def _garden(root):
    from click.testing import CliRunner

    from palace_cli.cli import cli

    root.mkdir()
    topics = {"Soil": "compost, loam and the worms that turn it", "Water": "the rain barrel, the hose and when to water",
              "Pests": "aphids, slugs and the birds that eat them", "Tools": "spades, shears and how to oil them"}
    body = "\n\n".join(f"## {name}\n\n" + " ".join([f"This part is about {text}."] * 8) for name, text in topics.items())
    (root / "Garden handbook.md").write_text(f"# Garden handbook\n\nEverything about the garden.\n\n{body}\n")
    (root / "Rain barrel.md").write_text("# Rain barrel\n\nThe barrel under the gutter keeps rain for dry weeks.\n")
    (root / "Bees.md").write_text("# Bees\n\nThe hive stands by the hedge; the bees like the clover.\n")
    assert CliRunner().invoke(cli, ["init", str(root)]).exit_code == 0


@pytest.mark.slow
def test_the_fused_ranking_reads_sections_in_context_with_the_real_embedder(with_models, tmp_path, monkeypatch):
    from palace_cli.palace import Palace
    from palace_cli.search import ranking
    from palace_cli.search.ranking import _cosines, _dense, _lexical, fuse_minmax, rank

    _garden(tmp_path / "vault")
    palace = Palace(tmp_path / "vault")
    palace.refresh()
    palace.embed_some(lambda: False)  # every unit's vector, the sections' too
    palace.refresh()
    catalog = palace.index.catalog()
    assert len(catalog.sections_of.get("garden-handbook", ())) == 4 and catalog.vector_count == len(catalog.ids)
    query = "where do I keep water for the dry weeks?"
    hits, used = rank(palace, catalog, query, "fused", 10)
    assert used == "fused"
    own = _cosines(palace, catalog, query)([h.id for h in hits])
    assert all(h.parts["dense"] == pytest.approx(own[h.id]) for h in hits if "dense" in h.parts)  # its own cosine
    expected = penalise_draws(catalog, fuse_minmax({"lexical": _lexical(palace, catalog, query, 100),
                                                    "dense": _dense(palace, catalog, query, 100, context=SECTION_CONTEXT)}),
                              SECTION_DRAWS)
    assert [(h.id, pytest.approx(h.score)) for h in hits] == [(u, s) for u, s, _ in expected[:len(hits)]]
    monkeypatch.setattr(ranking, "SECTION_CONTEXT", 0.0)
    monkeypatch.setattr(ranking, "SECTION_DRAWS", 0.0)
    before, _ = rank(palace, catalog, query, "fused", 10)
    plain = fuse_minmax({"lexical": _lexical(palace, catalog, query, 100), "dense": _dense(palace, catalog, query, 100)})
    assert [(h.id, pytest.approx(h.score)) for h in before] == [(u, s) for u, s, _ in plain[:len(before)]]
    moved = {h.id: h for h in before}
    assert any(moved[h.id].score != pytest.approx(h.score) for h in hits if h.id.startswith("garden-handbook"))
    for h in hits:
        if h.id in ("rain-barrel", "bees"):  # a short note's own measures as before (its rank among units may move)
            assert {k: moved[h.id].parts.get(k) for k in ("lexical", "dense")} == \
                {k: h.parts.get(k) for k in ("lexical", "dense")}
