"""Rich rendering shared by the CLI faces (the only module that imports rich); core returns data, this shows it.

What it prints never carries a control sequence from a note or a chat (`inert.py`): strings are made inert as
rich reads them, and a render hook makes inert whatever text any renderable (a Text, a table, a panel) still
holds; rich's own styles and cursor moves are its control segments, which pass as they are.
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager

from rich.console import Console, RenderHook
from rich.markup import escape
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from palace_cli.cli.inert import inert, json_text


class _Inert:
    """A renderable whose text segments are made inert (its control segments are rich's own, kept)."""

    def __init__(self, renderable):
        self.renderable = renderable

    def __rich_console__(self, console, options):
        for segment in console.render(self.renderable, options):
            yield segment if segment.control else Segment(inert(segment.text), segment.style)


class _InertHook(RenderHook):
    def process_renderables(self, renderables):
        return [_Inert(renderable) for renderable in renderables]


class _Console(Console):
    """A Console that reads every string it is handed as inert text (so widths are measured as shown)."""

    def render_str(self, text: str, **options) -> Text:
        return super().render_str(inert(text), **options)


def _console(**options) -> Console:
    console = _Console(highlight=False, soft_wrap=True, **options)
    console.push_render_hook(_InertHook())
    return console


out = _console()
err = _console(stderr=True)


def emit_json(data) -> None:
    """Print one JSON document on stdout: exact data (the characters JSON leaves raw that a terminal obeys are
    `\\u` escapes)."""
    sys.stdout.write(json_text(json.dumps(data, indent=2, ensure_ascii=False, default=str)) + "\n")


def plain(text: str, stderr: bool = False, end: str = "\n") -> None:
    """Print text as it is but for its control characters (inert): for what is not a table (a prompt, a report)."""
    stream = sys.stderr if stderr else sys.stdout
    stream.write(inert(text) + end)
    stream.flush()


# Columns whose cells are never cut: a path cut mid-word cannot be clicked, copied or grepped.
WHOLE = ("where", "path", "id", "file", "location")
LONG_WORD = 24  # a wrapped column is never narrower than its longest word, up to this many characters


def _text(cell) -> str:
    return inert(cell[0] if isinstance(cell, tuple) else cell)


def _cell(cell) -> Text:
    """A cell as rich Text; a (text, style) pair is styled. Cells are data, never markup."""
    return Text(_text(cell), style=cell[1]) if isinstance(cell, tuple) else Text(_text(cell))


def table(columns: list[str], rows: list[list], title: str | None = None, whole: tuple[str, ...] = WHOLE) -> None:
    """A table on stdout that never cuts a path (or an id).

    Piped, it is one tab-separated line per row (no box, no header, never wrapped; the title goes to
    stderr), so grep and cut work. In a terminal, the `whole` columns keep their full width and the
    others wrap; when that cannot fit, each row becomes two lines: the other cells, then the whole ones.
    """
    if not out.is_terminal:
        if title:
            note(title)
        for row in rows:
            sys.stdout.write("\t".join(" ".join(_text(cell).split()) for cell in row) + "\n")
        return
    kept = [i for i, name in enumerate(columns) if name in whole]
    widths = {}
    for i, column in enumerate(columns):
        cells = [column] + [_text(row[i]) for row in rows]
        if i in kept:
            widths[i] = max(len(cell) for cell in cells)
        else:  # words are never cut either, unless one is longer than LONG_WORD
            widths[i] = min(max((len(word) for cell in cells for word in cell.split()), default=1), LONG_WORD)
    needed = sum(widths.values()) + 3 * len(columns) + 1
    if needed > out.width and len(kept) < len(columns):
        _two_lines(columns, rows, kept, title)
        return
    grid = Table(title=title, show_lines=False, header_style="bold")
    for i, column in enumerate(columns):
        if i in kept:
            grid.add_column(column, no_wrap=True, min_width=widths[i], overflow="ignore")
        else:
            grid.add_column(column, min_width=widths[i], overflow="fold")
    for row in rows:
        grid.add_row(*[_cell(cell) for cell in row])
    out.print(grid)


def _two_lines(columns: list[str], rows: list[list], kept: list[int], title: str | None) -> None:
    """Rows as two lines each: the wrapped cells joined, then the whole cells indented on their own line."""
    if title:
        out.print(Text(title, style="bold"))
    for row in rows:
        head = Text("  ").join(_cell(cell) for i, cell in enumerate(row) if i not in kept and _text(cell))
        out.print(head)
        out.print(Text("    ") + Text("  ").join(_cell(row[i]) for i in kept), no_wrap=True, crop=False,
                  overflow="ignore")


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
