"""`palace watch`: keep the indexes and index files up to date while notes are edited."""

from __future__ import annotations

import json
import signal
import sys
import time

import click

from palace_cli.core.wording import plural
from palace_cli.cli import pass_ctx, render


def _line(event) -> str:
    """One human line per watcher event."""
    stamp = time.strftime("%H:%M:%S")
    if event.kind == "error":
        return f"{stamp} refresh failed: {event.error} (retrying)"
    if event.kind == "embedded":
        return f"{stamp} embedded {plural(event.embedded, 'unit')} in {event.seconds:.1f} s"
    report = event.report
    if event.kind == "started":
        return f"{stamp} watching {len(report.added) + len(report.updated) + report.unchanged if report else 0} notes; Ctrl-C to stop"
    if event.kind == "stopped" or report is None:
        return f"{stamp} stopped"
    if not report.changed and not report.index_files:
        return f"{stamp} checked in {event.seconds * 1000:.0f} ms: nothing changed"
    parts = [f"{len(v)} {k}" for k, v in (("added", report.added), ("updated", report.updated),
                                          ("removed", report.removed)) if v]
    line = f"{stamp} refreshed in {event.seconds * 1000:.0f} ms: {', '.join(parts) or 'no notes changed'}"
    if report.index_files:
        line += "; index files: " + ", ".join(report.index_files)
    if report.vectors and report.vectors.embedded:
        line += f"; embedded {report.vectors.embedded}"
    if report.problems:
        line += f"; {plural(len(report.problems), 'note')} could not be indexed (palace lint)"
    return line


@click.command()
@click.option("--debounce", type=float, default=0.2, show_default=True,
              help="Seconds of quiet after a save before refreshing.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line for each event.")
@pass_ctx
def watch(ctx, debounce, as_json):
    """Watch the palace and refresh the search indexes and INDEX.md about a second after each save.

    Example: palace watch   # in a spare terminal while you edit notes
    """
    from palace_cli.watch import Watcher
    from palace_cli.cli.index_cmd import report_problems_once

    def on_event(event):
        if as_json:
            sys.stdout.write(json.dumps(event.as_dict(), default=str) + "\n")
        else:
            render.out.print(_line(event), markup=False, highlight=False)
        sys.stdout.flush()

    watcher = None
    signal.signal(signal.SIGTERM, _on_term)
    try:
        with render.progress_bar() as progress:
            watcher = Watcher(ctx.palace, on_event, progress=progress, debounce=debounce,
                              max_delay=max(debounce * 4, 0.8))
            report = watcher.start()
        if report is not None:
            if report.dense != "on":
                render.note(report.dense_reason)
            report_problems_once(report.problems)
        watcher.wait()
    except KeyboardInterrupt:
        if watcher is not None:
            watcher.stop()
        raise SystemExit(130) from None
    except _Terminated:
        if watcher is not None:
            watcher.stop()
        raise SystemExit(143) from None


class _Terminated(Exception):
    """SIGTERM (a service manager, `kill`): stop as cleanly as on Ctrl-C."""


def _on_term(signum, frame):
    raise _Terminated()


COMMANDS = [watch]
