"""palace lint: every problem with path and line, the exit rule, and --fix doing only what is safe."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from palace_cli.index.files import write_index_files
from palace_cli.editing.lint import lint
from palace_cli.core.noteedit import update_frontmatter
from palace_cli.palace import Palace

NOTE = """---
id: {id}
subject: {subject}
anchor: {anchor}
keywords: [{keywords}]
verify: {verify}
links: [{links}]
---
# {subject}

## Image
{image}

## Content
{content}
{extra}"""


def make(root: Path, note_id: str, *, subject: str = "", anchor: str = "a quiet hook", keywords: str = "",
         verify: str = "", links: str = "", image: str = "", content: str = "Plain facts.", extra: str = "",
         domain: str = "d") -> Path:
    path = root / "memories" / domain / f"{note_id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    image = image or f"A {note_id} made of brass sings to nine orange llamas."
    path.write_text(NOTE.format(id=note_id, subject=subject or note_id.title(), anchor=anchor, keywords=keywords,
                                verify=verify, links=links, image=image, content=content, extra=extra))
    return path


@pytest.fixture
def root(tmp_path) -> Path:
    root = tmp_path / "p"
    root.mkdir()
    (root / "palace.toml").write_text('[palace]\nname = "P"\n')
    return root


def problems(root: Path, fix: bool = False) -> set[tuple[str, int | None, str, str]]:
    report = lint(Palace(root), fix=fix)
    return {(p.path, p.line, p.severity, p.code) for p in report.problems if p.code not in ("smashin-weak",
                                                                                             "stale-index")}


def test_example_palace_has_no_errors(readonly_palace):
    report = lint(readonly_palace)
    assert report.errors == 0, [str(p) for p in report.problems if p.severity == "error"]
    assert not report.failed()


def test_a_clean_note_has_no_problems(root):
    make(root, "alpha", verify="orange llamas")
    assert problems(root) == set()


@pytest.mark.parametrize("kwargs, code, severity, line", [
    (dict(verify=""), "token-missing", "warning", 6),  # a memory that lacks a part is not broken
    (dict(verify="orange"), "token-length", "error", 6),
    (dict(verify="purple giraffes"), "token-not-in-image", "error", 6),
    (dict(verify="orange llamas", content="Llamas spit."), "token-guessable", "warning", 6),
    (dict(verify="orange llamas", keywords="orange"), "token-guessable", "warning", 6),
    (dict(verify="orange llamas", anchor="nine orange llamas"), "token-exposed", "error", 4),
    (dict(verify="orange llamas", subject="Orange Llama"), "token-exposed", "error", 3),
    (dict(verify="orange llamas", links="nowhere"), "broken-link", "error", 7),
    (dict(verify="orange llamas", extra="\n## Links\n- [[ghost]]: gone\n"), "broken-link", "error", 18),
    (dict(verify="orange llamas", anchor=""), "missing-field", "warning", 4),
    (dict(verify="orange llamas", anchor="[a, b]"), "bad-type", "error", 4),
    (dict(verify="orange llamas", image="(still the template hint)"), "placeholder-section", "warning", 11),
])
def test_each_problem_has_its_code_severity_and_line(root, kwargs, code, severity, line):
    make(root, "alpha", **kwargs)
    found = problems(root)
    assert ("memories/d/alpha.md", line, severity, code) in found, found


def test_links_inside_code_fences_are_not_links(root):
    make(root, "alpha", verify="orange llamas", extra="\n```\n[[not-a-link]]\n```\n")
    assert problems(root) == set()


def test_silverbullet_links_are_read_as_silverbullet_reads_them(root):
    """A place in a page names the page, a query is code, a meta page may be a library's: only a plain link to
    no note is broken."""
    make(root, "alpha", verify="orange llamas",
         extra="\n[[alpha@12]] [[Alpha@L3c1]] [[^Library/Std/Widgets]] ${query[[from index.pages()]]}\n[[Library/Gone]]\n")
    assert problems(root) == {("memories/d/alpha.md", 18, "error", "broken-link")}


def test_duplicate_tokens_up_to_spelling_are_errors_on_both(root):
    make(root, "alpha", verify="orange llamas")
    make(root, "beta", verify="Orange-Llama", image="Nine orange-llama kites over the beta fields.")
    found = problems(root)
    assert ("memories/d/alpha.md", 6, "error", "token-duplicate") in found
    assert ("memories/d/beta.md", 6, "error", "token-duplicate") in found


def test_a_token_inside_another_token_is_an_overlap(root):
    make(root, "alpha", verify="orange llamas")
    make(root, "beta", verify="nine orange llamas", image="Beta sees nine orange llamas swim.")
    found = problems(root)
    assert ("memories/d/beta.md", 6, "error", "token-overlap") in found
    assert not any(code == "token-overlap" for path, _, _, code in found if path == "memories/d/alpha.md")


def test_another_memorys_token_in_an_anchor_is_exposed(root):
    make(root, "alpha", verify="orange llamas")
    make(root, "beta", verify="nine brass beta", anchor="orange llamas parade")
    report = lint(Palace(root))
    exposed = [p for p in report.problems if p.code == "token-exposed"]
    assert [(p.path, p.line) for p in exposed] == [("memories/d/beta.md", 4)]
    assert "alpha" in exposed[0].message


def test_token_in_palace_toml_is_exposed(root):
    make(root, "alpha", verify="orange llamas")
    (root / "palace.toml").write_text('[palace]\nname = "P"\nidentity = "We love orange llamas."\n')
    assert ("palace.toml", None, "error", "token-exposed") in problems(root)


def test_stale_index_is_an_error_that_fix_repairs(root):
    make(root, "alpha", verify="orange llamas")
    report = lint(Palace(root))
    stale = [p for p in report.problems if p.code == "stale-index"]
    assert {p.path for p in stale} == {"INDEX.md", "index/d.md"} and all(p.fixable for p in stale)
    fixed = lint(Palace(root), fix=True)
    assert sorted(fixed.fixed) == ["INDEX.md: regenerated", "index/d.md: regenerated"]
    assert not any(p.code == "stale-index" for p in fixed.problems)


def test_fix_proposes_missing_tokens_and_changes_only_that_line(root):
    path = make(root, "alpha", verify="")
    path.write_text(path.read_text().replace("verify: \n", "verify:   # fill me\n"))
    make(root, "beta", verify="", image="(hint only)")
    before = path.read_text()
    report = lint(Palace(root), fix=True)
    assert "memories/d/alpha.md: proposed a verify token" in report.fixed
    after = path.read_text()
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert len(changed) == 1 and changed[0][1].startswith("verify: ") and changed[0][1].endswith("# fill me")
    memory = Palace(root).memory("alpha")
    assert memory.verify and [p.code for p in lint(Palace(root)).problems if p.path.endswith("beta.md")].count(
        "token-missing") == 1  # beta: no image to draw a token from
    assert not any(p.code == "token-missing" and p.path.endswith("alpha.md") for p in lint(Palace(root)).problems)


def test_lint_without_fix_writes_nothing(palace):
    note = palace.root / "memories/consensus-coordination/raft.md"
    update_frontmatter(note, {"verify": None})
    def palace_files():  # the palace itself, not its cache under .palace/ (which any command may refresh)
        return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in palace.root.rglob("*")
                if p.is_file() and ".palace" not in p.relative_to(palace.root).parts}

    files = palace_files()
    report = lint(palace)
    assert any(p.code == "token-missing" and p.fixable for p in report.problems)
    assert palace_files() == files


def test_fix_never_touches_unreadable_or_bom_crlf_notes(root):
    make(root, "alpha", verify="orange llamas")
    bad = root / "memories" / "d" / "bad.md"
    bad.write_bytes(b"---\nid: bad\nsubject: [\n---\n")
    crlf = make(root, "crlf", verify="")
    crlf.write_bytes(b"\xef\xbb\xbf" + crlf.read_bytes().replace(b"\n", b"\r\n"))
    lint(Palace(root), fix=True)
    assert bad.read_bytes() == b"---\nid: bad\nsubject: [\n---\n"
    data = crlf.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf---\r\n") and b"\n" not in data.replace(b"\r\n", b"")
    assert Palace(root).memory("crlf").verify  # the token went in, the BOM and CRLF stayed


def test_exit_rule(root, parse_notes):
    make(root, "alpha", verify="orange llamas", content="Llamas.")  # a guessable token: a warning
    write_index_files(Palace(root).site, parse_notes(Palace(root)))
    report = lint(Palace(root))
    assert report.errors == 0 and report.warnings >= 1
    assert report.failed() is False and report.failed(strict=True) is True
    make(root, "beta", verify="purple giraffes")  # a token its Image cannot give: broken
    assert lint(Palace(root)).failed() is True


def test_json_shape(root):
    make(root, "alpha", verify="")
    data = lint(Palace(root)).as_dict()
    assert set(data) == {"problems", "errors", "warnings", "fixed"}
    problem = next(p for p in data["problems"] if p["code"] == "token-missing")
    assert problem == {"path": "memories/d/alpha.md", "line": 6, "severity": "warning", "code": "token-missing",
                       "message": problem["message"], "fixable": True}


def test_study_says_what_a_note_lacks_to_be_cited_and_studied(root):
    make(root, "alpha", verify="orange llamas")
    (root / "memories" / "d" / "plain.md").write_text("# Plain\n\nJust a thought.\n")
    report = lint(Palace(root), study=True)
    gaps = [p for p in report.problems if p.code == "study-gap"]
    assert [(p.path, p.line, p.severity) for p in gaps] == [("memories/d/plain.md", 1, "warning")]
    assert "lacks an `## Image`, an `anchor` and a `verify` token" in gaps[0].message
    assert "palace evolve plain" in gaps[0].message
    assert not [p for p in lint(Palace(root)).problems if p.code == "study-gap"]  # only when asked


def test_one_note_fix_cannot_write_never_stops_the_fix_of_the_others(root):
    bare_cr = make(root, "aaa", verify="")
    bare_cr.write_bytes(bare_cr.read_bytes().replace(b"\n", b"\r"))  # sorts first; palace will not rewrite it
    later = make(root, "zzz", verify="", image="A zzz of copper hums to eleven violet geese.")
    report = lint(Palace(root), fix=True)
    assert report.fixed[0] == "memories/d/zzz.md: proposed a verify token"
    assert Palace(root).memory("zzz").verify and b"\n" not in bare_cr.read_bytes()
    assert ("memories/d/aaa.md", 6, "warning", "not-fixed") in {(p.path, p.line, p.severity, p.code)
                                                               for p in report.problems}
    assert later.read_text().startswith("---\nid: zzz\n")


def test_review_log_lines_that_cannot_be_read_are_reported(root):
    make(root, "alpha", verify="orange llamas")
    (root / "reviews").mkdir()
    good = '{"id": "alpha", "at": "2026-01-01T00:00:00Z", "rating": "good"}'
    (root / "reviews" / "me.jsonl").write_text(f'{good}\n{good[:-1]}, "duration_ms": Infinity}}\n[]\n')
    found = problems(root)
    assert ("reviews/me.jsonl", 2, "warning", "review-bad-line") in found
    assert ("reviews/me.jsonl", 3, "warning", "review-bad-line") in found
    assert not any(path == "reviews/me.jsonl" and line == 1 for path, line, _, _ in found)


def test_conflict_markers_are_errors(root):
    make(root, "alpha", verify="orange llamas", extra="<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> b\n")
    assert ("memories/d/alpha.md", 16, "error", "conflict-marker") in problems(root)


def test_links_in_conversations_follow_the_rule_of_memories(root, tmp_path):
    make(root, "alpha", verify="orange llamas")
    sessions = root / "conversations" / "claude"
    sessions.mkdir(parents=True)
    (tmp_path / "secret.md").write_text("---\nid: s\nsource: claude\n---\n### user · 2026-01-01 · t1\nhunter2\n")
    (sessions / "leak.md").symlink_to(tmp_path / "secret.md")
    (sessions / "self.md").symlink_to("self.md")
    os.mkfifo(sessions / "fifo.md")
    found = problems(root)
    assert ("conversations/claude/leak.md", None, "error", "symlink-outside") in found
    assert ("conversations/claude/self.md", None, "error", "unreadable") in found
    assert ("conversations/claude/fifo.md", None, "error", "unreadable") in found
