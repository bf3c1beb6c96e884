"""The palace a language server serves, and the Snapshot of its caches, kept current in the background.

Three Palace objects over one palace, each with its own SQLite connection and used by one thread:
requests (the server's event loop: `palace`), the watcher's refreshes, and the snapshot builder. The
keeper loads the cache as it is at once (or, with no cache yet, reads the note files themselves: a cold
snapshot, right from the first answer), refreshes it (the notes and the lexical index: answers from a cache
wait for that, a few seconds at most, and lint waits for it; not for embeddings), then runs the watcher (`index/watcher.py`, refreshing through
`Palace.refresh` as `palace watch` does); after each refresh that
changed the note store it builds a new Snapshot and swaps it in, so no request waits for a 10,000-note
table to be built.
"""

from __future__ import annotations

import logging
import threading
import traceback
from pathlib import Path
from typing import Callable

from palace_cli.core.config import CONFIG_NAME, find_root
from palace_cli.errors import PalaceError
from palace_cli.lsp.snapshot import Snapshot
from palace_cli.palace import Palace

log = logging.getLogger("palace.lsp")


class Keeper:
    """The served palace and its current Snapshot. Callbacks, called from background threads: `notify(message)`
    for a palace notice, `changed()` after each new snapshot (and once the first refresh is done),
    `config_changed()` when palace.toml changed; `may_write_index_files()` is asked before each refresh."""

    def __init__(self, explicit: str | None, notify: Callable[[str], None], changed: Callable[[], None],
                 config_changed: Callable[[], None], may_write_index_files: Callable[[], bool]):
        self.explicit = explicit
        self.palace: Palace | None = None
        self.snapshot: Snapshot | None = None
        self.refreshed = False  # the first refresh is done: diagnostics may start
        self.watcher = None
        self._notify, self._changed, self._config_changed = notify, changed, config_changed
        self._may_write_index_files = may_write_index_files
        self._reader: Palace | None = None
        self._build_lock = threading.Lock()
        self._building = False
        self._stopped = False

    def find(self, starts: list[Path]) -> None:
        """Find the palace: --palace (or $PALACE_DIR), else walking up from the workspace, the cwd or a file.
        PalaceError for a palace.toml that cannot be read."""
        if self.palace is not None:
            return
        if self.explicit:
            self.palace = self._noticed(Palace.find(self.explicit))
            return
        for start in starts:
            try:
                root = find_root(start=start.parent if start.is_file() else start, explicit=None)
            except (PalaceError, OSError, ValueError):
                continue
            self.palace = self._noticed(Palace(root))
            return

    def _noticed(self, palace: Palace) -> Palace:
        palace.notify = self._notify
        return palace

    def start(self) -> None:
        """Load, refresh and watch, on a thread of its own."""
        threading.Thread(target=self._background, name="palace-lsp-start", daemon=True).start()

    def _background(self) -> None:
        from palace_cli.index.watcher import Watcher

        self._reader = self._noticed(Palace(self.palace.root))
        self._first_build()
        try:
            self._reader.refresh(embedder=None, index_files=self._may_write_index_files())
        except Exception:
            log.error("the first refresh failed:\n%s", traceback.format_exc())
        self.refreshed = True
        self._build(force=True)
        if self._stopped:
            return
        watched = self._noticed(Palace(self.palace.root))
        watcher = Watcher(watched.site, self._refresh(watched), self._watched, reload=watched.reload_config)
        try:
            watcher.start()
        except Exception:
            log.error("the watcher did not start:\n%s", traceback.format_exc())
            return
        # Published once started: a stop that came meanwhile found no watcher to stop, so it is stopped here
        # (stopping a half-started one would join threads that have not started).
        self.watcher = watcher
        if self._stopped:
            self.stop()

    def _first_build(self) -> None:
        """The first snapshot: of the cache, or with none yet (a new `.palace/`), of the note files themselves."""
        try:
            store = self._reader.index.store
            if store.count() == 0 and not store.errors():
                with self._build_lock:
                    self.snapshot = Snapshot.cold_load(self._reader, store.version())
                self._changed()
                return
        except Exception:
            log.error("could not read the notes:\n%s", traceback.format_exc())
        self._build()

    def _refresh(self, palace: Palace):
        """How the watcher refreshes: as every command does, the index files left alone while the editor has one open."""
        return lambda progress: palace.refresh(progress=progress, index_files=self._may_write_index_files())

    def _watched(self, event) -> None:
        """A watcher event (on the watcher's thread): a refresh that changed something means a new snapshot."""
        if event.kind in ("started", "refreshed"):
            if CONFIG_NAME in event.triggers:
                self._config_changed()
            self._build()

    def reload_config(self) -> None:
        """Read palace.toml again (on the thread that uses `palace`)."""
        try:
            self.palace.reload_config()
            if self._reader is not None:
                self._reader.reload_config()
        except PalaceError as exc:
            log.info("palace.toml: %s", exc)

    def _build(self, force: bool = False) -> None:
        """Make the snapshot of the cache as it is now, when it changed, and say so (force: say so even when the
        cache did not change: the first refresh is done, diagnostics may start)."""
        with self._build_lock:
            if not force and not self.refreshed and self.snapshot is not None and self.snapshot.cold:
                self._building = False
                return  # the cold snapshot is right; the cache is being filled
            try:
                version = self._reader.index.store.version()
                if self.snapshot is not None and self.snapshot.version == version:
                    if force:
                        self._changed()
                    return
                snapshot = Snapshot.load(self._reader)
                snapshot.backlinks("")  # build the backlink table here rather than in the first request
            except Exception:
                log.error("could not read the palace's cache:\n%s", traceback.format_exc())
                return
            finally:
                self._building = False
            self.snapshot = snapshot
        self._changed()

    def current(self) -> Snapshot | None:
        """The snapshot to answer from; a newer cache (another process refreshed) is loaded in the background."""
        if self.palace is None or self.snapshot is None:
            return None
        settled = self.refreshed or not self.snapshot.cold  # a cold snapshot stands until the first refresh is done
        if settled and self.palace.index.store.version() != self.snapshot.version and not self._building \
                and self._reader:
            self._building = True
            threading.Thread(target=self._build, name="palace-lsp-snapshot", daemon=True).start()
        return self.snapshot

    @property
    def ready(self) -> bool:
        """The tables are of the notes as they are on disk: the first refresh is done, or there was no cache and
        the cold snapshot was read from the files (answers wait for this, a few seconds at most)."""
        return self.snapshot is not None and (self.refreshed or self.snapshot.cold)

    def stop(self) -> None:
        """Stop the watcher (idempotent; a watcher still starting is stopped once it has started)."""
        self._stopped = True
        watcher, self.watcher = self.watcher, None
        if watcher is not None:
            watcher.stop()
