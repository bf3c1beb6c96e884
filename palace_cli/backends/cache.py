"""An on-disk cache of generator responses, keyed by model, prompt and parameters.

Re-running `ask` or `bench verify` with the same model and prompt costs nothing and gives the same
text, so benchmark numbers do not drift with sampling or hardware. One JSON file per response,
written atomically, under $PALACE_HOME/cache/generations (else the user cache dir).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from palace_cli.backends import Generator
from palace_cli.core.disk import atomic_write

CACHE_VERSION = 1


def cache_dir() -> Path:
    """Where responses are cached: $PALACE_HOME/cache/generations, else the user cache dir's."""
    home = os.environ.get("PALACE_HOME")
    if home:
        return Path(home).expanduser() / "cache" / "generations"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("palace")) / "generations"


def cache_key(model_id: str, prompt: str, params: dict) -> str:
    """sha256 of the model id, the prompt and the generation parameters (canonical JSON)."""
    blob = json.dumps({"v": CACHE_VERSION, "model": model_id, "prompt": prompt, "params": params},
                      sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CachedGenerator(Generator):
    """Wraps any Generator; answers from the cache when it can, else asks the model and stores the text."""

    def __init__(self, inner: Generator, directory: Path | None = None, enabled: bool = True):
        self.inner = inner
        self.model_id = inner.model_id
        self.directory = Path(directory) if directory else cache_dir()
        self.enabled = enabled
        self.hits = 0
        self.misses = 0
        self.last_cached = False
        self.last_elapsed_s = 0.0     # what this call took
        self.last_cost_s = 0.0        # what generating the text took, now or when it was cached

    def path_for(self, key: str) -> Path:
        """The file that holds (or would hold) the response for `key`."""
        return self.directory / key[:2] / f"{key}.json"

    def complete(self, prompt: str, *, max_tokens: int = 256, temperature: float = 0.0,
                 stop: list[str] | None = None) -> str:
        """The cached response for this model, prompt and parameters, generating it on a miss."""
        params = {"max_tokens": max_tokens, "temperature": temperature, "stop": list(stop or [])}
        key = cache_key(self.model_id, prompt, params)
        path = self.path_for(key)
        if self.enabled:
            cached = _read(path)
            if cached is not None:
                self.hits += 1
                self.last_cached, self.last_elapsed_s = True, 0.0
                self.last_cost_s = cached[1]
                return cached[0]
        started = time.perf_counter()
        text = self.inner.complete(prompt, max_tokens=max_tokens, temperature=temperature, stop=stop)
        self.last_elapsed_s = self.last_cost_s = time.perf_counter() - started
        self.misses += 1
        self.last_cached = False
        record = {"model": self.model_id, "params": params, "prompt": prompt, "response": text,
                  "elapsed_s": round(self.last_elapsed_s, 3), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        # Written even under --no-cache: a bypass refreshes the entry rather than leaving a stale one.
        atomic_write(path, json.dumps(record, ensure_ascii=False, indent=1) + "\n")
        return text


def _read(path: Path) -> tuple[str, float] | None:
    """(response, seconds it took to generate) stored at `path`, or None when absent or unreadable
    (a broken entry is a miss)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    response = data.get("response") if isinstance(data, dict) else None
    if not isinstance(response, str):
        return None
    elapsed = data.get("elapsed_s")
    return response, float(elapsed) if isinstance(elapsed, (int, float)) else 0.0


def cached(generator: Generator, use_cache: bool = True) -> CachedGenerator:
    """`generator` wrapped in the response cache (an already wrapped one is returned as is, re-flagged)."""
    if isinstance(generator, CachedGenerator):
        generator.enabled = use_cache
        return generator
    return CachedGenerator(generator, enabled=use_cache)
