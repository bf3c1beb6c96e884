"""Where the last import of a source file ended, so that the next one reads only what was appended since.

A transcript an assistant appends to (a Claude Code session log) grows by a few lines a turn; reading it whole
on every hook costs seconds on a long session. The import stamp of the session it became (conversations/
sessionfile.py) keeps a `resume` record of the read that wrote it:

    resume: {at: 18797226, line: 50000, file: '2049:1311', size: 18797226, mtime: 1764774000123456789,
             sample: 9f2c..., include: [], state: {...}}

`at` is the byte just past the last line read (`line` lines), `file` the file's device and inode, `size` and
`mtime` what it was then, `sample` a hash of the bytes just before `at` and of a few blocks spread over the
ones before (read again to check, never the whole file), `include` what the read took in, and `state` what the
format's reader needs to carry on (for Claude Code: the thread's last record). A file that is not the same one
(another inode: replaced), shorter than `at` (truncated), changed before `at` (the sample differs; or the same
size with another mtime: rewritten in place), or read with other `--include`s is read whole again, as before.
One record format for every reader that can read a tail (formats.Format.resume); JSON exports are one document
that a new export rewrites, so they are always read whole.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from palace_cli.conversations.model import scrub
from palace_cli.core.disk import read_at

SAMPLES = 8  # blocks spread over the bytes before `at`, besides the one just before it
BLOCK = 4096
KEYS = ("at", "line", "file", "size", "mtime", "sample", "include", "state")


def identity(stat: os.stat_result) -> str:
    """A file's identity on this machine: its device and inode (a file replaced by another has a new one)."""
    return f"{stat.st_dev}:{stat.st_ino}"


def sample(fd: int, at: int) -> tuple[str, int]:
    """(a hash of the blocks of the first `at` bytes that a record checks, bytes read for it)."""
    digest = hashlib.sha256(str(at).encode())
    read = 0
    for start in sorted({k * at // SAMPLES for k in range(SAMPLES)} | {max(0, at - BLOCK)}):
        block = read_at(fd, min(BLOCK, at - start), start)
        digest.update(block)
        read += len(block)
    return digest.hexdigest()[:16], read


def mark(fd: int, at: int, line: int, include: frozenset[str], state: dict) -> dict:
    """The resume record of a read that ended at byte `at` after `line` lines of the open file `fd`."""
    stat = os.fstat(fd)
    # A lone surrogate (a JSON `\ud800` in an id) cannot be written: the state keeps U+FFFD, which no record of the
    # tail names, so the next read is a whole one.
    return {"at": at, "line": line, "file": identity(stat), "size": stat.st_size, "mtime": stat.st_mtime_ns,
            "sample": sample(fd, at)[0], "include": sorted(include), "state": scrub(state)[0]}


def is_record(value) -> bool:
    """True when a stamp's `resume` has every key of a record, each of its type (a hand-edited one is not one)."""
    if not isinstance(value, dict) or any(key not in value for key in KEYS):
        return False
    counts = all(type(value[key]) is int and value[key] >= 0 for key in ("at", "line", "size", "mtime"))
    return (counts and isinstance(value["file"], str) and isinstance(value["sample"], str)
            and isinstance(value["include"], list) and isinstance(value["state"], dict))


def where_to_resume(fd: int, record, include: frozenset[str]) -> tuple[int, int, int] | None:
    """(byte, line, bytes read to check) where a read of the open file `fd` carries on from `record`; None when the
    file must be read whole (see the module)."""
    if not is_record(record) or sorted(include) != record["include"]:
        return None
    stat = os.fstat(fd)
    at = record["at"]
    if identity(stat) != record["file"] or stat.st_size < at:
        return None
    if stat.st_size == record["size"] and stat.st_mtime_ns != record["mtime"]:
        return None
    hashed, read = sample(fd, at)
    return (at, record["line"], read) if hashed == record["sample"] else None


def file_identity(path: Path) -> str | None:
    """The identity of the file at a path (None when there is none)."""
    try:
        return identity(os.stat(path))
    except (OSError, ValueError):
        return None
