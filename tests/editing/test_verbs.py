"""Everyday verbs: edit, rm, mv, backlinks, tags, open; add reading stdin and aborting on an unchanged template."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from palace_cli.cli import cli
from palace_cli.editing.editor import editor_command

TWO_PC = "memories/consensus-coordination/two-phase-commit.md"
SAGA = "memories/messaging-events/saga-pattern.md"
OUTBOX = "memories/messaging-events/transactional-outbox.md"


def run(palace_dir: Path, *args, env: dict | None = None, input: str | None = None):
    return CliRunner().invoke(cli, ["--palace", str(palace_dir), *[str(a) for a in args]], env=env, input=input,
                              catch_exceptions=False)


def script(folder: Path, name: str, body: str) -> str:
    """An executable that plays an editor (or an opener): argv is recorded, then `body` runs on the file."""
    path = folder / name
    path.write_text(f"#!{sys.executable}\nimport sys, re, json\nopen({str(folder / (name + '.argv'))!r}, 'w')"
                    f".write(json.dumps(sys.argv[1:]))\npath = sys.argv[-1]\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def git(root: Path, *args) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.com")
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True, env=env).stdout


# ---- edit ------------------------------------------------------------------------------------


@pytest.mark.parametrize("editor, expected", [
    ("vim", ["vim", "+12", "N"]), ("nano -w", ["nano", "-w", "+12", "N"]), ("/usr/bin/emacs", ["/usr/bin/emacs", "+12", "N"]),
    ("code --wait", ["code", "--wait", "-g", "N:12"]), ("subl -w", ["subl", "-w", "N:12"]), ("hx", ["hx", "N:12"]),
    ("kate", ["kate", "-l", "12", "N"]), ("my-editor --flag", ["my-editor", "--flag", "N"]),
])
def test_the_editor_opens_at_the_line_in_its_own_convention(editor, expected, monkeypatch):
    monkeypatch.setenv("EDITOR", editor)
    monkeypatch.delenv("VISUAL", raising=False)
    assert editor_command(Path("N"), 12) == expected


def test_visual_wins_over_editor(monkeypatch):
    monkeypatch.setenv("EDITOR", "nano")
    monkeypatch.setenv("VISUAL", "vim")
    assert editor_command(Path("N"), 3)[0] == "vim"


def test_edit_opens_the_note_at_its_line_and_refreshes(example_palace, tmp_path):
    vim = script(tmp_path, "vim", 'text = open(path).read().replace("## Content\\n", "## Content\\nA zeppelin of '
                                  'marmalade drifts past.\\n")\nopen(path, "w").write(text)')
    result = run(example_palace, "edit", "two-phase-commit", env={"EDITOR": vim, "VISUAL": ""})
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "vim.argv").read_text()) == ["+10", str(example_palace / TWO_PC)]
    assert "Saved: " + TWO_PC in result.stdout
    found = json.loads(run(example_palace, "search", "zeppelin marmalade", "--mode", "lexical", "--json").stdout)
    assert found["hits"][0]["id"] == "two-phase-commit"


def test_edit_at_a_given_line(readonly_example, tmp_path):
    vim = script(tmp_path, "vim", "")
    result = run(readonly_example, "edit", f"{TWO_PC}:17", env={"EDITOR": vim, "VISUAL": ""})
    assert result.exit_code == 0 and "Unchanged" in result.stdout
    assert json.loads((tmp_path / "vim.argv").read_text())[0] == "+17"


def test_edit_that_breaks_the_note_says_where(example_palace, tmp_path):
    vim = script(tmp_path, "vim", 'text = open(path).read().replace("subject: Two", "subject: [Two")\n'
                                  'open(path, "w").write(text)')
    result = run(example_palace, "edit", "two-phase-commit", env={"EDITOR": vim, "VISUAL": ""})
    assert result.exit_code == 1 and f"{TWO_PC}:4" in result.stderr and "cannot be read" in result.stderr


# ---- backlinks -------------------------------------------------------------------------------


def test_backlinks_by_id_file_name_alias_and_subject(example_palace):
    note = example_palace / OUTBOX
    note.write_text(note.read_text() + "\nSee also [[Saga Pattern]] and [[saga-pattern|the saga]] and "
                                       "[[memories/messaging-events/saga-pattern]].\n")
    data = json.loads(run(example_palace, "backlinks", "saga-pattern", "--json").stdout)
    found = {(b["id"], b["field"], b["target"]) for b in data["backlinks"]}
    assert ("two-phase-commit", "links", "saga-pattern") in found
    assert ("two-phase-commit", "body", "saga-pattern") in found
    assert {("transactional-outbox", "body", t) for t in
            ("Saga Pattern", "saga-pattern", "memories/messaging-events/saga-pattern")} <= found
    lines = {b["line"] for b in data["backlinks"] if b["id"] == "transactional-outbox" and b["field"] == "body"}
    assert len(note.read_text().splitlines()) in lines


def test_backlinks_table_never_cuts_a_path(readonly_example):
    result = run(readonly_example, "backlinks", "saga-pattern")
    assert result.exit_code == 0 and f"{TWO_PC}:7" in result.stdout.split()[2]


# ---- rm --------------------------------------------------------------------------------------


def test_rm_refuses_while_linked_and_names_the_links(example_palace):
    result = run(example_palace, "rm", "saga-pattern")
    assert result.exit_code == 1 and f"{TWO_PC}:7 (links)" in result.stderr and "--force" in result.stderr
    assert (example_palace / SAGA).exists()


def test_rm_of_an_unlinked_memory_keeps_its_review_history(example_palace):
    log = example_palace / "reviews" / "t.jsonl"
    log.write_text('{"v": 1, "id": "cap-theorem", "at": "2026-01-01T00:00:00Z", "rating": "good"}\n')
    before = log.read_bytes()
    assert json.loads(run(example_palace, "backlinks", "cap-theorem", "--json").stdout)["backlinks"] == []
    result = run(example_palace, "rm", "cap-theorem")
    assert result.exit_code == 0 and "1 review stay" in result.stderr
    assert not (example_palace / "memories/consensus-coordination/cap-theorem.md").exists()
    assert log.read_bytes() == before
    assert "cap-theorem" not in (example_palace / "index/consensus-coordination.md").read_text()
    git(example_palace, "checkout", "--", "memories")  # restored, its history is its own again
    due = json.loads(run(example_palace, "due", "--json").stdout)
    assert [i["id"] for i in due["items"]] == ["cap-theorem"]


def test_rm_force_removes_and_reports_the_broken_links(example_palace):
    result = run(example_palace, "rm", "saga-pattern", "--force", "--json")
    data = json.loads(result.stdout)
    assert result.exit_code == 0 and {b["path"] for b in data["broken_links"]} == {TWO_PC, OUTBOX}
    assert not (example_palace / SAGA).exists()
    lint = run(example_palace, "lint", "--json")
    assert {p["path"] for p in json.loads(lint.stdout)["problems"] if p["code"] == "broken-link"} == {TWO_PC, OUTBOX}


def test_rm_removes_a_folder_it_left_empty_unless_declared(tmp_path):
    root = tmp_path / "kb"
    CliRunner().invoke(cli, ["init", str(root)])
    run(root, "add", "Lonely", "-d", "scratch", "--image", "A lone owl.", "--content", "Facts.", "--no-edit")
    assert run(root, "rm", "lonely").exit_code == 0
    assert not (root / "memories/scratch").exists() and "scratch" not in run(root, "domains").stdout


# ---- mv --------------------------------------------------------------------------------------


def test_mv_renames_links_byte_exactly_and_reviews_follow(example_palace):
    log = example_palace / "reviews" / "t.jsonl"
    log.write_text('{"v": 1, "id": "saga-pattern", "at": "2026-01-01T00:00:00Z", "rating": "good"}\n')
    git(example_palace, "add", "-A")
    git(example_palace, "commit", "-qm", "a review")
    before = {p: (example_palace / p).read_bytes() for p in (TWO_PC, OUTBOX, SAGA)}
    log_before = log.read_bytes()
    result = run(example_palace, "mv", "saga-pattern", "saga", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["new_path"] == "memories/messaging-events/saga.md" and sorted(data["rewritten"]) == [TWO_PC, OUTBOX]
    for path in (TWO_PC, OUTBOX):  # only the link bytes changed
        after = (example_palace / path).read_bytes()
        assert after == before[path].replace(b"[[saga-pattern]]", b"[[saga]]").replace(
            b"links: [saga-pattern,", b"links: [saga,").replace(b", saga-pattern,", b", saga,")
    moved = (example_palace / "memories/messaging-events/saga.md").read_bytes()
    old = before[SAGA]
    assert moved == old.replace(b"id: saga-pattern\n", b"id: saga\n").replace(b"\n---\n# Saga", b"\nprevious_ids: [saga-pattern]\n---\n# Saga")
    assert not (example_palace / SAGA).exists()
    assert log.read_bytes() == log_before
    due = json.loads(run(example_palace, "due", "--json").stdout)
    assert [i["id"] for i in due["items"]] == ["saga"]  # the review of saga-pattern counts for saga
    assert "saga.md" in (example_palace / "index/messaging-events.md").read_text()
    lint = json.loads(run(example_palace, "lint", "--json").stdout)
    assert lint["errors"] == 0, lint["problems"]
    assert run(example_palace, "show", "saga-pattern").exit_code == 0  # the old id still names it


def test_mv_to_another_domain_keeps_links_by_id(example_palace):
    before = (example_palace / TWO_PC).read_bytes()
    result = run(example_palace, "mv", "saga-pattern", "--domain", "consensus")  # a prefix names the domain
    assert result.exit_code == 0, result.output
    assert (example_palace / "memories/consensus-coordination/saga-pattern.md").exists()
    assert (example_palace / TWO_PC).read_bytes() == before
    assert "saga-pattern" in (example_palace / "index/consensus-coordination.md").read_text()
    assert "saga-pattern" not in (example_palace / "index/messaging-events.md").read_text()


def test_mv_refuses_what_would_lose_or_guess(example_palace):
    assert "already used" in run(example_palace, "mv", "saga-pattern", "paxos").stderr
    typo = run(example_palace, "mv", "saga-pattern", "--domain", "mesaging-events")
    assert typo.exit_code == 1 and "did you mean messaging-events" in typo.stderr
    assert run(example_palace, "mv", "saga-pattern").exit_code == 2
    assert (example_palace / SAGA).exists()


def test_mv_keeps_crlf_and_a_bom(example_palace):
    path = example_palace / TWO_PC
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().replace(b"\n", b"\r\n"))
    assert run(example_palace, "mv", "saga-pattern", "saga").exit_code == 0
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf") and b"[[saga]]" in data and b"\n" not in data.replace(b"\r\n", b"")


# ---- tags ------------------------------------------------------------------------------------


def test_tags_are_keywords_and_obsidian_tags(example_palace):
    note = example_palace / SAGA
    note.write_text(note.read_text().replace("created:", "tags: [kafka, '#Workflow']\ncreated:"))
    data = json.loads(run(example_palace, "tags", "--json").stdout)
    by_name = {t["tag"]: t for t in data["tags"]}
    assert by_name["workflow"]["ids"] == ["saga-pattern"] and "saga-pattern" in by_name["kafka"]["ids"]
    counts = [t["count"] for t in data["tags"]]
    assert counts == sorted(counts, reverse=True)
    listed = run(example_palace, "list", "--tag", "#workflow")
    assert [line.split("\t")[0] for line in listed.stdout.splitlines()] == ["saga-pattern"]
    found = json.loads(run(example_palace, "search", "workflow", "--mode", "lexical", "--json").stdout)
    assert found["hits"][0]["id"] == "saga-pattern"


# ---- open ------------------------------------------------------------------------------------


def test_open_hands_the_note_to_the_system_opener(readonly_example, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script(bin_dir, "xdg-open", "")
    result = run(readonly_example, "open", "saga-pattern", env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert result.exit_code == 0, result.output
    assert json.loads((bin_dir / "xdg-open.argv").read_text()) == [str(readonly_example / SAGA)]
    shown = json.loads(run(readonly_example, "open", "saga-pattern", "--json").stdout)
    assert shown["path"] == SAGA and shown["file"] == str(readonly_example / SAGA)


# ---- add: stdin and the editor ---------------------------------------------------------------


@pytest.fixture
def kb(tmp_path) -> Path:
    CliRunner().invoke(cli, ["init", str(tmp_path / "kb")])
    return tmp_path / "kb"


def test_add_reads_content_or_image_from_stdin(kb):
    result = run(kb, "add", "Saga", "-d", "systems", "--image", "A kangaroo on roller skates.", "--content", "-",
                 "--no-edit", input="Compensating steps, in reverse order.\nSecond line.\n")
    assert result.exit_code == 0, result.output
    text = (kb / "memories/systems/saga.md").read_text()
    assert "## Content\nCompensating steps, in reverse order.\nSecond line.\n" in text and "\n-\n" not in text
    image = run(kb, "add", "Raft", "-d", "systems", "--image", "-", "--no-edit", input="Five rafts of owls.")
    assert image.exit_code == 0 and "## Image\nFive rafts of owls." in (kb / "memories/systems/raft.md").read_text()
    both = run(kb, "add", "Paxos", "-d", "systems", "--image", "-", "--content", "-", "--no-edit", input="x")
    assert both.exit_code == 2 and "only one option can read stdin" in both.output


def test_an_unchanged_template_aborts_and_leaves_nothing(kb, tmp_path):
    editor = script(tmp_path, "editor.py", "")
    before = sorted(p for p in kb.rglob("*") if ".palace" not in p.parts)
    result = run(kb, "add", "Untouched", "-d", "systems", "--edit", env={"EDITOR": editor, "VISUAL": ""})
    assert result.exit_code == 1 and "nothing added" in result.stderr
    assert sorted(p for p in kb.rglob("*") if ".palace" not in p.parts) == before
    edited_path = Path(json.loads((tmp_path / "editor.py.argv").read_text())[-1])
    assert not edited_path.exists() and not edited_path.parent.exists()  # the draft went with it


def test_the_editor_writes_the_note_before_it_exists_in_memories(kb, tmp_path):
    editor = script(tmp_path, "editor.py", f'''
import os
assert not os.path.exists({str(kb / "memories/systems")!r})
text = open(path).read()
text = re.sub(r"## Image\\n\\(.*?\\)\\n", "## Image\\nA walrus juggles seven neon teapots.\\n", text, flags=re.S)
text = re.sub(r"## Content\\n\\(.*?\\)\\n", "## Content\\nThe facts.\\n", text, flags=re.S)
open(path, "w").write(text)''')
    result = run(kb, "add", "Juggler", "-d", "systems", "--edit", env={"EDITOR": editor, "VISUAL": ""})
    assert result.exit_code == 0, result.output
    assert "A walrus juggles" in (kb / "memories/systems/juggler.md").read_text()


def test_a_domain_spelled_close_to_one_that_exists_is_refused_with_the_suggestion(example_palace):
    args = ("Quotient filter", "--image", "Eleven silver spoons sieve phantom peas.", "--content", "Facts.",
            "--no-edit")
    before = sorted(p.name for p in (example_palace / "memories").iterdir())
    typo = run(example_palace, "add", *args, "-d", "storge-engines")
    assert typo.exit_code == 1 and "did you mean storage-engines?" in typo.stderr and "--new-domain" in typo.stderr
    assert sorted(p.name for p in (example_palace / "memories").iterdir()) == before  # no folder, no note
    prefix = run(example_palace, "add", *args, "-d", "storag")  # the start of one domain's name names it
    assert prefix.exit_code == 0 and (example_palace / "memories/storage-engines/quotient-filter.md").exists()
    meant = run(example_palace, "add", "Skip list", *args[1:], "-d", "storge-engines", "--new-domain")
    assert meant.exit_code == 0 and (example_palace / "memories/storge-engines/skip-list.md").exists()


def test_show_of_a_misspelt_name_suggests_and_of_a_known_name_shows(readonly_example):
    assert "did you mean: bloom-filter?" in run(readonly_example, "show", "blom").stderr
    shown = json.loads(run(readonly_example, "show", "bloom filter", "--json").stdout)  # a subject, any case
    assert shown["id"] == "bloom-filter"


# ---- links resolve by id, path, file name, alias or subject ------------------------------------


def test_lint_resolves_links_by_every_name_and_refuses_to_guess(example_palace):
    note = example_palace / OUTBOX
    note.write_text(note.read_text() + "\n[[Saga Pattern]] [[saga-pattern.md]] [[Two-Phase Commit (2PC)]] "
                                       "[[messaging-events/saga-pattern]] [[No Such Thing]]\n")
    problems = json.loads(run(example_palace, "lint", "--json").stdout)["problems"]
    links = [(p["code"], p["message"]) for p in problems if p["path"] == OUTBOX and "link" in p["code"]]
    assert links == [("broken-link", "link to unknown memory 'No Such Thing'")]
    other = example_palace / "memories/messaging-events/copy.md"
    other.write_text((example_palace / TWO_PC).read_text().replace("id: two-phase-commit", "id: copy")
                     .replace("verify: mustard-yellow tuxedo", "verify: seven teal umbrellas"))
    problems = json.loads(run(example_palace, "lint", "--json").stdout)["problems"]
    ambiguous = [p for p in problems if p["code"] == "ambiguous-link"]
    assert [p["path"] for p in ambiguous] == [OUTBOX] and "(copy, two-phase-commit)" in ambiguous[0]["message"]


def test_a_misspelt_name_suggests_the_memory(readonly_example):
    result = run(readonly_example, "show", "blom")
    assert result.exit_code == 1 and "did you mean: bloom-filter?" in result.stderr
