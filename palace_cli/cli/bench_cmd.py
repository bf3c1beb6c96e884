"""`palace bench`: measurements on a palace; each benchmark is a subcommand."""

from __future__ import annotations

import click

from .verify_cmd import bench_verify


@click.group()
def bench():
    """Benchmarks with confidence intervals, on the palace's own questions.

    Example: palace --palace example-palace bench verify
    """


bench.add_command(bench_verify)

COMMANDS = [bench]
