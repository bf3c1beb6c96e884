"""Embedding vectors on disk: float32, keyed by text hash, pinned to a model. The only module that stores vectors.

Under .palace/vectors, manifest.json names a base (keys.G.npy and vectors.G.npy, the matrix memory-mapped)
and a short list of delta segments (delta.G.npz: the rows added and the keys gone at one sync). A sync that
changes a few rows writes one small segment; when the segments grow past COMPACT_SHARE of the rows or
MAX_DELTAS files, or the model changes, the next write folds everything into a fresh base.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping

if TYPE_CHECKING:
    import numpy as np

from palace_cli.core.disk import atomic_write
from palace_cli.core.links import without_link_targets
from palace_cli.progress import Progress

BATCH = 128  # texts per embed_batch: enough packed decodes to keep every embedder worker busy
CHECKPOINT_S = 60.0
FORMAT = 2  # manifests without "format" are the one-generation layout before deltas: a base alone
MAX_DELTAS = 8  # segments a reader opens besides the base before the next write compacts
COMPACT_SHARE = 0.05  # ...or rows added plus keys gone in the segments, as a share of the live rows
COMPACT_MIN_ROWS = 64  # below this many pending rows a small store keeps appending segments too
PIECES = "pieces.json"  # stored key -> digest of the word pieces its vector was computed from


def vector_key(text: str) -> str:
    """The key a unit's vector is stored under: a hash of its embedded text without the targets of its links, so
    that a rename rewriting `[[Old]]` to `[[New]]` in the notes linking to it re-embeds none of them (the vector of
    such a text is its text's, embedded before the rename). A text without links keys as its text hash."""
    return hashlib.sha256(without_link_targets(text).encode("utf-8")).hexdigest()[:20]


def pieces_digest(model_id: str, pieces: list[int]) -> str:
    """Names what a model reads of a text: its word pieces after the cut. Two texts with one digest have one vector
    (an edit past a long note's cut changes its text and its key, not what the model reads)."""
    digest = hashlib.sha256(model_id.encode("utf-8"))
    digest.update(b"\0" + b",".join(str(piece).encode("ascii") for piece in pieces))
    return digest.hexdigest()[:20]


@dataclass
class SyncReport:
    """What a vector sync did."""

    embedded: int
    kept: int
    dropped: int
    model_changed_from: str | None = None


@dataclass
class VectorSet:
    """One consistent set of stored vectors: the base and its segments as parts, each live key's row in them.

    Rows are numbered across the parts as if stacked (base first), so a key maps to one int."""

    model_id: str
    dim: int
    parts: list = field(default_factory=list)        # float32 matrices: the base (memory-mapped), then segments
    where: dict[str, int] = field(default_factory=dict)  # live key -> row in the stacked parts
    plain: bool = True                                 # no segment applied: where is the base, row by row
    key: str | None = None  # the embedder setting the rows were made for (None: an embedder handed in by a caller)

    def __len__(self) -> int:
        return len(self.where)

    @property
    def keys(self) -> list[str]:
        """The live text hashes: the base's that remain, then each segment's, in order."""
        return list(self.where)

    def apply(self, keys: list[str], rows: np.ndarray, gone: Iterable[str]) -> None:
        """Drop `gone`, then add `keys` with their rows: what one segment does."""
        for key in gone:
            self.where.pop(key, None)
        offset = sum(len(part) for part in self.parts)
        self.where.update(zip(keys, range(offset, offset + len(keys))))
        self.parts.append(rows)
        self.plain = False

    def gather(self, keys: list[str]) -> np.ndarray | None:
        """A fresh contiguous matrix of the rows of `keys` in that order; None when one of them is missing."""
        import numpy as np

        rows = list(map(self.where.get, keys))
        if None in rows:
            return None
        picks = np.array(rows, dtype=np.int64)
        out = np.empty((len(keys), self.dim), dtype=np.float32)
        base = self.parts[0]
        # One take from the base for every row (a segment's rows borrow base row 0), then the few segment rows.
        if len(base):
            np.take(base, np.minimum(picks, len(base) - 1), axis=0, out=out)
        offset = len(base)
        for part in self.parts[1:]:
            inside = np.flatnonzero((picks >= offset) & (picks < offset + len(part)))
            out[inside] = part[picks[inside] - offset]
            offset += len(part)
        return out

    def gather_some(self, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(matrix, present): the rows of `keys` in that order, a zero row where a key has none, and which have one."""
        import numpy as np

        present = np.fromiter((key in self.where for key in keys), dtype=bool, count=len(keys))
        if present.all():
            return self.gather(keys), present
        stand_in = next(iter(self.where), None)  # any live key: gathered for the absent rows, then zeroed
        out = self.gather([key if here else stand_in for key, here in zip(keys, present)]) if stand_in else \
            np.zeros((len(keys), self.dim), dtype=np.float32)
        out[~present] = 0.0
        return out, present

    def matrix(self) -> np.ndarray:
        """Every live row in `keys` order: the base's own mapping when no segment applies, else a gathered copy."""
        return self.parts[0] if self.plain else self.gather(self.keys)


class VectorStore:
    """Vectors for one palace under .palace/vectors: a manifest naming a base and its delta segments.

    Writers put new files under a fresh generation number, fsync them, then atomically replace
    manifest.json, so a reader sees the old set or the new set, never half of one.
    """

    def __init__(self, directory: Path):
        self.directory = Path(directory)

    def _manifest(self) -> dict | None:
        try:
            return json.loads((self.directory / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def model_id(self) -> str | None:
        """The model the stored vectors were made with, if any."""
        manifest = self._manifest()
        return manifest.get("model_id") if manifest else None

    def generation(self) -> int | None:
        """The generation the manifest names (None when nothing is stored); every write makes a new one."""
        manifest = self._manifest()
        return manifest.get("generation") if manifest else None

    def snapshot(self) -> VectorSet | None:
        """The stored set as the manifest names it now; None when nothing is stored or the files are unreadable."""
        import zipfile  # here: numpy loads it anyway, commands without vectors need not

        for attempt in range(3):
            manifest = self._manifest()
            if not manifest:
                return None
            try:
                return self._open(manifest)
            except (OSError, ValueError, KeyError, zipfile.BadZipFile):
                time.sleep(0.02 * (attempt + 1))  # a writer replaced the set under us: read the new one
        return None

    def _open(self, manifest: dict) -> VectorSet | None:
        import numpy as np  # here, not at the top: commands that never touch vectors start faster

        base = manifest.get("base", manifest["generation"])
        keys = np.load(self.directory / f"keys.{base}.npy").tolist()
        matrix = np.load(self.directory / f"vectors.{base}.npy", mmap_mode="r")
        if len(keys) != matrix.shape[0]:
            return None
        found = VectorSet(manifest["model_id"], int(manifest.get("dim") or matrix.shape[1]), [matrix],
                          dict(zip(keys, range(len(keys)))), key=manifest.get("key"))
        for delta in manifest.get("deltas", []):
            with np.load(self.directory / f"delta.{delta['generation']}.npz") as segment:
                added, rows, gone = segment["keys"].tolist(), segment["vectors"], segment["gone"].tolist()
            if len(added) != rows.shape[0]:
                return None
            found.apply(added, rows, gone)
        return found if len(found) == manifest["count"] else None

    def load(self) -> tuple[str | None, list[str], np.ndarray]:
        """(model_id, text hashes, matrix); empty when nothing is stored or the files are unreadable."""
        import numpy as np

        found = self.snapshot()
        if found is None:
            return None, [], np.zeros((0, 0), dtype=np.float32)
        return found.model_id, found.keys, found.matrix()

    def sync(self, texts: Mapping[str, str], embedder, progress: Progress | None = None) -> SyncReport:
        """Make the store hold exactly one vector per text hash in `texts`, embedding only what is missing.

        `texts` may be a lazy mapping: only the texts of missing hashes are read. Long runs save what they
        have embedded every CHECKPOINT_S seconds, so a killed build resumes instead of starting over.
        """
        import numpy as np

        current = self.snapshot()
        same = current is not None and current.model_id == embedder.model_id
        changed_from = current.model_id if current is not None and not same else None
        have = current.where if same else {}
        wanted = set(texts)  # not `k in texts`: a lazy mapping's membership test may read the text
        missing = sorted(wanted - have.keys())
        gone = sorted(have.keys() - wanted)
        dropped = len(gone)
        if same and not missing and not gone:
            return SyncReport(0, len(texts), 0)
        new_keys: list[str] = []
        new_rows: list[np.ndarray] = []
        last_save = time.monotonic()
        for start in range(0, len(missing), BATCH):
            chunk = missing[start : start + BATCH]
            new_rows.append(np.asarray(embedder.embed_batch([texts[k] for k in chunk]), dtype=np.float32))
            new_keys += chunk
            if progress:
                progress("embedding", min(start + BATCH, len(missing)), len(missing))
            if time.monotonic() - last_save > CHECKPOINT_S and start + BATCH < len(missing):
                self.commit(current, embedder, new_keys, new_rows, gone)
                current, new_keys, new_rows, gone = self.snapshot(), [], [], []
                last_save = time.monotonic()
        self.commit(current, embedder, new_keys, new_rows, gone)
        return SyncReport(len(missing), len(texts) - len(missing), dropped, changed_from)

    def compact(self) -> None:
        """Fold the segments into a fresh base holding the same rows (nothing to do without segments)."""
        current = self.snapshot()
        if current is not None and not current.plain:
            keys = sorted(current.where)
            self._write(current.model_id, keys, current.gather(keys), current.key)

    def commit(self, current: VectorSet | None, embedder, keys: list[str], rows: list[np.ndarray],
               gone: list[str], key: str | None = None) -> None:
        """Write one change to `current` (the set as read before it): a delta segment when it stays small, else
        a fresh compacted base. `key` names the embedder setting the rows were made for (kept in the manifest)."""
        import numpy as np

        added = np.concatenate(rows) if rows else np.zeros((0, embedder.dim), dtype=np.float32)
        manifest = self._manifest()
        deltas = manifest.get("deltas", []) if manifest else []
        pending = sum(d["rows"] + d["gone"] for d in deltas) + len(keys) + len(gone)
        count = (len(current) if current else 0) - len(gone) + len(keys)
        if (current is None or current.model_id != embedder.model_id or len(deltas) >= MAX_DELTAS
                or pending > max(COMPACT_MIN_ROWS, COMPACT_SHARE * count)):
            merged = VectorSet(embedder.model_id, embedder.dim)
            if current is not None and current.model_id == embedder.model_id:
                merged = VectorSet(current.model_id, current.dim, list(current.parts), dict(current.where))
            merged.apply(keys, added, gone)
            ordered = sorted(merged.where)
            self._write(embedder.model_id, ordered, merged.gather(ordered), key)
        else:
            self._write_delta(manifest, keys, added, gone, key)

    def retag(self, key: str | None) -> None:
        """Name another embedder setting for the stored rows (the same model under a new file stamp): the manifest
        alone is written again, under a new generation."""
        old = self._manifest()
        if old is not None and old.get("key") != key:
            kept = {name: value for name, value in old.items() if name != "key"}
            self._publish(old, {**kept, "format": FORMAT, "generation": old["generation"] + 1,
                                "base": old.get("base", old["generation"]), **_named(key)})

    def _write_delta(self, old: dict, keys: list[str], rows: np.ndarray, gone: list[str], key: str | None) -> None:
        import numpy as np

        gen = old["generation"] + 1
        with open(self.directory / f"delta.{gen}.npz", "wb") as handle:  # unnamed by any manifest until below
            np.savez(handle, keys=np.array(keys, dtype="U32"), vectors=rows, gone=np.array(gone, dtype="U32"))
            handle.flush()
            os.fsync(handle.fileno())
        deltas = [*old.get("deltas", []), {"generation": gen, "rows": len(keys), "gone": len(gone)}]
        count = old["count"] - len(gone) + len(keys)
        self._publish(old, {"format": FORMAT, "model_id": old["model_id"], "dim": int(rows.shape[1]),
                            "count": count, "generation": gen, "base": old.get("base", old["generation"]),
                            "deltas": deltas, **_named(key)})

    def _write(self, model_id: str, keys: list[str], matrix: np.ndarray, key: str | None = None) -> None:
        """Replace the whole store with a fresh base holding `keys` and their rows (no segments)."""
        import numpy as np

        self.directory.mkdir(parents=True, exist_ok=True)
        old = self._manifest()
        gen = (old["generation"] + 1) if old else 1
        for name, array in ((f"keys.{gen}.npy", np.array(keys, dtype="U32")), (f"vectors.{gen}.npy", matrix)):
            tmp = self.directory / f".{name}.{os.getpid()}.tmp"
            with open(tmp, "wb") as handle:
                np.save(handle, array)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.directory / name)
        self._publish(old, {"format": FORMAT, "model_id": model_id,
                            "dim": int(matrix.shape[1]) if matrix.ndim == 2 else 0, "count": len(keys),
                            "generation": gen, "base": gen, "deltas": [], **_named(key)})

    def _publish(self, old: dict | None, manifest: dict) -> None:
        """Make the fsynced files of `manifest` durable by name, replace the manifest, sweep what nobody names."""
        if hasattr(os, "O_DIRECTORY"):  # POSIX: the new names reach the disk before the manifest naming them
            directory = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        atomic_write(self.directory / "manifest.json", json.dumps(manifest, indent=1))
        # Keep the previous set's files for readers that read the old manifest a moment ago; drop older ones,
        # and segments and temp files a killed writer left behind (open readers keep their mapping on POSIX).
        keep = _files(manifest) | (_files(old) if old else set())
        for path in [*self.directory.glob("*.npy"), *self.directory.glob("*.npz")]:
            if path.name not in keep:
                path.unlink(missing_ok=True)
        for path in self.directory.glob(".*.tmp"):
            if not path.name.endswith(f".{os.getpid()}.tmp"):
                path.unlink(missing_ok=True)

    def pieces_of(self, keys: Iterable[str]) -> dict[str, str]:
        """The word-piece digest each of `keys` was embedded from, where it was kept (keys embedded before the
        digests were kept have none: they are embedded again when their text changes, as before)."""
        kept = self._pieces()
        return {key: kept[key] for key in keys if key in kept}

    def keep_pieces(self, digests: Mapping[str, str], gone: Iterable[str] = ()) -> None:
        """Keep the word-piece digest of each newly stored key and forget those of keys gone (one file, replaced
        whole: a killed writer leaves the old one, which costs at most some re-embedding)."""
        kept = self._pieces()
        changed = {**kept, **digests}
        for key in gone:
            changed.pop(key, None)
        if changed != kept:
            self.directory.mkdir(parents=True, exist_ok=True)
            atomic_write(self.directory / PIECES, json.dumps(changed, separators=(",", ":")))

    def _pieces(self) -> dict[str, str]:
        """The kept digests; none when the file is missing or unreadable (only re-embedding is lost with it)."""
        try:
            found = json.loads((self.directory / PIECES).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def clear(self) -> None:
        """Remove every stored vector (the manifest first, so no reader sees a manifest without its files)."""
        (self.directory / "manifest.json").unlink(missing_ok=True)
        for path in self.directory.glob("*"):
            path.unlink(missing_ok=True)


def _named(key: str | None) -> dict:
    """The manifest's "key" entry: the embedder setting its rows were made for, when a setting made them."""
    return {"key": key} if key else {}


def _files(manifest: dict) -> set[str]:
    """The file names a manifest (of either format) reads."""
    base = manifest.get("base", manifest["generation"])
    segments = (f"delta.{d['generation']}.npz" for d in manifest.get("deltas", []))
    return {f"keys.{base}.npy", f"vectors.{base}.npy", *segments}
