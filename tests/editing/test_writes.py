"""Every write lands where palace means it to: never over a file it did not plan to replace (a name in another case
included), never out of the palace through a link, never where palace would not read it (issue 34, rows 1, 3, 7, 9,
11, 12 and the minor items). Each case runs the real CLI (or MCP tool) on real files and checks the bytes on disk."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from palace_cli.cli import cli
from palace_cli.editing import writes
from palace_cli.editing.authoring import init
from palace_cli.errors import PalaceError
from palace_cli.mcp import PalaceTools
from palace_cli.palace import Palace


def run(root: Path, *args, input: str | None = None):
    return CliRunner().invoke(cli, ["--palace", str(root), *[str(a) for a in args]], input=input)


def files(root: Path) -> dict[str, bytes]:
    """Every file of a folder but palace's cache and generated index files, by path, with its bytes (links as what
    they point at)."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        parts = path.relative_to(root).parts
        if ".palace" in parts or parts[0] in (".palace-index", "index", "INDEX.md"):
            continue
        found[rel] = os.readlink(path).encode() if path.is_symlink() else b"" if path.is_dir() else path.read_bytes()
    return found


def refused(result, *words: str) -> None:
    """The command failed in one line that names what it refused, no traceback."""
    assert result.exit_code in (1, 2), result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("palace: "), result.stderr
    assert all(word in lines[0] for word in words), lines[0]


@pytest.fixture
def vault(tmp_path) -> Path:
    """An adopted vault: notes at the root and in Garden/, links between them."""
    root = tmp_path / "vault"
    (root / "Garden").mkdir(parents=True)
    (root / "A.md").write_text("# A\nsee [[Home]]\n")
    (root / "a.md").write_text("# a, another note\n")
    (root / "Home.md").write_text("# Home\n[[A]] and [[Self]] and [[Garden/Rel]]\n")
    (root / "Self.md").write_text("# Self\nI am [[Self]], see [Rel](Garden/Rel.md).\n")
    (root / "Garden" / "Rel.md").write_text("# Rel\nback [home](../Home.md) and [[Self]]\n")
    (root / "index.md").write_text("# index, my own\n")
    init(root)
    return root


# ---- row 1: a name in another case is another file ------------------------------------------------------------


def test_mv_onto_a_name_in_another_case_is_refused_and_changes_nothing(vault):
    before = files(vault)
    refused(run(vault, "mv", "A.md", "a"), "a.md already exists")
    refused(run(vault, "mv", "Self", "A"), "A.md already exists")
    refused(run(vault, "mv", "Self", "HOME"), "HOME.md already exists as Home.md", "case-insensitive")
    assert files(vault) == before


def test_a_case_only_rename_on_a_case_sensitive_disk_moves_the_note(vault):
    (vault / "a.md").unlink()
    result = run(vault, "mv", "A.md", "a")
    assert result.exit_code == 0, result.output
    assert not (vault / "A.md").exists() and (vault / "a.md").read_text() == "# A\nsee [[Home]]\n"
    assert "[[a]] and [[Self]]" in (vault / "Home.md").read_text()


def test_add_never_writes_over_a_name_in_another_case(tmp_path):
    root = tmp_path / "kb"
    (root / "Notes").mkdir(parents=True)
    (root / "Notes" / "Home.md").write_text("# Home\nmine\n")
    init(root)
    before = files(root)
    refused(run(root, "add", "home", "-d", "Notes", "--content", "x"), "Notes/home.md already exists as Home.md")
    assert files(root) == before


def test_the_writer_refuses_a_file_it_did_not_plan_to_replace(vault):
    """A file that appears between plan and write is left alone, and named."""
    palace = Palace(vault)
    change = writes.creating("Fresh.md", "# Fresh\n")
    (vault / "Fresh.md").write_text("someone else's\n")
    with pytest.raises(writes.Unchanged, match="Fresh.md"):
        with writes.writing(palace):
            left = [writes.put(palace, change)]
            raise writes.Unchanged(", ".join(left))
    assert (vault / "Fresh.md").read_text() == "someone else's\n"
    change = writes.replacing(palace, "Home.md", "# Home\nnew\n")
    (vault / "Home.md").write_text("# Home\nedited meanwhile\n")
    assert writes.apply(palace, [change], "edit", strict=False) == ["Home.md"]
    assert (vault / "Home.md").read_text() == "# Home\nedited meanwhile\n"


# ---- row 3: no write leaves the palace through a link -----------------------------------------------------------


def test_add_and_mv_through_a_folder_linked_out_of_the_vault_are_refused(vault, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (vault / "out").symlink_to(outside, target_is_directory=True)
    (vault / "git").symlink_to(vault / ".git" if (vault / ".git").exists() else _hidden(vault))
    before = files(vault)
    refused(run(vault, "add", "a thought", "-d", "out"), "out leads outside the palace")
    refused(run(vault, "add", "Saga", "-d", "out", "--image", "A kangaroo on roller skates.", "--no-edit"),
            "out leads outside the palace")
    refused(run(vault, "mv", "Home", "out/Home"), "out leads outside the palace")
    refused(run(vault, "add", "a thought", "-d", "git"), "hidden folder")
    with pytest.raises(PalaceError, match="out leads outside the palace"):
        PalaceTools(Palace(vault)).add("a thought", domain="out")
    assert list(outside.iterdir()) == [] and files(vault) == before


def _hidden(vault: Path) -> Path:
    (vault / ".hidden").mkdir()
    return vault / ".hidden"


def test_memories_linked_out_of_the_palace_take_no_note(small_palace, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (small_palace / "memories" / "ext").symlink_to(outside, target_is_directory=True)
    refused(run(small_palace, "add", "a thought", "-d", "ext"), "leads outside the palace")
    refused(run(small_palace, "add", "Skating saga", "-d", "ext", "--image", "A kangaroo on roller skates.", "--no-edit"),
            "leads outside the palace")
    assert list(outside.iterdir()) == []


# ---- row 7: a vault rename whose own text changes -------------------------------------------------------------


def test_a_vault_rename_of_a_note_that_links_to_itself(vault):
    result = run(vault, "mv", "Self", "Me")
    assert result.exit_code == 0, result.output
    assert not (vault / "Self.md").exists()
    assert (vault / "Me.md").read_text() == "# Me\nI am [[Me]], see [Rel](Garden/Rel.md).\n".replace("# Me", "# Self")
    assert (vault / "Home.md").read_text() == "# Home\n[[A]] and [[Me]] and [[Garden/Rel]]\n"
    assert (vault / "Garden" / "Rel.md").read_text() == "# Rel\nback [home](../Home.md) and [[Me]]\n"


def test_a_vault_rename_into_another_folder_repoints_its_relative_links(vault):
    result = run(vault, "mv", "Self", "Deep/er/Self")
    assert result.exit_code == 0, result.output
    assert (vault / "Deep" / "er" / "Self.md").read_text() == "# Self\nI am [[Self]], see [Rel](../../Garden/Rel.md).\n"


def test_a_rename_that_fails_to_write_leaves_no_folder(vault, monkeypatch):
    def full(path, data, staged=None):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writes, "create_new", full)
    before = files(vault)
    refused(run(vault, "mv", "Self", "New/Folder/Self"), "No space left on device")
    assert files(vault) == before and not (vault / "New").exists()


# ---- row 9: names palace would never read, or that the disk refuses ------------------------------------------------


def test_mv_to_a_hidden_name_a_generated_name_or_a_name_too_long_is_refused_in_one_line(vault):
    (vault / "Garden" / "a-b.md").write_text("# a-b\n")
    before = files(vault)
    refused(run(vault, "mv", "Home", ".hidden"), ".hidden.md", "hidden")
    refused(run(vault, "mv", "Home", "Garden/.x/Home"), "hidden")
    refused(run(vault, "mv", "Home", "INDEX"), "INDEX.md already exists as index.md")
    refused(run(vault, "mv", "Home", "x" * 300), "at most 255 bytes")
    refused(run(vault, "mv", "Garden/Rel.md", "a b"), "garden.a-b", "Garden/a-b.md")
    refused(run(vault, "mv", "Home", "reviews/Home"), "would not be read as a note", "palace keeps reviews/")
    assert files(vault) == before


# ---- row 11: folders palace keeps for itself ------------------------------------------------------------------


def test_add_into_palace_folders_or_outside_the_notes_is_refused(vault):
    (vault / "templates").mkdir()
    (vault / "templates" / "t.md").write_text("# template\n")
    before = files(vault)
    refused(run(vault, "add", "a thought", "-d", "templates"), "templates/a thought.md would not be read as a note",
            "exclude")
    refused(run(vault, "add", "a thought", "-d", "reviews"), "palace keeps reviews/")
    with pytest.raises(PalaceError, match="palace keeps conversations/"):
        PalaceTools(Palace(vault)).add("a thought", domain="conversations")
    config = vault / "palace.toml"
    config.write_text(config.read_text().replace("[notes]\n", '[notes]\ninbox = "reviews"\n'))
    before = files(vault)
    refused(run(vault, "add", "a quick thought"), "palace keeps reviews/")
    assert files(vault) == before


def test_an_inbox_that_is_a_file_is_named_as_such(vault):
    (vault / "inbox").write_text("not a folder\n")
    refused(run(vault, "add", "a quick thought"), "inbox is a file, not a folder")


# ---- row 12: a vault's own reviews/ and conversations/ -----------------------------------------------------------


def test_adopting_a_vault_with_its_own_reviews_and_conversations_says_why_they_are_not_read(tmp_path):
    root = tmp_path / "kb"
    for relpath in ("reviews/Weekly.md", "conversations/Call with Bob.md", "conversations/work/Standup.md"):
        (root / relpath).parent.mkdir(parents=True, exist_ok=True)
        (root / relpath).write_text("# a note of mine\n")
    (root / "Home.md").write_text("# Home\n[[Weekly]]\n")
    result = CliRunner().invoke(cli, ["init", str(root)])
    assert result.exit_code == 0, result.output
    assert "3 Markdown files in conversations/ and reviews/ not read as notes" in result.stderr
    lint = run(root, "lint")
    said = [line for line in lint.output.splitlines() if "[palace-folder]" in line]
    assert [line.split(":")[0] for line in said] == ["conversations/Call with Bob.md", "reviews/Weekly.md"]
    assert "palace's own folder (the study log): not read as a note" in said[1]


# ---- the minor items --------------------------------------------------------------------------------------------


def test_hidden_note_names_and_links_into_git_are_reported_not_read(vault):
    (vault / ".md").write_text("# dot\n")
    (vault / "..md").write_text("# dot dot\n")
    (vault / ".git" / "x").mkdir(parents=True)
    (vault / ".git" / "x" / "secret.md").write_text("# secret\n")
    (vault / "Garden" / "Linked.md").symlink_to(vault / ".git" / "x" / "secret.md")
    lint = run(vault, "lint")
    lines = lint.output.splitlines()
    assert any(line.startswith(".md: warning:") and "[hidden-name]" in line for line in lines), lint.output
    assert any(line.startswith("..md: warning:") and "[hidden-name]" in line for line in lines)
    assert any(line.startswith("Garden/Linked.md: error: symlink points into .git/") for line in lines)
    listed = run(vault, "list", "--json").output
    assert "secret" not in listed and "Linked" not in listed


@pytest.mark.parametrize("text, words", [
    ("A thought\n\n## Image\nA walrus on a bicycle.", ("`## Image` heading", "--image")),
    ("A thought\n# content\nmore", ("`# content` heading",)),
    ("A thought\n<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> b\n", ("conflict markers",)),
])
def test_captured_text_that_would_be_read_as_something_else_is_refused(small_palace, text, words):
    before = files(small_palace)
    refused(run(small_palace, "add", "-", input=text), *words)
    with pytest.raises(PalaceError, match=words[0].strip("`").split()[0]):
        PalaceTools(Palace(small_palace)).add(text)
    assert files(small_palace) == before


def test_captured_text_in_a_code_fence_keeps_its_headings_and_bare_cr_becomes_a_line_end(small_palace):
    result = run(small_palace, "add", "-", input="Fenced\n```\n## Image\n```\n")
    assert result.exit_code == 0, result.output
    result = run(small_palace, "add", "-", input="one\rtwo\r\nthree")
    assert result.exit_code == 0, result.output
    written = (small_palace / "memories" / "inbox" / "one.md").read_bytes()
    assert b"\r" not in written and b"one\ntwo\nthree" in written
