"""Imports redact secrets and drop <private> spans before anything is written (sessions and notes), say how many,
and keep them with --keep-secrets; quick capture (`palace add`) redacts too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from conversation_fixtures import claude_code_lines, write_claude_code
from palace_cli.cli import cli
from palace_cli.editing.authoring import add_note, init_palace
from palace_cli.importers import import_path
from palace_cli.palace import Palace

KEY = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e"
SAID = f"Here is the key {KEY} and <private>my salary is 90k</private>; deploy with postgres://app:s3cr3t-pw@db/prod"


@pytest.fixture
def empty(tmp_path) -> Palace:
    return Palace(init_palace(tmp_path / "p", name="Secrets"))


def transcript(tmp_path: Path) -> Path:
    lines = claude_code_lines()
    record = json.loads(lines[2])
    assert record["uuid"] == "u1"
    record["message"]["content"] = SAID
    lines[2] = json.dumps(record)
    return write_claude_code(tmp_path / "project", lines)


def written(palace: Palace) -> str:
    return "".join(p.read_text() for p in sorted((palace.root / "conversations").rglob("*.md")))


def test_a_session_is_written_without_its_secrets_and_says_how_many(empty, tmp_path):
    source = transcript(tmp_path)
    report = import_path(empty, source.parent)
    text = written(empty)
    assert report.redacted == 3 and report.as_dict()["redacted"] == 3
    assert KEY not in text and "s3cr3t-pw" not in text and "salary" not in text
    assert "Here is the key [redacted] and ; deploy with postgres://app:[redacted]@db/prod" in text
    again = import_path(empty, source.parent)
    assert again.counts()["skipped"] == 1 and written(empty) == text  # a rerun changes nothing


def test_keep_secrets_keeps_them(empty, tmp_path):
    report = import_path(empty, transcript(tmp_path).parent, keep_secrets=True)
    assert report.redacted == 0 and KEY in written(empty) and "<private>my salary is 90k</private>" in written(empty)


def test_the_cli_reports_the_count_and_takes_keep_secrets(tmp_path):
    root = init_palace(tmp_path / "p", name="Secrets")
    source = transcript(tmp_path).parent
    done = CliRunner().invoke(cli, ["--palace", str(root), "import", str(source), "--dry-run"])
    assert done.exit_code == 0 and "3 secrets redacted before writing" in done.stdout
    kept = CliRunner().invoke(cli, ["--palace", str(root), "import", str(source), "--keep-secrets", "--json"])
    assert json.loads(kept.stdout)["redacted"] == 0 and KEY in written(Palace(root))


def test_imported_notes_are_written_without_their_secrets(empty, tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "deploy.md").write_text(f"# Deploy\n\nThe token is ghp_0123456789abcdefghijABCDEFGHIJ012345.\n"
                                      "<private>Call Ada at home.</private>\nRun `make deploy`.\n")
    report = import_path(empty, folder, format="markdown")
    note = next((empty.root / "memories").rglob("deploy*.md")).read_text()
    assert report.redacted == 2 and "ghp_" not in note and "Ada" not in note and "The token is [redacted]." in note
    assert "Run `make deploy`." in note


def test_quick_capture_writes_no_secret(empty):
    memory = add_note(empty, f"Staging key {KEY} for the demo")
    text = (empty.root / memory.path).read_text()
    assert KEY not in text and "Staging key [redacted] for the demo" in text


def test_quick_capture_in_an_adopted_vault_writes_no_secret(tmp_path):
    vault = tmp_path / "vault"
    (vault / "Garden").mkdir(parents=True)
    (vault / "Garden" / "Watering schedule.md").write_text("# Watering schedule\n\nWater at dawn.\n")
    done = CliRunner().invoke(cli, ["init", str(vault)], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    memory = add_note(Palace(vault), f"Staging key {KEY} for the demo")
    text = (vault / memory.path).read_text()
    assert KEY not in text and "Staging key [redacted] for the demo" in text and KEY not in memory.path


PASSWORD = "Tr0ub4dor&3xyz"
SAID_IN_WORDS = {  # the user trial's turns: a password said in plain words, once as the session's first prompt
    "u1": f"ok also the redis password is {PASSWORD} and my github token ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "u4": f"We decided to use Redis with password {PASSWORD} for the session cache, because Memcached cannot persist. "
          "We decided to run the clock tests with a frozen clock, because the CI runners drift by minutes.",
}


def said_in_words(tmp_path: Path) -> Path:
    """The fixture session without its summary (its title is then the first prompt), its turns u1 and u4 said."""
    lines = [line for line in claude_code_lines() if '"type": "summary"' not in line]
    for n, line in enumerate(lines):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # the torn line
        if record.get("uuid") in SAID_IN_WORDS:
            record["message"]["content"] = SAID_IN_WORDS[record["uuid"]]
            lines[n] = json.dumps(record)
    return write_claude_code(tmp_path / "project", lines)


def test_a_password_said_in_words_is_in_no_file_after_import_and_distill(empty, tmp_path):
    from palace_cli.memory.distill import distill
    report = import_path(empty, said_in_words(tmp_path).parent)
    assert report.redacted == 5  # the password and the token in the title and in u1, the password in u4
    session = next((empty.root / "conversations").rglob("*.md"))
    assert "password-is-redacted" in session.name and "the redis password is [redacted]" in session.read_text()
    done = distill(empty)
    assert done.written and all("clock" in m["subject"].lower() for m in done.written)  # distill ran and wrote
    for path in sorted(p for p in empty.root.rglob("*") if p.is_file()):  # notes, INDEX.md, indexes, sqlite, git
        data = path.read_bytes()
        assert PASSWORD.encode() not in data and b"tr0ub4dor" not in data.lower(), path


def test_quick_capture_redacts_a_password_said_in_words(empty):
    memory = add_note(empty, f"The staging redis password is {PASSWORD} until Friday")
    text = (empty.root / memory.path).read_text()
    assert PASSWORD not in text and "tr0ub4dor" not in memory.path.lower()
    assert "The staging redis password is [redacted] until Friday" in text
