"""Quick capture in a vault writes as the vault does (issue 32 item 7): a file named from the thought's first words,
spaces kept where the vault's names have them, the text once, no frontmatter and no template headings."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from palace_cli.cli import cli
from palace_cli.core.text import title_name
from palace_cli.palace import Palace

THOUGHT = "Rotate the API keys every 90 days, and tell the on-call team first."


def vault(root: Path, names: list[str]) -> Path:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"# {Path(name).stem}\n\nA note.\n")
    assert CliRunner().invoke(cli, ["init", str(root), "--no-git-setup"]).exit_code == 0
    return root


def add(root: Path, *args, input=None):
    result = CliRunner().invoke(cli, ["--palace", str(root), "add", *args], input=input, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_a_vault_named_by_title_gets_a_title_with_spaces_and_the_text_once(tmp_path):
    root = vault(tmp_path / "v", ["Garden/Watering schedule.md", "Garden/Tomato bed.md", "Home.md"])
    add(root, THOUGHT)
    path = root / "inbox" / "Rotate the API keys every 90 days, and tell the on-call.md"
    assert path.read_text() == THOUGHT + "\n"  # no frontmatter, no `# subject`, no `## Content`
    add(root, THOUGHT)
    assert (root / "inbox" / "Rotate the API keys every 90 days, and tell the on-call 2.md").read_text() == \
        THOUGHT + "\n"
    memory = Palace(root).memory("inbox/Rotate the API keys every 90 days, and tell the on-call.md")
    assert memory.content == THOUGHT and memory.domain == "inbox"


def test_a_vault_of_slugs_gets_a_slug(tmp_path):
    root = vault(tmp_path / "v", ["user/features/note-properties.md", "user/getting-started.md", "index.md"])
    add(root, "-", input="Link every daily note to its week\nand mention the sprint.\n")
    path = root / "inbox" / "link-every-daily-note-to-its-week.md"
    assert path.read_text() == "Link every daily note to its week\nand mention the sprint.\n"


def test_a_domain_is_its_folder_and_odd_characters_leave_the_name(tmp_path):
    root = vault(tmp_path / "v", ["Garden/Watering schedule.md"])
    add(root, "Idea: beds/rows need [[Watering schedule]] | twice?", "-d", "Garden")
    path = root / "Garden" / "Idea beds rows need Watering schedule twice.md"
    assert path.read_text() == "Idea: beds/rows need [[Watering schedule]] | twice?\n"


@pytest.mark.parametrize("text, name", [
    (THOUGHT, "Rotate the API keys every 90 days, and tell the on-call"),
    ("# A heading\nthen text", "A heading"),
    ("Café: 日記 #tag", "Café 日記 tag"),
    ("...", ""),
])
def test_title_name(text, name):
    assert title_name(text) == name
