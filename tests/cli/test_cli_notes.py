"""init, add, list, show, domains, lint and --palace through click's CliRunner: exit codes and output."""

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
from palace_cli.palace import Palace

from conftest import REPO


def run(*args, cwd: Path | None = None, env: dict | None = None, input: str | None = None):
    runner = CliRunner()
    old = Path.cwd()
    if cwd:
        os.chdir(cwd)
    try:
        return runner.invoke(cli, [str(a) for a in args], env=env, input=input, catch_exceptions=False)
    finally:
        os.chdir(old)


def editor(tmp_path: Path, body: str, name: str = "editor.py") -> str:
    """A small script that plays $EDITOR: it gets the note's path and rewrites the note."""
    script = tmp_path / name
    script.write_text(f"#!{sys.executable}\nimport sys, re\npath = sys.argv[-1]\ntext = open(path).read()\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


# ---- init ------------------------------------------------------------------------------------


def test_init_creates_a_palace_and_a_git_repo(tmp_path):
    result = run("init", tmp_path / "kb", "--name", "My KB")
    assert result.exit_code == 0 and "Created a palace" in result.stdout
    root = tmp_path / "kb"
    for name in ("palace.toml", "INDEX.md", "memories", "index", "reviews", ".gitignore", ".gitattributes", ".git"):
        assert (root / name).exists(), name
    assert ".palace/" in (root / ".gitignore").read_text().splitlines()
    assert "reviews/*.jsonl merge=union" in (root / ".gitattributes").read_text()
    assert 'name = "My KB"' in (root / "palace.toml").read_text()
    assert run("lint", root).exit_code == 0


def test_init_inside_a_repo_does_not_nest_one(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    assert run("init", tmp_path / "repo" / "kb").exit_code == 0
    assert not (tmp_path / "repo" / "kb" / ".git").exists()


def test_init_twice_fails_and_keeps_the_file(tmp_path):
    run("init", tmp_path / "kb")
    (tmp_path / "kb" / "palace.toml").write_text('[palace]\nname = "kept"\n')
    result = run("init", tmp_path / "kb")
    assert result.exit_code == 1 and "already a palace" in result.stderr
    assert "kept" in (tmp_path / "kb" / "palace.toml").read_text()


# ---- add -------------------------------------------------------------------------------------


@pytest.fixture
def kb(tmp_path) -> Path:
    run("init", tmp_path / "kb")
    return tmp_path / "kb"


SAGA = ["add", "Saga", "--domain", "distributed-systems", "--anchor", "relay race of apologies",
        "--image", "Runners pass a baton of apology letters; each who stumbles hands out lemon cakes.",
        "--content", "A long transaction split into local steps with compensations.",
        "--keywords", "saga,compensation", "--no-edit"]


def test_add_scriptable(kb):
    result = run(*SAGA, cwd=kb)
    assert result.exit_code == 0, result.output
    assert "Added saga at memories/distributed-systems/saga.md:10" in result.stdout
    token = result.stdout.split("verify token: ")[1].strip()
    text = (kb / "memories/distributed-systems/saga.md").read_text()
    assert f"verify: {token}" in text and "keywords: [saga, compensation]" in text
    assert "## Image\nRunners pass a baton" in text
    assert "Saga: saga, compensation → relay race of apologies" in (kb / "INDEX.md").read_text()  # refreshed
    assert (kb / ".palace").is_dir()


def test_add_json(kb):
    result = run(*SAGA, "--json", cwd=kb)
    data = json.loads(result.stdout)
    assert data["id"] == "saga" and data["path"] == "memories/distributed-systems/saga.md" and data["line"] == 10
    assert data["verify"] and data["token"].startswith("vt:")


def test_add_opens_the_editor_and_proposes_a_token_from_what_was_written(kb, tmp_path):
    script = editor(tmp_path, 'text = re.sub(r"## Image\\n\\(.*?\\)\\n", "## Image\\nA walrus juggles seven neon '
                              'teapots on a melting iceberg.\\n", text, flags=re.S)\nopen(path, "w").write(text)')
    result = run("add", "Two-Phase Commit", "--domain", "distributed-systems", "--edit", cwd=kb,
                 env={"EDITOR": script, "VISUAL": script})
    assert result.exit_code == 0, result.output
    note = (kb / "memories/distributed-systems/two-phase-commit.md").read_text()
    assert "A walrus juggles seven neon teapots" in note
    token = result.stdout.split("verify token: ")[1].strip()
    assert f"verify: {token}" in note and token in "a walrus juggles seven neon teapots on a melting iceberg"


def test_add_without_a_terminal_does_not_open_the_editor(kb, tmp_path):
    marker = tmp_path / "editor-ran"
    script = editor(tmp_path, f'open({str(marker)!r}, "w").write("x")')
    result = run("add", "Quiet", "--domain", "d", "--image", "A mime in a silent disco.", cwd=kb,
                 env={"EDITOR": script, "VISUAL": script})
    assert result.exit_code == 0 and not marker.exists()


def test_add_with_a_failing_editor_adds_nothing_when_the_template_is_unchanged(kb, tmp_path):
    script = editor(tmp_path, "sys.exit(3)")
    result = run("add", "Kept", "--domain", "d", "--edit", cwd=kb, env={"EDITOR": script, "VISUAL": script})
    assert result.exit_code == 1
    assert "exited with status 3" in result.stderr and "nothing added" in result.stderr
    assert not (kb / "memories/d").exists()


def test_add_with_a_failing_editor_keeps_a_note_given_in_full(kb, tmp_path):
    script = editor(tmp_path, "sys.exit(3)")
    result = run("add", "Kept", "--domain", "d", "--image", "A walrus on a bicycle.", "--content", "Facts.", "--edit",
                 cwd=kb, env={"EDITOR": script, "VISUAL": script})
    assert result.exit_code == 0 and "exited with status 3" in result.stderr
    assert (kb / "memories/d/kept.md").exists()


def test_add_when_the_edit_breaks_the_note(kb, tmp_path):
    script = editor(tmp_path, 'open(path, "w").write(text.replace("subject: Broken", "subject: [Broken"))')
    result = run("add", "Broken", "--domain", "d", "--edit", cwd=kb, env={"EDITOR": script, "VISUAL": script})
    assert result.exit_code == 1
    assert "saved but cannot be read" in result.stderr and "memories/d/broken.md:4" in result.stderr
    assert (kb / "memories/d/broken.md").exists()


@pytest.mark.parametrize("args, code, message", [
    (["add", "Saga", "--domain", "distributed-systems", "--no-edit"], 1, "already exists"),
    (["add", "-"], 2, "needs a subject"),  # nothing on stdin to capture
    (["add", "Other", "--domain", "d", "--id", "Bad Id", "--no-edit"], 2, "must be lowercase"),
    (["add", "   ", "--domain", "d", "--no-edit"], 2, "needs a subject"),
])
def test_add_errors(kb, args, code, message):
    run(*SAGA, cwd=kb)
    result = run(*args, cwd=kb)
    assert result.exit_code == code
    assert message in result.stderr
    if code == 1 or "--domain" not in message:  # ours are one line; click's usage errors add a usage hint
        assert len(result.stderr.splitlines()) == 1


def test_add_over_the_size_limit_writes_nothing(kb):
    def palace_files():  # the cache under .palace/ (rebuildable, ignored by git) may appear: it holds the write lock
        return sorted(p for p in kb.rglob("*") if ".palace" not in p.relative_to(kb).parts)

    before = palace_files()
    result = run("add", "Big", "--domain", "d", "--content", "x" * 1_000_001, "--no-edit", cwd=kb)
    assert result.exit_code == 1 and result.stderr.startswith("palace: memories/d/big.md: the note would be")
    assert len(result.stderr.splitlines()) == 1
    assert palace_files() == before


def test_add_removes_its_note_when_a_later_step_fails(kb, monkeypatch):
    import palace_cli.editing.authoring as authoring

    def fail(*args):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(authoring, "load_note", fail)  # the read-back after the write: a disk error
    outside_cache = lambda: sorted(p for p in kb.rglob("*") if ".palace" not in p.parts)  # noqa: E731
    before = outside_cache()
    with pytest.raises(OSError):
        authoring.add_memory(authoring.Palace(kb), "Saga", "distributed-systems", image="A relay of apologies.")
    assert outside_cache() == before


def test_add_uses_the_palace_template(kb):
    (kb / "templates").mkdir()
    (kb / "templates" / "memory.md").write_text(
        "---\nid: {id}\nsubject: {subject}\nsource: ''  # where I learnt it\nanchor: {anchor}\n---\n"
        "# {subject} ({domain})\n\n## Image\n(hint)\n\n## Content\n(hint)\n\n## Sources\n- \n")
    result = run("add", "Raft", "--domain", "consensus", "--anchor", "drummer on the river", "--image",
                 "A drummer in a red helmet pounds a steady beat.", "--no-edit", cwd=kb)
    assert result.exit_code == 0, result.output
    text = (kb / "memories/consensus/raft.md").read_text()
    assert text.startswith("---\nid: raft\nsubject: Raft\nsource: ''  # where I learnt it\nanchor: drummer on the river\n")
    assert "keywords: []\nverify: " in text and "# Raft (consensus)" in text and "## Sources\n- \n" in text


# ---- list, show, domains ---------------------------------------------------------------------


def test_list_and_filter(readonly_example):
    result = run("list", cwd=readonly_example)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert len(lines) == 89
    assert "raft\tRaft\tdrummer on the river\tmemories/consensus-coordination/raft.md:10" in lines
    only = run("list", "--domain", "storage-engines", "--json", cwd=readonly_example)
    data = json.loads(only.stdout)
    assert {m["domain"] for m in data["memories"]} == {"storage-engines"} and len(data["memories"]) == 15
    missing = run("list", "--domain", "nope", cwd=readonly_example)
    assert missing.exit_code == 1 and "no domain 'nope'" in missing.stderr


def test_one_broken_note_does_not_stop_the_others(example_palace):
    (example_palace / "memories/storage-engines/broken.md").write_text("---\nid: broken\nsubject: [\n---\n")
    listed = run("list", cwd=example_palace)
    assert listed.exit_code == 0 and len(listed.stdout.splitlines()) == 89
    assert "1 note problem hidden" in listed.stderr
    assert run("show", "raft", cwd=example_palace).exit_code == 0
    indexed = run("index", cwd=example_palace)
    assert indexed.exit_code == 0
    assert "Raft: consensus" in (example_palace / "INDEX.md").read_text()
    for command in (["search", "raft", "--mode", "lexical"], ["recall", "how does raft elect a leader?", "--json"]):
        searched = run(*command, cwd=example_palace)  # a note search cannot see is said on every search
        assert searched.exit_code == 0 and "1 note could not be indexed, so no search sees it" in searched.stderr
    shown = run("show", "memories/storage-engines/broken.md", cwd=example_palace)
    assert shown.exit_code == 1 and "memories/storage-engines/broken.md:3: frontmatter is not valid YAML" in shown.stderr
    linted = run("lint", cwd=example_palace)
    assert linted.exit_code == 1 and "memories/storage-engines/broken.md:3: error: frontmatter is not valid YAML" \
        in linted.stdout


@pytest.mark.parametrize("ref", ["raft", "Raft", "drummer on the river", "memories/consensus-coordination/raft.md:10"])
def test_show_prints_path_line(readonly_example, ref):
    result = run("show", ref, cwd=readonly_example)
    assert result.exit_code == 0
    assert result.stdout.splitlines()[:2] == ["Raft  (raft, consensus-coordination)",
                                              "memories/consensus-coordination/raft.md:10"]


def test_show_json_and_errors(readonly_example):
    data = json.loads(run("show", "paxos", "--json", cwd=readonly_example).stdout)
    assert data["id"] == "paxos" and data["image"] and data["content"] and data["line"] == 10
    near = run("show", "raft consensus", cwd=readonly_example)
    assert near.exit_code == 1 and near.stdout == "" and "did you mean: raft?" in near.stderr
    ambiguous = run("show", "consensus", cwd=readonly_example)
    assert ambiguous.exit_code == 1 and "paxos, raft" in ambiguous.stderr
    missing = run("show", "xyzzy", cwd=readonly_example)
    assert missing.exit_code == 1 and missing.stderr.startswith("palace: no memory 'xyzzy'")
    assert run("show", cwd=readonly_example).exit_code == 2


def test_show_prints_brackets_literally(kb):
    run("add", "Brackets [x]", "--domain", "d", "--anchor", "[bold]not bold[/bold]", "--image",
        "A [red] lamp hums beside [[paxos]].", "--content", "[/] is not markup.", "--no-edit", cwd=kb)
    result = run("show", "brackets-x", cwd=kb)
    assert result.exit_code == 0
    for text in ("Brackets [x]", "[bold]not bold[/bold]", "A [red] lamp hums beside [[paxos]].", "[/] is not markup."):
        assert text in result.stdout


def test_domains(readonly_example):
    data = json.loads(run("domains", "--json", cwd=readonly_example).stdout)
    counts = {d["domain"]: d["memories"] for d in data["domains"]}
    assert counts["consensus-coordination"] == 14 and sum(counts.values()) == 89
    assert "consensus" in next(d for d in data["domains"] if d["domain"] == "consensus-coordination")["aliases"]
    assert "consensus-coordination" in run("domains", cwd=readonly_example).stdout


# ---- lint ------------------------------------------------------------------------------------


def test_lint_example_palace_exits_0():
    result = run("lint", REPO / "example-palace")
    assert result.exit_code == 0, result.stdout
    assert "0 errors" in result.stdout


def test_lint_exit_codes_and_json(example_palace):
    note = example_palace / "memories/consensus-coordination/raft.md"
    note.write_text(note.read_text().replace("links: [paxos,", "links: [no-such-memory, paxos,"))
    result = run("lint", "--json", cwd=example_palace)
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert {"path": "memories/consensus-coordination/raft.md", "line": 7, "severity": "error", "code": "broken-link",
            "message": "link to unknown memory 'no-such-memory'", "fixable": False} in data["problems"]
    note.write_text(note.read_text().replace("no-such-memory, ", ""))
    assert run("lint", cwd=example_palace).exit_code == 0  # warnings only (smashin-weak)
    assert run("lint", "--strict", cwd=example_palace).exit_code == 1


def test_lint_fix(example_palace):
    note = example_palace / "memories/consensus-coordination/raft.md"
    note.write_text(note.read_text().replace("verify: ", "verify: \n# was: "))
    result = run("lint", "--fix", cwd=example_palace)
    assert result.exit_code == 0, result.stdout
    assert "fixed: memories/consensus-coordination/raft.md: proposed a verify token" in result.stdout
    assert "fixed: index/consensus-coordination.md: regenerated" in result.stdout
    assert run("lint", cwd=example_palace).exit_code == 0


# ---- finding the palace ----------------------------------------------------------------------


def test_outside_a_palace_says_so_in_one_line(tmp_path):
    result = run("list", cwd=tmp_path)
    assert result.exit_code == 1
    assert result.stderr.startswith("palace: not inside a palace") and len(result.stderr.splitlines()) == 1


def test_palace_option_and_env(readonly_example, tmp_path):
    by_option = run("--palace", readonly_example, "show", "raft", cwd=tmp_path)
    by_env = run("show", "raft", cwd=tmp_path, env={"PALACE_DIR": str(readonly_example)})
    assert by_option.exit_code == by_env.exit_code == 0 and by_option.stdout == by_env.stdout
    wrong = run("--palace", tmp_path, "list", cwd=readonly_example)
    assert wrong.exit_code == 1 and "is not a palace" in wrong.stderr


def test_from_a_subdirectory(readonly_example):
    result = run("show", "raft", cwd=readonly_example / "memories" / "storage-engines")
    assert result.exit_code == 0 and "raft.md:10" in result.stdout


def test_every_bad_file_at_once_leaves_the_rest_working(messy, bad_files, odd_files, readable_ids, note_bytes):
    listed = run("list", "--json", cwd=messy)
    assert listed.exit_code == 0
    assert sorted(m["id"] for m in json.loads(listed.stdout)["memories"]) == readable_ids
    assert run("show", "beta", cwd=messy).exit_code == 0
    before = note_bytes(messy)
    indexed = run("index", cwd=messy)
    assert indexed.exit_code == 0, indexed.output
    assert "- Beta → an odd hook" in (messy / "INDEX.md").read_text()
    linted = run("lint", "--fix", cwd=messy)
    assert linted.exit_code == 1
    for relpath, _data, code, line in bad_files:
        where = f"{relpath}:{line}" if line else relpath
        assert f"{where}: " in linted.stdout and f"[{code}]" in linted.stdout, (relpath, code)
    for relpath, code in odd_files:
        assert any(line.startswith(f"{relpath}: ") and line.endswith(f"[{code}]") for line in linted.stdout.splitlines())
    assert note_bytes(messy) == before
    assert "new\nline" not in (messy / "index" / "d.md").read_text()


def test_add_without_an_image_writes_a_plain_note_at_once(kb):
    result = run("add", "Raft", "--domain", "consensus", "--content", "Leader election.", "--no-edit", cwd=kb)
    assert result.exit_code == 0, result.output
    assert "Added raft at memories/consensus/raft.md" in result.output and "not citable" in result.output
    memory = Palace(kb).memory("raft")
    assert (memory.subject, memory.content, memory.verify, memory.plain) == ("Raft", "Leader election.", "", True)


def test_quick_capture_from_stdin_goes_to_the_inbox(kb):
    thought = "Rotate the API keys every 90 days, and tell the on-call team first.\nThe vault has the runbook."
    result = run("add", "-", input=thought, cwd=kb)
    assert result.exit_code == 0, result.output
    path = kb / "memories" / "inbox" / "rotate-the-api-keys-every-90-days-and-tell-the-on-call.md"
    assert f"Added rotate-the-api-keys-every-90-days-and-tell-the-on-call at {path.relative_to(kb)}" in result.output
    memory = Palace(kb).memory("rotate-the-api-keys-every-90-days-and-tell-the-on-call")
    assert memory.subject == "Rotate the API keys every 90 days, and tell the on-call…"
    assert memory.content == thought and memory.domain == "inbox"
    again = run("add", "-", input=thought, cwd=kb)  # the same thought twice: a second note, never over the first
    assert again.exit_code == 0 and "-2 at memories/inbox/" in again.output


def test_add_without_an_anchor_proposes_one_from_the_image_apart_from_the_token(kb):
    result = run("add", "Raft", "--domain", "consensus", "--image", "Five rafts of owls drift past a lighthouse "
                 "while a drummer in a red helmet pounds a steady beat.", "--content", "Leader election.",
                 "--no-edit", cwd=kb)
    assert result.exit_code == 0, result.output
    memory = Palace(kb).memory("raft")
    assert memory.anchor and memory.verify and memory.verify not in memory.anchor and memory.anchor not in memory.verify
    assert memory.anchor.lower() in memory.image.lower()
    assert f"anchor: {memory.anchor} (proposed from the image" in result.output
    report = json.loads(run("lint", "--json", cwd=kb).output)
    assert report["errors"] == 0, report


def test_arguments_that_are_not_utf8_and_the_first_day_are_one_line(example_palace):
    """Issue 34 row 15: `palace add` with a byte that is not UTF-8 (a shell in latin-1), on the command line or on
    stdin, is one line and writes nothing (a UnicodeEncodeError traceback); `consolidate --as-of 0001-01-01`
    answers (an OverflowError traceback)."""
    palace = [sys.executable, "-c", "from palace_cli.cli import main; main()", "--palace", str(example_palace)]
    before = sorted(p.relative_to(example_palace) for p in (example_palace / "memories").rglob("*.md"))
    for args, stdin in (([b"add", b"Caf\xe9 rules", b"-d", b"distributed", b"--no-edit"], None),
                        ([b"add", b"Cafe rules", b"-d", b"distributed", b"--content", b"caf\xe9", b"--no-edit"], None),
                        ([b"add", b"-", b"-d", b"distributed", b"--no-edit"], b"Caf\xe9 rules\n")):
        done = subprocess.run([*palace, *args], input=stdin, capture_output=True, timeout=300)
        err = done.stderr.decode("utf-8")
        assert done.returncode in (1, 2) and "Traceback" not in err and err.count("\n") == 1, err
        assert "not UTF-8" in err and "0xe9" in err
    assert sorted(p.relative_to(example_palace) for p in (example_palace / "memories").rglob("*.md")) == before
    done = subprocess.run([*palace, "consolidate", "--as-of", "0001-01-01"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
