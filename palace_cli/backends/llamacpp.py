"""llama.cpp backends (llama-cpp-python), imported lazily so `import palace_cli` stays fast."""

from __future__ import annotations

import atexit
import collections
import contextlib
import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from palace_cli.errors import ModelError
from palace_cli.backends import Embedder, Generator, file_model_id

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


def system_info() -> str:
    """llama.cpp's own list of the CPU features its loaded build uses ("CPU : SSE3 = 1 | AVX2 = 1 | ...")."""
    return _llama_cpp().llama_print_system_info().decode("utf-8", "replace")


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


_LOAD_LOCK = threading.Lock()


@contextlib.contextmanager
def _without_weight_repacking(llama_cpp):
    """Load models without llama.cpp's extra CPU buffer types (weights repacked for AMX and wide SIMD).

    With llama-cpp-python 0.3.36 on an AVX512/AMX CPU, the first decode of weights repacked that way dies
    with SIGSEGV (SmolLM2's Q4_1, a converted BERT's q8_0); loaded plainly, the same models run. Llama()
    takes no option for it, so its default model parameters are swapped while one model loads.
    """
    module = llama_cpp.llama_cpp
    default = module.llama_model_default_params
    if "use_extra_bufts" not in {name for name, _ in getattr(default().__class__, "_fields_", [])}:
        yield
        return

    def plain():
        params = default()
        params.use_extra_bufts = False
        return params

    with _LOAD_LOCK:
        module.llama_model_default_params = plain
        try:
            yield
        finally:
            module.llama_model_default_params = default


def _open(path: Path, n_threads: int | None = None, **params):
    llama_cpp = _llama_cpp()
    _LOG_TAIL.clear()
    threads = n_threads or default_threads()
    try:
        with _without_weight_repacking(llama_cpp):
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


DEFAULT_MAX_TOKENS = 512  # the cut for a model that declares no limit of its own (BERT's position table)
PACK_TOKENS = 512  # tokens per decode when several texts share one: the best measured budget (docs/models.md)


class LlamaCppEmbedder(Embedder):
    """Sentence embeddings from a GGUF encoder (mean pooling, unit-length float32 rows).

    Texts are cut at `max_tokens` (the model's own sequence limit), packed several to a decode, and a
    batch of several decodes is spread over `workers` llama contexts, one thread each, sharing the weights.
    """

    def __init__(self, path: Path, *, max_tokens: int | None = None, workers: int | None = None,
                 n_threads: int = 1, flash_attn: bool = True, pack: bool = True):
        llama_cpp = _llama_cpp()
        self.path = Path(path)
        n_tokens = max(PACK_TOKENS, max_tokens or DEFAULT_MAX_TOKENS)
        # Flash attention skips the masked pairs between packed texts (without it, attention over a packed
        # decode grows with the square of the whole pack) and halves the cost of a long text on its own.
        self._llm = _open(
            self.path, n_threads, embedding=True, n_ctx=n_tokens, n_batch=n_tokens, n_ubatch=n_tokens,
            pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN, flash_attn=flash_attn,
        )
        self.dim = self._llm.n_embd()
        # A text must fit one decode (n_ubatch tokens) and the position table (n_ctx_train).
        self._pack_tokens = self._llm.context_params.n_ubatch if pack else 0
        self.max_tokens = min(self._llm.context_params.n_ubatch, self._llm._model.n_ctx_train(),
                              max_tokens or DEFAULT_MAX_TOKENS)
        # What a vector means depends on where texts are cut: the id pins the cut with the file.
        self.model_id = f"{file_model_id(self.path)}:{self.max_tokens}"
        self.workers = max(1, workers or min(os.cpu_count() or 1, 8))
        self._max_seqs = self._llm.context_params.n_seq_max
        self._contexts: queue.SimpleQueue = queue.SimpleQueue()  # idle (context, batch) pairs
        self._contexts.put((self._llm._ctx, self._llm._batch))
        self._made = 1
        # what went through the transformer so far (`palace bench embed` reports tokens per unit from it)
        self.usage = {"texts": 0, "model_texts": 0, "model_tokens": 0}
        self._grow_lock = threading.Lock()

    def tokenize(self, text: str, cut: bool = True) -> list[int]:
        """Return the token ids for `text`, with [CLS]/[SEP], cut to `max_tokens` unless cut=False."""
        tokens = self._llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
        if cut and len(tokens) > self.max_tokens:
            # keep the closing [SEP]: the model was trained with it
            tokens = tokens[: self.max_tokens - 1] + tokens[-1:]
        return tokens

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """Return a float32 (len(texts), dim) array of L2-normalised embeddings.

        The result depends only on `texts` (not on the number of workers): the packs are fixed first.
        """
        import numpy as np

        tokens = [self.tokenize(text) for text in texts]
        for key, count in (("texts", len(texts)), ("model_texts", len(texts)), ("model_tokens", sum(map(len, tokens)))):
            self.usage[key] += count
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        packs = self._packs([len(t) for t in tokens])
        workers = min(self.workers, len(packs))
        if workers <= 1:
            for pack in packs:
                self._decode(pack, tokens, out)
        else:
            self._ensure_contexts(workers)
            with ThreadPoolExecutor(workers) as pool:  # llama_decode releases the GIL
                for _ in pool.map(lambda pack: self._decode(pack, tokens, out), packs):
                    pass
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)

    def _packs(self, lengths: list[int]) -> list[list[int]]:
        """Row numbers grouped into decodes of at most _pack_tokens tokens (one each if 0), longest first."""
        packs: list[list[int]] = []
        used = 0
        for row in sorted(range(len(lengths)), key=lambda r: -lengths[r]):
            if not packs or used + lengths[row] > self._pack_tokens or len(packs[-1]) >= self._max_seqs:
                packs.append([])
                used = 0
            packs[-1].append(row)
            used += lengths[row]
        return packs

    def _decode(self, pack: list[int], tokens: list[list[int]], out: np.ndarray) -> None:
        import numpy as np

        llama_cpp = _llama_cpp()
        ctx, batch = self._contexts.get()  # one decode per context at a time
        try:
            for seq, row in enumerate(pack):
                batch.add_sequence(tokens[row], seq, True)
            ctx.kv_cache_clear()  # an encoder keeps none; a causal embedding model would reuse seq ids
            try:
                ctx.decode(batch)
            finally:
                batch.reset()
            for seq, row in enumerate(pack):
                ptr = llama_cpp.llama_get_embeddings_seq(ctx.ctx, seq)
                out[row] = np.ctypeslib.as_array(ptr, shape=(self.dim,))
        finally:
            self._contexts.put((ctx, batch))

    def _ensure_contexts(self, count: int) -> None:
        """Create idle llama contexts until there are `count`: they share the model's weights."""
        from llama_cpp import _internals

        with self._grow_lock:
            while self._made < count:
                llm = self._llm
                ctx = _internals.LlamaContext(model=llm._model, params=llm.context_params, verbose=False)
                batch = _internals.LlamaBatch(n_tokens=llm.n_batch, embd=0,
                                              n_seq_max=llm.context_params.n_ctx, verbose=False)
                llm._stack.callback(batch.close)  # freed with the model, before it
                self._contexts.put((ctx, batch))
                self._made += 1


class LlamaCppGenerator(Generator):
    """Chat completions from a GGUF instruct model, using the model's own chat template."""

    def __init__(self, path: Path, *, n_ctx: int = 4096, seed: int = 0, n_threads: int | None = None):
        self.path = Path(path)
        self.model_id = file_model_id(self.path)
        self.seed = seed
        self._llm = _open(self.path, n_threads, n_ctx=n_ctx, seed=seed)
        self.parameters = int(self._llm._model.n_params())
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
