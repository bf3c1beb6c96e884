"""The palace's write lock: one writer at a time from reading what the palace holds to writing a note.

Two processes adding at once would each propose a verify token without seeing the other's new note,
and both could pick the same phrase. Under the lock the second one's scan reads the first one's note.
It is an flock on `.palace/write.lock` (the OS drops it when a process dies), re-entrant inside a
process: `add_memory` takes it, and a face that checks a token first may already hold it.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from palace_cli.core.site import Site

try:
    import fcntl
except ImportError:  # pragma: no cover (Windows: writers are not serialised)
    fcntl = None

_guard = threading.Lock()
_held: dict[str, list] = {}  # lock path -> [RLock, depth, fd or None]


@contextmanager
def write_lock(site: Site):
    """Hold the palace's write lock; waits while another process holds it."""
    path = site.cache_dir / "write.lock"
    with _guard:
        state = _held.setdefault(str(path), [threading.RLock(), 0, None])
    with state[0]:
        if state[1] == 0:
            state[2] = _acquire(path)
        state[1] += 1
        try:
            yield
        finally:
            state[1] -= 1
            if state[1] == 0 and state[2] is not None:
                os.close(state[2])  # closing the descriptor releases the lock
                state[2] = None


def _acquire(path) -> int | None:
    """A descriptor holding the flock, or None where no lock can be taken (a read-only palace fails
    at its write anyway, with its own error)."""
    if fcntl is None:  # pragma: no cover
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return None
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd
