"""The `palace` command line: thin click commands over the core library."""

from __future__ import annotations

import importlib
import sys

import click

from palace_cli.cli.inert import inert
from palace_cli.errors import PalaceError, UsageError
from palace_cli.palace import Palace


class PalaceGroup(click.Group):
    """Loads a command's module only when that command runs (fast start), and turns PalaceError
    into a one-line message and its exit code; Ctrl-C into 130."""

    def list_commands(self, ctx):
        return sorted(set(COMMAND_MODULES) | set(self.commands))

    def get_command(self, ctx, name):
        if name not in self.commands and name in COMMAND_MODULES:
            module = importlib.import_module(f"{__name__}.{COMMAND_MODULES[name]}")
            for command in module.COMMANDS:
                _accept_palace_option(command)
                self.add_command(command)
        return self.commands.get(name)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            click.echo(f"palace: {inert(exc)}", err=True)
            sys.exit(exc.exit_code)
        except PalaceError as exc:
            click.echo(f"palace: {inert(exc)}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("palace: interrupted", err=True)
            sys.exit(130)
        except BrokenPipeError:
            sys.exit(1)
        except UnicodeError as exc:  # an argument, stdin or a name that is not UTF-8: palace writes UTF-8 only
            click.echo(f"palace: {inert(_not_utf8(exc))}", err=True)
            sys.exit(1)
        except Exception as exc:
            # A write the core did not expect to fail (a read-only or full disk): one line, not a traceback.
            from palace_cli.core.disk import disk_error

            where = getattr(exc, "filename", None)
            error = disk_error(exc, f"cannot write {where}" if where else "a write failed")
            if error is None:
                raise
            click.echo(f"palace: {inert(error)}", err=True)
            sys.exit(error.exit_code)


def _not_utf8(exc: UnicodeError) -> str:
    """One line for text that is not UTF-8: the byte, and that palace stopped before writing it."""
    if isinstance(exc, UnicodeDecodeError):
        byte = f"byte 0x{exc.object[exc.start]:02x}"
    elif isinstance(exc, UnicodeEncodeError) and "\udc80" <= exc.object[exc.start] <= "\udcff":
        byte = f"byte 0x{ord(exc.object[exc.start]) - 0xDC00:02x}"
    else:
        return f"text palace cannot encode ({exc})"
    return f"text that is not UTF-8 ({byte}, in an argument, standard input or a file name); give UTF-8 text"


class PalaceContext:
    """What the group passes to commands: the chosen palace dir, opened lazily."""

    def __init__(self, palace_dir):
        self.palace_dir = palace_dir
        self._palace = None

    @property
    def palace(self) -> Palace:
        if self._palace is None:
            self._palace = open_palace(self.palace_dir)
        return self._palace


def open_palace(directory=None) -> Palace:
    """The palace a command works on, its notices (a cache that moved) going to stderr as they arise."""
    palace = Palace.find(directory)
    palace.notify = lambda message: click.echo(f"palace: {inert(message)}", err=True)
    return palace


pass_ctx = click.make_pass_decorator(PalaceContext)


def _late_palace(ctx, _param, value):
    if value is not None:
        ctx.find_object(PalaceContext).palace_dir = value  # parsed before the command body opens the palace
    return value


def _accept_palace_option(command: click.Command) -> None:
    """Let `--palace DIR` come after the subcommand too (`palace recall Q --palace ~/kb`), in nested groups too.

    The option is hidden (the group's own `--palace` is the documented one) and sets the same value.
    """
    if not any(param.name == "late_palace" for param in command.params):
        command.params.append(click.Option(["--palace", "late_palace"], type=click.Path(file_okay=False),
                                           hidden=True, expose_value=False, callback=_late_palace))
    for sub in getattr(command, "commands", {}).values():
        _accept_palace_option(sub)


@click.group(cls=PalaceGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--palace", "palace_dir", type=click.Path(file_okay=False), envvar="PALACE_DIR",
              help="Palace directory (default: walk up from the current directory to palace.toml); also accepted after the command.")
@click.version_option(package_name="palace-cli", prog_name="palace")
@click.pass_context
def cli(ctx, palace_dir):
    """palace: a memory palace in plain Markdown and git.

    Example: palace recall "how do I survive a crashed coordinator?"
    """
    ctx.obj = PalaceContext(palace_dir)


def main():
    """Console-script entry point."""
    args = sys.argv[1:]
    if any(args[i : i + 2] == ["hook", "claude-code"] for i in range(len(args))):
        _hook_main(args)
    cli(prog_name="palace")


HOOK_DEADLINE_S = 20  # a hook gives up before Claude Code's own timeout (30 s, as `hook install` writes it)


def _hook_main(args: list[str]) -> None:
    """`palace hook claude-code`: exit status 0 whatever happens, in at most HOOK_DEADLINE_S: Claude Code takes
    status 2 as "blocked" (on Stop it tells the model to go on), and waits for a hook that hangs. Whatever
    click does with the arguments (a `--palace` naming a file is its usage error, status 2) is one line too."""
    import os
    import threading

    def give_up() -> None:
        sys.stderr.write(f"palace hook: gave up after {HOOK_DEADLINE_S} s (a slow or stuck disk?); "
                         "nothing half-written is left (writes are atomic)\n")
        sys.stderr.flush()
        os._exit(0)

    timer = threading.Timer(HOOK_DEADLINE_S, give_up)
    timer.daemon = True
    timer.start()
    try:
        cli.main(args, prog_name="palace", standalone_mode=False)
    except SystemExit:
        pass  # the command said what it had to (one line) before it exited
    except click.ClickException as exc:
        click.echo(f"palace hook: {inert(exc.format_message())}", err=True)
    except BaseException as exc:  # noqa: BLE001 - the boundary of a hook: nothing may reach Claude Code but one line
        click.echo(f"palace hook: {inert(f'{type(exc).__name__}: {exc}')}", err=True)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # Claude Code stopped reading: nothing more to tell it
    os._exit(0)  # no flush at exit that could fail and turn the status into 120


# Command name -> the face module that defines it (each module lists its commands in COMMANDS).
# Static so that `palace recall` imports only what recall needs; tests/test_docs.py checks it.
COMMAND_MODULES = {
    "init": "notes_cmd", "add": "notes_cmd", "list": "notes_cmd", "show": "notes_cmd", "domains": "notes_cmd",
    "lint": "notes_cmd", "index": "index_cmd", "search": "retrieve_cmd", "recall": "retrieve_cmd",
    "wake-up": "retrieve_cmd", "models": "models_cmd", "mcp": "mcp_cmd", "import": "import_cmd",
    "quiz": "study_cmd", "due": "study_cmd", "stats": "study_cmd", "score": "study_cmd", "evolve": "study_cmd",
    "redqueen": "study_cmd", "verify": "verify_cmd", "ask": "verify_cmd", "bench": "bench_cmd", "watch": "watch_cmd",
    "supersede": "versions_cmd", "history": "versions_cmd", "similar": "retrieve_cmd",
    "lsp": "lsp_cmd",
    "edit": "curate_cmd", "rm": "curate_cmd", "mv": "curate_cmd", "backlinks": "curate_cmd", "tags": "curate_cmd",
    "open": "curate_cmd", "git": "git_cmd",
    "distill": "memory_cmd", "consolidate": "memory_cmd", "hook": "memory_cmd",
}
