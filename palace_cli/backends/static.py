"""A static embedding made from the installed encoder: one vector per word piece, a text's vector is their weighted mean.

The table is the model's own output for each word piece of its vocabulary seen alone (model2vec's idea, done
here from the GGUF with llama.cpp, nothing downloaded), centred on the vocabulary's mean and weighted by
SIF with word frequencies estimated from the vocabulary's order (Zipf's law). Embedding a text is then
tokenising it (llama.cpp's own WordPiece, so the pieces are the model's) and averaging rows: no cut, no
transformer, thousands of texts a second. Its vectors are not the full model's (cosine about 0.3 to the same
text's full vector): full-model queries rank static units about as well as static queries do, but full and
static unit vectors cannot share one ranking. It ranks far below the full model (docs/benchmarks.md, Issue 31).
"""

from __future__ import annotations

import atexit
import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from palace_cli.backends import Embedder, sha256_file
from palace_cli.core.disk import atomic_write
from palace_cli.errors import ModelError

if TYPE_CHECKING:
    import numpy as np

TABLE_FORMAT = 1
SIF = 1e-4  # model2vec's default: weight a / (a + p) of a piece whose Zipf probability is p
FRAMES = {"sep-cls": "[SEP] piece [CLS] (model2vec's order)", "cls-sep": "[CLS] piece [SEP] (the model's own)"}
BUILD_PACK = 168  # word pieces per decode when building: 3 tokens each, within one 512-token decode


def build_table(model_path: Path, frame: str = "sep-cls", sif: float | None = SIF, center: bool = True,
                progress=None) -> np.ndarray:
    """The static table of a GGUF encoder: float32 (vocabulary, dim), row i made from the model's output for piece i
    alone (`piece_rows`), centred on the mean row and weighted by SIF (`finish_table`)."""
    return finish_table(piece_rows(model_path, None, frame, progress), sif=sif, center=center)


def piece_rows(model_path: Path, pieces: list[int] | None = None, frame: str = "sep-cls", progress=None) -> np.ndarray:
    """The model's last-layer output for each word piece alone (every piece of the vocabulary when `pieces` is None).

    Each piece is run in a three-token frame (`frame`) and its own position's output kept: not the mean over the
    frame, which the frame's two tokens dominate. Several frames share a decode, as separate sequences.
    """
    import numpy as np

    from palace_cli.backends.llamacpp import _llama_cpp, _open

    if frame not in FRAMES:
        raise ValueError(f"unknown frame {frame!r}; use one of {', '.join(FRAMES)}")
    llama_cpp = _llama_cpp()
    llm = _open(Path(model_path), 1, embedding=True, n_ctx=512, n_batch=512, n_ubatch=512,
                pooling_type=llama_cpp.LLAMA_POOLING_TYPE_NONE, flash_attn=True)
    try:
        ids = list(range(llm.n_vocab())) if pieces is None else list(pieces)
        dim = llm.n_embd()
        first, last = llm._model.token_cls(), llm._model.token_sep()
        if frame == "sep-cls":
            first, last = last, first
        rows = np.zeros((len(ids), dim), dtype=np.float32)
        ctx, batch = llm._ctx, llm._batch
        for start in range(0, len(ids), BUILD_PACK):
            chunk = ids[start : start + BUILD_PACK]
            for seq, piece in enumerate(chunk):
                batch.add_sequence([first, piece, last], seq, True)
            ctx.kv_cache_clear()
            try:
                ctx.decode(batch)
            finally:
                batch.reset()
            for seq in range(len(chunk)):
                row = llama_cpp.llama_get_embeddings_ith(ctx.ctx, 3 * seq + 1)
                rows[start + seq] = np.ctypeslib.as_array(row, shape=(dim,))
            if progress:
                progress("static table", start + len(chunk), len(ids))
    finally:
        llm.close()
    return rows


def finish_table(table: np.ndarray, sif: float | None = SIF, center: bool = True) -> np.ndarray:
    """Centre a raw table on its mean row and weight row i by sif / (sif + p_i), p Zipf's estimate for rank i."""
    import numpy as np

    table = np.asarray(table, dtype=np.float32)
    if center:
        table = table - table.mean(axis=0, keepdims=True)
    if sif is not None:
        table = table * zipf_weights(len(table), sif)[:, None]
    return table.astype(np.float32)


def zipf_weights(size: int, sif: float = SIF) -> np.ndarray:
    """SIF weights a / (a + p_i) with p_i proportional to 1 / (i + 2): a vocabulary ordered by frequency."""
    import numpy as np

    inverse = 1.0 / np.arange(2, size + 2, dtype=np.float64)
    return (sif / (sif + inverse / inverse.sum())).astype(np.float32)


def mean_rows(table: np.ndarray, pieces: list[list[int]]) -> np.ndarray:
    """Unit-length means of the table's rows for each list of piece ids (a zero row for an empty list)."""
    import numpy as np

    out = np.zeros((len(pieces), table.shape[1]), dtype=np.float32)
    for row, ids in enumerate(pieces):
        if ids:
            out[row] = table[np.asarray(ids, dtype=np.int64)].sum(axis=0, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.maximum(norms, 1e-12)


def save_table(table: np.ndarray, path: Path, source: Path, **recipe) -> dict:
    """Write the table as float16 .npy (atomically) with a JSON manifest beside it; returns the manifest."""
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, np.asarray(table, dtype=np.float16))
    path = Path(path)
    atomic_write(path, buffer.getvalue())
    manifest = {"format": TABLE_FORMAT, "source": Path(source).name, "source_sha256": sha256_file(Path(source)),
                "table_sha256": sha256_file(path), "shape": list(table.shape), **recipe}
    atomic_write(manifest_path(path), json.dumps(manifest, indent=2) + "\n")
    return manifest


def manifest_path(table_path: Path) -> Path:
    """Where a table's manifest lives: beside it, .json for .npy."""
    return Path(table_path).with_suffix(".json")


TABLE_SUFFIX = ".static.npy"


def table_path(model_path: Path) -> Path:
    """Where the static table of a GGUF encoder lives: beside it, `<stem>.static.npy`."""
    model_path = Path(model_path)
    return model_path.with_name(model_path.stem + TABLE_SUFFIX)


def model_of_table(path: Path) -> Path:
    """The GGUF file a table made by `table_path` comes from."""
    path = Path(path)
    if not path.name.endswith(TABLE_SUFFIX):
        raise ModelError(f"{path}: not a static table (its name should end in {TABLE_SUFFIX})")
    return path.with_name(path.name[: -len(TABLE_SUFFIX)] + ".gguf")


def ensure_table(model_path: Path, progress=None) -> Path:
    """The static table of `model_path`, built and saved beside it unless one made from these exact bytes is there."""
    model_path = Path(model_path)
    if not model_path.is_file():
        raise ModelError(f"{model_path}: no such model file, so no static table")
    path = table_path(model_path)
    try:
        manifest = json.loads(manifest_path(path).read_text(encoding="utf-8"))
        if (manifest.get("format") == TABLE_FORMAT and path.is_file()
                and manifest.get("table_sha256") == sha256_file(path)
                and manifest.get("source_sha256") == sha256_file(model_path)):
            return path
    except (OSError, ValueError):
        pass  # none yet, or unreadable: build it
    table = build_table(model_path, progress=progress)
    save_table(table, path, model_path, frame="sep-cls", sif=SIF, center=True)
    return path


class StaticEmbedder(Embedder):
    """Texts as the weighted mean of their word pieces' rows in a static table (see `build_table`)."""

    def __init__(self, table_path: Path, model_path: Path | None = None):
        import numpy as np

        self.path = Path(table_path)
        model_path = Path(model_path) if model_path else model_of_table(self.path)
        try:
            manifest = json.loads(manifest_path(self.path).read_text(encoding="utf-8"))
            self.table = np.load(self.path, mmap_mode="r")  # float16 rows, summed in float32
        except (OSError, ValueError) as e:
            raise ModelError(f"{self.path}: not a usable static table ({e})") from e
        self.dim = int(self.table.shape[1])
        # the table's bytes pin the recipe (frame, centring, weights) and the model it came from
        self.model_id = f"{self.path.stem}@{manifest['table_sha256'][:8]}"
        self._tokenizer = _Tokenizer(model_path)
        self.usage = {"texts": 0, "model_texts": 0, "model_tokens": 0}  # no text goes through the transformer
        if self._tokenizer.n_vocab != len(self.table):
            raise ModelError(f"{self.path}: {len(self.table)} rows, but {model_path} has {self._tokenizer.n_vocab} pieces")

    def pieces(self, text: str) -> list[int]:
        """The word piece ids of `text` without [CLS] and [SEP], uncut."""
        return self._tokenizer.pieces(text)

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """Return a float32 (len(texts), dim) array of unit-length weighted means (a text with no word piece is
        its [CLS] and [SEP] rows, so every row has unit length)."""
        pieces = [self.pieces(text) or self._tokenizer.frame for text in texts]
        self.usage["texts"] += len(texts)
        return mean_rows(self.table, pieces)


class _Tokenizer:
    """llama.cpp's WordPiece of a GGUF, loaded without its weights (vocab_only: a few tens of milliseconds)."""

    def __init__(self, model_path: Path):
        from palace_cli.backends.llamacpp import _llama_cpp

        llama_cpp = _llama_cpp()
        from llama_cpp import _internals

        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        try:
            self._model = _internals.LlamaModel(path_model=str(model_path), params=params, verbose=False)
        except (ValueError, RuntimeError) as e:
            raise ModelError(f"{model_path}: cannot read its vocabulary ({e})") from e
        atexit.register(self._model.close)  # before interpreter teardown, as llamacpp._open does for its models
        self.n_vocab = self._model.n_vocab()
        self.frame = [self._model.token_cls(), self._model.token_sep()]
        self._specials = set(self.frame)
        self._lock = threading.Lock()

    def pieces(self, text: str) -> list[int]:
        with self._lock:
            ids = self._model.tokenize(text.encode("utf-8"), True, False)
        return [i for i in ids if i not in self._specials]
