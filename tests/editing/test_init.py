"""`palace init` in a vault under git (issue 32 item 4, issue 34 row 13): it lists every file and setting it changes
before it does, `git status` shows exactly that, `--no-git-setup` leaves git alone, and what stands in its way is
one line with nothing half-made and nothing written outside through a link."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from palace_cli.cli import cli
from palace_cli.editing import initplan
from palace_cli.editing.initplan import apply_init, plan_init

ENV = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
           GIT_COMMITTER_EMAIL="t@example.com", GIT_CONFIG_NOSYSTEM="1")


def git(root: Path, *args) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, env=ENV)
    assert done.returncode == 0, done.stderr
    return done.stdout


def vault(root: Path, repo: bool = True) -> Path:
    """A small Obsidian vault, committed: notes, its settings folder, a .gitignore of its own."""
    for relpath, text in {"Garden/Tomato bed.md": "# Tomato bed\n\nSee [[Watering]].\n",
                          "Watering.md": "Water at dawn.\n", ".obsidian/app.json": "{}\n",
                          ".gitignore": "*.bak\n"}.items():
        (root / relpath).parent.mkdir(parents=True, exist_ok=True)
        (root / relpath).write_text(text)
    if repo:
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-qm", "my vault")
    return root


def status(root: Path) -> set[str]:
    lines = git(root, "status", "--porcelain", "--untracked-files=all").splitlines()
    return {line[3:].strip('"') for line in lines}


def covered(path: str, listed: list[str]) -> bool:
    return any(path == entry or entry.endswith("/") and path.startswith(entry) for entry in listed)


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every path under root (links as their target, files as their bytes), .git/ left out."""
    found = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in dirs + names:
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            found[rel] = ("-> " + os.readlink(path)) if path.is_symlink() else \
                path.read_bytes() if path.is_file() else "dir"
    return found


def test_git_status_after_init_shows_exactly_what_init_listed(tmp_path):
    root = vault(tmp_path / "vault")
    config_before = git(root, "config", "--local", "--list")
    plan = plan_init(root)
    listed = [step.path for step in plan.steps if step.tracked]
    assert {step.path for step in plan.steps} >= {"palace.toml", ".gitignore", ".gitattributes", ".palace-index/",
                                                  ".palace/", ".git/config", ".git/hooks/pre-merge-commit"}
    apply_init(plan)
    changed = status(root)
    assert all(covered(path, listed) for path in changed), (changed, listed)
    assert all(any(covered(path, [entry]) for path in changed) for entry in listed), (changed, listed)
    assert (root / ".gitignore").read_text() == "*.bak\n.palace/\n.*.tmp\n"  # only what palace generates
    config_after = set(git(root, "config", "--local", "--list").splitlines()) - set(config_before.splitlines())
    assert {line.split("=")[0] for line in config_after} == {"merge.palace-index.name", "merge.palace-index.driver"}
    (root / ".obsidian" / "plugins.json").write_text("[]\n")  # a vault's settings stay the owner's to track
    assert ".obsidian/plugins.json" in status(root)
    assert not list(root.rglob("_palace"))  # the generated index is in a dot-folder, apart from the notes


def test_the_cli_lists_every_step_before_it_writes(tmp_path):
    root = vault(tmp_path / "vault")
    steps = plan_init(root).steps
    result = CliRunner().invoke(cli, ["init", str(root)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    listing, _, after = result.output.partition("Adopted 2 notes")
    assert after and all(step.path in listing for step in steps)
    assert ".git/hooks/pre-merge-commit" in listing and "+ .palace/, .*.tmp" in listing


def test_dry_run_writes_nothing(tmp_path):
    root = vault(tmp_path / "vault")
    before, config = snapshot(root), git(root, "config", "--local", "--list")
    result = CliRunner().invoke(cli, ["init", str(root), "--dry-run"], catch_exceptions=False)
    assert result.exit_code == 0 and "palace.toml" in result.output and "Nothing was written" in result.output
    assert snapshot(root) == before and git(root, "config", "--local", "--list") == config


def test_no_git_setup_leaves_git_alone(tmp_path):
    root = vault(tmp_path / "vault")
    (root / ".gitattributes").write_text("*.png binary\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "attributes")
    config, hooks = git(root, "config", "--local", "--list"), sorted(os.listdir(root / ".git" / "hooks"))
    plan = plan_init(root, git_setup=False)
    assert not [s for s in plan.steps if s.path.startswith((".git", ".gitignore", ".gitattributes"))]
    apply_init(plan)
    assert git(root, "config", "--local", "--list") == config and sorted(os.listdir(root / ".git" / "hooks")) == hooks
    assert (root / ".gitignore").read_text() == "*.bak\n" and (root / ".gitattributes").read_text() == "*.png binary\n"
    changed = status(root)
    listed = [step.path for step in plan.steps if step.tracked]
    assert ".palace/" in listed  # not ignored now: init says git will see it
    assert all(covered(path, listed) for path in changed) and all(
        any(covered(path, [entry]) for path in changed) for entry in listed), (changed, listed)


def _reviews_file(root, outside):
    (root / "reviews").write_text("my reviews\n")


def _index_folder_file(root, outside):
    (root / ".palace-index").write_text("mine\n")


def _gitignore_folder(root, outside):
    (root / ".gitignore").unlink()
    (root / ".gitignore").mkdir()


def _linked_out(name):
    def make(root, outside):
        (root / name).symlink_to(outside, target_is_directory=True)
    return make


def _gitignore_linked_out(root, outside):
    (root / ".gitignore").unlink()
    (outside / "shared-ignore").write_text("*.log\n")
    (root / ".gitignore").symlink_to(outside / "shared-ignore")


@pytest.mark.parametrize("obstacle, words", [
    (_reviews_file, "reviews is a file"), (_index_folder_file, ".palace-index is a file"),
    (_gitignore_folder, ".gitignore is a folder"), (_linked_out("reviews"), "reviews is a link"),
    (_linked_out(".palace"), ".palace is a link"), (_linked_out(".palace-index"), ".palace-index is a link"),
    (_gitignore_linked_out, ".gitignore is a link"),
], ids=["reviews-file", "index-folder-file", "gitignore-folder", "reviews-linked-out", "cache-linked-out",
        "index-linked-out", "gitignore-linked-out"])
def test_what_stands_in_the_way_is_one_line_and_nothing_half_made(tmp_path, obstacle, words):
    root = vault(tmp_path / "vault")
    outside = tmp_path / "outside"
    outside.mkdir()
    obstacle(root, outside)
    before, outside_before = snapshot(root), snapshot(outside)
    result = subprocess.run([str(Path(os.sys.executable).parent / "palace"), "init", str(root)], capture_output=True,
                            text=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr, result.stderr
    assert snapshot(root) == before and snapshot(outside) == outside_before


def test_a_run_stopped_midway_leaves_no_palace_and_a_rerun_finishes(tmp_path, monkeypatch):
    root = vault(tmp_path / "vault")

    def broken(*_args, **_kwargs):
        raise OSError("the disk went away")

    monkeypatch.setattr(initplan, "apply_git", broken)
    with pytest.raises(OSError):
        apply_init(plan_init(root))
    assert not (root / "palace.toml").exists()  # written last: nothing says "already a palace"
    monkeypatch.undo()
    done = apply_init(plan_init(root))
    assert done.notes == 2 and (root / ".git" / "hooks" / "pre-merge-commit").exists()
    assert (root / ".gitignore").read_text().count(".palace/") == 1  # the lines the first run wrote, not twice


def test_a_gitignore_not_utf8_keeps_its_bytes_and_a_linked_one_stays_a_link(tmp_path):
    root = vault(tmp_path / "vault")
    (root / ".gitignore").write_bytes(b"caf\xe9.bak\r\n")
    apply_init(plan_init(root))
    assert (root / ".gitignore").read_bytes() == b"caf\xe9.bak\r\n.palace/\r\n.*.tmp\r\n"
    other = vault(tmp_path / "other")
    (other / ".gitignore").unlink()
    (other / "rules").mkdir()
    (other / "rules" / "ignore").write_text("*.bak\n")
    (other / ".gitignore").symlink_to("rules/ignore")
    apply_init(plan_init(other))
    assert (other / ".gitignore").is_symlink() and (other / "rules" / "ignore").read_text() == "*.bak\n.palace/\n.*.tmp\n"


def test_a_shared_hooks_folder_outside_the_repository_is_left_alone(tmp_path):
    root = vault(tmp_path / "vault")
    shared = tmp_path / "my-hooks"
    shared.mkdir()
    git(root, "config", "core.hooksPath", str(shared))
    plan = plan_init(root)
    assert plan.git_setup.skipped and "outside this repository" in plan.git_setup.skipped[0]
    apply_init(plan)
    assert list(shared.iterdir()) == []


def test_a_palace_naming_the_old_index_folder_keeps_it_and_a_file_there_is_a_notice(tmp_path):
    root = vault(tmp_path / "vault", repo=False)
    (root / "palace.toml").write_text('[palace]\nname = "old"\n[notes]\ninclude = ["**/*.md"]\nindex_folder = "_palace"\n')
    runner = CliRunner()
    assert runner.invoke(cli, ["--palace", str(root), "index"], catch_exceptions=False).exit_code == 0
    assert (root / "_palace" / "INDEX.md").is_file() and not (root / ".palace-index").exists()
    for path in sorted((root / "_palace").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    (root / "_palace").rmdir()
    (root / "_palace").write_text("not a folder\n")
    for command in (["index"], ["list"], ["search", "tomato"], ["lint"]):
        result = runner.invoke(cli, ["--palace", str(root), *command])
        assert result.exit_code == 0 and result.exception is None, result.output
    assert "_palace is a file, not a folder" in result.stderr  # lint (and every write of the files) says why
    assert (root / "_palace").read_text() == "not a folder\n"
