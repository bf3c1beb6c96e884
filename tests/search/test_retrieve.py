"""Retrieval (search and recall, one Query) through the core API on a copy of the example palace (lexical: no models here)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from palace_cli.cli import cli
from palace_cli.errors import NotFound, UsageError
from palace_cli.search.profiles import PROFILES
from palace_cli.search.ranking import fuse_minmax, fuse_rrf
from palace_cli.search.retrieve import recall, search, trim_hits
from palace_cli.search.context import build_context
from palace_cli.search.hits import Hit

from conftest import DATA


@pytest.mark.parametrize("query, domain", [
    ("what does 2pc do when the coordinator dies", "consensus-coordination"),          # exact keyword
    ("kafka: how do I keep ordering per customer?", "messaging-events"),                 # domain alias
    ("bloom filter false positive rate", "storage-engines"),                             # subject phrase
])
def test_route_is_the_domains_of_the_handed_memories(readonly_palace, query, domain):
    result = recall(readonly_palace, query)
    assert result.hits and result.hits[0].domain == domain
    assert result.route and result.route[0].domain == domain
    assert [r.domain for r in result.route] == list(dict.fromkeys(h.domain for h in result.handed))
    assert sum(r.confidence for r in result.route) == pytest.approx(1.0)
    assert result.hops == 1 and not result.fallback


def test_an_ambiguous_query_is_ranked_flat(readonly_palace):
    """A query spanning domains is ranked over every domain: the hits equal flat search's."""
    result = recall(readonly_palace, "cache replication retries queue", k=5, trim=False)
    flat = search(readonly_palace, "cache replication retries queue", k=5)
    assert [h.id for h in result.hits] == [h.id for h in flat.hits]
    assert not result.fallback and "ranked flat" in result.reason


def test_unknown_domain_is_a_clear_error(readonly_palace):
    with pytest.raises(NotFound, match="no domain 'kubernetes'"):
        recall(readonly_palace, "pods", domain="kubernetes")


def test_given_domain_skips_routing(readonly_palace):
    result = recall(readonly_palace, "log", domain="storage-engines", k=5)
    assert result.hops == 1
    assert {h.domain for h in result.hits} == {"storage-engines"}


@pytest.mark.slow
def test_recall_ranks_as_flat_search_does(palace):
    """Routing never costs recall: on every example-palace question, recall's ranking is flat search's, and what
    it offers is that ranking's relevant units in order."""
    from palace_cli.bench.retrieval import load_queries

    queries = [q for q in load_queries(palace.root / "queries.jsonl") if q.expected]
    palace.refresh()
    for q in queries:
        flat = search(palace, q.query, k=3, do_refresh=False)
        routed = recall(palace, q.query, k=3, trim=False, do_refresh=False)
        assert [h.id for h in routed.ranked[:3]] == [h.id for h in flat.ranked], q.qid
        left = {o.id for o in routed.omitted}
        assert [h.id for h in routed.hits] == [h.id for h in routed.ranked if h.id not in left][:3], q.qid


def test_minmax_fusion_maths():
    fused = fuse_minmax({"lexical": [("a", 9.0), ("b", 5.0), ("d", 1.0)], "dense": [("b", 0.9), ("c", 0.8), ("a", 0.5)]})
    scores = {item: score for item, score, _ in fused}
    assert scores["a"] == pytest.approx(0.5 * 1 + 0.5 * 0)
    assert scores["b"] == pytest.approx(0.5 * 0.5 + 0.5 * 1)
    assert scores["c"] == pytest.approx(0.5 * 0.75)        # missing from the lexical list: 0 from it
    assert scores["d"] == pytest.approx(0.0)
    assert [item for item, _, _ in fused] == ["b", "a", "c", "d"]
    assert {item: p for item, _, p in fused}["b"] == {"lexical": 5.0, "lexical_rank": 2, "dense": 0.9, "dense_rank": 1}


def test_minmax_fusion_of_equal_scores_and_empty_lists():
    fused = fuse_minmax({"lexical": [("b", 2.0), ("a", 2.0)], "dense": []})
    assert [(item, score) for item, score, _ in fused] == [("a", 0.5), ("b", 0.5)]   # all equal: 1 each; ties by id
    assert fuse_minmax({"lexical": [], "dense": []}) == []


def test_rrf_fusion_maths():
    fused = fuse_rrf({"lexical": [("a", 9.0), ("b", 5.0)], "dense": [("b", 0.9), ("c", 0.8)]}, k=60)
    scores = {item: score for item, score, _ in fused}
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["a"] == pytest.approx(1 / 61)
    assert scores["c"] == pytest.approx(1 / 62)
    assert [item for item, _, _ in fused] == ["b", "a", "c"]
    parts = {item: p for item, _, p in fused}
    assert parts["b"] == {"lexical": 5.0, "lexical_rank": 2, "dense": 0.9, "dense_rank": 1}


def test_rrf_ties_break_by_id():
    fused = fuse_rrf({"x": [("b", 1.0)], "y": [("a", 1.0)]})
    assert [item for item, _, _ in fused] == ["a", "b"]


@pytest.mark.parametrize("parts, expected", [
    ([{"lexical": 10}, {"lexical": 6}, {"lexical": 5.9}], 2),
    ([{"lexical": 10}, {"lexical": 2}, {"lexical": 9}], 1),       # stops at the first far hit
    ([{"dense": 0.8}, {"dense": 0.75}, {"dense": 0.73}], 2),
    ([{"lexical": 10, "dense": 0.8}, {"lexical": 1, "dense": 0.79}], 2),  # close on either signal
])
def test_trim_keeps_hits_close_to_the_best(parts, expected):
    hits = [Hit(f"m{i}", "", "d", "p", 1, 0.0, p) for i, p in enumerate(parts)]
    assert len(trim_hits(hits)) == expected


def test_budget_truncates_at_whole_memories(readonly_palace):
    result = recall(readonly_palace, "how do quorums overlap", k=3, trim=False, profile="study", budget=None)
    full = build_context(result.hits, PROFILES["study"], None)
    small = build_context(result.hits, PROFILES["study"], 1500)
    assert len(small.encode()) <= 1500 < len(full.encode())
    assert small.count("verify: ") >= 1
    assert build_context(result.hits, PROFILES["study"], 50) == ""


def test_context_carries_tokens_and_instruction(readonly_palace):
    result = recall(readonly_palace, "what is a write-ahead log for")
    memory = result.hits[0].memory
    assert f"verify: {memory.verify}" in result.context
    assert "verify token" in result.context
    assert result.context_bytes == len(result.context.encode("utf-8"))


def test_profiles(readonly_palace):
    interview = recall(readonly_palace, "token bucket burst size", profile="interview")
    assert len(interview.hits) == 1 and interview.mode == "lexical"
    assert "Image:" not in interview.context
    study = recall(readonly_palace, "token bucket burst size", profile="study")
    assert "Image:" in study.context and "links:" in study.context
    teaching = recall(readonly_palace, "token bucket burst size", profile="teaching")
    assert teaching.linked, "teaching hands over linked memories too"
    assert teaching.context_bytes > study.context_bytes
    with pytest.raises(UsageError):
        recall(readonly_palace, "x", profile="nonsense")


def test_search_modes_without_models(readonly_palace):
    lexical = search(readonly_palace, "consistent hashing ring", mode="lexical", k=5)
    assert lexical.hits[0].id == "consistent-hashing"
    fused = search(readonly_palace, "consistent hashing ring", mode="fused", k=5)
    assert fused.mode == "lexical" and fused.dense == "off"   # says it fell back
    old_name = search(readonly_palace, "consistent hashing ring", mode="hybrid", k=5)   # fused's old name still works
    assert [h.id for h in old_name.hits] == [h.id for h in fused.hits] and old_name.mode == "lexical"
    with pytest.raises(UsageError, match="palace models install"):
        search(readonly_palace, "x", mode="dense")
    with pytest.raises(UsageError, match="choose from fused, lexical, dense"):
        search(readonly_palace, "x", mode="2hop")


def test_cli_recall_json_shape(readonly_example):
    runner = CliRunner()
    result = runner.invoke(cli, ["--palace", str(readonly_example), "recall", "why add jitter to retries",
                                 "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {"hits", "hops", "route", "fallback", "context_bytes", "memories"} <= set(data)
    hit = data["hits"][0]
    assert {"id", "subject", "domain", "path", "line", "score", "parts"} <= set(hit)
    assert hit["id"] == "retry-backoff-jitter"
    assert all({"domain", "confidence"} <= set(r) for r in data["route"])
    assert data["memories"][0]["verify"]


def test_cli_search_json_and_prompt(readonly_example):
    runner = CliRunner()
    result = runner.invoke(cli, ["--palace", str(readonly_example), "search", "merkle tree repair", "--json",
                                 "-k", "3"])
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert len(data["hits"]) == 3 and data["hits"][0]["id"] == "merkle-anti-entropy"
    prompt = runner.invoke(cli, ["--palace", str(readonly_example), "recall", "merkle tree repair",
                                 "--format", "prompt"])
    assert prompt.exit_code == 0 and "verify:" in prompt.stdout


def test_wake_up_is_deterministic_and_within_budget(readonly_palace):
    from palace_cli.search.wakeup import wake_up

    first = wake_up(readonly_palace, budget_tokens=300)
    second = wake_up(readonly_palace, budget_tokens=300)
    assert first.text == second.text
    assert first.tokens <= 300
    assert first.text.startswith("# System Design Palace")
    assert first.memories and len(first.memories) < 89
    bigger = wake_up(readonly_palace, budget_tokens=3000)
    assert [m["id"] for m in bigger.memories[: len(first.memories)]] == [m["id"] for m in first.memories]


@pytest.mark.slow
def test_fused_and_dense_with_the_real_embedder(with_models, palace):
    """With the converted MiniLM GGUF installed, dense ranking is on and fused ranking fuses both signals."""
    dense = search(palace, "my readers keep seeing old data after I update the database", mode="dense", k=5)
    assert dense.dense == "on" and dense.mode == "dense"
    assert all(-1.0 <= h.score <= 1.0 for h in dense.hits)
    fused = search(palace, "two generals agreeing on a value despite crashes", mode="fused", k=5)
    assert fused.mode == "fused"
    assert any({"lexical", "dense"} <= set(h.parts) for h in fused.hits)
    result = recall(palace, "why do retries need randomness", k=3, trim=False)
    assert "retry-backoff-jitter" in [h.id for h in result.hits]
    assert "dense" in result.hits[0].parts and result.route[0].domain == result.hits[0].domain
    assert 0.0 < result.confidence <= 1.0


def test_json_memories_are_only_what_fit_the_budget(readonly_palace):
    """`memories` (what verify --context trusts) lists only memories whose block is in the context."""
    roomy = recall(readonly_palace, "how do quorums overlap", k=3, trim=False, profile="study", budget=None)
    tight = recall(readonly_palace, "how do quorums overlap", k=3, trim=False, profile="study", budget=1200)
    assert len(roomy.as_dict()["memories"]) == 3
    listed = [m["id"] for m in tight.as_dict()["memories"]]
    assert 1 <= len(listed) < 3
    assert all(f"({note_id})" in tight.context for note_id in listed)
    dropped = [h.id for h in tight.hits if h.id not in listed]
    assert dropped and not any(f"({note_id})" in tight.context for note_id in dropped)


def test_bench_retrieval_on_a_small_beir_fixture(tmp_path):
    """`bench retrieval --beir` imports the corpus into a cached palace and reports every mode's metrics."""
    beir = DATA / "import" / "beir"
    runner = CliRunner()
    result = runner.invoke(cli, ["bench", "retrieval", "--beir", str(beir), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["dataset"] == "beir" and summary["queries"] > 0
    # no embedder here: dense and the dense baselines are skipped; the BM25 baselines are printed beside
    assert set(summary["modes"]) == {"recall", "lexical", "fused", "whole-notes", "sections-bm25"}
    for row in summary["modes"].values():
        assert {"recall@1", "recall@3", "recall@5", "recall@10", "mrr", "ndcg@10", "context_bytes",
                "p50_ms", "p95_ms", "ci"} <= set(row)
        assert 0.0 <= row["recall@1"] <= row["recall@10"] <= 1.0
        low, high = row["ci"]["ndcg@10"]
        assert low <= row["ndcg@10"] <= high
    again = json.loads(runner.invoke(cli, ["bench", "retrieval", "--beir", str(beir), "--json"]).stdout)
    quality = ("recall@1", "recall@3", "mrr", "ndcg@10", "context_bytes")
    assert {k: again["modes"]["lexical"][k] for k in quality} == {k: summary["modes"]["lexical"][k] for k in quality}


def test_ndcg_and_query_metrics_table():
    from palace_cli.bench.retrieval import ndcg_at, query_metrics

    assert ndcg_at(["a", "b"], {"a"}) == pytest.approx(1.0)
    assert ndcg_at(["x", "a"], {"a"}) == pytest.approx(1 / math.log2(3))
    assert ndcg_at(["x", "y"], {"a"}) == 0.0
    metrics = query_metrics(["x", "a", "b"], ["a", "b"])
    assert metrics["recall@1"] == 0.0 and metrics["recall@3"] == 1.0 and metrics["mrr"] == pytest.approx(0.5)


@pytest.mark.parametrize("command", [["recall", "why does a leader need a term?"], ["search", "leader term"],
                                     ["due"], ["list"]])
def test_every_command_takes_a_domain_alias(readonly_example, command):
    """One domain resolver for every face: `-d consensus` (an alias) works everywhere."""
    from click.testing import CliRunner

    from palace_cli.cli import cli

    result = CliRunner().invoke(cli, ["--palace", str(readonly_example), *command, "-d", "consensus"])
    assert result.exit_code == 0, result.output


def test_bench_retrieval_on_any_corpus_with_kinds(tmp_path):
    """`bench retrieval --corpus DIR --queries FILE` imports a non-palace corpus once and breaks results down by kind;
    a palace directory is benchmarked in place."""
    corpus = DATA / "import" / "palace-json"
    queries = tmp_path / "q.jsonl"
    queries.write_text("\n".join(json.dumps(q) for q in [
        {"qid": "1", "query": "paranoid accountant fireproof diary", "expected": ["st-001"], "kind": "scene"},
        {"qid": "2", "query": "write-ahead log", "expected": ["st-001"], "kind": "direct"},
        {"qid": "3", "query": "segmented log", "expected": ["st-002"], "kind": "direct"},
    ]) + "\n")
    runner = CliRunner()
    args = ["bench", "retrieval", "--corpus", str(corpus), "--queries", str(queries), "--modes", "2hop,lexical", "--json"]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    # 2hop, recall's old name, still works; the flat BM25 baselines come after the rows asked for
    assert list(summary["modes"]) == ["recall", "lexical", "whole-notes", "sections-bm25"]
    assert summary["dataset"] == "palace-json" and summary["queries"] == 3
    assert set(summary["kinds"]) == {"scene", "direct"}
    assert summary["kinds"]["direct"]["queries"] == 2
    direct = summary["kinds"]["direct"]["modes"]["lexical"]
    assert direct["recall@1"] == 1.0 and direct["ci"]["mrr"] == [1.0, 1.0]
    assert "--corpus" in summary["command"]
    cached = [p for p in (Path(os.environ["PALACE_HOME"]) / "bench").iterdir() if p.name.startswith("palace-json-")]
    assert len(cached) == 1 and (cached[0] / "bench-source.txt").is_file()
    again = json.loads(runner.invoke(cli, args).stdout)
    assert again["kinds"]["direct"]["modes"]["lexical"]["mrr"] == direct["mrr"]
    assert len([p for p in cached[0].parent.iterdir() if p.name.startswith("palace-json-")]) == 1   # imported once
    in_place = runner.invoke(cli, ["bench", "retrieval", "--corpus", str(cached[0]), "--queries", str(queries),
                                   "--modes", "lexical"])
    assert in_place.exit_code == 0 and "| direct | 2 |" in in_place.output


@pytest.mark.parametrize("options, message", [
    ({"profile": "nonsense"}, "unknown profile 'nonsense'"),
    ({"mode": "2hop"}, "unknown mode '2hop'; choose from fused, lexical, dense"),
    ({"as_of": "next tuesday"}, "--as-of"),
    ({"since": "2024", "until": "2023"}, "--since 2024 is after --until 2023"),
    ({"kind": "turn", "domain": "storage-engines"}, "turns are in no domain"),
    ({"kind": "note"}, "unknown kind 'note'"),
])
def test_a_query_is_checked_once_before_the_palace_is_touched(options, message):
    """Every option is refused in make_query, the one place search and recall both go through."""
    from palace_cli.search.query import make_query

    with pytest.raises(UsageError, match=message):
        make_query("anything", **options)


def test_a_query_fills_what_is_not_given_from_its_profile():
    from palace_cli.search.query import make_query

    reference = make_query("why jitter")
    assert (reference.k, reference.turns, reference.mode, reference.budget, reference.trim) == (3, 10, "fused", 4000, True)
    interview = make_query("why jitter", profile="interview")
    assert (interview.k, interview.mode, interview.budget) == (1, "lexical", 1200)
    assert make_query("x", budget=999, budget_tokens=100).budget == 400   # tokens win, 4 bytes each
    assert make_query("x", mode="hybrid").mode == "fused"                  # the old name still works
    assert make_query("x", as_of="2025-06-01").when.isoformat().startswith("2025-06-01")


def test_one_query_serves_search_and_recall(palace):
    """A Query built once ranks the same for search and recall (they share the prelude and the ranking) and gives
    what the keyword options give; options beside a Query are refused, not silently dropped."""
    from palace_cli.search.query import make_query

    query = make_query("cache replication retries queue", k=5, trim=False)
    found, recalled = search(palace, query), recall(palace, query)
    assert [h.id for h in recalled.ranked[:5]] == [h.id for h in found.ranked]
    assert [h.id for h in recalled.hits] == [h.id for h in found.hits]
    assert [h.id for h in search(palace, "cache replication retries queue", k=5).hits] == [h.id for h in found.hits]
    assert recall(palace, query).context == recall(palace, "cache replication retries queue", k=5, trim=False).context
    with pytest.raises(UsageError, match="go into the Query"):
        search(palace, query, k=3)


def test_cli_search_takes_the_old_mode_name(example_palace):
    runner = CliRunner()
    fused = runner.invoke(cli, ["--palace", str(example_palace), "search", "merkle tree repair", "--json", "--mode", "fused"])
    old = runner.invoke(cli, ["--palace", str(example_palace), "search", "merkle tree repair", "--json", "--mode", "hybrid"])
    assert fused.exit_code == old.exit_code == 0, old.output
    assert json.loads(old.stdout)["hits"] == json.loads(fused.stdout)["hits"]
    wrong = runner.invoke(cli, ["--palace", str(example_palace), "search", "merkle", "--mode", "2hop"])
    assert wrong.exit_code == 2 and "fused" in wrong.output



def test_recall_ranks_as_deep_as_search(readonly_palace, monkeypatch):
    """recall and search hand the same depth to the ranking, so fusion min-max normalises both over the same
    candidates: recall's top units are search's (on SilverBullet a shallower recall lost 0.03 recall@3)."""
    import palace_cli.search.retrieve as retrieve

    depths = []
    real = retrieve.rank

    def spy(palace, catalog, query, mode, k, *args, **kwargs):
        depths.append(k)
        return real(palace, catalog, query, mode, k, *args, **kwargs)

    monkeypatch.setattr(retrieve, "rank", spy)
    recall(readonly_palace, "why does a leader need a term?", do_refresh=False)
    search(readonly_palace, "why does a leader need a term?", do_refresh=False)
    assert len(depths) == 2 and depths[0] == depths[1]
