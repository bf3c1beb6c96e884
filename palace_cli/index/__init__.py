"""The index room: everything under .palace/ and the generated index files, owned by one object per palace.

The Markdown notes are the truth; what this package keeps is derived and rebuildable: the note store
(SQLite, `store`), the lexical index (Whoosh, `text`), the vectors (`vectors`), the ranking catalog
(`catalog`), the generated INDEX.md and index/*.md (`files`) and the incremental refresh that keeps them
all in step (`refresh`). An `Index` is opened on a `core.site.Site` (root, palace.toml, the note rules and
walker), never on a Palace; `Palace.index` is the one `Index` of a palace in a process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from palace_cli.index.store import NoteStore
from palace_cli.index.vectors import VectorStore

if TYPE_CHECKING:
    import numpy as np

    from palace_cli.backends import Embedder
    from palace_cli.core.names import Names
    from palace_cli.core.notes import Memory
    from palace_cli.core.site import Site
    from palace_cli.core.layout import Problem, Scan
    from palace_cli.core.validity import Versions
    from palace_cli.index.catalog import Catalog
    from palace_cli.index.text import TextIndex


class Dense(NamedTuple):
    """Whether dense ranking is available: the embedder (or None), status "on"/"off"/"disabled", and why not."""

    embedder: Embedder | None
    status: str
    reason: str


class Index:
    """The caches of one palace, opened once per process. Per-process derived state is declared here and
    keyed by what it derives from (the note store's version, the vectors' generation), so a refresh that
    changed something is seen without anyone having to invalidate it."""

    def __init__(self, site: Site):
        self.site = site
        cache = site.cache_dir
        try:
            cache.mkdir(parents=True, exist_ok=True)
            self.store = NoteStore(cache / "notes.sqlite")
        except Exception as exc:
            from palace_cli.core.disk import disk_error

            raise disk_error(exc, f"cannot open the cache under {cache}", where=cache) or exc
        from palace_cli.index.text import TextIndex  # here: whoosh's import is a hook's whole budget; locks need none

        self.text: TextIndex = TextIndex(cache / "whoosh")
        self.vectors = VectorStore(cache / "vectors")
        self._dense: Dense | None = None
        self._catalog: tuple[tuple, Catalog] | None = None
        self._scans: dict[bool, tuple[int, dict]] = {}
        self._light_rows: dict[str, tuple[int, Memory]] = {}  # unchanged rows keep their Memory across versions
        self._names: tuple[int, Names] | None = None
        self._versions: tuple[int, Versions] | None = None
        self._query_vectors: dict[str, np.ndarray] = {}
        self.problems: list[Problem] = []  # what the last refresh in this process could not index

    # ---- models -----------------------------------------------------------------------------

    def dense(self) -> Dense:
        """The configured embedder, loaded once per process (palace.toml [models] embedder)."""
        if self._dense is None:
            from palace_cli.backends import load_model, model_setting
            from palace_cli.index.embedding import MISSING_REASON, OFF_REASON

            setting = model_setting(self.site.config.models, "embedder", self.site.root)
            if setting.kind == "off":
                self._dense = Dense(None, "disabled", OFF_REASON)
            else:
                embedder = load_model(setting)
                self._dense = Dense(embedder, "on", "") if embedder is not None else Dense(None, "off", MISSING_REASON)
        return self._dense

    def query_vector(self, query: str) -> np.ndarray | None:
        """The embedding of a query (cached for the process), or None without an embedder."""
        embedder = self.dense().embedder
        if embedder is None:
            return None
        if query not in self._query_vectors:
            import numpy as np

            self._query_vectors[query] = np.asarray(embedder.embed_batch([query])[0], dtype=np.float32)
        return self._query_vectors[query]

    # ---- views of the refreshed cache -------------------------------------------------------

    def catalog(self) -> Catalog:
        """The ranking catalog for the cache as it is now (rebuilt when notes or vectors changed)."""
        from palace_cli.index.catalog import build_catalog

        key = (self.store.version(), self.vectors.generation())
        if self._catalog is None or self._catalog[0] != key:
            self._catalog = (key, build_catalog(self))
        return self._catalog[1]

    def versions(self) -> Versions:
        """The version graph of the cache as it is now (validity in time; kept while no note changes)."""
        import json

        from palace_cli.core.validity import Entry, Versions

        version = self.store.version()
        if self._versions is None or self._versions[0] != version:
            entries = (Entry(i, valid_from or "", valid_until or "", created or "", tuple(json.loads(old or "[]")),
                             tuple(json.loads(new or "[]")))
                       for i, created, valid_from, valid_until, old, new in self.store.validity_rows())
            self._versions = (version, Versions(entries))
        return self._versions[1]

    def scan(self, light: bool = False) -> Scan:
        """Every indexed memory by id (light: only the fields listings show) with the last refresh's problems."""
        from palace_cli.core.layout import Scan
        from palace_cli.index.store import cached_memories

        version = self.store.version()
        cached = self._scans.get(light)
        if cached is None or cached[0] != version:
            memories = cached_memories(self.store, light=light, reuse=self._light_rows if light else None)
            if not light:  # full memories carry their body links: resolve every link once per version
                names = self.names()
                for memory in memories.values():
                    memory.link_ids = names.link_ids(memory)
            cached = (version, memories)
            self._scans[light] = cached
        return Scan(memories=dict(cached[1]), problems=list(self.problems))

    def names(self) -> Names:
        """The names of every indexed memory (ids, paths, file names, aliases, subjects, anchors), once per version."""
        from palace_cli.core.names import Names

        version = self.store.version()
        if self._names is None or self._names[0] != version:
            self._names = (version, Names(self.scan(light=True).memories.values()))
        return self._names[1]

    def forget_query_vectors(self) -> None:
        """Drop the cached query embeddings (a benchmark times each query embedding itself)."""
        self._query_vectors.clear()

    def forget(self) -> None:
        """Drop per-process state that palace.toml decides (after the watcher reloads it)."""
        self._dense = None
        self._catalog = None
        self._versions = None
        self._scans.clear()
        self._names = None
        self._query_vectors.clear()

    def close(self) -> None:
        """Close the note store's connection and the lexical index's open searcher."""
        self.store.close()
        self.text.close()


__all__ = ["Dense", "Index"]
