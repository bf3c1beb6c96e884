"""Files on a disk that can refuse: capped reads, atomic writes, a palace that cannot be written (its cache moves
elsewhere), a full disk (one clear error), and temp files a killed process left behind (swept, never a live writer's)."""

from __future__ import annotations

import atexit
import errno
import hashlib
import os
import re
import shutil
import sqlite3
import stat
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, NoReturn

from palace_cli.errors import DiskError, NoteError

# A place that refuses writes: the cache moves to one that takes them.
REFUSED = {errno.EROFS, errno.EACCES, errno.EPERM}
# A disk that takes no more: nothing moves (the user cache is usually on the same disk); one clear error.
FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
DISK = REFUSED | FULL | {errno.EIO}
SQLITE_DISK = ("SQLITE_FULL", "SQLITE_READONLY", "SQLITE_IOERR", "SQLITE_CANTOPEN")  # and their extended codes
# `.<name>.<pid>.<mkstemp's 8 characters>.tmp`: the pid says whether the writer still runs.
TEMP = re.compile(r"^\.(.+?)(?:\.(\d+))?\.[a-z0-9_]{8}\.tmp$")
UNOWNED_STALE_S = 3600  # a temp file without a pid (an older palace wrote it) is swept after an hour
SEED_SKIP = ("lock", "*-shm", ".*.tmp")
SYNC_THREADS = 8  # fsyncs waiting together on the disk (threads that wait, not compute)
SYNC_CHUNK = 64  # temp files a batch keeps open at once (a soft limit on open files can be 256)


def temp_prefix(path: Path) -> str:
    """The mkstemp prefix for a temp file beside `path`: hidden, named after it, carrying this process's pid."""
    return f".{path.name}.{os.getpid()}."


def disk_error(exc: BaseException, doing: str, outcome: str = "", where: Path | None = None) -> DiskError | None:
    """A DiskError saying `doing` failed, why, and `outcome` (what was kept), when exc is a disk refusing a write;
    else None. `where` lets SQLite's "disk I/O error" say when the real cause is a full disk."""
    if isinstance(exc, DiskError):
        return exc
    if isinstance(exc, OSError) and exc.errno in DISK:
        code, why = exc.errno, exc.strerror
    elif isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorname", "").startswith(SQLITE_DISK):
        code = errno.ENOSPC if exc.sqlite_errorname.startswith("SQLITE_FULL") else errno.EIO
        why = str(exc)
        if code == errno.EIO and where is not None and _full(where):
            code, why = errno.ENOSPC, f"{why} ({os.strerror(errno.ENOSPC)})"
    else:
        return None
    hint = "; free some space and run it again" if code in FULL else ""
    return DiskError(code, f"{doing}: {why}{'; ' + outcome if outcome else ''}{hint}")


def _full(path: Path) -> bool:
    """True when the file system holding path has no block left for this user."""
    try:
        return os.statvfs(path).f_bavail == 0
    except OSError:
        return False


def _refusal(directory: Path) -> str | None:
    """Why a cache cannot live in directory (a read-only file system, permissions), or None when it can.

    A full disk is not a refusal: it raises DiskError (moving the cache would not make room)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        os.close(os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o644))
    except OSError as exc:
        if exc.errno in REFUSED:
            return exc.strerror
        raise disk_error(exc, f"cannot write the cache under {directory}") or exc
    return None


def user_cache_root() -> Path:
    """Where palace keeps per-user caches: $PALACE_HOME/cache, else the user cache dir ($XDG_CACHE_HOME/palace)."""
    home = os.environ.get("PALACE_HOME")
    if home:
        return Path(home).expanduser() / "cache"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("palace"))


def locate_cache(own: Path) -> tuple[Path, str]:
    """(cache directory, notice) for a palace whose own cache is `own` (<root>/.palace).

    The notice is empty when the cache is its own. When the palace cannot be written (a read-only mount, a CI
    checkout, a clone of someone else's), the cache is a folder of the user's cache named by a hash of the
    palace's path, seeded once from the palace's own cache when it has one (vectors are costly to remake);
    when that cannot be written either, a temporary folder removed at exit."""
    reason = _refusal(own)
    if reason is None:
        return own, ""
    root = own.parent
    digest = hashlib.sha256(str(root).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    elsewhere = user_cache_root() / "palaces" / digest
    try:
        _seed(own, elsewhere)
        if _refusal(elsewhere) is None:
            return elsewhere, f"cannot write the cache in {root} ({reason}); using {elsewhere}"
    except OSError:
        pass
    temporary = Path(tempfile.mkdtemp(prefix="palace-cache-"))
    atexit.register(shutil.rmtree, temporary, ignore_errors=True)
    return temporary, f"cannot write the cache in {root} ({reason}) nor in {elsewhere}; using {temporary} for now"


def _seed(own: Path, target: Path) -> None:
    """Copy the palace's own cache into target when target has none (into a temp folder, then one rename)."""
    if (target / "notes.sqlite").exists() or not (own / "notes.sqlite").is_file():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        shutil.copytree(own, staging, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*SEED_SKIP))
        if target.exists():
            shutil.rmtree(target)  # an empty or half-made folder: nothing in it was a cache yet
        os.rename(staging, target)
    except OSError:
        pass  # another process seeded it first, or the copy failed: the cache is rebuilt from the notes
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _alive(pid: int) -> bool:
    """True when a process with this pid runs on this machine (a zombie does not count)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, owned by someone else
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def is_stray_temp(path: str) -> bool:
    """True when path is a temp file of palace's writes whose writer is gone (dead pid, or unowned and old)."""
    match = TEMP.match(os.path.basename(path))
    if match is None:
        return False
    if match.group(2) is not None:
        return not _alive(int(match.group(2)))
    if not match.group(1).endswith(".md"):
        return False  # not a note's: perhaps another tool's, leave it
    try:
        return time.time() - os.lstat(path).st_mtime > UNOWNED_STALE_S
    except OSError:
        return False


def sweep_temps(paths, folders=()) -> list[str]:
    """Remove the stray temp files among paths and in folders (not recursively); returns those removed.

    A folder that cannot be written (a read-only palace) keeps its temp files, silently."""
    candidates = list(paths)
    for folder in folders:
        try:
            candidates += [entry.path for entry in os.scandir(folder) if entry.name.endswith(".tmp")]
        except OSError:
            continue
    removed = []
    for path in candidates:
        if is_stray_temp(path):
            try:
                os.unlink(path)
                removed.append(path)
            except OSError:
                pass
    return removed


def read_at(fd: int, size: int, offset: int) -> bytes:
    """Up to `size` bytes of an open file from `offset` (os.pread where the platform has it: Windows has not)."""
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    os.lseek(fd, offset, os.SEEK_SET)
    return os.read(fd, size)


def read_capped(path: Path, shown: str, limit: int, what: str) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (`what` names it in errors); NoteError otherwise,
    before reading a byte of a file that is too big, so a huge or endless file never fills memory."""
    try:
        # O_NONBLOCK: opening a FIFO named like a note must not wait for a writer forever.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise NoteError(shown, f"cannot read: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise NoteError(shown, "not a regular file; not read")
            if info.st_size > limit:
                raise NoteError(shown, f"file is {info.st_size:,} bytes, over the {limit:,} byte limit for {what}")
            data = handle.read(info.st_size + 1)  # not read(limit + 1): that allocates the whole limit per file
            if len(data) > info.st_size:  # it grew since the fstat: read on, up to just past the limit
                data += handle.read(limit + 1 - len(data))
    except OSError as exc:
        raise NoteError(shown, f"cannot read: {exc.strerror}") from None
    if len(data) > limit:  # it grew after the size check
        raise NoteError(shown, f"file is over the {limit:,} byte limit for {what}")
    return data


def _synced_temp(path: Path, raw: bytes, then: str) -> str:
    """A temp file beside `path` holding `raw`, flushed to the disk: what a writer then renames or links into
    place. DiskError when the disk refuses (read-only, full), with nothing left behind; `then` says what
    became of the file when the write itself failed."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path), suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise disk_error(exc, f"cannot write {path}", "nothing was written") or exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException as exc:
        _given_up(tmp, path, exc, then)
    return tmp


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write via a temp file in the same directory, fsync, then rename: readers never see half a file.

    A disk that refuses (read-only, full) raises DiskError with the file as it was and no temp file left."""
    _put_in_place(_synced_temp(path, data.encode("utf-8") if isinstance(data, str) else data, "it is as it was"), path)


@contextmanager
def atomic_file(path: Path) -> Iterator[Path]:
    """atomic_write for a writer that wants a file name (a converter, a stream too big to hold): the block writes
    the temp file it is given; when the block ends that is flushed to the disk and renamed over `path`, and on an
    error it is removed and `path` is as it was (DiskError when the disk refused)."""
    tmp = _synced_temp(path, b"", "nothing was written")
    try:
        yield Path(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException as exc:
        _given_up(tmp, path, exc, "it is as it was")
    _put_in_place(tmp, path)


def _put_in_place(tmp: str, path: Path) -> None:
    """Rename a synced temp file over `path`, with the mode `path` had (0644 for a new file); the temp removed and
    DiskError raised when the disk refuses."""
    try:
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        os.replace(tmp, path)
    except BaseException as exc:
        _given_up(tmp, path, exc, "it is as it was")


def _given_up(tmp: str, path: Path, exc: BaseException, then: str) -> NoReturn:
    """A write to `path` failed: its temp file removed, and DiskError raised (or `exc` again when it is no disk's)."""
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    raise disk_error(exc, f"cannot write {path}", then) or exc


def create_new(path: Path, data: str | bytes, staged: str | None = None) -> None:
    """Write a new file atomically, refusing (FileExistsError) when it already exists; DiskError when the disk
    refuses (read-only, full), with nothing left behind. `staged`: a temp file beside `path` already holding
    `data` on the disk (synced_temps), linked into place instead of a new one (and removed, whatever happens)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        tmp = staged if staged is not None else _synced_temp(path, raw, "nothing was written")
    except BaseException:
        _unlink(staged)
        raise
    try:
        os.chmod(tmp, 0o644)
        try:
            os.link(tmp, path)  # unlike rename, link never replaces an existing file
        except FileExistsError:
            raise
        except OSError:  # a file system without hard links: exclusive create, then write
            with open(path, "xb") as handle:
                try:
                    handle.write(raw)
                    handle.flush()
                    os.fsync(handle.fileno())
                except BaseException:
                    os.unlink(path)  # ours, created a moment ago: never leave half a note
                    raise
    except FileExistsError:
        raise
    except OSError as exc:
        raise disk_error(exc, f"cannot write {path}", "nothing was written") or exc
    finally:
        os.unlink(tmp)


def synced_temps(files: list[tuple[Path, bytes]]) -> list[str]:
    """Temp files beside each path holding its bytes, all on the disk when this returns: what a writer of many new
    files links into place (create_new's `staged`). Written first, then fsynced together (`_sync_all`: a fsync
    one file after the other costs a journal commit, ~4 ms, each), SYNC_CHUNK files open at a time (a batch has no
    size limit, open files do). DiskError as _synced_temp, with no temp file left behind."""
    temps: list[str] = []
    try:
        for start in range(0, len(files), SYNC_CHUNK):
            _stage_chunk(files[start : start + SYNC_CHUNK], temps)
    except BaseException as exc:
        for tmp in temps:
            _unlink(tmp)
        raise disk_error(exc, f"cannot write {len(files)} new files in {files[0][0].parent}",
                         "nothing was written") or exc
    return temps


def _stage_chunk(files: list[tuple[Path, bytes]], temps: list[str]) -> None:
    """Write each file's temp (its name added to `temps` at once, for the caller to remove on failure), fsync them
    together, close them; a close's error (the write-back of a buffered write) is raised like the rest."""
    handles = []
    try:
        for path, raw in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path), suffix=".tmp", dir=path.parent)
            temps.append(tmp)
            handles.append(os.fdopen(fd, "wb"))
            handles[-1].write(raw)
            handles[-1].flush()
        _sync_all([h.fileno() for h in handles])
        while handles:
            handles.pop().close()
    finally:
        for handle in handles:  # after a failure: close quietly, the first error is the one raised
            try:
                handle.close()
            except OSError:
                pass


def _sync_all(fds: list[int]) -> None:
    """fsync open files all at once, from threads: the file system commits its journal once for the fsyncs that
    wait together (a fsync at a time costs a commit each), and each file's write-back error is still its own."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(len(fds), SYNC_THREADS)) as pool:
        list(pool.map(os.fsync, fds))


def _unlink(path: str | None) -> None:
    if path is not None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def rename_in_place(source: Path, target: Path) -> None:
    """Give a file a name that differs only in case, in its own folder (on a case-insensitive disk the two
    names are one file, so nothing is replaced); FileExistsError when target is another file, DiskError when the
    disk refuses."""
    if os.path.lexists(target) and not os.path.samefile(source, target):
        raise FileExistsError(errno.EEXIST, "a different file has that name", str(target))
    try:
        os.rename(source, target)
    except OSError as exc:
        raise disk_error(exc, f"cannot rename {source}", "it is as it was") or exc
