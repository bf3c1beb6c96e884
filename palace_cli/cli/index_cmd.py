"""Commands that build and read the search indexes: index, search."""

from __future__ import annotations

import click

from palace_cli.cli import pass_ctx, render
from palace_cli.core.wording import plural
from palace_cli.editing.lint import merge_problems
from palace_cli.errors import UsageError


def refresh_with_progress(palace, rebuild: bool = False):
    """Run refresh with a rich progress bar on stderr when there is real work."""
    with render.progress_bar() as progress:
        return palace.refresh(progress=progress, rebuild=rebuild)


def report_problems_once(report) -> None:
    """One stderr line counting unreadable notes, so they are never silently skipped."""
    if report.problems:
        render.warn(f"{plural(len(report.problems), 'note')} could not be indexed; run `palace lint` for details")


@click.command()
@click.option("--rebuild", is_flag=True, help="Drop the caches under .palace/ and rebuild everything.")
@click.option("--check", is_flag=True,
              help="Change nothing; exit 1 when INDEX.md or index/*.md differ from what the notes produce, two notes "
                   "share an id, or a merge in progress left a link broken.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def index(ctx, rebuild, check, as_json):
    """Refresh the search indexes and regenerate INDEX.md and index/*.md.

    Example: palace index --check   # for CI and pre-commit hooks
    """
    palace = ctx.palace
    if check and rebuild:
        raise UsageError("--check changes nothing; use it without --rebuild")
    if check:
        items, problems = palace.stale(), merge_problems(palace)
        if as_json:
            render.emit_json({"stale": items, "problems": [p.as_dict() for p in problems]})
        else:
            for item in items:
                render.out.print(item)
            render.out.print("The generated index files match the notes." if not items else
                             f"{plural(len(items), 'generated file')} out of date: run `palace index` and commit them.")
            render.problems(problems)
        raise SystemExit(1 if items or problems else 0)
    report = refresh_with_progress(palace, rebuild=rebuild)
    if as_json:
        render.emit_json(report.as_dict())
        return
    render.out.print(
        f"{len(report.added)} added, {len(report.updated)} updated, {len(report.removed)} removed, "
        f"{report.unchanged} unchanged; index files written: {len(report.index_files)}"
        f" ({sum(report.timings.values()):.2f} s)"
    )
    if report.vectors:
        render.out.print(f"embeddings: {report.vectors.embedded} computed, {report.vectors.kept} reused")
        if report.vectors.model_changed_from:
            render.warn(f"embedding model changed from {report.vectors.model_changed_from}: re-embedded every memory")
    if report.dense != "on":
        render.note(report.dense_reason)
    render.problems(report.problems)


COMMANDS = [index]
