"""`palace bench recall`: warm `recall` latency on a synthetic palace of any size, lexical and fused.

Queries are words drawn from random notes (5, 10 and 20 words by default), timed in this process after
warm-up queries, as a long-lived process (the MCP server, `palace watch`) would serve them. Each query is
also timed with the lexical index's posting cache emptied first ("first sight": every term's postings
decoded afresh), the cost of a query whose words the process has not seen.

Fused and dense need a vector per note, and embedding 100,000 notes takes hours here: with `--stand-in-vectors`
the vector store is filled with random unit vectors under a model id naming them as stand-ins. They
measure latency only (the dense half ranks nonsense) and any real refresh replaces them all (the model
id differs from the embedder's). The query's embedding is real, by the installed embedder.
"""

from __future__ import annotations

import os
import platform
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from palace_cli.errors import UsageError
from palace_cli.progress import Progress
from palace_cli.bench.index_bench import calibration_s
from palace_cli.bench.synth import generate_palace

STAND_IN = "stand-in:random-unit-vectors"  # the model id prefix of latency-only vectors


class StandInEmbedder:
    """Random unit vectors (seeded) in the embedder's dimension: fills a vector store for latency runs only."""

    def __init__(self, model_id: str, dim: int, seed: int = 0):
        self.model_id, self.dim, self.seed = f"{STAND_IN}:{model_id}", dim, seed
        self._batch = 0

    def embed_batch(self, texts: list[str]):
        import numpy as np

        self._batch += 1
        rows = np.random.default_rng((self.seed, self._batch)).standard_normal((len(texts), self.dim))
        return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def queries(root: Path, words: int, count: int, seed: int) -> list[str]:
    """`count` queries of `words` words (alphabetic, longer than 4 letters) drawn from random notes."""
    rng = random.Random(seed * 1000 + words)
    files = sorted(root.glob("memories/*/*.md")) or sorted(p for p in root.rglob("*.md")
                                                          if not {"_palace", ".palace-index"} & set(p.parts))
    made = []
    for path in rng.sample(files, min(count, len(files))):
        candidates = [w for w in path.read_text(encoding="utf-8").split() if w.isalpha() and len(w) > 4]
        made.append(" ".join(rng.sample(candidates, min(words, len(candidates)))))
    return made


def _timed(palace, query: str, mode: str, first_sight: bool) -> tuple[float, float]:
    from palace_cli.search.retrieve import recall

    if first_sight:
        palace.index.text.forget_postings()
    palace.index.forget_query_vectors()
    wall, cpu = time.perf_counter(), time.process_time()
    recall(palace, query, mode=mode, do_refresh=False)
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


def _summary(times: list[float]) -> dict:
    ordered = sorted(times)
    return {"p50_ms": round(statistics.median(ordered), 1),
            "p95_ms": round(ordered[max(0, round(0.95 * len(ordered)) - 1)], 1), "n": len(ordered)}


def measure(palace, mode: str, words: int, count: int, warmup: int, seed: int) -> dict:
    """Warm recall in one mode: p50/p95 wall and CPU time, with the posting cache kept and emptied per query."""
    drawn = queries(palace.root, words, count + warmup, seed)
    for query in drawn[:warmup]:
        _timed(palace, query, mode, False)
    row: dict = {"mode": mode, "words": words, "load_avg_1m": _load()}
    for label, first_sight in (("warm", False), ("first_sight", True)):
        walls, cpus = [], []
        for query in drawn[warmup:]:
            wall, cpu = _timed(palace, query, mode, first_sight)
            walls.append(wall)
            cpus.append(cpu)
        row[label] = {**_summary(walls), "cpu_p50_ms": round(statistics.median(cpus), 1)}
    row["load_avg_1m_after"] = _load()
    return row


def stand_in_vectors(palace, seed: int = 0) -> dict:
    """Fill the palace's vector store with stand-in vectors, one per indexed text; returns what was done."""
    embedder = palace.index.dense().embedder
    if embedder is None:
        raise UsageError("stand-in vectors take the installed embedder's dimension: run `palace models install`")
    hashes = sorted(set(palace.index.catalog().text_hashes))
    stand_in = StandInEmbedder(embedder.model_id, embedder.dim, seed)
    started = time.perf_counter()
    palace.index.vectors.sync({h: "" for h in hashes}, stand_in)
    return {"rows": len(hashes), "dim": embedder.dim, "model_id": stand_in.model_id,
            "write_s": round(time.perf_counter() - started, 2)}


def run(size: int, words: list[int], modes: list[str], count: int = 25, warmup: int = 10, seed: int = 0,
        workdir: Path | None = None, stand_in: bool = False, progress: Progress | None = None,
        vocabulary: str = "small") -> dict:
    """Generate (or reuse, under workdir) a palace of `size` notes, index it, and time warm recall."""
    from palace_cli.palace import Palace

    def say(message: str) -> None:
        if progress:
            progress(message, 0, 0)

    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="palace-bench-recall-"))
    root = base / (f"palace-{size}" if vocabulary == "small" else f"palace-{size}-{vocabulary}")
    try:
        if not (root / "palace.toml").exists():
            say(f"generating {size:,} synthetic notes in {root}")
            dense = any(mode != "lexical" for mode in modes)
            generate_palace(root, size, seed=seed, embedder="default" if dense else "off", vocabulary=vocabulary)
        palace = Palace(root)
        say(f"indexing {root} (lexical only)")
        started = time.perf_counter()
        palace.refresh(embedder=None)
        results: dict = {"notes": len(palace.index.catalog().ids), "refresh_s": round(time.perf_counter() - started, 2),
                         "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                                     "load_avg_1m": _load(), "calibration_s": round(calibration_s(), 3)},
                         "seed": seed, "vocabulary": vocabulary, "rows": []}
        if any(mode != "lexical" for mode in modes):
            if palace.index.catalog().matrix is None:
                if not stand_in:
                    raise UsageError("fused and dense need a vector per note: embed the palace "
                                       "(`palace index`) or pass --stand-in-vectors (latency only)")
                say("writing stand-in vectors (random unit vectors: latency only, never quality)")
                results["stand_in_vectors"] = stand_in_vectors(palace, seed)
            results["vectors"] = palace.index.catalog().model_id
        for mode in modes:
            for n in words:
                say(f"{mode}, {n}-word queries")
                results["rows"].append(measure(palace, mode, n, count, warmup, seed))
        results["machine"]["load_avg_1m_after"] = _load()
        return results
    finally:
        if workdir is None:
            shutil.rmtree(base, ignore_errors=True)


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:  # pragma: no cover
        return None
