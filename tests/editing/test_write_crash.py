"""A real kill -9 at the n-th note write of a command that changes several notes (`mv` of a linked note,
`supersede`) leaves a journal; running the command again, or any other write, finishes the job: every file ends
as an uninterrupted run leaves it (issue 34, row 8 and the interrupted supersede)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from palace_cli.editing.authoring import init

LINKERS = 40
# The child counts palace's note writes (a new file, a replaced file) and kills itself at the n-th, before it lands.
CHILD = """
import os, signal, sys
import palace_cli.editing.writes as w
from palace_cli.cli import main
nth, seen = int(sys.argv[1]), [0]
def killing(real):
    def write(*args, **kwargs):
        seen[0] += 1
        if seen[0] == nth:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)
    return write
w.atomic_write, w.create_new = killing(w.atomic_write), killing(w.create_new)
sys.argv = ["palace", *sys.argv[2:]]
sys.exit(main())
"""


def palace(*args, nth: int = 0) -> subprocess.CompletedProcess:
    """The CLI in its own process; with nth, killed at its nth note write."""
    return subprocess.run([sys.executable, "-c", CHILD, str(nth), *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def notes(root: Path) -> dict[str, bytes]:
    """Every note-side file (not the cache, not git, not the generated index files), with its bytes."""
    skipped = {".palace", ".git", ".palace-index", "index", "INDEX.md"}
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not skipped & set(p.relative_to(root).parts)}


@pytest.fixture(scope="module")
def vault(tmp_path_factory) -> Path:
    """An adopted vault: Target.md linked from 40 notes, by wikilink and by relative Markdown link."""
    root = tmp_path_factory.mktemp("crash-vault") / "vault"
    (root / "Notes").mkdir(parents=True)
    (root / "Target.md").write_text("# Target\nthe note everyone links to\n")
    for number in range(LINKERS):
        (root / "Notes" / f"N{number:02}.md").write_text(f"# N{number}\nsee [[Target]] and [it](../Target.md)\n")
    init(root)
    return root


@pytest.fixture(scope="module")
def layout(tmp_path_factory) -> Path:
    """A palace of memories/: `target` linked from 40 notes, and two notes to supersede one by the other."""
    root = tmp_path_factory.mktemp("crash-palace") / "kb"
    init(root)
    folder = root / "memories" / "work"
    folder.mkdir()
    (folder / "target.md").write_text("---\nid: target\nsubject: Target\n---\n# Target\n\n## Content\nthe hub\n")
    for number in range(LINKERS):
        (folder / f"n{number:02}.md").write_text(f"---\nid: n{number:02}\nsubject: N{number}\n---\n# N{number}\n\n"
                                                 "## Content\nsee [[target]]\n")
    for name in ("old", "new"):
        (folder / f"{name}.md").write_text(f"---\nid: {name}\nsubject: {name}\ncreated: 2026-01-0{1 + (name == 'new')}"
                                           f"\n---\n# {name}\n\n## Content\nthe {name} way\n")
    return root


def copy(template: Path, tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(template, root, symlinks=True)
    return root


@pytest.fixture(scope="module")
def finished(vault, layout, tmp_path_factory) -> dict[str, dict[str, bytes]]:
    """What each command leaves when nothing interrupts it."""
    out = {}
    for key, template, args in COMMANDS:
        root = copy({"vault": vault, "layout": layout}[template], tmp_path_factory.mktemp("ref"), "p")
        result = palace("--palace", root, *args)
        assert result.returncode == 0, result.stderr
        out[key] = notes(root)
    return out


COMMANDS = [("vault-mv", "vault", ("mv", "Target", "Goal")), ("layout-mv", "layout", ("mv", "target", "goal")),
            ("supersede", "layout", ("supersede", "old", "new"))]


@pytest.mark.slow
@pytest.mark.parametrize("key, nth", [("vault-mv", 1), ("vault-mv", 2), ("vault-mv", 5), ("vault-mv", 20),
                                      ("layout-mv", 2), ("layout-mv", 20), ("supersede", 2)])
def test_a_command_killed_at_a_write_is_finished_by_running_it_again(key, nth, vault, layout, finished, tmp_path):
    _, template, args = next(command for command in COMMANDS if command[0] == key)
    root = copy({"vault": vault, "layout": layout}[template], tmp_path, "p")
    before = notes(root)
    killed = palace("--palace", root, *args, nth=nth)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    half = notes(root)
    assert half != finished[key] and (nth == 1 or half != before)  # killed in the middle: some written, not all
    lint = palace("--palace", root, "lint")
    assert "[interrupted-write]" in lint.stdout and "the next write finishes it" in lint.stdout
    again = palace("--palace", root, *args)
    assert again.returncode == 0, again.stderr
    assert "which was interrupted" in again.stderr
    assert notes(root) == finished[key]
    assert "[interrupted-write]" not in palace("--palace", root, "lint").stdout


@pytest.mark.slow
def test_any_later_write_finishes_a_killed_mv(vault, finished, tmp_path):
    root = copy(vault, tmp_path, "p")
    assert palace("--palace", root, "mv", "Target", "Goal", nth=10).returncode == -signal.SIGKILL
    fixed = palace("--palace", root, "lint", "--fix")
    assert fixed.returncode in (0, 1), fixed.stderr
    assert "palace mv Target.md Goal.md: finished (it was interrupted)" in fixed.stdout + fixed.stderr
    assert notes(root) == finished["vault-mv"]


@pytest.mark.slow
def test_a_note_edited_after_the_kill_is_left_as_it_is_and_named(vault, finished, tmp_path):
    root = copy(vault, tmp_path, "p")
    assert palace("--palace", root, "mv", "Target", "Goal", nth=5).returncode == -signal.SIGKILL
    edited = root / "Notes" / "N30.md"
    edited.write_text("# N30\nrewritten by hand, still [[Target]]\n")
    again = palace("--palace", root, "mv", "Target", "Goal")
    assert again.returncode == 0, again.stderr
    assert "left as they are (changed since): Notes/N30.md" in again.stderr
    assert edited.read_text() == "# N30\nrewritten by hand, still [[Target]]\n"
    expected = dict(finished["vault-mv"], **{"Notes/N30.md": edited.read_bytes()})
    assert notes(root) == expected


def test_a_supersede_left_one_sided_is_completed_by_running_it_again(layout, tmp_path):
    """A one-sided link left by an older palace (no journal): the rerun writes the missing side."""
    root = copy(layout, tmp_path, "p")
    new = root / "memories" / "work" / "new.md"
    new.write_text(new.read_text().replace("created:", "supersedes: [old]\ncreated:"))
    again = palace("--palace", root, "supersede", "old", "new")
    assert again.returncode == 0, again.stderr
    old = (root / "memories" / "work" / "old.md").read_text()
    assert "superseded_by: [new]" in old or "superseded_by:\n- new" in old, old
    assert os.path.exists(new) and new.read_text().count("supersedes") == 1
