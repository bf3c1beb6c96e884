"""Embedding vectors on disk: float32, keyed by text hash, pinned to a model. The only module that stores vectors."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from .notes import atomic_write

BATCH = 32


@dataclass
class SyncReport:
    """What a vector sync did."""

    embedded: int
    kept: int
    dropped: int
    model_changed_from: str | None = None


class VectorStore:
    """Vectors for one palace under .palace/vectors: a manifest naming the current generation of two .npy files.

    Writers put new files under a fresh generation number, fsync them, then atomically replace
    manifest.json, so a reader sees the old set or the new set, never half of one.
    """

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self._loaded: tuple[str, list[str], np.ndarray] | None = None

    def _manifest(self) -> dict | None:
        try:
            return json.loads((self.directory / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def model_id(self) -> str | None:
        """The model the stored vectors were made with, if any."""
        manifest = self._manifest()
        return manifest.get("model_id") if manifest else None

    def load(self) -> tuple[str | None, list[str], np.ndarray]:
        """(model_id, text hashes, matrix); empty when nothing is stored or the files are unreadable."""
        manifest = self._manifest()
        if not manifest:
            return None, [], np.zeros((0, 0), dtype=np.float32)
        gen = manifest["generation"]
        try:
            keys = np.load(self.directory / f"keys.{gen}.npy").tolist()
            matrix = np.load(self.directory / f"vectors.{gen}.npy", mmap_mode="r")
        except (OSError, ValueError):
            return None, [], np.zeros((0, 0), dtype=np.float32)
        if len(keys) != matrix.shape[0]:
            return None, [], np.zeros((0, 0), dtype=np.float32)
        return manifest["model_id"], keys, matrix

    def sync(self, texts: dict[str, str], embedder, progress: Callable[[int, int], None] | None = None) -> SyncReport:
        """Make the store hold exactly one vector per text hash in `texts`, embedding only what is missing."""
        model_id, keys, matrix = self.load()
        changed_from = model_id if model_id and model_id != embedder.model_id else None
        have = {} if model_id != embedder.model_id else {k: i for i, k in enumerate(keys)}
        wanted = sorted(texts)
        missing = [k for k in wanted if k not in have]
        dropped = sum(1 for k in have if k not in texts)
        if not missing and not dropped and model_id == embedder.model_id:
            return SyncReport(0, len(wanted), 0)
        new_vectors: dict[str, np.ndarray] = {}
        for start in range(0, len(missing), BATCH):
            chunk = missing[start : start + BATCH]
            vectors = np.asarray(embedder.embed_batch([texts[k] for k in chunk]), dtype=np.float32)
            new_vectors.update(zip(chunk, vectors))
            if progress:
                progress(min(start + BATCH, len(missing)), len(missing))
        dim = embedder.dim
        out = np.zeros((len(wanted), dim), dtype=np.float32)
        for row, key in enumerate(wanted):
            out[row] = new_vectors[key] if key in new_vectors else matrix[have[key]]
        self._write(embedder.model_id, wanted, out)
        return SyncReport(len(missing), len(wanted) - len(missing), dropped, changed_from)

    def _write(self, model_id: str, keys: list[str], matrix: np.ndarray) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        old = self._manifest()
        gen = (old["generation"] + 1) if old else 1
        for name, array in ((f"keys.{gen}.npy", np.array(keys, dtype="U32")), (f"vectors.{gen}.npy", matrix)):
            tmp = self.directory / f".{name}.tmp"
            with open(tmp, "wb") as handle:
                np.save(handle, array)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.directory / name)
        manifest = {"model_id": model_id, "dim": int(matrix.shape[1]) if matrix.ndim == 2 else 0,
                    "count": len(keys), "generation": gen}
        atomic_write(self.directory / "manifest.json", json.dumps(manifest, indent=1))
        for path in self.directory.glob("*.npy"):
            if not path.name.endswith(f".{gen}.npy"):
                path.unlink(missing_ok=True)  # open readers keep their mapping on POSIX

    def clear(self) -> None:
        """Remove every stored vector."""
        for path in self.directory.glob("*"):
            path.unlink(missing_ok=True)
