"""`palace lsp`: the language server for editors, on stdio."""

from __future__ import annotations

import os
import sys

import click

from palace_cli.cli import pass_ctx


@click.command()
@click.option("--stdio", is_flag=True, help="Talk LSP on stdin/stdout (the default and only transport; "
                                            "accepted because editors pass it).")
@pass_ctx
def lsp(ctx, stdio):
    """Run the language server: completion, hover, definition, backlinks, live lint and fixes in your editor.

    The palace is --palace, $PALACE_DIR, or found walking up from the editor's workspace (then the
    current directory, then the first file opened). Set-up for Neovim, VS Code, Helix and Zed: docs/editors.md.

    Example: palace lsp   # started by the editor, not by hand
    """
    try:
        from palace_cli.lsp import serve
    except ImportError as exc:
        raise click.ClickException(f"the language server needs pygls: pip install 'palace-cli[lsp]' ({exc})")
    from palace_cli.core.config import find_root

    if ctx.palace_dir or os.environ.get("PALACE_DIR"):
        find_root(explicit=ctx.palace_dir)  # a wrong --palace fails here, with a message, not inside the editor
    # stdout is the protocol: whatever else writes to file descriptor 1 (a print, a C library) goes to stderr.
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    sys.exit(serve(ctx.palace_dir, sys.stdin.buffer, protocol_out))


COMMANDS = [lsp]
