"""The flat baselines `palace bench retrieval` prints beside palace's own modes (bench/baselines.py)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from palace_cli.cli import cli

FILLER = "Plain words about the garden, the shed and the paths between the beds, written at length. " * 10


def _vault(root):
    """A vault of one long note cut into sections (the answer deep in its third) and two short notes."""
    root.mkdir()
    (root / "Garden.md").write_text(
        "# Garden\n\nThe garden holds beds.\n\n## Soil\n" + FILLER + "\n\n## Tools\n" + FILLER +
        "\n\n## Watering\nThe cistern pump runs at dawn through drip lines.\n" + FILLER + "\n")
    (root / "Kitchen.md").write_text("# Kitchen\n\nThe kitchen has a stove and a pump for the sink.\n")
    (root / "Shed.md").write_text("# Shed\n\nThe shed holds the tools and a ladder.\n")
    return root


def test_bench_retrieval_prints_the_flat_baselines_on_any_corpus(tmp_path):
    """Beside the rows asked for: BM25 over whole notes and over sections, each note ranked by its best unit; the
    dense baselines are left out when there is no embedder."""
    corpus = _vault(tmp_path / "vault")
    queries = tmp_path / "q.jsonl"
    queries.write_text("\n".join(json.dumps(q) for q in [
        {"qid": "1", "query": "cistern pump at dawn", "expected_paths": ["Garden.md"], "section": "Watering"},
        {"qid": "2", "query": "stove", "expected_paths": ["Kitchen.md"]},
        {"qid": "3", "query": "ladder", "expected_paths": ["Shed.md"]},
    ]) + "\n")
    result = CliRunner().invoke(cli, ["bench", "retrieval", "--corpus", str(corpus), "--queries", str(queries),
                                      "--modes", "lexical", "--json"])
    assert result.exit_code == 0, result.output
    modes = json.loads(result.stdout)["modes"]
    assert list(modes) == ["lexical", "whole-notes", "sections-bm25"]
    for name in ("whole-notes", "sections-bm25"):
        assert modes[name]["recall@1"] == 1.0, name
    # the sections baseline hands the section that answers, the whole-notes one the whole note
    assert modes["sections-bm25"]["section_recall"] == 1.0
    assert modes["whole-notes"]["section_recall"] == 0.0


def test_a_baseline_ranks_a_note_by_its_best_section_once(tmp_path):
    from palace_cli.bench.baselines import baseline_ranking
    from palace_cli.palace import Palace

    root = _vault(tmp_path / "vault")
    assert CliRunner().invoke(cli, ["init", str(root)]).exit_code == 0
    palace = Palace(root)
    palace.refresh()
    ranked = baseline_ranking(palace, "sections-bm25", "pump", frozenset())
    assert [h.path for h in ranked] == ["Garden.md", "Kitchen.md"] or \
        [h.path for h in ranked] == ["Kitchen.md", "Garden.md"]
    garden = next(h for h in ranked if h.path == "Garden.md")
    assert garden.kind == "section" and garden.id.startswith("garden#")
    assert baseline_ranking(palace, "sections-bm25", "pump", frozenset({"kitchen"}))[0].path == "Garden.md"
    whole = baseline_ranking(palace, "whole-notes", "ladder", frozenset())
    assert [h.path for h in whole] == ["Shed.md"] and whole[0].kind == "memory"
