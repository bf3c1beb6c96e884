"""The watcher: a watchdog observer that has a palace refreshed a moment after its notes change.

Editors save in odd ways (write a swap or temp file and rename it over the note, rename the note to a
backup first, create a folder and then a file in it). The watcher does not try to follow each file: any
event that touches a note, a session file, a folder under memories/ or conversations/ (in an adopted vault,
a note or a folder anywhere), or palace.toml marks the palace dirty, and once the
events go quiet for `debounce` seconds (or `max_delay` after the first one) it runs the same incremental
refresh every command runs, which stats the whole tree and works out what changed. Idle, both threads
block on the kernel (inotify) or on a condition variable: no polling.

It is driven by callbacks: it watches a `Site` (what to watch, which paths matter) and calls the `refresh`
and `reload` its owner gives (the faces give `Palace.refresh` and `Palace.reload_config`: watch.py, the
language server's keeper).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from watchdog.events import FileSystemEventHandler
from watchdog.observers import Observer

from palace_cli.conversations import CONVERSATIONS
from palace_cli.core.config import CONFIG_NAME
from palace_cli.core.layout import MEMORIES, NoteRules, skipped
from palace_cli.errors import PalaceError
from palace_cli.progress import Progress

if TYPE_CHECKING:
    from palace_cli.core.site import Site
    from palace_cli.index.refresh import RefreshReport

DEBOUNCE_S = 0.2
MAX_DELAY_S = 0.8
RETRY_S = 2.0
IGNORED_SUFFIXES = ("~", ".swp", ".swx", ".swo", ".tmp", ".part", ".crdownload")
IGNORED_EVENTS = {"opened", "closed_no_write"}
CONTENT_DIRS = (MEMORIES, CONVERSATIONS)  # what a refresh reads besides palace.toml; each watched recursively


@dataclass
class WatchEvent:
    """What the watcher did: started, refreshed, error, stopped."""

    kind: str
    report: RefreshReport | None = None
    triggers: list[str] = field(default_factory=list)  # paths (relative to the root) whose events caused it
    seconds: float = 0.0
    error: str = ""

    def as_dict(self) -> dict:
        """JSON-ready form (one line per event in `palace watch --json`)."""
        data = {"event": self.kind, "triggers": self.triggers, "seconds": round(self.seconds, 4)}
        if self.report is not None:
            data["report"] = self.report.as_dict()
        if self.error:
            data["error"] = self.error
        return data


def relevant(relpath: str, rules: NoteRules | None = None) -> bool:
    """True when an event on this path (relative to the root, '/'-separated) can change the palace. In an
    adopted vault (`rules` of one) a note or folder anywhere can; palace's own generated files cannot."""
    if relpath == CONFIG_NAME or relpath in CONTENT_DIRS:
        return True
    adopted = rules is not None and rules.adopted
    if not adopted and not relpath.startswith(tuple(d + "/" for d in CONTENT_DIRS)):
        return False
    name = relpath.rsplit("/", 1)[-1]
    if name.startswith((".", "#")) or name.endswith(IGNORED_SUFFIXES) or name == "4913":
        return False  # editor swap, lock, backup and probe files; our own atomic-write temp files
    if any(skipped(part) for part in relpath.split("/")[:-1]):
        return False  # .obsidian/, .trash/, .palace/, node_modules/: never read (the walk's rule)
    if adopted and not relpath.startswith(CONVERSATIONS + "/"):
        if name.lower().endswith(".md"):
            return rules.wanted(relpath)
        return "." not in name and not rules.pruned(relpath)  # a folder (of notes, maybe), not an image
    return True


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: "Watcher"):
        self.watcher = watcher

    def on_any_event(self, event) -> None:
        if event.event_type in IGNORED_EVENTS:
            return
        if event.is_directory and event.event_type == "modified":
            return  # a child's own event says what changed
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            if raw:
                self.watcher.notice(os.fsdecode(raw))


class Watcher:
    """Watches one palace's site; call start(), then wait() or stop(). Each refresh is `refresh(progress)`, a
    changed palace.toml is `reload()` first; what happened is reported through on_event."""

    def __init__(self, site: Site, refresh: Callable[[Progress | None], RefreshReport],
                 on_event: Callable[[WatchEvent], None] | None = None, *, reload: Callable[[], None] = lambda: None,
                 progress: Progress | None = None, debounce: float = DEBOUNCE_S, max_delay: float = MAX_DELAY_S):
        self.site = site
        self.refresh = refresh
        self.reload = reload
        self.on_event = on_event or (lambda event: None)
        self.progress = progress
        self.debounce = debounce
        self.max_delay = max_delay
        self._cond = threading.Condition()
        self._triggers: list[str] = []
        self._first = self._last = 0.0
        self._config_changed = False
        self._stopping = False
        self._stopped = threading.Event()
        self._observer = None
        self._content_watches: dict[str, object] = {}
        self._worker = None
        self._root = str(site.root)

    # ---- lifecycle --------------------------------------------------------------------------

    def start(self, initial_refresh: bool = True) -> RefreshReport | None:
        """Start watching (the observer first, so nothing saved during the first refresh is missed)."""
        self._observer = Observer()
        adopted = self.site.adopted  # an adopted vault's notes are anywhere: the whole tree is watched
        self._observer.schedule(_Handler(self), self._root, recursive=adopted)
        for name in () if adopted else CONTENT_DIRS:
            self._watch_content(name)
        self._observer.start()
        report = None
        if initial_refresh:
            report = self._run([], progress=self.progress, announce=False)
        self._worker = threading.Thread(target=self._loop, name="palace-watch", daemon=True)
        self._worker.start()
        self.on_event(WatchEvent("started", report))
        return report

    def stop(self) -> None:
        """Stop the observer and the worker (a refresh in progress finishes first)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._observer is not None:
            self._observer.stop()
            if self._observer.ident is not None:  # never started: start() failed or has not got that far
                self._observer.join(timeout=5)
        if self._worker is not None and self._worker.ident is not None \
                and self._worker is not threading.current_thread():
            self._worker.join()
        if not self._stopped.is_set():
            self._stopped.set()
            self.on_event(WatchEvent("stopped"))

    def wait(self) -> None:
        """Block until stop(); Ctrl-C raises KeyboardInterrupt here."""
        self._stopped.wait()

    def __enter__(self) -> "Watcher":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _watch_content(self, name: str) -> None:
        """(Re)watch memories/ or conversations/ recursively: it may appear after start (the first import
        makes conversations/), or be replaced whole by a git checkout."""
        old = self._content_watches.pop(name, None)
        if old is not None:
            self._observer.unschedule(old)
        folder = self.site.root / name
        if folder.is_dir():
            self._content_watches[name] = self._observer.schedule(_Handler(self), str(folder), recursive=True)

    # ---- events -----------------------------------------------------------------------------

    def notice(self, path: str) -> None:
        """Called from the observer thread for each path an event names."""
        if not path.startswith(self._root):
            return
        relpath = path[len(self._root) + 1 :].replace(os.sep, "/")
        if not relevant(relpath, self.site.rules):
            return
        if relpath in CONTENT_DIRS and not self.site.adopted:
            try:
                self._watch_content(relpath)
            except (OSError, KeyError):
                pass  # gone again; the refresh below sees whatever is there
        now = time.monotonic()
        with self._cond:
            if not self._triggers:
                self._first = now
            self._last = now
            self._triggers.append(relpath)
            self._config_changed |= relpath == CONFIG_NAME
            self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._triggers and not self._stopping:
                    self._cond.wait()  # idle: blocked, no timeout, no CPU
                if self._stopping:
                    return
                while not self._stopping:
                    wait = min(self._last + self.debounce, self._first + self.max_delay) - time.monotonic()
                    if wait <= 0:
                        break
                    self._cond.wait(wait)
                if self._stopping:
                    return
                triggers = sorted(set(self._triggers))
                self._triggers = []
                config_changed, self._config_changed = self._config_changed, False
            if config_changed:
                self._reload_config()
            self._run(triggers)

    def _reload_config(self) -> None:
        try:
            self.reload()  # the [models] setting may have changed: the embedder is looked up again
        except PalaceError as exc:
            self.on_event(WatchEvent("error", error=str(exc)))

    def _run(self, triggers: list[str], progress: Progress | None = None, announce: bool = True) -> RefreshReport | None:
        started = time.perf_counter()
        try:
            report = self.refresh(progress)
        except Exception as exc:  # the watcher outlives any one failed refresh; it retries shortly
            self.on_event(WatchEvent("error", triggers=triggers, seconds=time.perf_counter() - started,
                                     error=f"{type(exc).__name__}: {exc}"))
            self._retry_later(triggers)
            return None
        if announce:
            self.on_event(WatchEvent("refreshed", report, triggers, time.perf_counter() - started))
        return report

    def _retry_later(self, triggers: list[str]) -> None:
        def again():
            with self._cond:
                if not self._stopping:
                    now = time.monotonic()
                    self._first = self._first if self._triggers else now
                    self._last = now
                    self._triggers += triggers or [MEMORIES]
                    self._cond.notify_all()

        timer = threading.Timer(RETRY_S, again)
        timer.daemon = True
        timer.start()


__all__ = ["DEBOUNCE_S", "MAX_DELAY_S", "Watcher", "WatchEvent", "relevant"]
