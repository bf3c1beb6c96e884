"""The one folder walk (core/walk.py): one skip rule and one link rule for notes, session files, stray notes,
a folder to import and a folder to adopt."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from palace_cli.conversations import session_files
from palace_cli.core.layout import NoteRules, skipped
from palace_cli.core.walk import FolderRules, files_under, note_files, stray_notes, walk_files
from palace_cli.editing.authoring import init
from palace_cli.index.watcher import relevant

NOTE = "---\nid: {id}\ntype: fact\n---\nbody\n"


def write(root: Path, relpath: str, text: str = "text\n") -> Path:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("name, expected", [
    (".git", True), (".obsidian", True), (".note.md.x1y2.tmp", True), ("node_modules", True),
    ("__pycache__", True), (".venv", True), ("notes", False), ("node_modules.md", False),
])
def test_one_skip_rule(name, expected):
    assert skipped(name) is expected


def test_a_folder_to_import_is_walked_by_the_skip_rule_in_any_case_and_sorted(tmp_path):
    for relpath in ("b/Two.MD", "a.markdown", "b/a/one.md", "node_modules/pkg/README.md", ".obsidian/x.md",
                    "__pycache__/y.md", "b/.hidden.md", "b/notes.txt"):
        write(tmp_path, relpath)
    found = files_under(tmp_path, (".md", ".markdown"))
    assert found == [tmp_path / "a.markdown", tmp_path / "b/Two.MD", tmp_path / "b/a/one.md"]
    assert len(files_under(tmp_path, (".md", ".markdown"), limit=1)) == 1


def test_a_folder_to_import_follows_links_only_inside_it(tmp_path):
    outside, folder = tmp_path / "outside", tmp_path / "folder"
    write(outside, "secret.md")
    write(folder, "inside/kept.md")
    os.symlink(outside, folder / "out")
    os.symlink(folder / "inside", folder / "again")  # the same folder by a second path: read once
    problems = []
    found = walk_files(folder, FolderRules((".md",)), problems)
    assert [f.relpath for f in found] == ["inside/kept.md"]
    assert {p.code for p in problems} == {"symlink-outside", "symlink-loop"}


def test_session_files_are_walked_by_the_same_rules(tmp_path):
    write(tmp_path, "conversations/chat/2026/s1.md")
    write(tmp_path, "conversations/chat/s2.md")
    write(tmp_path, "conversations/loose.md")  # not in a source's folder
    write(tmp_path, "conversations/chat/node_modules/s3.md")
    write(tmp_path, "conversations/chat/.s4.md.abc.tmp")
    write(tmp_path, "elsewhere/s5.md")
    os.symlink(tmp_path / "elsewhere", tmp_path / "conversations/chat/linked")
    problems, temps = [], []
    found = session_files(tmp_path, problems, temps)
    assert [relpath for relpath, _, _ in found] == ["conversations/chat/2026/s1.md", "conversations/chat/s2.md"]
    assert found[0][2] == len("text\n")
    assert [(p.path, p.code) for p in problems] == [("conversations/chat/linked", "symlink-outside")]
    assert temps == [str(tmp_path / "conversations/chat/.s4.md.abc.tmp")]


def test_notes_get_their_domain_and_a_note_in_none_is_reported(tmp_path):
    write(tmp_path, "memories/work/a.md", NOTE.format(id="a"))
    write(tmp_path, "memories/loose.md", NOTE.format(id="loose"))
    write(tmp_path, "memories/work/node_modules/b.md", NOTE.format(id="b"))
    problems = []
    found = note_files(tmp_path, NoteRules(), problems)
    assert [(f.relpath, f.domain) for f in found] == [("memories/work/a.md", "work")]
    assert [(p.path, p.code) for p in problems] == [("memories/loose.md", "no-domain")]


def test_stray_notes_leave_out_memories_index_and_skipped_folders(tmp_path):
    write(tmp_path, "memories/work/a.md", NOTE.format(id="a"))
    write(tmp_path, "index/work.md", NOTE.format(id="index"))
    write(tmp_path, "README.md", NOTE.format(id="readme"))
    write(tmp_path, "drafts/b.md", NOTE.format(id="b"))
    write(tmp_path, "drafts/plain.md", "no frontmatter\n")
    write(tmp_path, "node_modules/c.md", NOTE.format(id="c"))
    write(tmp_path, "docs/index/d.md", NOTE.format(id="d"))  # index/ is left out at the root only
    assert [(p.path, p.code) for p in stray_notes(tmp_path)] == [("docs/index/d.md", "outside-memories"),
                                                                  ("drafts/b.md", "outside-memories")]


def test_a_folder_of_markdown_only_in_skipped_folders_is_not_adopted(tmp_path):
    tools = tmp_path / "tools"
    write(tools, "node_modules/pkg/README.md")
    write(tools, ".venv/lib/x.md")
    write(tools, "__pycache__/y.md")
    assert not init(tools).adopted
    vault = tmp_path / "vault"
    write(vault, "Garden/Watering.md")
    assert init(vault).adopted


def test_the_watcher_ignores_what_the_walk_skips():
    rules = NoteRules()
    assert relevant("memories/work/node_modules/a.md", rules) is False
    assert relevant("memories/work/.obsidian/a.md", rules) is False
    assert relevant("memories/work/a.md", rules) is True
