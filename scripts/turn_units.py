"""Turn units and fusion on LoCoMo, through palace's own rankings: which unit, which weights.

Each PALACE is a palace holding the LoCoMo file's conversations, indexed with one `[retrieval] turn_unit`
(make them with `palace init`, the setting, `palace import FILE`). For every question of categories 1-4
the script asks palace's BM25F (`retrieve._lexical`, per field-weight variant) and cosine
(`retrieve._dense`) rankings once, over the whole palace, then scores fusion variants offline:
recall@10 (LoCoMo's: the share of evidence turns in the top 10), overall and per category, with 95%
bootstrap intervals. `palace bench retrieval --locomo` is the benchmark; this is the search for what
to give it.

    PALACE_HOME=~/.cache/palace-test-home python scripts/turn_units.py [--weights] FILE PALACE [PALACE ...]

The first table set (units) compares the context field's weight and RRF's k per unit; --weights
compares the speaker field's weight and RRF's k and weights around the chosen unit.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

from palace_cli.bench.locomo import CATEGORIES, load_questions
from palace_cli.bench.retrieval import bootstrap_ci
from palace_cli.index.text import DEFAULT_FIELD_WEIGHTS
from palace_cli.palace import Palace
from palace_cli.retrieve import _dense, _lexical, fuse_rrf

DEPTH = 100
VARIANTS = {
    "units": ({"context 0.5": {}, "context 0": {"context": 0.0}, "context 0.25": {"context": 0.25},
               "context 1": {"context": 1.0}},
              {"rrf k60": (60, 1.0, 1.0), "rrf k60 lexical 1.5": (60, 1.5, 1.0), "rrf k60 dense 1.5": (60, 1.0, 1.5),
               "rrf k20": (20, 1.0, 1.0), "rrf k100": (100, 1.0, 1.0)}),
    "weights": ({"context 0.5": {}, "context 0.75": {"context": 0.75}, "context 0.5, speaker 0.5": {"subject": 0.5},
                 "context 0.5, speaker 0": {"subject": 0.0}},
                {"rrf k60": (60, 1.0, 1.0), "rrf k20": (20, 1.0, 1.0), "rrf k10": (10, 1.0, 1.0),
                 "rrf k20 lexical 1.5": (20, 1.5, 1.0), "rrf k20 dense 1.5": (20, 1.0, 1.5)}),
}
LEXICAL, FUSIONS = VARIANTS["units"]


def recall_at(ranked: list[str], evidence: list[str], k: int = 10) -> float:
    return len(set(evidence) & set(ranked[:k])) / len(evidence)


def run(file: Path, root: Path) -> None:
    palace = Palace(root)
    palace.refresh()
    catalog = palace.index.catalog()
    questions = load_questions(palace, file).answerable
    rows: dict[str, list[float]] = defaultdict(list)
    by_category: dict[tuple[str, int], list[float]] = defaultdict(list)
    for question in questions:
        dense = _dense(palace, catalog, question.text, DEPTH)
        results = {"dense": dense}
        for name, change in LEXICAL.items():
            palace.config.retrieval["field_weights"] = {**DEFAULT_FIELD_WEIGHTS, **change}
            results[f"lexical, {name}"] = _lexical(palace, catalog, question.text, DEPTH)
        for lexical_name in LEXICAL:
            for fusion, (k, lw, dw) in FUSIONS.items():
                fused = fuse_rrf({"lexical": results[f"lexical, {lexical_name}"], "dense": dense}, k=k,
                                 weights={"lexical": lw, "dense": dw})
                results[f"hybrid {fusion}, {lexical_name}"] = [(i, s) for i, s, _ in fused]
        for name, ranking in results.items():
            value = recall_at([i for i, _ in ranking], question.evidence)
            rows[name].append(value)
            by_category[(name, question.category)].append(value)
    print(f"\n{root} (unit {palace.config.retrieval.get('turn_unit', 'default')}), {len(questions)} questions")
    print("| variant | recall@10 | " + " | ".join(CATEGORIES.values()) + " |")
    print("|---|---|" + "---|" * len(CATEGORIES))
    for name, values in sorted(rows.items(), key=lambda item: -sum(item[1])):
        ci = bootstrap_ci(values)
        cats = [sum(by_category[(name, c)]) / max(len(by_category[(name, c)]), 1) for c in CATEGORIES]
        print(f"| {name} | {sum(values) / len(values):.3f} [{ci[0]:.3f}, {ci[1]:.3f}] | "
              + " | ".join(f"{v:.3f}" for v in cats) + " |")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[0] == "--weights":
        LEXICAL, FUSIONS = VARIANTS["weights"]
        args = args[1:]
    for palace_root in args[1:]:
        run(Path(args[0]), Path(palace_root))
