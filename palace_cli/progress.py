"""The one shape of progress reports: core code calls `progress(stage, done, total)`; faces render it.

`total` is 0 when the amount of work is unknown (waiting for a lock, say). Core code never prints:
the CLI turns these calls into a rich progress bar, the watcher into events, tests into lists.
"""

from __future__ import annotations

from typing import Callable

Progress = Callable[[str, int, int], None]

__all__ = ["Progress"]
