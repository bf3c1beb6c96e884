"""Generated index files stay right when writers run at once: each is written under the refresh lock, from the cache
as it is then, never from a scan another writer has overtaken (issue 34)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from palace_cli.index.files import check_index_files
from palace_cli.palace import Palace

PALACE = str(Path(sys.executable).parent / "palace")
# `palace lint --fix` in a real process, stopped (stdout says so) once it has read the notes until stdin says go:
# the test makes another writer land in that gap, as a concurrent `palace add` does by chance.
LINT_FIX = """
import sys
import palace_cli.editing.lint as lint
from palace_cli.cli import main
read = lint._notes
def paused(palace):
    scan = read(palace)
    if not getattr(paused, "done", False):
        paused.done = True
        print("read the notes", flush=True)
        sys.stdin.readline()
    return scan
lint._notes = paused
sys.argv = ["palace", "--palace", sys.argv[1], "lint", "--fix"]
main()
"""


@pytest.mark.slow
def test_lint_fix_beside_an_add_leaves_the_index_files_right(example_palace: Path):
    env = dict(os.environ)
    subprocess.run([PALACE, "--palace", str(example_palace), "index"], env=env, check=True, capture_output=True)
    lint = subprocess.Popen([sys.executable, "-c", LINT_FIX, str(example_palace)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert lint.stdout.readline() == "read the notes\n"
    added = subprocess.run([PALACE, "--palace", str(example_palace), "add", "Quorum reads beside a lint",
                            "--domain", "consensus-coordination", "--content", "Read from a majority.", "--no-edit"],
                           env=env, capture_output=True, text=True)
    assert added.returncode == 0, added.stderr
    out, err = lint.communicate("go\n")
    assert lint.returncode in (0, 1), err  # 1: lint found problems of the example palace's own (its warnings)
    palace = Palace(example_palace)
    assert "Quorum reads beside a lint" in (example_palace / "INDEX.md").read_text(encoding="utf-8")
    assert check_index_files(palace.site, palace.scan()) == []
