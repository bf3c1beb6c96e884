"""The numpy scorer over whoosh's postings (postings.py) ranks and scores exactly as whoosh's array matcher,
after incremental updates (several segments, deleted documents), within scopes and exclusions, with a
posting cache too small to hold a query; the kept searcher sees every commit."""

from __future__ import annotations

import random

import pytest

from palace_cli.bench.synth import edit_note, generate_palace
from palace_cli.index import text as text_module
from palace_cli.index.postings import PostingCache
from palace_cli.index.scope import Scope
from palace_cli.palace import Palace


@pytest.fixture(scope="module")
def updated(tmp_path_factory):
    """A 300-note generated palace after two rounds of edits and a deletion: three segments, deletions kept."""
    root = generate_palace(tmp_path_factory.mktemp("postings") / "p", 300, seed=3, embedder="off")
    palace = Palace(root)
    palace.refresh(embedder=None)
    files = sorted(root.rglob("memories/*/*.md"))
    for generation in (1, 2):
        for path in files[generation * 10 : generation * 10 + 6]:
            edit_note(path, generation, seed=3)
        files[generation].unlink()
        palace.refresh(embedder=None)
    with palace.index.text.open().searcher() as searcher:
        assert len(searcher.reader().leaf_readers()) > 1
        assert searcher.doc_count_all() > searcher.doc_count()
    return palace


def queries(palace: Palace, count: int, seed: int) -> list[str]:
    """Queries of 1 to 20 words drawn from random notes (the benchmark's kind), and a few misses."""
    rng = random.Random(seed)
    files = sorted(palace.memories_dir.rglob("*.md"))
    made = ["nosuchwordanywhere", "the of and", "Cache cache CACHE eviction"]
    for path in rng.sample(files, count):
        words = [w for w in path.read_text().split() if w.isalpha() and len(w) > 3]
        made.append(" ".join(rng.sample(words, min(rng.choice((1, 2, 5, 10, 20)), len(words)))))
    return made


def both(monkeypatch, palace: Palace, query: str, **options):
    """(whoosh's ranking, the numpy ranking) of one search."""
    monkeypatch.setattr(text_module, "_scan_wanted", lambda documents: False)
    whoosh = palace.index.text.search(query, **options)
    monkeypatch.setattr(text_module, "_scan_wanted", lambda documents: True)
    return whoosh, palace.index.text.search(query, **options)


@pytest.mark.slow
def test_the_numpy_scorer_equals_whooshs_array_matcher(updated, monkeypatch):
    domain = sorted(updated.index.catalog().domain_rows)[1]
    left_out = sorted(updated.index.catalog().ids)[::7]
    compared = 0
    for query in queries(updated, 40, seed=1):
        for options in ({"limit": 10}, {"limit": 1}, {"limit": 60},
                        {"limit": 10, "scope": Scope(kind="memory", domains=(domain,))},
                        {"limit": 10, "exclude": left_out}, {"limit": 5, "only": left_out[:20]}):
            whoosh, scanned = both(monkeypatch, updated, query, **options)
            assert [i for i, _ in scanned] == [i for i, _ in whoosh], (query, options)
            assert [s for _, s in scanned] == pytest.approx([s for _, s in whoosh], rel=1e-12, abs=1e-12)
            compared += bool(whoosh)
    assert compared > 150


def test_a_big_index_read_through_file_handles_ranks_the_same(updated, monkeypatch):
    monkeypatch.setattr(text_module, "MAP_MAX_BYTES", 0)
    unmapped = Palace(updated.root)
    assert not unmapped.index.text.open().storage.supports_mmap
    assert updated.index.text.open().storage.supports_mmap
    for query in queries(updated, 10, seed=4):
        for scan in (False, True):
            monkeypatch.setattr(text_module, "_scan_wanted", lambda documents, scan=scan: scan)
            assert unmapped.index.text.search(query) == updated.index.text.search(query), query


def test_a_cache_smaller_than_a_term_changes_nothing(updated, monkeypatch):
    text = updated.index.text
    monkeypatch.setattr(text, "_postings", PostingCache(capacity=40))
    for query in queries(updated, 10, seed=2):
        whoosh, scanned = both(monkeypatch, updated, query, limit=10)
        assert [i for i, _ in scanned] == [i for i, _ in whoosh]
        assert [s for _, s in scanned] == pytest.approx([s for _, s in whoosh], rel=1e-12, abs=1e-12)
        assert text._postings._size <= 40


def test_an_empty_index_finds_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(text_module, "_scan_wanted", lambda documents: True)
    root = generate_palace(tmp_path / "p", 1, seed=5, embedder="off")
    next(root.rglob("memories/*/*.md")).unlink()
    palace = Palace(root)
    palace.refresh(embedder=None)  # a build of nothing: whoosh's index has no segment at all
    assert palace.index.text.search("cache") == []


def test_the_kept_searcher_sees_commits_from_this_and_other_processes(tmp_path, monkeypatch):
    monkeypatch.setattr(text_module, "_scan_wanted", lambda documents: True)
    root = generate_palace(tmp_path / "p", 40, seed=5, embedder="off")
    palace = Palace(root)
    palace.refresh(embedder=None)
    assert palace.index.text.search("zyzzogeton") == []
    note = sorted(root.rglob("memories/*/*.md"))[3]
    note.write_text(note.read_text().replace("## Content\n", "## Content\nA zyzzogeton appears.\n", 1))
    other = Palace(root)  # another process's refresh: a commit this palace's kept searcher did not make
    other.refresh(embedder=None)
    assert [i for i, _ in palace.index.text.search("zyzzogeton")] == [note.stem]
    note.write_text(note.read_text().replace("A zyzzogeton appears.\n", "", 1))
    palace.refresh(embedder=None)  # a commit of its own
    assert palace.index.text.search("zyzzogeton") == []


def test_the_cache_counts_a_term_once_when_two_threads_load_it():
    import threading

    import numpy as np

    cache, started = PostingCache(capacity=10), threading.Barrier(2)

    def load():
        started.wait()  # both threads are past the first look-up before either stores
        return np.arange(4), np.ones(4)

    threads = [threading.Thread(target=cache.get, args=(("seg", "term"), load)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cache._size == 4 and len(cache._items) == 1
