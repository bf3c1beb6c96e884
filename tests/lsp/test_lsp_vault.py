"""`palace lsp` in a vault of plain notes (tests/data/vault: shared names, property links, attachments): right on
its first answer with no cache, and completing links the way each vault writes them (by name, by path, by id)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

pytest.importorskip("pygls")

from lsprotocol import types as lsp  # noqa: E402
from test_lsp import Editor, server_env  # noqa: E402

from palace_cli.lsp.snapshot import Snapshot  # noqa: E402
from palace_cli.palace import Palace  # noqa: E402

VAULT = Path(__file__).resolve().parents[1] / "data" / "vault"


def lsp_path(uri: str) -> str:
    return unquote(urlparse(uri).path)


def cold_vault(tmp_path: Path, rewrite=None) -> Path:
    """A copy of the test vault with a palace.toml and no `.palace/` (no cache, no index yet); `rewrite` changes
    each note's text first (another link style)."""
    root = tmp_path / "vault"
    shutil.copytree(VAULT, root)
    (root / "palace.toml").write_text('[palace]\nname = "Vault"\n\n[notes]\ninclude = ["**/*.md"]\n')
    for note in root.rglob("*.md"):
        if rewrite is not None:
            note.write_text(rewrite(note.relative_to(root).as_posix(), note.read_text()))
    assert not (root / ".palace").exists()
    return root


def first_completion(session: Editor, relpath: str, typed: str) -> list[lsp.CompletionItem]:
    text = (session.root / relpath).read_text() + f"\nSee [[{typed}"
    uri = session.open(relpath, text)
    line = len(text.split("\n")) - 1
    return session.complete(uri, lsp.Position(line, len(f"See [[{typed}")))


@pytest.mark.slow
def test_the_first_hover_with_no_cache_is_right(tmp_path):
    root = cold_vault(tmp_path)
    session = Editor(root, server_env(tmp_path))
    try:
        uri = session.open("Projects/Plan.md")
        shown = session.hover(uri, session.at(uri, "links [[Security]]", len("links [[S")))  # the first request
        assert "Projects/Security.md" in shown and "no memory" not in shown  # the folder's own, as Obsidian
        shown = session.hover(uri, session.at(uri, '"[[Home]]"', 4))  # a property link
        assert "Home.md" in shown and "no memory" not in shown
        shown = session.hover(uri, session.at(uri, "![[docs/manual.pdf", 5))
        assert "a file of the vault, not a note: `docs/manual.pdf`" in shown
        home = session.open("Home.md")
        shown = session.hover(home, session.at(home, "[[Security]] (the one", 4))
        assert "Projects/Security.md" not in shown and "Security.md" in shown
        assert session.hover(home, session.at(home, "![[photo.jpg\\|100]]", 5)).endswith("`attachments/photo.jpg`")
        diagnostics = session.diagnosed(home)
        assert not [d for d in diagnostics if d.severity == lsp.DiagnosticSeverity.Error]
        found = session.run(session.client.text_document_references_async(lsp.ReferenceParams(
            text_document=lsp.TextDocumentIdentifier(home), position=lsp.Position(4, 2),
            context=lsp.ReferenceContext(include_declaration=False))))
        assert sorted((Path(lsp_path(r.uri)).relative_to(root).as_posix(), r.range.start.line) for r in found) == [
            ("Journal/Weekly review.md", 2), ("People/Ada.md", 1), ("Projects/Plan.md", 1)]  # property links
    finally:
        session.close()


@pytest.mark.slow
def test_completion_writes_links_by_name_in_a_vault_of_names(tmp_path):
    """The vault links by file name: completion shows the title and inserts the name, a path where it is shared."""
    session = Editor(cold_vault(tmp_path), server_env(tmp_path))
    try:
        items = first_completion(session, "People/Ada.md", "weekly re")
        assert (items[0].label, items[0].text_edit.new_text) == ("Weekly review", "Weekly review]]")
        inserted = {i.text_edit.new_text for i in first_completion(session, "Home.md", "securi")}
        assert {"Security]]", "Projects/Security]]"} <= inserted  # the root's by name, the other by its path
        inserted = {i.text_edit.new_text for i in first_completion(session, "Projects/Plan.md", "securi")}
        assert {"Projects/Security]]", "Security.md]]"} <= inserted  # a shared name: paths, the root's with `.md`
        items = first_completion(session, "Home.md", "review")  # by its alias: the name, then the alias
        assert (items[0].label, items[0].text_edit.new_text) == ("Weekly review", "Weekly review|Review]]")
    finally:
        session.close()


def by_path(relpath: str, text: str) -> str:
    """Every wikilink to a note written with its path from the root, as a vault of paths writes them."""
    paths = {p.relative_to(VAULT).as_posix().removesuffix(".md").rsplit("/", 1)[-1]: p.relative_to(VAULT).as_posix()
             for p in VAULT.rglob("*.md") if p.relative_to(VAULT).as_posix() != "Security.md"}
    return re.sub(r"\[\[(Weekly review|Plan|Home|Ada)([\]|#\\])",
                  lambda m: f"[[{paths[m.group(1)].removesuffix('.md')}{m.group(2)}", text)


def by_id(relpath: str, text: str) -> str:
    """Every note with an `id:` of its own, and its wikilinks written with those ids, as palace's own notes do."""
    ids = {"Weekly review": "review-of-the-week", "Plan": "the-plan", "Home": "start-here", "Ada": "ada-l"}
    stem = relpath.rsplit("/", 1)[-1].removesuffix(".md")
    text = re.sub(r"\[\[(Weekly review|Plan|Home|Ada)([\]|#\\])", lambda m: f"[[{ids[m.group(1)]}{m.group(2)}", text)
    if stem not in ids:
        return text
    if text.startswith("---\n"):
        return f"---\nid: {ids[stem]}\n" + text[4:]
    return f"---\nid: {ids[stem]}\n---\n" + text


@pytest.mark.slow
@pytest.mark.parametrize("rewrite, typed, inserted", [
    (by_path, "weekly re", "Journal/Weekly review]]"),
    (by_id, "weekly re", "review-of-the-week|Weekly review]]"),
])
def test_completion_writes_links_the_way_the_vault_does(tmp_path, rewrite, typed, inserted):
    session = Editor(cold_vault(tmp_path, rewrite), server_env(tmp_path))
    try:
        items = first_completion(session, "People/Ada.md", typed)
        assert items[0].label == "Weekly review" and items[0].text_edit.new_text == inserted
    finally:
        session.close()


def test_a_cold_snapshot_is_read_from_the_files_before_any_refresh(tmp_path):
    """What the server answers from before its first refresh, with an empty cache: the note files, read directly
    (the hover above would be right after the refresh anyway; this is what makes it right before)."""
    palace = Palace(cold_vault(tmp_path))
    assert palace.index.store.count() == 0  # nothing indexed yet
    snapshot = Snapshot.cold_load(palace, palace.index.store.version())
    assert snapshot.cold and len(snapshot.memories) == 6
    assert snapshot.resolve("Security", "Projects/Plan.md").memory.path == "Projects/Security.md"
    assert snapshot.resolve("Security", "Home.md").memory.path == "Security.md"
    home = snapshot.by_path["Home.md"].id
    assert sorted(snapshot.backlinks(home)) == [
        "Journal/Weekly review.md", "People/Ada.md", "Projects/Plan.md"]  # by property links alone
    assert snapshot.file("photo.jpg", "Home.md") == "attachments/photo.jpg"
    assert snapshot.link_name(snapshot.by_path["Journal/Weekly review.md"], "Home.md") == "Weekly review"
    assert palace.index.store.count() == 0  # read without filling the cache
