"""Ranking experiments for issue 16, over example-palace, the skill corpus, SciFact and LoCoMo dev.

    PALACE_HOME=~/.cache/palace-test-home PYTHONPATH=$PWD /work/main/.venv/bin/python scripts/ranking_experiments.py COMMAND

    prepare [--corpus C]                       import the palaces, embed everything once (cached)
    check                                      the harness's BM25 equals palace's whoosh ranking, its analyzer palace's
    run --corpus C --variant SPEC [...]        one table of variants on one corpus (first variant is the baseline)
    table NAME [--corpus C ...]                a named experiment: lexical, fusion, embed, routing, units, loco, ideas
    all                                        every table, as docs/ranking-experiments.md prints them

A SPEC is key=value pairs over today's flat hybrid, e.g. "model=concat w.keywords=0 w.anchor=0 w.image=1
idf=robertson fuse=rrf rrf_k=30 route=today"; see scripts/rankexp/rank.py (Variant, LexConfig).
Vectors and routes are cached under --cache (default ~/.cache/palace-rankexp); results are deterministic.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rankexp import experiments
from rankexp.corpora import CORPORA, LOCOMO_UNITS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["prepare", "check", "run", "table", "all"])
    parser.add_argument("name", nargs="?", help="experiment name for `table`")
    parser.add_argument("--corpus", action="append", choices=CORPORA, help="repeatable; default: all four")
    parser.add_argument("--variant", action="append", default=[], help="repeatable; the first is the baseline")
    parser.add_argument("--unit", default="turn", help=f"LoCoMo retrieval unit, e.g. {', '.join(LOCOMO_UNITS)}")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("RANKEXP_CACHE", "~/.cache/palace-rankexp")))
    parser.add_argument("--embedder", type=Path, default=os.environ.get("RANKEXP_EMBEDDER") or None,
                        help="a GGUF file to pin the embedder to (default: the installed default model)")
    parser.add_argument("--lexical-only", action="store_true", help="no embedder: lexical variants only")
    args = parser.parse_args(argv)
    lab = experiments.Lab(args.cache.expanduser(), dense=not args.lexical_only, unit=args.unit,
                          embedder_path=args.embedder.expanduser() if args.embedder else None)
    corpora = args.corpus or list(CORPORA)
    if args.command == "prepare":
        for name in corpora:
            lab.prepare(name)
    elif args.command == "check":
        print(experiments.check(lab))
    elif args.command == "run":
        if not args.variant:
            parser.error("run needs --variant (at least one)")
        for name in corpora:
            print(experiments.run_table(lab, name, args.variant))
    elif args.command == "table":
        if args.name not in experiments.TABLES:
            parser.error(f"table NAME: one of {', '.join(experiments.TABLES)}")
        print(experiments.TABLES[args.name](lab, corpora))
    else:
        for name, table in experiments.TABLES.items():
            print(f"\n## {name}\n")
            print(table(lab, corpora), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
