"""The CLI reference in docs/cli.md, generated from every command's --help (run by cog)."""

from __future__ import annotations

import click


def _walk(command: click.Command, path: list[str]):
    yield path, command
    if isinstance(command, click.Group):
        ctx = click.Context(command, info_name=path[-1])
        for name in sorted(command.list_commands(ctx)):
            yield from _walk(command.get_command(ctx, name), path + [name])


def cli_reference() -> str:
    """Markdown: one section per command with its help text, as `palace ... --help` prints it."""
    from palace_cli.cli import cli

    parts = []
    for path, command in _walk(cli, ["palace"]):
        info_name = " ".join(path)
        with click.Context(command, info_name=info_name, terminal_width=100, max_content_width=100) as ctx:
            text = command.get_help(ctx)
        level = "#" * min(len(path) + 1, 4)
        parts.append(f"{level} `{info_name}`\n\n```\n{text}\n```\n")
    return "\n".join(parts)
