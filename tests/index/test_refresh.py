"""Incremental refresh against a real whoosh index on disk: every change a person makes, and the repairs."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import copy_palace
from palace_cli.index.files import check_index_files
from palace_cli.core.disk import atomic_write
from palace_cli.palace import Palace


def lexical_docs(palace: Palace) -> dict[str, tuple[str, str]]:
    """path -> (id, domain) for every document the whoosh index holds."""
    with palace.index.text.open().searcher() as searcher:
        return {d["path"]: (d["id"], d["domain_key"]) for d in searcher.all_stored_fields()}


def hits(palace: Palace, query: str, **kw) -> list[str]:
    return [note_id for note_id, _ in palace.index.text.search(query, limit=10, **kw)]


def note(note_id: str, subject: str, content: str, anchor: str = "a brass lantern", verify: str = "") -> str:
    verify = verify or f"{note_id.replace('-', ' ')} glowing kettle"
    return (f"---\nid: {note_id}\nsubject: {subject}\nanchor: {anchor}\nkeywords: [{note_id}]\nverify: {verify}\n---\n"
            f"# {subject}\n\n## Image\nA scene with the {verify} in it.\n\n## Content\n{content}\n")


def write(palace: Palace, relpath: str, text: str) -> Path:
    path = palace.root / relpath
    atomic_write(path, text)
    return path


def fresh_state(palace: Palace) -> dict:
    """What a from-scratch build of a copy of the palace holds: the reference for incremental results."""
    copy = palace.root.parent / f"reference-{random.random():.8f}"
    shutil.copytree(palace.root, copy, ignore=shutil.ignore_patterns(".palace", ".git"))
    reference = Palace(copy)
    report = reference.refresh(embedder=None)
    files = {p.relative_to(copy).as_posix(): p.read_text() for p in [copy / "INDEX.md", *sorted((copy / "index").glob("*.md"))]}
    state = {"docs": lexical_docs(reference), "files": files, "problems": [str(p) for p in report.problems]}
    shutil.rmtree(copy)
    return state


def state_of(palace: Palace, report) -> dict:
    root = palace.root
    files = {p.relative_to(root).as_posix(): p.read_text() for p in [root / "INDEX.md", *sorted((root / "index").glob("*.md"))]}
    return {"docs": lexical_docs(palace), "files": files, "problems": [str(p) for p in report.problems]}


# ---- the basic cycle -------------------------------------------------------------------------


def test_first_refresh_indexes_everything_and_second_does_nothing(palace, parse_notes):
    first = palace.refresh(embedder=None)
    assert len(first.added) == 89 and first.rebuilt_lexical
    assert len(lexical_docs(palace)) == 89
    assert hits(palace, "frozen wedding statues coordinator")[0] == "two-phase-commit"
    assert check_index_files(palace.site, parse_notes(palace)) == []
    second = palace.refresh(embedder=None)
    assert (second.added, second.updated, second.removed, second.index_files) == ([], [], [], [])
    assert second.unchanged == 89 and not second.rebuilt_lexical
    assert palace.stale() == []


@pytest.mark.slow
def test_add_edit_rename_move_delete(palace):
    palace.refresh(embedder=None)
    # add
    write(palace, "memories/storage-engines/zebra-index.md",
          note("zebra-index", "Zebra Index", "Quagga patterns alternate in this index."))
    report = palace.refresh(embedder=None)
    assert report.added == ["memories/storage-engines/zebra-index.md"] and not report.rebuilt_lexical
    assert hits(palace, "quagga") == ["zebra-index"]
    assert "index/storage-engines.md" in report.index_files and "INDEX.md" in report.index_files
    assert "zebra-index" in (palace.root / "index/storage-engines.md").read_text()
    # edit: the new word is found, the old one is gone
    write(palace, "memories/storage-engines/zebra-index.md",
          note("zebra-index", "Zebra Index", "Okapi markings replace the old pattern entirely."))
    report = palace.refresh(embedder=None)
    assert report.updated == ["memories/storage-engines/zebra-index.md"]
    assert hits(palace, "okapi") == ["zebra-index"] and hits(palace, "quagga") == []
    # rename inside the domain
    os.rename(palace.root / "memories/storage-engines/zebra-index.md", palace.root / "memories/storage-engines/okapi.md")
    report = palace.refresh(embedder=None)
    assert report.added == ["memories/storage-engines/okapi.md"]
    assert report.removed == ["memories/storage-engines/zebra-index.md"]
    assert lexical_docs(palace)["memories/storage-engines/okapi.md"] == ("zebra-index", "storage-engines")
    assert "memories/storage-engines/zebra-index.md" not in lexical_docs(palace)
    assert "storage-engines/okapi.md" in (palace.root / "index/storage-engines.md").read_text()
    # move to another domain: the folder is the domain
    os.rename(palace.root / "memories/storage-engines/okapi.md", palace.root / "memories/caching-performance/okapi.md")
    report = palace.refresh(embedder=None)
    assert set(report.index_files) == {"INDEX.md", "index/storage-engines.md", "index/caching-performance.md"}
    assert hits(palace, "okapi", domains=["caching-performance"]) == ["zebra-index"]
    assert hits(palace, "okapi", domains=["storage-engines"]) == []
    assert "zebra-index" not in (palace.root / "index/storage-engines.md").read_text()
    # delete
    (palace.root / "memories/caching-performance/okapi.md").unlink()
    report = palace.refresh(embedder=None)
    assert report.removed == ["memories/caching-performance/okapi.md"]
    assert hits(palace, "okapi") == [] and len(lexical_docs(palace)) == 89
    assert "zebra-index" not in (palace.root / "INDEX.md").read_text()
    assert palace.stale() == [] and state_of(palace, report) == fresh_state(palace)


def test_broken_note_is_reported_with_its_line_and_indexed_once_fixed(palace):
    palace.refresh(embedder=None)
    path = write(palace, "memories/storage-engines/broken.md",
                 "---\nid: broken\nsubject: [unclosed\nanchor: x\n---\n# Broken\n")
    report = palace.refresh(embedder=None)
    [problem] = report.problems
    assert problem.path == "memories/storage-engines/broken.md" and 3 <= problem.line <= 4  # inside the frontmatter
    assert problem.code == "unreadable-note" and "YAML" in problem.message
    assert len(lexical_docs(palace)) == 89
    # the report repeats on a no-op refresh: never silently dropped
    assert [p.path for p in palace.refresh(embedder=None).problems] == ["memories/storage-engines/broken.md"]
    atomic_write(path, note("broken", "Fixed Now", "Mended with lacquer and gold: kintsugi."))
    report = palace.refresh(embedder=None)
    assert report.problems == [] and report.updated == ["memories/storage-engines/broken.md"]
    assert hits(palace, "kintsugi") == ["broken"]


def test_unreadable_bytes_and_empty_files_are_problems_not_crashes(palace):
    palace.refresh(embedder=None)
    (palace.root / "memories/storage-engines/latin1.md").write_bytes(b"---\nid: x\nsubject: caf\xe9\n---\n")
    (palace.root / "memories/storage-engines/empty.md").write_bytes(b"")
    report = palace.refresh(embedder=None)
    assert {p.path.rsplit("/", 1)[1]: p.code for p in report.problems} == {"empty.md": "unreadable-note",
                                                                          "latin1.md": "unreadable-note"}
    assert len(lexical_docs(palace)) == 89


@pytest.mark.slow
def test_duplicate_id_keeps_first_path_and_hands_over_when_it_goes(palace):
    palace.refresh(embedder=None)
    write(palace, "memories/storage-engines/aaa-copy.md", note("two-phase-commit", "Impostor", "Impostor quokka text."))
    report = palace.refresh(embedder=None)
    assert [p.code for p in report.problems] == ["duplicate-id"]
    assert report.problems[0].path == "memories/storage-engines/aaa-copy.md"
    assert hits(palace, "quokka") == []
    original = next(p for p, (i, _) in lexical_docs(palace).items() if i == "two-phase-commit")
    (palace.root / original).unlink()
    report = palace.refresh(embedder=None)
    assert report.problems == [] and not report.rebuilt_lexical
    assert hits(palace, "quokka") == ["two-phase-commit"]
    assert state_of(palace, report) == fresh_state(palace)


def test_touch_and_identical_rewrite_change_nothing(palace):
    palace.refresh(embedder=None)
    path = palace.root / "memories/storage-engines/b-tree.md"
    os.utime(path, ns=(1, 1))
    atomic_write(palace.root / "memories/storage-engines/lsm-tree.md",
                 (palace.root / "memories/storage-engines/lsm-tree.md").read_text())
    version = palace.index.store.version()
    report = palace.refresh(embedder=None)
    assert (report.added, report.updated, report.index_files) == ([], [], [])
    assert palace.index.store.version() == version
    assert palace.stale() == []


def test_config_change_and_hand_edits_regenerate_index_files(palace, parse_notes):
    palace.refresh(embedder=None)
    toml = palace.root / "palace.toml"
    toml.write_text(toml.read_text().replace("How nodes agree", "How nodes come to agree"))
    palace.config = Palace(palace.root).config
    report = palace.refresh(embedder=None)
    assert report.index_files == ["INDEX.md", "index/consensus-coordination.md"]
    (palace.root / "INDEX.md").write_text("scribbled over\n")
    assert palace.stale() == ["INDEX.md: generated index file out of date"]
    assert palace.refresh(embedder=None).index_files == ["INDEX.md"]
    assert check_index_files(palace.site, parse_notes(palace)) == []


@pytest.mark.slow
def test_deleted_caches_are_rebuilt(palace):
    palace.refresh(embedder=None)
    shutil.rmtree(palace.cache_dir / "whoosh")
    report = palace.refresh(embedder=None)
    assert report.rebuilt_lexical and len(lexical_docs(palace)) == 89
    fresh = Palace(palace.root)
    shutil.rmtree(palace.cache_dir)
    report = fresh.refresh(embedder=None)
    assert len(report.added) == 89 and hits(fresh, "frozen wedding statues coordinator")[0] == "two-phase-commit"


@pytest.mark.slow
def test_rebuild_flag_starts_over(palace):
    palace.refresh(embedder=None)
    report = palace.refresh(embedder=None, rebuild=True)
    assert len(report.added) == 89 and report.rebuilt_lexical and len(lexical_docs(palace)) == 89


def test_unindexed_and_stale_list_every_kind_of_change_without_changing_anything(palace):
    palace.refresh(embedder=None)
    write(palace, "memories/storage-engines/new.md", note("new-one", "New One", "Fresh."))
    atomic_write(palace.root / "memories/storage-engines/b-tree.md",
                 (palace.root / "memories/storage-engines/b-tree.md").read_text() + "\nMore.\n")
    (palace.root / "memories/storage-engines/lsm-tree.md").unlink()
    items = palace.unindexed()
    assert "memories/storage-engines/new.md: not indexed" in items
    assert "memories/storage-engines/b-tree.md: changed since indexed" in items
    assert "memories/storage-engines/lsm-tree.md: deleted but still indexed" in items
    assert palace.stale() == ["INDEX.md: generated index file out of date",
                             "index/storage-engines.md: generated index file out of date"]
    assert palace.unindexed() == items  # nothing was changed by looking
    palace.refresh(embedder=None)
    assert palace.stale() == [] and palace.unindexed() == []


def test_stale_without_a_cache_checks_only_the_generated_files(example_palace):
    palace = Palace(example_palace)
    assert palace.stale() == []  # a fresh clone whose committed index files are right
    write(palace, "memories/storage-engines/new.md", note("new-one", "New One", "Fresh."))
    assert Palace(example_palace).stale() == ["INDEX.md: generated index file out of date",
                                             "index/storage-engines.md: generated index file out of date"]


def test_cached_scan_matches_a_direct_parse(readonly_palace, parse_notes):
    from palace_cli.core.names import Names

    cached = readonly_palace.scan()
    direct = parse_notes(readonly_palace).memories
    assert cached.memories.keys() == direct.keys()
    names = Names(direct.values())
    for note_id, memory in direct.items():
        memory.link_ids = names.link_ids(memory)  # a scan resolves links; parsing one note cannot
        # JSON has no dates: the cache holds frontmatter dates as ISO strings (Memory.created already is one)
        memory.meta = {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in memory.meta.items()}
        assert cached.memories[note_id] == memory
    light = readonly_palace.scan(light=True)
    assert {m.id: (m.subject, m.anchor, m.keywords, m.line) for m in light.memories.values()} == \
           {m.id: (m.subject, m.anchor, m.keywords, m.line) for m in direct.values()}


def test_a_light_scan_after_an_edit_is_a_fresh_one_and_keeps_the_unchanged_memories(small_palace):
    palace = Palace(small_palace)
    palace.refresh(embedder=None)
    before = palace.scan(light=True).memories
    path = palace.root / before["bloom-filter"].path
    path.write_text(path.read_text().replace("subject: ", "subject: Edited ", 1))
    (palace.root / before["saga"].path).unlink()
    palace.refresh(embedder=None)
    after = palace.scan(light=True).memories
    fresh = Palace(palace.root).scan(light=True).memories  # another process: nothing to reuse
    assert after == fresh and "saga" not in after and after["bloom-filter"].subject.startswith("Edited ")
    assert all(after[i] is before[i] for i in after if i != "bloom-filter")  # not decoded again
    assert after["bloom-filter"] is not before["bloom-filter"]


def test_a_new_domain_folder_and_a_vanished_domain(small_palace, parse_notes):
    palace = Palace(small_palace)
    palace.refresh(embedder=None)
    write(palace, "memories/brand-new/thing.md", note("thing", "Thing", "Platypus content."))
    report = palace.refresh(embedder=None)
    assert "index/brand-new.md" in report.index_files and hits(palace, "platypus") == ["thing"]
    shutil.rmtree(palace.root / "memories/brand-new")
    report = palace.refresh(embedder=None)
    assert "index/brand-new.md" in report.index_files and not (palace.root / "index/brand-new.md").exists()
    assert check_index_files(palace.site, parse_notes(palace)) == [] and hits(palace, "platypus") == []


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_change_sequences_match_a_fresh_build(tmp_path, seed):
    """Many small refreshes after random adds, edits, renames, moves, deletes, breakages and duplicates
    leave exactly what a build from nothing would."""
    from conftest import EXAMPLE

    palace = Palace(copy_palace(EXAMPLE, tmp_path / "p", git=False))
    rng = random.Random(seed)
    palace.refresh(embedder=None)
    domains = sorted(p.name for p in palace.memories_dir.iterdir())
    for step in range(25):
        files = sorted(palace.memories_dir.rglob("*.md"))
        op = rng.choice(["add", "edit", "rename", "move", "delete", "break", "duplicate", "touch"])
        target = rng.choice(files)
        if op == "add":
            write(palace, f"memories/{rng.choice(domains)}/n{step}.md", note(f"n{step}", f"Note {step}", f"word{step} here"))
        elif op == "edit":
            atomic_write(target, target.read_text().replace("## Content\n", f"## Content\nedited{step} "))
        elif op == "rename":
            target.rename(target.with_name(f"renamed-{step}.md"))
        elif op == "move":
            target.rename(palace.memories_dir / rng.choice(domains) / f"moved-{step}.md")
        elif op == "delete":
            target.unlink()
        elif op == "break":
            atomic_write(target, "---\nid: [\n---\n")
        elif op == "duplicate":
            shutil.copy(target, target.with_name(f"0dup-{step}.md"))
        else:
            os.utime(target)
        if rng.random() < 0.6:
            report = palace.refresh(embedder=None)
    report = palace.refresh(embedder=None)
    assert state_of(palace, report) == fresh_state(palace)
    assert palace.stale() == []


# ---- vectors ---------------------------------------------------------------------------------


class CountingEmbedder:
    """The real embedder, counting the texts it is asked to embed."""

    def __init__(self, inner):
        self.inner, self.model_id, self.dim, self.texts = inner, inner.model_id, inner.dim, 0

    def embed_batch(self, texts):
        self.texts += len(texts)
        return self.inner.embed_batch(texts)


def test_vectors_embed_only_what_changed(small_palace, real_embedder):  # noqa: F811
    palace = Palace(small_palace)
    counting = CountingEmbedder(real_embedder)
    report = palace.refresh(embedder=counting)
    assert report.dense == "on" and counting.texts == 3 and report.vectors.embedded == 3
    model_id, keys, matrix = palace.index.vectors.load()
    assert model_id == real_embedder.model_id and matrix.shape == (3, real_embedder.dim)
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-3)
    palace.refresh(embedder=counting)
    assert counting.texts == 3  # no-op
    # a rename and a frontmatter-only change keep their vectors
    os.rename(palace.root / "memories/storage/bloom-filter.md", palace.root / "memories/distributed/bloom-filter.md")
    from palace_cli.core.noteedit import update_frontmatter

    update_frontmatter(palace.root / "memories/distributed/saga.md", {"created": "2020-01-01"})
    report = palace.refresh(embedder=counting)
    assert counting.texts == 3 and report.changed
    # an edit embeds one text, a delete drops one vector
    path = palace.root / "memories/distributed/saga.md"
    atomic_write(path, path.read_text().replace("compensating action", "compensating step"))
    (palace.root / "memories/distributed/two-phase-commit.md").unlink()
    report = palace.refresh(embedder=counting)
    assert counting.texts == 4 and report.vectors.embedded == 1 and report.vectors.dropped == 2
    assert palace.index.vectors.load()[2].shape[0] == 2
    # deleting the vector files is repaired
    shutil.rmtree(palace.cache_dir / "vectors")
    palace.refresh(embedder=counting)
    assert counting.texts == 6 and palace.index.vectors.load()[2].shape[0] == 2


@pytest.mark.slow
def test_a_damaged_lexical_index_is_rebuilt(palace):
    palace.refresh(embedder=None)
    for toc in (palace.cache_dir / "whoosh").glob("_MAIN_*.toc"):
        toc.write_bytes(b"garbage")
    fresh = Palace(palace.root)
    report = fresh.refresh(embedder=None)
    assert report.rebuilt_lexical and hits(fresh, "frozen wedding statues coordinator")[0] == "two-phase-commit"
    for segment in (palace.cache_dir / "whoosh").glob("*.seg"):
        segment.write_bytes(segment.read_bytes()[:100])  # the table of contents still looks fine
    damaged = Palace(palace.root)
    damaged.refresh(embedder=None)
    from palace_cli.errors import PalaceError

    with pytest.raises(PalaceError, match="damaged"):
        hits(damaged, "frozen wedding statues coordinator")
    report = damaged.refresh(embedder=None)
    assert report.rebuilt_lexical and hits(damaged, "frozen wedding statues coordinator")[0] == "two-phase-commit"


def test_configured_embedder_is_loaded_only_when_a_vector_is_missing(small_palace, with_models):  # noqa: F811
    first = Palace(small_palace)
    report = first.refresh()
    assert report.dense == "on" and report.vectors.embedded == 3
    again = Palace(small_palace)
    report = again.refresh()
    assert report.dense == "on" and report.vectors is None
    assert again.index._dense is None  # the model was not loaded for a no-op
    path = small_palace / "memories/storage/bloom-filter.md"
    atomic_write(path, path.read_text().replace("tunable false positives", "tunable false alarms"))
    report = again.refresh()
    assert report.vectors.embedded == 1 and again.index._dense is not None


def test_vectors_made_with_another_cut_are_embedded_again(small_palace, with_models):  # noqa: F811
    """Vectors of a palace last refreshed when the default model cut texts at 512 tokens are remade, once."""
    palace = Palace(small_palace)
    report = palace.refresh()
    store, vectors = palace.index.store, palace.index.vectors
    model_id, keys, matrix = vectors.load()
    assert report.vectors.embedded == 3 and model_id.endswith(":256")
    # what the previous release recorded: a key of the file alone, and an id without the cut
    state = store.get_meta("vectors_state")
    legacy_key = state.split(":max_tokens=256")[0].split(":", 1)[1]
    assert state != f"{store.version()}:{legacy_key}:{vectors.generation()}"
    vectors._write(model_id.rsplit(":", 1)[0], list(keys), np.asarray(matrix))
    with store.transaction():
        store.set_meta("vectors_state", f"{store.version()}:{legacy_key}:{vectors.generation()}")
    report = Palace(small_palace).refresh()
    assert report.vectors.embedded == 3 and report.vectors.model_changed_from == model_id.rsplit(":", 1)[0]
    assert vectors.model_id() == model_id
    assert Palace(small_palace).refresh().vectors is None  # and then it is up to date
