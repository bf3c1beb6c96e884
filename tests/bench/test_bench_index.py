"""`palace bench index` at a tiny size, and the synthetic note generator it uses."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from palace_cli.bench.index_bench import run
from palace_cli.bench.synth import edit_note, generate_palace
from palace_cli.cli import cli
from palace_cli.editing.lint import note_problems
from palace_cli.palace import Palace


def test_synthetic_notes_are_deterministic_and_valid(tmp_path, parse_notes):
    a = generate_palace(tmp_path / "a", 120, seed=3)
    b = generate_palace(tmp_path / "b", 120, seed=3)
    c = generate_palace(tmp_path / "c", 120, seed=4)
    files_a = {p.relative_to(a): p.read_bytes() for p in sorted(a.rglob("*.md"))}
    assert files_a == {p.relative_to(b): p.read_bytes() for p in sorted(b.rglob("*.md"))}
    assert files_a != {p.relative_to(c): p.read_bytes() for p in sorted(c.rglob("*.md"))}
    scan = parse_notes(Palace(a))
    assert len(scan.memories) == 120 and scan.problems == []
    codes = {p.code for p in note_problems(scan)}
    assert not codes & {"broken-link", "token-missing", "token-duplicate", "token-length", "token-not-in-image",
                         "missing-field", "missing-section"}, codes
    sizes = [len(m.image) + len(m.content) for m in scan.memories.values()]
    assert 600 < sum(sizes) / len(sizes) < 3000  # about the size of a hand-written SMASHIN note
    assert len(scan.by_domain()) >= 3


def query_word_spread(root) -> float:
    """The mean share of notes holding a word a query could draw from a note (alphabetic, over 4 letters)."""
    words = [{w for w in path.read_text().split() if w.isalpha() and len(w) > 4}
             for path in sorted(root.rglob("memories/*/*.md"))]
    holding = {}
    for note in words:
        for word in note:
            holding[word] = holding.get(word, 0) + 1
    drawn = [holding[word] / len(words) for note in words for word in note]
    return sum(drawn) / len(drawn)


def test_the_zipf_vocabulary_spreads_words_thinner(tmp_path, parse_notes):
    small = generate_palace(tmp_path / "s", 150, seed=2)
    zipf = generate_palace(tmp_path / "z", 150, seed=2, vocabulary="zipf")
    assert query_word_spread(zipf) < 0.7 * query_word_spread(small)  # about half at this size
    scan = parse_notes(Palace(zipf))
    assert len(scan.memories) == 150 and scan.problems == []


def test_edit_note_changes_only_the_content(tmp_path, parse_notes):
    root = generate_palace(tmp_path / "p", 5)
    path = sorted(root.rglob("*.md"))[0]
    before = parse_notes(Palace(root)).memories
    edit_note(path, 1)
    after = parse_notes(Palace(root)).memories
    changed = [i for i in before if before[i].content != after[i].content]
    assert len(changed) == 1 and all(before[i].subject == after[i].subject for i in before)


@pytest.mark.slow
def test_run_measures_a_tiny_palace(tmp_path):
    results = run([80], embed_max=0, workdir=tmp_path / "w", keep=True)
    [row] = results["sizes"]
    assert row["notes"] == 80 and row["problems"] == 0
    for key in ("full_build_s", "lexical_notes_per_s", "noop_refresh_s", "one_edit_refresh_s", "cli_noop_s",
                "peak_rss_mb"):
        assert row[key] > 0, key
    assert row["disk_mb"]["lexical"] > 0 and row["disk_mb"]["notes_cache"] > 0 and row["disk_mb"]["vectors"] == 0
    assert row["embeddings"] == "skipped"
    assert results["machine"]["calibration_s"] > 0
    assert (tmp_path / "w" / "palace-80" / "INDEX.md").exists()  # --keep


@pytest.mark.slow
def test_bench_index_command_json(tmp_path):
    result = CliRunner().invoke(cli, ["bench", "index", "--sizes", "40", "--embed-max", "0", "--json",
                                      "--workdir", str(tmp_path / "w")])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["sizes"][0]["notes"] == 40
    assert not (tmp_path / "w" / "palace-40").exists()  # removed without --keep


def test_bench_index_rejects_bad_sizes():
    result = CliRunner().invoke(cli, ["bench", "index", "--sizes", "ten"])
    assert result.exit_code == 2 and "sizes" in result.output


# ---- palace bench embed ---------------------------------------------------------------------


@pytest.mark.slow
def test_bench_embed_compares_old_and_new_on_short_texts_and_notes(with_models):
    result = CliRunner().invoke(cli, ["bench", "embed", "--short", "24", "--notes", "3", "--queries", "4",
                                      "--rounds", "2", "--configs", "old,new", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["sets"]["short"]["texts"] == 24 and data["sets"]["notes"]["texts"] == 3
    assert data["sets"]["queries"]["texts"] == 4 and data["sets"]["queries"]["mean_tokens"] < 16
    assert data["sets"]["notes"]["mean_tokens"] > 256 > data["sets"]["short"]["mean_tokens"]
    assert data["configs"]["old"]["max_tokens"] == 512 and data["configs"]["new"] == {"max_tokens": 256}
    short, notes = data["results"]["short"], data["results"]["notes"]
    assert short["old"]["speedup"] == 1.0 and short["old"]["min_cosine_to_old"] == 1.0
    assert short["new"]["min_cosine_to_old"] >= 0.999 and short["new"]["texts_cut"] == 0
    assert notes["new"]["texts_cut"] > 0 and notes["old"]["texts_cut"] == 0
    queries = data["results"]["queries"]
    assert queries["new"]["min_cosine_to_old"] >= 0.999 and 0 < queries["new"]["p50_ms"] <= queries["new"]["p95_ms"]
    for row in (*short.values(), *notes.values()):
        assert row["texts_per_s"] > 0 and row["cpu_ms_per_text"] > 0 and "p50_ms" not in row
    assert data["machine"]["load_avg_1m"] is not None


def test_bench_embed_takes_locomo_turns_and_rejects_unknown_configs(with_models, tmp_path):
    from palace_cli.bench.embed_bench import query_texts, short_texts

    locomo = tmp_path / "locomo.json"
    locomo.write_text(json.dumps([{"qa": [{"question": "What did Ben show?", "answer": "a kite"}], "conversation": {
        "speaker_a": "Ana", "speaker_b": "Ben", "session_1_date_time": "1 May 2023",
        "session_1": [{"speaker": "Ana", "dia_id": "D1:1", "text": "Hi Ben!"},
                      {"speaker": "Ben", "dia_id": "D1:2", "text": "Look at this.", "blip_caption": "a red kite"}],
        "session_10": [{"speaker": "Ana", "dia_id": "D10:1", "text": "Later."}],
        "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "Hello again."}]}}]))
    assert short_texts(None, locomo=locomo) == ["Ana: Hi Ben!", "Ben: Look at this. [image: a red kite]",
                                             "Ben: Hello again.", "Ana: Later."]
    assert query_texts(10, locomo=locomo) == ["What did Ben show?"]
    result = CliRunner().invoke(cli, ["bench", "embed", "--configs", "old,fastest"])
    assert result.exit_code == 2 and "fastest" in result.output


def test_bench_embed_vault_texts_are_the_units_a_palace_embeds(tmp_path):
    from palace_cli.bench.embed_bench import vault_texts
    from palace_cli.bench.synth import generate_vault

    palace = Palace(generate_vault(tmp_path / "vault", 3))
    palace.refresh(embedder=None)
    catalog = palace.index.catalog()
    texts = vault_texts(3)
    assert len(texts) == len(catalog.ids) == 3 + len(catalog.note_of)
    assert len(catalog.note_of) >= 3 * 8  # every note is long enough to be ranked by section too


def test_bench_embed_vault_counts_what_went_through_the_transformer(with_models):
    result = CliRunner().invoke(cli, ["bench", "embed", "--vault", "2", "--rounds", "2",
                                      "--embedders", "default:32,static", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["units"] > 2 and set(data["results"]) == {"default:32", "static"}
    cut, table = data["results"]["default:32"], data["results"]["static"]
    assert cut["full_model_share"] == 1.0 and cut["model_tokens_per_unit"] == 32.0  # every unit is longer
    assert table["full_model_share"] == 0.0 and table["model_tokens_per_unit"] == 0.0
    assert {"units_per_s", "best_units_per_s", "cpu_ms_per_unit"} <= set(cut) == set(table)
    assert data["embedders"]["default:32"].endswith(":32") and data["embedders"]["static"].startswith(
        "all-MiniLM-L6-v2.")
    result = CliRunner().invoke(cli, ["bench", "embed", "--vault", "1", "--embedders", "default:7"])
    assert result.exit_code != 0 and "cut after default" in result.output
