"""Shared fixtures: small palaces copied into tmp_path, user dirs pointed into tmp_path."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "example-palace"
SHARED = REPO.parent / "shared"


@pytest.fixture(autouse=True)
def user_dirs(tmp_path_factory, monkeypatch):
    """Keep every test away from the real user config and data dirs (models come from a shared cache)."""
    home = tmp_path_factory.mktemp("user-home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.delenv("PALACE_DIR", raising=False)
    monkeypatch.setenv("PALACE_HOME", str(home / "palace-home"))  # no models unless a test asks for them
    yield


def copy_palace(source: Path, target: Path, git: bool = True) -> Path:
    """Copy a palace (without its .palace cache) and optionally make it a git repo with one commit."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".palace"))
    if git:
        env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
                   GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
        subprocess.run(["git", "init", "-q"], cwd=target, check=True)
        subprocess.run(["git", "add", "-A"], cwd=target, check=True)
        subprocess.run(["git", "commit", "-qm", "start"], cwd=target, check=True, env=env)
    return target


@pytest.fixture
def example_palace(tmp_path) -> Path:
    """A private copy of example-palace (a git repo), without models configured."""
    return copy_palace(EXAMPLE, tmp_path / "example-palace")


@pytest.fixture
def palace(example_palace):
    """A Palace object over a private copy of the example palace."""
    from palace_cli.palace import Palace

    return Palace(example_palace)


@pytest.fixture
def small_palace(tmp_path) -> Path:
    """A tiny palace of three notes in two domains, built through the core API."""
    from palace_cli.authoring import add_memory, init_palace
    from palace_cli.palace import Palace

    root = init_palace(tmp_path / "small", name="Small")
    p = Palace(root)
    add_memory(p, "Two-Phase Commit", "distributed", anchor="frozen wedding statues",
               image="You officiate as forty-seven granite couples freeze mid-vow, waiting for a coordinator's nod.",
               content="A coordinator asks every participant to prepare; only if all vote yes does it commit.",
               keywords=["2pc", "atomic commit"], links=["saga"])
    add_memory(p, "Saga", "distributed", anchor="relay race of apologies",
               image="Runners pass a baton of apology letters; each who stumbles runs back handing out lemon cakes.",
               content="A long transaction split into local steps, each with a compensating action on failure.",
               keywords=["saga", "compensation"], links=["two-phase-commit"])
    add_memory(p, "Bloom Filter", "storage", anchor="hotel of lightbulbs",
               image="A hotel facade of nine hundred lightbulbs flickers as three porters flip switches per guest.",
               content="A bit array with k hash functions: no false negatives, tunable false positives.",
               keywords=["probabilistic", "membership"])
    return root


from conftest_models import installed_models, real_embedder, real_generator, with_models  # noqa: E402,F401
