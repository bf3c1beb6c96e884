"""`palace bench retrieval --locomo`: evidence recall of turns on a tiny LoCoMo-shaped file, and on the dev set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import SHARED
from palace_cli.editing.authoring import init_palace
from palace_cli.bench.locomo import load_questions, question_metrics, run_locomo_bench
from palace_cli.cli import cli
from palace_cli.errors import PalaceError
from palace_cli.importers import import_path
from palace_cli.palace import Palace

DEV = SHARED / "data" / "locomo" / "locomo-dev5.json"
KEYS = {"recall@1", "recall@5", "recall@10", "recall@25", "recall@50", "session_recall@5", "session_recall@10",
        "context_tokens", "p50_ms", "p95_ms", "by_category"}


def samples() -> list[dict]:
    talk = {"speaker_a": "Ana", "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a beagle puppy named Rex."},
                          {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely! I started pottery classes."},
                          {"speaker": "Ana", "dia_id": "D1:3", "text": "Pottery sounds relaxing."}],
            "session_2_date_time": "10:04 am on 19 June, 2023",
            "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "My pottery bowl cracked in the kiln."},
                          {"speaker": "Ana", "dia_id": "D2:2", "text": "Rex chewed my running shoes."}]}
    qa = [
        {"question": "What kind of dog did Ana adopt?", "evidence": ["D1:1"], "category": 4},
        {"question": "What happened to Ben's pottery?", "evidence": ["D1:2", "D2:1"], "category": 1},
        {"question": "When did Ana adopt the beagle?", "evidence": ["D1:1; D9:9", "not-an-id"], "category": 2},
        {"question": "What did Ben's beagle chew?", "evidence": ["D2:2"], "category": 5},
        {"question": "Only broken evidence", "evidence": ["S1"], "category": 3},
    ]
    return [{"sample_id": "conv-7", "conversation": talk, "qa": qa}]


@pytest.fixture
def locomo(tmp_path) -> tuple[Palace, Path]:
    path = tmp_path / "tiny-locomo.json"
    path.write_text(json.dumps(samples()))
    palace = Palace(init_palace(tmp_path / "p", name="Tiny"))
    import_path(palace, path)
    return palace, path


def test_evidence_maps_to_turns_and_bad_ids_are_counted(locomo):
    palace, path = locomo
    palace.refresh()
    questions = load_questions(palace, path)
    assert [q.evidence for q in questions.answerable] == [
        ["locomo-conv-7-s01/D1:1"], ["locomo-conv-7-s01/D1:2", "locomo-conv-7-s02/D2:1"], ["locomo-conv-7-s01/D1:1"]]
    assert [q.category for q in questions.adversarial] == [5]
    assert (questions.malformed_ids, questions.unknown_ids, questions.without_evidence) == (2, 1, 1)


def test_metrics_are_locomos_own():
    ranked = ["s1/D1:5", "s1/D1:2", "s2/D2:1", "s3/D3:1"]
    got = question_metrics(ranked, ["s1/D1:2"], ["s1/D1:2", "s2/D2:1", "s9/D9:9"])
    assert got["recall@1"] == 0 and got["recall@5"] == pytest.approx(2 / 3) and got["recall@50"] == pytest.approx(2 / 3)
    assert got["session_recall@5"] == pytest.approx(2 / 3) and got["context_recall"] == pytest.approx(1 / 3)


def test_bench_reports_every_mode_per_category_and_abstention(locomo):
    palace, path = locomo
    summary = run_locomo_bench(palace, path, modes=("recall", "lexical", "fused"))
    assert (summary["questions"], summary["adversarial_questions"]) == (3, 1)
    assert summary["evidence_skipped"] == {"malformed_ids": 2, "unknown_ids": 1, "questions_without_evidence": 1}
    assert set(summary["modes"]) == {"recall", "lexical", "fused"} == set(summary["own_conversation"])
    lexical = summary["modes"]["lexical"]
    assert KEYS <= set(lexical)
    assert lexical["recall@1"] == pytest.approx((1 + 0.5 + 1) / 3, abs=1e-4)  # the multi-hop question finds one turn first
    assert lexical["recall@5"] == 1.0 and lexical["session_recall@5"] == 1.0
    assert lexical["by_category"]["1 multi-hop"]["questions"] == 1
    assert lexical["by_category"]["3 open-domain"]["questions"] == 0
    assert 0 < lexical["context_tokens"] < 200 and lexical["adversarial"]["questions"] == 1
    assert summary["modes"]["recall"]["recall@5"] == 1.0


def test_the_bench_imports_nothing(tmp_path):
    path = tmp_path / "tiny-locomo.json"
    path.write_text(json.dumps(samples()))
    palace = Palace(init_palace(tmp_path / "p", name="Empty"))
    with pytest.raises(PalaceError, match=r"holds no conversation conv-7 .*run `palace import .*` first"):
        run_locomo_bench(palace, path)
    assert not (palace.root / "conversations").exists()


def test_cli_json(locomo, monkeypatch):
    palace, path = locomo
    monkeypatch.chdir(palace.root)
    out = CliRunner().invoke(cli, ["bench", "retrieval", "--locomo", str(path), "--modes", "lexical", "--scope",
                                   "palace", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["dataset"] == "tiny-locomo.json" and data["questions"] == 3 and "own_conversation" not in data
    assert KEYS <= set(data["modes"]["lexical"])
    out = CliRunner().invoke(cli, ["bench", "retrieval", "--locomo", str(path), "--modes", "lexical"])
    assert out.exit_code == 0 and "own conversation:" in out.stdout and "recall@10 1 multi-hop" in out.stdout


@pytest.mark.skipif(not DEV.is_file(), reason=f"the LoCoMo dev set is not at {DEV} (../shared is absent)")
def test_on_the_dev_set(tmp_path):
    palace = Palace(init_palace(tmp_path / "dev", name="LoCoMo dev"))
    import_path(palace, DEV)
    summary = run_locomo_bench(palace, DEV, modes=("lexical",), scopes=("palace",), limit=40)
    assert summary["questions"] == 40 and summary["evidence_skipped"]["malformed_ids"] >= 0
    row = summary["modes"]["lexical"]
    assert 0.2 < row["recall@10"] <= row["recall@50"] <= 1.0  # flat BM25 over turns gets about 0.6 at 10
