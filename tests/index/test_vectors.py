"""The vector store: a base plus delta segments, compaction, the old layout, readers beside a writer, kills."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from palace_cli.index import vectors as vectors_module
from palace_cli.index.vectors import MAX_DELTAS, PIECES, VectorStore, pieces_digest

DIM = 16


class StandIn:
    """An embedder without a model: each text gets one fixed unit vector (a seeded draw), counted."""

    model_id = f"stand-in:{DIM}"
    dim = DIM

    def __init__(self):
        self.texts = 0

    def embed_batch(self, texts):
        self.texts += len(texts)
        return np.stack([vector_of(t) for t in texts])


def vector_of(text: str) -> np.ndarray:
    rng = np.random.default_rng(int(hashlib.sha256(text.encode()).hexdigest()[:15], 16))
    vector = rng.standard_normal(DIM).astype(np.float32)
    return vector / np.linalg.norm(vector)


def texts_of(versions: list[int]) -> dict[str, str]:
    """Note j at version v (none when v < 0): its text is its key, so a reader can check a row by its key alone."""
    return {f"n{j}v{v}": f"n{j}v{v}" for j, v in enumerate(versions) if v >= 0}


def manifest(store: VectorStore) -> dict:
    return json.loads((store.directory / "manifest.json").read_text())


def assert_holds(store: VectorStore, texts: dict[str, str]) -> None:
    """The store holds exactly these texts' vectors, through load() and through gather()."""
    model_id, keys, matrix = store.load()
    assert model_id == StandIn.model_id and sorted(keys) == sorted(texts)
    assert np.array_equal(matrix, np.stack([vector_of(texts[k]) for k in keys]))
    order = sorted(texts, reverse=True)
    assert np.array_equal(store.snapshot().gather(order), np.stack([vector_of(texts[k]) for k in order]))


def test_a_one_row_change_writes_a_segment_not_the_base(tmp_path):
    store, embedder = VectorStore(tmp_path / "v"), StandIn()
    versions = [0] * 300
    store.sync(texts_of(versions), embedder)
    base = {p.name: p.stat().st_mtime_ns for p in store.directory.glob("*.npy")}
    assert sorted(base) == ["keys.1.npy", "vectors.1.npy"]
    versions[7] += 1
    report = store.sync(texts_of(versions), embedder)
    assert (report.embedded, report.kept, report.dropped) == (1, 299, 1) and embedder.texts == 301
    assert {p.name: p.stat().st_mtime_ns for p in store.directory.glob("*.npy")} == base  # not rewritten
    assert manifest(store)["deltas"] == [{"generation": 2, "rows": 1, "gone": 1}]
    assert sorted(p.name for p in store.directory.iterdir()) == ["delta.2.npz", "keys.1.npy", "manifest.json",
                                                                 "vectors.1.npy"]
    assert_holds(store, texts_of(versions))
    assert store.generation() == 2
    # a note edited back and forth: a later segment removes what an earlier one added
    versions[7], versions[5] = 0, -1
    store.sync(texts_of(versions), embedder)
    assert manifest(store)["deltas"][1] == {"generation": 3, "rows": 1, "gone": 2}
    assert_holds(store, texts_of(versions))
    assert store.sync(texts_of(versions), embedder).embedded == 0 and store.generation() == 3  # a no-op writes nothing


def test_segments_are_compacted_into_a_fresh_base(tmp_path):
    store, embedder = VectorStore(tmp_path / "v"), StandIn()
    versions = [0] * 2000
    store.sync(texts_of(versions), embedder)
    for step in range(MAX_DELTAS):
        versions[step * 13] += 1
        store.sync(texts_of(versions), embedder)
    assert len(manifest(store)["deltas"]) == MAX_DELTAS and manifest(store)["base"] == 1
    order = [f"n{j}v{versions[j]}" for j in reversed(range(2000)) if j != 1]  # a catalog's order, not the store's
    query = vector_of("a query")
    segmented = store.snapshot().gather(order)
    versions[1] += 1  # one segment more than MAX_DELTAS: this write compacts
    store.sync(texts_of(versions), embedder)
    compacted = manifest(store)
    base = MAX_DELTAS + 2
    assert compacted["deltas"] == [] and compacted["base"] == compacted["generation"] == base
    assert_holds(store, texts_of(versions))
    # every other row is the same, so the dense ranking is too
    assert np.array_equal(store.snapshot().gather(order), segmented)
    assert ranking(store.snapshot().gather(order), query) == ranking(segmented, query)
    # the previous set stays on disk for a reader that read the old manifest a moment ago
    assert sorted(p.name for p in store.directory.iterdir()) == sorted(
        ["manifest.json", "keys.1.npy", "vectors.1.npy", f"keys.{base}.npy", f"vectors.{base}.npy",
         *(f"delta.{g}.npz" for g in range(2, base))])
    # a change bigger than COMPACT_SHARE of the rows compacts at once, and the set before last is swept
    for j in range(150):
        versions[j] += 1
    store.sync(texts_of(versions), embedder)
    assert manifest(store)["deltas"] == [] and manifest(store)["base"] == base + 1
    assert sorted(p.name for p in store.directory.iterdir()) == sorted(
        ["manifest.json", f"keys.{base}.npy", f"vectors.{base}.npy", f"keys.{base + 1}.npy",
         f"vectors.{base + 1}.npy"])
    assert_holds(store, texts_of(versions))


def ranking(matrix: np.ndarray, query: np.ndarray, k: int = 50) -> list[int]:
    """retrieve._dense's ranking of rows."""
    scores = matrix @ query
    top = np.argpartition(-scores, k - 1)[:k]
    return top[np.argsort(-scores[top], kind="stable")].tolist()


def write_old_layout(directory: Path, generation: int, texts: dict[str, str]) -> None:
    """The layout before segments: keys.G.npy, vectors.G.npy and a manifest naming G alone."""
    directory.mkdir(parents=True)
    keys = sorted(texts)
    np.save(directory / f"keys.{generation}.npy", np.array(keys, dtype="U32"))
    np.save(directory / f"vectors.{generation}.npy", np.stack([vector_of(texts[k]) for k in keys]))
    (directory / "manifest.json").write_text(json.dumps(
        {"model_id": StandIn.model_id, "dim": DIM, "count": len(keys), "generation": generation}))


def test_the_old_layout_loads_and_converts_on_the_next_write(tmp_path):
    store, embedder = VectorStore(tmp_path / "v"), StandIn()
    versions = [0] * 200
    write_old_layout(store.directory, 4, texts_of(versions))
    assert store.generation() == 4 and store.model_id() == StandIn.model_id
    assert_holds(store, texts_of(versions))
    assert store.sync(texts_of(versions), embedder).embedded == 0 and embedder.texts == 0
    versions[3] += 1
    assert store.sync(texts_of(versions), embedder).embedded == 1
    assert manifest(store) == {"format": 2, "model_id": StandIn.model_id, "dim": DIM, "count": 200, "generation": 5,
                               "base": 4, "deltas": [{"generation": 5, "rows": 1, "gone": 1}]}
    assert_holds(store, texts_of(versions))


def test_a_model_change_replaces_every_row(tmp_path):
    store = VectorStore(tmp_path / "v")
    versions = [0] * 100
    write_old_layout(store.directory, 1, texts_of(versions))
    other = StandIn()
    other.model_id = "another:16"
    report = store.sync(texts_of(versions), other)
    assert (report.embedded, report.dropped, report.model_changed_from) == (100, 0, StandIn.model_id)
    assert store.model_id() == "another:16" and manifest(store)["deltas"] == []


# ---- other processes: a writer beside readers, kills -------------------------------------------------------

ROWS, STEPS = 200, 120
CHILD = """
import os, signal, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from test_vectors import ROWS, STEPS, StandIn, bump, texts_of
from palace_cli.index import vectors
directory, scenario = Path(sys.argv[2]), sys.argv[3]
store = vectors.VectorStore(directory)

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

class Dying(StandIn):
    def embed_batch(self, texts):
        if self.texts == 40:  # four batches embedded and saved, the fifth never is
            die()
        return super().embed_batch(texts)

if scenario == "writer":
    versions = [0] * ROWS
    for step in range(1, STEPS + 1):
        bump(versions, step)
        store.sync(texts_of(versions), StandIn())
        time.sleep(0.005)
elif scenario in ("segment", "base"):  # killed once the new files are fsynced, before the manifest names them
    vectors.atomic_write = die
    versions = [0] * ROWS
    for j in ([7] if scenario == "segment" else range(50)):
        versions[j] += 1
    store.sync(texts_of(versions), StandIn())
elif scenario == "embedding":  # a long run saves what it has every CHECKPOINT_S
    vectors.CHECKPOINT_S, vectors.BATCH = 0.0, 10
    store.sync(texts_of([1] * 100 + [0] * (ROWS - 100)), Dying())
print("finished", flush=True)
"""


def bump(versions: list[int], step: int) -> None:
    """The writer's step: one note edited, and every tenth step twenty (more than COMPACT_SHARE: a compaction)."""
    for j in (range(20) if step % 10 == 0 else [(step * 7) % len(versions)]):
        versions[j] += 1


def run_child(directory: Path, scenario: str, wait: bool = True):
    command = [sys.executable, "-c", CHILD, str(Path(__file__).parent), str(directory), scenario]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(vectors_module.__file__).parents[2]),
                                                         os.environ.get("PYTHONPATH", "")])}
    if not wait:
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return subprocess.run(command, check=False, capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.slow
def test_readers_beside_a_writer_see_one_whole_set_or_the_next(tmp_path):
    store = VectorStore(tmp_path / "v")
    versions = [0] * ROWS
    store.sync(texts_of(versions), StandIn())
    states = {frozenset(texts_of(versions))}
    for step in range(1, STEPS + 1):
        bump(versions, step)
        states.add(frozenset(texts_of(versions)))
    vectors: dict[str, np.ndarray] = {}
    seen, reads, misses = set(), 0, 0
    writer = run_child(store.directory, "writer", wait=False)
    while writer.poll() is None:
        if reads % 2:
            found = store.snapshot()
            keys, matrix = (found.keys, found.gather(found.keys)) if found else ([], None)
        else:
            _, keys, matrix = store.load()
        if not keys:
            misses += 1
            continue
        reads += 1
        assert frozenset(keys) in states, "a set the writer never published"
        for key in keys:
            if key not in vectors:
                vectors[key] = vector_of(key)
        assert np.array_equal(matrix, np.stack([vectors[k] for k in keys])), "a row that is not its key's"
        seen.add(frozenset(keys))
    out, err = writer.communicate()
    assert writer.returncode == 0 and "finished" in out, err
    assert misses == 0 and len(seen) > 1
    assert sorted(store.load()[1]) == sorted(texts_of(versions))


@pytest.mark.parametrize("scenario", ["segment", "base"])
def test_a_kill_before_the_manifest_leaves_the_old_set(tmp_path, scenario):
    store = VectorStore(tmp_path / "v")
    versions = [0] * ROWS
    store.sync(texts_of(versions), StandIn())
    child = run_child(store.directory, scenario)
    assert child.returncode == -signal.SIGKILL, child.stderr
    left = {"segment": ["delta.2.npz"], "base": ["keys.2.npy", "vectors.2.npy"]}[scenario]
    assert set(left) <= {p.name for p in store.directory.iterdir()}  # written and fsynced, named by nothing
    assert store.generation() == 1
    assert_holds(store, texts_of(versions))
    versions[9] += 1  # another change: nothing of the dead writer's files leaks into the next set
    embedder = StandIn()
    assert store.sync(texts_of(versions), embedder).embedded == 1
    assert_holds(store, texts_of(versions))
    assert sorted(p.name for p in store.directory.iterdir()) == ["delta.2.npz", "keys.1.npy", "manifest.json",
                                                                 "vectors.1.npy"]
    assert manifest(store)["deltas"] == [{"generation": 2, "rows": 1, "gone": 1}]


def test_a_killed_long_embedding_run_resumes_from_its_checkpoints(tmp_path):
    store = VectorStore(tmp_path / "v")
    store.sync(texts_of([0] * ROWS), StandIn())
    child = run_child(store.directory, "embedding")
    assert child.returncode == -signal.SIGKILL, child.stderr
    _, keys, _ = store.load()
    changed = {f"n{j}v1" for j in range(100)}
    assert len(changed & set(keys)) == 40 and len(keys) == 140  # four batches kept; the edited notes' old rows gone
    assert_holds(store, {k: k for k in keys})
    embedder = StandIn()
    versions = [1] * 100 + [0] * (ROWS - 100)
    assert store.sync(texts_of(versions), embedder).embedded == 60 and embedder.texts == 60
    assert_holds(store, texts_of(versions))


def test_dense_search_is_the_same_from_segments_and_after_compaction(small_palace, with_models):
    from palace_cli.core.disk import atomic_write
    from palace_cli.palace import Palace
    from palace_cli.search.retrieve import search

    palace = Palace(small_palace)
    assert palace.refresh().dense == "on"
    path = palace.root / "memories/distributed/saga.md"
    atomic_write(path, path.read_text().replace("compensating action", "compensating step"))
    assert palace.refresh().vectors.embedded == 1
    store = palace.index.vectors
    assert len(manifest(store)["deltas"]) == 1
    queries = ["atomic commit across participants", "undo a failed step", "probabilistic set membership"]
    segmented = [[(h.id, h.score) for h in search(palace, q, mode="dense", k=3).hits] for q in queries]
    matrix = palace.index.catalog().matrix
    store.compact()
    assert manifest(store)["deltas"] == [] and palace.refresh().vectors.embedded == 0
    assert np.array_equal(palace.index.catalog().matrix, matrix)
    assert [[(h.id, h.score) for h in search(palace, q, mode="dense", k=3).hits] for q in queries] == segmented
    assert segmented[0][0][0] == "two-phase-commit" and segmented[2][0][0] == "bloom-filter"


def test_word_piece_digests_are_kept_forgotten_and_a_broken_file_made_afresh(tmp_path):
    store = VectorStore(tmp_path / "vectors")
    assert store.pieces_of(["a"]) == {}  # nothing kept yet: no file is made by asking
    assert not (tmp_path / "vectors").exists()
    store.keep_pieces({"a": pieces_digest("m", [1, 2]), "b": pieces_digest("m", [1, 2, 3])})
    assert store.pieces_of(["a", "b", "c"]) == {"a": pieces_digest("m", [1, 2]), "b": pieces_digest("m", [1, 2, 3])}
    assert pieces_digest("m", [1, 2]) != pieces_digest("other model", [1, 2])  # a digest is one model's reading
    assert pieces_digest("m", [1, 23]) != pieces_digest("m", [12, 3])
    store.keep_pieces({}, gone=["a"])
    assert store.pieces_of(["a", "b"]) == {"b": pieces_digest("m", [1, 2, 3])}
    (tmp_path / "vectors" / PIECES).write_bytes(b"\x00 not JSON at all" * 100)
    store.keep_pieces({"c": "d"})  # only re-embedding is lost with the file
    assert store.pieces_of(["b", "c"]) == {"c": "d"}
