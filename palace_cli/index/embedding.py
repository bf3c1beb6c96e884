"""Vectors behind the answers: which units wait for a vector, one embedder at a time, and the loop that embeds them.

Meaning never blocks an answer (docs/search.md): a refresh reads the notes and updates the lexical index at once,
and the units whose vector is missing are embedded after it by whoever holds `.palace/embed.lock`: the
background worker a command starts (index/worker.py), the watcher between its refreshes, or a refresh that
waits (`palace index --wait`, the library's default). The lock is an flock, so the OS drops it when its holder
dies; each batch of BATCH units is committed to the vector store as soon as it is embedded, so a killed
embedder loses one batch at most and the next one goes on from there. `.palace/embed.json` says who holds the
lock, how far it got and how fast, and keeps the rate this palace last measured for estimates.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from palace_cli.core.disk import atomic_write
from palace_cli.index.sections import unit_text as section_text
from palace_cli.index.turns import unit_text as turn_text
from palace_cli.index.vectors import BATCH, SyncReport, pieces_digest
from palace_cli.progress import Progress

if TYPE_CHECKING:
    from palace_cli.core.site import Site
    from palace_cli.index import Index
    from palace_cli.index.store import NoteStore
    from palace_cli.index.vectors import VectorSet

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock; an embedder may run twice, each commit stays whole
    fcntl = None

LOCK = "embed.lock"
STATE = "embed.json"
DEFAULT_RATE = 10.0  # units a second, until this palace has measured its own (5-40 were measured on 2 cores)
MIN_MEASURED = 16    # a run that embedded fewer units says too little about the rate to keep it
OFF_REASON = 'dense ranking is turned off in palace.toml ([models] embedder = "off")'
MISSING_REASON = "dense ranking is off: no embedding model installed; run `palace models install`"


@dataclass(frozen=True)
class Setting:
    """The embedder palace.toml asks for, without loading it: "on" with the key its vectors are stored under,
    "off" (no model installed) or "disabled" (configured off), and why not."""

    status: str
    key: str | None = None
    reason: str = ""


def configured(site: Site) -> Setting:
    """The configured embedder's setting: its key names the file (path, mtime, size) and the cut it computes with."""
    from palace_cli.backends import embedder_key, model_setting

    setting = model_setting(site.config.models, "embedder", site.root)
    if setting.kind == "off":
        return Setting("disabled", None, OFF_REASON)
    if setting.path is None:
        return Setting("off", None, MISSING_REASON)
    try:
        return Setting("on", embedder_key(setting.path, setting.cut))  # a new file, or a new cut, re-embeds
    except OSError:
        return Setting("on", None)  # a path that is not there: loading it says what is wrong


def state_key(index: Index, key: str) -> str:
    """What the note store records once every unit has its vector: the notes' version, the embedder, the vectors."""
    return f"{index.store.version()}:{key}:{index.vectors.generation()}"


def up_to_date(index: Index, key: str | None) -> bool:
    """True when the last complete embedding run saw the notes and vectors as they are now, with this embedder."""
    return key is not None and index.store.get_meta("vectors_state") == state_key(index, key)


# ---- what waits -----------------------------------------------------------------------------


def kept_out(store: NoteStore) -> set[str]:
    """Paths of notes whose id an earlier path holds (sorted, the first wins): they are not indexed."""
    owners: dict[str, str] = {}
    losers = set()
    for note_id, path in store.duplicate_ids():
        if owners.setdefault(note_id, path) != path:
            losers.add(path)
    return losers


def wanted(store: NoteStore) -> dict[str, tuple[str, str, str, int]]:
    """vector key -> (text hash, kind, path, ord) of one unit embedding it, for every indexed unit."""
    losers = kept_out(store)
    out: dict[str, tuple[str, str, str, int]] = {}
    for key, digest, kind, path, ord_ in store.vector_units():
        if kind != "note" or path not in losers:
            out.setdefault(key, (digest, kind, path, ord_))
    return out


def text_of(store: NoteStore, kind: str, path: str, ord_: int) -> str | None:
    """The text a unit is embedded by, read from the cache; None when the unit is gone since it was listed."""
    if kind == "note":
        found = store.memories([path])
        return found[0].search_text() if found else None
    parts = store.section_parts(path, ord_) if kind == "section" else store.turn_parts(path, ord_)
    if parts is None:
        return None
    return section_text(*parts) if kind == "section" else turn_text(*parts)


@dataclass
class Counts:
    """Units with a vector of the configured embedder, of all indexed units (each unit counted, shared texts too)."""

    embedded: int
    total: int

    def as_dict(self) -> dict:
        return {"embedded": self.embedded, "total": self.total}


def counts(index: Index, setting: Setting | None = None) -> Counts:
    """How many indexed units have their vector now (a store of another embedder counts none)."""
    setting = setting or configured(index.site)
    losers = kept_out(index.store)
    units = [key for key, _d, kind, path, _o in index.store.vector_units() if kind != "note" or path not in losers]
    stored = index.vectors.snapshot() if setting.status == "on" else None
    if stored is None or (stored.key is not None and setting.key is not None and stored.key != setting.key):
        return Counts(0, len(units))
    return Counts(sum(1 for key in units if key in stored.where), len(units))


# ---- the lock and the state file ------------------------------------------------------------


def try_lock(site: Site) -> int | None:
    """A descriptor holding the embed lock, or None when another process holds it."""
    if fcntl is None:  # pragma: no cover
        return os.open(os.devnull, os.O_RDONLY)
    site.cache_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(site.cache_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def wait_lock(site: Site, progress: Progress | None = None) -> int:
    """A descriptor holding the embed lock, waiting for its holder meanwhile (reporting its progress)."""
    while True:
        fd = try_lock(site)
        if fd is not None:
            return fd
        held = holder(site)
        if progress:
            if held and held.get("total"):
                progress("embedding", int(held.get("done", 0)), int(held["total"]))
            else:
                progress("waiting for the embedding worker", 0, 0)
        time.sleep(0.25)


def read_state(site: Site) -> dict:
    """What .palace/embed.json holds ({} when nothing was recorded or it cannot be read)."""
    try:
        data = json.loads((site.cache_dir / STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_state(site: Site, **fields) -> None:
    """Update .palace/embed.json (only the lock's holder writes it; the rate measured is kept)."""
    state = {**read_state(site), **fields}
    try:
        atomic_write(site.cache_dir / STATE, json.dumps(state, indent=1) + "\n")
    except OSError:
        pass  # a cache that cannot be written loses the progress report, never a vector


def holder(site: Site) -> dict | None:
    """The state of the process embedding now ({pid, kind, since, done, total, rate}), None when none is."""
    state = read_state(site)
    pid = state.get("pid")
    if not isinstance(pid, int) or not _alive(pid, state.get("pid_start")):
        return None
    return state


def process_start(pid: int) -> str | None:
    """When a process started (its start time in clock ticks, Linux), to tell it from a later one with its pid."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive(pid: int, started: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    now = process_start(pid)
    return started is None or now is None or now == started


def rate(site: Site) -> tuple[float, bool]:
    """(units embedded a second, measured?): the last rate measured on this palace, else DEFAULT_RATE."""
    value = read_state(site).get("rate")
    if isinstance(value, (int, float)) and value > 0:
        return float(value), True
    return DEFAULT_RATE, False


@contextmanager
def holding(site: Site, fd: int, kind: str):
    """Record this process as the lock's holder while the block runs, then release the lock."""
    write_state(site, pid=os.getpid(), pid_start=process_start(os.getpid()), kind=kind, since=time.time(),
                done=0, total=0, run_rate=None)
    try:
        yield
    finally:
        write_state(site, pid=None, pid_start=None)
        os.close(fd)  # closing the descriptor releases the lock


# ---- the loop -------------------------------------------------------------------------------


@dataclass
class _Plan:
    """What one embedding pass works from: the notes' version, the units wanted, the stored set, what is missing."""

    version: int
    wanted: dict
    current: VectorSet | None
    missing: list[str]
    gone: list[str]
    kept: int
    changed_from: str | None
    reusable: dict[str, str] | None = None  # word-piece digest -> a gone key's stored vector, listed once


def _plan(index: Index, model) -> _Plan:
    version = index.store.version()  # read first: a refresh committing meanwhile makes the record below stale
    units = wanted(index.store)
    current = index.vectors.snapshot()
    same = current is not None and current.model_id == model.model_id
    have = current.where if same else {}
    # By text hash: the order (and so the batches, which decide the last bits of each vector) of every
    # release before the vector key.
    missing = sorted(units.keys() - have.keys(), key=lambda k: (units[k][0], k))
    return _Plan(version, units, current, missing, sorted(have.keys() - units.keys()), len(units) - len(missing),
                 current.model_id if current is not None and not same else None)


@dataclass
class Filled:
    """What an embedding pass did, its SyncReport and whether every unit has its vector now."""

    report: SyncReport
    complete: bool
    seconds: float = 0.0
    batches: list[int] = field(default_factory=list)


def fill(index: Index, model, key: str | None, progress: Progress | None = None,
         stop: Callable[[], bool] | None = None, on_batch: Callable[[int, int, float], None] | None = None,
         configured_key: bool = True, batch: int = BATCH) -> Filled:
    """Embed every indexed unit without a vector, BATCH units at a time, each batch committed as it is made;
    returns when none is missing (recording it in the note store) or when `stop()` says so between batches.
    The holder of the embed lock calls it. `key` names the embedder (kept in the manifest when `configured_key`:
    a caller's own embedder leaves it unnamed). Batches of BATCH units sorted by text hash are those every release
    has embedded a palace in, so its vectors are the same to the last bit (a vector's last digits depend on the
    texts decoded beside it); the watcher takes smaller ones, to come back to a save sooner."""
    store, vectors = index.store, index.vectors
    tag = key if configured_key else None
    plan = _plan(index, model)
    done = Filled(SyncReport(0, plan.kept, len(plan.gone), plan.changed_from), False)
    pieces = _Pieces()
    started = time.monotonic()
    if on_batch and plan.missing:
        on_batch(0, len(plan.missing), 0.0)  # what waits, before the first batch takes its time
    while True:
        if store.version() != plan.version:
            plan = _plan(index, model)  # the notes changed meanwhile: what is missing is listed again
        if not plan.missing:
            break
        if stop is not None and stop():
            pieces.keep(vectors)
            return done
        embedded, reused = _embed_batch(index, model, plan, tag, batch, pieces)
        done.batches.append(embedded)
        done.report.embedded += embedded
        done.report.kept += reused
        done.seconds = time.monotonic() - started
        total = done.report.embedded + len(plan.missing)
        if progress:
            progress("embedding", done.report.embedded, total)
        if on_batch:
            on_batch(done.report.embedded, total, done.report.embedded / max(done.seconds, 1e-6))
    if plan.gone:
        vectors.commit(plan.current, model, [], [], plan.gone, tag)
        pieces.gone += plan.gone
    elif configured_key and plan.current is not None and plan.current.key != tag:
        vectors.retag(tag)
    pieces.keep(vectors)
    with store.transaction():  # the version read before listing: a refresh since then is seen as one
        store.set_meta("vectors_state", f"{plan.version}:{key}:{vectors.generation()}")
    done.complete, done.seconds = True, time.monotonic() - started
    return done


@dataclass
class _Pieces:
    """The word-piece digests a pass learned and the keys it dropped, kept once when the pass ends (a pass killed
    before loses them: its units re-embed on their next change, as without digests)."""

    learned: dict[str, str] = field(default_factory=dict)
    gone: list[str] = field(default_factory=list)

    def keep(self, vectors) -> None:
        if self.learned or self.gone:
            vectors.keep_pieces(self.learned, self.gone)
            self.learned, self.gone = {}, []


def _embed_batch(index: Index, model, plan: _Plan, tag: str | None, batch: int, pieces: _Pieces) -> tuple[int, int]:
    """Embed the next `batch` missing units of the plan and commit them; returns how many the model embedded and
    how many took a stored vector.

    A unit whose word pieces (after the model's cut) are those of a unit gone with this change gets the gone
    unit's vector: the model would compute the same one. That is an edit past the cut of a long note's own unit,
    which otherwise re-embeds with every one-line edit of its sections. The rows gone are dropped with the last
    batch, so each batch before it can still take from them."""
    import numpy as np

    chunk, plan.missing = plan.missing[:batch], plan.missing[batch:]
    found = [(k, text_of(index.store, *plan.wanted[k][1:])) for k in chunk]
    found = [(k, text) for k, text in found if text is not None]  # gone since listed: the next plan drops them
    digests = _digests(model, found)
    reusable = _reusable(index, plan)
    reused = {k: reusable[digests[k]] for k, _t in found if digests.get(k) in reusable}
    fresh = [(k, text) for k, text in found if k not in reused]
    keys = [k for k, _t in fresh] + list(reused)
    rows = [np.asarray(model.embed_batch([text for _k, text in fresh]), dtype=np.float32)] if fresh else []
    if reused:
        rows.append(plan.current.gather(list(reused.values())))
    gone = plan.gone if not plan.missing else []  # with the last batch: one segment for a one-line edit
    if keys or gone:
        index.vectors.commit(plan.current, model, keys, rows, gone, tag)
        plan.current = index.vectors.snapshot()
        pieces.learned.update((k, digests[k]) for k in keys if k in digests)
        pieces.gone += gone
        plan.gone = [] if gone else plan.gone
    return len(fresh), len(reused)


def _digests(model, found: list[tuple[str, str]]) -> dict[str, str]:
    """The word-piece digest of each text the model cuts (only a cut text's vector can be another text's), when the
    model says how it cuts texts into pieces."""
    tokenize, cut = getattr(model, "tokenize", None), getattr(model, "max_tokens", None)
    if tokenize is None or not cut:
        return {}
    pieces = ((key, tokenize(text)) for key, text in found)
    return {key: pieces_digest(model.model_id, ids) for key, ids in pieces if len(ids) >= cut}


def _reusable(index: Index, plan: _Plan) -> dict[str, str]:
    """Word-piece digest -> key, for the plan's gone units whose vectors are still stored."""
    if plan.reusable is None:
        where = plan.current.where if plan.current is not None else {}
        plan.reusable = {digest: key for key, digest in index.vectors.pieces_of(plan.gone).items() if key in where}
    return plan.reusable


def measured(site: Site, filled: Filled) -> None:
    """Keep the rate of a run that embedded enough to say (units a second, commits included)."""
    if filled.report.embedded >= MIN_MEASURED and filled.seconds > 0:
        write_state(site, rate=round(filled.report.embedded / filled.seconds, 2), rate_measured=time.time())


def embed_now(index: Index, model, key: str | None, progress: Progress | None = None,
              configured_key: bool = True) -> SyncReport:
    """Embed every unit without a vector before returning, as the holder of the embed lock: a worker already
    embedding is waited for first (its progress reported), then whatever it left is embedded here."""
    site = index.site
    fd = wait_lock(site, progress)
    with holding(site, fd, "foreground"):
        filled = fill(index, model, key, progress, configured_key=configured_key,
                      on_batch=lambda d, t, r: write_state(site, done=d, total=t, run_rate=round(r, 2)))
        measured(site, filled)
    return filled.report


WATCH_BATCH = 32  # units per batch when the watcher embeds: a save waits for one batch at most


def embed_while(index: Index, stop: Callable[[], bool]) -> tuple[int, bool]:
    """Embed what waits until done or `stop()`, unless another process embeds it; (units embedded, more wait?)."""
    site = index.site
    setting = configured(site)
    if setting.status != "on" or up_to_date(index, setting.key):
        return 0, False
    fd = try_lock(site)
    if fd is None:
        return 0, False  # a worker (or another watcher) embeds them
    with holding(site, fd, "watch"):
        model = index.dense().embedder
        if model is None:
            return 0, False
        filled = fill(index, model, setting.key, stop=stop, batch=WATCH_BATCH,
                      on_batch=lambda d, t, r: write_state(site, done=d, total=t, run_rate=round(r, 2)))
        measured(site, filled)
    return filled.report.embedded, not filled.complete


@dataclass
class Status:
    """What `palace status` says of meaning: units with a vector and all, the embedder, the rate, who embeds."""

    counts: Counts
    dense: str
    reason: str
    rate: float
    measured: bool
    worker: dict | None  # the process embedding now: pid, kind (worker, watch, foreground), since, done, total, rate

    @property
    def waiting(self) -> int:
        return self.counts.total - self.counts.embedded if self.dense == "on" else 0

    @property
    def speed(self) -> tuple[float, bool]:
        """(units a second, measured?): the rate of the run now, else the last measured, else DEFAULT_RATE."""
        current = (self.worker or {}).get("run_rate")
        if isinstance(current, (int, float)) and current > 0:
            return float(current), True
        return self.rate, self.measured

    @property
    def eta_s(self) -> float:
        """Seconds until every unit has its vector, at `speed`."""
        return self.waiting / self.speed[0]

    def as_dict(self) -> dict:
        worker = None
        if self.worker:
            worker = {name: self.worker.get(name) for name in ("pid", "kind", "since", "done", "total", "run_rate")}
        return {"vectors": {**self.counts.as_dict(), "waiting": self.waiting}, "dense": self.dense,
                "reason": self.reason, "rate": self.rate, "rate_measured": self.measured, "eta_s": round(self.eta_s, 1),
                "embedding": worker}


def status(index: Index) -> Status:
    """The vectors as they are now, and the process filling them in, if any (changes nothing)."""
    setting = configured(index.site)
    units_per_s, known = rate(index.site)
    return Status(counts(index, setting), setting.status, setting.reason, units_per_s, known, holder(index.site))


__all__ = ["Counts", "DEFAULT_RATE", "Filled", "Setting", "Status", "configured", "counts", "embed_now", "embed_while",
           "fill", "holder", "rate", "status", "try_lock", "up_to_date", "wanted"]
