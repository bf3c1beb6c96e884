"""A palace opened as an Obsidian vault: links by file name, notes without frontmatter, .obsidian/; every word indexed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from palace_cli.cli import cli
from palace_cli.core.notefile import parse_note
from palace_cli.core.markdown import rest_of_body
from palace_cli.watch import relevant

SAGA = "memories/messaging-events/saga-pattern.md"


def run(root: Path, *args):
    return CliRunner().invoke(cli, ["--palace", str(root), *[str(a) for a in args]], catch_exceptions=False)


def lint(root: Path) -> list[dict]:
    return json.loads(run(root, "lint", "--json").stdout)["problems"]


# ---- notes without frontmatter ----------------------------------------------------------------


def test_a_note_without_frontmatter_is_read_as_a_plain_note(example_palace):
    note = example_palace / "memories/messaging-events/Outbox polling.md"
    note.write_text("# Polling the outbox\n\nA relay reads unsent rows every 200 ms and marks them sent.\n\n"
                    "See [[Saga Pattern]] and ![[relay.png]].\n")
    (example_palace / "memories/relay.png").write_bytes(b"\x89PNG\r\n")  # an embed names a file anywhere
    shown = json.loads(run(example_palace, "show", "outbox-polling", "--json").stdout)
    assert shown["subject"] == "Polling the outbox" and shown["path"] == "memories/messaging-events/Outbox polling.md"
    assert "every 200 ms" in shown["content"] and shown["line"] == 1
    text = run(example_palace, "show", "outbox-polling").stdout
    assert "a plain note" in text and "anchor:" not in text and "Image" not in text
    assert not [p for p in lint(example_palace) if p["path"].endswith("Outbox polling.md")]
    found = json.loads(run(example_palace, "search", "relay unsent rows", "--mode", "lexical", "--json").stdout)
    assert found["hits"][0]["id"] == "outbox-polling"
    backlinks = json.loads(run(example_palace, "backlinks", "saga-pattern", "--json").stdout)["backlinks"]
    assert "outbox-polling" in {b["id"] for b in backlinks}
    assert "outbox-polling" in (example_palace / "index/messaging-events.md").read_text()


def test_without_a_heading_the_subject_is_the_file_name():
    memory = parse_note("Just a few words.\n", "memories/d/Loose thought.md", "d")
    assert (memory.id, memory.subject, memory.content, memory.plain) == ("loose-thought", "Loose thought",
                                                                         "Just a few words.", True)


@pytest.mark.parametrize("text, message", [
    (" ---\nid: x\n---\n", "must start at the beginning"),             # a broken frontmatter stays an error
    ("<<<<<<< HEAD\n---\nid: x\n---\n=======\n---\nid: y\n---\n>>>>>>> b\n", "merge conflict"),
])
def test_a_broken_frontmatter_is_still_an_error(text, message):
    from palace_cli.errors import NoteError

    with pytest.raises(NoteError, match=message):
        parse_note(text, "memories/d/x.md", "d")


def test_a_plain_note_is_skipped_by_lint_fix_and_keeps_its_bytes(example_palace):
    note = example_palace / "memories/messaging-events/plain.md"
    note.write_bytes(b"# Plain\n\n## Image\nA walrus juggles seven neon teapots.\n")
    result = run(example_palace, "lint", "--fix")
    assert note.read_bytes() == b"# Plain\n\n## Image\nA walrus juggles seven neon teapots.\n"
    assert not [line for line in result.stdout.splitlines() if line.startswith("fixed: ") and "plain.md" in line]


# ---- .obsidian/ -------------------------------------------------------------------------------


def test_obsidian_settings_are_ignored_everywhere(example_palace):
    for folder in (example_palace / ".obsidian", example_palace / "memories/.obsidian"):
        folder.mkdir()
        (folder / "workspace.md").write_text("---\nid: workspace\nsubject: x\n---\n")
    memories = json.loads(run(example_palace, "list", "--json").stdout)["memories"]
    assert "workspace" not in {m["id"] for m in memories}
    assert not [p for p in lint(example_palace) if ".obsidian" in p["path"]]
    assert not relevant("memories/.obsidian/workspace.json") and not relevant(".obsidian/workspace.json")
    assert relevant("memories/d/note.md")


# ---- every word of the body is indexed ----------------------------------------------------------


def test_the_rest_of_the_body_is_everything_but_image_content_and_title():
    body = ("# Title\n\nintro words\n\n## Image\nimage words\n\n## Content\ncontent words\n\n## Links\n"
            "- [[a]]: a reason\n\n## Sources\nsource words\n\n```\n## Image\nfenced words\n```\n\ntext after\n")
    rest = rest_of_body(body)
    for words in ("intro words", "a reason", "Sources", "source words", "fenced words", "text after"):
        assert words in rest
    for words in ("Title", "image words", "content words"):
        assert words not in rest


def test_words_after_the_links_and_in_sections_of_your_own_are_found(example_palace):
    note = example_palace / SAGA
    note.write_text(note.read_text() + "\n## Field notes\nThe zanzibar booking incident.\n\ntrailing quokka remark\n")
    for query in ("zanzibar", "quokka remark", "zanzibar quokka"):
        found = json.loads(run(example_palace, "search", query, "--mode", "lexical", "--json").stdout)
        assert found["hits"] and found["hits"][0]["id"] == "saga-pattern", query
    links = example_palace / "memories/consensus-coordination/paxos.md"
    links.write_text(links.read_text().replace("\n## Links\n", "\n## Links\n- [[raft]]: the xylophone comparison\n"))
    reason = json.loads(run(example_palace, "search", "xylophone", "--mode", "lexical", "--json").stdout)
    assert [h["id"] for h in reason["hits"]] == ["paxos"]  # a link's reason is words you wrote too


def test_mv_of_a_plain_note_renames_its_file_and_the_links(example_palace):
    note = example_palace / "memories/messaging-events/Outbox polling.md"
    note.write_bytes(b"# Polling the outbox\n\nA relay reads unsent rows.\n")
    other = example_palace / SAGA
    other.write_text(other.read_text() + "\nSee [[Outbox polling]].\n")
    result = run(example_palace, "mv", "outbox-polling", "relay-polling")
    assert result.exit_code == 0, result.output
    assert (example_palace / "memories/messaging-events/relay-polling.md").read_bytes() == \
        b"# Polling the outbox\n\nA relay reads unsent rows.\n"
    assert "See [[relay-polling]]." in other.read_text()
    assert not [p for p in lint(example_palace) if p["code"] in ("broken-link", "duplicate-id")]
