"""Rich rendering shared by the CLI faces (the only module that imports rich); core returns data, this shows it."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def emit_json(data) -> None:
    """Print one JSON document on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def table(columns: list[str], rows: list[list], title: str | None = None) -> None:
    """A simple table on stdout."""
    grid = Table(title=title, show_lines=False, header_style="bold")
    for column in columns:
        grid.add_column(column, overflow="fold")
    for row in rows:
        grid.add_row(*[Text(str(cell)) for cell in row])  # cells are data, never markup
    out.print(grid)


def warn(message: str) -> None:
    """A warning on stderr."""
    err.print(f"[yellow]warning:[/yellow] {escape(message)}", markup=True)


def note(message: str) -> None:
    """An informational line on stderr."""
    err.print(message, markup=False)


def problems(items, limit: int | None = None) -> None:
    """Problems one per line, errors red, warnings yellow."""
    for problem in items[:limit] if limit else items:
        colour = "red" if problem.severity == "error" else "yellow"
        out.print(f"[{colour}]{escape(str(problem))}[/{colour}]", markup=True, highlight=False)


@contextmanager
def progress_bar():
    """A transient rich progress bar on stderr, yielded as a core Progress callback: one bar per stage,
    a pulse while the total is unknown (0)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True) as bar:
        tasks = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total or None)
            bar.update(tasks[stage], completed=done, total=total or None)

        yield progress


def progress_lines():
    """A core Progress callback that prints each new stage once, dim, on stderr (for steps worth keeping)."""
    last = [None]

    def progress(stage: str, done: int, total: int) -> None:
        if stage != last[0]:
            last[0] = stage
            err.print(stage, style="dim", highlight=False, markup=False, soft_wrap=True)

    return progress
