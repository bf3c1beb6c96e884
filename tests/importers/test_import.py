"""palace import: memory-palace JSON, Markdown folders, BEIR; validation before writing; idempotence; conflicts."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from palace_cli.editing.authoring import add_memory, init_palace
from palace_cli.cli import cli
from palace_cli.errors import ImportFailed, UsageError
from palace_cli.importers import detect_format, import_path, read
from palace_cli.importers.clustering import choose_k, cluster, name_clusters, spherical_kmeans, tfidf
from palace_cli.importers.memory_palace_json import derive_anchor
from palace_cli.core.noteedit import update_frontmatter
from palace_cli.palace import Palace
from palace_cli.core.tokens import contains_phrase, guessable_words

from conftest import DATA as TEST_DATA, SHARED

DATA = TEST_DATA / "import"
SKILL = SHARED / "data" / "memory-palace-skill"
SCIFACT = SHARED / "data" / "scifact"


@pytest.fixture
def empty(tmp_path) -> Palace:
    return Palace(init_palace(tmp_path / "p", name="Imports"))


def notes_on_disk(palace: Palace) -> dict[str, bytes]:
    return {p.relative_to(palace.root).as_posix(): p.read_bytes() for p in sorted(palace.memories_dir.rglob("*.md"))}


def memory(palace: Palace, note_id: str):
    return palace.scan().memories[note_id]


# ---- format detection --------------------------------------------------------------------------


@pytest.mark.parametrize("relpath, expected", [
    ("palace-json", "memory-palace-json"),
    ("palace-json/citadel.json", "memory-palace-json"),
    ("markdown", "markdown"),
    ("markdown/git-cheatsheet.md", "markdown"),
    ("beir", "beir"),
    ("beir/corpus.jsonl", "beir"),
])
def test_detect_format(relpath, expected):
    assert detect_format(DATA / relpath) == expected


def test_detect_format_refuses_to_guess(tmp_path):
    (tmp_path / "a.json").write_text("[]")
    (tmp_path / "b.md").write_text("# B\n")
    with pytest.raises(UsageError, match="both .json and .md"):
        detect_format(tmp_path)
    (tmp_path / "c").mkdir()
    with pytest.raises(UsageError, match="cannot tell the format"):
        detect_format(tmp_path / "c")


def test_importing_the_palace_into_itself_is_refused(empty):
    add_memory(empty, "Saga", "distributed", content="Compensating steps.")
    for path in (empty.root, empty.memories_dir / "distributed"):
        with pytest.raises(UsageError, match="this palace's memories"):
            import_path(empty, path, format="markdown")


# ---- memory-palace JSON --------------------------------------------------------------------------


def test_palace_json_loci_become_domains_and_memories_keep_their_ids(empty):
    report = import_path(empty, DATA / "palace-json")
    assert sorted(report.added) == ["nt-001", "paper-2", "paper-memory-1", "st-001", "st-002"]
    assert report.domains == {"storage-cellar": 2, "network-tower": 1, "paper-memories": 1, "transactions": 1}
    assert (empty.root / "memories/storage-cellar/st-001.md").is_file()
    wal = memory(empty, "st-001")
    assert (wal.subject, wal.domain, wal.links, wal.created) == ("Write-Ahead Log", "storage-cellar", ["st-002"],
                                                                 "2026-02-01")
    assert wal.anchor == "paranoid accountant"  # the image's capitalised hook
    assert wal.meta["source"] == {"palace": "Tiny Citadel", "mnemonicStrength": 3}
    # a proposed verify token: in the image, not guessable from subject, content or anchor
    assert wal.verify and contains_phrase(wal.image, wal.verify)
    assert not guessable_words(wal.verify, wal.subject, [wal.anchor], wal.content)
    # the empty entrance locus is no domain; the others are declared with their description and anchor
    assert "gate" not in empty.domains()
    cellar = empty.config.raw["domains"]["storage-cellar"]
    assert cellar["description"] == "Storage Cellar: Where the data sleeps."
    assert cellar["anchor"] == "barrels stacked to the ceiling" and cellar["parent"] == "gate"


def test_paper_schema_keeps_tokens_and_unknown_fields_and_maps_odd_ids(empty):
    import_path(empty, DATA / "palace-json" / "paper-memories.json")
    first = memory(empty, "paper-memory-1")
    assert first.meta["source_id"] == "Paper Memory #1"
    assert (first.verify, first.anchor) == ("golden megaphone", "soap opera wedding")
    assert first.meta["source"] == {"confidence": 0.82, "smashin_score": 9, "last_retrieved": "2026-01-20",
                                    "retrieval_count": 4}
    saga = memory(empty, "paper-2")
    assert saga.links == ["paper-memory-1"]  # links follow the id that had to change
    assert saga.domain == "transactions"  # the memory's own `domain`
    assert first.domain == "paper-memories"  # else the file name


def test_red_queen_examination_becomes_queries(empty):
    report = import_path(empty, DATA / "palace-json")
    lines = [json.loads(line) for line in (empty.root / "queries.jsonl").read_text().splitlines()]
    assert lines == [{"qid": "exam-1", "query": "How do the accountant's diary and its chapters keep data safe after a crash?",
                      "expected": ["st-001", "st-002"], "kind": "red-queen"}]
    assert any("zz-999" in w for w in report.warnings) and report.queries == 1


def test_reimport_adds_nothing_and_touches_nothing(empty):
    import_path(empty, DATA / "palace-json")
    before = notes_on_disk(empty)
    stamps = {p: (empty.root / p).stat().st_mtime_ns for p in before}
    config = (empty.root / "palace.toml").read_text()
    again = import_path(empty, DATA / "palace-json")
    assert (again.added, again.updated, again.conflicts) == ([], [], [])
    assert len(again.skipped) == 5
    assert notes_on_disk(empty) == before
    assert {p: (empty.root / p).stat().st_mtime_ns for p in before} == stamps
    assert (empty.root / "palace.toml").read_text() == config


def test_changed_source_updates_an_untouched_note_and_keeps_its_token(empty, tmp_path):
    source = tmp_path / "src"
    shutil.copytree(DATA / "palace-json", source)
    import_path(empty, source)
    token = memory(empty, "st-001").verify
    data = json.loads((source / "citadel.json").read_text())
    data["loci"][1]["memories"][0]["content"] = "Log first, apply second; replay the log after a crash."
    (source / "citadel.json").write_text(json.dumps(data))
    report = import_path(empty, source)
    assert report.updated == ["st-001"] and not report.conflicts
    wal = memory(empty, "st-001")
    assert wal.content == "Log first, apply second; replay the log after a crash."
    assert wal.verify == token
    assert import_path(empty, source).updated == []  # and the update itself is stable


def test_changed_source_never_overwrites_an_edited_note(empty, tmp_path):
    source = tmp_path / "src"
    shutil.copytree(DATA / "palace-json", source)
    import_path(empty, source)
    note = empty.root / "memories/storage-cellar/st-002.md"
    update_frontmatter(note, {"anchor": "the bookbinder's scissors"})
    edited = note.read_bytes()
    data = json.loads((source / "citadel.json").read_text())
    data["loci"][1]["memories"][1]["subject"] = "Log Segments"
    (source / "citadel.json").write_text(json.dumps(data))
    report = import_path(empty, source)
    assert [c.id for c in report.conflicts] == ["st-002"]
    assert "edited in the palace" in report.conflicts[0].reason
    assert note.read_bytes() == edited


def test_an_id_taken_by_a_note_of_the_users_is_a_conflict(empty):
    add_memory(empty, "My own heartbeat note", "mine", content="Written by hand.", note_id="nt-001")
    report = import_path(empty, DATA / "palace-json" / "citadel.json")
    assert [(c.id, c.path) for c in report.conflicts] == [("nt-001", "memories/mine/nt-001.md")]
    assert "was not imported" in report.conflicts[0].reason
    assert memory(empty, "nt-001").subject == "My own heartbeat note"
    assert sorted(report.added) == ["st-001", "st-002"]


@pytest.mark.parametrize("name, message", [
    ("cloud.json", 'cloud.json: loci[2].memories[1]: missing "subject"'),
    ("duplicate-id.json", "duplicate-id.json: [1]: id 'a' is also used by duplicate-id.json: [0]"),
    ("wrong-type.json", 'wrong-type.json: memory (id "x"): "image" must be a string'),
    ("not-a-palace.json", "not-a-palace.json: not a memory-palace file"),
    ("syntax.json", "syntax.json:3: not valid JSON: Expecting ',' delimiter"),
])
def test_malformed_json_names_the_file_and_record_and_writes_nothing(empty, name, message):
    config = (empty.root / "palace.toml").read_text()
    with pytest.raises(ImportFailed) as caught:
        import_path(empty, DATA / "bad" / name, format="memory-palace-json")
    assert str(caught.value).startswith(message)
    assert notes_on_disk(empty) == {}
    assert (empty.root / "palace.toml").read_text() == config


def test_one_bad_file_in_a_directory_stops_the_whole_import(empty):
    with pytest.raises(ImportFailed, match=r'cloud\.json: loci\[2\]\.memories\[1\]: missing "subject"'):
        import_path(empty, DATA / "bad-dir")
    assert notes_on_disk(empty) == {}
    assert not (empty.root / "queries.jsonl").exists()


@pytest.mark.parametrize("image, anchor", [
    ("A PARANOID ACCOUNTANT who writes EVERY sale down.", "paranoid accountant"),
    ("A STAMPEDE of BUFFALO crashes through the door!", "stampede of buffalo"),
    ("A PARKING LOT with PERMANENT PAINTED LINES! 100 spaces.", "parking lot"),
    ("A game of TELEPHONE played by LAZY MONKS.", "lazy monks"),
    ("The old king DIED but his ghost lingers.", "died"),
    ("no capitals anywhere in this scene", ""),
])
def test_derive_anchor(image, anchor):
    assert derive_anchor(image) == anchor


# ---- Markdown ------------------------------------------------------------------------------------


def test_markdown_folder(empty):
    report = import_path(empty, DATA / "markdown")
    assert sorted(report.added) == ["bisect", "bloom-filter", "dns-resolution", "rebase-onto", "reflog",
                                    "tcp-handshake"]
    assert report.warnings == ["empty.md: empty file; nothing imported"]
    tcp = memory(empty, "tcp-handshake")
    assert (tcp.subject, tcp.domain, tcp.keywords) == ("TCP three-way handshake", "networking", ["tcp", "networking"])
    assert tcp.meta["source"] == {"author": "Ada"}
    # the file's own `##` heading stays inside the content (pushed down a level); fenced lines are not headings
    assert "### Why three messages" in tcp.content and "## not a heading" in tcp.content
    dns = memory(empty, "dns-resolution")
    assert (dns.subject, dns.domain) == ("Dns resolution", "networking-deep")
    assert dns.content.startswith("A resolver asks a root server")
    # a file of `##` sections only is a memory per section
    reflog = memory(empty, "reflog")
    assert (reflog.subject, reflog.domain) == ("Reflog", "markdown")
    assert reflog.content.startswith("`git reflog` lists where HEAD has been")
    # a note already in palace format keeps its body byte for byte
    source = (DATA / "markdown" / "palace-note.md").read_text()
    bloom = memory(empty, "bloom-filter")
    assert source.split("---\n", 2)[2] == bloom.body
    assert (bloom.verify, bloom.anchor) == ("nine hundred lightbulbs", "hotel of lightbulbs")


def test_markdown_split_and_domain_options(empty):
    report = import_path(empty, DATA / "markdown" / "git-cheatsheet.md", split="file", domain="Tools")
    assert report.added == ["git-cheatsheet"]
    sheet = memory(empty, "git-cheatsheet")
    assert (sheet.subject, sheet.domain) == ("Git cheatsheet", "tools")
    assert "### Reflog" in sheet.content and "### Bisect" in sheet.content
    assert import_path(empty, DATA / "markdown" / "git-cheatsheet.md", split="file", domain="Tools").skipped == [
        "git-cheatsheet"]


def test_markdown_with_broken_frontmatter_writes_nothing(empty):
    with pytest.raises(ImportFailed, match=r"broken\.md:\d+: frontmatter is not valid YAML"):
        import_path(empty, DATA / "bad-markdown")
    assert notes_on_disk(empty) == {}


def test_markdown_alias_bomb_is_refused_by_the_importer_too(empty, tmp_path, alias_bomb):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "bomb.md").write_bytes(alias_bomb)
    with pytest.raises(ImportFailed, match=r"bomb\.md:8: frontmatter is refused: .*alias bomb"):
        import_path(empty, tmp_path / "src")
    assert notes_on_disk(empty) == {}


def test_a_record_over_the_note_size_limit_is_a_conflict_and_is_not_written(empty, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "small.md").write_text("# Small\n\nA small note.\n")
    (tmp_path / "src" / "huge.md").write_text("# Huge\n\n" + "word " * 250_000 + "\n")
    report = import_path(empty, tmp_path / "src")
    assert report.added == ["small"] and report.domains == {"src": 1}
    assert [(c.id, c.path) for c in report.conflicts] == [("huge", "memories/src/huge.md")]
    assert "over the 1,000,000 byte limit" in report.conflicts[0].reason
    assert list(notes_on_disk(empty)) == ["memories/src/small.md"]


# ---- BEIR ----------------------------------------------------------------------------------------


def test_beir_clusters_into_named_domains_and_writes_queries(empty):
    report = import_path(empty, DATA / "beir", clusters=2)
    assert len(report.added) == 12
    bread = {memory(empty, i).domain for i in ("d1", "d2", "med-10", "d4", "d5", "d6")}
    stars = {memory(empty, i).domain for i in ("s1", "s2", "a-b-7", "s4", "s5", "s6")}
    assert len(bread) == 1 and len(stars) == 1 and bread != stars  # two topics, two pure clusters
    assert bread == {"dough-bread"} and stars == {"core-star"}
    assert report.clustering["method"] == "tfidf" and report.clustering["k"] == 2
    med = memory(empty, "med-10")
    assert med.meta["source_id"] == "MED-10" and med.meta["source"] == {"source": "kitchen notes"}
    assert (med.subject, med.image, med.verify) == ("Oven temperature for bread", "", "")
    assert "## Image" not in med.body  # no placeholder scene in the text that gets indexed
    queries = [json.loads(line) for line in (empty.root / "queries.jsonl").read_text().splitlines()]
    assert queries == [
        {"qid": "beir-q1", "query": "How hot should the oven be to bake bread?", "expected": ["med-10", "d1"],
         "kind": "beir"},
        {"qid": "beir-q2", "query": "What is left after a massive star explodes?", "expected": ["s2", "s5"],
         "kind": "beir"},
    ]
    assert "documents about dough, bread" in empty.config.domains["dough-bread"].description


def test_beir_reimport_skips_without_clustering_and_keeps_domains(empty, tmp_path):
    import_path(empty, DATA / "beir", clusters=2)
    before = notes_on_disk(empty)
    again = import_path(empty, DATA / "beir", clusters=3)  # a different k would move notes if it were used
    assert len(again.skipped) == 12 and again.clustering is None
    assert notes_on_disk(empty) == before


def test_beir_dry_run_writes_nothing(empty):
    report = import_path(empty, DATA / "beir", clusters=2, dry_run=True)
    assert len(report.added) == 12 and sum(report.domains.values()) == 12
    assert notes_on_disk(empty) == {} and not (empty.root / "queries.jsonl").exists()


def test_beir_queries_path_option(empty, tmp_path):
    target = tmp_path / "bench" / "q.jsonl"
    import_path(empty, DATA / "beir", clusters=2, queries=target)
    assert len(target.read_text().splitlines()) == 2 and not (empty.root / "queries.jsonl").exists()


@pytest.mark.parametrize("case, message", [
    ("missing-id", 'corpus.jsonl:3: missing "_id"'),
    ("unknown-doc", 'qrels/test.tsv:2: corpus-id "nope" is not in corpus.jsonl'),
])
def test_malformed_beir_writes_nothing(empty, tmp_path, case, message):
    source = tmp_path / "beir"
    if case == "missing-id":
        shutil.copytree(DATA / "bad-beir", source)
    else:
        shutil.copytree(DATA / "beir", source)
        (source / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tnope\t1\n")
    with pytest.raises(ImportFailed) as caught:
        import_path(empty, source)
    assert str(caught.value).startswith(message)
    assert notes_on_disk(empty) == {}


# ---- clustering --------------------------------------------------------------------------------


@pytest.mark.parametrize("n, k", [(1, 1), (7, 1), (8, 2), (200, 10), (5183, 51), (100_000, 64)])
def test_choose_k(n, k):
    assert choose_k(n) == k


def test_sparse_kmeans_matches_dense_kmeans():
    texts = [json.loads(line)["text"] for line in (DATA / "beir" / "corpus.jsonl").read_text().splitlines()]
    vectors = tfidf(texts)
    dense = np.stack([vectors.matrix.dense_row(i) for i in range(len(texts))])
    sparse_labels, _, _ = spherical_kmeans(vectors.matrix, 3, seed=5)
    dense_labels, _, _ = spherical_kmeans(dense, 3, seed=5)
    assert sparse_labels.tolist() == dense_labels.tolist()
    assert len(set(sparse_labels.tolist())) == 3
    names, _ = name_clusters(vectors, sparse_labels, 3)
    assert len(set(names)) == 3


def test_cluster_is_deterministic():
    texts = [json.loads(line)["text"] for line in (DATA / "beir" / "corpus.jsonl").read_text().splitlines()]
    first, second = cluster(texts, k=3), cluster(texts, k=3)
    assert first.labels.tolist() == second.labels.tolist() and first.names == second.names


def test_beir_clusters_with_the_embedder_and_reuses_its_vectors(empty, with_models):

    report = import_path(empty, DATA / "beir", clusters=2, cluster_with="embedder")
    assert report.clustering["method"].startswith("all-MiniLM-L6-v2")
    bread = {memory(empty, i).domain for i in ("d1", "d2", "med-10", "d4", "d5", "d6")}
    stars = {memory(empty, i).domain for i in ("s1", "s2", "a-b-7", "s4", "s5", "s6")}
    assert len(bread) == 1 and len(stars) == 1 and bread != stars
    assert report.refresh.dense == "on"
    model_id, keys, _ = empty.index.vectors.load()
    assert model_id == report.clustering["method"] and len(keys) == 12


# ---- CLI -----------------------------------------------------------------------------------------


def test_cli_import_json_and_exit_codes(empty):
    runner = CliRunner()
    args = ["--palace", str(empty.root), "import", str(DATA / "palace-json"), "--json"]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["counts"] == {"added": 5, "updated": 0, "skipped": 0, "conflicts": 0}
    again = runner.invoke(cli, ["--palace", str(empty.root), "import", str(DATA / "palace-json")])
    assert again.exit_code == 0 and "0 added, 0 updated, 5 skipped" in again.stdout
    bad = runner.invoke(cli, ["--palace", str(empty.root), "import", str(DATA / "bad" / "cloud.json")])
    assert bad.exit_code == 1
    assert 'cloud.json: loci[2].memories[1]: missing "subject"' in bad.stderr


def test_cli_conflict_exits_1(empty):
    add_memory(empty, "Mine", "mine", content="x", note_id="st-001")
    result = CliRunner().invoke(cli, ["--palace", str(empty.root), "import", str(DATA / "palace-json" / "citadel.json")])
    assert result.exit_code == 1
    assert "conflict: st-001: memories/mine/st-001.md" in result.stdout


# ---- real data (../shared) ---------------------------------------------------------------------


@pytest.mark.skipif(not SKILL.is_dir(), reason=f"{SKILL} is absent (the shared data is not in a user's clone)")
def test_memory_palace_skill_palaces(empty):
    report = import_path(empty, SKILL)
    assert len(report.added) == 93 and len(report.domains) == 22 and report.queries == 5
    memories = empty.scan().memories
    with_images = [m for m in memories.values() if m.image]
    assert len(with_images) == 93
    assert all(m.verify and contains_phrase(m.image, m.verify) for m in with_images)
    assert len({m.verify.lower() for m in with_images}) == 93
    assert memories["sd-031"].anchor == "wedding ceremony"
    assert len(import_path(empty, SKILL).skipped) == 93


@pytest.mark.skipif(not (SCIFACT / "corpus.jsonl").is_file(), reason=f"{SCIFACT} is absent (shared data)")
def test_scifact_reads_whole_and_its_queries_point_at_its_documents():
    batch = read(SCIFACT, "beir", {})
    assert len(batch.records) == 5183 and len(batch.queries) == 300
    ids = {r.id for r in batch.records}
    assert all(set(q["expected"]) <= ids for q in batch.queries)
    assert sum(len(q["expected"]) for q in batch.queries) == 339
