"""`palace lsp`: a language server (pygls) that makes editors palace-aware.

`names` holds the per-index-version tables (resolve, complete, backlinks), `buffer` reads an editor's
text, `features` answers each request through the core, and `server` wires them to pygls on stdio.
"""

from __future__ import annotations


def serve(palace_dir: str | None = None, stdin=None, stdout=None) -> int:
    """Run the palace language server on stdio until the client exits; returns the exit code."""
    from palace_cli.lsp.server import serve as run

    return run(palace_dir, stdin, stdout)


__all__ = ["serve"]
