"""The palace on disk: root discovery, scanning with broken notes, the memory and domain resolvers."""

from __future__ import annotations

import os
import re

import pytest

from palace_cli.core.config import find_root, load_config
from palace_cli.errors import Ambiguous, ConfigError, NotAMemory, NoteError, NotAPalace, NotFound
from palace_cli.editing.lint import lint
from palace_cli.palace import Palace

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
    ("x = " + "[" * 5000 + "]" * 5000, "nested too deeply"),
])
def test_broken_palace_toml_is_one_clear_error(tmp_path, toml, message):
    (tmp_path / "palace.toml").write_text(toml)
    with pytest.raises(ConfigError, match=message) as caught:
        load_config(tmp_path)
    assert str(tmp_path / "palace.toml") in str(caught.value)


# ---- scanning a palace with bad notes --------------------------------------------------------

def test_bad_notes_are_reported_and_the_rest_still_read(messy, bad_files, warned_files, odd_files, readable_ids):
    scan = Palace(messy).scan()
    assert sorted(scan.memories) == readable_ids
    report = lint(Palace(messy))
    found = {(p.path, p.code, p.line) for p in report.problems}
    for relpath, _data, code, line in bad_files + warned_files:
        assert (relpath, code, line) in found, (relpath, code)
    for relpath, code in odd_files:
        assert (relpath, code, None) in found, (relpath, code)
    for problem in report.problems:
        assert "\n" not in str(problem) and str(problem).startswith(problem.path)
        str(problem).encode("utf-8")  # printable: no lone surrogate from a name that is not UTF-8


def test_one_rule_decides_what_is_a_memory(messy):
    palace = Palace(messy)
    assert palace.memory_target(messy / "memories/d/alpha.md")[0] == str(messy / "memories/d/alpha.md")
    assert palace.memory_target(messy / "memories/d/up")[0] == str(messy / "memories")
    for relpath, code in [("memories/d/link.md", "symlink-outside"), ("memories/d/inner.md", "symlink-outside"),
                          ("memories/d/root", "symlink-outside"), ("memories/d/self.md", "unreadable"),
                          ("memories/d/fifo.md", "unreadable"), ("notes/stray.md", "symlink-outside")]:
        with pytest.raises(NotAMemory) as caught:
            palace.memory_target(messy / relpath)
        assert caught.value.code == code, relpath


def test_duplicate_id_keeps_the_first_path(messy):
    scan = Palace(messy).scan()
    assert scan.memories["alpha"].path == "memories/d/alpha.md"
    problem = next(p for p in scan.problems if p.code == "duplicate-id")
    assert "memories/d/alpha.md" in problem.message


def test_nothing_is_rewritten_by_lint_fix(messy, note_bytes):
    before = note_bytes(messy)
    lint(Palace(messy), fix=True)
    assert note_bytes(messy) == before  # the notes all have tokens; only INDEX.md and index/ are new
    assert (messy / "INDEX.md").exists() and (messy / "index" / "d.md").exists()


def test_get_a_broken_note_by_path_says_why(messy):
    with pytest.raises(NoteError, match=r"memories/d/yaml.md:3: frontmatter is not valid YAML"):
        Palace(messy).memory("memories/d/yaml.md")


# ---- lookup ----------------------------------------------------------------------------------


@pytest.mark.parametrize("ref, expected", [
    ("raft", "raft"),                                   # id
    ("Raft", "raft"),                                   # subject, any case
    ("Two-Phase Commit (2PC)", "two-phase-commit"),     # exact subject
    ("two phase commit", "two-phase-commit"),           # file name, spaces for hyphens
    ("drummer on the river", "raft"),                   # anchor
    ("write ahead log", "write-ahead-log"),
    ("memories/consensus-coordination/raft.md", "raft"),
    ("memories/consensus-coordination/raft.md:10", "raft"),
    ("./memories/storage-engines/b-tree.md", "b-tree"),
])
def test_memory_resolves_exact_names(readonly_palace, monkeypatch, ref, expected):
    monkeypatch.chdir(readonly_palace.root)
    assert readonly_palace.memory(ref).id == expected


def test_memory_by_absolute_path_from_anywhere(readonly_palace, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert readonly_palace.memory(str(readonly_palace.root / "memories/storage-engines/b-tree.md")).id == "b-tree"


@pytest.mark.parametrize("ref, suggested", [
    ("raft consensus", ["raft"]),
    ("paxos algorithm", ["paxos"]),
    ("bloom filtr", ["bloom-filter"]),
    ("circuit breakr", ["circuit-breaker"]),
    ("consensus", ["paxos", "raft"]),
    ("cache", ["cache-aside", "cache-invalidation", "write-through-cache"]),
])
def test_a_near_miss_is_an_error_that_suggests(readonly_palace, ref, suggested):
    with pytest.raises(NotFound) as caught:
        readonly_palace.memory(ref)
    for name in suggested:
        assert name in str(caught.value)
    assert "did you mean" in str(caught.value)


@pytest.mark.parametrize("ref", ["xyzzy", "", "   ", "memories/nope/none.md"])
def test_memory_not_found(readonly_palace, ref):
    with pytest.raises(NotFound):
        readonly_palace.memory(ref)


def test_exact_subject_shared_by_two_memories_is_ambiguous(tmp_path, note_text):
    root = tmp_path / "p"
    (root / "memories" / "a").mkdir(parents=True)
    (root / "palace.toml").write_text("")
    (root / "memories" / "a" / "one.md").write_text(note_text("one", subject="Same Name"))
    (root / "memories" / "a" / "two.md").write_text(note_text("two", subject="Same Name"))
    with pytest.raises(Ambiguous, match="one, two"):
        Palace(root).memory("same name")


def test_the_id_of_a_broken_note_is_its_error_not_another_note(messy):
    """A merge conflict in a note's frontmatter: its id (the file name) names it, never a neighbour."""
    note_path = messy / "memories" / "d" / "gamma.md"
    note_path.write_text("---\nid: gamma\n<<<<<<< HEAD\nsubject: Gamma\n=======\nsubject: Alpha two\n"
                         ">>>>>>> other\n---\n# Gamma\n")
    with pytest.raises(NoteError, match="memories/d/gamma.md"):
        Palace(messy).memory("gamma")


def test_domains_combine_folders_and_config(small_palace):
    (small_palace / "palace.toml").write_text('[palace]\nname = "S"\n[domains.empty]\ndescription = "none yet"\n')
    assert Palace(small_palace).domains() == ["distributed", "empty", "storage"]


# ---- the domain resolver: one for every face ---------------------------------------------------


@pytest.mark.parametrize("name, expected", [
    ("storage-engines", "storage-engines"),      # the folder
    ("Storage-Engines", "storage-engines"),      # any case
    ("consensus", "consensus-coordination"),     # an alias in palace.toml
    ("Kafka", "messaging-events"),               # an alias, any case
    ("reliab", "reliability-operations"),        # a unique prefix
])
def test_resolve_domain(readonly_palace, name, expected):
    assert readonly_palace.resolve_domain(name) == expected


@pytest.mark.parametrize("name, message", [
    ("storag-engines", "did you mean storage-engines?"),
    ("c", "did you mean caching-performance, consensus-coordination?"),
    ("biology", "domains: caching-performance, consensus-coordination"),
])
def test_resolve_domain_refuses_with_close_names(readonly_palace, name, message):
    with pytest.raises(NotFound, match=re.escape(message)):
        readonly_palace.resolve_domain(name)


def test_a_new_domain_is_created_only_when_it_is_not_a_typo(readonly_palace):
    assert readonly_palace.resolve_domain("Biology Notes", allow_new=True) == "biology-notes"
    with pytest.raises(NotFound, match="did you mean storage-engines.*--new-domain"):
        readonly_palace.resolve_domain("storag-engines", allow_new=True)
    assert readonly_palace.resolve_domain("storag-engines", allow_new=True, insist=True) == "storag-engines"


def test_a_folder_that_is_never_read_is_no_domain(small_palace, tmp_path):
    (small_palace / "memories" / "bad\nname").mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, small_palace / "memories" / "linked")
    assert Palace(small_palace).domains() == ["distributed", "storage"]


def test_a_relative_path_is_read_against_the_palace_first(small_palace, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert Palace(small_palace).memory("memories/storage/bloom-filter.md").id == "bloom-filter"


def test_a_non_finite_number_in_frontmatter_is_kept_as_text_in_the_cache(small_palace):
    from palace_cli.index.store import memory_from_json, memory_to_json

    memory = Palace(small_palace).memory("saga")
    memory.meta["weight"] = float("nan")
    assert memory_from_json(memory_to_json(memory)).meta["weight"] == "nan"


def test_a_link_to_another_note_never_takes_its_id(small_palace):
    """A symlink inside memories/ to a note read through its own path is skipped, whichever sorts first."""
    os.symlink(small_palace / "memories" / "storage" / "bloom-filter.md", small_palace / "memories" / "storage" / "a-link.md")
    os.symlink(small_palace / "memories" / "storage", small_palace / "memories" / "aaa-storage")
    palace = Palace(small_palace)
    scan = palace.scan()
    assert scan.memories["bloom-filter"].path == "memories/storage/bloom-filter.md"
    codes = {(p.path, p.code) for p in scan.problems}
    assert ("memories/storage/a-link.md", "symlink-duplicate") in codes
    assert ("memories/aaa-storage", "symlink-loop") in codes
    assert not any(p.code == "duplicate-id" for p in scan.problems)
    assert palace.memory("memories/storage/bloom-filter.md").id == "bloom-filter"
    with pytest.raises(NoteError, match="read through its own path"):
        palace.memory("memories/storage/a-link.md")
