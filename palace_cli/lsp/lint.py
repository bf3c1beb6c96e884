"""Live lint for the language server: buffers are linted on a thread of their own, one at a time, the newest
version of each, so a long lint never holds up the requests of other documents (or of the same one)."""

from __future__ import annotations

import logging
import threading
import traceback
from typing import Callable
from urllib.parse import unquote

from lsprotocol import types as lsp

from palace_cli.errors import PalaceError
from palace_cli.lsp import features
from palace_cli.lsp.features import Context, Document

log = logging.getLogger("palace.lsp")


class Linter:
    """A worker thread that turns (context, document) jobs into diagnostics handed to `deliver(doc, found)`."""

    def __init__(self, deliver: Callable[[Document, list[lsp.Diagnostic]], None]):
        self._deliver = deliver
        self._jobs: dict[str, tuple[Context, Document]] = {}  # by document; a newer version replaces an older
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def submit(self, ctx: Context, doc: Document) -> None:
        """Lint this version of the document when the thread is free (an older pending version is dropped)."""
        with self._wake:
            if self._stopped:
                return
            self._jobs[unquote(doc.uri)] = (ctx, doc)
            if self._thread is None:
                # A daemon: a lint under way never keeps the process from exiting when the editor says exit.
                self._thread = threading.Thread(target=self._run, name="palace-lsp-lint", daemon=True)
                self._thread.start()
            self._wake.notify()

    def stop(self) -> None:
        """Drop pending jobs and end the thread after the lint under way (idempotent)."""
        with self._wake:
            self._stopped = True
            self._jobs.clear()
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._jobs and not self._stopped:
                    self._wake.wait()
                if self._stopped:
                    return
                ctx, doc = self._jobs.pop(next(iter(self._jobs)))
            try:
                found = features.diagnostics(ctx, doc)
            except PalaceError as exc:
                log.info("diagnostics of %s: %s", doc.uri, exc)
                continue
            except Exception:  # the boundary of the thread: the next buffer is linted all the same
                log.error("diagnostics of %s failed:\n%s", doc.uri, traceback.format_exc())
                continue
            self._deliver(doc, found)
