"""Generated INDEX.md and index/<domain>.md: deterministic, navigable without the CLI, never revealing a token."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from palace_cli.index.files import HIDDEN, check_index_files, render_all, write_index_files
from palace_cli.core.noteedit import update_frontmatter
from palace_cli.palace import Palace
from palace_cli.core.layout import Scan
from palace_cli.core.tokens import PhraseIndex, contains_phrase, find_phrases


def generated(root: Path) -> dict[str, str]:
    files = {"INDEX.md": (root / "INDEX.md").read_text()}
    files.update({f"index/{p.name}": p.read_text() for p in sorted((root / "index").glob("*.md"))})
    return files


def test_committed_example_palace_index_files_are_current(readonly_palace, parse_notes):
    assert check_index_files(readonly_palace.site, parse_notes(readonly_palace)) == []


def test_generating_twice_gives_identical_bytes(readonly_palace, parse_notes):
    first = render_all(readonly_palace.site, parse_notes(readonly_palace))
    assert write_index_files(readonly_palace.site, parse_notes(readonly_palace)).written == []  # the committed files are already these bytes
    memories = list(parse_notes(readonly_palace).memories.items())
    random.Random(7).shuffle(memories)
    assert render_all(readonly_palace.site, Scan(memories=dict(memories))) == first


def test_editing_one_note_changes_only_its_lines(palace, parse_notes):
    before = generated(palace.root)
    note = palace.root / "memories/consensus-coordination/raft.md"
    update_frontmatter(note, {"anchor": "drummer on the rapids", "keywords": ["consensus", "leader", "term"]})
    report = write_index_files(palace.site, parse_notes(palace))
    assert report.written == ["INDEX.md", "index/consensus-coordination.md"]
    after = generated(palace.root)
    for name in before:
        old, new = before[name].splitlines(), after[name].splitlines()
        assert len(old) == len(new)
        changed = [(a, b) for a, b in zip(old, new) if a != b]
        if name in report.written:
            assert len(changed) == 1 and "drummer on the rapids" in changed[0][1], name
        else:
            assert changed == [], name


def test_adding_a_note_adds_its_lines_and_the_counts(palace, parse_notes):
    before = generated(palace.root)
    source = (palace.root / "memories/consensus-coordination/raft.md").read_text()
    (palace.root / "memories/consensus-coordination/raft-2.md").write_text(
        source.replace("id: raft", "id: raft-2").replace("anchor: drummer on the river", "anchor: second drummer")
        .replace("verify: ", "verify: x"))
    write_index_files(palace.site, parse_notes(palace))
    after = generated(palace.root)
    added = set(after["INDEX.md"].splitlines()) - set(before["INDEX.md"].splitlines())
    assert len(added) == 2 and any("second drummer" in line for line in added)
    assert any(line.startswith("90 memories") for line in added)


def test_orphaned_generated_files_go_and_hand_written_ones_stay(small_palace, parse_notes):
    palace = Palace(small_palace)
    write_index_files(palace.site, parse_notes(palace))
    (small_palace / "index" / "notes.md").write_text("# my own notes about the index\n")
    for path in (small_palace / "memories" / "storage").iterdir():
        path.unlink()
    (small_palace / "memories" / "storage").rmdir()
    assert "index/storage.md" in check_index_files(palace.site, parse_notes(palace))
    report = write_index_files(palace.site, parse_notes(palace))
    assert report.removed == ["index/storage.md"]
    assert (small_palace / "index" / "notes.md").exists()
    assert check_index_files(palace.site, parse_notes(palace)) == []


def test_stale_after_an_edit_until_regenerated(small_palace, parse_notes):
    palace = Palace(small_palace)
    # add_memory refreshes before it writes, so only what the last note changed is stale
    assert check_index_files(palace.site, parse_notes(palace)) == ["INDEX.md", "index/storage.md"]
    write_index_files(palace.site, parse_notes(palace))
    assert check_index_files(palace.site, parse_notes(palace)) == []
    update_frontmatter(small_palace / "memories/storage/bloom-filter.md", {"anchor": "lightbulb hotel"})
    assert check_index_files(palace.site, parse_notes(palace)) == ["INDEX.md", "index/storage.md"]


# ---- navigation without the CLI --------------------------------------------------------------


def navigate(root: Path, term: str) -> set[str]:
    """What an agent reading files does: term -> INDEX.md line -> domain -> anchor -> domain index -> note path."""
    found = set()
    index = (root / "INDEX.md").read_text().splitlines()
    heading = None
    for line in index:
        match = re.match(r"## (\S+) → \[[^\]]+\]\(([^)]+)\)", line)
        if match:
            heading = match.group(2)
            continue
        if line.startswith("- ") and " → " in line and term.lower() in line.lower():
            anchor = line.rsplit(" → ", 1)[1]
            for entry in (root / heading).read_text().splitlines():
                if entry.startswith(f"- **{anchor}** → "):
                    path = re.search(r"`([^`]+):(\d+)`", entry).group(1)
                    found.add(path)
    return found


def test_every_memory_is_reachable_from_its_subject_and_each_keyword(readonly_palace, parse_notes):
    for memory in parse_notes(readonly_palace).memories.values():
        for term in [memory.subject, *memory.keywords]:
            reached = navigate(readonly_palace.root, term)
            assert memory.path in reached, (memory.id, term)
            assert all((readonly_palace.root / path).is_file() for path in reached)


def test_domain_index_line_points_at_the_heading_line(readonly_palace, parse_notes):
    for memory in parse_notes(readonly_palace).memories.values():
        lines = (readonly_palace.root / memory.path).read_text().splitlines()
        assert lines[memory.line - 1].startswith("# "), memory.id


def test_anchors_are_unique_within_each_example_domain(readonly_palace, parse_notes):
    for domain, memories in parse_notes(readonly_palace).by_domain().items():
        anchors = [m.anchor.lower() for m in memories]
        assert len(anchors) == len(set(anchors)), domain


# ---- verify tokens never appear --------------------------------------------------------------


def assert_no_token(files: dict[str, str], memories) -> None:
    tokens = {m.id: m.verify for m in memories if m.verify}
    secrets = PhraseIndex(tokens)
    for name, text in files.items():
        for line in text.splitlines():
            assert secrets.find(line) == [], (name, line)
        assert find_phrases(text, tokens) == [], name
        for token in tokens.values():
            assert not contains_phrase(text, token), (name, token)


def test_no_generated_file_of_the_example_palace_contains_a_verify_phrase(readonly_palace, parse_notes):
    assert_no_token(generated(readonly_palace.root), parse_notes(readonly_palace).memories.values())
    assert_no_token(render_all(readonly_palace.site, parse_notes(readonly_palace)), parse_notes(readonly_palace).memories.values())


def test_fingerprints_are_listed_instead(readonly_palace):
    text = (readonly_palace.root / "index" / "consensus-coordination.md").read_text()
    assert re.search(r"`vt:[0-9a-f]{8}` id:raft$", text, re.MULTILINE)


def test_tokens_printed_by_other_fields_are_hidden(small_palace, parse_notes):
    palace = Palace(small_palace)
    (small_palace / "palace.toml").write_text(
        '[palace]\nname = "S"\n[domains.distributed]\ndescription = "Home of the lemon-cakes."\n'
        'aliases = ["granite couples"]\n')
    base = small_palace / "memories" / "distributed"
    update_frontmatter(base / "saga.md", {"verify": "lemon cakes",
                                          "anchor": "relay race of Lemon-Cakes",
                                          "keywords": ["saga", "forty-seven granite"]})
    update_frontmatter(base / "two-phase-commit.md", {"verify": "granite couples", "subject": "Granite Couple (2PC)"})
    palace = Palace(small_palace)
    scan = parse_notes(palace)
    files = render_all(palace.site, scan)
    assert_no_token(files, scan.memories.values())
    text = files["INDEX.md"] + files["index/distributed.md"]
    assert "relay race of (hidden)" in text and "Home of the (hidden)." in text
    assert f"[{HIDDEN} (2PC)]" in files["index/distributed.md"]
    # the memory line for the other domain is untouched
    assert "- **hotel of lightbulbs** → [Bloom Filter]" in files["index/storage.md"]


def test_link_targets_are_escaped(tmp_path, parse_notes):
    from palace_cli.editing.authoring import add_memory, init_palace

    root = init_palace(tmp_path / "p")
    palace = Palace(root)
    (root / "memories" / "my notes").mkdir(parents=True)
    add_memory(palace, "Spaced Out", "my notes", anchor="hook", image="a walrus on skis", content="x")
    files = render_all(palace.site, parse_notes(palace))
    assert "](../memories/my%20notes/spaced-out.md)" in files["index/my notes.md"]
    assert "[index/my notes.md](index/my%20notes.md)" in files["INDEX.md"]


@pytest.mark.parametrize("name", ["INDEX.md", "index/consensus-coordination.md"])
def test_generated_files_say_they_are_generated(readonly_palace, name):
    assert "generated by palace: do not edit" in (readonly_palace.root / name).read_text()
