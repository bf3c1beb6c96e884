"""Facts that change: supersede (byte-exact), chains, as-of recall, stale verify, study, lint, history, git merges."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from palace_cli.editing.authoring import add_memory, init_palace
from palace_cli.cli import cli
from palace_cli.errors import UsageError
from palace_cli.editing.lint import lint
from palace_cli.palace import Palace
from palace_cli.editing.reviewlog import Review, ReviewLog
from palace_cli.study.session import StudySession
from palace_cli.study.stats import due_items, study_stats
from palace_cli.search.retrieve import recall, search
from palace_cli.editing.versions import history, supersede
from palace_cli.search.wakeup import wake_up

GIT_ENV = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")

BODY = """# {subject}

## Image
{image}

## Content
{content}
"""

# Three versions of one team decision, each a note of its own.
DEPLOY = {
    "deploy-fridays": ("Deploy window", "fireworks over the harbour",
                       "Every Friday at five a marching band of seven walruses launches fireworks over the harbour.",
                       "Production deploys happen on Friday afternoons after the weekly release review."),
    "deploy-tuesdays": ("Deploy window", "kettle choir at dawn",
                        "On Tuesday mornings a choir of copper kettles whistles while ninety ducks wave release flags.",
                        "Production deploys moved to Tuesday mornings so that a bad release never spoils a weekend."),
    "deploy-any-day": ("Deploy window", "canary lighthouse keeper",
                       "A lighthouse keeper releases one yellow canary per hour; if it sings, the whole flock of "
                       "forty lemon birds follows.",
                       "Production deploys may happen on any weekday, behind a canary release that watches error rates."),
}
TOKENS = {"deploy-fridays": "seven walruses", "deploy-tuesdays": "copper kettles whistles",
          "deploy-any-day": "forty lemon birds"}


def git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, env=GIT_ENV, check=check)


def write_note(root: Path, domain: str, note_id: str, frontmatter: str, body: str, newline: str = "\n",
               bom: bool = False) -> Path:
    path = root / "memories" / domain / f"{note_id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = ("---\n" + frontmatter + "---\n" + body).replace("\n", newline)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return path


def deploy_note(root: Path, note_id: str, extra: str = "") -> Path:
    subject, anchor, image, content = DEPLOY[note_id]
    frontmatter = (f"id: {note_id}\nsubject: {subject}\nanchor: {anchor}\nkeywords: [deploy window, release]\n"
                   f"verify: {TOKENS[note_id]}\ncreated: 2024-01-01\n{extra}")
    return write_note(root, "team", note_id, frontmatter, BODY.format(subject=subject, image=image, content=content))


@pytest.fixture
def team(tmp_path) -> Path:
    """A palace with the three deploy-window notes, not yet linked, committed to git."""
    root = init_palace(tmp_path / "team", name="Team")
    for note_id in DEPLOY:
        deploy_note(root, note_id)
    Palace(root).refresh()  # the generated index files, committed with the notes
    git(root, "add", "-A")
    git(root, "commit", "-qm", "three deploy notes")
    return root


def run(root: Path, *args: str):
    return CliRunner().invoke(cli, ["--palace", str(root), *args])


def split(data: bytes) -> tuple[bytes, bytes]:
    """(frontmatter with its `---` lines, body) of a note's bytes."""
    closing = data.index(b"\n---", 3) + len(b"\n---")
    return data[:closing], data[closing:]


# ---- superseding writes only frontmatter, byte-exactly ------------------------------------------

NEW_NOTE = "id: new\nsubject: New way\nanchor: bright new hook\nverify: tangerine zeppelin\n"
AWKWARD = {
    "comments and flow lists": (
        "# decided at the March offsite\nid: old\nsubject: Old way   # the first one\nanchor: \"quoted anchor\"\n"
        "keywords:\n  - first   # one\n  - second\nlinks: [new]   # a flow list\nverify: green pocket notebook\n"
        "created: 2025-01-01\n",
        "# decided at the March offsite\nid: old\nsubject: Old way   # the first one\nanchor: \"quoted anchor\"\n"
        "keywords:\n  - first   # one\n  - second\nlinks: [new]   # a flow list\nverify: green pocket notebook\n"
        "created: 2025-01-01\nsuperseded_by: [new]\nvalid_until: 2026-03-02\n"),
    "a block list already there, a hand-set valid_until": (
        "id: old\nsubject: Old way\nanchor: old hook\nverify: green pocket notebook\nsuperseded_by:\n  - other\n"
        "valid_until: 2026-01-01   # set by hand\n",
        "id: old\nsubject: Old way\nanchor: old hook\nverify: green pocket notebook\nsuperseded_by:\n  - other\n"
        "  - new\nvalid_until: 2026-01-01   # set by hand\n"),
}


@pytest.mark.parametrize("newline, bom", [("\n", False), ("\r\n", False), ("\n", True), ("\r\n", True)],
                         ids=["lf", "crlf", "bom", "bom-crlf"])
@pytest.mark.parametrize("case", sorted(AWKWARD))
def test_supersede_changes_only_the_frontmatter_lines_it_must(tmp_path, case, newline, bom):
    root = init_palace(tmp_path / "p")
    before, expected = AWKWARD[case]
    body = BODY.format(subject="Old way", image="A scene with a green pocket notebook in it.",
                       content="The old facts.\n\nA second paragraph  with  odd   spacing.\n")
    old = write_note(root, "d", "old", before, body, newline, bom)
    write_note(root, "d", "new", NEW_NOTE, BODY.format(subject="New way", image="A tangerine zeppelin.",
                                                        content="The new facts."), newline)
    original = old.read_bytes()
    link = supersede(Palace(root), "old", "new", valid_from="2026-03-02")
    after = old.read_bytes()
    assert split(after)[1] == split(original)[1]  # the body, byte for byte
    head = ("\ufeff" if bom else "") + ("---\n" + expected + "---").replace("\n", newline)
    assert split(after)[0] == head.encode("utf-8")
    assert link.valid_from == "2026-03-02" and sorted(link.changed) == ["memories/d/new.md", "memories/d/old.md"]
    assert link.kept_until == ("2026-01-01" if "valid_until" in before else "")
    new = (root / "memories/d/new.md").read_bytes()
    assert b"supersedes: [old]" + newline.encode() + b"valid_from: 2026-03-02" + newline.encode() + b"---" in new
    # the second time there is nothing left to write
    again = supersede(Palace(root), "old", "new", valid_from="2026-03-02")
    assert again.changed == {} and old.read_bytes() == after


def test_supersede_refuses_what_makes_no_sense_and_writes_nothing(team):
    palace = Palace(team)
    before = {p: p.read_bytes() for p in (team / "memories/team").iterdir()}
    with pytest.raises(UsageError, match="cannot supersede itself"):
        supersede(palace, "deploy-fridays", "deploy-fridays")
    with pytest.raises(UsageError, match="before deploy-fridays became true"):
        supersede(palace, "deploy-fridays", "deploy-tuesdays", valid_from="2023-06-01")
    assert {p: p.read_bytes() for p in before} == before
    supersede(palace, "deploy-fridays", "deploy-tuesdays", valid_from="2025-01-01")
    with pytest.raises(UsageError, match="would make a cycle"):
        supersede(palace, "deploy-tuesdays", "deploy-fridays", valid_from="2025-06-01")
    result = run(team, "supersede", "deploy-fridays", "no-such-note")
    assert result.exit_code == 1 and "no memory 'no-such-note'" in result.stderr


# ---- a chain of three ------------------------------------------------------------------------------


@pytest.fixture
def chain(team) -> Path:
    """fridays (from 2024-01-01) -> tuesdays (from 2025-01-01) -> any day (from 2026-01-01), linked by the CLI."""
    (team / "memories/team/deploy-fridays.md").write_text(
        (team / "memories/team/deploy-fridays.md").read_text().replace("created: 2024-01-01\n",
                                                                       "created: 2024-01-01\nvalid_from: 2024-01-01\n"))
    assert run(team, "supersede", "deploy-fridays", "deploy-tuesdays", "--valid-from", "2025-01-01").exit_code == 0
    result = run(team, "supersede", "deploy-tuesdays", "deploy-any-day", "--valid-from", "2026-01-01")
    assert result.exit_code == 0, result.output
    assert "deploy-any-day supersedes deploy-tuesdays from 2026-01-01" in result.output
    return team


QUESTION = "when is the deploy window for production releases?"


def handed(root: Path, *args: str) -> list[str]:
    result = run(root, "recall", QUESTION, "--format", "json", *args)
    assert result.exit_code == 0, result.output
    return [m["id"] for m in json.loads(result.stdout)["memories"]]


@pytest.mark.parametrize("as_of, valid", [
    (None, "deploy-any-day"),
    ("2024-06-01", "deploy-fridays"),
    ("2024-12-31T23:59:59Z", "deploy-fridays"),
    ("2025-01-01", "deploy-tuesdays"),            # the day a version starts, it is the valid one
    ("2025-12-31", "deploy-tuesdays"),
    ("2026-01-01T00:00:00+00:00", "deploy-any-day"),
])
def test_recall_hands_over_the_version_valid_at_the_moment(chain, as_of, valid):
    args = ("--as-of", as_of) if as_of else ()
    assert handed(chain, *args) == [valid]
    hits = search(Palace(chain), QUESTION, mode="lexical", as_of=as_of).hits
    assert [h.id for h in hits] == [valid]


def test_before_the_first_version_nothing_is_valid(chain):
    assert handed(chain, "--as-of", "2023-12-31") == []


def test_include_superseded_shows_every_version_marked(chain):
    result = recall(Palace(chain), QUESTION, include_superseded=True, profile="study", k=5)
    by_id = {h.id: h for h in result.hits}
    assert set(by_id) == set(DEPLOY)
    assert by_id["deploy-any-day"].valid and by_id["deploy-any-day"].replaces == ["deploy-tuesdays"]
    assert not by_id["deploy-fridays"].valid and by_id["deploy-fridays"].superseded_by == ["deploy-tuesdays"]
    assert "superseded by: deploy-tuesdays (not valid at the time asked about)" in result.context
    data = result.as_dict()
    assert data["include_superseded"] is True and data["left_out"] == 0
    assert {"id": "deploy-fridays", "valid": False} .items() <= next(
        h for h in data["hits"] if h["id"] == "deploy-fridays").items()


def test_the_successor_says_what_it_replaced(chain):
    result = recall(Palace(chain), QUESTION)
    assert [h.id for h in result.handed] == ["deploy-any-day"]
    assert result.hits[0].replaces == ["deploy-tuesdays"] and result.left_out == 2
    assert "replaces: deploy-tuesdays" in result.context
    assert result.as_dict()["hits"][0]["replaces"] == ["deploy-tuesdays"]
    table = run(chain, "recall", QUESTION)
    assert "(replaces deploy-tuesdays)" in table.output


def test_history_both_ways_with_dates_and_git(chain):
    git(chain, "add", "-A")
    git(chain, "commit", "-qm", "deploys: any weekday behind a canary")
    for ref in ("deploy-fridays", "deploy-tuesdays", "deploy-any-day"):
        found = history(Palace(chain), ref)
        assert [v.id for v in found.versions] == ["deploy-fridays", "deploy-tuesdays", "deploy-any-day"]
    spans = [(v.valid_from, v.valid_until, v.status) for v in found.versions]
    assert spans == [("2024-01-01", "2025-01-01", "superseded"), ("2025-01-01", "2026-01-01", "superseded"),
                     ("2026-01-01", "", "current")]
    assert found.git and [c["subject"] for c in found.versions[0].commits] == [
        "deploys: any weekday behind a canary", "three deploy notes"]
    result = run(chain, "history", "deploy-tuesdays", "--json")
    data = json.loads(result.stdout)
    assert result.exit_code == 0 and data["versions"][1]["supersedes"] == ["deploy-fridays"]
    text = run(chain, "history", "deploy-tuesdays").output
    assert "deploy-fridays  2024-01-01 → 2025-01-01  superseded" in text and "three deploy notes" in text


def test_history_outside_git(tmp_path):
    root = init_palace(tmp_path / "plain")
    subprocess.run(["rm", "-rf", str(root / ".git")], check=True)
    for note_id in ("deploy-fridays", "deploy-tuesdays"):
        deploy_note(root, note_id)
    supersede(Palace(root), "deploy-fridays", "deploy-tuesdays", valid_from="2025-01-01")
    found = history(Palace(root), "deploy-fridays")
    assert not found.git and all(v.commits is None for v in found.versions)
    assert "not a git repository" in run(root, "history", "deploy-fridays").stderr


def test_generated_index_files_mark_versions_one_line_each(team):
    palace = Palace(team)
    palace.refresh()
    before = {name: (team / name).read_text() for name in ("INDEX.md", "index/team.md")}
    supersede(palace, "deploy-fridays", "deploy-tuesdays", valid_from="2025-01-01")
    for name, text in before.items():
        old, new = text.splitlines(), (team / name).read_text().splitlines()
        changed = [(a, b) for a, b in zip(old, new) if a != b]
        assert len(old) == len(new) and len(changed) == 2, changed  # the two notes' lines, nothing else
    domain = (team / "index/team.md").read_text()
    assert "(superseded by deploy-tuesdays, from 2024-01-01, until 2025-01-01)" not in domain  # no valid_from
    assert "[Deploy window](../memories/team/deploy-fridays.md) (superseded by deploy-tuesdays, until 2025-01-01)" \
        in domain
    assert "(replaces deploy-fridays, from 2025-01-01)" in domain
    assert "- Deploy window (superseded by deploy-tuesdays, until 2025-01-01): deploy window, release → " \
           "fireworks over the harbour" in (team / "INDEX.md").read_text()
    assert lint(palace).errors == 0


# ---- add --supersedes, CLI ------------------------------------------------------------------------


def test_add_supersedes_writes_both_sides(team):
    result = run(team, "add", "Deploy window", "-d", "team", "--id", "deploy-freeze", "--anchor", "frozen ferris wheel",
                 "--image", "A ferris wheel frozen in ice holds twelve penguins waving red stop signs at a crane.",
                 "--content", "No production deploys during the December freeze.", "--supersedes", "deploy-any-day",
                 "--valid-from", "2026-12-01", "--type", "decision", "--no-edit")
    assert result.exit_code == 0, result.output
    assert "supersedes deploy-any-day from 2026-12-01" in result.output
    new = Palace(team).memory("deploy-freeze")
    old = Palace(team).memory("deploy-any-day")
    assert (new.supersedes, new.valid_from, new.type) == (["deploy-any-day"], "2026-12-01", "decision")
    assert (old.superseded_by, old.valid_until) == (["deploy-freeze"], "2026-12-01")
    before = git(team, "show", "HEAD:memories/team/deploy-any-day.md").stdout
    assert split(old_bytes := (team / old.path).read_bytes())[1] == split(before.encode())[1]
    assert old_bytes.decode().startswith(before.split("---\n#")[0].rstrip("-\n"))


def test_add_supersedes_defaults_to_today_and_an_unknown_id_writes_nothing(team):
    today = datetime.now(timezone.utc).date().isoformat()
    memory = add_memory(Palace(team), "Deploy window", "team", note_id="deploy-v9", anchor="a hook",
                        supersedes=["deploy-any-day"])
    assert memory.valid_from == today and Palace(team).memory("deploy-any-day").valid_until == today
    result = run(team, "add", "Another", "-d", "team", "--supersedes", "nope", "--no-edit")
    assert result.exit_code == 1 and "no memory 'nope'" in result.stderr
    assert not (team / "memories/team/another.md").exists()


# ---- verify ---------------------------------------------------------------------------------------


def test_verify_calls_a_superseded_citation_stale_and_names_the_successor(chain, tmp_path):
    answer = tmp_path / "answer.txt"
    answer.write_text(f"We deploy on Tuesdays. [verify: {TOKENS['deploy-tuesdays']}]")
    result = run(chain, "verify", "--response", str(answer), "-m", "deploy-tuesdays")
    assert result.exit_code == 1
    assert "stale" in result.output and "superseded by deploy-any-day" in result.output
    data = json.loads(run(chain, "verify", "--response", str(answer), "-m", "deploy-tuesdays", "--json").stdout)
    assert data["status"] == "stale" and not data["grounded"]
    assert data["stale"] == [{"id": "deploy-tuesdays", "status": "superseded", "superseded_by": ["deploy-any-day"],
                              "valid_from": "2025-01-01", "valid_until": "2026-01-01"}]
    # asked about a moment inside its validity, the same answer is grounded
    for moment in ("2025-01-01", "2025-12-31T23:59:59Z"):
        inside = run(chain, "verify", "--response", str(answer), "-m", "deploy-tuesdays", "--as-of", moment)
        assert inside.exit_code == 0 and "grounded" in inside.output, inside.output
    outside = run(chain, "verify", "--response", str(answer), "-m", "deploy-tuesdays", "--as-of", "2026-01-01")
    assert outside.exit_code == 1
    early = run(chain, "verify", "--response", str(answer), "-m", "deploy-tuesdays", "--as-of", "2024-05-01")
    assert early.exit_code == 1 and "not yet valid" in early.output
    current = tmp_path / "current.txt"
    current.write_text(f"Any weekday, behind a canary. [verify: {TOKENS['deploy-any-day']}]")
    assert run(chain, "verify", "--response", str(current), "-m", "deploy-any-day").exit_code == 0


def test_verify_of_a_recall_context_is_grounded(chain, tmp_path):
    context = tmp_path / "ctx.json"
    context.write_text(run(chain, "recall", QUESTION, "--format", "json").stdout)
    answer = tmp_path / "answer.txt"
    answer.write_text(f"Any weekday. [verify: {TOKENS['deploy-any-day']}]")
    assert run(chain, "verify", "--response", str(answer), "--context", str(context)).exit_code == 0


# ---- study -------------------------------------------------------------------------------------------


def test_study_skips_superseded_memories_and_keeps_their_reviews(chain):
    palace = Palace(chain)
    log = ReviewLog(palace, "person.jsonl")
    past = datetime.now(timezone.utc) - timedelta(days=40)
    for memory_id in DEPLOY:
        log.append(Review(memory_id, past, 3, "cloze", "due", "person", 3000, 1.0))
    lines = log.path.read_text().splitlines()
    items, new, _, _ = due_items(palace, "person")
    assert [i.id for i in items] == ["deploy-any-day"] and new == 0
    session = StudySession(palace, strategy="random", n=10, learner="person", seed=1, log=log)
    assert {p.memory_id for p in session.picks} == {"deploy-any-day"}
    for strategy in ("due", "weak-spots", "depth-first"):
        picks = StudySession(palace, strategy=strategy, n=10, learner="person", seed=1, log=log).picks
        assert {p.memory_id for p in picks} <= {"deploy-any-day"}, strategy
    stats = study_stats(palace, "person")
    assert (stats.memories, stats.reviewed, stats.retired, stats.orphans) == (1, 1, 2, 0)
    assert log.path.read_text().splitlines() == lines  # nothing is removed from the log
    due = json.loads(run(chain, "due", "--json", "--learner", "person").stdout)
    assert [i["id"] for i in due["items"]] == ["deploy-any-day"]


# ---- wake-up and core memories -------------------------------------------------------------------------


def test_core_memories_wake_up_first_and_superseded_never(chain):
    core = chain / "memories/team/deploy-tuesdays.md"
    core.write_text(core.read_text().replace("created: 2024-01-01\n", "created: 2024-01-01\ncore: true\n"))
    path = chain / "memories/team/deploy-any-day.md"
    path.write_text(path.read_text().replace("created: 2024-01-01\n", "created: 2024-01-01\ncore: true\n"))
    result = wake_up(Palace(chain))
    ids = [m["id"] for m in result.memories]
    assert ids == ["deploy-any-day"] and result.memories[0]["core"] is True  # tuesdays is superseded: not woken


def test_lint_warns_when_core_memories_alone_overflow_wake_up(tmp_path):
    root = init_palace(tmp_path / "big")
    for i in range(70):
        write_note(root, "d", f"core-{i:02d}", f"id: core-{i:02d}\nsubject: {'A long subject ' * 6}{i}\n"
                   f"anchor: {'an anchor ' * 5}{i}\nverify: token number {i} zebra\ncore: true\n",
                   BODY.format(subject="x", image=f"token number {i} zebra", content="y"))
    palace = Palace(root)
    overflow = [p for p in lint(palace).problems if p.code == "core-overflow"]
    result = wake_up(palace)
    assert overflow and len(overflow) == len(result.left_out_core)
    assert all(m["core"] for m in result.memories) and len(result.memories) + len(overflow) == 70
    assert "over wake-up's default budget of 2000" in overflow[0].message


# ---- lint --------------------------------------------------------------------------------------------


def test_lint_names_bad_dates_cycles_ranges_one_sided_links_and_forks(tmp_path):
    root = init_palace(tmp_path / "lint")
    cases = {
        "bad-day": "valid_from: 2026-02-30\n",
        "bad-text": "valid_until: next tuesday\n",
        "backwards": "valid_from: 2026-05-01\nvalid_until: 2026-04-01\n",
        "loop-a": "supersedes: [loop-b]\n",
        "loop-b": "supersedes: [loop-a]\n",
        "orphan-link": "superseded_by: [nobody]\n",
        "half": "supersedes: [base]\nvalid_from: 2025-01-01\n",
        "base": "created: 2024-01-01\n",
        "fork": "supersedes: [base]\nvalid_from: 2025-02-01\n",
        "odd-type": "type: rumour\ncore: maybe\n",
    }
    for note_id, extra in cases.items():
        write_note(root, "d", note_id, f"id: {note_id}\nsubject: {note_id}\nanchor: hook of {note_id}\n"
                   f"verify: {note_id} purple walrus\n{extra}",
                   BODY.format(subject=note_id, image=f"a {note_id} purple walrus", content="facts"))
    problems = {(p.path.split("/")[-1], p.line, p.severity, p.code) for p in lint(Palace(root)).problems
                if p.code not in ("smashin-weak", "token-guessable")}
    assert ("bad-day.md", 6, "error", "bad-date") in problems
    assert ("bad-text.md", 6, "error", "bad-date") in problems
    assert ("backwards.md", 7, "error", "valid-range") in problems
    assert {("loop-a.md", 6, "error", "supersede-cycle")} <= problems
    assert ("orphan-link.md", 6, "error", "broken-link") in problems
    assert ("base.md", 2, "warning", "one-sided-supersede") in problems
    assert ("base.md", 2, "warning", "forked-versions") in problems
    assert ("odd-type.md", 6, "warning", "unknown-type") in problems
    assert ("odd-type.md", 7, "error", "bad-type") in problems
    messages = {p.code: p.message for p in lint(Palace(root)).problems}
    assert "'2026-02-30' is not a date" in messages["bad-date"] or "next tuesday" in messages["bad-date"]
    assert "`palace supersede base fork` writes the missing side" in [
        p.message for p in lint(Palace(root)).problems if p.code == "one-sided-supersede"][0] or \
        "`palace supersede base half` writes the missing side" in messages["one-sided-supersede"]
    assert "loop-a, loop-b" in messages["supersede-cycle"]
    result = run(root, "lint")
    assert result.exit_code == 1 and "[supersede-cycle]" in result.output


# ---- two branches supersede the same note, merged with real git ------------------------------------------


def test_two_branches_superseding_one_note_merge_to_a_fork_that_lint_explains(team):
    git(team, "checkout", "-qb", "tuesdays")
    assert run(team, "supersede", "deploy-fridays", "deploy-tuesdays", "--valid-from", "2025-01-01").exit_code == 0
    git(team, "commit", "-qam", "tuesdays")
    git(team, "checkout", "-q", "master" if git(team, "rev-parse", "--verify", "-q", "master", check=False).returncode
        == 0 else "main")
    base = git(team, "rev-parse", "--abbrev-ref", "HEAD").stdout.strip()
    git(team, "checkout", "-qb", "anyday")
    assert run(team, "supersede", "deploy-fridays", "deploy-any-day", "--valid-from", "2025-03-01").exit_code == 0
    git(team, "commit", "-qam", "any day")
    git(team, "checkout", "-q", base)
    git(team, "merge", "-q", "tuesdays")
    merged = git(team, "merge", "anyday", check=False)
    # Both branches rewrote the same frontmatter lines of the old note: git stops with a conflict there;
    # the generated index files never conflict (palace init installed the merge driver, docs/git.md) and
    # the successors' own edits merge cleanly.
    assert merged.returncode != 0 and "memories/team/deploy-fridays.md" in merged.stdout
    conflicts = sorted(line[3:] for line in git(team, "status", "--porcelain").stdout.splitlines()
                       if line.startswith("UU"))
    assert conflicts == ["memories/team/deploy-fridays.md"]
    conflicted = run(team, "lint")
    assert conflicted.exit_code == 1 and "memories/team/deploy-fridays.md" in conflicted.output
    # While the old note is unreadable, both successors still say what they replaced: it is not handed over.
    assert handed(team) and "deploy-fridays" not in handed(team)
    assert "<<<<<<<" not in (team / "INDEX.md").read_text()  # any command regenerates the index files
    # Resolve by taking either side; lint then names the link that side lacks and the fork.
    git(team, "checkout", "--ours", "memories/team/deploy-fridays.md")
    assert run(team, "index").exit_code == 0
    git(team, "add", "-A")
    git(team, "commit", "-qm", "merge any day")
    report = {p.code: p.message for p in lint(Palace(team)).problems}
    assert "`palace supersede deploy-fridays deploy-any-day` writes the missing side" in report["one-sided-supersede"]
    assert "deploy-any-day, deploy-tuesdays" in report["forked-versions"]
    assert run(team, "supersede", "deploy-fridays", "deploy-any-day").exit_code == 0
    report = {p.code: p.message for p in lint(Palace(team)).problems}
    assert "one-sided-supersede" not in report and "forked-versions" in report
    assert run(team, "supersede", "deploy-tuesdays", "deploy-any-day", "--valid-from", "2025-03-01").exit_code == 0
    codes = {p.code for p in lint(Palace(team)).problems}
    assert not codes & {"one-sided-supersede", "forked-versions", "supersede-cycle", "valid-range"}
    assert handed(team) == ["deploy-any-day"]
    assert [v.id for v in history(Palace(team), "deploy-fridays").versions] == [
        "deploy-fridays", "deploy-tuesdays", "deploy-any-day"]


# ---- the example palace's knowledge-update benchmark ---------------------------------------------------


def test_example_palace_update_chains_and_their_queries_agree(readonly_palace):
    from palace_cli.bench.retrieval import load_queries
    from palace_cli.core.dates import parse_moment

    readonly_palace.refresh(embedder=None)
    versions = readonly_palace.index.versions()
    memories = readonly_palace.index.scan(light=True).memories
    chains = {tuple(versions.chain(i)) for i in memories if versions.successors.get(i)}
    assert len(chains) >= 10 and all(len(chain) >= 2 for chain in chains)
    assert all(memories[i].valid_from for chain in chains for i in chain)  # every version says when it began
    queries = [q for q in load_queries(readonly_palace.root / "queries.jsonl") if q.kind in ("update", "as-of")]
    assert {q.kind for q in queries} == {"update", "as-of"} and len(queries) >= 30
    for q in queries:
        when = parse_moment(q.as_of) if q.as_of else None
        assert (q.kind == "as-of") == bool(q.as_of), q.qid
        assert all(versions.valid_at(e, when) for e in q.expected), q.qid  # the answer is the version valid then
        assert all(len(versions.chain(e)) > 1 for e in q.expected), q.qid
    asked = {e for q in queries for e in q.expected}
    assert {chain[-1] for chain in chains} <= asked  # every current version is asked about
    assert lint(readonly_palace).errors == 0


def test_bench_retrieval_reports_current_at_1_and_stale_handed(readonly_palace, tmp_path):
    from palace_cli.bench.retrieval import load_queries, markdown_table, run_retrieval_bench

    queries = [q for q in load_queries(readonly_palace.root / "queries.jsonl") if q.kind in ("update", "as-of")]
    summary = run_retrieval_bench(readonly_palace, queries, modes=("recall", "lexical"))
    for mode in ("recall", "lexical"):
        row = summary["modes"][mode]
        # One miss of 19 is allowed: under the one-field BM25, u-013 (S3 listings) ranks s3-default-encryption,
        # which says "S3" and "object" more often, above s3-strong-consistency; no stale version is ever handed.
        assert row["current@1"] >= 0.94 and row["as_of@1"] >= 0.9, (mode, row)
        assert row["stale_handed"] == 0 and row["stale_handed_as_of"] == 0
    current = summary["modes"]["recall"]["current@1"]
    assert f"| recall | {current:.3f}" in markdown_table(summary).split("facts that change")[1]
    unfiltered = run_retrieval_bench(readonly_palace, queries, modes=("lexical",), include_superseded=True)
    assert unfiltered["modes"]["lexical"]["stale_handed"] > 0  # what the validity filter prevents
    assert unfiltered["modes"]["lexical"]["current@1"] < summary["modes"]["lexical"]["current@1"]


@pytest.mark.slow
def test_bench_similar_separates_rewrites_from_neighbours_lexically(palace):
    from palace_cli.bench.similar import load_duplicates, markdown_report, run_similar_bench

    summary = run_similar_bench(palace, load_duplicates(palace.root / "duplicates.jsonl"), methods=("lexical",))
    lexical = summary["methods"]["lexical"]
    assert summary["duplicates"] == 12 and summary["updates"] == 13
    assert lexical["ranked_first"] >= 0.9 and lexical["auc_duplicate_vs_neighbour"] >= 0.9
    row = next(r for r in lexical["grid"] if abs(r["threshold"] - lexical["threshold"]) < 1e-9)
    assert row["rewrites"] >= 0.9 and row["agent_facts"] >= 0.9 and row["neighbours"] <= 0.1
    assert "| **0.30** |" in markdown_report(summary)
