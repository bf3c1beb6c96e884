"""Writers that propose verify tokens take turns: concurrent adds never give two notes one token."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from palace_cli.palace import Palace

from conftest import REPO

# One scene for every writer: with the same notes in view, each would propose the same phrase.
IMAGE = ("A copper kettle hums while nine violet lanterns spin on a velvet turntable, "
         "and a bearded goose in roller skates juggles seven frozen pancakes.")


def add_command(root: Path, i: int) -> list[str]:
    return [sys.executable, "-c", "from palace_cli.cli import main; main()", "--palace", str(root), "add",
            f"Widget {i}", "--domain", "distributed", "--anchor", f"hook number {i}", "--image", IMAGE,
            "--content", f"Widget {i} retries {i} times.", "--no-edit"]


def waiting_on(lock: Path) -> list[str]:
    """The /proc/locks lines of processes blocked on this file's flock."""
    inode = os.stat(lock).st_ino
    lines = Path("/proc/locks").read_text().splitlines()
    return [line for line in lines if "->" in line and line.split()[-3].endswith(f":{inode}")]


def wait_until_queued(lock: Path, procs: list, command: str) -> None:
    """Wait until every process is blocked on the lock; none may finish first (it held no lock)."""
    deadline = time.monotonic() + 120
    while len(waiting_on(lock)) < len(procs):
        finished = [p for p in procs if p.poll() is not None]
        assert not finished, f"one {command} finished while another writer held the lock: " + finished[0].stderr.read()
        assert time.monotonic() < deadline, f"the {command}s never queued on the write lock"
        time.sleep(0.05)


@pytest.mark.slow
def test_concurrent_adds_wait_for_the_write_lock_and_get_distinct_tokens(small_palace):
    palace = Palace(small_palace)
    lock = palace.cache_dir / "write.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    writers = 3
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)   # the test is the writer in front: every add must queue behind it
    procs = [subprocess.Popen(add_command(small_palace, i), cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(writers)]
    try:
        wait_until_queued(lock, procs, "add")
        assert not list((small_palace / "memories" / "distributed").glob("widget-*.md"))
    finally:
        os.close(fd)
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    tokens = {m.id: m.verify for m in palace.scan(light=True).memories.values()}
    new = [tokens[f"widget-{i}"] for i in range(writers)]
    assert all(new), tokens
    assert len(set(new) | {tokens["two-phase-commit"], tokens["saga"], tokens["bloom-filter"]}) == len(tokens)


def supersede_command(root: Path, old: str, new: str) -> list[str]:
    return [sys.executable, "-c", "from palace_cli.cli import main; main()", "--palace", str(root), "supersede",
            old, new]


@pytest.mark.slow
def test_concurrent_supersedes_of_one_note_all_land(small_palace):
    """Issue 25, row 4: each supersede reads, plans and writes the old note under the lock, so none is lost."""
    from palace_cli.editing.authoring import add_memory

    palace = Palace(small_palace)
    writers = 4
    for i in range(writers):
        add_memory(palace, f"Bloom filter v{i}", "storage", anchor=f"lamp post number {i}",
                   image=f"A lamp post hung with {i + 2} humming brass bells guards a hotel of lightbulbs.",
                   content=f"Version {i} of the bloom filter note.")
    lock = palace.cache_dir / "write.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # every supersede queues behind the test, then they race for the lock
    procs = [subprocess.Popen(supersede_command(small_palace, "bloom-filter", f"bloom-filter-v{i}"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(writers)]
    try:
        wait_until_queued(lock, procs, "supersede")
    finally:
        os.close(fd)
    for p in procs:
        _out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    old = palace.memory("bloom-filter")
    assert sorted(old.superseded_by) == [f"bloom-filter-v{i}" for i in range(writers)]


def test_a_writer_waiting_says_whom_for_and_lands_when_the_lock_is_free(small_palace):
    """Issue 34 row 20: `add` while another process holds the write lock (a distill) says at once whom it waits for,
    in one line (it waited silently, 40 s here, 7 minutes for 1,200 turns), and writes when the lock is free."""
    from palace_cli.index.locks import write_lock

    palace = Palace(small_palace)
    with write_lock(palace.site, "palace distill"):
        proc = subprocess.Popen(add_command(small_palace, 1), cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        said = proc.stderr.readline()  # written before it blocks; read while the lock is still held
        assert proc.poll() is None
    out, err = proc.communicate(timeout=300)
    assert said.startswith(f"palace: waiting for process {os.getpid()} (palace distill, for ")
    assert said.endswith("which holds the palace's write lock\n")
    assert proc.returncode == 0, err
    assert (small_palace / "memories" / "distributed" / "widget-1.md").exists()


def test_a_long_writer_in_slices_lets_a_writer_between_and_reads_what_it_wrote(small_palace):
    """Row 20: a long writer (distill) takes the write lock one slice at a time; a writer that comes between two
    slices goes first, and the next slice knows someone wrote (so it reads the palace again)."""
    from palace_cli.index.locks import WriteSlices

    palace = Palace(small_palace)
    slices = WriteSlices(palace.site, "palace distill")
    with slices.slice() as others:
        assert not others
    with slices.slice() as others:
        assert not others  # nobody came between
    done = subprocess.run(add_command(small_palace, 2), cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "waiting" not in done.stderr
    with slices.slice() as others:
        assert others
    with slices.slice() as others:
        assert not others


def test_a_holder_record_the_disk_refuses_leaves_no_earlier_token(tmp_path, monkeypatch):
    """A slice reads the token to learn whether anyone wrote since: a record not written must not keep the last one."""
    import errno

    from palace_cli.index import locks

    fd = os.open(tmp_path / "lock", os.O_RDWR | os.O_CREAT)
    try:
        first = locks._stamp(fd, "first")
        assert locks._token(fd) == first

        def refused(*args):
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(locks.os, "pwrite", refused)
        locks._stamp(fd, "second")
        assert locks._token(fd) is None
        monkeypatch.undo()
        third = locks._stamp(fd, "third")
        assert locks._token(fd) == third
        monkeypatch.setattr(locks.os, "pwrite", lambda fd_, data, offset: 0)  # a short write: nothing written
        locks._stamp(fd, "fourth")
        assert locks._token(fd) is None
    finally:
        os.close(fd)
