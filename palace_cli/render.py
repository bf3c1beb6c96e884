"""Rich rendering shared by the CLI faces; core returns data, this shows it."""

from __future__ import annotations

import json
import sys

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
