"""The pygls wiring: documents, debounced diagnostics, the snapshot kept current by the watcher, lifecycle.

Three Palace objects over one palace, each with its own SQLite connection and used by one thread:
requests (the event loop), the watcher's refreshes, and the snapshot builder. The watcher refreshes
the shared caches under .palace/ exactly as `palace watch` does; after each refresh that changed the
note store the builder makes a new Snapshot in the background and swaps it in, so no request ever
waits for a 10,000-note table to be built.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import traceback
from functools import wraps
from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.workspace.position_codec import ServerTextPosition

from palace_cli.core.config import CONFIG_NAME, find_root
from palace_cli.errors import PalaceError
from palace_cli.palace import Palace
from palace_cli.core.layout import INDEX_DIR, ROOT_INDEX
from palace_cli.lsp import features
from palace_cli.lsp.features import Context, Document, path_of, relpath_in
from palace_cli.lsp.names import Snapshot

DEBOUNCE_S = 0.3  # quiet time after a keystroke before the buffer is linted
# What initializationOptions {"disable": [...]} can turn off, and the requests each name stands for.
SWITCHES = {"completion": (lsp.TEXT_DOCUMENT_COMPLETION, lsp.COMPLETION_ITEM_RESOLVE),
            "hover": (lsp.TEXT_DOCUMENT_HOVER,),
            "definition": (lsp.TEXT_DOCUMENT_DEFINITION,), "references": (lsp.TEXT_DOCUMENT_REFERENCES,),
            "symbols": (lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL, lsp.WORKSPACE_SYMBOL),
            "code-actions": (lsp.TEXT_DOCUMENT_CODE_ACTION,), "diagnostics": ()}
log = logging.getLogger("palace.lsp")


def _guarded(method):
    """A request handler that answers None (and logs why) instead of failing: a broken note never breaks the server."""

    @wraps(method)
    def run(self, *args):
        try:
            return method(self, *args)
        except PalaceError as exc:
            log.info("%s: %s", method.__name__, exc)
        except Exception:  # one place, at the boundary: the editor keeps a working server
            log.error("%s failed:\n%s", method.__name__, traceback.format_exc())
        return None

    return run


class PalaceServer:
    """The palace language server: `serve()` runs it on stdio."""

    def __init__(self, palace_dir: str | None = None):
        from palace_cli import __version__

        self.explicit = palace_dir
        self.server = LanguageServer("palace", __version__)
        self.palace: Palace | None = None
        self.snapshot: Snapshot | None = None
        self.watcher = None
        self.shut_down = False
        self.can_create_files = False
        self.disabled: set[str] = set()
        self._reader: Palace | None = None
        self._build_lock = threading.Lock()
        self._building = False
        self._refreshed = False  # diagnostics wait for the watcher's first refresh
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: dict[str, asyncio.TimerHandle] = {}
        self._noticed: list[str] = []  # palace notices (a cache that moved) shown once each
        self._notice_lock = threading.Lock()
        self._register()

    # ---- wiring ---------------------------------------------------------------------------------

    def _register(self) -> None:
        def feature(name, options=None):
            def register(method):  # pygls marks the function it registers: give it a plain one
                def handler(params):
                    return method(params)

                self.server.feature(name, options)(handler)

            return register

        feature(lsp.INITIALIZE)(self.initialize)
        feature(lsp.INITIALIZED)(self.initialized)
        feature(lsp.SHUTDOWN)(self.shutdown)
        feature(lsp.TEXT_DOCUMENT_DID_OPEN)(self.did_open)
        feature(lsp.TEXT_DOCUMENT_DID_CHANGE)(self.did_change)
        feature(lsp.TEXT_DOCUMENT_DID_SAVE)(self.did_save)
        feature(lsp.TEXT_DOCUMENT_DID_CLOSE)(self.did_close)
        feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=["[", " ", ",", "/"],
                                                                   resolve_provider=True))(self.completion)
        feature(lsp.COMPLETION_ITEM_RESOLVE)(self.resolve_item)
        feature(lsp.TEXT_DOCUMENT_HOVER)(self.hover)
        feature(lsp.TEXT_DOCUMENT_DEFINITION)(self.definition)
        feature(lsp.TEXT_DOCUMENT_REFERENCES)(self.references)
        feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)(self.document_symbols)
        feature(lsp.WORKSPACE_SYMBOL)(self.workspace_symbols)
        feature(lsp.TEXT_DOCUMENT_CODE_ACTION,
                lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix]))(self.code_actions)

    def serve(self, stdin=None, stdout=None) -> int:
        """Run on stdio until the client says exit (or goes away); 0 after a clean shutdown, else 1."""
        try:
            self.server.start_io(stdin, stdout)
        finally:
            self.stop()
        return 0 if self.shut_down else 1

    # ---- lifecycle ------------------------------------------------------------------------------

    def initialize(self, params: lsp.InitializeParams) -> None:
        starts = [path_of(folder.uri) for folder in params.workspace_folders or []]
        starts += [path_of(params.root_uri) if params.root_uri else None,
                   Path(params.root_path) if params.root_path else None]
        self._open_palace([s for s in starts if s is not None] + [Path.cwd()])
        self._disable((params.initialization_options or {}).get("disable", []) if isinstance(
            params.initialization_options, dict) else [])
        edits = params.capabilities.workspace.workspace_edit if params.capabilities.workspace else None
        self.can_create_files = bool(edits and edits.document_changes and lsp.ResourceOperationKind.Create
                                     in (edits.resource_operations or []))

    def _disable(self, names: list) -> None:
        """Turn features off: their capabilities are not announced (pygls builds them after this handler)."""
        for name in names:
            if name not in SWITCHES:
                log.warning("palace lsp: cannot disable %r; known: %s", name, ", ".join(SWITCHES))
                continue
            self.disabled.add(name)
            for method in SWITCHES[name]:
                self.server.protocol.fm.features.pop(method, None)
                self.server.protocol.fm.feature_options.pop(method, None)

    def _open_palace(self, starts: list[Path]) -> None:
        """Find the palace: --palace (or $PALACE_DIR), else walking up from the workspace, the cwd or a file."""
        if self.palace is not None:
            return
        if self.explicit:
            self.palace = self._with_notices(Palace.find(self.explicit))
            return
        for start in starts:
            try:
                root = find_root(start=start.parent if start.is_file() else start, explicit=None)
            except PalaceError:
                continue
            try:
                self.palace = self._with_notices(Palace(root))
            except PalaceError as exc:  # a palace.toml that cannot be read: say so, in the editor's log
                self._log(lsp.MessageType.Error, f"palace: {exc}")
            return

    def _with_notices(self, palace: Palace) -> Palace:
        palace.notify = self._notice
        return palace

    def _notice(self, message: str) -> None:
        """A palace notice (its cache cannot be written and moved elsewhere, ...), shown once in the editor as
        a warning: `palace` on the command line prints the same line on stderr. Called from any thread."""
        with self._notice_lock:
            if message in self._noticed:
                return  # the server's palaces (reader, watcher) each meet the same condition
            self._noticed.append(message)
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._show, message)

    def _show(self, message: str) -> None:
        log.warning("palace: %s", message)
        try:
            self.server.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Warning, f"palace: {message}"))
        except Exception:  # the client is gone
            pass

    def initialized(self, params: lsp.InitializedParams) -> None:
        with self._notice_lock:
            self._loop = asyncio.get_running_loop()
            for message in self._noticed:  # arose before the client could be told
                self._show(message)
        if self.palace is None:
            self._log(lsp.MessageType.Info,
                      f"palace: no {CONFIG_NAME} above the workspace; waiting for a note to be opened")
            return
        self._start_background()

    def _log(self, kind: lsp.MessageType, message: str) -> None:
        """A line in the editor's log of this server (and on stderr)."""
        log.info("%s", message)
        try:
            self.server.window_log_message(lsp.LogMessageParams(kind, message))
        except Exception:  # before initialize there is no one to tell
            pass

    def _start_background(self) -> None:
        threading.Thread(target=self._background, name="palace-lsp-start", daemon=True).start()

    def _background(self) -> None:
        """Serve from the cache as it is at once; refresh the notes (lint waits for that, not for embeddings);
        then keep everything current with a watcher, as `palace watch` does."""
        from palace_cli.index.refresh import refresh
        from palace_cli.watch import Watcher

        self._reader = self._with_notices(Palace(self.palace.root))
        self._build()
        try:
            refresh(self._reader, embedder=None, index_files=self._may_write_index_files())
        except Exception:
            log.error("the first refresh failed:\n%s", traceback.format_exc())
        self._refreshed = True
        self._build(force=True)
        if self.shut_down:
            return
        watcher = Watcher(self._with_notices(Palace(self.palace.root)), self._watched,
                          index_files=self._may_write_index_files)
        try:
            watcher.start()
        except Exception:
            log.error("the watcher did not start:\n%s", traceback.format_exc())
            return
        # Published once started: a shutdown that came meanwhile found no watcher to stop, so it is stopped here
        # (stopping a half-started one would join threads that have not started).
        self.watcher = watcher
        if self.shut_down:
            self.stop()

    def _may_write_index_files(self) -> bool:
        """The watcher regenerates INDEX.md and index/*.md unless the editor has one of them open."""
        for uri in list(self.server.workspace.text_documents):
            relpath = relpath_in(self.palace, path_of(uri))
            if relpath is not None and (relpath == ROOT_INDEX or relpath.startswith(INDEX_DIR + "/")):
                return False
        return True

    def _watched(self, event) -> None:
        """A watcher event (on the watcher's thread): a refresh that changed something means a new snapshot."""
        if event.kind in ("started", "refreshed"):
            if CONFIG_NAME in event.triggers and self._loop is not None:
                self._loop.call_soon_threadsafe(self._reload_config)
            self._build()

    def _reload_config(self) -> None:
        try:
            self.palace.reload_config()
            if self._reader is not None:
                self._reader.reload_config()
        except PalaceError as exc:
            log.info("palace.toml: %s", exc)

    def _build(self, force: bool = False) -> None:
        """Make the snapshot of the cache as it is now, when it changed, and republish diagnostics (force:
        republish even when the cache did not change: the first refresh is done, diagnostics may start)."""
        with self._build_lock:
            try:
                version = self._reader.index.store.version()
                if self.snapshot is not None and self.snapshot.version == version:
                    if force and self._loop is not None:
                        self._loop.call_soon_threadsafe(self._republish)
                    return
                snapshot = Snapshot.load(self._reader)
                snapshot.backlinks("")  # build the backlink table here rather than in the first request
            except Exception:
                log.error("could not read the palace's cache:\n%s", traceback.format_exc())
                return
            finally:
                self._building = False
            self.snapshot = snapshot
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._republish)

    def _current(self) -> Snapshot | None:
        """The snapshot to answer from; a newer cache (another process refreshed) is loaded in the background."""
        if self.palace is None or self.snapshot is None:
            return None
        if self.palace.index.store.version() != self.snapshot.version and not self._building and self._reader:
            self._building = True
            threading.Thread(target=self._build, name="palace-lsp-snapshot", daemon=True).start()
        return self.snapshot

    def shutdown(self, params: None) -> None:
        self.shut_down = True
        self.stop()

    def stop(self) -> None:
        """Stop the watcher (idempotent)."""
        watcher, self.watcher = self.watcher, None
        if watcher is not None:
            watcher.stop()

    # ---- documents ------------------------------------------------------------------------------

    def _context(self) -> Context | None:
        snapshot = self._current()
        if snapshot is None:
            return None
        codec = self.server.workspace.position_codec

        def to_client(lines: list[str], line: int, column: int) -> lsp.Position:
            return codec.position_to_client_units(lines, ServerTextPosition(line, column))

        return Context(self.palace, snapshot, to_client, self._open_text, self.can_create_files)

    def _open_text(self, uri: str) -> str | None:
        document = self.server.workspace.text_documents.get(uri)
        return document.source if document is not None else None

    def _document(self, uri: str) -> Document:
        text_document = self.server.workspace.get_text_document(uri)
        relpath = relpath_in(self.palace, path_of(uri)) if self.palace is not None else None
        return Document(uri, text_document.source, text_document.version, relpath)

    def _cursor(self, uri: str, position: lsp.Position) -> tuple[Document, int, int]:
        doc = self._document(uri)
        lines = doc.lines
        server = self.server.workspace.position_codec.position_from_client_units(
            lines, lsp.Position(position.line, position.character))
        return doc, server.line, server.character

    def did_open(self, params: lsp.DidOpenTextDocumentParams) -> None:
        if self.palace is None:
            path = path_of(params.text_document.uri)
            if path is not None:
                self._open_palace([path])
                if self.palace is not None and self._loop is not None:
                    self._start_background()
        self._schedule(params.text_document.uri, 0.0)

    def did_change(self, params: lsp.DidChangeTextDocumentParams) -> None:
        self._schedule(params.text_document.uri, DEBOUNCE_S)

    def did_save(self, params: lsp.DidSaveTextDocumentParams) -> None:
        path = path_of(params.text_document.uri)
        if self.watcher is not None and path is not None:
            self.watcher.notice(str(path))  # the file event says so too; this covers file systems without events

    def did_close(self, params: lsp.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        pending = self._pending.pop(uri, None)
        if pending is not None:
            pending.cancel()
        self.server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri, []))

    # ---- diagnostics ----------------------------------------------------------------------------

    def _schedule(self, uri: str, delay: float) -> None:
        """Lint the buffer once typing pauses for `delay` seconds (a newer change restarts the wait)."""
        pending = self._pending.pop(uri, None)
        if pending is not None:
            pending.cancel()
        loop = self._loop or asyncio.get_running_loop()
        self._pending[uri] = loop.call_later(delay, self._publish, uri)

    def _republish(self) -> None:
        for uri in list(self.server.workspace.text_documents):
            self._schedule(uri, 0.0)

    @_guarded
    def _publish(self, uri: str) -> None:
        self._pending.pop(uri, None)
        if uri not in self.server.workspace.text_documents:
            return
        ctx = self._context()
        if ctx is None or not self._refreshed or "diagnostics" in self.disabled:
            return  # lint waits for the first refresh: a stale cache would report links that are fine
        doc = self._document(uri)
        found = features.diagnostics(ctx, doc)
        self.server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri, found, doc.version))

    # ---- requests -------------------------------------------------------------------------------

    @_guarded
    def completion(self, params: lsp.CompletionParams):
        ctx = self._context()
        if ctx is None:
            return None
        doc, line, column = self._cursor(params.text_document.uri, params.position)
        return features.completion(ctx, doc, line, column)

    @_guarded
    def resolve_item(self, item: lsp.CompletionItem):
        ctx = self._context()
        return features.resolve_item(ctx, item) if ctx is not None else item

    @_guarded
    def hover(self, params: lsp.HoverParams):
        ctx = self._context()
        if ctx is None:
            return None
        doc, line, column = self._cursor(params.text_document.uri, params.position)
        return features.hover(ctx, doc, line, column)

    @_guarded
    def definition(self, params: lsp.DefinitionParams):
        ctx = self._context()
        if ctx is None:
            return None
        doc, line, column = self._cursor(params.text_document.uri, params.position)
        return features.definition(ctx, doc, line, column)

    @_guarded
    def references(self, params: lsp.ReferenceParams):
        ctx = self._context()
        if ctx is None:
            return None
        doc, line, column = self._cursor(params.text_document.uri, params.position)
        return features.references(ctx, doc, line, column, params.context.include_declaration,
                                   list(self.server.workspace.text_documents))

    @_guarded
    def document_symbols(self, params: lsp.DocumentSymbolParams):
        ctx = self._context()
        return features.document_symbols(ctx, self._document(params.text_document.uri)) if ctx else None

    @_guarded
    def workspace_symbols(self, params: lsp.WorkspaceSymbolParams):
        ctx = self._context()
        return features.workspace_symbols(ctx, params.query) if ctx else None

    @_guarded
    def code_actions(self, params: lsp.CodeActionParams):
        ctx = self._context()
        if ctx is None:
            return None
        return features.code_actions(ctx, self._document(params.text_document.uri), params.context.diagnostics)


def serve(palace_dir: str | None = None, stdin=None, stdout=None) -> int:
    """Run the palace language server on stdio; returns the exit code."""
    return PalaceServer(palace_dir).serve(stdin, stdout)
