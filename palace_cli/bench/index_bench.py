"""`palace bench index`: build, refresh and size the indexes of synthetic palaces of several sizes.

Each size runs in a fresh worker process (`python -m palace_cli.bench.index_bench ROOT`), so its peak
memory is its own and no cache of an earlier size helps it. Times are wall-clock seconds on this machine;
`calibration_s` (a fixed pure-Python loop) lets numbers from a busy or slower machine be compared.
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

from palace_cli.progress import Progress
from palace_cli.bench.synth import edit_note, generate_palace

REPEATS = 5


def calibration_s() -> float:
    """Seconds for a fixed pure-Python loop (about 0.3 s on an idle 2024 laptop core)."""
    started = time.perf_counter()
    total = 0
    for i in range(5_000_000):
        total += i
    return time.perf_counter() - started


def _size_on_disk(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def measure(root: Path, embed: bool, seed: int = 0) -> dict:
    """Measure one generated palace in this process (the worker side): builds, refreshes, sizes, memory."""
    from palace_cli.palace import Palace

    palace = Palace(root)
    n = len(palace.note_files())
    result: dict = {"notes": n, "notes_mb": round(_size_on_disk(root / "memories") / 1e6, 2)}

    started = time.perf_counter()
    report = palace.refresh(embedder=None)
    build = time.perf_counter() - started
    lexical = report.timings.get("lexical", 0.0)
    result["full_build_s"] = round(build, 3)
    result["full_build_stages_s"] = {k: round(v, 3) for k, v in report.timings.items()}
    result["lexical_notes_per_s"] = round(n / lexical) if lexical else None
    result["build_notes_per_s"] = round(n / build) if build else None
    result["problems"] = len(report.problems)
    result["peak_rss_mb_after_build"] = _peak_rss_mb()

    # Right after a build every note was written in the last seconds, and a refresh re-reads a file whose
    # stat is too recent to trust (store.RACY_NS); the steady state, once they settle, is the no-op refresh.
    started = time.perf_counter()
    palace.refresh(embedder=None)
    result["noop_refresh_right_after_build_s"] = round(time.perf_counter() - started, 4)
    result["noop_refresh_s"] = settled_noop_refresh_s(palace)

    files = sorted(palace.memories_dir.rglob("*.md"))
    edits = []
    for generation in range(1, REPEATS + 1):
        edit_note(files[(generation * 7919) % len(files)], generation, seed)
        started = time.perf_counter()
        edited = palace.refresh(embedder=None)
        edits.append(time.perf_counter() - started)
        assert edited.updated, "the edit was not seen"
    result["one_edit_refresh_s"] = round(statistics.median(edits), 4)

    embedder, status, reason = palace.index.dense() if embed else (None, "skipped", "not asked")
    result["embeddings"] = status
    if embedder is not None:
        started = time.perf_counter()
        report = palace.refresh(embedder=embedder)
        embed_s = time.perf_counter() - started
        result["embed_build_s"] = round(embed_s, 3)
        result["embed_notes_per_s"] = round(report.vectors.embedded / embed_s) if report.vectors else None
        edits = []
        for generation in range(REPEATS + 1, 2 * REPEATS + 1):
            edit_note(files[(generation * 7919) % len(files)], generation, seed)
            started = time.perf_counter()
            palace.refresh(embedder=embedder)
            edits.append(time.perf_counter() - started)
        result["one_edit_refresh_with_embedding_s"] = round(statistics.median(edits), 4)
        started = time.perf_counter()
        palace.refresh(embedder=embedder)
        result["noop_refresh_with_vectors_s"] = round(time.perf_counter() - started, 4)
    elif reason:
        result["embeddings_reason"] = reason

    cache = palace.cache_dir
    result["disk_mb"] = {
        "notes_cache": round(sum(_size_on_disk(p) for p in cache.glob("notes.sqlite*")) / 1e6, 2),
        "lexical": round(_size_on_disk(cache / "whoosh") / 1e6, 2),
        "vectors": round(_size_on_disk(cache / "vectors") / 1e6, 2),
        "index_files": round((_size_on_disk(root / "INDEX.md") + _size_on_disk(root / "index")) / 1e6, 2),
    }
    result["peak_rss_mb"] = _peak_rss_mb()
    return result


def settled_noop_refresh_s(palace) -> float:
    """The median no-op refresh once the notes have settled: notes written in the last seconds are re-read
    once (store.RACY_NS), so wait that long and refresh once before timing."""
    from palace_cli.index.store import RACY_NS

    time.sleep(RACY_NS / 1e9)
    palace.refresh(embedder=None)
    noops = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        palace.refresh(embedder=None)
        noops.append(time.perf_counter() - started)
    return round(statistics.median(noops), 4)


def cpu_s() -> float:
    """CPU seconds of this process and of its ended children (the lexical build's workers): the work done, which
    a busy machine stretches less than the wall time."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _peak_rss_mb(who: int = resource.RUSAGE_SELF) -> float:
    """Peak RSS of this process (or, with RUSAGE_CHILDREN, of its largest ended child: a build worker)."""
    peak = resource.getrusage(who).ru_maxrss
    return round(peak / (1e6 if sys.platform == "darwin" else 1e3), 1)  # bytes on macOS, KiB on Linux


def _cli_noop_s(root: Path) -> float:
    """Wall time of a whole `palace index --json` process with nothing to do (startup and imports included)."""
    script = Path(sys.executable).with_name("palace")
    command = [str(script)] if script.exists() else [sys.executable, "-c", "from palace_cli.cli import main; main()"]
    command += ["--palace", str(root), "index", "--json"]
    times = []
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 3)


def run(sizes: list[int], seed: int = 0, embed_max: int = 10_000, workdir: Path | None = None,
        keep: bool = False, progress: Progress | None = None) -> dict:
    """Generate, build and measure a palace per size; returns the JSON-ready results."""
    def say(message: str) -> None:
        if progress:
            progress(message, 0, 0)

    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="palace-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    results = {"machine": {"python": platform.python_version(), "platform": platform.platform(),
                           "cpus": os.cpu_count(), "load_avg_1m": _load(), "calibration_s": round(calibration_s(), 3)},
               "seed": seed, "sizes": []}
    try:
        for size in sizes:
            root = base / f"palace-{size}"
            if root.exists():
                shutil.rmtree(root)
            say(f"generating {size:,} synthetic notes in {root}")
            started = time.perf_counter()
            generate_palace(root, size, seed=seed, embedder="none")
            generated = time.perf_counter() - started
            say(f"measuring {size:,} notes in a worker process")
            command = [sys.executable, "-m", "palace_cli.bench.index_bench", str(root), "--seed", str(seed)]
            if size <= embed_max:
                command.append("--embed")
            done = subprocess.run(command, check=True, capture_output=True, text=True)
            row = json.loads(done.stdout)
            row["generate_s"] = round(generated, 2)
            row["cli_noop_s"] = _cli_noop_s(root)
            if size > embed_max:
                row["embeddings"] = "skipped"
                row["embeddings_reason"] = f"over --embed-max {embed_max:,}"
            results["sizes"].append(row)
            if not keep:
                shutil.rmtree(root, ignore_errors=True)
    finally:
        if not keep and workdir is None:
            shutil.rmtree(base, ignore_errors=True)
    results["machine"]["load_avg_1m_after"] = _load()
    return results


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:  # pragma: no cover
        return None


def _worker(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Measure one synthetic palace (used by `palace bench index`).")
    parser.add_argument("root")
    parser.add_argument("--embed", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    root = Path(args.root)
    toml = root / "palace.toml"
    original = toml.read_text()
    if args.embed:  # the generated palace.toml turns dense off; the worker turns it on for its own runs only
        toml.write_text(original.replace('embedder = "none"', 'embedder = "default"'))
    try:
        print(json.dumps(measure(root, args.embed, args.seed)))
    finally:
        toml.write_text(original)


if __name__ == "__main__":
    _worker(sys.argv[1:])
