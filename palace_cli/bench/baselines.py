"""Flat baselines `palace bench retrieval` prints beside palace's own modes, on any corpus (issue 35).

Each ranks the palace's notes with nothing of palace's but its analyzer and its embedder, so that a ranking
change that falls below one of them shows at once:

- `whole-notes`: BM25 over each note's whole text, one document a note;
- `sections-bm25`: BM25 over sections: each section unit of a long note, and every other note whole;
- `sections-dense`: the cosine of the same units (palace's own vectors), a note scored by its best unit;
- `sections-fused`: min-max fusion, half and half, of those two lists (each ranker's top CANDIDATES), a note
  scored by its best unit.

The two BM25 baselines have lexical indexes of their own, built once per bench run in a temporary folder.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from palace_cli.palace import Palace
from palace_cli.search.hits import Hit, one_per_note
from palace_cli.search.ranking import CANDIDATES, deeper, fuse_minmax
from palace_cli.search.retrieve import attach_hits

WHOLE = "whole-notes"
SECTIONS = ("sections-bm25", "sections-dense", "sections-fused")
BASELINES = (WHOLE, *SECTIONS)
DENSE_BASELINES = ("sections-dense", "sections-fused")

_INDEXES: dict = {}


def baseline_ranking(palace: Palace, mode: str, query: str, hidden: frozenset[str], depth: int = 10) -> list[Hit]:
    """The best unit of each of the first `depth` notes of a baseline, best first (a section stands for its note,
    as in palace's own ranking), leaving out the `hidden` notes and their sections."""
    catalog = palace.index.catalog()
    deep = deeper(catalog, depth)
    if mode == WHOLE:
        scored = _index(palace, whole=True).search(query, limit=depth, exclude=sorted(hidden))
        ranked = [(i, s, {"lexical": s}) for i, s in scored]
    else:
        lexical = _index(palace, whole=False).search(query, limit=max(deep, CANDIDATES), exclude=sorted(hidden))
        dense = _dense(palace, query, hidden, max(deep, CANDIDATES)) if mode != "sections-bm25" else []
        lists = {"sections-bm25": {"lexical": lexical}, "sections-dense": {"dense": dense},
                 "sections-fused": {"lexical": lexical, "dense": dense}}[mode]
        ranked = fuse_minmax(lists) if mode == "sections-fused" else \
            [(i, s, {name: s}) for name, found in lists.items() for i, s in found]
    hits = []
    for unit_id, score, parts in ranked[:deep]:
        row = catalog.row_of.get(unit_id)
        if row is not None:
            hits.append(Hit(unit_id, "", catalog.domains[row], catalog.paths[row], 0, score, dict(parts),
                            kind=catalog.kinds[row], time=catalog.times[row]))
    return one_per_note(hits, catalog.note_of)[:depth]  # a note's best unit stands for it


def handed(palace: Palace, hits: list[Hit]) -> None:
    """Load the text of the hits a baseline hands over (their notes, their sections)."""
    attach_hits(palace, hits, palace.index.catalog())


def _units(palace: Palace) -> list[int]:
    """Catalog rows of the sections baselines' units: every section, and every note not cut into sections."""
    catalog = palace.index.catalog()
    return [row for row, (kind, unit) in enumerate(zip(catalog.kinds, catalog.ids))
            if kind == "section" or (kind == "memory" and unit not in catalog.sections_of)]


def _dense(palace: Palace, query: str, hidden: frozenset[str], limit: int) -> list[tuple[str, float]]:
    """[(unit id, cosine)] of the sections baselines' units, best first."""
    catalog = palace.index.catalog()
    vector = palace.index.query_vector(query)
    if catalog.matrix is None or vector is None:
        return []
    import numpy as np

    rows = np.array([r for r in _units(palace) if catalog.note_of.get(catalog.ids[r], catalog.ids[r]) not in hidden],
                    dtype=np.int64)
    if not len(rows):
        return []
    scores = catalog.matrix[rows] @ vector
    order = np.argsort(-scores, kind="stable")[:limit]
    return [(catalog.ids[rows[i]], float(scores[i])) for i in order]


def _index(palace: Palace, whole: bool):
    """The baseline's lexical index for the palace as it is: whole notes, or sections and short notes whole."""
    from palace_cli.core.markdown import rest_of_body
    from palace_cli.index.sections import section_title
    from palace_cli.index.text import Doc, TextIndex

    key = (str(palace.root), palace.index.store.version(), whole)
    if key not in _INDEXES:
        store = palace.index.store
        memories, seen = [], set()
        for m in store.iter_memories():
            if m.id not in seen:
                seen.add(m.id)
                memories.append(m)
        sections = {} if whole else store.section_rows([m.path for m in memories])
        docs = []
        for m in memories:
            units = sections.get(m.path, [])
            if not units:
                docs.append(Doc(m.path, m.id, m.domain, m.subject, " ".join(m.keywords + m.aliases), m.anchor,
                                m.image, m.content, rest=rest_of_body(m.body) if m.structured else ""))
            docs += [Doc(m.path, unit_key, m.domain, section_title(m.subject, heading), "", "", "", text,
                         kind="section") for unit_key, heading, _line, text in units]
        index = TextIndex(Path(tempfile.mkdtemp(prefix="palace-baseline-")))
        index.rebuild(docs)
        _INDEXES[key] = index
    return _INDEXES[key]
