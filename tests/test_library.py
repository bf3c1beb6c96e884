"""The library's front door: what docs/library.md shows works, and importing it stays cheap."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import palace_cli

REPO = Path(__file__).resolve().parent.parent


def test_the_documented_example_runs_as_written(tmp_path):
    """docs/library.md's example, run in a fresh interpreter (lexical only: no models here)."""
    text = (REPO / "docs" / "library.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1).replace("/tmp/kb", str(tmp_path / "kb"))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "distributed-systems ['saga']"
    assert "verify: forty purple sneakers squeak" in result.stdout
    assert lines[-1] == "True grounded"


def test_every_exported_name_resolves():
    for name in palace_cli.__all__:
        assert getattr(palace_cli, name) is not None, name
    from palace_cli import Palace, recall, search, verify_response  # noqa: F401  (the issue's own example)


def test_search_is_callable_whichever_was_imported_first(tmp_path):
    """The room search/ and the function `search` share a name: importing the room (here through recall, or
    through the MCP server) binds palace_cli.search to it, and the name imported must still search."""
    code = ("import shutil, sys; from pathlib import Path\n"
            "if sys.argv[1] == 'mcp': import palace_cli.mcp\n"
            "from palace_cli import Palace, recall, search\n"
            f"root = Path({str(tmp_path)!r}) / sys.argv[1]\n"
            f"shutil.copytree({str(REPO / 'example-palace')!r}, root, ignore=shutil.ignore_patterns('.palace'))\n"
            "print(search(Palace(root), 'merkle tree repair', mode='lexical', k=1).hits[0].id)")
    for first in ("recall", "mcp"):
        result = subprocess.run([sys.executable, "-c", code, first], capture_output=True, text=True, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == ["merkle-anti-entropy"], first


def test_unknown_name_is_an_attribute_error():
    try:
        palace_cli.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:
        raise AssertionError("no error")


def test_importing_the_package_loads_nothing_heavy():
    code = ("import sys, palace_cli; heavy = [m for m in ('click', 'rich', 'whoosh', 'numpy', 'yaml', 'sqlite3') "
            "if m in sys.modules]; print(heavy); sys.exit(1 if heavy else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_all_lists_exactly_the_exports():
    assert sorted(palace_cli.__all__) == sorted([*palace_cli._EXPORTS, "__version__"])
