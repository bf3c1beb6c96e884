"""benchmarks/memory-palace-skill.queries.jsonl: well-formed, and every expected id is a memory the real import makes."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from click.testing import CliRunner

from palace_cli.bench.retrieval import load_queries
from palace_cli.cli import cli
from palace_cli.palace import Palace

from conftest import REPO, SHARED

QUERIES = REPO / "benchmarks" / "memory-palace-skill.queries.jsonl"
SKILL = SHARED / "data" / "memory-palace-skill"
KINDS = {"direct", "paraphrase", "scene", "scenario", "absent"}


def rows() -> list[tuple[int, dict]]:
    out = []
    for number, line in enumerate(QUERIES.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            out.append((number, json.loads(line)))
        except ValueError as exc:
            pytest.fail(f"{QUERIES.name}:{number}: not JSON ({exc})")
    return out


def test_every_line_is_a_query():
    for number, row in rows():
        where = f"{QUERIES.name}:{number}"
        assert set(row) == {"qid", "query", "expected", "kind"}, where
        assert isinstance(row["qid"], str) and row["qid"].strip(), where
        assert isinstance(row["query"], str) and row["query"].strip(), where
        assert isinstance(row["expected"], list) and all(isinstance(e, str) for e in row["expected"]), where
        assert len(set(row["expected"])) == len(row["expected"]), f"{where}: an expected id twice"
        assert row["kind"] in KINDS, f"{where}: kind {row['kind']!r}"
        # absent means the corpus does not answer it, and nothing else may be left without an answer
        assert (row["kind"] == "absent") == (not row["expected"]), f"{where}: kind and expected disagree"
    assert len(load_queries(QUERIES)) == len(rows())  # the bench's own reader takes every line


def test_qids_and_questions_are_unique():
    qids = Counter(row["qid"] for _, row in rows())
    assert [q for q, n in qids.items() if n > 1] == []
    questions = Counter(row["query"].strip().lower() for _, row in rows())
    assert [q for q, n in questions.items() if n > 1] == []


def test_every_kind_is_represented():
    kinds = Counter(row["kind"] for _, row in rows())
    assert set(kinds) == KINDS
    assert min(kinds.values()) >= 20, kinds


@pytest.mark.skipif(not SKILL.is_dir(), reason=f"{SKILL} is absent (the shared corpus is not in a user's clone)")
def test_expected_ids_exist_after_a_real_import(tmp_path):
    root = tmp_path / "skill"
    runner = CliRunner()
    result = runner.invoke(cli, ["init", str(root)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["--palace", str(root), "import", str(SKILL), "--format", "memory-palace-json"])
    assert result.exit_code == 0, result.output
    memories = Palace(root).scan().memories
    assert len(memories) == 93
    missing = sorted({(row["qid"], e) for _, row in rows() for e in row["expected"] if e not in memories})
    assert missing == []
    # every memory is asked about at least once: no part of the corpus goes unjudged
    asked = {e for _, row in rows() for e in row["expected"]}
    assert sorted(set(memories) - asked) == []
    # the hand-written duplicates for `palace bench similar` rewrite memories the import makes
    from palace_cli.bench.similar import load_duplicates

    duplicates = load_duplicates(REPO / "benchmarks" / "memory-palace-skill.duplicates.jsonl")
    assert len(duplicates) == 10 and {d.of for d in duplicates} <= set(memories)
