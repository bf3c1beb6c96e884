"""The vector store alone at 100,000 x 384 with real files: one edit, compaction, the catalog's gather, a dense query.

    PYTHONPATH=. python scripts/vector_store_bench.py [--rows 100000] [--dim 384] [--edits 12] [--dir DIR]
                                                      [--no-segments]
    PYTHONPATH=. python scripts/vector_store_bench.py --palace 100000 [--dir DIR]

`--palace N` times the whole path instead: a generated palace of N notes (palace_cli/bench/synth.py) built
with the stand-in, then five `refresh()` runs after one note's Content was rewritten: the refresh, its
vectors stage, and how many note texts the vector sync read back from the cache.

A hashing stand-in embedder (one seeded random unit vector per text) takes the place of the model, so
only the store is timed: embedding 100,000 notes takes hours on this machine. Bytes written are the
process's write() bytes (/proc/self/io wchar) during the call. Times are wall-clock milliseconds, medians.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from palace_cli.index import vectors
from palace_cli.index.vectors import VectorStore


class StandIn:
    """embed_batch without a model: the same text always gets the same unit vector."""

    def __init__(self, dim: int):
        self.model_id, self.dim = f"stand-in:{dim}", dim

    def embed_batch(self, texts):
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int(hashlib.sha256(text.encode()).hexdigest()[:15], 16)
            vector = np.random.default_rng(seed).standard_normal(self.dim)
            out[i] = vector / np.linalg.norm(vector)
        return out


def key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def written() -> int:
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("wchar:"))


def timed(call):
    before, started = written(), time.perf_counter()
    result = call()
    return result, (time.perf_counter() - started) * 1000, (written() - before) / 1e6


def top(matrix: np.ndarray, query: np.ndarray, k: int = 100) -> list[int]:
    """retrieve._dense's ranking: scores, argpartition, a stable sort of the top k."""
    scores = matrix @ query
    best = np.argpartition(-scores, k - 1)[:k]
    return best[np.argsort(-scores[best], kind="stable")].tolist()


def palace_edits(notes: int, workdir: Path | None) -> dict:
    """One edit + its (stand-in) embedding through the real refresh of a generated palace."""
    import palace_cli.index.refresh as refresh_module
    from palace_cli.bench.synth import edit_note, generate_palace
    from palace_cli.palace import Palace

    root = Path(tempfile.mkdtemp(prefix="vector-bench-palace-", dir=workdir))
    try:
        palace = Palace(generate_palace(root / "p", notes, seed=0, embedder="none"))
        embedder = StandIn(384)
        _, build_ms, _ = timed(lambda: refresh_module.refresh(palace, embedder=embedder))
        reads = [0]
        read = refresh_module._LazyTexts.__getitem__

        def counted(self, key):
            reads[0] += 1
            return read(self, key)

        refresh_module._LazyTexts.__getitem__ = counted
        files = sorted(palace.memories_dir.rglob("*.md"))
        runs = []
        for generation in range(1, 6):
            edit_note(files[(generation * 7919) % len(files)], generation, 0)
            reads[0] = 0
            report, ms, _ = timed(lambda: refresh_module.refresh(palace, embedder=embedder))
            runs.append((round(ms), round(report.timings.get("vectors", 0) * 1000), reads[0]))
        return {"notes": notes, "build_ms": round(build_ms), "one_edit_refresh_ms": [r[0] for r in runs],
                "vectors_stage_ms": [r[1] for r in runs], "texts_read": [r[2] for r in runs]}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--edits", type=int, default=12, help="one-row edits in a row (segments, then a compaction)")
    parser.add_argument("--dir", type=Path, default=None, help="where to put the store (default: a temp dir)")
    parser.add_argument("--no-segments", action="store_true",
                        help="compact on every write: the whole-matrix rewrite the store did before segments")
    parser.add_argument("--palace", type=int, default=0, metavar="N",
                        help="time one edit through the real refresh of a generated palace of N notes instead")
    args = parser.parse_args()
    if args.palace:
        load = [round(x, 2) for x in os.getloadavg()]
        print(json.dumps({**palace_edits(args.palace, args.dir), "load_avg_before": load,
                          "load_avg_after": [round(x, 2) for x in os.getloadavg()]}))
        return
    if args.no_segments:
        vectors.MAX_DELTAS = 0
    root = Path(tempfile.mkdtemp(prefix="vector-bench-", dir=args.dir))
    store, embedder = VectorStore(root / "vectors"), StandIn(args.dim)
    texts = {key(f"note {i}"): f"note {i}" for i in range(args.rows)}
    out: dict = {"rows": args.rows, "dim": args.dim, "segments": not args.no_segments,
                 "load_avg_before": [round(x, 2) for x in os.getloadavg()]}
    try:
        _, ms, mb = timed(lambda: store.sync(texts, embedder))
        out["full_build"] = {"ms": round(ms), "mb_written": round(mb, 1)}
        order = list(texts)  # the catalog's order is the notes', not the store's sorted keys
        np.random.default_rng(1).shuffle(order)
        query = embedder.embed_batch(["a query about nothing in particular"])[0]
        edits = []  # (ms, MB written, segments after the write)
        for n in range(1, args.edits + 1):
            del texts[key(f"note {(n * 7919) % args.rows}")]
            texts[key(f"edited {n}")] = f"edited {n}"
            _, ms, mb = timed(lambda: store.sync(texts, embedder))
            segments = len(json.loads((root / "vectors" / "manifest.json").read_text())["deltas"])
            edits.append((round(ms, 1), round(mb, 3), segments))
        out["edits_ms"], out["edits_mb_written"], out["edits_segments"] = (list(column) for column in zip(*edits))
        segment = [ms for ms, _, segments in edits if segments]
        out["one_edit_as_segment_ms_median"] = round(statistics.median(segment), 1) if segment else None
        out["compactions_ms"] = [ms for ms, _, segments in edits if not segments]
        order = [k for k in order if k in texts] + [key(f"edited {n}") for n in range(1, args.edits + 1)]
        gathers, stacked, loads = [], [], []
        for _ in range(5):
            snapshot, ms, _ = timed(store.snapshot)
            matrix, gather_ms, _ = timed(lambda found=snapshot: found.gather(order))
            gathers.append(ms + gather_ms)
            loads.append(ms)
            started = time.perf_counter()  # the other way: stack every live row first, then pick
            position = {k: i for i, k in enumerate(snapshot.keys)}
            whole = snapshot.matrix()
            np.ascontiguousarray(whole[np.array([position[k] for k in order], dtype=np.int64)])
            stacked.append((time.perf_counter() - started) * 1000 + ms)
        out["catalog_vectors"] = {"segments": segments, "open_ms": round(statistics.median(loads), 1),
                                  "open_and_gather_ms": round(statistics.median(gathers), 1),
                                  "open_stack_then_pick_ms": round(statistics.median(stacked), 1)}
        queries = []
        for _ in range(20):
            started = time.perf_counter()
            top(matrix, query, 10)
            queries.append((time.perf_counter() - started) * 1000)
        out["dense_query_ms"] = round(statistics.median(queries), 2)
        # The same ranking from the segmented store and from a fresh base holding the same rows.
        before = [order[i] for i in top(matrix, query)]
        _, ms, mb = timed(store.compact)
        out["compact_now"] = {"ms": round(ms, 1), "mb_written": round(mb, 1)}
        after = [order[i] for i in top(store.snapshot().gather(order), query)]
        out["ranking_identical_after_compaction"] = before == after
        out["disk_mb"] = round(sum(p.stat().st_size for p in (root / "vectors").iterdir()) / 1e6, 1)
        out["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
        print(json.dumps(out))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
