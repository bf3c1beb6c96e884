"""Retrieval while vectors are still being made: `palace bench retrieval` on a copy of a fully embedded palace that
keeps the vectors of a random share of its units (a real partial vector store, as a background worker leaves it
part-way; no worker is started, so it stays partial). Prints one JSON line: recall@1, recall@3, MRR, context and
section recall of the recall, fused and lexical rows. A share of 0 is the palace before any vector exists.

usage: python scripts/partial_vectors.py PALACE QUERIES SHARE SEED [WORKDIR]
       (PALACE embedded first: `palace --palace PALACE index --wait`; the copy is WORKDIR/NAME-SHARE-SEED, kept)
"""

from __future__ import annotations

import json
import random
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import palace_cli.bench.retrieval as bench
from palace_cli.palace import Palace

FIGURES = ("recall@1", "recall@3", "mrr", "context_recall", "section_recall")


def partial_copy(source: Path, share: float, seed: int, workdir: Path) -> Path:
    """A copy of `source` whose vector store keeps a random `share` of its vectors (made once, then reused)."""
    target = workdir / f"{source.name}-{share}-{seed}"
    if target.exists():
        return target
    shutil.copytree(source, target, symlinks=True)
    store = Palace(target).index.vectors
    current = store.snapshot()
    if current is None:
        raise SystemExit(f"{source}: no vectors; run `palace --palace {source} index --wait` first")
    keys = sorted(current.where)
    gone = sorted(set(keys) - set(random.Random(seed).sample(keys, round(share * len(keys)))))
    model = SimpleNamespace(model_id=current.model_id, dim=current.dim)
    store.commit(current, model, [], [], gone, current.key)
    return target


def main(argv: list[str]) -> None:
    source, queries, share, seed = Path(argv[0]), Path(argv[1]), float(argv[2]), int(argv[3])
    workdir = Path(argv[4]) if len(argv) > 4 else Path("/tmp/partial-vectors")
    workdir.mkdir(parents=True, exist_ok=True)
    palace = Palace(partial_copy(source, share, seed, workdir), vectors="later")
    bench.BASELINES = ()  # the palace's own rows only
    summary = bench.run_retrieval_bench(palace, bench.load_queries(queries), modes=["recall", "fused", "lexical"])
    counts = palace.vector_counts()
    print(json.dumps({"palace": source.name, "share": share, "seed": seed, "vectors": [counts.embedded, counts.total],
                      "modes": {mode: {name: figures.get(name) for name in FIGURES}
                                for mode, figures in summary["modes"].items()}}))


if __name__ == "__main__":
    main(sys.argv[1:])
