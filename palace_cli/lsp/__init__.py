"""`palace lsp`: a language server (pygls) that makes editors palace-aware.

`snapshot` holds what the server knows at one index version (the core resolver's names, backlinks and
suggestions, with `matcher`'s completion tables), `buffer` reads an editor's text, `features` and
`actions` answer each request through the core, `keeper` keeps the palace and its snapshot current,
`lint` lints buffers off the event loop, `transport` guards what reaches pygls, and `server` wires them
to pygls on stdio.
"""

from __future__ import annotations


def serve(palace_dir: str | None = None, stdin=None, stdout=None) -> int:
    """Run the palace language server on stdio until the client exits; returns the exit code."""
    from palace_cli.lsp.server import serve as run

    return run(palace_dir, stdin, stdout)


__all__ = ["serve"]
