"""A light, per-process view of the indexed memories and turns for ranking: ids, domains, sessions, vectors."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from palace_cli.conversations.model import TIME
from palace_cli.core.dates import parse_moment
from palace_cli.core.validity import Versions
from palace_cli.index.scope import Scope

if TYPE_CHECKING:
    import numpy as np

    from palace_cli.index import Index


@dataclass
class Catalog:
    """Rows of the cache needed for ranking, aligned with the vector matrix when there is one: the memories
    (by path), then the turns (by session file and order). A turn's id is its key, its domain "" and its
    session its session id; a memory's session is ""."""

    ids: list[str]
    paths: list[str]
    domains: list[str]
    text_hashes: list[str]
    row_of: dict[str, int]
    domain_names: list[str]
    domain_rows: dict[str, list[int]]
    kinds: list[str] = field(default_factory=list)
    times: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    session_rows: dict[str, list[int]] = field(default_factory=dict)
    session_centroids: dict = field(default_factory=dict)  # session -> unit vector, filled on first use by routing
    model_id: str | None = None
    matrix: np.ndarray | None = None                                      # rows aligned with ids
    embedded: np.ndarray | None = None  # which rows have a vector (None: all of them, or no matrix); a zero row else
    versions: Versions = field(default_factory=lambda: Versions([]))  # validity in time, version links
    sections_of: dict[str, list[str]] = field(default_factory=dict)  # note id -> its section units' keys
    note_of: dict[str, str] = field(default_factory=dict)            # section key -> its note's id
    substance: dict[str, int] = field(default_factory=dict)  # turn key -> its informative words (core/text.py)

    def hidden(self, when=None) -> frozenset[str]:
        """Ids of memories not valid at `when` (a UTC datetime; None: now), and their sections' keys: what recall
        leaves out."""
        ids = self.versions.hidden(when)
        return frozenset([*ids, *(key for i in ids for key in self.sections_of.get(i, ()))])

    def said_after(self, when) -> frozenset[str]:
        """Ids of the turns said after `when` (a UTC datetime; None: now, when every turn was said): at that moment
        they were not known yet. A turn's time reads as a memory's `created` does (no zone: UTC); one without a
        time is kept."""
        if when is None or not self.session_rows:
            return frozenset()
        return frozenset(self.ids[row] for row, moment in self._turn_moments.items() if moment > when)

    @cached_property
    def _turn_moments(self) -> dict:
        """Row -> the moment of each turn with a time (read once per catalog)."""
        moments = {}
        for rows in self.session_rows.values():
            for row in rows:
                try:
                    moments[row] = parse_moment(self.times[row])
                except ValueError:
                    continue
        return {row: moment for row, moment in moments.items() if moment is not None}

    @property
    def vector_count(self) -> int:
        """How many units have a vector (they are embedded in the background: some may wait)."""
        if self.matrix is None:
            return 0
        return len(self.ids) if self.embedded is None else int(self.embedded.sum())

    def has_vector(self, row: int) -> bool:
        """Whether the unit in this row has a vector."""
        return self.matrix is not None and (self.embedded is None or bool(self.embedded[row]))

    def cosines(self, vector: np.ndarray) -> np.ndarray:
        """Every row's cosine to a unit vector; -inf for a unit without a vector yet (no dense ranking places it:
        it ranks by its words alone)."""
        import numpy as np

        scores = self.matrix @ vector
        if self.embedded is not None:
            scores[~self.embedded] = -np.inf
        return scores

    @cached_property
    def memory_count(self) -> int:
        """Rows 0..memory_count-1 are memories; sections and turns follow (counted once per catalog)."""
        return sum(1 for k in self.kinds if k == "memory")

    @property
    def has_turns(self) -> bool:
        """Whether any conversation turn is indexed."""
        return bool(self.session_rows)

    def mask(self, scope: Scope | None) -> np.ndarray | None:
        """Boolean mask over rows of the units a scope allows (None when it allows every unit)."""
        if scope is None or scope.unbounded:
            return None
        import numpy as np

        kinds = np.array(self.kinds)
        mask = np.zeros(len(self.ids), dtype=bool)
        if scope.memories:  # a section is part of its note: in scope with it
            mask |= ((kinds == "memory") | (kinds == "section")) if scope.domains is None \
                else self.domain_mask(scope.domains)
        if scope.turns:
            if scope.sessions is None:
                mask |= kinds == "turn"
            else:
                for session in scope.sessions:
                    rows = self.session_rows.get(session)
                    if rows:
                        mask[rows] = True
        if scope.timed:  # the vector form of Scope.within
            times = np.array(self.times)
            mask &= times != ""
            if scope.since is not None:
                mask &= times >= scope.since
            if scope.until is not None:
                mask &= times <= scope.upper()
        return mask

    def domain_mask(self, domains) -> np.ndarray:
        """Boolean mask over rows for the given domains."""
        import numpy as np

        mask = np.zeros(len(self.ids), dtype=bool)
        for domain in domains:
            rows = self.domain_rows.get(domain)
            if rows is not None:
                mask[rows] = True
        return mask


def build_catalog(index: Index) -> Catalog:
    """The catalog for the cache as it is now (Index.catalog() keeps one per process)."""
    stored = index.vectors.snapshot() if index.vectors.model_id() else None
    rows = _Rows()
    rows.add_memories(index.store.catalog_rows())
    sections_of, note_of = rows.add_sections(index.store.section_catalog_rows())
    domain_names = sorted({d for d in rows.domains if d} | set(index.site.config.domains))
    domain_index = defaultdict(list)
    for row, domain in enumerate(rows.domains):
        domain_index[domain].append(row)
    session_index, substance = rows.add_turns(index.store.turn_catalog_rows())
    catalog = Catalog(
        ids=rows.ids, paths=rows.paths, domains=rows.domains, text_hashes=rows.hashes,
        row_of={i: r for r, i in enumerate(rows.ids)}, domain_names=domain_names, domain_rows=dict(domain_index),
        kinds=rows.kinds, times=rows.times, sessions=rows.sessions, session_rows=session_index,
        versions=index.versions(), sections_of=sections_of, note_of=note_of, substance=substance,
    )
    if stored is not None and len(stored) and _current(index, stored):  # lexical-only commands start without numpy
        matrix, present = stored.gather_some(rows.hashes)  # straight from the base and its segments
        if present.any():  # the units embedded so far (index/embedding.py fills in the rest in the background)
            catalog.model_id, catalog.matrix = stored.model_id, matrix
            catalog.embedded = None if present.all() else present
    return catalog


def _current(index: Index, stored) -> bool:
    """Whether stored vectors are the configured embedder's (not yet replaced after a change of model or cut);
    vectors made with an embedder a caller handed in name none and are used as they are."""
    if stored.key is None:
        return True
    from palace_cli.index.embedding import configured

    key = configured(index.site).key
    return key is None or key == stored.key


class _Rows:
    """The catalog's columns as they are filled: the memories, then their sections, then the turns."""

    def __init__(self):
        self.ids, self.paths, self.domains, self.hashes = [], [], [], []
        self.kinds, self.times, self.sessions = [], [], []

    def _add(self, key: str, path: str, domain: str, text_hash: str, kind: str, time: str, session: str) -> None:
        self.ids.append(key)
        self.paths.append(path)
        self.domains.append(domain)
        self.hashes.append(text_hash)
        self.kinds.append(kind)
        self.times.append(time)
        self.sessions.append(session)

    def add_memories(self, rows) -> None:
        """One row per memory id: a duplicate id's first path keeps it, as in refresh."""
        seen = set()
        for note_id, path, domain, text_hash, _subject, _anchor, _keywords, _aliases, created in rows:
            if note_id in seen:
                continue
            seen.add(note_id)
            self._add(note_id, path, domain, text_hash, "memory", _time(created), "")

    def add_sections(self, rows) -> tuple[dict[str, list[str]], dict[str, str]]:
        """The section units of the memories added; returns (note id -> its sections' keys, key -> note id)."""
        sections_of: dict[str, list[str]] = defaultdict(list)
        note_of: dict[str, str] = {}
        owners = set(self.ids)
        for key, path, domain, text_hash, note_id, created in rows:
            if note_id not in owners:
                continue
            sections_of[note_id].append(key)
            note_of[key] = note_id
            self._add(key, path, domain, text_hash, "section", _time(created), "")
        return dict(sections_of), note_of

    def add_turns(self, rows) -> tuple[dict[str, list[int]], dict[str, int]]:
        """The conversation turns; returns (session id -> its rows, turn key -> its substance)."""
        session_index = defaultdict(list)
        substance = {}
        for key, path, session, time, text_hash, said in rows:
            session_index[session].append(len(self.ids))
            substance[key] = said or 0
            self._add(key, path, "", text_hash, "turn", time or "", session)
        return dict(session_index), substance


def _time(created) -> str:
    """A memory's `created` as its time in the catalog, when it reads as one."""
    return created if isinstance(created, str) and TIME.fullmatch(created) else ""
