"""The discount of turns that say little (search/ranking.py, CHATTER and SUBSTANTIAL) over a grid, on a palace that
holds the LoCoMo conversations, with the setting chosen leaving one conversation out (docs/benchmarks.md, "Turns
that say little"). `recall` as an assistant calls it, fused (the palace embedded) and, with --fallback, its BM25
fallback (the same palace with its vectors hidden).

usage: python scripts/chatter_grid.py PALACE LOCOMO_FILE [--fallback]
       (PALACE: `palace init P && palace --palace P import LOCOMO_FILE && palace --palace P index --wait`)
"""

from __future__ import annotations

import itertools
import statistics
import sys
from pathlib import Path

import palace_cli.search.ranking as ranking
from palace_cli.bench.locomo import _ask, load_questions, question_metrics
from palace_cli.palace import Palace

WEIGHTS = (0.0, 0.2, 0.3, 0.4, 0.5, 0.7)
WORDS = (10, 15, 20)


def main(argv: list[str]) -> None:
    palace = Palace(Path(argv[0]))
    palace.refresh()
    questions = load_questions(palace, Path(argv[1])).answerable
    if "--fallback" in argv:
        palace.index.catalog().matrix = None  # recall without vectors: the catalog is kept per process
    results = {}
    for weight, words in itertools.product(WEIGHTS, WORDS):
        if weight == 0 and words != WORDS[0]:
            continue
        ranking.CHATTER, ranking.SUBSTANTIAL = weight, words
        per = []
        for question in questions:
            ranked, handed, _, _ = _ask(palace, "recall", question, None)
            scores = question_metrics(ranked, handed, question.evidence)
            per.append((question.conversation, scores["recall@10"], scores["recall@1"], scores["context_recall"]))
        results[(weight, words)] = per
        print(f"CHATTER {weight} SUBSTANTIAL {words}: recall@10 {statistics.fmean(p[1] for p in per):.4f} "
              f"recall@1 {statistics.fmean(p[2] for p in per):.4f} context {statistics.fmean(p[3] for p in per):.4f}",
              flush=True)
    baseline = results[(0.0, WORDS[0])]
    pairs = []
    for held in sorted({p[0] for p in baseline}):
        trained = {key: statistics.fmean(p[1] for p in per if p[0] != held) for key, per in results.items()}
        best = max(trained, key=lambda key: (round(trained[key], 4), -key[0]))
        test = [p for p in results[best] if p[0] == held]
        base = [p for p in baseline if p[0] == held]
        pairs.extend(zip(test, base))
        print(f"held out {held}: chose {best}, recall@10 {statistics.fmean(p[1] for p in base):.4f} -> "
              f"{statistics.fmean(p[1] for p in test):.4f}")
    for column, name in ((1, "recall@10"), (2, "recall@1"), (3, "context recall")):
        print(f"cross-validated {name}: {statistics.fmean(b[column] for _, b in pairs):.4f} -> "
              f"{statistics.fmean(t[column] for t, _ in pairs):.4f}")


if __name__ == "__main__":
    main(sys.argv[1:])
