"""Links in a vault the way Obsidian writes them (tests/data/vault, in a real git repository): `mv` rewrites only
the bytes of the links it must and undoes to the same bytes, property links and attachments are links,
shared names resolve as Obsidian resolves them, and `backlinks` is what an independent reading of the files
finds. Foam's documentation is held to the same."""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import subprocess
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml
from click.testing import CliRunner

from conftest import SHARED
from test_vault import writable_copy
from palace_cli.cli import cli
from palace_cli.editing.curate import backlinks
from palace_cli.palace import Palace

VAULT = Path(__file__).resolve().parents[1] / "data" / "vault"
FOAM = SHARED / "data" / "foam-docs"
OWN = (".palace", ".palace-index", "_palace", ".git", "reviews", ".obsidian")


def run(root: Path, *args, code: int | None = 0):
    result = CliRunner().invoke(cli, ["--palace", str(root), *[str(a) for a in args]], catch_exceptions=False)
    assert code is None or result.exit_code == code, result.output
    return result


def adopted(source: Path, target: Path) -> Path:
    """A writable copy of a vault, in a git repository of its own, adopted by `palace init`."""
    writable_copy(source, target)
    git = ["git", "-c", "user.email=t@example.org", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=target, check=True)
    subprocess.run([*git, "add", "-A"], cwd=target, check=True)
    subprocess.run([*git, "commit", "-qm", "the vault"], cwd=target, check=True)
    run(target, "init", target)
    return target


def note_bytes(root: Path) -> dict[str, bytes]:
    """Every file of the vault that is not palace's own, by path: notes and attachments."""
    out = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in OWN]
        for name in names:
            path = Path(folder) / name
            relpath = path.relative_to(root).as_posix()
            if relpath not in ("palace.toml", ".gitignore", ".gitattributes"):
                out[relpath] = path.read_bytes()
    return out


@pytest.fixture
def vault(tmp_path) -> Path:
    return adopted(VAULT, tmp_path / "vault")


@pytest.fixture
def foam(tmp_path) -> Path:
    if not FOAM.is_dir():
        pytest.skip(f"the Foam documentation vault is not at {FOAM} (../shared is absent)")
    return adopted(FOAM, tmp_path / "foam")


# ---- an independent reading of the links ---------------------------------------------------------------
# Written from the rules as docs/obsidian.md states them, with nothing of palace's parser or resolver.

WIKI = re.compile(r"\[\[([^\]#|\n]*?)\\?(?:[#|][^\]\n]*)?\]\]")
MD_LINK = re.compile(r"\[[^\]\n]*\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]^\n][^\]\n]*\]:\s*<?([^\s>]+)>?", re.MULTILINE)
FILE_EXT = re.compile(r"\.(png|jpe?g|gif|svg|webp|pdf|mp3|canvas)$", re.IGNORECASE)


def _blanked(body: str) -> str:
    """The body with what holds no link (fenced, indented and inline code, HTML comments, $$ math) blanked."""
    out, fence, code, blank, listed = [], "", False, True, False
    for line in body.split("\n"):
        stripped = line.strip()
        if fence:
            fence = "" if stripped.startswith(fence) else fence
            out.append("")
        elif stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            out.append("")
        elif (line.startswith(("    ", "\t")) and stripped) and (code or (blank and not listed)):
            code = True
            out.append("")
        else:
            code = code and not stripped
            if stripped:
                listed = bool(re.match(r"\s*([-*+]|\d+\.)\s", line)) or (listed and not blank)
            out.append(line)
        blank = not stripped
    text = "\n".join(out)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.DOTALL)
    text = re.sub(r"\$\$(?:(?!\n\s*\n).)+?\$\$", "", text, flags=re.DOTALL)
    return re.sub(r"(`+)(?!`).+?(?<!`)\1(?!`)", "", text)


def written_links(text: str) -> list[tuple[str, str]]:
    """(kind, target as written) of every link of a note's text: `wiki` (body and property wikilinks), `path`."""
    found, body = [], text
    if text.startswith("---\n") and "\n---\n" in text[3:]:
        front, body = text[4:].split("\n---\n", 1)
        meta = yaml.safe_load(front) or {}
        values = [v for v in meta.values() if isinstance(v, (str, list))]
        strings = [s for v in values for s in ([v] if isinstance(v, str) else v) if isinstance(s, str)]
        found += [("wiki", m.group(1).strip()) for s in strings for m in WIKI.finditer(s)]
    body = _blanked(body)
    found += [("wiki", m.group(1).strip()) for m in WIKI.finditer(body) if m.group(1).strip()]
    found += [("path", unquote(m.group(1).split("#")[0])) for pattern in (MD_LINK, REF_DEF)
              for m in pattern.finditer(body) if not re.match(r"[a-z]+:|#", m.group(1))]
    return found


def _closest(paths: list[str], source: str) -> str | None:
    """The linking note's folder first, then the shortest path (a tie names none)."""
    here = [p for p in paths if posixpath.dirname(p) == posixpath.dirname(source)]
    if len(here) == 1:
        return here[0]
    ranked = sorted(paths, key=len)
    return ranked[0] if len(ranked) == 1 or (ranked and len(ranked[0]) < len(ranked[1])) else None


def named(kind: str, target: str, source: str, files: list[str]) -> str | None:
    """The file a link names, by Obsidian's rules as docs/obsidian.md states them."""
    if kind == "path":
        path = posixpath.normpath(posixpath.join(posixpath.dirname(source), target)) if not target.startswith("/") \
            else target.lstrip("/")
        return next((f for f in files if f in (path, path + ".md")), None)
    lowered = target.lower()
    wanted = lowered if FILE_EXT.search(lowered) else lowered.removesuffix(".md") + ".md"
    if "/" in wanted and any(f.lower() == wanted for f in files):
        return next(f for f in files if f.lower() == wanted)
    key = re.sub(r"[\s_-]+", "-", wanted)
    return _closest([f for f in files if re.sub(r"[\s_-]+", "-", f.lower()).endswith("/" + key)
                     or re.sub(r"[\s_-]+", "-", f.lower()) == key], source)


def independent_backlinks(root: Path) -> dict[str, Counter]:
    """target file -> Counter of the notes linking to it (once per link), read from the files alone."""
    files = sorted(note_bytes(root))
    table: dict[str, Counter] = {}
    for source in (f for f in files if f.endswith(".md")):
        for kind, target in written_links((root / source).read_text(encoding="utf-8")):
            found = named(kind, target, source, files)
            if found is not None and found != source:
                table.setdefault(found, Counter())[source] += 1
    return table


def palace_backlinks(root: Path, refs) -> dict[str, Counter]:
    palace = Palace(root)
    out = {}
    for ref in refs:
        target, links = backlinks(palace, ref)
        if links:
            out[target.path] = Counter(link.path for link in links)
    return out


def test_backlinks_are_what_the_files_say(vault):
    expected = independent_backlinks(vault)
    assert expected["Projects/Security.md"] == Counter({"Projects/Plan.md": 3})  # the folder's own, and by path
    assert expected["Security.md"] == Counter({"Home.md": 1, "Journal/Weekly review.md": 1})
    assert expected["attachments/photo.jpg"] == Counter({"Home.md": 1, "Journal/Weekly review.md": 1,
                                                         "People/Ada.md": 1})
    assert expected["Home.md"] == Counter({"Projects/Plan.md": 1, "Journal/Weekly review.md": 1, "People/Ada.md": 1})
    assert palace_backlinks(vault, sorted(note_bytes(vault))) == expected
    shown = json.loads(run(vault, "backlinks", "photo.jpg", "--json").stdout)
    assert shown["path"] == "attachments/photo.jpg" and {b["field"] for b in shown["backlinks"]} == {"embed", "cover"}


@pytest.mark.slow
def test_foam_backlinks_are_what_the_files_say(foam):
    expected = independent_backlinks(foam)
    assert sum(sum(c.values()) for c in expected.values()) > 300
    assert palace_backlinks(foam, sorted(p for p in note_bytes(foam) if p.endswith(".md"))) == \
        {k: v for k, v in expected.items() if k.endswith(".md")}


# ---- mv keeps every byte it need not change --------------------------------------------------------------


def moved_back(root: Path, moves: list[tuple[str, str, str]]) -> None:
    """Each (path, new name, the path it gets) moved there and back: every file has the bytes it had."""
    before = note_bytes(root)
    for path, name, new_path in moves:
        result = json.loads(run(root, "mv", path, name, "--json").stdout)
        assert result["new_path"] == new_path
        written = set(result["rewritten"]) | {path, new_path}
        after = note_bytes(root)
        assert {p for p in set(before) | set(after) if before.get(p) != after.get(p)} <= written
        run(root, "mv", new_path, path.removesuffix(".md"))  # its path from the root: back to its folder
        assert note_bytes(root) == before, (path, name)


def test_mv_there_and_back_gives_every_note_its_bytes(vault):
    notes = sorted(p for p in note_bytes(vault) if p.endswith(".md") and p != "Projects/Security.md")
    assert len(notes) == 5
    renamed = [(p, posixpath.basename(p).removesuffix(".md") + " moved",
                p.removesuffix(".md") + " moved.md") for p in notes]
    moved_back(vault, renamed)  # every note renamed in its folder
    moved_back(vault, [("Journal/Weekly review.md", "Archive/Old/Weekly review", "Archive/Old/Weekly review.md")])


SHARED_MOVES = [  # a move, and the links written with a path so that each names what it named, there and back
    ("Projects/Security.md", "Security moved", {"Projects/Plan.md": (b"[[Security]]", b"[[Projects/Security]]")}),
    ("Projects/Security.md", "Journal/Security", {"Projects/Plan.md": (b"[[Security]]", b"[[Projects/Security]]"),
                                                  "Journal/Weekly review.md": (b"[[Security]]", b"[[Security.md]]")}),
    ("Projects/Plan.md", "People/Plan", {"Projects/Plan.md": (b"[[Security]]", b"[[Projects/Security]]")}),
]


@pytest.mark.parametrize(("path", "name", "written"), SHARED_MOVES)
def test_mv_where_a_name_is_shared_keeps_every_link_on_its_note(vault, path, name, written):
    """Projects/Security.md shares its name with Security.md, and Projects/Plan.md links it bare (its folder's).
    A move that would let a bare link name another note writes that link with a path (as Obsidian writes a
    shared name): moved away, Plan's `[[Security]]` would name the root's note; renamed back to the shared name,
    it is written `[[Projects/Security]]`, which no reading of a bare name can take for the root's; a namesake
    moved into Journal/ would take the root's bare link there. Only those links differ after the round trip."""
    before = note_bytes(vault)
    targets = {ref: {b["path"] for b in json.loads(run(vault, "backlinks", ref, "--json").stdout)["backlinks"]}
               for ref in ("Security.md", "Projects/Security.md")}
    moved = json.loads(run(vault, "mv", path, name, "--json").stdout)["new_path"]
    renamed = {ref if ref != path else moved: linking for ref, linking in targets.items()}
    for ref, linking in renamed.items():
        shown = json.loads(run(vault, "backlinks", ref, "--json").stdout)["backlinks"]
        assert {b["path"] if b["path"] != moved else path for b in shown} == linking, ref
    run(vault, "mv", moved, path.removesuffix(".md"))
    after = note_bytes(vault)
    assert {p for p in before if before[p] != after[p]} == set(written)
    for relpath, (old, new) in written.items():
        assert after[relpath] == before[relpath].replace(old, new)


def test_mv_rewrites_the_links_in_their_own_form(vault):
    run(vault, "mv", "Journal/Weekly review.md", "Weekly plan")
    home = (vault / "Home.md").read_text()
    assert "| review | [[Weekly plan\\|the weekly review]]  |" in home  # the escape and the spacing kept
    assert "[[Weekly plan#Goals]]. ^callout1" in home and "![[Weekly plan#^goals]]" in home
    assert "    [[Ghost in indented code]]" in home and "`[[Ghost in inline code]]`" in home
    plan = (vault / "Projects/Plan.md").read_text()
    assert "related:\n  - \"[[Security]]\"   # the one in Projects/\n  - '[[Weekly plan]]'\n---" in plan
    ada = (vault / "People/Ada.md").read_text()
    assert "friends: ['[[Weekly plan|review]]', \"[[Plan]]\"]" in ada and "[[Journal/Weekly plan]]" in ada
    run(vault, "mv", "Projects/Security.md", "Access")
    plan = (vault / "Projects/Plan.md").read_text()
    assert '  - "[[Access]]"   # the one in Projects/' in plan and "links [[Access]], the one" in plan
    assert "[[Security]] (the one in this folder)" in (vault / "Home.md").read_text()  # the root's: not moved


def test_a_rename_onto_a_shared_name_writes_the_shortest_path(vault):
    run(vault, "mv", "Journal/Weekly review.md", "Security")
    home = (vault / "Home.md").read_text()
    assert "Start at [[Journal/Security]] and [[Security]]" in home  # a bare name would be the root's note
    assert "[[Journal/Security\\|the weekly review]]" in home
    shown = json.loads(run(vault, "backlinks", "Journal/Security.md", "--json").stdout)["backlinks"]
    assert Counter(b["path"] for b in shown)["Home.md"] == 4


def test_a_bare_path_link_gets_a_name_with_a_space_encoded(tmp_path):
    """Foam's reference definitions and Markdown links name files by bare paths: a space there would split the
    link, so it is written `%20` (`<...>` holds it as it is), and renaming back gives the bytes they had."""
    source = tmp_path / "source"
    (source / "docs").mkdir(parents=True)
    (source / "docs/tags.md").write_text("# Tags\n")
    (source / "index.md").write_text("See [tags](docs/tags.md) and [again](<docs/tags.md>).\n\n"
                                      "[tags]: docs/tags.md 'Tags'\n")
    root = adopted(source, tmp_path / "vault")
    run(root, "mv", "docs/tags.md", "Tags and labels")
    assert (root / "index.md").read_text() == ("See [tags](docs/Tags%20and%20labels.md) and [again](<docs/Tags and "
                                               "labels.md>).\n\n[tags]: docs/Tags%20and%20labels.md 'Tags'\n")
    assert len(json.loads(run(root, "backlinks", "docs/Tags and labels.md", "--json").stdout)["backlinks"]) == 3
    run(root, "mv", "docs/Tags and labels.md", "tags")
    assert (root / "index.md").read_text() == (source / "index.md").read_text()


# ---- property links, attachments, shared names in every command -------------------------------------------


def test_rm_refuses_while_a_property_links_the_note(vault):
    result = run(vault, "rm", "Home", code=1)
    assert "(up)" in result.output and "(related)" in result.output
    assert (vault / "Home.md").exists()


def test_lint_reports_a_broken_property_link_and_a_missing_file_only(vault):
    problems = json.loads(run(vault, "lint", "--json").stdout)["problems"]
    assert [(p["path"], p["code"]) for p in problems if p["severity"] == "error"] == []
    missing = [(p["path"], p["message"]) for p in problems if p["code"] == "missing-file"]
    assert missing == [("Journal/Weekly review.md", "link to a file that is not in the vault 'song.mp3'")]
    note = vault / "People/Ada.md"
    note.write_text(note.read_text().replace('cover: "[[photo.jpg]]"', 'cover: "[[photo.jpg]]"\nnext: "[[Nobody]]"'))
    broken = [p for p in json.loads(run(vault, "lint", "--json", code=1).stdout)["problems"]
              if p["severity"] == "error" and p["code"] != "stale-index"]  # the note changed since `palace index`
    assert [(p["path"], p["line"], p["code"]) for p in broken] == [("People/Ada.md", 5, "broken-link")]


def test_shared_names_resolve_from_where_the_link_is(vault):
    def sources(ref: str) -> set[str]:
        return {b["path"] for b in json.loads(run(vault, "backlinks", ref, "--json").stdout)["backlinks"]}

    assert sources("Projects/Security.md") == {"Projects/Plan.md"}
    assert sources("Security.md") == {"Home.md", "Journal/Weekly review.md"}
    shared = [p for p in json.loads(run(vault, "lint", "--json").stdout)["problems"] if p["code"] == "shared-name"]
    assert {(p["path"], "folder wins" in p["message"]) for p in shared} == {
        ("Home.md", True), ("Projects/Plan.md", True), ("Journal/Weekly review.md", False)}


def test_add_links_the_way_the_vault_does(vault):
    run(vault, "add", "call the plumber about the tap", "--links", "journal.weekly-review,Projects/Security.md")
    new = [p for p in note_bytes(vault) if p.startswith("inbox/")]
    assert len(new) == 1
    text = (vault / new[0]).read_text()
    assert "links: ['[[Weekly review]]', '[[Projects/Security]]']" in text
    assert new[0] in {b["path"] for b in json.loads(run(vault, "backlinks", "Projects/Security.md",
                                                        "--json").stdout)["backlinks"]}


def test_reads_of_the_cli_and_the_mcp_server_change_no_byte(vault):
    from palace_cli.mcp import PalaceTools

    before = note_bytes(vault)
    for command in (["index"], ["list"], ["search", "locks and keys"], ["recall", "who may open a project?"],
                    ["lint"], ["backlinks", "Home"], ["backlinks", "photo.jpg"], ["tags"], ["show", "Plan"],
                    ["domains"], ["index", "--check"]):
        run(vault, *command, code=None)
    tools = PalaceTools(Palace(vault))
    tools.recall("what does the plan link?")
    tools.search("weekly review goals")
    tools.get("Projects/Plan.md")
    tools.status()
    assert note_bytes(vault) == before
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=vault,
                            capture_output=True, text=True, check=True).stdout
    assert status == ""  # nothing the vault tracked changed


@pytest.mark.slow
def test_foam_mv_there_and_back(foam):
    linked = sorted(independent_backlinks(foam).items(), key=lambda item: -sum(item[1].values()))
    path = next(p for p, _ in linked if p.endswith(".md") and "/" in p)
    stem = posixpath.basename(path).removesuffix(".md")
    moved_back(foam, [(path, stem + " renamed", posixpath.join(posixpath.dirname(path), stem + " renamed.md"))])


def test_the_vault_data_is_as_committed():
    """The test vault's files are what the tests above describe (a change there changes what they test)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in VAULT.rglob("*") if p.is_file()):
        digest.update(path.relative_to(VAULT).as_posix().encode() + b"\0" + path.read_bytes())
    assert len([p for p in VAULT.rglob("*") if p.is_file()]) == 10
    assert digest.hexdigest() == "befeb50e7decc258014407cf9ba41100c0b9f56990edc243c53bc40473d3b6d1"
