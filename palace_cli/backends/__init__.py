"""Embedder and Generator interfaces, the backend registry, and model loading."""

from __future__ import annotations

import functools
import hashlib
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..errors import ModelError

if TYPE_CHECKING:
    import numpy as np


class Embedder(ABC):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    model_id: str
    dim: int

    @abstractmethod
    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """Return a float32 array of shape (len(texts), dim) with unit-length rows."""


class Generator(ABC):
    """Completes a prompt with text."""

    model_id: str

    @abstractmethod
    def complete(
        self,
        prompt: str,
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: list[str] | None = None,
    ) -> str:
        """Return the model's answer to `prompt` (deterministic at temperature 0)."""


def _llamacpp_embedder(path: Path, **options) -> Embedder:
    from .llamacpp import LlamaCppEmbedder

    return LlamaCppEmbedder(path, **options)


def _llamacpp_generator(path: Path, **options) -> Generator:
    from .llamacpp import LlamaCppGenerator

    return LlamaCppGenerator(path, **options)


def _openai_generator(url: str, model: str, **options) -> Generator:
    from .openai import OpenAIGenerator

    return OpenAIGenerator(url, model, **options)


# Backend name -> factory. Factories take backend-specific arguments.
EMBEDDERS: dict[str, Callable[..., Embedder]] = {"llama-cpp": _llamacpp_embedder}
GENERATORS: dict[str, Callable[..., Generator]] = {"llama-cpp": _llamacpp_generator, "openai": _openai_generator}


def file_model_id(path: Path) -> str:
    """Return a stable id for a model file: its stem and a short hash of its bytes."""
    return f"{path.stem}@{sha256_file(path)[:8]}"


def sha256_file(path: Path) -> str:
    """Return the hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def load_embedder(path: Path | None = None) -> Embedder | None:
    """Return the llama.cpp embedder for `path`, or for the installed default; None if none is installed."""
    path = _resolve(path, "embedder")
    if path is None:
        return None
    return _load("embedder", path, path.stat().st_mtime_ns)


def load_generator(path: Path | None = None) -> Generator | None:
    """Return the llama.cpp generator for `path`, or for the installed default; None if none is installed."""
    path = _resolve(path, "generator")
    if path is None:
        return None
    return _load("generator", path, path.stat().st_mtime_ns)


def generator_from_config(models: dict, root: Path | None = None) -> Generator | None:
    """The generator palace.toml's [models] asks for; None when it is off or nothing is installed.

    `generator` is "default" (the installed SmolLM2 GGUF), "none", a GGUF path (relative to the
    palace root), or "endpoint"; setting `endpoint` (a URL) and `endpoint_model` alone also picks
    the endpoint. `endpoint_api_key_env` names the variable holding a key, `endpoint_timeout` is
    in seconds.
    """
    setting = str(models.get("generator", "") or "").strip()
    endpoint = str(models.get("endpoint", "") or "").strip()
    if setting.lower() == "none":
        return None
    if setting.lower() == "endpoint" or (endpoint and not setting):
        if not endpoint:
            raise ModelError('[models] generator = "endpoint" needs [models] endpoint = "http://host:port"')
        options = {"api_key_env": models.get("endpoint_api_key_env") or None}
        if models.get("endpoint_timeout") is not None:
            options["timeout"] = float(models["endpoint_timeout"])
        return GENERATORS["openai"](endpoint, str(models.get("endpoint_model", "") or ""), **options)
    if setting and setting.lower() != "default":
        path = Path(setting).expanduser()
        if not path.is_absolute() and root is not None:
            path = root / path
        return load_generator(path)
    return load_generator()


def _resolve(path: Path | None, role: str) -> Path | None:
    if path is None:
        from ..models import default_model_path

        return default_model_path(role)
    path = Path(path).expanduser()
    if not path.is_file():
        raise ModelError(f"{path}: no such model file")
    return path


# Loading a model costs far more than a call; keep the last few loaded
# (keyed by mtime so a reinstalled file is loaded afresh).
@functools.lru_cache(maxsize=4)
def _load(role: str, path: Path, mtime_ns: int) -> Embedder | Generator:
    registry = EMBEDDERS if role == "embedder" else GENERATORS
    return registry["llama-cpp"](path)
