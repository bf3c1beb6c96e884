"""`palace mcp`: the stdio MCP server for LLM agents."""

from __future__ import annotations

import click

from palace_cli.errors import UsageError
from palace_cli.cli import pass_ctx


@click.command()
@pass_ctx
def mcp(ctx):
    """Serve this palace to an LLM agent over MCP on stdin/stdout (see docs/mcp.md).

    Example: claude mcp add palace -- palace --palace ~/kb mcp
    """
    import importlib.util

    if importlib.util.find_spec("mcp") is None:  # the SDK is an extra
        raise UsageError("the MCP server needs the mcp package: pip install 'palace-cli[mcp]'")
    from palace_cli.mcp import serve

    serve(ctx.palace)


COMMANDS = [mcp]
