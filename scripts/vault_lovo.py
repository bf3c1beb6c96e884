"""Leave-one-vault-out choice of what is fitted for adopted vaults (issue 35): the fusion weight, the share of a
long note's whole-note unit (its opening, for the embedder) against its sections, how a note's section scores
add up (its second best, a penalty for how many units it has), a section's cosine blended with its note's
opening, and a unit discounted by its share of words in links (a table of contents; tried, not adopted). Each
setting is scored on every vault; the setting best on all vaults but one is reported on the one left out, which
is the figure that counts (recall@3, MRR beside it). Never fitted on one vault's own questions.

usage: python scripts/vault_lovo.py PALACE QUERIES [PALACE QUERIES ...]
       python scripts/vault_lovo.py --names PALACE ...   (each note's first alias, else its title, recalled: rank 1 / top 3)
"""

from __future__ import annotations

import itertools
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

from palace_cli.bench.retrieval import load_queries, resolve_paths
from palace_cli.core.dates import parse_moment
from palace_cli.core.links import note_links
from palace_cli.core.text import WORD
from palace_cli.palace import Palace
from palace_cli.search.ranking import CANDIDATES, SECTION_CONTEXT, SECTION_DRAWS, _lexical

WEIGHTS = (0.3, 0.4, 0.5, 0.6, 0.7)           # lexical's share of min-max fusion (dense has the rest)
OPENING = (0.5, 1.0)                          # a sectioned note's whole-note unit, times this (0-1.2 never helped)
SECOND = (0.0, 0.1)                           # a note's score: its best unit + this x its second best
DEPTHS = (100, 310)                           # each ranker's list that min-max normalises (310: recall's, sections)
PENALTY = (0.0, 0.02, 0.05)                   # a note's score minus this x ln(1 + its sections): more draws, higher max
CONTEXT = (0.0, 0.2, 0.3)                     # a section's cosine: (1 - this) x its own + this x its note's opening
LINKS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5)  # a unit's score minus this x its share of words in links (not adopted)


def _norm(ranking):
    if not ranking:
        return {}
    low, high = min(s for _, s in ranking), max(s for _, s in ranking)
    return {i: (s - low) / (high - low) if high > low else 1.0 for i, s in ranking}


def _cosines(palace: Palace, catalog, query: str, hidden) -> dict[str, float]:
    """Every embedded unit's cosine to the query, the hidden notes and their sections left out."""
    vector = palace.index.query_vector(query)
    if catalog.matrix is None or vector is None:
        return {}
    scores = catalog.cosines(vector)
    return {unit: float(scores[row]) for unit, row in catalog.row_of.items()
            if math.isfinite(scores[row]) and catalog.note_of.get(unit, unit) not in hidden}


def _dense_lists(cosines: dict[str, float], note_of: dict[str, str]) -> dict:
    """{(context, depth): normalised dense list}: each section's cosine blended with its note's opening."""
    out = {}
    for context in CONTEXT:
        blended = {u: (1 - context) * s + context * cosines[note_of[u]] if context and note_of.get(u) in cosines else s
                   for u, s in cosines.items()}
        ranked = sorted(blended.items(), key=lambda p: (-p[1], p[0]))
        out.update({(context, d): _norm(ranked[:d]) for d in DEPTHS})
    return out


def link_share(text: str) -> float:
    """The share of a text's words inside links to notes: a table of contents is mostly links."""
    total = len(WORD.findall(text))
    inside = sum(len(WORD.findall(text[link.outer[0]:link.outer[1]])) for link in note_links(text)) if total else 0
    return inside / total if total else 0.0


def _link_shares(palace: Palace, catalog) -> dict[str, float]:
    """Each note's (its body) and section's (its text) link_share."""
    store = palace.index.store
    bodies = {m.id: m.body for m in store.memories()}
    sections = store.sections(list(catalog.note_of))
    return {unit: link_share(sections[unit]["text"] if unit in sections else bodies.get(unit, ""))
            for unit in catalog.row_of}


def lists(palace_dir: str, queries_file: str):
    """Per answerable query: (expected note ids, {depth: normalised lexical}, {(context, depth): normalised dense}),
    each unit's note, the sectioned notes, each note's count of sections and each unit's share of words in links."""
    palace = Palace(Path(palace_dir))
    queries = resolve_paths(palace, load_queries(Path(queries_file)))
    palace.refresh()
    catalog = palace.index.catalog()
    out = []
    for q in queries:
        if not q.expected:
            continue
        hidden = catalog.hidden(parse_moment(q.as_of) if q.as_of else None)
        lex = _lexical(palace, catalog, q.query, max(DEPTHS), None, hidden)
        dense = _dense_lists(_cosines(palace, catalog, q.query, hidden), catalog.note_of)
        out.append((q.expected, {d: _norm(lex[:d]) for d in DEPTHS}, dense))
    return (out, catalog.note_of, set(catalog.sections_of), {n: len(s) for n, s in catalog.sections_of.items()},
            _link_shares(palace, catalog))


def recall3(data, w: float, opening: float, second: float, depth: int, penalty: float = 0.0,
            context: float = 0.0, links: float = 0.0) -> tuple[float, float]:
    """(recall@3, MRR) of one setting over a vault's answerable questions."""
    rows, note_of, sectioned, units, shares = data
    total = reciprocal = 0.0
    for expected, lexical, dense in rows:
        lex, den = lexical[depth], dense[(context, depth)]
        per_note = defaultdict(list)
        for unit in lex.keys() | den.keys():
            score = w * lex.get(unit, 0.0) + (1 - w) * den.get(unit, 0.0) - links * shares.get(unit, 0.0)
            note = note_of.get(unit, unit)
            if unit in sectioned:
                score *= opening
            per_note[note].append(score)
        scored = {}
        for note, scores in per_note.items():
            scores.sort(reverse=True)
            scored[note] = (scores[0] + second * (scores[1] if len(scores) > 1 else 0.0)
                            - penalty * math.log(1 + units.get(note, 0)))
        ranked = [n for n, _ in sorted(scored.items(), key=lambda p: (-p[1], p[0]))]
        total += len(set(expected) & set(ranked[:3])) / len(expected)
        reciprocal += next((1 / r for r, n in enumerate(ranked, start=1) if n in expected), 0.0)
    return total / len(rows), reciprocal / len(rows)


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
    depth = {name: 310 if data[2] else CANDIDATES for name, data in vaults.items()}  # recall's: deeper() with sections
    before = {name: (0.5, 1.0, 0.0, depth[name], 0.0, 0.0, 0.0) for name in vaults}     # issue 16's ranking
    adopted = {name: (0.5, 1.0, 0.0, depth[name], SECTION_DRAWS, SECTION_CONTEXT, 0.0) for name in vaults}
    full = list(itertools.product(WEIGHTS, OPENING, SECOND, DEPTHS, PENALTY, CONTEXT, (0.0,)))
    links = {name: {(links,): (0.5, 1.0, 0.0, depth[name], SECTION_DRAWS, SECTION_CONTEXT, links) for links in LINKS}
             for name in vaults}
    table = {name: {s: recall3(data, *s) for s in full + list(links[name].values()) + [adopted[name]]}
             for name, data in vaults.items()}
    print(json.dumps({
        "before_recall@3_mrr": {n: _round(table[n][before[n]]) for n in vaults},
        "adopted_recall@3_mrr": {n: _round(table[n][adopted[n]]) for n in vaults},
        # the section family alone (sections in context, draws discounted; fusion as before), a discount of tables
        # of contents on top of it (tried, not adopted: docs/benchmarks.md), then every knob but the links
        "sections": _left_out(vaults, table, before, lambda n: {(p, c): (0.5, 1.0, 0.0, depth[n], p, c, 0.0)
                                                               for p, c in itertools.product(PENALTY, CONTEXT)}),
        "links": _left_out(vaults, table, before, lambda n: links[n]),
        "every_knob": _left_out(vaults, table, before, lambda n: {s: s for s in full})}, indent=1))


def _round(pair: tuple[float, float]) -> list[float]:
    return [round(pair[0], 4), round(pair[1], 4)]


def _left_out(vaults: dict, table: dict, before: dict, grid_of) -> dict:
    """Each vault held out in turn: the setting best on the others by recall@3 (ties: the fewest changes from before,
    then the smaller), and its recall@3 and MRR on the held-out vault beside before's. grid_of(vault): {knobs: its
    setting}."""
    def changes(s):
        return sum(a != b for a, b in zip(s, (0.5, 1.0, 0.0, s[3], 0.0, 0.0, 0.0)))

    report = {}
    for held in vaults:
        fit = [n for n in vaults if n != held]
        same = {n: grid_of(n) for n in vaults}
        keys = list(same[held])
        best = max(keys, key=lambda k: (round(sum(table[n][same[n][k]][0] for n in fit), 6), -changes(same[held][k])))
        report[held] = {"fitted_on": fit, "setting": same[held][best],
                        "held_out_recall@3_mrr": _round(table[held][same[held][best]]),
                        "before_recall@3_mrr": _round(table[held][before[held]]),
                        "fit_recall@3_mrr": {n: _round(table[n][same[n][best]]) for n in fit}}
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
