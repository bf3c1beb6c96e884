"""The palace's locks: one writer at a time (`write_lock`), one refresh at a time (`file_lock`, for refresh.py).

Two processes adding at once would each propose a verify token without seeing the other's new note,
and both could pick the same phrase. Under the write lock the second one's scan reads the first one's
note. Each lock is an flock on a file under `.palace/` (the OS drops it when a process dies); the write
lock is re-entrant inside a process: `add_memory` takes it, and a face that checks a token first may
already hold it.

A process that waits says whom it waits for: the holder writes a one-line record into the lock file
(pid, what it does, since when), and the waiter tells the site (`Site.notice`: the CLI prints it). A
process may bound its waits (`patience`: the Claude Code hook, which must never block), past which the
lock raises Busy. A long writer (distill) takes the lock in slices (`WriteSlices`), so a writer that
comes meanwhile waits for one slice, not the whole run. A lock file that is not a regular file (a FIFO
someone put there blocks whoever opens it to read) is refused in one line, never opened to block.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from palace_cli.errors import PalaceError

if TYPE_CHECKING:
    from palace_cli.core.site import Site

try:
    import fcntl
except ImportError:  # pragma: no cover (Windows: writers are not serialised)
    fcntl = None

POLL_S = 0.02  # how often a bounded wait off the main thread tries the lock again
RECORD_BYTES = 1024  # the holder's record is one short JSON line

_guard = threading.Lock()
_held: dict[str, "_State"] = {}  # lock path -> this process's hold on it
_limit: list[float | None] = [None]  # seconds any lock of this process may be waited for (None: no limit)


class Busy(PalaceError):
    """A lock another process held for longer than this process may wait (see `patience`)."""


@contextmanager
def patience(seconds: float):
    """Within it, every lock this process takes waits at most `seconds`, then raises Busy."""
    before, _limit[0] = _limit[0], seconds
    try:
        yield
    finally:
        _limit[0] = before


def open_lock(path: Path) -> int | None:
    """A descriptor on a lock file (made when missing), or None where none can be made (a read-only palace: its
    write fails on its own, with its own error); PalaceError when the name holds something that is no file."""
    if fcntl is None:  # pragma: no cover
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # O_NONBLOCK: a FIFO put there opens at once (and is refused below) instead of waiting for a writer.
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except IsADirectoryError:
        raise PalaceError(f"{path} is a folder, not a lock file: remove it (palace makes the file again)") from None
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise PalaceError(f"{path} is not a regular file (a FIFO or a device): palace cannot lock it and never "
                          "waits on it; remove it (palace makes the file again)")
    return fd


def holder(fd: int) -> str:
    """Who holds a lock, as its record says: `process 123 (palace distill, for 40 s)`."""
    try:
        record = json.loads(os.pread(fd, RECORD_BYTES, 0).decode("utf-8"))
    except (OSError, ValueError):
        record = None
    if not isinstance(record, dict) or not isinstance(record.get("pid"), int):
        return "another palace process"
    what = record.get("what") if isinstance(record.get("what"), str) else ""
    since = record.get("since")
    held = f"for {max(0, round(time.time() - since))} s" if isinstance(since, (int, float)) else ""
    detail = ", ".join(part for part in (what, held) if part)
    return f"process {record['pid']}" + (f" ({detail})" if detail else "")


def _doing() -> str:
    """What this process is, for a waiter to read: the command it runs (`palace distill`)."""
    words = [os.path.basename(sys.argv[0] or "python")] + [a for a in sys.argv[1:3] if not a.startswith("-")][:1]
    return " ".join(words)[:200]


def _stamp(fd: int, what: str) -> str:
    """Write this holder's record into the lock file; its token."""
    token = f"{os.getpid()}-{time.monotonic_ns()}"
    record = json.dumps({"pid": os.getpid(), "what": what or _doing(), "since": round(time.time(), 3),
                         "token": token}, ensure_ascii=True)[:RECORD_BYTES]
    try:
        # Padded over the whole record's bytes, not truncated first: a truncate waits on the file system's journal
        # (~3 ms each time distill takes the lock for a session); a JSON reader skips the trailing spaces.
        data = record.encode("ascii").ljust(RECORD_BYTES)
        if os.pwrite(fd, data, 0) == len(data):
            return token
    except OSError:
        pass
    try:  # a record not written must not leave the last holder's token: a reader would think nobody wrote since
        os.ftruncate(fd, 0)
    except OSError:
        pass  # the record only informs waiters; the flock is the lock
    return token


def _token(fd: int) -> str | None:
    try:
        record = json.loads(os.pread(fd, RECORD_BYTES, 0).decode("utf-8"))
    except (OSError, ValueError):
        return None
    return record.get("token") if isinstance(record, dict) else None


def _take(fd: int, name: str, notify: Callable[[str], None] | None) -> None:
    """Take the flock on fd, saying whom it waits for when it must; Busy past this process's patience."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    who = holder(fd)
    limit = _limit[0]
    if notify is not None:
        notify(f"waiting for {who}, which holds the palace's {name}"
               + (f" (at most {limit:g} s)" if limit is not None else ""))
    if limit is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
    elif not _bounded(fd, limit):
        raise Busy(f"the palace's {name} is held by {who}; not waited for more than {limit:g} s")


class _Late(Exception):
    pass


def _bounded(fd: int, limit: float) -> bool:
    """Wait at most `limit` seconds for the flock: blocked in the kernel (an alarm ends the wait) on the main
    thread, polling elsewhere. True when it was taken."""
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        def late(_signum, _frame):
            raise _Late

        before = signal.signal(signal.SIGALRM, late)
        try:
            signal.setitimer(signal.ITIMER_REAL, max(limit, 0.001))
            fcntl.flock(fd, fcntl.LOCK_EX)
            return True
        except _Late:
            return False
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, before)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        time.sleep(POLL_S)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            continue
    return False


@contextmanager
def file_lock(path: Path, name: str, notify: Callable[[str], None] | None = None):
    """Hold the flock on one lock file for this block (not re-entrant: the refresh lock). It writes no record:
    every read refreshes, and a read changes no file but the caches it must."""
    fd = open_lock(path)
    if fd is None:
        yield
        return
    try:
        _take(fd, name, notify)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


class _State:
    """This process's hold on one write lock: the thread lock, the depth, the descriptor and its record."""

    def __init__(self):
        self.rlock = threading.RLock()
        self.depth = 0
        self.fd: int | None = None
        self.token: str | None = None
        self.previous: str | None = None  # the token the lock file held when it was taken: the last holder's


class Held:
    """The write lock as held: `previous`, the last holder's token (another process's when someone wrote
    between two holds of this one), and `token`, this hold's own."""

    def __init__(self, state: _State):
        self.previous, self.token = state.previous, state.token


@contextmanager
def write_lock(site: Site, what: str = ""):
    """Hold the palace's write lock; waits (saying whom for, through the site's notices) while another process
    holds it, at most as long as this process's `patience`. Yields a Held."""
    path = site.cache_dir / "write.lock"
    with _guard:
        state = _held.setdefault(str(path), _State())
    with state.rlock:
        if state.depth == 0:
            fd = open_lock(path)
            try:
                if fd is not None:
                    _take(fd, "write lock", getattr(site, "notice", None))
            except BaseException:
                os.close(fd)
                raise
            state.fd = fd
            state.previous = _token(fd) if fd is not None else None
            state.token = _stamp(fd, what) if fd is not None else None
        state.depth += 1
        try:
            yield Held(state)
        finally:
            state.depth -= 1
            if state.depth == 0 and state.fd is not None:
                os.close(state.fd)  # closing the descriptor releases the lock
                state.fd = None


class WriteSlices:
    """A long writer's turns at the write lock: each `slice()` holds it for one piece of work and yields True
    when another process wrote since this writer's last slice (or since it was made), so what it read of the
    palace may be stale. Between slices a waiting writer goes first."""

    def __init__(self, site: Site, what: str = ""):
        self.site, self.what = site, what
        fd = open_lock(site.cache_dir / "write.lock")
        self.last = _token(fd) if fd is not None else None
        if fd is not None:
            os.close(fd)

    @contextmanager
    def slice(self):
        """Hold the write lock for one slice; yields whether another process wrote since the last one."""
        with write_lock(self.site, self.what) as held:
            others = held.previous != self.last and self.last != held.token
            yield others
            self.last = held.token
