"""`palace bench recall` at a tiny size: lexical rows, fused over stand-in vectors, a reused workdir."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from palace_cli.bench.recall_bench import STAND_IN, run
from palace_cli.cli import cli
from palace_cli.palace import Palace


def test_lexical_rows_per_query_length(tmp_path):
    results = run(60, [2, 5], ["lexical"], count=6, warmup=2, workdir=tmp_path / "w")
    assert results["notes"] == 60 and [(r["mode"], r["words"]) for r in results["rows"]] == [("lexical", 2), ("lexical", 5)]
    for row in results["rows"]:
        for label in ("warm", "first_sight"):
            assert row[label]["n"] == 6 and 0 < row[label]["p50_ms"] <= row[label]["p95_ms"]
            assert row[label]["cpu_p50_ms"] > 0
    assert "stand_in_vectors" not in results
    assert (tmp_path / "w" / "palace-60" / "palace.toml").exists()  # kept under --workdir, reused next time
    again = run(60, [3], ["lexical"], count=3, warmup=1, workdir=tmp_path / "w")
    assert again["notes"] == 60 and again["vocabulary"] == "small"
    zipf = run(40, [3], ["lexical"], count=2, warmup=0, workdir=tmp_path / "w", vocabulary="zipf")
    assert zipf["notes"] == 40 and (tmp_path / "w" / "palace-40-zipf").is_dir()


def test_fused_over_stand_in_vectors_labels_them(with_models, tmp_path):
    result = CliRunner().invoke(cli, ["bench", "recall", "--size", "50", "--words", "4", "--modes", "hybrid",
                                      "--queries", "4", "--warmup", "1", "--stand-in-vectors", "--json",
                                      "--workdir", str(tmp_path / "w")])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["stand_in_vectors"]["rows"] == 50 and data["vectors"].startswith(STAND_IN)
    [row] = data["rows"]
    assert row["mode"] == "fused" and row["warm"]["n"] == 4   # asked by its old name, hybrid
    palace = Palace(tmp_path / "w" / "palace-50")
    catalog = palace.index.catalog()
    assert catalog.model_id.startswith(STAND_IN) and catalog.matrix.shape[0] == 50
    assert np.allclose(np.linalg.norm(catalog.matrix, axis=1), 1.0, atol=1e-5)


def test_fused_without_vectors_asks_for_them(with_models, tmp_path):
    result = CliRunner().invoke(cli, ["bench", "recall", "--size", "30", "--modes", "fused", "--queries", "2",
                                      "--warmup", "0", "--workdir", str(tmp_path / "w")])
    assert result.exit_code != 0 and "--stand-in-vectors" in result.output


def test_bench_recall_rejects_unknown_modes():
    result = CliRunner().invoke(cli, ["bench", "recall", "--modes", "lexical,fast"])
    assert result.exit_code == 2 and "fast" in result.output
