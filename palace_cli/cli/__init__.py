"""The `palace` command line: thin click commands over the core library."""

from __future__ import annotations

import sys

import click

from ..errors import PalaceError, UsageError
from ..palace import Palace


class PalaceGroup(click.Group):
    """Turns PalaceError into a one-line message and its exit code; Ctrl-C into 130."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            click.echo(f"palace: {exc}", err=True)
            sys.exit(exc.exit_code)
        except PalaceError as exc:
            click.echo(f"palace: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("palace: interrupted", err=True)
            sys.exit(130)
        except BrokenPipeError:
            sys.exit(1)


class PalaceContext:
    """What the group passes to commands: the chosen palace dir, opened lazily."""

    def __init__(self, palace_dir):
        self.palace_dir = palace_dir
        self._palace = None

    @property
    def palace(self) -> Palace:
        if self._palace is None:
            self._palace = Palace.find(self.palace_dir)
        return self._palace


pass_ctx = click.make_pass_decorator(PalaceContext)


@click.group(cls=PalaceGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--palace", "palace_dir", type=click.Path(file_okay=False), envvar="PALACE_DIR",
              help="Palace directory (default: walk up from the current directory to palace.toml).")
@click.version_option(package_name="palace-cli", prog_name="palace")
@click.pass_context
def cli(ctx, palace_dir):
    """palace: a memory palace in plain Markdown and git.

    Example: palace recall "how do I survive a crashed coordinator?"
    """
    ctx.obj = PalaceContext(palace_dir)


def main():
    """Console-script entry point."""
    cli(prog_name="palace")


# Each face module exposes COMMANDS; add a module here to register its commands.
FACES = ("notes_cmd", "index_cmd", "retrieve_cmd", "models_cmd", "mcp_cmd", "import_cmd", "study_cmd", "verify_cmd", "bench_cmd", "watch_cmd")


def _register():
    import importlib

    for name in FACES:
        module = importlib.import_module(f"{__name__}.{name}")
        for command in module.COMMANDS:
            cli.add_command(command)


_register()
