"""The agent-session sets pooled, left one session out (as `palace bench distill --sessions` does), each set's sessions
then scored apart: how the pooled folds do on each set. Used for the sixth and seventh steps of issue 33.

usage: python scripts/distill_cv_by_set.py benchmarks/agent-sessions.jsonl [more files]
"""

from __future__ import annotations

import sys
from pathlib import Path

from palace_cli.bench import worksessions as ws


def report(files: list[Path]) -> None:
    by_file = {path: ws.load_set(path) for path in files}
    sets = [s for sessions in by_file.values() for s in sessions]
    sessions = ws.read_sessions(sets)
    units = ws._units(sets, sessions)
    produced = {}
    for held in sets:
        train = [s for s in sets if s is not held]
        weights = ws._fit(sets, units, {s.name for s in train})
        produced[held.name] = ws._kept(held, units[held.name], weights, ws._best_threshold(train, units, weights))
    for path, members in [("pooled", sets), *by_file.items()]:
        result = ws.score([p for s in members for p in produced[s.name]], members)
        kinds = ", ".join(f"{k} {v['recall']:.3f}/{v['precision']:.3f}" for k, v in result["by_kind"].items())
        print(f"{Path(path).name}: {len(members)} sessions, recall {result['recall']:.3f} {result['recall_ci']}, "
              f"precision {result['precision']:.3f} {result['precision_ci']}; {kinds}")


if __name__ == "__main__":
    report([Path(a) for a in sys.argv[1:]])
