"""Commands that build and read the search indexes: index, status."""

from __future__ import annotations

import time

import click

from palace_cli.cli import pass_ctx, render
from palace_cli.core.wording import duration, plural
from palace_cli.editing.lint import merge_problems
from palace_cli.errors import UsageError


def refresh_with_progress(palace, rebuild: bool = False, wait: bool = False):
    """Run refresh with a rich progress bar on stderr in a terminal; `wait` embeds every missing vector first
    (the bar then shows units done, units a second and the time left)."""
    with render.embedding_progress() as progress:
        return palace.refresh(progress=progress, rebuild=rebuild, **({"vectors": "wait"} if wait else {}))


def report_problems_once(problems) -> None:
    """One stderr line counting the notes that could not be indexed (so not searched either): never silently
    skipped."""
    if problems:
        them = "it" if len(problems) == 1 else "them"
        render.warn(f"{plural(len(problems), 'note')} could not be indexed, so no search sees {them}; "
                    "run `palace lint` for details")


def meaning_line(state) -> str:
    """One line on the vectors: all in, what waits and how long it will take at the rate measured, or why none."""
    counts = state.counts
    if state.dense != "on":
        return f"Meaning: {state.reason}; search goes by words."
    if not state.waiting:
        return f"Meaning: all {plural(counts.total, 'unit')} have a vector."
    speed, measured = state.speed
    rate = f"{speed:.1f} units/s" + ("" if measured else ", a first guess until measured")
    if counts.embedded:
        head = f"Meaning: {counts.embedded:,} of {plural(counts.total, 'unit')} have a vector, {state.waiting:,} wait"
    else:
        head = f"Meaning: {plural(state.waiting, 'unit')} to embed"
    where = "being embedded in the background" if state.worker else "embedded by the next command"
    return (f"{head}: {where}, about {duration(state.eta_s)} at {rate}; words answer meanwhile "
            "(`palace status` shows progress).")


@click.command()
@click.option("--rebuild", is_flag=True, help="Drop the caches under .palace/ and rebuild everything.")
@click.option("--check", is_flag=True,
              help="Change nothing; exit 1 when INDEX.md or index/*.md differ from what the notes produce, two notes "
                   "share an id, or a merge in progress left a link broken.")
@click.option("--wait", is_flag=True,
              help="Embed every unit that has no vector yet before returning (a progress bar in a terminal), instead "
                   "of in the background.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def index(ctx, rebuild, check, wait, as_json):
    """Refresh the search indexes and regenerate INDEX.md and index/*.md; vectors are embedded in the background.

    Example: palace index --check   # for CI and pre-commit hooks
    """
    palace = ctx.palace
    if check and (rebuild or wait):
        raise UsageError(f"--check changes nothing; use it without {'--rebuild' if rebuild else '--wait'}")
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
    report = refresh_with_progress(palace, rebuild=rebuild, wait=wait)
    if as_json:
        render.emit_json({**report.as_dict(), "vectors": palace.vector_counts().as_dict()})
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
    elif report.waiting:
        render.note(meaning_line(palace.embedding()))
    if report.dense != "on":
        render.note(report.dense_reason)
    render.problems(report.problems)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def status(ctx, as_json):
    """Say what the index holds: notes, units with a vector and units waiting for one, and what embeds them now.

    Example: palace status
    """
    palace = ctx.palace
    report = palace.refresh()  # as every command does: a worker starts when units wait and none runs
    state = palace.embedding()
    notes = report.unchanged + len(report.added) + len(report.updated)
    if as_json:
        render.emit_json({"notes": notes, "problems": len(report.problems), **state.as_dict()})
        return
    render.out.print(f"Notes: {notes:,} indexed" + (f", {plural(len(report.problems), 'problem')} (palace lint)"
                                                    if report.problems else "") + ".", markup=False)
    render.out.print(meaning_line(state), markup=False)
    render.out.print(_embedding_line(state), markup=False)


def _embedding_line(state) -> str:
    """Who embeds now: the background worker, a watcher, a command waiting in the foreground, or nothing."""
    held = state.worker
    if not held:
        return "Embedding: nothing runs now."
    who = {"worker": "the background worker", "watch": "a watcher (palace watch, palace lsp)",
           "foreground": "a command in the foreground", "rebuild": "a rebuild"}.get(held.get("kind"), "a process")
    since = time.strftime("%H:%M:%S", time.localtime(held["since"])) if held.get("since") else "?"
    line = f"Embedding: {who}, pid {held['pid']}, since {since}"
    if held.get("total"):
        line += f": {held.get('done', 0):,} of {held['total']:,} done"
    if held.get("run_rate"):
        line += f" at {held['run_rate']:.1f} units/s"
    return line + "."


COMMANDS = [index, status]
