"""`palace git`: set up a repository so that merges never conflict in generated files; the driver and hook bodies."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click

from palace_cli.cli import pass_ctx, render
from palace_cli.core.wording import plural
from palace_cli.editing.gitsetup import setup_git, stage
from palace_cli.editing.lint import merge_problems
from palace_cli.errors import PalaceError
from palace_cli.index.files import MARKER, render_all
from palace_cli.index.merge import merge_generated


@click.group(name="git")
def git_group():
    """Git without conflicts: merge driver and hooks for the generated index files (see docs/git.md).

    Example: palace git setup --hook
    """


@git_group.command()
@click.option("--hook", is_flag=True, help="Also install a pre-commit hook running `palace index --check`.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def setup(ctx, hook, as_json):
    """Install the merge driver, .gitattributes and the pre-merge-commit hook in this palace's repository.

    Run it once per clone (git does not copy a repository's config or hooks). Example: palace git setup --hook
    """
    report = setup_git(ctx.palace, hook=hook)
    if as_json:
        render.emit_json(report.as_dict())
        return
    for line in report.attributes:
        render.out.print(f".gitattributes: {line}", markup=False)
    for line in report.ignored:
        render.out.print(f".gitignore: {line}", markup=False)
    for key in report.config:
        render.out.print(f"git config {key}", markup=False)
    for path in report.hooks:
        render.out.print(f"hook: {path}", markup=False)
    for reason in report.skipped:
        render.warn(f"hook not installed: {reason}")
    if not (report.attributes or report.ignored or report.config or report.hooks):
        render.out.print("Already set up.", markup=False)


@git_group.command(name="merge-driver")
@click.argument("base", type=click.Path(dir_okay=False))
@click.argument("ours", type=click.Path(dir_okay=False))
@click.argument("theirs", type=click.Path(dir_okay=False))
@click.argument("path", required=False, default="")
def merge_driver(base, ours, theirs, path):
    """Merge a generated index file for git (`%O %A %B %P`): line by line, never a conflict; the result goes to OURS.

    A file in index/ that palace did not generate is merged by `git merge-file` as usual (conflicts and all).
    """
    texts = [_read_side(p) for p in (base, ours, theirs)]
    if not all(MARKER in text for text in texts[1:] if text):  # a missing side (added on one branch) is empty
        done = subprocess.run(["git", "merge-file", "-L", "ours", "-L", "base", "-L", "theirs", ours, base, theirs])
        sys.exit(min(done.returncode, 127))
    Path(ours).write_text(merge_generated(*texts), encoding="utf-8")


@git_group.command()
@click.option("--stage", "stage_", is_flag=True, help="Also `git add` the regenerated files.")
@click.option("--merge", is_flag=True,
              help="The pre-merge-commit hook: stage, and exit 1 when a file changed, so git stops the merge for "
                   "`git commit --no-edit` to finish it with the regenerated files.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def regenerate(ctx, stage_, merge, as_json):
    """Regenerate INDEX.md and index/*.md from the notes on disk (no embedding), for hooks.

    Example: palace git regenerate --stage
    """
    palace = ctx.palace
    report = palace.refresh(embedder=None)
    written = report.index_files
    paths = sorted(set(render_all(palace.site, palace.index.scan(light=True))) | set(written))
    if stage_ or merge:
        stage(palace, [p for p in paths if (palace.root / p).exists() or p in written])
    if as_json:
        render.emit_json({"written": written, "staged": paths if stage_ or merge else []})
    elif written:
        render.note(f"palace: regenerated {plural(len(written), 'index file')} from the notes: {', '.join(written)}")
    problems = merge_problems(palace, merging=True) if merge else []
    if problems:
        render.problems(problems)
        render.note("palace: the merge leaves the notes above wrong (git merged them without a conflict); fix "
                    "them, `git add` them, then `git commit` to finish the merge")
        raise SystemExit(1)
    if merge and written:
        # git makes the merge commit from the tree it merged, not from the index a pre-merge-commit hook
        # changed: stopping the merge lets `git commit` make it from the staged, regenerated files.
        render.note("palace: the merged notes give other index files than the line merge; they are staged: "
                    "run `git commit --no-edit` to finish the merge")
        raise SystemExit(1)


def _read_side(path: str) -> str:
    """One side of a merge as text; a side that does not exist is empty (added on one branch only)."""
    try:
        return Path(path).read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise PalaceError(f"merge driver: cannot read {path}: {exc.strerror}") from None


COMMANDS = [git_group]
