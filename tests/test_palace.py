"""The palace on disk: root discovery, scanning with broken notes, lookup by id, path or fuzzy subject."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from palace_cli.config import find_root, load_config
from palace_cli.errors import Ambiguous, ConfigError, NoteError, NotAPalace, NotFound
from palace_cli.lint import lint
from palace_cli.palace import Palace

GOOD = """---
id: {id}
subject: {subject}
anchor: {anchor}
keywords: [{keywords}]
verify: {verify}
---
# {subject}

## Image
You see {verify} dancing on a table.

## Content
Facts about {subject}.
"""


def note(note_id: str, subject: str = "", anchor: str = "an odd hook", keywords: str = "", verify: str = "") -> str:
    return GOOD.format(id=note_id, subject=subject or note_id.title(), anchor=anchor, keywords=keywords,
                       verify=verify or f"purple {note_id} walrus")


# ---- root discovery --------------------------------------------------------------------------


def test_root_is_found_walking_up(small_palace):
    deep = small_palace / "memories" / "distributed"
    assert find_root(start=deep) == small_palace
    assert Palace.find(start=deep).root == small_palace


def test_explicit_and_env_override_walking_up(small_palace, tmp_path, monkeypatch):
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.chdir(other)
    with pytest.raises(NotAPalace, match="not inside a palace"):
        find_root()
    monkeypatch.setenv("PALACE_DIR", str(small_palace))
    assert find_root() == small_palace
    assert find_root(start=other) == small_palace
    with pytest.raises(NotAPalace, match="is not a palace"):
        find_root(explicit=other)  # explicit beats the environment


def test_env_pointing_at_a_non_palace_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PALACE_DIR", str(tmp_path))
    with pytest.raises(NotAPalace, match="no palace.toml"):
        find_root(start=tmp_path)


@pytest.mark.parametrize("toml, message", [
    ("[palace\nname = 1", "palace.toml"),
    ('palace = "x"', "`palace` must be a table"),
    ('domains = ["a"]', "`domains` must be a table"),
    ('[domains]\n"../etc" = {description = "x"}', "a domain name is a folder name"),
    ('[domains.a]\naliases = 3', "aliases must be a list"),
    ('models = 1', "`models` must be a table"),
])
def test_broken_palace_toml_is_one_clear_error(tmp_path, toml, message):
    (tmp_path / "palace.toml").write_text(toml)
    with pytest.raises(ConfigError, match=message) as caught:
        load_config(tmp_path)
    assert str(tmp_path / "palace.toml") in str(caught.value)


# ---- scanning a palace with bad notes --------------------------------------------------------

# Each case: relative path, bytes, the problem code lint reports, the line (None: whole file).
BAD_FILES = [
    ("memories/d/yaml.md", b"---\nid: yaml\nsubject: [oops\n---\n", "unreadable-note", 3),
    ("memories/d/list.md", b"---\n- a\n- b\n---\nbody\n", "unreadable-note", 2),
    ("memories/d/string.md", b"---\njust words\n---\nbody\n", "unreadable-note", 2),
    ("memories/d/indented.md", b" ---\nid: indented\n---\n", "unreadable-note", 1),
    ("memories/d/latin1.md", b"---\nid: latin1\nsubject: caf\xe9\n---\n", "unreadable-note", 3),
    ("memories/d/empty.md", b"", "unreadable-note", 1),
    ("memories/d/huge.md", b"---\nid: huge\n---\n" + b"y" * 1_000_001, "unreadable-note", None),
    ("memories/d/copy.md", note("alpha").encode(), "duplicate-id", 2),
    ("memories/loose.md", note("loose").encode(), "no-domain", None),
    ("notes/stray.md", note("stray").encode(), "outside-memories", 1),
]
WARNED_FILES = [
    ("memories/d/bom.md", b"\xef\xbb\xbf" + note("bom").encode(), "bom", 1),
    ("memories/d/crlf.md", note("crlf").replace("\n", "\r\n").encode(), "crlf", 1),
]


@pytest.fixture
def messy(tmp_path) -> Path:
    """A palace with two good notes and every kind of bad file next to them."""
    root = tmp_path / "messy"
    (root / "memories" / "d").mkdir(parents=True)
    (root / "palace.toml").write_text('[palace]\nname = "Messy"\n')
    (root / "memories" / "d" / "alpha.md").write_text(note("alpha"))
    (root / "memories" / "d" / "beta.md").write_text(note("beta"))
    for relpath, data, _code, _line in BAD_FILES + WARNED_FILES:
        path = root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    outside = tmp_path / "outside.md"
    outside.write_text(note("outside"))
    os.symlink(outside, root / "memories" / "d" / "link.md")
    os.symlink(root / "memories", root / "memories" / "d" / "loop")
    return root


def test_bad_notes_are_reported_and_the_rest_still_read(messy):
    scan = Palace(messy).scan()
    assert sorted(scan.memories) == ["alpha", "beta", "bom", "crlf"]
    report = lint(Palace(messy))
    found = {(p.path, p.code, p.line) for p in report.problems}
    for relpath, _data, code, line in BAD_FILES + WARNED_FILES:
        assert (relpath, code, line) in found, (relpath, code)
    assert ("memories/d/link.md", "symlink-outside", None) in found
    assert ("memories/d/loop", "symlink-loop", None) in found
    for problem in report.problems:
        assert "\n" not in str(problem) and str(problem).startswith(problem.path)


def test_duplicate_id_keeps_the_first_path(messy):
    scan = Palace(messy).scan()
    assert scan.memories["alpha"].path == "memories/d/alpha.md"
    problem = next(p for p in scan.problems if p.code == "duplicate-id")
    assert "memories/d/alpha.md" in problem.message


def test_nothing_is_rewritten_by_lint_fix(messy):
    before = {p: p.read_bytes() for p in messy.rglob("*.md") if not p.is_symlink()}
    lint(Palace(messy), fix=True)
    after = {p: p.read_bytes() for p in before}
    assert after == before  # the notes all have tokens; only INDEX.md and index/ are new
    assert (messy / "INDEX.md").exists() and (messy / "index" / "d.md").exists()


def test_get_a_broken_note_by_path_says_why(messy):
    with pytest.raises(NoteError, match=r"memories/d/yaml.md:3: frontmatter is not valid YAML"):
        Palace(messy).get("memories/d/yaml.md")


# ---- lookup ----------------------------------------------------------------------------------


@pytest.mark.parametrize("ref, expected", [
    ("raft", "raft"),
    ("Raft", "raft"),
    ("raft consensus", "raft"),
    ("paxos algorithm", "paxos"),
    ("two phase commit", "two-phase-commit"),
    ("Two-Phase Commit (2PC)", "two-phase-commit"),
    ("drummer on the river", "raft"),
    ("bloom filtr", "bloom-filter"),
    ("circuit breakr", "circuit-breaker"),
    ("write ahead log", "write-ahead-log"),
    ("memories/consensus-coordination/raft.md", "raft"),
    ("memories/consensus-coordination/raft.md:10", "raft"),
    ("./memories/storage-engines/b-tree.md", "b-tree"),
])
def test_get_finds_one_memory(palace, monkeypatch, ref, expected):
    monkeypatch.chdir(palace.root)
    assert palace.get(ref).id == expected


def test_get_by_absolute_path_from_anywhere(palace, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert palace.get(str(palace.root / "memories/storage-engines/b-tree.md")).id == "b-tree"


@pytest.mark.parametrize("ref, names", [
    ("consensus", ["paxos", "raft"]),
    ("cache", ["cache-aside", "cache-invalidation", "write-through-cache"]),
    ("replication", ["leader-follower-replication", "leaderless-replication"]),
])
def test_get_is_honest_about_ambiguity(palace, ref, names):
    with pytest.raises(Ambiguous) as caught:
        palace.get(ref)
    for name in names:
        assert name in str(caught.value)


@pytest.mark.parametrize("ref", ["xyzzy", "", "   ", "memories/nope/none.md"])
def test_get_not_found(palace, ref):
    with pytest.raises(NotFound):
        palace.get(ref)


def test_exact_subject_shared_by_two_memories_is_ambiguous(tmp_path):
    root = tmp_path / "p"
    (root / "memories" / "a").mkdir(parents=True)
    (root / "palace.toml").write_text("")
    (root / "memories" / "a" / "one.md").write_text(note("one", subject="Same Name"))
    (root / "memories" / "a" / "two.md").write_text(note("two", subject="Same Name"))
    with pytest.raises(Ambiguous, match="one, two"):
        Palace(root).get("same name")


def test_domains_combine_folders_and_config(small_palace):
    (small_palace / "palace.toml").write_text('[palace]\nname = "S"\n[domains.empty]\ndescription = "none yet"\n')
    assert Palace(small_palace).domains() == ["distributed", "empty", "storage"]
