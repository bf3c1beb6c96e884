"""Links as vaults write them (core/links.py), and the names they resolve by (core/names.py): what is a link and
what is not, escaped pipes, property links, files, Obsidian's rule for shared names, the name a link is written
with in each vault style."""

from __future__ import annotations

import pytest

from palace_cli.core.links import inert_links, note_links, property_links, property_targets
from palace_cli.core.names import Files, Names, link_style
from palace_cli.core.noteedit import rename_links
from palace_cli.core.notefile import load_frontmatter, parse_note, split_frontmatter
from palace_cli.core.notes import Memory
from palace_cli.errors import Ambiguous


def targets(body: str, files: bool = False) -> list[str]:
    return [link.target for link in note_links(body, files=files)]


# ---- what is a link, what is not ----------------------------------------------------------------------


@pytest.mark.parametrize("body, found", [
    ("See [[A]].\n\n    [[Indented code]]\n\nand [[B]]\n", ["A", "B"]),            # an indented code block
    ("\tlead [[Tab code]]\n\n[[B]]\n", ["B"]),                                      # at the start, with a tab
    ("A paragraph\n    [[Lazy]] continues it\n", ["Lazy"]),                        # no blank line: no code block
    ("- item\n\n    [[In the item]]\n", ["In the item"]),                           # a list item's own paragraph
    ("<!-- [[Hidden]] and\n[[Hidden too]] -->\n[[Shown]]\n", ["Shown"]),              # an HTML comment, over lines
    ("<!-- never closed [[Kept]]\n", ["Kept"]),                                       # an unclosed `<!--` hides nothing
    ("$$\nx = [[Math]]\n$$\n\n[[After]]\n", ["After"]),                               # display math
    ("costs $$5 [[Priced]]\n\nand $$6\n", ["Priced"]),                                # `$$` across a blank line: no math
    ("`[[Inline]]` and [[Real]]\n```\n[[Fenced]]\n```\n", ["Real"]),                # code, inline and fenced
    ("> [!note] Callout\n> See [[Inside]] ^block1\n", ["Inside"]),                    # a callout's links are links
    ("${query[[from index.pages() limit 1]]} and [[Real]]\n", ["Real"]),               # SilverBullet's Lua query
    ("${query[[\n  from p = index.pages()\n  select {ADR = \"[[\" .. p.name .. \"]]\"}\n]]}\n[[After]]\n",
     ["After"]),                                                                       # over lines
    ("${some(query[[from a]]) or template.new[==[\n* [[${ref}]]\n]==](a)} [[Out]]\n", ["Out"]),  # nested strings
    ('${f("} [[In a string]]")} [[Out]]\n', ["Out"]),                                  # a brace in a Lua string
    ("a ${never closed [[Kept]]\n\n{ [[Also]] }\n", ["Kept", "Also"]),               # closes in no paragraph
    ("`${x}` [[A]] ${ [[B]] }\n", ["A"]),                                             # inline code is no expression
])
def test_what_is_a_link(body, found):
    assert targets(body) == found


def test_an_escaped_pipe_in_a_table_cell_is_no_part_of_the_target():
    body = "| a | [[Old name\\|label]] |\n| b | ![[photo.jpg\\|100]] |\n| c | [[Old name#Part\\|x]] |\n"
    links = note_links(body, files=True)
    assert [(link.target, link.fragment, link.file) for link in links] == [
        ("Old name", "", False), ("photo.jpg", "", True), ("Old name", "Part", False)]
    assert body[links[0].start:links[0].end] == "Old name"  # the backslash stays where it is on a rename
    assert [link.target for link in note_links(body)] == ["Old name", "Old name"]  # files only when asked


def test_silverbullet_meta_and_position_links_name_the_page():
    body = "[[^Library/Std]] [[CHANGELOG@123]] [[CHANGELOG@L12c42|see]] ![[Page@l3]] [[^Std/Tag Page#Use]] [[@12]]\n"
    links = note_links(body)
    assert [(link.target, link.meta, link.fragment) for link in links] == [
        ("Library/Std", True, ""), ("CHANGELOG", False, ""), ("CHANGELOG", False, ""), ("Page", False, ""),
        ("Std/Tag Page", True, "Use")]  # `[[@12]]` is a place in the page itself
    assert [body[link.start:link.end] for link in links] == [
        "Library/Std", "CHANGELOG", "CHANGELOG", "Page", "Std/Tag Page"]  # a rename keeps the caret and the place
    assert property_targets({"up": "[[^Library/Std@5]]"}) == [("up", "Library/Std", False)]
    assert rename_links(body, {"CHANGELOG": "Changes", "Library/Std": "Lib"}) == body.replace(
        "CHANGELOG@", "Changes@").replace("^Library/Std]]", "^Lib]]")


def test_files_are_links_when_asked():
    body = "![[board.canvas]] [[manual.pdf#page=2]] ![a](img/a.png) [b](docs/b.pdf) [c](c.md) [w](https://x.org/a.png)\n"
    assert [(link.target, link.form, link.file) for link in note_links(body, files=True)] == [
        ("board.canvas", "embed", True), ("manual.pdf", "wiki", True), ("img/a.png", "image", True),
        ("docs/b.pdf", "markdown", True), ("c.md", "markdown", False)]


FRONT = ('up: "[[Home]]"\nrelated:\n  - "[[Security]]"   # a comment [[Not a link]]\n  - \'[[Weekly review|the review]]\'\n'
         'friends: ["[[Ada]]", plain]\ncover: "[[photo.jpg]]"\nnested: [[Unquoted]]\n')


def test_property_links_are_the_wikilinks_of_string_values():
    meta = load_frontmatter(FRONT, "x.md")
    assert property_targets(meta) == [("up", "Home", False), ("related", "Security", False),
                                      ("related", "Weekly review", False), ("friends", "Ada", False),
                                      ("cover", "photo.jpg", True)]  # `nested: [[x]]` is a YAML list, no link
    links = property_links(FRONT, meta, files=True)
    assert [(link.key, link.target, link.line) for link in links] == [
        ("up", "Home", 2), ("related", "Security", 4), ("related", "Weekly review", 5), ("friends", "Ada", 6),
        ("cover", "photo.jpg", 7)]
    assert all(FRONT[link.start:link.end] == link.target for link in links)


def test_a_note_counts_its_property_links():
    memory = parse_note(f"---\n{FRONT}links: [\"[[Plan]]\", saga]\n---\n# T\n\n[[Body]]\n", "a/t.md", "a")
    assert memory.property_links == ["Home", "Security", "Weekly review", "Ada", "Plan"]
    assert memory.links == ["saga"] and memory.body_links == ["Body"]
    assert memory.all_links == ["saga", "Body", "Home", "Security", "Weekly review", "Ada", "Plan"]


def test_rename_links_keeps_every_other_byte():
    text = ('---\r\nup: "[[old]]"\r\nrelated:\r\n  - \'[[old|label]]\'\r\n---\r\n# T\r\n\r\n| x | [[old\\|cell]] |\r\n'
            '[[old#Part]] [[ old ]] `[[old]]`\r\n\r\n    [[old]]\r\n\r\n<!-- [[old]] -->\r\n')
    renamed = rename_links(text, {"old": "new"})
    assert renamed == text.replace("[[old", "[[new").replace("[[ old ]]", "[[ new ]]").replace(
        "`[[new]]`", "`[[old]]`").replace("    [[new]]", "    [[old]]").replace("<!-- [[new]] -->", "<!-- [[old]] -->")
    assert rename_links(renamed, {"new": "old"}) == text


def test_inert_links_are_shown_as_written_and_link_nothing():
    text = "Go to [[Home]] and ![[photo.jpg|100]]; [not](a.md) stays."
    inert = inert_links(text)
    assert inert == "Go to \\[\\[Home\\]\\] and !\\[\\[photo.jpg|100\\]\\]; [not](a.md) stays."
    assert targets(inert, files=True) == ["a.md"]


def test_the_frontmatter_read_by_rename_is_the_one_reader():
    assert split_frontmatter("---\nup: x\n---\nbody\n", "x.md")[:2] == ("up: x\n", "body\n")


# ---- shared names, as Obsidian resolves them -----------------------------------------------------------


def memory(path: str, **fields) -> Memory:
    stem = path.rsplit("/", 1)[-1].removesuffix(".md")
    return Memory(id=fields.pop("id", path.removesuffix(".md").lower().replace("/", ".").replace(" ", "-")),
                  subject=fields.pop("subject", stem), anchor="", verify="", domain="", path=path,
                  derived_id=fields.pop("derived_id", True), **fields)


SHARED = Names([memory("Security.md"), memory("Projects/Security.md"), memory("Archive/Old/Security.md"),
                memory("Journal/Weekly review.md"), memory("Home.md"), memory("Teams/Red/Notes.md"),
                memory("Teams/Tan/Notes.md"), memory("Projects/Plan.md")])


@pytest.mark.parametrize("target, source, expected", [
    ("Security", "Home.md", "Security.md"),                                   # the linking note's folder (the root)
    ("Security", "Projects/Plan.md", "Projects/Security.md"),                 # the linking note's folder
    ("Security", "Journal/Weekly review.md", "Security.md"),                  # else the shortest path
    ("security", "Archive/Old/x.md", "Archive/Old/Security.md"),              # without case, in its folder
    ("Projects/Security", "Home.md", "Projects/Security.md"),                 # a path names that one
    ("Old/Security", "Home.md", "Archive/Old/Security.md"),                   # by its last folders
    ("Security.md", "Projects/Plan.md", "Security.md"),                       # a path from the root
    ("Notes", "Teams/Red/x.md", "Teams/Red/Notes.md"),                        # shared at one length: the folder
    ("Plan", "Journal/Weekly review.md", "Projects/Plan.md"),                 # not shared: anywhere
])
def test_shared_names_resolve_as_obsidian_does(target, source, expected):
    assert SHARED.resolve(target, source=source).memory.path == expected


@pytest.mark.parametrize("target, source, expected", [
    ("Gone/Security", "Home.md", None),                   # no such folder: no note, whatever `Security` notes there are
    ("Journal/Plan", "Home.md", None),                    # `Plan` is in Projects/, not Journal/ (a note Journal/ lost)
    ("Journal/Plan", "Journal/x.md", None),               # written in Journal/ itself alike
    ("[x](Journal/Plan.md)", "Home.md", None),            # a Markdown link's folder alike
    ("[x](../Gone/Plan.md)", "Journal/x.md", None),
    ("Projects/Plan", "Home.md", "Projects/Plan.md"),
    ("Plan.md", "Home.md", "Projects/Plan.md"),           # a file name with `.md`, no folder: anywhere, as `[[Plan]]`
    ("Plan", "Home.md", "Projects/Plan.md"),
    ("[x](Plan.md)", "Journal/x.md", "Projects/Plan.md"),  # a Markdown link with no folder: by its name anywhere
    ("[x](Security.md)", "Projects/x.md", "Projects/Security.md"),  # the linking note's folder first
    ("[x](Security.md)", "Journal/x.md", "Security.md"),
])
def test_a_link_with_a_folder_names_a_note_in_it_or_none(target, source, expected):
    """Obsidian leaves `[[Journal/Plan]]` unresolved when Journal/ holds no Plan: a folder in a link is the
    writer's word for where the note is, so a same-named note elsewhere is not it."""
    if target.startswith("["):
        target = note_links(target)[0].name(source)
    found = SHARED.resolve(target, source=source)
    assert (found.memory.path if found else None) == expected


def test_shared_names_of_one_length_elsewhere_are_ambiguous():
    with pytest.raises(Ambiguous):
        SHARED.resolve("Notes", source="Home.md")  # Teams/Red and Teams/Tan: say which
    assert SHARED.resolve("Security", source="Journal/x.md").shared == ("Projects/Security.md",
                                                                       "Archive/Old/Security.md")


@pytest.mark.parametrize("path, source, style, written", [
    ("Journal/Weekly review.md", "Home.md", "name", "Weekly review"),          # a unique name: the name
    ("Projects/Security.md", "Home.md", "name", "Projects/Security"),          # shared: the shortest path that
    ("Archive/Old/Security.md", "Home.md", "name", "Old/Security"),            # names it alone
    ("Security.md", "Journal/x.md", "name", "Security"),                       # shared, but at the root
    ("Security.md", "Projects/Plan.md", "name", "Security.md"),                # shadowed by the folder's own
    ("Teams/Red/Notes.md", "Home.md", "name", "Red/Notes"),
    ("Journal/Weekly review.md", "Home.md", "path", "Journal/Weekly review"),  # a vault of paths
    ("Journal/Weekly review.md", "Home.md", "id", "journal.weekly-review"),    # a vault of palace ids
])
def test_the_name_a_link_is_written_with(path, source, style, written):
    assert SHARED.link_name(SHARED.paths[path], style, source) == written
    assert SHARED.resolve(written, source=source).memory.path == path  # it names the note it was written for


def test_the_style_of_a_vault_is_the_majority_of_its_wikilinks():
    links = [("Home.md", "Weekly review"), ("Home.md", "Plan"), ("Home.md", "Projects/Security")]  # shared: a name
    assert link_style(SHARED, links) == "name"
    assert link_style(SHARED, [("Home.md", "Journal/Weekly review"), ("Home.md", "Projects/Plan"),
                               ("Home.md", "Plan")]) == "path"
    assert link_style(SHARED, [("Home.md", "journal.weekly-review"), ("Home.md", "projects.plan")]) == "id"
    assert link_style(SHARED, [("Home.md", "Journal/Weekly review.md"), ("Home.md", "Nowhere")]) == "name"
    own = Names([memory("memories/d/saga-pattern.md", id="saga-pattern", derived_id=False),
                 memory("memories/d/two-phase-commit.md", id="two-phase-commit", derived_id=False)])
    assert link_style(own, [("memories/d/saga-pattern.md", "two-phase-commit")]) == "name"  # an id that is the name
    assert own.link_name(own.ids["saga-pattern"], "name", "memories/d/two-phase-commit.md") == "saga-pattern"


def test_files_resolve_by_name_anywhere_the_linking_notes_folder_first():
    files = Files(["attachments/photo.jpg", "Trips/photo.jpg", "docs/manual.pdf", "board.canvas"])
    assert files.resolve("photo.jpg", "Home.md") == "Trips/photo.jpg"  # the shortest path
    assert files.resolve("photo.jpg", "attachments/x.md") == "attachments/photo.jpg"  # the folder's own
    assert files.resolve("PHOTO.JPG", "Home.md") == "Trips/photo.jpg"  # without case
    assert files.resolve("docs/manual.pdf", "a/b.md") == "docs/manual.pdf"
    assert files.resolve("manual.pdf", "a/b.md", anywhere=False) is None  # a Markdown link's path is a path
    assert files.resolve("song.mp3", "Home.md") is None
