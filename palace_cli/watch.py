"""The watcher of a palace, for the `palace watch` command and for Python programs: a palace refreshed
(`Palace.refresh`, as every command refreshes) a moment after its notes change.

The observer, its debounce and its retries are `index/watcher.py`; this face binds them to a Palace.
"""

from __future__ import annotations

from typing import Callable

from palace_cli.index import watcher
from palace_cli.index.watcher import DEBOUNCE_S, MAX_DELAY_S, WatchEvent, relevant
from palace_cli.palace import Palace
from palace_cli.progress import Progress


class Watcher(watcher.Watcher):
    """Watches one palace and refreshes it; call start(), then wait() or stop(). Reports through on_event.
    `index_files` is asked before each refresh: False leaves INDEX.md and index/*.md as they are; other options
    (`embedder=`) are Palace.refresh's. With the configured embedder, the watcher is what embeds: a refresh
    leaves the vectors to it, and it embeds them between saves (a save goes first)."""

    def __init__(self, palace: Palace, on_event: Callable[[WatchEvent], None] | None = None, *,
                 progress: Progress | None = None, debounce: float = DEBOUNCE_S, max_delay: float = MAX_DELAY_S,
                 index_files: Callable[[], bool] = lambda: True, **refresh_options):
        embeds = "embedder" not in refresh_options
        if embeds:
            refresh_options.setdefault("vectors", "later")

        def refresh(progress: Progress | None):
            return palace.refresh(progress=progress, index_files=index_files(), **refresh_options)

        super().__init__(palace.site, refresh, on_event, reload=palace.reload_config, progress=progress,
                         debounce=debounce, max_delay=max_delay, embed=palace.embed_some if embeds else None)
        self.palace = palace


def watch(palace: Palace, on_event: Callable[[WatchEvent], None] | None = None, **options) -> Watcher:
    """Start a Watcher on the palace and return it (call .wait() to block, .stop() to end)."""
    watcher = Watcher(palace, on_event, **options)
    watcher.start()
    return watcher


__all__ = ["Watcher", "WatchEvent", "watch", "relevant"]
