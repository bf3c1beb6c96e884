"""The pygls wiring: documents, diagnostics linted off the event loop, requests, lifecycle.

The palace and its tables are the Keeper's (`keeper`), kept current in the background; requests answer
from its current Snapshot and never wait for one to be built, except until the tables are of the notes as they
are on disk (the first refresh, or with no cache the notes read cold: a few seconds at most). Lint runs on a thread of its own (`lint`), so a big buffer never holds up requests.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import traceback
from functools import wraps
from pathlib import Path
from urllib.parse import unquote

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.workspace.position_codec import ServerTextPosition

from palace_cli.core.config import CONFIG_NAME
from palace_cli.errors import PalaceError
from palace_cli.lsp import actions, features
from palace_cli.lsp.buffer import Buffer
from palace_cli.lsp.document import make_live
from palace_cli.lsp.features import Context, Document, note_domain, path_of, relpath_in
from palace_cli.lsp.lint import Linter
from palace_cli.lsp.keeper import Keeper
from palace_cli.lsp.transport import Framing, Protocol
from palace_cli.palace import Palace

DEBOUNCE_S = 0.3  # quiet time after a keystroke before the buffer is linted
READY_WAIT_S = 5.0  # how long a request made while the first tables load waits for them
# What initializationOptions {"disable": [...]} can turn off, and the requests each name stands for.
SWITCHES = {"completion": (lsp.TEXT_DOCUMENT_COMPLETION, lsp.COMPLETION_ITEM_RESOLVE),
            "hover": (lsp.TEXT_DOCUMENT_HOVER,),
            "definition": (lsp.TEXT_DOCUMENT_DEFINITION,), "references": (lsp.TEXT_DOCUMENT_REFERENCES,),
            "symbols": (lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL, lsp.WORKSPACE_SYMBOL),
            "code-actions": (lsp.TEXT_DOCUMENT_CODE_ACTION,), "diagnostics": ()}
log = logging.getLogger("palace.lsp")


def _guarded(method):
    """A handler that answers None (and logs why) instead of failing: a broken note never breaks the server."""
    if asyncio.iscoroutinefunction(method):
        @wraps(method)
        async def run_async(self, *args):
            try:
                return await method(self, *args)
            except PalaceError as exc:
                log.info("%s: %s", method.__name__, exc)
            except Exception:  # one place, at the boundary: the editor keeps a working server
                log.error("%s failed:\n%s", method.__name__, traceback.format_exc())
            return None

        return run_async

    @wraps(method)
    def run(self, *args):
        try:
            return method(self, *args)
        except PalaceError as exc:
            log.info("%s: %s", method.__name__, exc)
        except Exception:
            log.error("%s failed:\n%s", method.__name__, traceback.format_exc())
        return None

    return run


class PalaceServer:
    """The palace language server: `serve()` runs it on stdio."""

    def __init__(self, palace_dir: str | None = None):
        from palace_cli import __version__

        self.server = LanguageServer("palace", __version__, protocol_cls=Protocol)
        self.keeper = Keeper(palace_dir, self._notice, self._tables_changed, self._config_changed,
                             self._may_write_index_files)
        self.shut_down = False
        self.can_create_files = False
        self.disabled: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready: asyncio.Event | None = None  # set once the first snapshot is in
        self._searchable: asyncio.Event | None = None  # set once the first refresh is done (a cold snapshot is not)
        self._pending: dict[str, asyncio.TimerHandle] = {}
        self._buffers: dict[str, Buffer] = {}  # the last Buffer of each open document (its text parsed once)
        self._linter = Linter(self._deliver)
        self._noticed: list[str] = []  # palace notices (a cache that moved) shown once each
        self._notice_lock = threading.Lock()
        self._register()

    # ---- wiring ---------------------------------------------------------------------------------

    def _register(self) -> None:
        def feature(name, options=None):
            def register(method):  # pygls marks the function it registers: give it a plain one
                if asyncio.iscoroutinefunction(method):
                    async def handler(params):
                        return await method(params)
                else:
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
        feature(lsp.TEXT_DOCUMENT_HOVER)(self._at_cursor(features.hover))
        feature(lsp.TEXT_DOCUMENT_DEFINITION)(self._at_cursor(features.definition))
        feature(lsp.TEXT_DOCUMENT_REFERENCES)(self.references)
        feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)(self.document_symbols)
        feature(lsp.WORKSPACE_SYMBOL)(self.workspace_symbols)
        feature(lsp.TEXT_DOCUMENT_CODE_ACTION,
                lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix]))(self.code_actions)

    def serve(self, stdin=None, stdout=None) -> int:
        """Run on stdio until the client says exit (or goes away); 0 after a clean shutdown, else 1."""
        import sys

        try:
            self.server.start_io(Framing(stdin or sys.stdin.buffer), stdout)
        finally:
            self.stop()
        return 0 if self.shut_down else 1

    # ---- lifecycle ------------------------------------------------------------------------------

    def initialize(self, params: lsp.InitializeParams) -> None:
        """Find the palace, take the client's options and what it can apply."""
        make_live(self.server.workspace)  # a keystroke costs the lines it touches (lsp/document.py)
        starts = [path_of(folder.uri) for folder in params.workspace_folders or []]
        starts += [path_of(params.root_uri) if params.root_uri else None,
                   Path(params.root_path) if params.root_path else None]
        self._find([s for s in starts if s is not None] + [Path.cwd()])
        self._disable((params.initialization_options or {}).get("disable", []) if isinstance(
            params.initialization_options, dict) else [])
        edits = params.capabilities.workspace.workspace_edit if params.capabilities.workspace else None
        self.can_create_files = bool(edits and edits.document_changes and lsp.ResourceOperationKind.Create
                                     in (edits.resource_operations or []))

    def _disable(self, names: list) -> None:
        """Turn features off: their capabilities are not announced (pygls builds them after this handler)."""
        for name in names if isinstance(names, list) else []:
            if name not in SWITCHES:
                log.warning("palace lsp: cannot disable %r; known: %s", name, ", ".join(SWITCHES))
                continue
            self.disabled.add(name)
            for method in SWITCHES[name]:
                self.server.protocol.fm.features.pop(method, None)
                self.server.protocol.fm.feature_options.pop(method, None)

    @property
    def palace(self) -> Palace | None:
        """The palace served (None until one is found)."""
        return self.keeper.palace

    def _find(self, starts: list[Path]) -> None:
        """Find the palace (Keeper.find); a palace.toml that cannot be read is said in the editor's log."""
        try:
            self.keeper.find(starts)
        except PalaceError as exc:
            if self.keeper.explicit:
                raise  # --palace was checked when the server started; this is a palace.toml gone bad since
            self._log(lsp.MessageType.Error, f"palace: {exc}")

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
        """Start keeping the tables, and say what arose before the client could be told."""
        with self._notice_lock:
            self._loop = asyncio.get_running_loop()
            self._ready = asyncio.Event()
            self._searchable = asyncio.Event()
            for message in self._noticed:  # arose before the client could be told
                self._show(message)
        if self.palace is None:
            self._log(lsp.MessageType.Info,
                      f"palace: no {CONFIG_NAME} above the workspace; waiting for a note to be opened")
            return
        self.keeper.start()

    def _log(self, kind: lsp.MessageType, message: str) -> None:
        """A line in the editor's log of this server (and on stderr)."""
        log.info("%s", message)
        try:
            self.server.window_log_message(lsp.LogMessageParams(kind, message))
        except Exception:  # before initialize there is no one to tell
            pass

    def _may_write_index_files(self) -> bool:
        """The watcher regenerates INDEX.md and index/*.md unless the editor has one of them open."""
        for document in self._open_documents():
            relpath = relpath_in(self.palace, path_of(document.uri))
            if relpath is not None and (relpath == self.palace.root_index
                                        or relpath.startswith(self.palace.index_dir + "/")):
                return False
        return True

    def _tables_changed(self) -> None:
        """A new snapshot, or the first refresh done (on the keeper's thread): ready, and lint again."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._republish)

    def _config_changed(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.keeper.reload_config)

    def shutdown(self, params: None) -> None:
        """Stop the watcher and the linter; the process ends at `exit`."""
        self.shut_down = True
        self.stop()

    def stop(self) -> None:
        """Stop the watcher and the linter (idempotent)."""
        self._linter.stop()
        self.keeper.stop()

    # ---- documents ------------------------------------------------------------------------------

    def _open_documents(self) -> list:
        """pygls's open documents; each keeps the URI as the client wrote it (pygls keys them decoded)."""
        return list(self.server.workspace.text_documents.values())

    def _context(self) -> Context | None:
        snapshot = self.keeper.current()
        if snapshot is None:
            return None
        codec = self.server.workspace.position_codec

        def to_client(lines: list[str], line: int, column: int) -> lsp.Position:
            return codec.position_to_client_units(lines, ServerTextPosition(line, column))

        return Context(self.palace, snapshot, to_client, self._open_document, self.can_create_files)

    async def _ready_context(self, searchable: bool = False) -> Context | None:
        """The context to answer from; while the first tables load (with searchable, while the first refresh fills
        the search index), waits for them (a few seconds at most)."""
        event = self._searchable if searchable else self._ready
        if self.palace is not None and event is not None and not event.is_set():
            try:
                await asyncio.wait_for(event.wait(), READY_WAIT_S)
            except asyncio.TimeoutError:
                pass
        return self._context()

    def _open_document(self, relpath: str) -> Document | None:
        """The open buffer of a palace file, whatever the client's spelling of its URI."""
        for document in self._open_documents():
            if relpath_in(self.palace, path_of(document.uri)) == relpath:
                return self._document(document.uri)
        return None

    def _document(self, uri: str) -> Document:
        """The document as the editor holds it now (its Buffer parsed once per version)."""
        text_document = self.server.workspace.get_text_document(uri)
        key, source = unquote(uri), text_document.source
        buffer = self._buffers.get(key)
        if buffer is None or buffer.text is not source:
            buffer = Buffer(source)
            if key in self.server.workspace.text_documents:
                self._buffers[key] = buffer
        if self.palace is None:
            return Document(text_document.uri, buffer, text_document.version, None, None)
        relpath = relpath_in(self.palace, path_of(text_document.uri))
        return Document(text_document.uri, buffer, text_document.version, relpath,
                        note_domain(self.keeper.snapshot, relpath, self.palace.rules))

    def _cursor(self, uri: str, position: lsp.Position) -> tuple[Document, int, int]:
        doc = self._document(uri)
        server = self.server.workspace.position_codec.position_from_client_units(
            doc.lines, lsp.Position(position.line, position.character))
        return doc, server.line, server.character

    @_guarded
    def did_open(self, params: lsp.DidOpenTextDocumentParams) -> None:
        """Lint the new buffer at once (and find the palace from it when none was found yet)."""
        if self.palace is None:
            path = path_of(params.text_document.uri)
            if path is not None:
                self._find([path])
                if self.palace is not None and self._loop is not None:
                    self.keeper.start()
        self._schedule(params.text_document.uri, 0.0)

    @_guarded
    def did_change(self, params: lsp.DidChangeTextDocumentParams) -> None:
        """Lint the buffer once typing pauses."""
        self._schedule(params.text_document.uri, DEBOUNCE_S)

    @_guarded
    def did_save(self, params: lsp.DidSaveTextDocumentParams) -> None:
        """Tell the watcher (file systems without events)."""
        path = path_of(params.text_document.uri)
        watcher = self.keeper.watcher
        if watcher is not None and path is not None:
            watcher.notice(str(path))  # the file event says so too; this covers file systems without events

    @_guarded
    def did_close(self, params: lsp.DidCloseTextDocumentParams) -> None:
        """Forget the buffer and clear its diagnostics."""
        uri = params.text_document.uri
        pending = self._pending.pop(unquote(uri), None)
        if pending is not None:
            pending.cancel()
        self._buffers.pop(unquote(uri), None)
        self.server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri, []))

    # ---- diagnostics ----------------------------------------------------------------------------

    def _schedule(self, uri: str, delay: float) -> None:
        """Lint the buffer once typing pauses for `delay` seconds (a newer change restarts the wait)."""
        key = unquote(uri)
        pending = self._pending.pop(key, None)
        if pending is not None:
            pending.cancel()
        loop = self._loop or asyncio.get_running_loop()
        self._pending[key] = loop.call_later(delay, self._publish, uri)

    def _republish(self) -> None:
        if self._ready is not None and self.keeper.ready:
            self._ready.set()
        if self._searchable is not None and self.keeper.refreshed:
            self._searchable.set()
        for document in self._open_documents():
            self._schedule(document.uri, 0.0)

    @_guarded
    def _publish(self, uri: str) -> None:
        """Hand the buffer as it is now to the linter (its diagnostics come back through _deliver)."""
        self._pending.pop(unquote(uri), None)
        if unquote(uri) not in self.server.workspace.text_documents:
            return
        ctx = self._context()
        if ctx is None or not self.keeper.ready or "diagnostics" in self.disabled:
            return  # lint waits for the first refresh (or the cold read): a stale cache would report links that are fine
        self._linter.submit(ctx, self._document(uri))

    def _deliver(self, doc: Document, found: list[lsp.Diagnostic]) -> None:
        """Diagnostics from the linter's thread: published on the loop, unless the buffer changed meanwhile."""
        def publish() -> None:
            current = self.server.workspace.text_documents.get(unquote(doc.uri))
            if current is not None and current.version == doc.version:
                self.server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(doc.uri, found, doc.version))

        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(publish)

    # ---- requests -------------------------------------------------------------------------------

    async def _at(self, uri: str, position: lsp.Position) -> tuple[Context | None, Document, int, int]:
        """The context, the document as it was when the request came, and the cursor in code points."""
        doc, line, column = self._cursor(uri, position)  # read before waiting: later changes are not this request's
        ctx = await self._ready_context()
        if ctx is not None:
            doc.domain = note_domain(ctx.snapshot, doc.relpath, ctx.palace.rules)
        return ctx, doc, line, column

    def _at_cursor(self, answer):
        """A request handler that answers `answer(ctx, doc, line, column)` (None while there is no palace)."""
        async def request(self, params):
            ctx, doc, line, column = await self._at(params.text_document.uri, params.position)
            return answer(ctx, doc, line, column) if ctx is not None else None

        request.__name__ = answer.__name__
        return _guarded(request).__get__(self)

    @_guarded
    async def completion(self, params: lsp.CompletionParams):
        """Completion at the cursor; an incomplete empty list while the first tables load."""
        ctx, doc, line, column = await self._at(params.text_document.uri, params.position)
        if ctx is None or self._ready is None or not self._ready.is_set():  # loading: more to come, never "nothing"
            loading = self.palace is not None and doc.buffer.completing(line, column) is not None
            return lsp.CompletionList(is_incomplete=True, items=[]) if loading else None
        return features.completion(ctx, doc, line, column)

    @_guarded
    async def resolve_item(self, item: lsp.CompletionItem):
        """A completion item with its memory's description."""
        ctx = await self._ready_context()
        return features.resolve_item(ctx, item) if ctx is not None else item

    @_guarded
    async def references(self, params: lsp.ReferenceParams):
        """Backlinks, in saved notes and open buffers."""
        ctx, doc, line, column = await self._at(params.text_document.uri, params.position)
        if ctx is None:
            return None
        opened = [relpath_in(self.palace, path_of(d.uri)) for d in self._open_documents()]
        return features.references(ctx, doc, line, column, params.context.include_declaration,
                                   [r for r in opened if r is not None])

    @_guarded
    async def document_symbols(self, params: lsp.DocumentSymbolParams):
        """The outline of a buffer."""
        doc = self._document(params.text_document.uri)
        ctx = await self._ready_context()
        return features.document_symbols(ctx, doc) if ctx is not None else None

    @_guarded
    async def workspace_symbols(self, params: lsp.WorkspaceSymbolParams):
        """Memories for a query, as `palace search` ranks them."""
        ctx = await self._ready_context(searchable=bool(params.query.strip()))
        return features.workspace_symbols(ctx, params.query, searched=self.keeper.refreshed) if ctx is not None \
            else None

    @_guarded
    async def code_actions(self, params: lsp.CodeActionParams):
        """Quick fixes for the palace's diagnostics."""
        doc = self._document(params.text_document.uri)
        ctx = await self._ready_context()
        if ctx is None:
            return None
        doc.domain = note_domain(ctx.snapshot, doc.relpath, ctx.palace.rules)
        return actions.code_actions(ctx, doc, params.context.diagnostics)


def serve(palace_dir: str | None = None, stdin=None, stdout=None) -> int:
    """Run the palace language server on stdio; returns the exit code."""
    return PalaceServer(palace_dir).serve(stdin, stdout)
