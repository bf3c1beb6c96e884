"""Embedding vectors on disk: float32, keyed by text hash, pinned to a model. The only module that stores vectors."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:
    import numpy as np

from ..notes import atomic_write
from ..progress import Progress

BATCH = 128  # texts per embed_batch: enough packed decodes to keep every embedder worker busy
CHECKPOINT_S = 60.0


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
        """The generation the manifest names (None when nothing is stored)."""
        manifest = self._manifest()
        return manifest.get("generation") if manifest else None

    def load(self) -> tuple[str | None, list[str], np.ndarray]:
        """(model_id, text hashes, matrix); empty when nothing is stored or the files are unreadable."""
        import numpy as np  # here, not at the top: commands that never touch vectors start faster

        for attempt in range(3):
            manifest = self._manifest()
            if not manifest:
                break
            gen = manifest["generation"]
            try:
                keys = np.load(self.directory / f"keys.{gen}.npy").tolist()
                matrix = np.load(self.directory / f"vectors.{gen}.npy", mmap_mode="r")
            except (OSError, ValueError):
                time.sleep(0.02 * (attempt + 1))  # a writer replaced the generation under us: read the new one
                continue
            if len(keys) == matrix.shape[0]:
                return manifest["model_id"], keys, matrix
            break
        return None, [], np.zeros((0, 0), dtype=np.float32)

    def sync(self, texts: Mapping[str, str], embedder, progress: Progress | None = None) -> SyncReport:
        """Make the store hold exactly one vector per text hash in `texts`, embedding only what is missing.

        `texts` may be a lazy mapping: only the texts of missing hashes are read. Long runs save what they
        have embedded every CHECKPOINT_S seconds, so a killed build resumes instead of starting over.
        """
        import numpy as np

        model_id, keys, matrix = self.load()
        changed_from = model_id if model_id and model_id != embedder.model_id else None
        have = {} if model_id != embedder.model_id else {k: i for i, k in enumerate(keys)}
        wanted = sorted(texts)
        missing = [k for k in wanted if k not in have]
        dropped = sum(1 for k in have if k not in texts)
        if not missing and not dropped and model_id == embedder.model_id:
            return SyncReport(0, len(wanted), 0)
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
                done = set(new_keys)
                self._merge_write(embedder, [k for k in wanted if k in have or k in done], have, matrix,
                                  new_keys, new_rows)
                last_save = time.monotonic()
        self._merge_write(embedder, wanted, have, matrix, new_keys, new_rows)
        return SyncReport(len(missing), len(wanted) - len(missing), dropped, changed_from)

    def _merge_write(self, embedder, wanted: list[str], have: dict[str, int], matrix, new_keys: list[str],
                     new_rows: list[np.ndarray]) -> None:
        import numpy as np

        fresh = {k: i for i, k in enumerate(new_keys)}
        stacked = np.concatenate(new_rows) if new_rows else np.zeros((0, embedder.dim), dtype=np.float32)
        out = np.zeros((len(wanted), embedder.dim), dtype=np.float32)
        old_rows = np.array([have.get(k, -1) if k not in fresh else -1 for k in wanted], dtype=np.int64)
        new_index = np.array([fresh.get(k, -1) for k in wanted], dtype=np.int64)
        take_old = old_rows >= 0
        if take_old.any():
            out[take_old] = matrix[old_rows[take_old]]
        take_new = new_index >= 0
        if take_new.any():
            out[take_new] = stacked[new_index[take_new]]
        self._write(embedder.model_id, wanted, out)

    def _write(self, model_id: str, keys: list[str], matrix: np.ndarray) -> None:
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
        manifest = {"model_id": model_id, "dim": int(matrix.shape[1]) if matrix.ndim == 2 else 0,
                    "count": len(keys), "generation": gen}
        atomic_write(self.directory / "manifest.json", json.dumps(manifest, indent=1))
        # Keep the previous generation for readers that read the old manifest a moment ago; drop older ones
        # and temp files a killed writer left behind (open readers keep their mapping on POSIX).
        keep = (f".{gen}.npy", f".{gen - 1}.npy")
        for path in self.directory.glob("*.npy"):
            if not path.name.endswith(keep):
                path.unlink(missing_ok=True)
        for path in self.directory.glob(".*.tmp"):
            if not path.name.endswith(f".{os.getpid()}.tmp"):
                path.unlink(missing_ok=True)

    def clear(self) -> None:
        """Remove every stored vector (the manifest first, so no reader sees a manifest without its files)."""
        (self.directory / "manifest.json").unlink(missing_ok=True)
        for path in self.directory.glob("*"):
            path.unlink(missing_ok=True)
