"""Leave-one-vault-out choice of what is fitted for adopted vaults (issue 35): the fusion weight, the share of a
long note's whole-note unit (its opening, for the embedder) against its sections, and how a note's section
scores add up. Each setting is scored on every vault; the setting best on all vaults but one is reported on
the one left out, which is the figure that counts. Never fitted on one vault's own questions.

usage: python scripts/vault_lovo.py PALACE QUERIES [PALACE QUERIES ...]
       python scripts/vault_lovo.py --names PALACE ...   (each note's first alias, else its title, recalled: rank 1 / top 3)
"""

from __future__ import annotations

import itertools
import json
import sys
from collections import defaultdict
from pathlib import Path

from palace_cli.bench.retrieval import load_queries, resolve_paths
from palace_cli.core.dates import parse_moment
from palace_cli.palace import Palace
from palace_cli.search.ranking import CANDIDATES, _dense, _lexical

WEIGHTS = (0.3, 0.4, 0.5, 0.6, 0.7)           # lexical's share of min-max fusion (dense has the rest)
OPENING = (0.0, 0.5, 0.8, 1.0, 1.2)           # a sectioned note's whole-note unit, times this
SECOND = (0.0, 0.1, 0.2, 0.3)                 # a note's score: its best unit + this x its second best
DEPTHS = (100, 300)                           # each ranker's list that min-max normalises (its floor)


def _norm(ranking):
    if not ranking:
        return {}
    low, high = min(s for _, s in ranking), max(s for _, s in ranking)
    return {i: (s - low) / (high - low) if high > low else 1.0 for i, s in ranking}


def lists(palace_dir: str, queries_file: str):
    """Per answerable query: (expected note ids, {unit: normalised lexical}, {unit: normalised dense})."""
    palace = Palace(Path(palace_dir))
    queries = resolve_paths(palace, load_queries(Path(queries_file)))
    catalog = palace.index.catalog()
    out = []
    for q in queries:
        if not q.expected:
            continue
        hidden = catalog.hidden(parse_moment(q.as_of) if q.as_of else None)
        lex = _lexical(palace, catalog, q.query, max(DEPTHS), None, hidden)
        den = _dense(palace, catalog, q.query, max(DEPTHS), None, hidden)
        out.append((q.expected, {d: (_norm(lex[:d]), _norm(den[:d])) for d in DEPTHS}))
    return out, catalog.note_of, set(catalog.sections_of)


def recall3(data, w: float, opening: float, second: float, depth: int) -> float:
    rows, note_of, sectioned = data
    total = 0.0
    for expected, by_depth in rows:
        lex, den = by_depth[depth]
        per_note = defaultdict(list)
        for unit in lex.keys() | den.keys():
            score = w * lex.get(unit, 0.0) + (1 - w) * den.get(unit, 0.0)
            note = note_of.get(unit, unit)
            if unit in sectioned:
                score *= opening
            per_note[note].append(score)
        scored = {}
        for note, scores in per_note.items():
            scores.sort(reverse=True)
            scored[note] = scores[0] + second * (scores[1] if len(scores) > 1 else 0.0)
        top = [n for n, _ in sorted(scored.items(), key=lambda p: (-p[1], p[0]))[:3]]
        total += len(set(expected) & set(top)) / len(expected)
    return total / len(rows)


def names_first(palace_dir: str) -> dict:
    """Each note valid now asked for by its first alias (its title when it has none), when that name is its own
    (a link by it resolves to this note alone): the share that `recall` ranks first, and in the top 3."""
    from palace_cli.errors import Ambiguous
    from palace_cli.search.retrieve import recall

    palace = Palace(Path(palace_dir))
    palace.refresh()
    names, hidden = palace.index.names(), palace.index.catalog().hidden()
    first = top3 = total = shared = 0
    for memory in names.ids.values():
        name = (memory.aliases or [memory.subject])[0]
        try:
            own = memory.id not in hidden and getattr(names.resolve(name), "memory", None) is memory
        except Ambiguous:
            own = False
        if not own:
            shared += 1
            continue
        ranked = [h.memory_id or h.id for h in recall(palace, name, do_refresh=False, depth=10).ranked]
        total += 1
        first += ranked[:1] == [memory.id]
        top3 += memory.id in ranked[:3]
    return {"notes": total, "names_not_their_own": shared, "first": round(first / total, 4),
            "top3": round(top3 / total, 4)}


def main(args: list[str]) -> None:
    if args[0] == "--names":
        print(json.dumps({Path(a).name: names_first(a) for a in args[1:]}, indent=1))
        return
    vaults = {Path(args[i]).name: lists(args[i], args[i + 1]) for i in range(0, len(args), 2)}
    grid = list(itertools.product(WEIGHTS, OPENING, SECOND, DEPTHS))
    table = {name: {s: recall3(data, *s) for s in grid} for name, data in vaults.items()}
    default = (0.5, 1.0, 0.0, CANDIDATES)
    report = {}
    for held in vaults:
        fit = [n for n in vaults if n != held]
        best = max(grid, key=lambda s: (round(sum(table[n][s] for n in fit), 6), s == default))
        report[held] = {"fitted_on": fit, "setting": best, "held_out_recall@3": round(table[held][best], 4),
                        "default_recall@3": round(table[held][default], 4),
                        "fit_recall@3": {n: round(table[n][best], 4) for n in fit}}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
