"""llama.cpp backends (llama-cpp-python), imported lazily so `import palace_cli` stays fast."""

from __future__ import annotations

import atexit
import collections
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ModelError
from . import Embedder, Generator, file_model_id

if TYPE_CHECKING:
    import numpy as np

# llama.cpp logs to stderr from C; keep its recent errors to explain a failed load.
_LOG_TAIL: collections.deque[str] = collections.deque(maxlen=20)
_log_callback = None  # the ctypes callback must outlive every call into llama.cpp


def _llama_cpp():
    """Import llama_cpp with its C logging routed into _LOG_TAIL instead of stderr."""
    global _log_callback
    try:
        import llama_cpp
    except ImportError as e:
        raise ModelError(
            "llama-cpp-python is not installed; install palace with its models extra "
            "(pip install 'palace-cli[models]')"
        ) from e
    if _log_callback is None:

        @llama_cpp.llama_log_callback
        def _log(level, text, user_data):
            line = text.decode("utf-8", "replace").strip()
            if line and level == 4:  # GGML_LOG_LEVEL_ERROR
                _LOG_TAIL.append(line)

        _log_callback = _log
        llama_cpp.llama_log_set(_log_callback, None)
        # With verbose=False, llama-cpp-python points the process's fds 1 and 2
        # at /dev/null while a model loads. The callback above already keeps
        # llama.cpp quiet, and the redirect would swallow what other threads
        # write meanwhile (the MCP server's stdout is its transport).
        import llama_cpp._internals
        import llama_cpp.llama

        for module in (llama_cpp.llama, llama_cpp._internals):
            if hasattr(module, "suppress_stdout_stderr"):
                module.suppress_stdout_stderr = _NoRedirect
    return llama_cpp


class _NoRedirect:
    def __init__(self, disable: bool = True):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def default_threads() -> int:
    """Return half the logical CPUs (at least 1), llama.cpp's own advice.

    llama.cpp's worker threads spin while they wait: with as many threads as
    logical CPUs, any other busy process stalls them. On the 2-CPU reference
    machine under load, 2 threads ran 3-15x slower than 1 (embedding and generating).
    """
    return max(1, (os.cpu_count() or 2) // 2)


def _open(path: Path, n_threads: int | None = None, **params):
    llama_cpp = _llama_cpp()
    _LOG_TAIL.clear()
    threads = n_threads or default_threads()
    try:
        llm = llama_cpp.Llama(
            model_path=str(path), verbose=False, n_threads=threads, n_threads_batch=threads, **params
        )
    except (ValueError, RuntimeError) as e:
        detail = _LOG_TAIL[0] if _LOG_TAIL else str(e)
        raise ModelError(f"{path}: not a usable GGUF model ({detail})") from e
    # Free the model before interpreter teardown: llama-cpp-python's finaliser otherwise runs after
    # its C bindings are gone and prints a TypeError traceback at exit.
    atexit.register(llm.close)
    return llm


class LlamaCppEmbedder(Embedder):
    """Sentence embeddings from a GGUF encoder (mean pooling, unit-length float32 rows)."""

    def __init__(self, path: Path, *, n_ctx: int = 512, n_threads: int | None = None):
        llama_cpp = _llama_cpp()
        self.path = Path(path)
        self.model_id = file_model_id(self.path)
        self._llm = _open(
            self.path, n_threads, embedding=True, n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx,
            pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN,
        )
        self.dim = self._llm.n_embd()
        # llama.cpp rounds n_ctx up, but a decode holds n_batch tokens and the
        # position table holds n_ctx_train: the smallest is the real limit.
        self.n_ctx = min(self._llm.n_ctx(), self._llm.n_batch, self._llm._model.n_ctx_train())
        self._lock = threading.Lock()  # one llama context: calls must not interleave

    def tokenize(self, text: str) -> list[int]:
        """Return the token ids for `text`, with [CLS]/[SEP], cut to the context size."""
        tokens = self._llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
        if len(tokens) > self.n_ctx:
            # keep the closing [SEP]: the model was trained with it
            tokens = tokens[: self.n_ctx - 1] + tokens[-1:]
        return tokens

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """Return a float32 (len(texts), dim) array of L2-normalised embeddings."""
        import numpy as np

        llama_cpp = _llama_cpp()
        llm, ctx = self._llm, self._llm._ctx
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # One sequence per decode: on CPU, packing several sequences into one
        # non-causal batch measured 1.6x slower per token (masked attention
        # over the whole batch). These are the steps of Llama.embed, which
        # takes only strings and would cut off the closing [SEP] when truncating.
        with self._lock:
            for row, text in enumerate(texts):
                llm._batch.add_sequence(self.tokenize(text), 0, True)
                ctx.kv_cache_clear()
                try:
                    ctx.decode(llm._batch)
                finally:
                    llm._batch.reset()
                ptr = llama_cpp.llama_get_embeddings_seq(ctx.ctx, 0)
                out[row] = np.ctypeslib.as_array(ptr, shape=(self.dim,))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)


class LlamaCppGenerator(Generator):
    """Chat completions from a GGUF instruct model, using the model's own chat template."""

    def __init__(self, path: Path, *, n_ctx: int = 4096, seed: int = 0, n_threads: int | None = None):
        self.path = Path(path)
        self.model_id = file_model_id(self.path)
        self.seed = seed
        self._llm = _open(self.path, n_threads, n_ctx=n_ctx, seed=seed)
        self._lock = threading.Lock()

    def complete(
        self,
        prompt: str,
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: list[str] | None = None,
    ) -> str:
        """Return the model's reply to `prompt` as one user message (greedy at temperature 0)."""
        try:
            with self._lock:
                result = self._llm.create_chat_completion(
                    messages=[{"role": "user", "content": prompt}],
                    max_tokens=max_tokens,
                    temperature=temperature,
                    seed=self.seed,
                    stop=stop or [],
                )
        except ValueError as e:  # e.g. the prompt does not fit the context
            raise ModelError(f"{self.model_id}: {e}") from e
        return (result["choices"][0]["message"]["content"] or "").strip()
