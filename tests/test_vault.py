"""A palace over the notes people already have (issue 22): a vault adopted where it lies, every link form,
renames that keep the vault's naming, long notes by section, and no note changed by a read."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import SHARED
from palace_cli.backends import Generator
from palace_cli.cli import cli
from palace_cli.core.tokens import contains_phrase
from palace_cli.errors import PalaceError
from palace_cli.palace import Palace

FOAM = SHARED / "data" / "foam-docs"
needs_foam = pytest.mark.skipif(not FOAM.is_dir(), reason=f"the Foam documentation vault is not at {FOAM} "
                                                           "(../shared is absent)")


def run(root: Path, *args, input: str | None = None, code: int | None = 0):
    """The CLI on a palace; exits with `code` (None: any code, no crash)."""
    result = CliRunner().invoke(cli, ["--palace", str(root), *[str(a) for a in args]], input=input,
                                catch_exceptions=False)
    assert code is None or result.exit_code == code, result.output
    return result


def writable_copy(source: Path, target: Path) -> Path:
    """A copy of a vault the test may change (the shared data is read-only)."""
    shutil.copytree(source, target)
    for folder, _dirs, names in os.walk(target):
        os.chmod(folder, 0o755)
        for name in names:
            os.chmod(os.path.join(folder, name), 0o644)
    return target


def note_hashes(root: Path) -> dict[str, str]:
    """sha256 of every Markdown file that is not palace's own (its generated index, its cache)."""
    out = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in (".palace", ".palace-index", "_palace", ".git")]
        for name in names:
            if name.endswith(".md"):
                path = Path(folder) / name
                out[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def md_files(root: Path) -> set[str]:
    return set(note_hashes(root))


@pytest.fixture
def foam(tmp_path) -> Path:
    if not FOAM.is_dir():
        pytest.skip(f"the Foam documentation vault is not at {FOAM} (../shared is absent)")
    return writable_copy(FOAM, tmp_path / "foam")


# ---- adopt in place ----------------------------------------------------------------------------


@needs_foam
def test_init_adopts_the_vault_and_no_read_changes_a_note(foam):
    before = note_hashes(foam)
    names_before = {p.relative_to(foam).as_posix() for p in foam.rglob("*")}
    out = CliRunner().invoke(cli, ["init", str(foam)], catch_exceptions=False)
    assert out.exit_code == 0 and "Adopted 86 notes" in out.output and "no note was changed" in out.output
    written = {p.relative_to(foam).as_posix() for p in foam.rglob("*")} - names_before
    top = {w.split("/")[0] for w in written}
    assert top <= {"palace.toml", ".gitignore", ".gitattributes", ".palace", ".palace-index", "reviews"}, top
    listed = json.loads(run(foam, "list", "--json").stdout)["memories"]
    assert {m["path"] for m in listed} == md_files(foam)  # every note listed, nothing else
    for command in (["index"], ["list"], ["search", "wikilink rename"], ["recall", "how do I rename a note?"],
                    ["lint"], ["backlinks", "wikilinks"], ["tags"], ["show", "Wikilinks"], ["domains"],
                    ["index", "--check"]):
        run(foam, *command, code=None if command[0] in ("lint", "index") else 0)
    assert note_hashes(foam) == before


@needs_foam
def test_the_watcher_and_the_mcp_reads_change_no_note(foam):
    from palace_cli.editing.authoring import init
    from palace_cli.mcp import PalaceTools
    from palace_cli.watch import Watcher

    init(foam)
    before = note_hashes(foam)
    palace = Palace(foam)
    events = []
    watcher = Watcher(palace, events.append, embedder=None, debounce=0.1, max_delay=0.5)
    watcher.start()
    try:
        tools = PalaceTools(Palace(foam))
        assert "handed: " in tools.recall("how do I add a block anchor to a paragraph?")
        assert "Block Anchors" in tools.search("block anchors")
        tools.get("user/features/block-anchors.md")
        tools.status()
        tools.wake_up()
        (foam / "user" / "new idea.md").write_text("# New idea\n\nA note written while palace watches.\n")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(
                e.kind == "refreshed" and "user/new idea.md" in e.report.added for e in events):
            time.sleep(0.1)
        assert any(e.kind == "refreshed" and "user/new idea.md" in e.report.added for e in events)
    finally:
        watcher.stop()
    after = note_hashes(foam)
    assert after.pop("user/new idea.md")
    assert after == before


def test_an_empty_folder_still_gets_the_memories_layout(tmp_path):
    out = CliRunner().invoke(cli, ["init", str(tmp_path / "kb")], catch_exceptions=False)
    assert out.exit_code == 0 and "Created a palace" in out.output
    assert (tmp_path / "kb" / "memories").is_dir() and (tmp_path / "kb" / "INDEX.md").is_file()
    assert "[notes]" not in (tmp_path / "kb" / "palace.toml").read_text()


VAULT = {
    "Garden/Watering schedule.md": "# Watering schedule\n\nWater the beds at dawn, twice a week in July.\n",
    "Garden/Tomato bed.md": (
        "---\ntags: [garden]\naliases: [Tomatoes]\n---\n# Tomato bed\n\n"
        "See [[Watering schedule]] for water. #vegetables\n\n![[tomato-bed.png]]\n"),
    "Journal/2024-07-01.md": "Planted [[Tomatoes|the tomatoes]] today. #journal `#notatag`\n",
    "Templates/Daily.md": "# {{date}}\n\n[[Nothing]]\n",
    "README.md": "Notes of the garden. See [the schedule](Garden/Watering%20schedule.md).\n",
    ".obsidian/workspace.md": "not a note\n",
}


def make_vault(root: Path, files: dict[str, str] = VAULT) -> Path:
    for relpath, text in files.items():
        path = root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def vault(tmp_path) -> Path:
    root = make_vault(tmp_path / "vault")
    CliRunner().invoke(cli, ["init", str(root)], catch_exceptions=False)
    return root


def test_domains_ids_subjects_tags_of_an_adopted_vault(vault):
    listed = {m["path"]: m for m in json.loads(run(vault, "list", "--json").stdout)["memories"]}
    assert set(listed) == {"Garden/Watering schedule.md", "Garden/Tomato bed.md", "Journal/2024-07-01.md",
                           "README.md"}  # templates and .obsidian/ are not notes
    assert listed["Garden/Watering schedule.md"]["id"] == "garden.watering-schedule"
    assert listed["Garden/Watering schedule.md"]["domain"] == "Garden"
    assert listed["README.md"]["domain"] == "root" and listed["README.md"]["id"] == "readme"
    assert listed["Journal/2024-07-01.md"]["subject"] == "2024-07-01"
    tags = {t["tag"]: t["ids"] for t in json.loads(run(vault, "tags", "--json").stdout)["tags"]}
    assert tags["vegetables"] == ["garden.tomato-bed"] and tags["journal"] == ["journal.2024-07-01"]
    assert "notatag" not in tags
    lint = json.loads(run(vault, "lint", "--json").stdout)
    assert lint["errors"] == 0, lint


@pytest.mark.parametrize("relpath", ["Garden/Watering schedule.md", "Garden/Watering.md"])
def test_lint_the_editor_and_the_index_give_a_vault_note_one_domain(vault, relpath):
    """One rule for a note's domain (NoteRules.domain_of): lint of an edited note, the language server and the
    index agree in an adopted vault, for a note the index holds and for a new file it has not seen yet (lint
    once read both as in no domain)."""
    from palace_cli.editing.lint import edited_memory
    from palace_cli.lsp.features import note_domain

    palace = Palace(vault)
    indexed = {m.path: m.domain for m in palace.scan().memories.values()}
    text = "# Watering\n\nWater the beds at dawn.\n"
    assert edited_memory(palace, relpath, text).domain == note_domain(None, relpath, palace.rules) == "Garden"
    assert indexed.get(relpath) == ("Garden" if relpath in VAULT else None)


def test_palace_writes_only_its_own_files(tmp_path):
    root = make_vault(tmp_path / "vault")
    before = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    CliRunner().invoke(cli, ["init", str(root)], catch_exceptions=False)
    run(root, "index")
    after = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert {k: v for k, v in after.items() if k in before} == before
    new = {path.split("/")[0] for path in set(after) - set(before)}
    assert new <= {"palace.toml", ".gitignore", ".gitattributes", ".palace", ".palace-index", "reviews"}, new
    assert not (root / ".git").exists()  # a folder of notes is not made a repository behind its owner's back


def test_include_exclude_and_domain_rules_come_from_palace_toml(vault):
    config = vault / "palace.toml"
    config.write_text(config.read_text().replace('exclude = ["templates/**", "_templates/**"]',
                                                 'exclude = ["Journal/**"]\ndomains = "single"\nroot_domain = "all"'))
    listed = {m["path"]: m["domain"] for m in json.loads(run(vault, "list", "--json").stdout)["memories"]}
    assert set(listed) == {"Garden/Watering schedule.md", "Garden/Tomato bed.md", "Templates/Daily.md", "README.md"}
    assert set(listed.values()) == {"all"}


def test_a_file_of_your_own_is_never_written_over_by_the_generated_index(tmp_path):
    root = make_vault(tmp_path / "vault", {"index.md": "# My index\n", ".palace-index/INDEX.md": "mine\n",
                                           "_palace/INDEX.md": "mine too\n"})
    CliRunner().invoke(cli, ["init", str(root)], catch_exceptions=False)
    run(root, "index")
    assert (root / ".palace-index" / "INDEX.md").read_text() == "mine\n"
    assert (root / "_palace" / "INDEX.md").read_text() == "mine too\n"  # not palace's folder now: a note
    assert (root / "index.md").read_text() == "# My index\n"


# ---- links the way vaults write them ------------------------------------------------------------------

LINKS = {
    "Garden/Watering schedule.md": "# Watering schedule\n\nWater at dawn.\n\n## Dawn\nEarly. ^blk1\n",
    "Notes/Garden/Watering schedule.md": "# Another schedule\n\nA note of the same name, deeper.\n",
    "Garden/Tomato bed.md": (
        "---\ntags: [garden]\n---\n# Tomato bed\r\n\r\n"
        "[[Watering schedule]] [[watering schedule|the schedule]] [[Garden/Watering schedule#Dawn]] "
        "[[Watering schedule.md]] [[watering-schedule]] ![[Watering schedule]] [[Watering schedule#^blk1]] "
        "[[WATERING SCHEDULE]]\r\n"
        "[sched](Watering%20schedule.md#Dawn) [abs](/Garden/Watering%20schedule.md) [ang](<Watering schedule.md>) "
        "[web](https://example.com/Watering%20schedule.md) ![img](tomato.png) [[#Soil]]\r\n"
        "`[[Watering schedule]]` in code\r\n\r\n```\r\n[[Watering schedule]]\r\n```\r\n\r\n## Soil\r\nLoam.\r\n\r\n"
        "[watering schedule]: Watering%20schedule.md \"Watering schedule\"\r\n"),
    "Notes/Index.md": "See [[Garden/Watering schedule]] and [w](../Garden/Watering%20schedule.md).\n",
}
LINK_LINES = [("body", 6)] * 5 + [("embed", 6), ("body", 6), ("body", 6)] + [("markdown", 7)] * 3 + [("reference", 17)]


@pytest.fixture
def linked(tmp_path) -> Path:
    root = make_vault(tmp_path / "vault", {})
    for relpath, text in LINKS.items():
        path = root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
    CliRunner().invoke(cli, ["init", str(root)], catch_exceptions=False)
    return root


def test_every_link_form_resolves_by_the_one_resolver(linked):
    found = json.loads(run(linked, "backlinks", "Garden/Watering schedule.md", "--json").stdout)["backlinks"]
    from_bed = [(b["field"], b["line"]) for b in found if b["path"] == "Garden/Tomato bed.md"]
    assert from_bed == LINK_LINES  # nothing in code, no web link, no image, no self link
    assert {(b["path"], b["field"]) for b in found if b["path"] == "Notes/Index.md"} == {
        ("Notes/Index.md", "body"), ("Notes/Index.md", "markdown")}
    problems = json.loads(run(linked, "lint", "--json").stdout)["problems"]
    shared = [p for p in problems if p["code"] == "shared-name"]
    assert shared and all(p["path"] == "Garden/Tomato bed.md" for p in shared)
    assert "the note in the linking note's folder wins" in shared[0]["message"]  # Garden/, as Obsidian picks
    assert not [p for p in problems if p["severity"] == "error"], problems


def test_mv_keeps_the_vaults_naming_and_back_gives_the_same_bytes(linked):
    before = {p: (linked / p).read_bytes() for p in note_hashes(linked)}
    out = run(linked, "mv", "Garden/Watering schedule.md", "Irrigation plan").stdout
    assert "Garden/Watering schedule.md → Garden/Irrigation plan.md" in out
    bed = (linked / "Garden/Tomato bed.md").read_bytes().decode()
    for expected in ("[[Irrigation plan]] [[irrigation plan|the schedule]] [[Garden/Irrigation plan#Dawn]] "
                     "[[Irrigation plan.md]] [[irrigation-plan]] ![[Irrigation plan]] [[Irrigation plan#^blk1]] "
                     "[[IRRIGATION PLAN]]",
                     "[sched](Irrigation%20plan.md#Dawn) [abs](/Garden/Irrigation%20plan.md) [ang](<Irrigation plan.md>)",
                     "[web](https://example.com/Watering%20schedule.md)", "`[[Watering schedule]]` in code",
                     "```\r\n[[Watering schedule]]\r\n```", "[watering schedule]: Irrigation%20plan.md \"Watering"):
        assert expected in bed
    assert (linked / "Notes/Index.md").read_text() == ("See [[Garden/Irrigation plan]] and "
                                                       "[w](../Garden/Irrigation%20plan.md).\n")
    assert (linked / "Notes/Garden/Watering schedule.md").read_bytes() == before["Notes/Garden/Watering schedule.md"]
    assert (linked / "Garden/Irrigation plan.md").read_bytes() == before["Garden/Watering schedule.md"]
    run(linked, "mv", "Garden/Irrigation plan.md", "Watering schedule")
    assert {p: (linked / p).read_bytes() for p in note_hashes(linked)} == before


def test_mv_to_another_folder_rewrites_paths_and_its_own_relative_links(linked):
    before = {p: (linked / p).read_bytes() for p in note_hashes(linked)}
    run(linked, "mv", "Notes/Index.md", "Archive/Old index")
    assert (linked / "Archive/Old index.md").read_text() == ("See [[Garden/Watering schedule]] and "
                                                              "[w](../Garden/Watering%20schedule.md).\n")
    run(linked, "mv", "Garden/Watering schedule.md", "Archive/Watering schedule")
    bed = (linked / "Garden/Tomato bed.md").read_text()
    assert "[[Archive/Watering schedule#Dawn]]" in bed and "[sched](../Archive/Watering%20schedule.md#Dawn)" in bed
    assert "[abs](/Archive/Watering%20schedule.md)" in bed
    run(linked, "mv", "Archive/Watering schedule.md", "Garden/Watering schedule")
    run(linked, "mv", "Archive/Old index.md", "Notes/Index")
    assert {p: (linked / p).read_bytes() for p in note_hashes(linked)} == before


# ---- long notes by section -------------------------------------------------------------------------------


def long_note() -> str:
    parts = ["# Greenhouse\n\nHow the greenhouse is run through the year.\n"]
    topics = {"Heating": "paraffin heater keeps the frost out below four degrees",
              "Ventilation": "roof vents open by a wax piston when it passes twenty degrees",
              "Watering": "capillary matting under the seed trays, refilled from the butt",
              "Pests": "whitefly is kept down by marigolds and a yellow sticky trap"}
    for name, fact in topics.items():
        filler = " ".join(f"{name.lower()} note {i} about routine care and what to check each week." for i in range(8))
        parts.append(f"## {name}\n\n{filler}\n\nThe key point: the {fact}.\n")
    return "\n".join(parts)


def test_recall_hands_the_section_that_answers_with_its_heading_line(tmp_path):
    root = make_vault(tmp_path / "vault", {"Garden/Greenhouse.md": long_note(),
                                          "Garden/Short.md": "# Short\n\nA short note about sheds.\n"})
    CliRunner().invoke(cli, ["init", str(root)], catch_exceptions=False)
    result = json.loads(run(root, "recall", "what opens the roof vents when it gets warm?", "--json").stdout)
    first = result["hits"][0]
    heading_line = long_note().splitlines().index("## Ventilation") + 1
    assert first["kind"] == "section" and first["section"] == ["Greenhouse", "Ventilation"]
    assert (first["path"], first["line"], first["note"]) == ("Garden/Greenhouse.md", heading_line, "garden.greenhouse")
    handed = result["memories"][0]
    assert handed["id"] == "garden.greenhouse"  # cited by its note's id, found where the section starts
    assert (handed["path"], handed["line"], handed["subject"]) == ("Garden/Greenhouse.md", heading_line,
                                                                   "Greenhouse › Ventilation")
    context = run(root, "recall", "what opens the roof vents when it gets warm?", "--format", "prompt").stdout
    assert "wax piston" in context and "paraffin" not in context
    assert f"Garden/Greenhouse.md:{heading_line}" in context
    backlinks = json.loads(run(root, "search", "sheds", "--json").stdout)["hits"]
    assert backlinks[0]["kind"] == "memory"  # a short note stays whole


def test_section_units_follow_edits_and_go_with_their_note(tmp_path):
    root = make_vault(tmp_path / "vault", {"Garden/Greenhouse.md": long_note()})
    CliRunner().invoke(cli, ["init", str(root)], catch_exceptions=False)
    palace = Palace(root)
    palace.refresh(embedder=None)
    keys = set(palace.index.catalog().note_of)
    assert len(keys) == 4  # the short opening joins the first section
    note = root / "Garden/Greenhouse.md"
    note.write_text(note.read_text().replace("wax piston", "brass lever"))
    hits = json.loads(run(root, "search", "brass lever", "--mode", "lexical", "--json").stdout)["hits"]
    assert hits[0]["kind"] == "section" and hits[0]["section"][-1] == "Ventilation"
    assert not json.loads(run(root, "search", "wax piston", "--mode", "lexical", "--json", code=1).stdout)["hits"]
    note.unlink()
    palace = Palace(root)
    palace.refresh(embedder=None)
    assert not palace.index.catalog().note_of and palace.index.text.doc_count() == 0


# ---- a note grows into a memory ---------------------------------------------------------------------------


class Scripted(Generator):
    """A generator that always answers one Image (the writing of evolve is tested, not a model)."""

    model_id, parameters = "scripted", None

    def __init__(self, image: str):
        self.image = image

    def complete(self, prompt, **kwargs):
        return self.image


SCENE = ("You stand in a greenhouse at dawn while a brass octopus waters the beds, each of its eight arms "
         "holding a dripping violet teapot; the glass roof hums and a rooster in galoshes counts the pots aloud, "
         "seventeen, eighteen, nineteen, as the smell of wet loam fills your nose.")


def test_evolve_grows_a_plain_note_into_a_memory_and_keeps_every_byte(vault):
    from palace_cli.study.evolver import evolve

    path = vault / "Garden" / "Watering schedule.md"
    before = path.read_bytes()
    palace = Palace(vault)
    preview = evolve(palace, "Garden/Watering schedule.md", Scripted(SCENE))
    assert preview.lacks == ["image", "anchor", "verify"] and preview.verify and preview.anchor
    assert path.read_bytes() == before  # a preview never writes
    with pytest.raises(PalaceError, match=r"has not opted into palace's template.*add `verify:` to its frontmatter"):
        evolve(palace, "Garden/Watering schedule.md", Scripted(SCENE), accept=True)
    assert path.read_bytes() == before  # a note of the person's own is never written
    config = vault / "palace.toml"
    config.write_text(config.read_text().replace("[notes]\n", '[notes]\ntemplate = ["Garden/**"]\n'))
    palace = Palace(vault)
    evolve(palace, "Garden/Watering schedule.md", Scripted(SCENE), accept=True)
    after = path.read_bytes().decode()
    assert after.startswith(f"---\nanchor: {preview.anchor}\nverify: {preview.verify}\n---\n")
    assert before.decode() in after and after.endswith(f"\n## Image\n{SCENE}\n")
    grown = Palace(vault).memory("Garden/Watering schedule.md")
    assert grown.id == "garden.watering-schedule" and grown.content == "Water the beds at dawn, twice a week in July."
    assert not grown.plain and contains_phrase(grown.image, preview.verify)
    study = json.loads(run(vault, "lint", "--study", "--json").stdout)["problems"]
    assert not [p for p in study if p["path"] == "Garden/Watering schedule.md" and p["code"] == "study-gap"]


# ---- the rules, in tables ----------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern, path, matches", [
    ("**/*.md", "a.md", True), ("**/*.md", "x/y/z.md", True), ("**/*.md", "x/y.txt", False),
    ("templates/**", "templates/daily.md", True), ("templates/**", "Templates/a/b.md", True),  # without case
    ("templates/**", "notes/templates/a.md", False), ("*.excalidraw.md", "x/d.excalidraw.md", True),
    ("/README.md", "README.md", True), ("/README.md", "x/README.md", False), ("README.md", "x/README.md", True),
    ("Journal/202?-*.md", "journal/2024-07-01.md", True), ("[ab]*.md", "b1.md", True), ("[!ab]*.md", "b1.md", False),
])
def test_note_globs(pattern, path, matches):
    from palace_cli.core.layout import glob_pattern

    assert bool(glob_pattern(pattern).fullmatch(path)) is matches


@pytest.mark.parametrize("text, subject", [
    ("Rotate the keys.", "Rotate the keys."),
    ("# A heading\nthen text", "A heading"),
    ("\n\n  first line after blanks  \nsecond", "first line after blanks"),
    ("word " * 30, "word " * 11 + "word…"),  # cut at a word near 60 characters
])
def test_a_captured_thought_takes_its_first_line_as_subject(text, subject):
    from palace_cli.editing.authoring import capture_subject

    assert capture_subject(text) == subject


def test_two_notes_of_one_name_at_the_same_depth_make_a_link_ambiguous(tmp_path):
    root = make_vault(tmp_path / "vault", {"a/x.md": "# X one\n", "b/x.md": "# X two\n", "c.md": "See [[x]].\n"})
    CliRunner().invoke(cli, ["init", str(root)], catch_exceptions=False)
    problems = json.loads(run(root, "lint", "--json", code=1).stdout)["problems"]
    assert [(p["path"], p["code"]) for p in problems] == [("c.md", "ambiguous-link")]
