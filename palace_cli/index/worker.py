"""The background embedding worker: a process of its own that a command starts, embeds what waits, and stops.

`start(site)` takes the embed lock (embedding.py) without waiting and hands it to a new process
(`python -m palace_cli.index.worker ROOT FD`, the descriptor holding the lock passed down), in a session of its
own so that it outlives the command that started it, its output to `.palace/embed.log`. When the lock is
taken, something embeds already and nothing is started, so two commands at once start one worker; and as the
lock is the open descriptor's, a worker killed with -9 leaves nothing stuck. The worker runs at a lower CPU
priority than the commands it serves, commits each batch as it goes (a killed worker loses one batch), embeds
until nothing is missing, looks once more after letting the lock go (a command may have listed new units
while it was finishing) and exits.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from palace_cli.index.embedding import (configured, fill, holder, holding, measured, process_start, try_lock,
                                        up_to_date, write_state)

if TYPE_CHECKING:
    from palace_cli.core.site import Site

NICE = 10  # the worker's and its session's priority: a command run meanwhile gets the CPU first
NICE_ENV = "PALACE_WORKER_NICE"  # another priority for it (0: as high as the commands')
LOG = "embed.log"


def start(site: Site) -> int | None:
    """Start a worker for the palace unless something embeds already; returns its pid (None: none started)."""
    fd = try_lock(site)
    if fd is None:
        return None
    try:
        with open(site.cache_dir / LOG, "wb") as log:
            child = subprocess.Popen([sys.executable, "-m", "palace_cli.index.worker", str(site.root), str(fd)],
                                     pass_fds=(fd,), start_new_session=True, stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=log, cwd=str(site.root))
        write_state(site, pid=child.pid, pid_start=process_start(child.pid), kind="worker", since=time.time(),
                    done=0, total=0, run_rate=None)
    finally:
        os.close(fd)  # the child holds the lock now (the same open file), or nobody does
    return child.pid


def stop(site: Site) -> int | None:
    """Stop the palace's background worker, if one runs (what it committed stays); returns its pid."""
    held = holder(site)
    if not held or held.get("kind") != "worker":
        return None
    try:
        os.kill(held["pid"], signal.SIGTERM)
    except OSError:
        return None
    return held["pid"]


def _lower_priority() -> None:
    """Yield the CPU to the commands the worker serves: its own nice value, and its session's (Linux autogroup)."""
    try:
        nice = int(os.environ.get(NICE_ENV, NICE))
    except ValueError:
        nice = NICE
    if nice <= 0:
        return
    try:
        os.nice(nice)
    except OSError:
        pass
    try:
        with open("/proc/self/autogroup", "w", encoding="ascii") as group:
            group.write(str(nice))
    except OSError:
        pass


def run(root: Path, fd: int) -> int:
    """Embed what waits in the palace at root, holding the lock that `fd` holds; returns an exit status."""
    from palace_cli.core.site import Site
    from palace_cli.index import Index

    site = Site(root)
    index = Index(site)
    while fd is not None:
        with holding(site, fd, "worker"):
            setting = configured(site)
            model = index.dense().embedder if setting.status == "on" else None
            if model is None:
                return 0
            filled = fill(index, model, setting.key,
                          on_batch=lambda d, t, r: write_state(site, done=d, total=t, run_rate=round(r, 2)))
            measured(site, filled)
        fd = None if up_to_date(index, setting.key) else try_lock(site)
    index.close()
    return 0


def main(argv: list[str]) -> int:
    root, fd = Path(argv[0]), int(argv[1])
    _lower_priority()
    try:
        return run(root, fd)
    except Exception:  # a palace deleted or unreadable under it: say why in embed.log, then stop
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
