"""Embeddings with palace's own embedder, cached on disk by text hash so no variant embeds twice."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np


def text_key(text: str) -> str:
    """The key of a text: palace's text_hash (sha256, 20 hex digits), so palace's vectors seed the cache."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


class EmbeddingCache:
    """text hash -> unit vector for one model, kept in `<dir>/<model>/{keys.json,vectors.npy}`."""

    def __init__(self, directory: Path, embedder=None, model_id: str | None = None):
        self._embedder = embedder
        self.model_id = model_id or (embedder.model_id if embedder else None)
        if self.model_id is None:
            raise ValueError("an embedder or a model id is needed")
        self.directory = Path(directory) / self.model_id.replace("/", "_").replace("@", "_")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.keys: list[str] = []
        self.matrix = np.zeros((0, 0), dtype=np.float32)
        keys_file = self.directory / "keys.json"
        if keys_file.exists():
            self.keys = json.loads(keys_file.read_text())
            self.matrix = np.load(self.directory / "vectors.npy")
            if len(self.keys) != self.matrix.shape[0]:  # a torn save: keep the common prefix
                n = min(len(self.keys), self.matrix.shape[0])
                self.keys, self.matrix = self.keys[:n], self.matrix[:n]
        self.row = {k: i for i, k in enumerate(self.keys)}
        self._pending: list[tuple[str, np.ndarray]] = []

    @property
    def embedder(self):
        if self._embedder is None:
            from palace_cli.backends import load_embedder

            self._embedder = load_embedder()
            if self._embedder is None:
                raise SystemExit("no embedding model: set PALACE_HOME=~/.cache/palace-test-home or run `palace models install`")
            if self._embedder.model_id != self.model_id:
                raise SystemExit(f"cache is for {self.model_id}, installed model is {self._embedder.model_id}")
        return self._embedder

    def seed(self, keys: list[str], matrix: np.ndarray) -> int:
        """Adopt vectors made elsewhere (a palace's vector store); returns how many were new."""
        new = [(k, np.asarray(v, dtype=np.float32)) for k, v in zip(keys, matrix) if k not in self.row]
        for key, vector in new:
            self.row[key] = -1
            self._pending.append((key, vector))
        self.save()
        return len(new)

    def get(self, texts: list[str], label: str = "") -> np.ndarray:
        """Unit vectors of `texts` (rows aligned), embedding only what the cache lacks."""
        keys = [text_key(t) for t in texts]
        missing = {}
        for key, text in zip(keys, texts):
            if key not in self.row and key not in missing:
                missing[key] = text
        if missing:
            started, done, items = time.time(), 0, list(missing.items())
            for start in range(0, len(items), 64):
                chunk = items[start : start + 64]
                vectors = self.embedder.embed_batch([t for _, t in chunk])
                for (key, _), vector in zip(chunk, vectors):
                    self.row[key] = -1
                    self._pending.append((key, vector))
                done += len(chunk)
                if time.time() - started > 5 and os.isatty(2) or done == len(items):
                    print(f"\rembedding {label}: {done}/{len(items)} ({time.time() - started:.0f} s)", end="",
                          file=sys.stderr, flush=True)
                if len(self._pending) >= 2048:
                    self.save()
            print(file=sys.stderr)
            self.save()
        return self.matrix[[self.row[k] for k in keys]] if keys else np.zeros((0, 384), dtype=np.float32)

    def save(self) -> None:
        """Append pending vectors and write both files atomically (keys last, so a torn save is detected)."""
        if not self._pending:
            return
        stack = np.stack([v for _, v in self._pending]).astype(np.float32)
        self.matrix = stack if self.matrix.size == 0 else np.concatenate([self.matrix, stack])
        for key, _ in self._pending:
            self.row[key] = len(self.keys)
            self.keys.append(key)
        self._pending = []
        tmp = self.directory / "vectors.tmp.npy"
        np.save(tmp, self.matrix)
        os.replace(tmp, self.directory / "vectors.npy")
        tmp = self.directory / "keys.tmp"
        tmp.write_text(json.dumps(self.keys))
        os.replace(tmp, self.directory / "keys.json")
