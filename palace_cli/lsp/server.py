"""The pygls wiring: documents, diagnostics linted off the event loop, the snapshot kept current by the watcher,
lifecycle.

Three Palace objects over one palace, each with its own SQLite connection and used by one thread:
requests (the event loop), the watcher's refreshes, and the snapshot builder. The watcher refreshes
the shared caches under .palace/ exactly as `palace watch` does; after each refresh that changed the
note store the builder makes a new Snapshot in the background and swaps it in, so no request ever
waits for a 10,000-note table to be built (only the very first: a request waits for it a few seconds).
Lint runs on a thread of its own, one buffer at a time, so a big buffer never holds up requests.
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

from palace_cli.core.config import CONFIG_NAME, find_root
from palace_cli.core.layout import INDEX_DIR, ROOT_INDEX
from palace_cli.errors import PalaceError
from palace_cli.lsp import actions, features
from palace_cli.lsp.buffer import Buffer
from palace_cli.lsp.features import Context, Document, note_domain, path_of, relpath_in
from palace_cli.lsp.lint import Linter
from palace_cli.lsp.snapshot import Snapshot
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

        self.explicit = palace_dir
        self.server = LanguageServer("palace", __version__, protocol_cls=Protocol)
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
        self._ready: asyncio.Event | None = None  # set once the first snapshot is in
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
        feature(lsp.TEXT_DOCUMENT_HOVER)(self.hover)
        feature(lsp.TEXT_DOCUMENT_DEFINITION)(self.definition)
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
        for name in names if isinstance(names, list) else []:
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
            except (PalaceError, OSError, ValueError):
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
            self._ready = asyncio.Event()
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
        for document in self._open_documents():
            relpath = relpath_in(self.palace, path_of(document.uri))
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
        """Stop the watcher and the linter (idempotent)."""
        self._linter.stop()
        watcher, self.watcher = self.watcher, None
        if watcher is not None:
            watcher.stop()

    # ---- documents ------------------------------------------------------------------------------

    def _open_documents(self) -> list:
        """pygls's open documents; each keeps the URI as the client wrote it (pygls keys them decoded)."""
        return list(self.server.workspace.text_documents.values())

    def _context(self) -> Context | None:
        snapshot = self._current()
        if snapshot is None:
            return None
        codec = self.server.workspace.position_codec

        def to_client(lines: list[str], line: int, column: int) -> lsp.Position:
            return codec.position_to_client_units(lines, ServerTextPosition(line, column))

        return Context(self.palace, snapshot, to_client, self._open_document, self.can_create_files)

    async def _ready_context(self) -> Context | None:
        """The context to answer from; while the first tables load, waits for them (a few seconds at most)."""
        if self.palace is not None and self._ready is not None and not self._ready.is_set():
            try:
                await asyncio.wait_for(self._ready.wait(), READY_WAIT_S)
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
        relpath = relpath_in(self.palace, path_of(text_document.uri)) if self.palace is not None else None
        return Document(text_document.uri, buffer, text_document.version, relpath, note_domain(self.snapshot, relpath))

    def _cursor(self, uri: str, position: lsp.Position) -> tuple[Document, int, int]:
        doc = self._document(uri)
        server = self.server.workspace.position_codec.position_from_client_units(
            doc.lines, lsp.Position(position.line, position.character))
        return doc, server.line, server.character

    @_guarded
    def did_open(self, params: lsp.DidOpenTextDocumentParams) -> None:
        if self.palace is None:
            path = path_of(params.text_document.uri)
            if path is not None:
                self._open_palace([path])
                if self.palace is not None and self._loop is not None:
                    self._start_background()
        self._schedule(params.text_document.uri, 0.0)

    @_guarded
    def did_change(self, params: lsp.DidChangeTextDocumentParams) -> None:
        self._schedule(params.text_document.uri, DEBOUNCE_S)

    @_guarded
    def did_save(self, params: lsp.DidSaveTextDocumentParams) -> None:
        path = path_of(params.text_document.uri)
        if self.watcher is not None and path is not None:
            self.watcher.notice(str(path))  # the file event says so too; this covers file systems without events

    @_guarded
    def did_close(self, params: lsp.DidCloseTextDocumentParams) -> None:
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
        # Ready: tables of the notes, from the cache as it was or, for a palace with no cache yet, the first refresh.
        if self._ready is not None and self.snapshot is not None and (self.snapshot.memories or self._refreshed):
            self._ready.set()
        for document in self._open_documents():
            self._schedule(document.uri, 0.0)

    @_guarded
    def _publish(self, uri: str) -> None:
        """Hand the buffer as it is now to the linter (its diagnostics come back through _deliver)."""
        self._pending.pop(unquote(uri), None)
        if unquote(uri) not in self.server.workspace.text_documents:
            return
        ctx = self._context()
        if ctx is None or not self._refreshed or "diagnostics" in self.disabled:
            return  # lint waits for the first refresh: a stale cache would report links that are fine
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
            doc.domain = note_domain(ctx.snapshot, doc.relpath)
        return ctx, doc, line, column

    @_guarded
    async def completion(self, params: lsp.CompletionParams):
        ctx, doc, line, column = await self._at(params.text_document.uri, params.position)
        if ctx is None or self._ready is None or not self._ready.is_set():  # loading: more to come, never "nothing"
            loading = self.palace is not None and doc.buffer.completing(line, column) is not None
            return lsp.CompletionList(is_incomplete=True, items=[]) if loading else None
        return features.completion(ctx, doc, line, column)

    @_guarded
    async def resolve_item(self, item: lsp.CompletionItem):
        ctx = await self._ready_context()
        return features.resolve_item(ctx, item) if ctx is not None else item

    @_guarded
    async def hover(self, params: lsp.HoverParams):
        ctx, doc, line, column = await self._at(params.text_document.uri, params.position)
        return features.hover(ctx, doc, line, column) if ctx is not None else None

    @_guarded
    async def definition(self, params: lsp.DefinitionParams):
        ctx, doc, line, column = await self._at(params.text_document.uri, params.position)
        return features.definition(ctx, doc, line, column) if ctx is not None else None

    @_guarded
    async def references(self, params: lsp.ReferenceParams):
        ctx, doc, line, column = await self._at(params.text_document.uri, params.position)
        if ctx is None:
            return None
        opened = [relpath_in(self.palace, path_of(d.uri)) for d in self._open_documents()]
        return features.references(ctx, doc, line, column, params.context.include_declaration,
                                   [r for r in opened if r is not None])

    @_guarded
    async def document_symbols(self, params: lsp.DocumentSymbolParams):
        doc = self._document(params.text_document.uri)
        ctx = await self._ready_context()
        return features.document_symbols(ctx, doc) if ctx is not None else None

    @_guarded
    async def workspace_symbols(self, params: lsp.WorkspaceSymbolParams):
        ctx = await self._ready_context()
        return features.workspace_symbols(ctx, params.query) if ctx is not None else None

    @_guarded
    async def code_actions(self, params: lsp.CodeActionParams):
        doc = self._document(params.text_document.uri)
        ctx = await self._ready_context()
        if ctx is None:
            return None
        doc.domain = note_domain(ctx.snapshot, doc.relpath)
        return actions.code_actions(ctx, doc, params.context.diagnostics)


def serve(palace_dir: str | None = None, stdin=None, stdout=None) -> int:
    """Run the palace language server on stdio; returns the exit code."""
    return PalaceServer(palace_dir).serve(stdin, stdout)
