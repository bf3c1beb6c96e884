"""`palace bench vault`: an adopted vault of long notes, measured: adopt and index, no-op and one-edit refresh,
warm recall, and how fast section units are embedded.

The vault is generated (bench/synth.py, `generate_vault`): notes of about 5 KB in 8 sections each, titled
files with spaces in folders, wikilinks, tags, frontmatter on half of them. Each size is measured in a
worker process, as a person running `palace init` on it would meet it: imports, discovery, parsing,
section units and the lexical index, all in `palace init`. Recall is timed warm, in the worker, lexical
and (with `--stand-in-vectors` or a real embedder's vectors) fused. The embedding rate is measured on a
smaller vault of the same notes with the installed embedder: units (notes and their sections) per second.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from palace_cli.bench.index_bench import _load, _peak_rss_mb, calibration_s, cpu_s, settled_noop_refresh_s
from palace_cli.bench.synth import generate_vault
from palace_cli.progress import Progress

REPEATS = 5


def measure(root: Path, recall_queries: int = 25, stand_in: bool = False) -> dict:
    """The worker side: adopt (init) and index the vault, then refreshes and warm recall, in this process."""
    from palace_cli.bench.recall_bench import measure as recall_latency
    from palace_cli.bench.recall_bench import stand_in_vectors
    from palace_cli.editing.initplan import init
    from palace_cli.palace import Palace

    (root / "palace.toml").unlink()  # `palace init` adopts the folder and writes its own palace.toml
    started, cpu = time.perf_counter(), cpu_s()
    done = init(root)
    adopt, cpu = time.perf_counter() - started, cpu_s() - cpu
    palace = Palace(root)
    palace.refresh(embedder=None)
    catalog = palace.index.catalog()
    result: dict = {"notes": done.notes, "section_units": len(catalog.note_of),
                    "notes_mb": round(sum(p.stat().st_size for p in root.rglob("*.md")
                                          if not {"_palace", ".palace-index"} & set(p.parts)) / 1e6, 2),
                    "adopt_and_lexical_index_s": round(adopt, 3), "adopt_cpu_s": round(cpu, 2),
                    "peak_rss_mb_after_adopt": _peak_rss_mb(),
                    "peak_rss_mb_build_worker": _peak_rss_mb(resource.RUSAGE_CHILDREN)}
    result["noop_refresh_s"] = settled_noop_refresh_s(palace)
    files = sorted(p for p in root.rglob("*.md") if not {"_palace", ".palace-index"} & set(p.parts))
    edits = []
    for generation in range(1, REPEATS + 1):
        path = files[(generation * 7919) % len(files)]
        text = path.read_text(encoding="utf-8")
        cut = text.index("\n## ") + 1
        path.write_text(text[:cut] + f"Edited {generation}: a new first line of a section.\n" + text[cut:],
                        encoding="utf-8")
        started = time.perf_counter()
        report = palace.refresh(embedder=None)
        edits.append(time.perf_counter() - started)
        assert report.updated, "the edit was not seen"
    result["one_edit_refresh_s"] = round(statistics.median(edits), 4)
    result["recall"] = [recall_latency(palace, "lexical", 5, recall_queries, 10, 0)]
    if stand_in and palace.index.dense().embedder is not None:
        result["stand_in_vectors"] = stand_in_vectors(palace)
        result["recall"].append(recall_latency(palace, "fused", 5, recall_queries, 10, 0))
    result["peak_rss_mb"] = _peak_rss_mb()
    return result


def embedding_rate(base: Path, notes: int, seed: int = 0) -> dict:
    """Units (notes and section units) embedded per second by the installed embedder, on a small vault."""
    from palace_cli.palace import Palace

    root = base / f"vault-embed-{notes}"
    shutil.rmtree(root, ignore_errors=True)
    generate_vault(root, notes, seed=seed, embedder="default")
    palace = Palace(root)
    palace.refresh(embedder=None)
    embedder, status, reason = palace.index.dense()
    if embedder is None:
        return {"embeddings": status, "reason": reason}
    embedder.embed_batch(["warm up the model"])
    catalog = palace.index.catalog()
    started, cpu = time.perf_counter(), time.process_time()
    report = palace.refresh(embedder=embedder)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    embedded = report.vectors.embedded if report.vectors else 0
    return {"notes": len(catalog.ids) - len(catalog.note_of), "section_units": len(catalog.note_of),
            "embedded": embedded, "seconds": round(seconds, 2), "cpu_s": round(cpu, 2),
            "units_per_s": round(embedded / seconds, 1) if seconds else None, "model": embedder.model_id}


def run(sizes: list[int], seed: int = 0, embed_notes: int = 250, stand_in: bool = False,
        workdir: Path | None = None, keep: bool = False, progress: Progress | None = None) -> dict:
    """Generate and measure a vault per size in a worker process, then the embedding rate; JSON-ready results."""
    def say(message: str) -> None:
        if progress:
            progress(message, 0, 0)

    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="palace-bench-vault-"))
    base.mkdir(parents=True, exist_ok=True)
    results: dict = {"machine": {"python": platform.python_version(), "platform": platform.platform(),
                                 "cpus": os.cpu_count(), "load_avg_1m": _load(),
                                 "calibration_s": round(calibration_s(), 3)}, "seed": seed, "sizes": []}
    try:
        for size in sizes:
            root = base / f"vault-{size}"
            shutil.rmtree(root, ignore_errors=True)
            say(f"generating a vault of {size:,} notes in {root}")
            started = time.perf_counter()
            generate_vault(root, size, seed=seed, embedder="default" if stand_in else "none")
            generated = time.perf_counter() - started
            say(f"adopting and measuring {size:,} notes in a worker process")
            command = [sys.executable, "-m", "palace_cli.bench.vault_bench", str(root)]
            if stand_in:
                command.append("--stand-in-vectors")
            done = subprocess.run(command, check=True, capture_output=True, text=True)
            row = json.loads(done.stdout)
            row["generate_s"] = round(generated, 2)
            results["sizes"].append(row)
            if not keep:
                shutil.rmtree(root, ignore_errors=True)
        if embed_notes:
            say(f"embedding a vault of {embed_notes:,} notes with the installed embedder")
            results["embedding"] = embedding_rate(base, embed_notes, seed)
    finally:
        if not keep and workdir is None:
            shutil.rmtree(base, ignore_errors=True)
    results["machine"]["load_avg_1m_after"] = _load()
    return results


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Measure one generated vault (used by `palace bench vault`).")
    parser.add_argument("root")
    parser.add_argument("--stand-in-vectors", action="store_true")
    args = parser.parse_args()
    print(json.dumps(measure(Path(args.root), stand_in=args.stand_in_vectors)))
