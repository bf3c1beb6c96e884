"""A note that has not opted into palace's template is the person's alone (issue 32 item 3): lint checks its links
and structure only, `lint --fix` and the editor's quick fix never write into it, and study says how to opt in."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from palace_cli.cli import cli
from palace_cli.editing.lint import lint_note_text
from palace_cli.palace import Palace

PHOTO = ("---\ntags: [photo]\n---\n# Harbour at dusk\n\nShot on the old pier. See [[Nowhere note]].\n\n"
         "## Image\nSeven copper gulls juggle lanterns above a violet ferry.\n")
CARD = ("---\nverify:\n---\n# Lighthouse card\n\n## Image\nA giant brass owl polishes the lighthouse lens with "
        "marmalade every midnight.\n")


def run(root: Path, *args) -> dict:
    result = CliRunner().invoke(cli, ["--palace", str(root), *args, "--json"], catch_exceptions=False)
    return json.loads(result.stdout)


def make(root: Path, files: dict[str, str]) -> Path:
    for relpath, text in files.items():
        (root / relpath).parent.mkdir(parents=True, exist_ok=True)
        (root / relpath).write_text(text)
    assert CliRunner().invoke(cli, ["init", str(root), "--no-git-setup"]).exit_code == 0
    return root


def test_lint_checks_a_plain_note_for_links_and_structure_only_and_fix_never_writes_it(tmp_path):
    root = make(tmp_path / "vault", {"Photos/Harbour.md": PHOTO, "Cards/Lighthouse.md": CARD})
    report = run(root, "lint")
    harbour = {p["code"] for p in report["problems"] if p["path"] == "Photos/Harbour.md"}
    assert harbour == {"broken-link"}  # no anchor, token, section or SMASHIN warnings on an ordinary note
    card = {p["code"] for p in report["problems"] if p["path"] == "Cards/Lighthouse.md"}
    assert "token-missing" in card  # `verify:` opted it in: its template is checked
    fixed = run(root, "lint", "--fix")["fixed"]
    assert "Cards/Lighthouse.md: proposed a verify token" in fixed
    assert (root / "Photos/Harbour.md").read_text() == PHOTO
    assert (root / "Cards/Lighthouse.md").read_text() != CARD


def test_a_palace_toml_rule_opts_notes_in_and_study_says_how(tmp_path):
    root = make(tmp_path / "vault", {"Photos/Harbour.md": PHOTO})
    gaps = [p for p in run(root, "lint", "--study")["problems"] if p["code"] == "study-gap"]
    assert len(gaps) == 1 and "add `verify:` to its frontmatter" in gaps[0]["message"]
    config = root / "palace.toml"
    config.write_text(config.read_text().replace("[notes]\n", '[notes]\ntemplate = ["Photos/**"]\n'))
    codes = {p["code"] for p in run(root, "lint")["problems"] if p["path"] == "Photos/Harbour.md"}
    assert {"missing-field", "token-missing"} <= codes
    run(root, "lint", "--fix")
    assert "verify: " in (root / "Photos/Harbour.md").read_text()


def test_the_editor_offers_no_token_for_a_plain_note(tmp_path):
    root = make(tmp_path / "vault", {"Photos/Harbour.md": PHOTO, "Cards/Lighthouse.md": CARD})
    palace = Palace(root)
    assert {p.code for p in lint_note_text(palace, "Photos/Harbour.md", PHOTO)} == {"broken-link"}
    assert "token-missing" in {p.code for p in lint_note_text(palace, "Cards/Lighthouse.md", CARD)}


def test_evolve_says_how_to_opt_a_note_in(tmp_path):
    root = make(tmp_path / "vault", {"Photos/Harbour.md": PHOTO, "Cards/Lighthouse.md": CARD})
    plain = CliRunner().invoke(cli, ["--palace", str(root), "evolve", "Photos/Harbour.md"], catch_exceptions=False)
    assert "palace writes nothing into Photos/Harbour.md: add `verify:` to its frontmatter" in plain.output
    assert run(root, "evolve", "Photos/Harbour.md")["opted_in"] is False
    card = CliRunner().invoke(cli, ["--palace", str(root), "evolve", "Cards/Lighthouse.md"], catch_exceptions=False)
    assert card.exit_code == 0 and "palace writes nothing" not in card.output
