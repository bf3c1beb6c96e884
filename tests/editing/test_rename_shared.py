"""A rename onto a file name another note has (`palace mv "Trial/Postgres Tuning.md" "Keyboard Shortcuts"` beside a
root `Keyboard Shortcuts.md`) never changes which note a link names: the links to the moved note are written with
its folder, and the links to the namesake that the new name would take are written with their path. A small vault
built here, in a real git repository, adopted by `palace init`."""

from __future__ import annotations

import json
from pathlib import Path

from test_vault_links import adopted, run

NOTES = {
    "Keyboard Shortcuts.md": "# Keyboard Shortcuts\n\nCtrl-K opens the palette.\n",
    "Trial/Postgres Tuning.md": "# Postgres Tuning\n\nRaise shared_buffers.\n",
    "Trial/Notes.md": ("# Trial notes\n\nSee [[Postgres Tuning]] and [[postgres tuning|the tuning page]].\n"
                       "Also [md](Postgres%20Tuning.md) and [[Postgres Tuning.md#Top]].\n\n"
                       "| topic | link |\n|---|---|\n| db | [[Postgres Tuning\\|pg]] |\n"
                       "| md | [pg](<Postgres Tuning.md>) |\n"),
    "Trial/Keys.md": ("---\nup: \"[[Keyboard Shortcuts]]\"\nlinks: [Keyboard Shortcuts]\n---\n# Keys\n\n"
                      "Read [[Keyboard Shortcuts]] and [k](../Keyboard%20Shortcuts.md).\n\n"
                      "| keys | [[Keyboard Shortcuts\\|the keys]] | [by name](Keyboard%20Shortcuts.md) |\n"),
    "Index.md": ("---\nrelated: \"[[Postgres Tuning]]\"\nlinks: [Postgres Tuning]\n---\n# Index\n\n"
                 "- [[Postgres Tuning]]\n- [[trial.postgres-tuning]]\n"
                 "- [[Trial/Postgres Tuning]]\n- [tuning](Trial/Postgres%20Tuning.md)\n- [[Keyboard Shortcuts]]\n"),
}

NOTES_AFTER = ("# Trial notes\n\nSee [[Trial/Keyboard Shortcuts]] and [[Trial/keyboard shortcuts|the tuning page]].\n"
               "Also [md](Keyboard%20Shortcuts.md) and [[Trial/Keyboard Shortcuts.md#Top]].\n\n"
               "| topic | link |\n|---|---|\n| db | [[Trial/Keyboard Shortcuts\\|pg]] |\n"
               "| md | [pg](<Keyboard Shortcuts.md>) |\n")
KEYS_AFTER = ("---\nup: \"[[Keyboard Shortcuts.md]]\"\nlinks: [Keyboard Shortcuts.md]\n---\n# Keys\n\n"
              "Read [[Keyboard Shortcuts.md]] and [k](../Keyboard%20Shortcuts.md).\n\n"
              "| keys | [[Keyboard Shortcuts.md\\|the keys]] | [by name](../Keyboard%20Shortcuts.md) |\n")
INDEX_AFTER = ("---\nrelated: \"[[Trial/Keyboard Shortcuts]]\"\nlinks: [Trial/Keyboard Shortcuts]\n---\n# Index\n\n"
               "- [[Trial/Keyboard Shortcuts]]\n- [[trial.keyboard-shortcuts]]\n"  # an id names it alone
               "- [[Trial/Keyboard Shortcuts]]\n- [tuning](Trial/Keyboard%20Shortcuts.md)\n- [[Keyboard Shortcuts]]\n")


def vault_of(tmp_path: Path, notes: dict[str, str]) -> Path:
    source = tmp_path / "source"
    for relpath, text in notes.items():
        (source / relpath).parent.mkdir(parents=True, exist_ok=True)
        (source / relpath).write_text(text)
    return adopted(source, tmp_path / "vault")


def backlinks(root: Path, ref: str) -> list[tuple[str, int, str]]:
    shown = json.loads(run(root, "backlinks", ref, "--json").stdout)["backlinks"]
    return sorted((b["path"], b["line"], b["field"]) for b in shown)


def test_a_rename_onto_a_shared_name_keeps_every_link_on_its_note(tmp_path):
    root = vault_of(tmp_path, NOTES)
    to_moved, to_other = backlinks(root, "Trial/Postgres Tuning.md"), backlinks(root, "Keyboard Shortcuts.md")
    assert len(to_moved) == 12 and len(to_other) == 7
    result = run(root, "mv", "Trial/Postgres Tuning.md", "Keyboard Shortcuts")
    assert "shares its file name with Keyboard Shortcuts.md" in result.output
    assert "in: Trial/Keys.md" in " ".join(result.output.split())  # the links the new name would have taken
    assert (root / "Trial/Notes.md").read_text() == NOTES_AFTER  # labels, headings, table pipes, `%20`, `<>` kept
    assert (root / "Trial/Keys.md").read_text() == KEYS_AFTER
    assert (root / "Index.md").read_text() == INDEX_AFTER
    assert (root / "Keyboard Shortcuts.md").read_text() == NOTES["Keyboard Shortcuts.md"]
    assert backlinks(root, "Trial/Keyboard Shortcuts.md") == to_moved  # every link names what it named
    assert backlinks(root, "Keyboard Shortcuts.md") == to_other
    problems = json.loads(run(root, "lint", "--json").stdout)["problems"]
    assert [p for p in problems if p["severity"] == "error"] == []
    removed = run(root, "rm", "Trial/Keyboard Shortcuts.md", "--force")
    assert removed.output.count("is broken now") == 12


def test_a_new_namesake_by_the_shortest_path_takes_no_link(tmp_path):
    """A note moved to a shorter path than a namesake's would take its bare links (Obsidian's shortest path): they
    are written with the namesake's folder."""
    root = vault_of(tmp_path, {"Deep/Topic.md": "# Topic\n", "Other/X.md": "# X\n\nOn [[Topic]] and [[topic|it]].\n",
                               "Trial/Draft.md": "# Draft\n"})
    result = json.loads(run(root, "mv", "Trial/Draft.md", "A/Topic", "--json").stdout)
    assert result["shared"] == ["Deep/Topic.md"] and result["kept"] == ["Other/X.md"]
    assert (root / "Other/X.md").read_text() == "# X\n\nOn [[Deep/Topic]] and [[Deep/Topic|it]].\n"
    assert backlinks(root, "Deep/Topic.md") == [("Other/X.md", 3, "body"), ("Other/X.md", 3, "body")]
    assert backlinks(root, "A/Topic.md") == []


def test_a_file_name_takes_no_link_by_subject(tmp_path):
    """A link that named a note by its subject would name a note renamed to that file name (a file name ranks
    first): it is written with the note's file name instead."""
    root = vault_of(tmp_path, {"keys.md": "# Hotkeys\n", "Home.md": "# Home\n\nSee [[Hotkeys]].\n",
                               "Draft.md": "# Draft\n"})
    assert backlinks(root, "keys.md") == [("Home.md", 3, "body")]
    result = run(root, "mv", "Draft.md", "Hotkeys")
    assert "shares" not in result.output and "Hotkeys.md would have taken" in " ".join(result.output.split())
    assert (root / "Home.md").read_text() == "# Home\n\nSee [[keys]].\n"
    assert backlinks(root, "keys.md") == [("Home.md", 3, "body")]


def test_a_rename_to_a_name_no_other_note_has_writes_it_bare(tmp_path):
    root = vault_of(tmp_path, NOTES)
    before = (root / "Trial/Notes.md").read_text()
    result = run(root, "mv", "Trial/Postgres Tuning.md", "Vacuum")
    assert "shares" not in result.output
    assert (root / "Trial/Notes.md").read_text() == before.replace("Postgres Tuning", "Vacuum").replace(
        "postgres tuning", "vacuum").replace("Postgres%20Tuning", "Vacuum")
    run(root, "mv", "Trial/Vacuum.md", "Postgres Tuning")
    assert (root / "Trial/Notes.md").read_text() == before


def test_two_links_on_one_line_are_two_places(tmp_path):
    """Backlinks (and rm's broken links) give each link its column: two links on one line are two rows that say
    where each is, `path:line:column` (characters from 1, as editors jump to them); a frontmatter field stays
    `path:line`."""
    root = vault_of(tmp_path, {"Palette.md": "# Palette\n",
                               "Command.md": "---\nup: \"[[Palette]]\"\n---\n# Command\n\n"
                                             "In the [[Palette]] (all’s in the [[Palette|palette]]).\n"})
    shown = json.loads(run(root, "backlinks", "Palette", "--json").stdout)["backlinks"]
    assert [(b["line"], b["column"], b["field"]) for b in shown] == [(2, 0, "up"), (6, 8, "body"), (6, 34, "body")]
    rows = [line.split() for line in run(root, "backlinks", "Palette").output.splitlines()]
    assert [row[-1] for row in rows if row and row[0] == "command"] == [
        "Command.md:2", "Command.md:6:8", "Command.md:6:34"]
    removed = run(root, "rm", "Palette", "--force").output
    assert "Command.md:6:8: the link" in removed and "Command.md:6:34: the link" in removed
