"""Real git: branches that add, edit and move notes merge without a conflict in generated files; the hooks run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from palace_cli.editing import gitsetup
from palace_cli.cli import cli
from palace_cli.index.files import render_all
from palace_cli.index.merge import merge_generated
from palace_cli.palace import Palace

from conftest import REPO

pytestmark = pytest.mark.skipif(not (Path(sys.executable).parent / "palace").exists(),
                                reason="the palace console script (which git's hooks call) is not installed")
ENV = dict(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
           GIT_COMMITTER_EMAIL="t@example.com", GIT_CONFIG_NOSYSTEM="1")


def git(root: Path, *args, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, env=dict(os.environ, **ENV))
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done


def palace(root: Path, *args, input=None):
    return CliRunner().invoke(cli, ["--palace", str(root), *[str(a) for a in args]], input=input,
                              catch_exceptions=False)


def add(root: Path, subject: str, domain: str, image: str, content: str = "Facts.", **options) -> None:
    extra = [x for key, value in options.items() for x in (f"--{key}", value)]
    result = palace(root, "add", subject, "-d", domain, "--anchor", f"{subject.lower()} hook", "--image", image,
                    "--content", content, "--no-edit", *extra)
    assert result.exit_code == 0, result.output


def commit(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-qm", message)


def generated(root: Path) -> dict[str, str]:
    files = {"INDEX.md": (root / "INDEX.md").read_text()}
    files.update({f"index/{p.name}": p.read_text() for p in sorted((root / "index").glob("*.md"))})
    return files


def expected(root: Path) -> dict[str, str]:
    """What the notes on disk produce, parsed afresh (no cache)."""
    from palace_cli.core.notefile import load_note
    from palace_cli.core.layout import Scan

    p = Palace(root)
    scan = Scan()
    for note_file in p.note_files():
        memory = load_note(root, note_file.relpath, note_file.domain)
        scan.memories.setdefault(memory.id, memory)
    return render_all(p.site, scan)


@pytest.fixture
def repo(example_palace) -> Path:
    """The example palace in git, set up by `palace git setup`, with the setup committed."""
    result = palace(example_palace, "git", "setup")
    assert result.exit_code == 0, result.output
    commit(example_palace, "palace git setup")
    return example_palace


def two_branches(root: Path) -> None:
    """`ours` adds a note and edits one; `theirs` adds two notes (one in the same domain), edits and moves others."""
    git(root, "checkout", "-qb", "theirs")
    add(root, "Quotient Filter", "storage-engines", "A sieve of eleven silver spoons catches phantom peas.",
        keywords="quotient,probabilistic")
    add(root, "Hybrid Logical Clock", "consensus-coordination", "Nine cuckoo clocks argue over a tangerine.")
    note = root / "memories/storage-engines/b-tree.md"
    note.write_text(note.read_text().replace("anchor: ", "anchor: tall ", 1))
    assert palace(root, "mv", "saga-pattern", "saga").exit_code == 0
    assert palace(root, "mv", "cap-theorem", "--domain", "partitioning-replication").exit_code == 0
    commit(root, "theirs")
    git(root, "checkout", "-q", "-")
    add(root, "Skip List", "storage-engines", "Seventeen kangaroos hop over lanterns on stacked shelves.",
        keywords="skiplist")
    note = root / "memories/storage-engines/lsm-tree.md"
    note.write_text(note.read_text().replace("keywords: [", "keywords: [compaction-debt, ", 1))
    assert palace(root, "index").exit_code == 0
    commit(root, "ours")


# ---- setup ----------------------------------------------------------------------------------


def test_init_sets_up_git_and_setup_is_idempotent(tmp_path):
    root = tmp_path / "kb"
    assert CliRunner().invoke(cli, ["init", str(root)]).exit_code == 0
    attributes = (root / ".gitattributes").read_text().splitlines()
    assert attributes == ["reviews/*.jsonl merge=union", "INDEX.md merge=palace-index", "index/*.md merge=palace-index"]
    assert (root / ".gitignore").read_text().splitlines() == [".palace/", ".*.tmp"]  # only what palace generates
    assert "palace-merge %O %A %B %P" in git(root, "config", "merge.palace-index.driver").stdout
    hook = root / ".git/hooks/pre-merge-commit"
    assert hook.exists() and os.access(hook, os.X_OK)
    again = palace(root, "git", "setup")
    assert again.exit_code == 0 and again.stdout.strip() == "Already set up."


def test_setup_ignores_temp_files_in_a_palace_made_before_they_were(tmp_path):
    root = tmp_path / "kb"
    assert CliRunner().invoke(cli, ["init", str(root)]).exit_code == 0
    ignore = root / ".gitignore"
    ignore.write_text("# mine\n.palace/\n")
    done = palace(root, "git", "setup")
    assert done.exit_code == 0 and ".gitignore: .*.tmp" in done.stdout
    assert ignore.read_text().splitlines() == ["# mine", ".palace/", ".*.tmp"]
    (root / "memories" / ".x.md.123.abc.tmp").write_text("half a note")
    assert git(root, "check-ignore", "memories/.x.md.123.abc.tmp").returncode == 0


def test_setup_leaves_a_foreign_hook_alone(repo):
    hook = repo / ".git/hooks/pre-commit"
    hook.write_text("#!/bin/sh\nmy-own-checks\n")
    result = palace(repo, "git", "setup", "--hook")
    assert result.exit_code == 0 and "not palace's" in result.stderr and "index --check" in result.stderr
    assert hook.read_text() == "#!/bin/sh\nmy-own-checks\n"


def test_setup_outside_a_repository_says_so(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    (root / "palace.toml").write_text('[palace]\nname = "x"\n')
    result = palace(root, "git", "setup")
    assert result.exit_code == 1 and "not in a git repository" in result.stderr


# ---- merges ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_branches_adding_editing_and_moving_notes_merge_without_conflict(repo):
    two_branches(repo)
    merged = git(repo, "merge", "--no-edit", "theirs")
    assert "CONFLICT" not in merged.stdout + merged.stderr
    assert git(repo, "status", "--porcelain").stdout == ""  # the hook staged the regenerated files into the merge
    assert generated(repo) == expected(repo)
    assert palace(repo, "index", "--check").exit_code == 0
    for path in ("memories/storage-engines/quotient-filter.md", "memories/storage-engines/skip-list.md",
                 "memories/messaging-events/saga.md", "memories/partitioning-replication/cap-theorem.md"):
        assert (repo / path).exists(), path
    assert "[[saga]]" in (repo / "memories/consensus-coordination/two-phase-commit.md").read_text()
    assert json.loads(palace(repo, "lint", "--json").stdout)["errors"] == 0


@pytest.mark.slow
def test_when_the_line_merge_is_not_exact_the_hook_stops_the_merge_for_git_commit(repo):
    note = repo / "memories/storage-engines/b-tree.md"
    git(repo, "checkout", "-qb", "theirs")
    note.write_text(note.read_text().replace("keywords: [", "keywords: [fanout, ", 1))
    assert palace(repo, "index").exit_code == 0
    commit(repo, "theirs")
    git(repo, "checkout", "-q", "-")
    note.write_text(note.read_text().replace("subject: B-Tree", "subject: B-Tree (balanced)", 1))
    assert palace(repo, "index").exit_code == 0
    commit(repo, "ours")
    # Both edited one memory (lines of its note apart, which merge): INDEX.md gets both versions of its line.
    stopped = git(repo, "merge", "--no-edit", "theirs", check=False)
    assert stopped.returncode != 0 and "CONFLICT" not in stopped.stdout
    assert "git commit --no-edit" in stopped.stderr
    git(repo, "commit", "--no-edit")
    assert git(repo, "status", "--porcelain").stdout == ""
    assert len(git(repo, "log", "-1", "--format=%P").stdout.split()) == 2  # the merge commit
    lines = [line for line in git(repo, "show", "HEAD:INDEX.md").stdout.splitlines() if line.startswith("- B-Tree")]
    assert len(lines) == 1 and "fanout" in lines[0] and lines[0].startswith("- B-Tree (balanced):")
    assert generated(repo) == expected(repo)


@pytest.mark.slow
def test_the_driver_alone_merges_cleanly_and_the_next_command_makes_it_exact(repo):
    (repo / ".git/hooks/pre-merge-commit").unlink()
    two_branches(repo)
    merged = git(repo, "merge", "--no-edit", "theirs")
    assert "CONFLICT" not in merged.stdout + merged.stderr
    ours_domain = generated(repo)["index/storage-engines.md"]
    assert ours_domain == expected(repo)["index/storage-engines.md"]  # a domain index merges exactly
    palace(repo, "list")  # any command's refresh regenerates what the line merge could not order
    assert generated(repo) == expected(repo)


@pytest.mark.slow
def test_a_rebase_replays_without_conflict(repo):
    two_branches(repo)
    git(repo, "checkout", "-q", "theirs")
    rebased = git(repo, "rebase", "-q", "master" if git(repo, "rev-parse", "--verify", "-q", "master",
                                                      check=False).returncode == 0 else "main", check=False)
    assert rebased.returncode == 0, rebased.stdout + rebased.stderr
    palace(repo, "index")
    assert generated(repo) == expected(repo)


@pytest.mark.slow
def test_without_palace_the_driver_falls_back_to_a_union_merge(repo, monkeypatch):
    monkeypatch.setattr(gitsetup, "_palace_commands", lambda: ["palace-is-not-installed"])
    assert palace(repo, "git", "setup").exit_code == 0
    (repo / ".git/hooks/pre-merge-commit").unlink()
    two_branches(repo)
    merged = git(repo, "merge", "--no-edit", "theirs")
    assert "CONFLICT" not in merged.stdout + merged.stderr and "palace not found" in merged.stderr
    check = palace(repo, "index", "--check")
    assert check.exit_code == 1 and "out of date" in check.stdout
    palace(repo, "index")
    assert palace(repo, "index", "--check").exit_code == 0


def test_a_file_of_your_own_in_index_conflicts_as_usual(repo):
    own = repo / "index/notes-to-self.md"
    own.write_text("# mine\n\nline\n")
    commit(repo, "mine")
    git(repo, "checkout", "-qb", "other")
    own.write_text("# mine\n\ntheirs\n")
    commit(repo, "theirs")
    git(repo, "checkout", "-q", "-")
    own.write_text("# mine\n\nours\n")
    commit(repo, "ours")
    merged = git(repo, "merge", "--no-edit", "other", check=False)
    assert merged.returncode != 0 and "CONFLICT" in merged.stdout
    assert "<<<<<<< ours" in own.read_text()


@pytest.mark.slow
def test_review_logs_merge_by_union(repo):
    log = repo / "reviews/t.jsonl"
    log.write_text('{"v": 1, "id": "paxos", "at": "2026-01-01T00:00:00Z", "rating": "good"}\n')
    commit(repo, "a review")
    git(repo, "checkout", "-qb", "laptop")
    with log.open("a") as handle:
        handle.write('{"v": 1, "id": "raft", "at": "2026-01-02T00:00:00Z", "rating": "hard"}\n')
    commit(repo, "laptop review")
    git(repo, "checkout", "-q", "-")
    with log.open("a") as handle:
        handle.write('{"v": 1, "id": "saga-pattern", "at": "2026-01-03T00:00:00Z", "rating": "easy"}\n')
    commit(repo, "desktop review")
    assert git(repo, "merge", "--no-edit", "laptop").returncode == 0
    assert {json.loads(line)["id"] for line in log.read_text().splitlines()} == {"paxos", "raft", "saga-pattern"}


# ---- the check and the pre-commit hook -------------------------------------------------------


def test_check_compares_with_the_notes_never_the_cache(repo, tmp_path):
    palace(repo, "index")
    note = repo / "memories/storage-engines/b-tree.md"
    note.write_text(note.read_text() + "\nOne more sentence at the end of the body.\n")
    assert palace(repo, "index", "--check").exit_code == 0  # a body-only edit changes no index line
    note.write_text(note.read_text().replace("anchor: ", "anchor: tall ", 1))
    check = palace(repo, "index", "--check")
    assert check.exit_code == 1 and "index/storage-engines.md: generated index file out of date" in check.stdout
    git(repo, "checkout", "--", ".")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    assert not (clone / ".palace").exists()
    assert palace(clone, "index", "--check").exit_code == 0


@pytest.mark.slow
def test_the_pre_commit_hook_refuses_stale_index_files(repo):
    assert palace(repo, "git", "setup", "--hook").exit_code == 0
    note = repo / "memories/storage-engines/b-tree.md"
    note.write_text(note.read_text().replace("anchor: ", "anchor: tall ", 1))
    git(repo, "add", "-A")
    refused = git(repo, "commit", "-qm", "edited", check=False)
    assert refused.returncode != 0 and "out of date" in refused.stdout + refused.stderr
    palace(repo, "index")
    git(repo, "add", "-A")
    assert git(repo, "commit", "-qm", "edited", check=False).returncode == 0


# ---- the line merge itself -------------------------------------------------------------------


def test_merging_a_generated_file_with_itself_changes_nothing(readonly_example):
    for text in generated(readonly_example).values():
        assert merge_generated(text, text, text) == text


def test_the_pre_commit_framework_hook_runs_the_check(example_palace):
    import yaml

    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert [h["id"] for h in hooks] == ["palace-index-check"] and hooks[0]["pass_filenames"] is False
    entry = hooks[0]["entry"].split()
    assert entry[0] == "palace"
    ok = subprocess.run([str(Path(sys.executable).parent / "palace"), *entry[1:]], cwd=example_palace,
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    (example_palace / "INDEX.md").write_text("scribbled\n")
    stale = subprocess.run([str(Path(sys.executable).parent / "palace"), *entry[1:]], cwd=example_palace,
                           capture_output=True, text=True)
    assert stale.returncode == 1 and "INDEX.md: generated index file out of date" in stale.stdout


@pytest.mark.slow
def test_a_real_pre_commit_run_refuses_stale_index_files_and_passes_fresh_ones(repo, tmp_path):
    """The pre-commit framework itself, with the hook as .pre-commit-hooks.yaml defines it (entry, files,
    pass_filenames); only its language is `system`, so the run uses this palace instead of installing one."""
    import yaml

    framework = Path(sys.executable).parent / "pre-commit"
    if not framework.exists():
        pytest.skip("pre-commit is not installed (pip install pre-commit; it is in the dev extra)")
    hook = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())[0]
    config = {"repos": [{"repo": "local", "hooks": [dict(hook, language="system")]}]}
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    env = dict(os.environ, **ENV, PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")

    def run_git(*args):  # stdout and stderr as one (git hands the hook's output to either)
        return subprocess.run(["git", *args], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, env=env)

    installed = subprocess.run([str(framework), "install"], cwd=repo, capture_output=True, text=True, env=env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    run_git("add", "-A")
    assert run_git("commit", "-qm", "pre-commit config").returncode == 0
    note = repo / "memories/storage-engines/b-tree.md"
    note.write_text(note.read_text().replace("anchor: ", "anchor: tall ", 1))
    run_git("add", "-A")
    refused = run_git("commit", "-qm", "anchor edited, index not regenerated")
    assert refused.returncode != 0 and "palace index files match the notes" in refused.stdout
    assert "index/storage-engines.md: generated index file out of date" in refused.stdout
    note.write_text(note.read_text() + "\nA sentence at the end of the body.\n")  # a body-only edit: nothing stale
    assert palace(repo, "index").exit_code == 0
    run_git("add", "-A")
    passed = run_git("commit", "-qm", "anchor edited, index regenerated")
    assert passed.returncode == 0 and "Passed" in passed.stdout, passed.stdout + passed.stderr
    readme = repo / "README-notes.txt"  # a file outside `files:` does not run the hook
    readme.write_text("x\n")
    run_git("add", "-A")
    skipped = run_git("commit", "-qm", "not a note")
    assert skipped.returncode == 0 and "Skipped" in skipped.stdout, skipped.stdout + skipped.stderr


def test_the_session_list_merges_too():
    from palace_cli.index.files import render_conversations_index

    def header(started: str, turns: int) -> dict:
        return {"source": "locomo", "started": started, "participants": ["Ann", "Ben"], "title": started, "turns": turns}

    base = [("conversations/locomo/a.md", header("2024-01-01", 3))]
    ours = base + [("conversations/locomo/b.md", header("2024-02-01", 4))]
    theirs = base + [("conversations/locomo/c.md", header("2024-03-01", 5))]
    both = base + ours[1:] + theirs[1:]
    texts = [render_conversations_index(s) for s in (base, ours, theirs, both)]
    assert merge_generated(*texts[:3]) == texts[3]


# ---- what a clean merge can still leave wrong (issue 25, rows 13, 14, 18) ----------------------------


@pytest.mark.slow
def test_a_merge_that_gives_two_notes_one_id_is_stopped_naming_both(repo):
    """Row 13: two branches add the same subject in different domains; the hook names both notes."""
    git(repo, "checkout", "-qb", "theirs")
    add(repo, "Quotient Filter", "storage-engines", "A sieve of eleven silver spoons catches phantom peas.")
    commit(repo, "theirs")
    git(repo, "checkout", "-q", "-")
    add(repo, "Quotient Filter", "caching-performance", "Nine copper ladles scoop marbles from a moat.")
    commit(repo, "ours")
    stopped = git(repo, "merge", "--no-edit", "theirs", check=False)
    assert stopped.returncode != 0 and "CONFLICT" not in stopped.stdout
    report = stopped.stdout + stopped.stderr
    assert "duplicate-id" in report
    assert "memories/storage-engines/quotient-filter.md" in report
    assert "memories/caching-performance/quotient-filter.md" in report
    assert len(git(repo, "log", "-1", "--format=%P").stdout.split()) == 1  # no merge commit was made
    check = palace(repo, "index", "--check")
    assert check.exit_code == 1 and "duplicate-id" in check.output


@pytest.mark.parametrize("removed_on", ["ours", "theirs"])
def test_a_merge_that_leaves_a_link_broken_is_stopped_naming_both_notes(repo, removed_on):
    """Row 14: one branch removes a note, the other adds a link to it; whichever side is HEAD, the hook says so."""
    target = "memories/caching-performance/cache-stampede.md"
    linker = repo / "memories/storage-engines/b-tree.md"

    def remove():
        assert palace(repo, "rm", "cache-stampede", "--force").exit_code == 0

    def link():
        linker.write_text(linker.read_text() + "\nSee also [[cache-stampede]].\n")

    git(repo, "checkout", "-qb", "theirs")
    (remove if removed_on == "theirs" else link)()
    commit(repo, "theirs")
    git(repo, "checkout", "-q", "-")
    (link if removed_on == "theirs" else remove)()
    commit(repo, "ours")
    stopped = git(repo, "merge", "--no-edit", "theirs", check=False)
    report = stopped.stdout + stopped.stderr
    assert stopped.returncode != 0, report
    assert "broken-link" in report and "memories/storage-engines/b-tree.md" in report, report
    assert "cache-stampede" in report
    if removed_on == "theirs":
        assert target in report  # the note the merge removes is named too, as HEAD had it
    assert palace(repo, "index", "--check").exit_code == 1


def test_the_merge_driver_takes_a_missing_side_as_empty(repo, tmp_path):
    """Row 18: a side that does not exist is no traceback."""
    ours = tmp_path / "ours.md"
    ours.write_text((repo / "INDEX.md").read_text())
    result = palace(repo, "git", "merge-driver", tmp_path / "no-base.md", ours, tmp_path / "no-theirs.md",
                    "INDEX.md")
    assert result.exit_code in (0, 1), result.output
    assert "Traceback" not in result.output
