"""`palace lsp` through a real LSP client (pygls's) over stdio, and the tables and buffer reading under it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from lsprotocol import types as lsp  # noqa: E402
from pygls.lsp.client import LanguageClient  # noqa: E402

from conftest import EXAMPLE, READ_ONLY_LAUNCHER, copy_palace, needs_namespace  # noqa: E402
from palace_cli.errors import PalaceError  # noqa: E402
from palace_cli.editing.lint import lint, lint_note_text  # noqa: E402
from palace_cli.lsp.snapshot import Snapshot  # noqa: E402
from palace_cli.lsp.buffer import Buffer  # noqa: E402
from palace_cli.editing.curate import backlinks  # noqa: E402
from palace_cli.core.notefile import parse_note
from palace_cli.core.noteedit import update_frontmatter
from palace_cli.palace import Palace  # noqa: E402
from palace_cli.search.retrieve import search  # noqa: E402
from palace_cli.core.tokens import contains_phrase, fingerprint  # noqa: E402

ENTRY = "from palace_cli.cli import main; main()"
BTREE = "memories/storage-engines/b-tree.md"
CAPABILITIES = lsp.ClientCapabilities(workspace=lsp.WorkspaceClientCapabilities(
    workspace_edit=lsp.WorkspaceEditClientCapabilities(
        document_changes=True, resource_operations=[lsp.ResourceOperationKind.Create])))


class Editor:
    """pygls's LanguageClient driving `palace lsp` in a subprocess, with a synchronous face for tests."""

    def __init__(self, root: Path, env: dict, cwd: Path | None = None, args: tuple = (), options=None,
                 launcher: tuple = ()):
        self.root = root
        self.loop = asyncio.new_event_loop()
        self.client = LanguageClient("palace-tests", "1")
        self.diagnostics: dict[str, list[lsp.Diagnostic]] = {}
        self.published: dict[str, int] = {}
        self.texts: dict[str, str] = {}
        self.versions: dict[str, int] = {}
        self.messages: list[lsp.ShowMessageParams] = []

        @self.client.feature(lsp.WINDOW_SHOW_MESSAGE)
        def on_message(params: lsp.ShowMessageParams):
            self.messages.append(params)

        @self.client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: lsp.PublishDiagnosticsParams):
            self.diagnostics[params.uri] = list(params.diagnostics)
            self.published[params.uri] = self.published.get(params.uri, 0) + 1

        command = (*launcher, sys.executable, "-c", ENTRY, *args, "lsp")
        self.run(self.client.start_io(*command, cwd=str(cwd or root), env=env))
        self.initialized = self.run(self.client.initialize_async(lsp.InitializeParams(
            capabilities=CAPABILITIES, root_uri=(cwd or root).as_uri(), initialization_options=options,
            workspace_folders=[lsp.WorkspaceFolder((cwd or root).as_uri(), "palace")])))
        self.client.initialized(lsp.InitializedParams())

    def run(self, awaitable, timeout: float = 120):
        return self.loop.run_until_complete(asyncio.wait_for(awaitable, timeout))

    def uri(self, relpath: str) -> str:
        return (self.root / relpath).as_uri()

    def open(self, relpath: str, text: str | None = None) -> str:
        uri = self.uri(relpath)
        self.texts[uri] = (self.root / relpath).read_text(encoding="utf-8") if text is None else text
        self.versions[uri] = 1
        self.client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri, "markdown", 1, self.texts[uri])))
        return uri

    def change(self, uri: str, text: str) -> None:
        self.texts[uri] = text
        self.versions[uri] += 1
        self.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(self.versions[uri], uri),
            [lsp.TextDocumentContentChangeWholeDocument(text)]))

    def type_at(self, uri: str, line: int, character: int, inserted: str) -> None:
        """An incremental change, as editors send keystrokes."""
        lines = self.texts[uri].split("\n")
        lines[line] = lines[line][:character] + inserted + lines[line][character:]
        self.texts[uri] = "\n".join(lines)
        self.versions[uri] += 1
        where = lsp.Position(line, character)
        self.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(self.versions[uri], uri),
            [lsp.TextDocumentContentChangePartial(lsp.Range(where, where), inserted)]))

    def wait(self, condition, timeout: float = 60.0, what: str = "the server") -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            self.loop.run_until_complete(asyncio.sleep(0.05))

    def diagnosed(self, uri: str, condition=lambda found: True, timeout: float = 60.0) -> list[lsp.Diagnostic]:
        """The next diagnostics published for uri that satisfy condition."""
        self.wait(lambda: uri in self.diagnostics and condition(self.diagnostics[uri]), timeout,
                  f"diagnostics of {uri}")
        return self.diagnostics[uri]

    def at(self, uri: str, needle: str, offset: int = 0) -> lsp.Position:
        """The position of needle (plus offset characters) in the buffer."""
        for number, line in enumerate(self.texts[uri].split("\n")):
            if needle in line:
                return lsp.Position(number, line.index(needle) + offset)
        raise AssertionError(f"{needle!r} not in {uri}")

    def complete(self, uri: str, position: lsp.Position) -> list[lsp.CompletionItem]:
        found = self.run(self.client.text_document_completion_async(
            lsp.CompletionParams(lsp.TextDocumentIdentifier(uri), position)))
        return [] if found is None else found.items if isinstance(found, lsp.CompletionList) else found

    def hover(self, uri: str, position: lsp.Position) -> str | None:
        found = self.run(self.client.text_document_hover_async(
            lsp.HoverParams(lsp.TextDocumentIdentifier(uri), position)))
        return found.contents.value if found else None

    def actions(self, uri: str) -> list[lsp.CodeAction]:
        diagnostics = self.diagnostics.get(uri, [])
        everything = lsp.Range(lsp.Position(0, 0), lsp.Position(len(self.texts[uri].split("\n")), 0))
        return self.run(self.client.text_document_code_action_async(lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri), everything, lsp.CodeActionContext(diagnostics)))) or []

    def close(self) -> int:
        """shutdown, exit; the server's exit code."""
        self.run(self.client.shutdown_async(None))
        self.client.exit(None)
        self.run(self.client._server.wait(), timeout=30)
        code = self.client._server.returncode
        self.run(self.client.stop(), timeout=30)
        self.loop.close()
        return code


def apply_edits(text: str, edits: list[lsp.TextEdit]) -> str:
    """Apply TextEdits (UTF-16 positions, as the client announced none) the way an editor does."""
    lines = text.split("\n")

    def offset(position: lsp.Position) -> int:
        line = lines[position.line] if position.line < len(lines) else ""
        units, column = 0, 0
        while column < len(line) and units < position.character:
            units += 2 if ord(line[column]) > 0xFFFF else 1
            column += 1
        return sum(len(x) + 1 for x in lines[: position.line]) + column

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
    return text


def server_env(home: Path) -> dict:
    env = dict(os.environ, PALACE_HOME=str(home / "palace-home"), XDG_CONFIG_HOME=str(home / "config"),
               XDG_DATA_HOME=str(home / "data"), PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("PALACE_DIR", None)
    return env


@pytest.fixture(scope="module")
def lsp_palace(tmp_path_factory) -> Path:
    """The example palace, with an alias on bloom-filter, for the read-only tests of one shared server."""
    root = copy_palace(EXAMPLE, tmp_path_factory.mktemp("lsp") / "palace", git=False)
    update_frontmatter(root / "memories/storage-engines/bloom-filter.md",
                       {"aliases": ["approximate membership filter"]})
    return root


@pytest.fixture(scope="module")
def editor(lsp_palace, tmp_path_factory):
    """One server for the tests that only read; its first diagnostics mean its tables are of the notes on disk."""
    session = Editor(lsp_palace, server_env(tmp_path_factory.mktemp("home")))
    session.diagnosed(session.open(BTREE))
    yield session
    session.close()


@pytest.fixture
def fresh(example_palace, tmp_path):
    """A server of its own over a private copy of the example palace (for tests that change things)."""
    session = Editor(example_palace, server_env(tmp_path))
    yield session
    if not session.loop.is_closed():
        session.close()


# ---- the protocol, end to end ---------------------------------------------------------------------


@pytest.mark.slow
def test_initialize_announces_the_features(editor):
    caps = editor.initialized.capabilities
    assert caps.hover_provider and caps.definition_provider and caps.references_provider
    assert caps.document_symbol_provider and caps.workspace_symbol_provider and caps.code_action_provider
    assert "[" in caps.completion_provider.trigger_characters and caps.completion_provider.resolve_provider
    assert editor.initialized.server_info.name == "palace"


@pytest.mark.parametrize("typed, first, inserted", [
    ("two-ph", "two-phase-commit", "two-phase-commit]]"),                        # id prefix
    ("Two-Phase Comm", "two-phase-commit", "two-phase-commit]]"),                # the subject says what the id says
    ("Log-Structured", "lsm-tree", "lsm-tree|Log-Structured Merge-Tree (LSM-Tree)]]"),  # subject: id|label
    ("approximate memb", "bloom-filter", "bloom-filter|approximate membership filter]]"),  # alias: id|label
    ("merge-tree", "lsm-tree", "lsm-tree|Log-Structured Merge-Tree (LSM-Tree)]]"),  # a later word of the subject
    ("rtbckf", "retry-backoff-jitter", "retry-backoff-jitter]]"),                # letters in order (fuzzy)
    ("storage-engines/wr", "write-ahead-log", "write-ahead-log]]"),              # one domain
])
def test_completion_after_double_bracket(editor, typed, first, inserted):
    uri = editor.uri(BTREE)
    line = len(editor.texts[uri].split("\n")) - 1
    editor.change(uri, editor.texts[uri] + f"See [[{typed}")
    items = editor.complete(uri, lsp.Position(line, len(f"See [[{typed}")))
    assert items, typed
    assert items[0].data["id"] == first
    assert items[0].text_edit.new_text == inserted
    assert items[0].text_edit.range.start == lsp.Position(line, len("See [["))
    assert items[0].label_details.description  # the domain
    assert items[0].label_details.detail.strip()  # the subject
    editor.change(uri, editor.texts[uri][: -len(f"See [[{typed}")])


def test_positions_are_in_the_clients_units(editor):
    """UTF-16 by default: an emoji before the link counts two."""
    uri = editor.uri(BTREE)
    original = editor.texts[uri]
    line = len(original.split("\n")) - 1
    editor.change(uri, original + "\U0001F9E0 é [[lsm-t")
    items = editor.complete(uri, lsp.Position(line, len("\U0001F9E0 é [[lsm-t") + 1))
    assert items[0].data["id"] == "lsm-tree"
    assert items[0].text_edit.range.start == lsp.Position(line, 7)  # 2 + 1 + 1 + 1 + 2
    editor.change(uri, original + "\U0001F9E0 é [[lsm-tree]] [[mvcc]]")
    assert "Merge-Tree" in editor.hover(uri, lsp.Position(line, 9))
    assert "Merge-Tree" in editor.hover(uri, lsp.Position(line, 17))  # code point 16: the end of [[lsm-tree]]
    assert "Multi-Version" in editor.hover(uri, lsp.Position(line, 18))
    editor.change(uri, original)


def test_completion_inside_a_closed_link_replaces_only_the_target(editor):
    uri = editor.uri(BTREE)
    position = editor.at(uri, "[[lsm-tree]]", 4)  # after `[[ls`
    items = editor.complete(uri, position)
    assert items[0].data["id"] == "lsm-tree"
    edit = items[0].text_edit
    assert edit.new_text == "lsm-tree"  # the `]]` is already there
    assert (edit.range.start.character, edit.range.end.character) == (position.character - 2, position.character + 6)


def test_completion_resolve_describes_the_memory_without_its_phrase(editor):
    uri = editor.uri(BTREE)
    item = editor.complete(uri, editor.at(uri, "[[lsm-tree]]", 4))[0]
    resolved = editor.run(editor.client.completion_item_resolve_async(item))
    text = resolved.documentation.value
    assert "post office sorting tray" in text and "vt:" in text
    assert "memories/storage-engines/lsm-tree.md:" in text


def test_frontmatter_completion(editor):
    uri = editor.uri(BTREE)
    original = editor.texts[uri]
    text = original.replace("links: [lsm-tree, write-ahead-log, secondary-index]",
                            "links: [lsm-tree, write-ahead-log, secondary-index, mvc]\ntype: dec\nsuper")
    editor.change(uri, text)
    links = editor.complete(uri, editor.at(uri, "secondary-index, mvc", len("secondary-index, mvc")))
    assert links[0].data["id"] == "mvcc" and links[0].text_edit.new_text == "mvcc"
    types = editor.complete(uri, editor.at(uri, "type: dec", len("type: dec")))
    assert [i.label for i in types] == ["decision"]
    keys = editor.complete(uri, editor.at(uri, "super", len("super")))
    assert {i.label for i in keys} == {"supersedes", "superseded_by"}
    assert all(i.text_edit.new_text.endswith(": ") for i in keys)
    own = editor.complete(uri, editor.at(uri, "links: [", len("links: [")))
    assert "b-tree" not in {i.data["id"] for i in own}  # a note does not link to itself
    editor.change(uri, original)


def test_hover_shows_the_memory_and_the_fingerprint_never_the_phrase(editor, lsp_palace):
    uri = editor.uri(BTREE)
    text = editor.hover(uri, editor.at(uri, "[[lsm-tree]]", 4))
    target = parse_note((lsp_palace / "memories/storage-engines/lsm-tree.md").read_text(), "x", "storage-engines")
    assert "Log-Structured Merge-Tree" in text and "post office sorting tray" in text and "storage-engines" in text
    assert fingerprint(target.verify) in text
    assert target.verify.lower() not in text.lower()
    assert target.content.split(".")[0] in text
    frontmatter_item = editor.hover(uri, editor.at(uri, "write-ahead-log, secondary", 2))
    assert "Write-Ahead Log" in frontmatter_item
    assert editor.hover(uri, editor.at(uri, "# B-Tree", 3)) is None


@pytest.mark.slow
def test_hover_masks_a_phrase_written_into_the_content(fresh):
    note = fresh.root / "memories/storage-engines/lsm-tree.md"
    memory = parse_note(note.read_text(), "x", "storage-engines")
    note.write_text(note.read_text().replace("## Content\n", f"## Content\nRemember {memory.verify} here. "))
    uri = fresh.open(BTREE)
    fresh.diagnosed(uri)
    text = fresh.hover(uri, fresh.at(uri, "[[lsm-tree]]", 4))
    assert "Remember (hidden) here" in text and memory.verify not in text
    fresh.close()


def test_definition_opens_the_memory_at_its_title(editor, lsp_palace):
    uri = editor.uri(BTREE)
    found = editor.run(editor.client.text_document_definition_async(
        lsp.DefinitionParams(lsp.TextDocumentIdentifier(uri), editor.at(uri, "[[write-ahead-log]]", 5))))
    target = lsp_palace / "memories/storage-engines/write-ahead-log.md"
    title = target.read_text().split("\n").index("# Write-Ahead Log (WAL)")
    assert [(loc.uri, loc.range.start.line) for loc in found] == [(target.as_uri(), title)]


def test_definition_by_subject_and_file_name(editor, lsp_palace):
    uri = editor.uri(BTREE)
    original = editor.texts[uri]
    editor.change(uri, original + "\n[[Two-Phase Commit (2PC)]] and [[fsync-durability]] and [[nowhere]]\n")
    for needle, expected in (("[[Two-Phase", "consensus-coordination/two-phase-commit.md"),
                             ("[[fsync", "storage-engines/fsync-durability.md")):
        found = editor.run(editor.client.text_document_definition_async(
            lsp.DefinitionParams(lsp.TextDocumentIdentifier(uri), editor.at(uri, needle, 4))))
        assert found[0].uri == (lsp_palace / "memories" / expected).as_uri()
    assert editor.run(editor.client.text_document_definition_async(
        lsp.DefinitionParams(lsp.TextDocumentIdentifier(uri), editor.at(uri, "[[nowhere", 4)))) is None
    editor.change(uri, original)


def test_references_are_the_backlinks(editor, lsp_palace):
    target = "write-ahead-log"
    linking = sorted(p.relative_to(lsp_palace).as_posix() for p in (lsp_palace / "memories").rglob("*.md")
                     if target in parse_note(p.read_text(), "x", "d").all_links)
    assert len(linking) >= 3
    uri = editor.uri(BTREE)
    found = editor.run(editor.client.text_document_references_async(lsp.ReferenceParams(
        text_document=lsp.TextDocumentIdentifier(uri), position=editor.at(uri, "[[write-ahead-log]]", 4),
        context=lsp.ReferenceContext(include_declaration=False))))
    assert sorted({loc.uri for loc in found}) == sorted((lsp_palace / p).as_uri() for p in linking)
    for loc in found:  # each location is the link itself
        source = lsp_palace / Path(loc.uri[len(lsp_palace.as_uri()) + 1 :])
        line = source.read_text().split("\n")[loc.range.start.line]
        assert target in line[loc.range.start.character : loc.range.end.character]
    declared = editor.run(editor.client.text_document_references_async(lsp.ReferenceParams(
        text_document=lsp.TextDocumentIdentifier(uri), position=editor.at(uri, "[[write-ahead-log]]", 4),
        context=lsp.ReferenceContext(include_declaration=True))))
    assert len(declared) == len(found) + 1


def test_document_symbols_are_the_sections(editor):
    uri = editor.uri(BTREE)
    symbols = editor.run(editor.client.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(lsp.TextDocumentIdentifier(uri))))
    assert [s.name for s in symbols] == ["B-Tree"]
    assert [c.name for c in symbols[0].children] == ["Image", "Content", "Links"]
    image = symbols[0].children[0]
    assert image.selection_range.start == editor.at(uri, "## Image")


def test_workspace_symbols_rank_as_search_does(editor, lsp_palace):
    query = "coordinator crashed while participants hold locks"
    # The first diagnostics may come from the cold snapshot: the search index is the first refresh's.
    editor.wait(lambda: search(Palace(lsp_palace), query, k=10, do_refresh=False).hits, what="the first refresh")
    found = editor.run(editor.client.workspace_symbol_async(lsp.WorkspaceSymbolParams(query)))
    expected = search(Palace(lsp_palace), query, k=10, do_refresh=False).hits
    assert [s.container_name.split(" · ")[1] for s in found[:10]] == [h.id for h in expected]
    assert found[0].location.uri.endswith(expected[0].path)


@pytest.mark.slow
def test_diagnostics_appear_and_clear_as_the_buffer_changes(fresh):
    uri = fresh.open(BTREE)
    assert fresh.diagnosed(uri) == []
    original = fresh.texts[uri]
    seen = fresh.published[uri]
    fresh.type_at(uri, fresh.at(uri, "- [[write-ahead-log]]").line, 0, "- [[no-such-memory]]: typo\n")
    found = fresh.diagnosed(uri, lambda d: any(x.code == "broken-link" for x in d))
    assert fresh.published[uri] > seen
    broken = next(d for d in found if d.code == "broken-link")
    line = fresh.texts[uri].split("\n")[broken.range.start.line]
    assert line[broken.range.start.character : broken.range.end.character] == "no-such-memory"
    assert broken.severity == lsp.DiagnosticSeverity.Error and broken.source == "palace"
    fresh.change(uri, original)
    assert fresh.diagnosed(uri, lambda d: not d) == []
    assert (fresh.root / BTREE).read_text() == original  # all of it in the buffer, nothing on disk
    fresh.close()


@pytest.mark.slow
def test_typing_fast_is_linted_once_the_typing_pauses(fresh):
    uri = fresh.open(BTREE)
    fresh.diagnosed(uri)
    seen = fresh.published[uri]
    line = fresh.at(uri, "## Links").line
    for i, char in enumerate("Note [[no-such]] "):  # a link closed on its line: links never span lines
        fresh.type_at(uri, line, i, char)
    fresh.diagnosed(uri, lambda d: any(x.code == "broken-link" for x in d))
    assert fresh.published[uri] - seen <= 3  # debounced: not one lint per keystroke
    fresh.close()


@pytest.mark.slow
def test_a_broken_note_gets_a_diagnostic_and_the_server_keeps_working(fresh):
    uri = fresh.open(BTREE)
    fresh.diagnosed(uri)
    fresh.change(uri, fresh.texts[uri].replace("subject: B-Tree", "subject: [B-Tree"))
    found = fresh.diagnosed(uri, lambda d: any(x.code == "unreadable-note" for x in d))
    assert "frontmatter is not valid YAML" in found[0].message
    assert "Write-Ahead Log" in fresh.hover(uri, fresh.at(uri, "[[write-ahead-log]]", 4))
    assert fresh.complete(uri, fresh.at(uri, "[[write-ahead-log]]", 4))
    fresh.change(uri, "")
    assert fresh.diagnosed(uri, lambda d: any(x.code == "unreadable-note" for x in d))
    assert fresh.close() == 0


@pytest.mark.slow
def test_code_action_proposes_a_verify_token(fresh):
    uri = fresh.open(BTREE)
    fresh.diagnosed(uri)
    fresh.change(uri, fresh.texts[uri].replace("verify: cobalt blue doors\n", "verify:\n"))
    fresh.diagnosed(uri, lambda d: any(x.code == "token-missing" for x in d))
    action = next(a for a in fresh.actions(uri) if "verify token" in a.title)
    assert action.kind == lsp.CodeActionKind.QuickFix and action.diagnostics
    fixed = apply_edits(fresh.texts[uri], action.edit.changes[uri])
    note = parse_note(fixed, BTREE, "storage-engines")
    assert note.verify and contains_phrase(note.image, note.verify)
    assert fixed.replace(f"verify: {note.verify}", "verify:") == fresh.texts[uri]  # only that line changed
    fresh.change(uri, fixed)
    assert not [d for d in fresh.diagnosed(uri, lambda d: not any(x.code == "token-missing" for x in d))
                if d.code.startswith("token")]
    fresh.close()


@pytest.mark.slow
def test_code_action_fixes_a_broken_link_to_the_closest_memory(fresh):
    uri = fresh.open(BTREE)
    fresh.diagnosed(uri)
    fresh.change(uri, fresh.texts[uri].replace("- [[lsm-tree]]", "- [[lsm-tee]]").replace(
        "links: [lsm-tree,", "links: [lsm-tre,"))
    found = fresh.diagnosed(uri, lambda d: len([x for x in d if x.code == "broken-link"]) == 2)
    assert {d.range.start.line for d in found} == {fresh.at(uri, "links:").line, fresh.at(uri, "[[lsm-tee]]").line}
    for diagnostic in [d for d in found if d.code == "broken-link"]:
        actions = fresh.run(fresh.client.text_document_code_action_async(lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri), diagnostic.range, lsp.CodeActionContext([diagnostic]))))
        first = actions[0]
        assert first.title.startswith("Link to lsm-tree") and first.is_preferred
        fresh.change(uri, apply_edits(fresh.texts[uri], first.edit.changes[uri]))
    assert "[[lsm-tree]]" in fresh.texts[uri] and "links: [lsm-tree," in fresh.texts[uri]
    assert fresh.diagnosed(uri, lambda d: not d) == []
    fresh.close()


@pytest.mark.slow
def test_code_action_creates_the_missing_memory_from_the_template(fresh):
    uri = fresh.open(BTREE)
    fresh.diagnosed(uri)
    fresh.change(uri, fresh.texts[uri] + "- [[Fractal Tree Index]]: buffered B-tree\n")
    fresh.diagnosed(uri, lambda d: any(x.code == "broken-link" for x in d))
    create = next(a for a in fresh.actions(uri) if a.title.startswith("Create memory"))
    assert "fractal-tree-index" in create.title and "storage-engines" in create.title
    new_file, new_text, this_note = create.edit.document_changes
    target = fresh.root / "memories/storage-engines/fractal-tree-index.md"
    assert new_file.kind == "create" and new_file.uri == target.as_uri() and not target.exists()
    text = apply_edits("", new_text.edits)
    note = parse_note(text, "memories/storage-engines/fractal-tree-index.md", "storage-engines")
    assert (note.id, note.subject, note.links) == ("fractal-tree-index", "Fractal Tree Index", ["b-tree"])
    assert "## Image" in text and "[[b-tree]]" in text
    fresh.change(uri, apply_edits(fresh.texts[uri], this_note.edits))
    assert "[[fractal-tree-index]]" in fresh.texts[uri]
    target.write_text(text)  # the editor applies the edit and saves
    fresh.client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(target.as_uri())))
    fresh.diagnosed(uri, lambda d: not any(x.code == "broken-link" for x in d))
    fresh.close()


@pytest.mark.slow
def test_refresh_on_save_is_shared_with_the_cli(fresh):
    uri = fresh.open(BTREE)
    fresh.diagnosed(uri)
    fresh.change(uri, fresh.texts[uri] + "[[zebra-crossing-cache]]\n")
    fresh.diagnosed(uri, lambda d: any(x.code == "broken-link" for x in d))
    new = fresh.root / "memories/caching-performance/zebra-crossing-cache.md"
    new.write_text((fresh.root / "memories/caching-performance/cache-aside.md").read_text()
                   .replace("id: cache-aside", "id: zebra-crossing-cache"))
    fresh.client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(new.as_uri())))
    fresh.diagnosed(uri, lambda d: not any(x.code == "broken-link" for x in d))
    line = len(fresh.texts[uri].split("\n")) - 1
    fresh.change(uri, fresh.texts[uri] + "[[zebra-cr")
    assert fresh.complete(uri, lsp.Position(line, len("[[zebra-cr")))[0].data["id"] == "zebra-crossing-cache"
    cached = Palace(fresh.root).index.scan(light=True).memories  # the cache the CLI reads, not refreshed here
    assert "zebra-crossing-cache" in cached
    assert "zebra-crossing-cache" in (fresh.root / "index/caching-performance.md").read_text()
    fresh.close()


SPACED = "memories/storage-engines/Tomato bed – ünïcode.md"
SPACED_NOTE = """---
id: tomato-bed
subject: Tomato bed
anchor: a copper kettle on the raised bed
keywords: [watering]
verify: seven copper kettles
---
# Tomato bed

## Image
Seven copper kettles steam on the raised bed while a B-tree grows out of the soil.

## Content
Watered every morning; the layout follows [[lsm-tree]] levels.

![[tomato-bed.png]]

## Links
- [[no-such-bed]]
"""


@pytest.mark.slow
def test_a_file_named_with_spaces_and_unicode(example_palace, tmp_path):
    """Percent-encoded URIs both ways (as the client spells them), live diagnostics that update, links to the file
    by its name, and an attachment embed said to be an attachment."""
    (example_palace / SPACED).write_text(SPACED_NOTE)
    (example_palace / "memories/storage-engines/tomato-bed.png").write_bytes(b"\x89PNG\r\n")
    session = Editor(example_palace, server_env(tmp_path))
    encoded = (example_palace / SPACED).as_uri()
    assert "%20" in encoded and "%C3%BC" in encoded
    uri = encoded.replace("%C3%BC", "%c3%bc")  # another client's spelling of the same file
    session.texts[uri], session.versions[uri] = SPACED_NOTE, 1
    session.client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        lsp.TextDocumentItem(uri, "markdown", 1, SPACED_NOTE)))
    found = session.diagnosed(uri, lambda d: any(x.code == "broken-link" for x in d))
    broken = next(d for d in found if d.code == "broken-link")
    assert broken.range.start.line == SPACED_NOTE.split("\n").index("- [[no-such-bed]]")
    assert (example_palace / "memories/storage-engines/Tomato bed – ünïcode.md").exists()
    session.change(uri, SPACED_NOTE.replace("[[no-such-bed]]", "[[b-tree]]"))
    session.diagnosed(uri, lambda d: not any(x.code == "broken-link" for x in d))  # updated at the client's URI
    assert set(session.diagnostics) == {uri}
    embed = session.hover(uri, session.at(uri, "![[tomato-bed.png]]", 5))
    assert "`tomato-bed.png` is a file of the vault, not a note" in embed and "memories/storage-engines/tomato-bed.png" in embed
    [image] = session.run(session.client.text_document_definition_async(
        lsp.DefinitionParams(lsp.TextDocumentIdentifier(uri), session.at(uri, "![[tomato-bed.png]]", 5))))
    assert image.uri == (example_palace / "memories/storage-engines/tomato-bed.png").as_uri()
    btree = session.open(BTREE)
    session.change(btree, session.texts[btree] + "\nSee [[Tomato bed – ünïcode]].\n")
    position = session.at(btree, "[[Tomato bed", 4)
    [target] = session.run(session.client.text_document_definition_async(
        lsp.DefinitionParams(lsp.TextDocumentIdentifier(btree), position)))
    assert target.uri == encoded
    assert "Tomato bed" in session.hover(btree, position)
    references = session.run(session.client.text_document_references_async(lsp.ReferenceParams(
        text_document=lsp.TextDocumentIdentifier(uri), position=lsp.Position(0, 0),
        context=lsp.ReferenceContext(include_declaration=False))))
    assert [(r.uri, r.range.start.line) for r in references] == [(btree, position.line)]  # from the unsaved buffer
    assert session.close() == 0


@pytest.mark.slow
def test_completion_right_after_start_waits_for_the_tables(example_palace, tmp_path):
    """A palace with no cache yet: the first `[[` completion, sent before any table is built, is answered with
    the memories (the server waits for its first refresh), never with nothing."""
    session = Editor(example_palace, server_env(tmp_path))
    text = (example_palace / BTREE).read_text() + "See [[write-a"
    uri = session.open(BTREE, text)
    line = len(text.split("\n")) - 1
    found = session.run(session.client.text_document_completion_async(
        lsp.CompletionParams(lsp.TextDocumentIdentifier(uri), lsp.Position(line, len("See [[write-a")))))
    assert isinstance(found, lsp.CompletionList) and found.items
    assert found.items[0].data["id"] == "write-ahead-log"
    assert session.close() == 0


def test_shutdown_then_exit_ends_the_process_cleanly(fresh):
    assert fresh.close() == 0


@pytest.mark.slow
def test_exit_without_shutdown_is_an_error(fresh):
    fresh.client.exit(None)
    fresh.run(fresh.client._server.wait(), timeout=30)
    assert fresh.client._server.returncode == 1
    fresh.run(fresh.client.stop(), timeout=30)
    fresh.loop.close()


@pytest.mark.slow
def test_palace_found_from_the_first_file_opened(example_palace, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    session = Editor(example_palace, server_env(tmp_path), cwd=elsewhere)
    uri = session.open(BTREE)
    session.diagnosed(uri)
    assert "Write-Ahead Log" in session.hover(uri, session.at(uri, "[[write-ahead-log]]", 4))
    assert session.close() == 0


@pytest.mark.slow
@needs_namespace
def test_a_read_only_palace_is_served_and_its_moved_cache_shown_once(example_palace, tmp_path):
    session = Editor(example_palace, server_env(tmp_path), launcher=(*READ_ONLY_LAUNCHER, str(example_palace)))
    uri = session.open(BTREE)
    session.diagnosed(uri)
    assert "Write-Ahead Log" in session.hover(uri, session.at(uri, "[[write-ahead-log]]", 4))
    session.wait(lambda: session.messages, what="a window/showMessage")
    elsewhere = tmp_path / "palace-home" / "cache" / "palaces"
    [shown] = session.messages  # the reader and the watcher met the same condition: said once
    assert shown.type == lsp.MessageType.Warning
    assert shown.message.startswith(f"palace: cannot write the cache in {example_palace} (Read-only file system); "
                                    f"using {elsewhere}/")
    assert session.close() == 0


@pytest.mark.slow
def test_features_turned_off_by_initialization_options(example_palace, tmp_path):
    session = Editor(example_palace, server_env(tmp_path), options={"disable": ["hover", "diagnostics", "symbols"]})
    caps = session.initialized.capabilities
    assert caps.hover_provider is None and caps.document_symbol_provider is None
    assert caps.workspace_symbol_provider is None
    assert caps.completion_provider and caps.definition_provider
    uri = session.open(BTREE, (example_palace / BTREE).read_text() + "[[no-such-memory]]\n")
    params = lsp.DefinitionParams(lsp.TextDocumentIdentifier(uri), session.at(uri, "[[write-ahead-log]]", 4))
    session.wait(lambda: session.run(session.client.text_document_definition_async(params)), what="the first refresh")
    session.loop.run_until_complete(asyncio.sleep(2.0))  # lint would have published by now (debounce 0.3 s)
    assert uri not in session.published
    assert session.close() == 0


def test_a_wrong_palace_option_fails_before_serving(tmp_path):
    done = subprocess.run([sys.executable, "-c", ENTRY, "--palace", str(tmp_path), "lsp"], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=60, env=server_env(tmp_path))
    assert done.returncode == 1 and "is not a palace" in done.stderr and done.stdout == ""
    after = subprocess.run([sys.executable, "-c", ENTRY, "lsp", "--palace", str(tmp_path)], capture_output=True,
                           text=True, stdin=subprocess.DEVNULL, timeout=60, env=server_env(tmp_path))
    assert after.returncode == 1 and "is not a palace" in after.stderr


@pytest.mark.slow
def test_generated_files_are_left_alone_while_open(fresh):
    index_file = fresh.root / "index/storage-engines.md"
    before = index_file.read_bytes()
    fresh.open("index/storage-engines.md")
    uri = fresh.open(BTREE)
    fresh.diagnosed(uri)
    note = fresh.root / "memories/storage-engines/bloom-filter.md"
    note.write_text(note.read_text().replace("anchor: ", "anchor: neon "))
    fresh.client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(note.as_uri())))
    # The first diagnostics come from the notes read cold (no cache yet): the cache fills meanwhile.
    fresh.wait(lambda: "neon" in getattr(Palace(fresh.root).index.scan(light=True).memories.get("bloom-filter"),
                                         "anchor", ""), what="the refresh")
    assert index_file.read_bytes() == before
    fresh.close()


# ---- the tables and the buffer, without a client ----------------------------------------------------


def _names(memory) -> list[str]:
    """The names a link can give a memory by (its anchor is a hook, not a name)."""
    return [memory.id, memory.subject, memory.path, Path(memory.path).stem, *memory.aliases, memory.subject.upper()]


@pytest.mark.parametrize("fixture", ["example_palace", "messy"])
def test_snapshot_resolves_as_palace_memory_does(request, fixture):
    """The server's answers are the core resolver's: Palace.memory's for every name a link can use, and the
    unreadable note Palace.memory reports for a broken note's path or file name."""
    palace = Palace(request.getfixturevalue(fixture))
    palace.refresh(embedder=None)
    snapshot = Snapshot.load(palace)
    assert snapshot.memories and (fixture == "example_palace" or snapshot.broken)
    for ref in [name for m in snapshot.memories.values() for name in _names(m)] + ["nothing-like-this", "d"]:
        try:
            expected = palace.memory(ref, refresh=False).id
        except PalaceError as exc:
            expected = type(exc).__name__
        try:
            found = snapshot.resolve(ref)
            got = found.memory.id if found else "NotFound"
        except PalaceError as exc:
            got = type(exc).__name__
        assert got == expected, ref
    for path in snapshot.broken:
        for ref in (path, Path(path).stem):
            if snapshot.resolve(ref) is None:
                with pytest.raises(PalaceError) as raised:
                    palace.memory(ref, refresh=False)
                assert snapshot.unreadable(ref) == path and path in str(raised.value), ref


@pytest.mark.slow
def test_snapshot_backlinks_are_palace_backlinks(example_palace):
    palace = Palace(example_palace)
    palace.refresh(embedder=None)
    snapshot = Snapshot.load(palace)
    counted = 0
    for note_id in snapshot.memories:
        expected = sorted({link.path for link in backlinks(palace, note_id)[1]})
        assert snapshot.backlinks(note_id) == expected, note_id
        counted += len(expected)
    assert counted > len(snapshot.memories)


def test_snapshot_suggests_what_palace_memory_suggests(readonly_example):
    palace = Palace(readonly_example)
    palace.refresh(embedder=None)
    snapshot = Snapshot.load(palace)
    for typo in ("lsm-tee", "write-ahead-lgo", "two phase comit", "blom filter"):
        with pytest.raises(PalaceError) as raised:
            palace.memory(typo, refresh=False)
        near = [m.id for m in snapshot.near(typo, limit=5)]
        assert near and f"did you mean: {', '.join(near)}" in str(raised.value), typo


def test_lint_of_a_buffer_is_lint_of_the_saved_note(readonly_example):
    palace = Palace(readonly_example)
    report = lint(palace)
    checker = Snapshot.load(palace).checker
    for path in sorted((readonly_example / "memories").rglob("*.md")):
        relpath = path.relative_to(readonly_example).as_posix()
        expected = sorted((p.line, p.code, p.message) for p in report.problems if p.path == relpath)
        found = sorted((p.line, p.code, p.message) for p in lint_note_text(palace, relpath, path.read_text(), checker))
        assert found == expected, relpath


def test_lint_of_a_buffer_sees_a_new_token_and_a_taken_id(readonly_example):
    palace = Palace(readonly_example)
    text = (readonly_example / BTREE).read_text()
    codes = {p.code for p in lint_note_text(palace, BTREE, text.replace("verify: cobalt blue doors",
                                                                        "verify: four-floor library"))}
    assert {"token-exposed", "token-not-in-image"} <= codes
    copy = lint_note_text(palace, "memories/storage-engines/b-tree-copy.md", text)
    assert "duplicate-id" in {p.code for p in copy}
    assert [p.code for p in lint_note_text(palace, BTREE, "---\nid: x\n")] == ["unreadable-note"]
    conflict = text.replace("## Links\n", "## Links\n<<<<<<< HEAD\n- [[mvcc]]\n=======\n- [[lsm-tree]]\n>>>>>>> b\n")
    assert "conflict-marker" in {p.code for p in lint_note_text(palace, BTREE, conflict)}


def test_lint_of_a_buffer_checks_versions_against_the_palace(example_palace):
    palace = Palace(example_palace)
    lsm = example_palace / "memories/storage-engines/lsm-tree.md"
    update_frontmatter(lsm, {"superseded_by": ["b-tree"], "valid_until": "2026-01-01"})
    text = (example_palace / BTREE).read_text()

    def codes(new_text: str) -> set[str]:
        return {p.code for p in lint_note_text(palace, BTREE, new_text)}

    assert "one-sided-supersede" in codes(text)  # lsm-tree says b-tree replaced it; b-tree does not say so
    both = text.replace("created:", "supersedes: [lsm-tree]\nvalid_from: 2026-01-01\ncreated:")
    assert not codes(both) & {"one-sided-supersede", "broken-link", "valid-range", "supersede-cycle"}
    assert "broken-link" in codes(text.replace("created:", "supersedes: [no-such-note]\ncreated:"))
    backwards = both.replace("valid_from: 2026-01-01", "valid_from: 2026-01-01\nvalid_until: 2025-01-01")
    assert "valid-range" in codes(backwards)


@pytest.mark.slow
def test_hover_says_what_superseded_a_memory(fresh):
    update_frontmatter(fresh.root / "memories/storage-engines/lsm-tree.md",
                       {"superseded_by": ["b-tree"], "valid_until": "2026-01-01"})
    update_frontmatter(fresh.root / BTREE, {"supersedes": ["lsm-tree"], "valid_from": "2026-01-01"})
    uri = fresh.open(BTREE)
    fresh.diagnosed(uri)
    text = fresh.hover(uri, fresh.at(uri, "[[lsm-tree]]", 4))
    assert "**superseded** by `b-tree` (valid until 2026-01-01)" in text
    assert "Log-Structured" in fresh.hover(uri, fresh.at(uri, "supersedes: [lsm-tree]", len("supersedes: [l")))
    fresh.close()


@pytest.mark.parametrize("text, line, column, expected", [
    ("---\nid: a\n---\nsee [[sag", 3, 9, ("link", "sag", (6, 9), True)),
    ("---\nid: a\n---\nsee [[sag]] now", 3, 9, ("link", "sag", (6, 9), False)),
    ("---\nid: a\n---\nsee [[saga|label", 3, 16, None),
    ("---\nid: a\n---\n```\n[[sag\n```", 4, 5, None),
    ("---\nid: a\nlinks: [b, c\n---\n", 2, 12, ("value", "c", (11, 12), False)),
    ("---\nid: a\nlinks:\n  - bl\n---\n", 3, 6, ("value", "bl", (4, 6), False)),
    ("---\nid: a\ntype: pre\n---\n", 2, 9, ("value", "pre", (6, 9), False)),
    ("---\nid: a\nsupe\n---\n", 2, 4, ("key", "supe", (0, 4), False)),
    ("plain [[x]] text", 0, 3, None),
])
def test_what_the_cursor_is_completing(text, line, column, expected):
    found = Buffer(text).completing(line, column)
    if expected is None:
        assert found is None
    else:
        assert (found.kind, found.typed, (found.span.start, found.span.end), found.close) == expected
        if found.kind == "value":
            assert found.field in ("links", "type")


def test_links_in_a_buffer():
    text = ("---\nid: a\nlinks: [b, \"c\"]  # two\nsupersedes:\n  - old-a\n---\n# A\n\n"
            "[[d|label]] and [[ e#Image ]]\n```\n[[not-a-link]]\n```\nindex line id:f-g\n")
    found = [(link.target, link.field, link.span.line) for link in Buffer(text).links()]
    assert found == [("b", "links", 2), ("c", "links", 2), ("old-a", "supersedes", 4), ("d", "body", 8),
                     ("e", "body", 8), ("f-g", "mention", 12)]


@pytest.mark.skipif(shutil.which("nvim") is None, reason="Neovim is not installed (apt-get install neovim)")
def test_neovim_drives_the_server(example_palace, tmp_path):
    """Headless Neovim with its built-in LSP client: hover, definition and completion against `palace lsp`."""
    script = tmp_path / "drive.lua"
    out = tmp_path / "out.txt"
    script.write_text(NVIM_SCRIPT.replace("OUT", str(out)).replace("PYTHON", sys.executable)
                      .replace("ROOT", str(example_palace)).replace("ENTRY", ENTRY))
    env = server_env(tmp_path)
    env.update(HOME=str(tmp_path), XDG_STATE_HOME=str(tmp_path / "state"))
    done = subprocess.run(["nvim", "--headless", "--clean", "-S", str(script), str(example_palace / BTREE)],
                          cwd=example_palace, env=env, capture_output=True, text=True, timeout=180)
    report = out.read_text() if out.exists() else ""
    assert "hover: " in report, done.stderr + report
    lines = dict(line.split(": ", 1) for line in report.splitlines() if ": " in line)
    assert "Log-Structured Merge-Tree" in lines["hover"]
    assert lines["definition"].endswith("memories/storage-engines/lsm-tree.md")
    assert lines["completion"].startswith("write-ahead-log")
    assert "no-such-memory" in lines["broken"] and lines["cleared"] == "yes"
    assert done.returncode == 0


NVIM_SCRIPT = r"""
-- Neovim 0.7 (Debian 12) to 0.11: start_client and buf_attach_client exist in all of them.
local out = io.open("OUT", "w")
local ok, err = pcall(function()
  local buf = vim.api.nvim_get_current_buf()
  local id = vim.lsp.start_client({name = "palace", cmd = {"PYTHON", "-c", "ENTRY", "lsp"}, root_dir = "ROOT"})
  assert(id, "the client did not start")
  vim.lsp.buf_attach_client(buf, id)
  local client
  assert(vim.wait(60000, function()
    client = vim.lsp.get_client_by_id(id)
    return client ~= nil and client.initialized
  end, 100), "the server did not initialize")
  local function request(method, params)
    local result
    if vim.fn.has("nvim-0.11") == 1 then
      result = client:request_sync(method, params, 30000, buf)
    else
      result = client.request_sync(method, params, 30000, buf)
    end
    assert(result and not result.err, method .. " failed: " .. vim.inspect(result))
    return result.result
  end
  local line = vim.fn.search("\\[\\[lsm-tree") - 1
  local doc = {uri = vim.uri_from_bufnr(buf)}
  local pos = {textDocument = doc, position = {line = line, character = 5}}
  local hover
  assert(vim.wait(90000, function()
    hover = request("textDocument/hover", pos)
    return hover ~= nil and hover.contents.value:find("Merge") ~= nil
  end, 500), "no hover")
  out:write("hover: " .. hover.contents.value:gsub("\n", " ") .. "\n")
  local def = request("textDocument/definition", pos)
  out:write("definition: " .. vim.uri_to_fname(def[1].uri) .. "\n")
  vim.api.nvim_buf_set_lines(buf, -1, -1, false, {"See [[write-a"})
  local last = vim.api.nvim_buf_line_count(buf) - 1
  local items = request("textDocument/completion", {textDocument = doc, position = {line = last, character = 13}})
  out:write("completion: " .. items.items[1].textEdit.newText .. "\n")
  vim.api.nvim_buf_set_lines(buf, last, last + 1, false, {"See [[no-such-memory]]"})
  assert(vim.wait(30000, function() return #vim.diagnostic.get(buf) > 0 end, 100), "no diagnostics")
  out:write("broken: " .. vim.diagnostic.get(buf)[1].message .. "\n")
  vim.api.nvim_buf_set_lines(buf, last, last + 1, false, {})
  assert(vim.wait(30000, function() return #vim.diagnostic.get(buf) == 0 end, 100), "diagnostics did not clear")
  out:write("cleared: yes\n")
end)
if not ok then out:write("error: " .. tostring(err) .. "\n") end
out:close()
vim.cmd(ok and "qa!" or "cq!")
"""


@pytest.mark.slow
def test_bench_lsp_runs_on_a_small_palace(tmp_path):
    """The benchmark itself (numbers are not checked: speed lives in docs/benchmarks.md)."""
    from click.testing import CliRunner

    from palace_cli.cli import cli

    result = CliRunner().invoke(cli, ["bench", "lsp", "--size", "60", "--requests", "5", "--workdir",
                                      str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{"):])
    assert report["notes"] == 60 and report["completion"]["n"] == 5 and report["hover"]["n"] == 5
    assert report["diagnostics_after_change"]["n"] == 5 and report["ready_s"] > 0
    assert [b["bytes"] >= 100_000 and b["diagnostics_s"] is not None for b in report["big_buffers"]] == [True] * 5
    after = report["after_save"]  # each save came back as new diagnostics, its server CPU measured
    assert after["edits"] == 5 and after["p50_ms"] is not None and after["cpu_p50_ms"] is not None
    palace = Palace(tmp_path / "palace-60")
    assert palace.refresh(embedder=None).changed is False and not any(
        "Edit " in p.read_text() for p in (palace.root / "memories").rglob("*.md"))  # the edited note is restored


def test_in_an_adopted_vault_a_new_file_is_a_note_and_create_writes_the_vault_s_name(tmp_path):
    """A vault note the store has not seen yet is linted (its domain is its top folder), and the quick fix for
    a broken link creates `<Name>.md` in that folder, named as the link names it, not a slugged memory."""
    from click.testing import CliRunner

    from palace_cli.cli import cli

    root = tmp_path / "vault"
    (root / "Garden").mkdir(parents=True)
    (root / "Garden/Tomatoes.md").write_text("# Tomatoes\n\nStake them early.\n")
    assert CliRunner().invoke(cli, ["init", str(root)]).exit_code == 0
    session = Editor(root, server_env(tmp_path / "home"))
    text = "# Watering schedule\n\nSee [[Tomatoes]] and [[Irrigation plan]].\n"
    uri = session.open("Garden/Watering schedule.md", text)  # not saved: the store has never read it
    found = session.diagnosed(uri, lambda d: any(x.code == "broken-link" for x in d))
    assert [d.range.start.line for d in found if d.code == "broken-link"] == [2]
    create = next(a for a in session.actions(uri) if a.title.startswith("Create note"))
    assert create.title == "Create note Garden/Irrigation plan.md"
    new_file, new_text = create.edit.document_changes
    assert new_file.uri == (root / "Garden/Irrigation plan.md").as_uri()
    assert apply_edits("", new_text.edits) == "# Irrigation plan\n"
    assert session.close() == 0


def test_the_language_server_s_reads_change_no_note_of_an_adopted_vault(tmp_path):
    """Foam's documentation adopted in place, then what an editor asks while reading it (diagnostics, hover,
    definition, references, completion, symbols): every note's bytes are the same afterwards."""
    from click.testing import CliRunner

    from conftest import SHARED
    from palace_cli.cli import cli
    from test_vault import note_hashes

    source = SHARED / "data" / "foam-docs"
    if not source.is_dir():
        pytest.skip(f"the Foam documentation vault is not at {source} (../shared is absent)")
    foam = tmp_path / "foam"
    shutil.copytree(source, foam)
    assert CliRunner().invoke(cli, ["init", str(foam)]).exit_code == 0
    before = note_hashes(foam)
    session = Editor(foam, server_env(tmp_path / "home"))
    faq = "user/frequently-asked-questions.md"
    uri = session.open(faq)
    session.diagnosed(uri)
    link = session.at(uri, "[[wikilinks]]", 3)
    assert "Wikilinks" in (session.hover(uri, link) or "")
    [target] = session.run(session.client.text_document_definition_async(
        lsp.DefinitionParams(lsp.TextDocumentIdentifier(uri), link)))
    assert target.uri == (foam / "user/features/wikilinks.md").as_uri()
    wikilinks = session.open("user/features/wikilinks.md")
    references = session.run(session.client.text_document_references_async(lsp.ReferenceParams(
        text_document=lsp.TextDocumentIdentifier(wikilinks), position=lsp.Position(0, 0),
        context=lsp.ReferenceContext(include_declaration=False))))
    assert uri in {r.uri for r in references}
    line = len(session.texts[uri].split("\n")) - 1
    session.change(uri, session.texts[uri] + "[[wiki")  # typed, never saved
    assert session.complete(uri, lsp.Position(line, len("[[wiki")))
    session.run(session.client.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(lsp.TextDocumentIdentifier(uri))))
    assert session.close() == 0
    assert note_hashes(foam) == before


def test_markdown_links_and_reference_definitions_are_links_in_the_editor(tmp_path):
    """In an adopted vault a Markdown link to a note (relative, percent-encoded, with a heading) and a reference
    definition are hovered, followed and counted as references like a wikilink; a broken one is diagnosed on
    its path and offered no id in its place."""
    from click.testing import CliRunner

    from palace_cli.cli import cli

    root = tmp_path / "vault"
    (root / "Garden").mkdir(parents=True)
    (root / "Garden/Watering schedule.md").write_text("# Watering schedule\n\nMornings, twice a week.\n")
    text = ("# Tomatoes\n\nSee [the schedule](Watering%20schedule.md#Mornings) and [gone](Nowhere.md).\n\n"
            "[plan]: /Garden/Watering%20schedule.md\n")
    (root / "Garden/Tomatoes.md").write_text(text)
    assert CliRunner().invoke(cli, ["init", str(root)]).exit_code == 0
    session = Editor(root, server_env(tmp_path / "home"))
    uri = session.open("Garden/Tomatoes.md")
    found = session.diagnosed(uri, lambda d: any(x.code == "broken-link" for x in d))
    [broken] = [d for d in found if d.code == "broken-link"]
    assert broken.range.start == session.at(uri, "Nowhere.md")
    assert not [a for a in session.actions(uri) if "Nowhere" in a.title or a.title.startswith("Link to")]
    schedule = (root / "Garden/Watering schedule.md").as_uri()
    for needle in ("Watering%20schedule.md#", "/Garden/Watering"):
        position = session.at(uri, needle, 2)
        assert "Watering schedule" in (session.hover(uri, position) or ""), needle
        [target] = session.run(session.client.text_document_definition_async(
            lsp.DefinitionParams(lsp.TextDocumentIdentifier(uri), position)))
        assert target.uri == schedule
    other = session.open("Garden/Watering schedule.md")
    references = session.run(session.client.text_document_references_async(lsp.ReferenceParams(
        text_document=lsp.TextDocumentIdentifier(other), position=lsp.Position(0, 0),
        context=lsp.ReferenceContext(include_declaration=False))))
    assert sorted(r.range.start.line for r in references if r.uri == uri) == [2, 4]
    assert session.close() == 0


def test_a_name_two_notes_share_is_marked_on_the_link_not_the_line(tmp_path):
    from click.testing import CliRunner

    from palace_cli.cli import cli

    root = tmp_path / "vault"
    (root / "Garden").mkdir(parents=True)
    (root / "Archive/Old").mkdir(parents=True)
    (root / "Garden/Tomato bed.md").write_text("# Tomato bed\n\nStakes in June.\n")
    (root / "Archive/Old/Tomato bed.md").write_text("# Tomato bed (2019)\n\nThe old bed.\n")
    (root / "Garden/Plan.md").write_text("# Plan\n\nWater the [[Tomato bed]] at dawn, every day.\n")
    assert CliRunner().invoke(cli, ["init", str(root)]).exit_code == 0
    session = Editor(root, server_env(tmp_path / "home"))
    uri = session.open("Garden/Plan.md")
    found = session.diagnosed(uri, lambda d: any(x.code == "shared-name" for x in d))
    [shared] = [d for d in found if d.code == "shared-name"]
    start = session.at(uri, "Tomato bed]]")
    assert (shared.range.start, shared.range.end.character) == (start, start.character + len("Tomato bed"))
    assert session.close() == 0
