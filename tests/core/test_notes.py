"""Parsing and writing one note: the contract in docs/note-format.md."""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from palace_cli.errors import NoteError
from palace_cli.core.notefile import load_note, parse_note, read_note_text
from palace_cli.core.noteedit import edit_frontmatter, edit_section, inline_yaml, replace_section, update_frontmatter

EXAMPLES = int(os.environ.get("PALACE_HYPOTHESIS_EXAMPLES", "400"))  # raise it for a long soak
NOTE = """---
id: two-phase-commit   # stable id
subject: Two-Phase Commit (2PC)
anchor: frozen wedding statues
# keywords drive routing
keywords: [2pc, atomic commit]
verify: forty-seven granite couples
links:
  - saga
custom: {nested: [1, 2]}
created: 2026-11-29
---
# Two-Phase Commit (2PC)

## Image
You officiate as forty-seven granite couples freeze mid-vow. [[paxos]]

```markdown
## Image
not a heading: inside a fence [[not-a-link]]
```

## Content
A coordinator asks every participant to prepare.

## Links
- [[saga]]: the alternative
"""


def write(tmp_path: Path, text: str | bytes, name: str = "note.md") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


# ---- parsing ---------------------------------------------------------------------------------


def test_parse_fields_sections_and_lines():
    memory = parse_note(NOTE, "memories/d/two-phase-commit.md", "d")
    assert (memory.id, memory.subject, memory.anchor) == ("two-phase-commit", "Two-Phase Commit (2PC)",
                                                          "frozen wedding statues")
    assert memory.keywords == ["2pc", "atomic commit"]
    assert memory.links == ["saga"]
    assert memory.created == "2026-11-29"
    assert memory.meta["custom"] == {"nested": [1, 2]}
    assert memory.line == 13 and memory.location == "memories/d/two-phase-commit.md:13"
    assert memory.body_line == 13
    assert memory.image.startswith("You officiate") and "not a heading" in memory.image
    assert memory.image_line == 15
    assert memory.content == "A coordinator asks every participant to prepare."
    assert memory.body_links == ["paxos", "saga"]  # [[not-a-link]] sits in a code fence
    assert memory.all_links == ["saga", "paxos"]
    assert memory.field_line("verify") == 7 and memory.field_line("links") == 8
    assert memory.warnings == []


def test_keywords_as_comma_string_and_numbers_as_text():
    text = NOTE.replace("keywords: [2pc, atomic commit]", "keywords: 2pc, atomic commit").replace(
        "subject: Two-Phase Commit (2PC)", "subject: 1984")
    memory = parse_note(text, "n.md", "d")
    assert memory.keywords == ["2pc", "atomic commit"]
    assert memory.subject == "1984"


@pytest.mark.parametrize("old, new, code, line", [
    ("subject: Two-Phase Commit (2PC)", "subject: [a, b]", "bad-type", 3),
    ("keywords: [2pc, atomic commit]", "keywords: {a: 1}", "bad-type", 6),
    ("links:\n  - saga", "links:\n  - [nested]", "bad-type", 8),
    ("created: 2026-11-29", "created: 2026-11-29\nimportance: high", "bad-type", 12),
    ("anchor: frozen wedding statues\n", "", "missing-field", 2),
    ("created: 2026-11-29", "created: 2026-11-29\nanchor: again", "duplicate-key", 12),
    ("## Image\nYou officiate", "## Imagery\nYou officiate", "missing-section", 13),
])
def test_field_problems_are_warnings_with_lines(old, new, code, line):
    memory = parse_note(NOTE.replace(old, new), "n.md", "d")
    found = [(w.code, w.line) for w in memory.warnings]
    assert (code, line) in found


def test_template_hint_counts_as_no_image():
    text = NOTE.replace("You officiate as forty-seven granite couples freeze mid-vow. [[paxos]]",
                        "(One vivid scene (a hint) in second person.)")
    text = re.sub(r"```markdown.*?```\n", "", text, flags=re.DOTALL)
    memory = parse_note(text, "n.md", "d")
    assert memory.image == ""
    assert "placeholder-section" in [w.code for w in memory.warnings]
    kept = parse_note(NOTE.replace("You officiate as", "(Aside) You officiate as"), "n.md", "d")
    assert kept.image.startswith("(Aside)")


# The bad-input table: every case is one clear message naming the file and, where it applies, the line.
BAD_INPUTS = [
    ("yaml-does-not-parse", b"---\nid: x\nsubject: [unclosed\nanchor: a\n---\nbody\n", 4, "not valid YAML"),
    ("yaml-is-a-list", b"---\n- id\n- subject\n---\nbody\n", 2, "not a list"),
    ("yaml-is-a-string", b"---\njust a sentence\n---\nbody\n", 2, "not a string"),
    ("dashes-indented", b"  ---\nid: x\n---\n", 1, "must start at the beginning"),
    ("dashes-after-text", b"Title ---\nid: x\n---\n", 1, "must start at the beginning of a line"),
    ("dashes-not-first-line", b"\n\n---\nid: x\n---\n", 3, "must start at the beginning of the first line"),
    ("closing-indented", b"---\nid: x\n  ---\nbody\n", 3, "closing `---` must start"),
    ("not-closed", b"---\nid: x\nsubject: y\n", 1, "not closed"),
    ("not-utf8", b"---\nid: x\nsubject: caf\xe9\n---\n", 3, "not UTF-8"),
    ("empty", b"", 1, "empty file"),
    ("only-whitespace", b"  \n\n", 1, "empty file"),
    ("only-a-bom", b"\xef\xbb\xbf\n", 1, "empty file"),
    ("too-big", b"---\nid: x\n---\n" + b"x" * 1_000_001, None, "over the 1,000,000 byte limit"),
    ("control-char", b"---\nid: x\nsubject: a\x07b\n---\n", 3, "not valid YAML"),
]



# YAML that parses but must be refused before anything walks it: the cache's JSON, comparisons and str()
# would expand the bomb to gigabytes, recurse forever on a cycle, or overflow the stack on deep nesting.
BAD_INPUTS += [
    ("alias-recursive", b"---\nid: x\nsubject: &s [a, *s]\n---\n", 3, "refers to the collection that contains it"),
    ("alias-recursive-map", b"---\nid: x\nmeta: &m {a: {b: *m}}\n---\n", 3, "refers to the collection"),
    ("nested-too-deep", b"---\nid: x\nk: " + b"[" * 150 + b"]" * 150 + b"\n---\n", 3, "nested more than 100"),
    ("python-tag", b"---\nid: x\nk: !!python/object/apply:os.system [ls]\n---\n", 3, "could not determine a constructor"),
    ("conflict-in-frontmatter", b"---\nid: x\n<<<<<<< HEAD\nsubject: a\n=======\nsubject: b\n>>>>>>> other\n---\n",
     3, "merge conflict in the frontmatter (lines 3-7)"),
    ("conflict-around-dashes", b"<<<<<<< HEAD\n---\nid: x\n---\n=======\n---\nid: y\n---\n>>>>>>> other\n", 1,
     "merge conflict (lines 1-9)"),
]


def test_alias_bomb_is_refused_fast_and_small(tmp_path, alias_bomb):
    import tracemalloc

    path = write(tmp_path, alias_bomb, "bomb.md")
    assert len(path.read_bytes()) < 500
    tracemalloc.start()
    with pytest.raises(NoteError) as caught:
        load_note(tmp_path, path.name, "d")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert str(caught.value) == ("bomb.md:8: frontmatter is refused: aliases expand it past 10,000 extra values or "
                                 "1,000,000 characters (a YAML alias bomb?)")
    assert peak < 5_000_000  # expanded, it is 387 million strings


@pytest.mark.parametrize("frontmatter, expected", [
    ("links: &l [saga, paxos]\nsee_also: *l", {"links": ["saga", "paxos"], "see_also": ["saga", "paxos"]}),
    ("base: &b {a: 1}\nderived:\n  <<: *b\n  c: 2", {"derived": {"a": 1, "c": 2}}),
    ("2024-01-01: new year\n1: one", {"2024-01-01": "new year", 1: "one"}),  # keys JSON can hold
    ("k: " + "[" * 90 + "]" * 90, {}),
    # typed values Python cannot hold (they raised ValueError and friends) stay the text written
    ("created: 2024-02-30\nwhen: 2020-01-01 25:61:61", {"created": "2024-02-30", "when": "2020-01-01 25:61:61"}),
    ("flag: !!bool maybe\nn: !!int x", {"flag": "maybe", "n": "x"}),
    ("big: " + "9" * 5000, {"big": "9" * 5000}),
    ("a: .nan\nb: -.inf\nc: [.inf]", {"a": ".nan", "b": "-.inf", "c": [".inf"]}),  # JSON has no NaN
    ("odd: !!set {b, a, b}", {"odd": ["b", "a"]}),  # a set is its members as written (JSON has no sets)
])
def test_small_aliases_merges_and_odd_keys_still_read(frontmatter, expected):
    memory = parse_note(f"---\nid: x\nsubject: S\nanchor: a b\n{frontmatter}\n---\n# S\n", "n.md", "d")
    for key, value in expected.items():
        assert memory.meta[key] == value


def test_a_yaml_set_reads_the_same_in_every_process():
    """A Python set iterates in an order the process's hash seed decides: the cache must not depend on it."""
    members = ", ".join(f"m{k}" for k in range(12))
    code = ("from palace_cli.core.notefile import parse_note; "
            f"print(parse_note('---\\nid: x\\nodd: !!set {{{members}}}\\n---\\n# S\\n', 'n.md', 'd').meta['odd'])")
    seen = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env=dict(os.environ, PYTHONHASHSEED=str(seed))).stdout for seed in (1, 2, 3)}
    assert seen == {str([f"m{k}" for k in range(12)]) + "\n"}


@pytest.mark.parametrize("value, says", [("!!set\n  ? [1, 2]", "unhashable"), ("!!set [a, b]", "a set must be a mapping"),
                                          ("!!set ab", "a set must be a mapping")])
def test_a_set_yaml_cannot_hold_is_a_clear_error_with_its_line(value, says):
    with pytest.raises(NoteError) as caught:
        parse_note(f"---\nid: x\nodd: {value}\n---\n# S\n", "n.md", "d")
    assert caught.value.line == 3 and says in str(caught.value)


def test_a_set_merges_a_mapping_as_any_mapping_does():
    memory = parse_note("---\nid: x\nbase: &b {x, y}\nodd: !!set {<<: *b, c}\n---\n# S\n", "n.md", "d")
    assert memory.meta["odd"] == ["x", "y", "c"]


@pytest.mark.parametrize("body, lines", [
    ("<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> branch\n", [(9, 13)]),
    ("<<<<<<< HEAD\nmine\n||||||| base\nold\n=======\ntheirs\n>>>>>>> branch\n", [(9, 15)]),
    ("text\n>>>>>>> leftover\n", [(10, 10)]),
    ("Title\n=======\n", []),  # a setext heading underline, not a conflict
    ("```\n<<<<<<< HEAD\n=======\n>>>>>>> b\n```\n", []),  # a note about git may show markers in a fence
])
def test_conflict_markers_in_the_body_are_errors_with_their_line(body, lines):
    memory = parse_note(f"---\nid: x\nsubject: S\nanchor: a b\n---\n# S\n\n## Content\n{body}", "n.md", "d")
    found = [w for w in memory.warnings if w.code == "conflict-marker"]
    assert [w.line for w in found] == [first for first, _ in lines]
    for warning, (first, last) in zip(found, lines):
        assert (f"lines {first}-{last}" if last > first else f"line {first}") in warning.message


def test_a_fifo_named_like_a_note_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "fifo.md")
    with pytest.raises(NoteError, match="not a regular file"):
        load_note(tmp_path, "fifo.md", "d")


@pytest.mark.parametrize("name, data, line, message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_one_clear_line(tmp_path, name, data, line, message):
    path = write(tmp_path, data, f"{name}.md")
    with pytest.raises(NoteError) as caught:
        load_note(tmp_path, path.name, "d")
    error = caught.value
    assert message in error.reason
    assert error.line == line
    assert str(error).startswith(f"{name}.md:{line}: " if line else f"{name}.md: ")
    assert "\n" not in str(error)


# A note's id when its frontmatter names none (or one that cannot be used): derived from its path.
@pytest.mark.parametrize("path, data, note_id, problem", [
    ("Garden/Watering schedule.md", "---\ntags: [garden]\n---\nWater at dawn.\n", "garden.watering-schedule", None),
    ("Garden/Watering schedule.md", "Water at dawn.\n", "garden.watering-schedule", None),
    ("index.md", "---\nsubject: y\n---\n", "index", None),
    ("user/index.md", "---\nsubject: y\n---\n", "user.index", None),
    ("日記/今日 の メモ.md", "text\n", "日記.今日-の-メモ", None),
    ("Café/Ça va.md", "text\n", "cafe.ca-va", None),
    ("memories/d/Outbox polling.md", "text\n", "outbox-polling", None),
    ("memories/d/Café crème (au lait).md", "text\n", "cafe-creme", None),
    ("memories/d/日記.md", "text\n", "memory", None),
    ("n.md", "---\nsubject: y\nid: Not An Id\n---\n", "n", ("bad-id", 3, "must be lowercase")),
    ("n.md", "---\nid: [a]\n---\n", "n", ("bad-id", 2, "`id` must be text")),
    ("n.md", "---\nid: kept-id\n---\n", "kept-id", None),
])
def test_an_id_is_derived_from_the_path_when_the_note_names_none(path, data, note_id, problem):
    memory = parse_note(data, path, "d")
    assert memory.id == note_id
    assert memory.derived_id == (note_id != "kept-id")
    found = [(w.code, w.line) for w in memory.warnings if w.code == "bad-id"]
    if problem is None:
        assert not found
    else:
        assert found == [problem[:2]]
        assert problem[2] in next(w.message for w in memory.warnings if w.code == "bad-id")


@pytest.mark.parametrize("name, expected", [("Café crème", "cafe-creme"), ("Ça va", "ca-va"), ("naïve plan", "naive-plan"),
                                            ("ﬁle №2", "file-no2")])
def test_one_slug_rule_for_a_note_a_vault_note_an_added_note_and_an_import(name, expected):
    """A name gives one slug wherever palace makes an id of it: a file under memories/ (`Café.md` was `caf`), a
    vault's file, `palace add`'s subject, an importer's source id (accents transliterated everywhere)."""
    from palace_cli.core.layout import path_id
    from palace_cli.core.text import slugify
    from palace_cli.importers.records import safe_id

    assert path_id(f"memories/d/{name}.md") == path_id(f"{name}.md") == slugify(name) == safe_id(name) == expected


def test_a_derived_id_the_old_slug_rule_gave_otherwise_is_a_previous_id():
    assert parse_note("text\n", "memories/d/Café.md", "d").previous_ids == ["caf"]
    assert parse_note("text\n", "memories/d/Cafe.md", "d").previous_ids == []
    assert parse_note("---\nid: cafe\n---\ntext\n", "memories/d/Café.md", "d").previous_ids == []
    assert parse_note("text\n", "Café.md", "d").previous_ids == []  # a vault's ids always transliterated


@pytest.mark.parametrize("text, subject", [
    ("---\nsubject: Given\ntitle: T\n---\n# H\n", "Given"),
    ("---\ntitle: From title\n---\n# H\n", "From title"),
    ("---\ntags: [a]\n---\n\n<!-- omit in toc -->\n#garden #beds\n# The heading\nText.\n", "The heading"),
    # a `# ` heading after text (or code) is a section of a page named by its file (SilverBullet), not its title
    ("---\ntags: [a]\n---\n```sh\n# a shell comment\n```\n# The heading\n", "Watering schedule"),
    ("Beds are watered at dawn.\n\n# Summer\nTwice a day.\n", "Watering schedule"),
    ("Just text, no heading.\n", "Watering schedule"),
    # `# ` headings used as the page's sections (an ADR's "# Context", "# Decision"): none of them is its title
    ("# Context\nBeds dry out.\n\n# Decision\nWater at dawn.\n", "Watering schedule"),
    ("# The heading\n```md\n# a heading in an example\n```\n## Sub\n", "The heading"),
])
def test_the_subject_is_subject_then_title_then_leading_heading_then_file_name(text, subject):
    assert parse_note(text, "Garden/Watering schedule.md", "d").subject == subject


def test_inline_tags_outside_code_are_keywords():
    text = ("---\ntags: [garden, '#Water']\n---\n# Beds\n#tomato and #garden/beds, not #123, "
            "`#inline`, a#b or [x](#frag)\n```\n#fenced\n```\n## Sub #heading-tag\n")
    memory = parse_note(text, "n.md", "d")
    assert memory.keywords == ["garden", "Water", "tomato", "garden/beds", "heading-tag"]


def test_a_silverbullet_expression_holds_no_tag():
    text = ("# ADRs\n#adr pages\n${query[[\n  from p = index.pages()\n  group by p.status\n"
            "  select {Count = #group}\n]]}\n")
    assert parse_note(text, "ADR.md", "d").keywords == ["adr"]  # Lua's length operator is no #tag


@pytest.mark.parametrize("text", [
    "---\nsubject: A\nkeywords: [x]\n---\nbody\n",
    "---  \nsubject: A\n---\t\nbody\n",  # blanks after the fences: session files once read no frontmatter here
    "---\r\nsubject: A\r\n---\r\nbody\r\n",
    "---\n---\nbody\n",
    "---\nsubject: A\n---",
    "no frontmatter\n---\nsubject: A\n---\n",
])
def test_one_frontmatter_block_for_notes_sessions_writers_and_the_editor(text):
    """The reader of notes, the reader of session files, the writer of frontmatter and the language server's
    buffer find the same `---` block (core/notefile.frontmatter_block)."""
    from palace_cli.conversations.sessionfile import split_text
    from palace_cli.core.notefile import NoFrontmatter, split_frontmatter
    from palace_cli.lsp.buffer import Buffer

    plain = text.replace("\r\n", "\n")
    try:
        yaml_text, body, first = split_frontmatter(plain, "n.md")
    except NoFrontmatter:
        yaml_text, body, first = None, plain, 1
    assert split_text(plain) == (yaml_text, body, first)
    block = Buffer(text).block
    assert (block is None) == (yaml_text is None)
    if block is not None:
        lines = plain.split("\n")
        assert "".join(line + "\n" for line in lines[block[0] : block[1] + 1]) == yaml_text
        assert Buffer(text).body_start == first - 1  # LSP counts lines from 0
        edited = edit_frontmatter(text, {"subject": "B"}).replace("\r\n", "\n")
        assert edited.endswith(body) and parse_note(edited, "n.md", "d").subject == "B"


@pytest.mark.parametrize("data, codes", [
    ("\ufeff" + NOTE, ["bom"]),
    (NOTE.replace("\n", "\r\n"), ["crlf"]),
    ("\ufeff" + NOTE.replace("\n", "\r\n"), ["bom", "crlf"]),
])
def test_bom_and_crlf_are_read_with_a_warning(tmp_path, data, codes):
    path = write(tmp_path, data)
    memory = load_note(tmp_path, path.name, "d")
    assert [w.code for w in memory.warnings] == codes
    assert memory.id == "two-phase-commit" and memory.line == 13 and memory.field_line("verify") == 7
    assert memory.content == "A coordinator asks every participant to prepare."
    text, _ = read_note_text(path)
    assert "\r" not in text and not text.startswith("\ufeff")


# ---- writing: targeted cases -----------------------------------------------------------------


def test_update_keeps_comments_order_unknown_keys_and_body(tmp_path):
    path = write(tmp_path, NOTE)
    update_frontmatter(path, {"verify": "granite couples waltz", "extra": "new"})
    text = path.read_text()
    assert text == NOTE.replace("verify: forty-seven granite couples", "verify: granite couples waltz").replace(
        "created: 2026-11-29\n---", "created: 2026-11-29\nextra: new\n---")


def test_update_replaces_block_list_in_block_style_and_deletes(tmp_path):
    path = write(tmp_path, NOTE)
    update_frontmatter(path, {"links": ["saga", "paxos"], "custom": None})
    text = path.read_text()
    assert "links:\n  - saga\n  - paxos\ncreated: 2026-11-29\n" in text
    assert "custom" not in text
    assert text.split("---\n", 2)[2] == NOTE.split("---\n", 2)[2]


@pytest.mark.parametrize("prefix, newline", [(b"", "\n"), (b"\xef\xbb\xbf", "\n"), (b"", "\r\n"),
                                             (b"\xef\xbb\xbf", "\r\n")])
def test_update_keeps_bom_and_line_endings(tmp_path, prefix, newline):
    original = prefix + NOTE.replace("\n", newline).encode("utf-8")
    path = write(tmp_path, original)
    update_frontmatter(path, {"verify": "granite couples waltz", "added": [1, 2]})
    data = path.read_bytes()
    assert data.startswith(prefix + b"---" + newline.encode())
    expected = NOTE.replace("verify: forty-seven granite couples", "verify: granite couples waltz").replace(
        "created: 2026-11-29\n---", "created: 2026-11-29\nadded: [1, 2]\n---")
    assert data == prefix + expected.replace("\n", newline).encode("utf-8")


def test_update_of_unchanged_value_does_not_write(tmp_path):
    path = write(tmp_path, NOTE)
    before = path.stat().st_mtime_ns
    update_frontmatter(path, {"verify": "forty-seven granite couples"})
    assert path.stat().st_mtime_ns == before and path.read_text() == NOTE


@pytest.mark.parametrize("data", [b"---\nid: [x\n---\n", b"---\n- a\n---\n", b"no frontmatter\n",
                                  b"---\rid: x\r---\r", b"---\nid: caf\xe9\n---\n"])
def test_update_refuses_bad_notes_without_writing(tmp_path, data):
    path = write(tmp_path, data)
    with pytest.raises(NoteError):
        update_frontmatter(path, {"verify": "a b"})
    assert path.read_bytes() == data


def test_update_with_bare_cr_in_frontmatter_is_right_or_refused(tmp_path):
    data = b"---\nid: x\rsubject: s\nverify: a b\n---\nbody\r\n"
    path = write(tmp_path, data)
    try:
        update_frontmatter(path, {"verify": "c d"})
    except NoteError:
        assert path.read_bytes() == data
    else:
        assert path.read_bytes() == data.replace(b"a b", b"c d")


def test_update_refuses_duplicate_keys_it_cannot_edit_safely(tmp_path):
    data = "---\nid: x\nverify: one\nverify: two\n---\nbody\n"
    path = write(tmp_path, data)
    with pytest.raises(NoteError, match="edit it by hand"):
        update_frontmatter(path, {"verify": "three"})
    assert path.read_text() == data


def test_update_with_alias_falls_back_or_refuses_but_never_corrupts(tmp_path):
    data = "---\nid: x\nbase: &b [a, b]\ncopy: *b\n---\nbody\n"
    path = write(tmp_path, data)
    try:
        update_frontmatter(path, {"base": ["c"]})
    except NoteError:
        assert path.read_text() == data
    else:
        meta = yaml.safe_load(path.read_text().split("---\n")[1])
        assert meta == {"id": "x", "base": ["c"], "copy": ["a", "b"]}
        assert path.read_text().endswith("---\nbody\n")


def test_replace_section_keeps_everything_else(tmp_path):
    path = write(tmp_path, NOTE)
    replace_section(path, "content", "Two phases:\nprepare, then commit.")
    text = path.read_text()
    assert text == NOTE.replace("A coordinator asks every participant to prepare.",
                                "Two phases:\nprepare, then commit.")


def test_replace_section_ignores_headings_in_fences_and_frontmatter(tmp_path):
    text = NOTE.replace("# keywords drive routing", "## Image in a YAML comment")
    path = write(tmp_path, text)
    replace_section(path, "Image", "A new scene.")
    new = path.read_text()
    assert "## Image in a YAML comment" in new
    assert "## Image\nA new scene.\n\n## Content\n" in new
    assert "```markdown" not in new  # the fence belonged to the old Image text, which was replaced


@pytest.mark.parametrize("prefix, newline", [(b"\xef\xbb\xbf", "\r\n"), (b"", "\r\n")])
def test_replace_section_crlf_and_bom(tmp_path, prefix, newline):
    path = write(tmp_path, prefix + NOTE.replace("\n", newline).encode())
    replace_section(path, "Content", "line one\nline two")
    expected = NOTE.replace("A coordinator asks every participant to prepare.", "line one\nline two")
    assert path.read_bytes() == prefix + expected.replace("\n", newline).encode()


def test_replace_last_section_and_missing_section(tmp_path):
    path = write(tmp_path, NOTE)
    replace_section(path, "Links", "- [[paxos]]")
    assert path.read_text().endswith("## Links\n- [[paxos]]\n")
    with pytest.raises(NoteError, match="no `## Mnemonic` section"):
        replace_section(path, "Mnemonic", "x")
    with pytest.raises(NoteError, match="heading"):
        replace_section(path, "Image", "ok\n## Content\nsneaky")


def test_edit_section_can_create():
    text = edit_section("---\nid: x\n---\n# X\n", "Image", "scene", create=True)
    assert text == "---\nid: x\n---\n# X\n\n## Image\nscene\n"


def test_write_is_atomic_no_temp_files_left(tmp_path):
    path = write(tmp_path, NOTE)
    update_frontmatter(path, {"verify": "granite couples waltz"})
    replace_section(path, "Image", "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["note.md"]


@pytest.mark.parametrize("write_it", [
    lambda path: replace_section(path, "Content", "x" * 1_000_000),
    lambda path: update_frontmatter(path, {"notes": "y" * 1_000_000}),
])
def test_a_write_over_the_size_limit_is_refused_and_leaves_the_note_as_it_was(tmp_path, write_it):
    path = write(tmp_path, NOTE)
    with pytest.raises(NoteError, match="over the 1,000,000 byte limit for a note; nothing was written"):
        write_it(path)
    assert path.read_text() == NOTE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["note.md"]


def test_an_alias_bomb_never_reaches_the_round_trip_writer(tmp_path, alias_bomb):
    path = write(tmp_path, alias_bomb, "bomb.md")
    with pytest.raises(NoteError, match="alias bomb"):
        update_frontmatter(path, {"verify": "granite couples waltz"})  # ruamel would happily re-emit it
    assert path.read_bytes() == alias_bomb


def test_a_bare_cr_note_is_read_but_not_rewritten(tmp_path):
    path = write(tmp_path, NOTE.replace("\n", "\r"))
    assert load_note(tmp_path, path.name, "d").id == "two-phase-commit"
    with pytest.raises(NoteError, match="bare CR line ends"):
        update_frontmatter(path, {"verify": "granite couples waltz"})
    assert path.read_bytes() == NOTE.replace("\n", "\r").encode()


# ---- writing: the round-trip property --------------------------------------------------------


class IndentedDumper(yaml.SafeDumper):
    """Indents block sequences under their key (PyYAML's default is indentless)."""

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)

    def ignore_aliases(self, data):
        return True


class PlainDumper(yaml.SafeDumper):
    def ignore_aliases(self, data):
        return True


keys = st.from_regex(r"[a-z_][a-z0-9_-]{0,8}", fullmatch=True)
scalars = st.one_of(
    st.text(max_size=30),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20),
    st.sampled_from(["yes", "no", "null", "~", "2026-11-29", "a: b", "# not a comment", "- dash", "[x]", "'q'",
                     "multi\nline", "  padded  ", "---", "tab\there", "emoji 😀", "ünïcödé"]),
    st.integers(-10**12, 10**12),
    st.floats(allow_nan=False, allow_infinity=False),  # .nan and .inf read as text (safeyaml: JSON has no such numbers)
    st.booleans(),
    st.none(),
    st.dates(min_value=dt.date(1900, 1, 1), max_value=dt.date(2200, 1, 1)),
)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(keys, inner, max_size=3)), max_leaves=6)
bodies = st.one_of(
    st.text(max_size=200),
    st.sampled_from(["", "# T\n\n## Image\nx\n\n---\n\n## Content\ny\n", "---\nid: fake\n---\n", "no newline"]),
)


@st.composite
def frontmatters(draw):
    """A frontmatter as segments: ("key", name, text) and ("comment", None, text), plus its mapping."""
    mapping = draw(st.dictionaries(keys, values, min_size=0, max_size=6))
    segments = []
    for key, value in mapping.items():
        if draw(st.booleans()):
            segments.append(("comment", None, draw(st.sampled_from(["# a comment\n", "\n", "#\n", "# id: fake\n"]))))
        dumper = draw(st.sampled_from([PlainDumper, IndentedDumper]))
        options = dict(Dumper=dumper, allow_unicode=draw(st.booleans()), width=draw(st.sampled_from([20, 80, 4096])),
                       indent=draw(st.sampled_from([2, 4])), sort_keys=False)
        text = yaml.dump({key: value}, default_flow_style=draw(st.sampled_from([False, None])), **options)
        if text.startswith("{"):  # only nested collections may be in flow style
            text = yaml.dump({key: value}, default_flow_style=False, **options)
        assume(repr(yaml.safe_load(text)) == repr({key: value}))  # PyYAML itself mangles a raw NEL
        if text.count("\n") == 1 and not text.rstrip("\n").endswith(("|", ">", "|-", ">-")) and draw(st.booleans()):
            text = text[:-1] + "  # trailing comment\n"
        segments.append(("key", key, text))
    if draw(st.booleans()):
        segments.append(("comment", None, "# last comment\n"))
    return mapping, segments


def _lines(text: str) -> list[str]:
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


@pytest.mark.slow
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frontmatters(), bodies, st.data(), st.sampled_from(["\n", "\r\n"]))
def test_round_trip_property(front, body, data, newline):
    mapping, segments = front
    yaml_text = "".join(text for _, _, text in segments)
    assert repr(yaml.safe_load(yaml_text) or {}) == repr(mapping)
    head, tail = "---\n", "---\n" + body
    if newline == "\r\n":
        assume("\r" not in body)
        head, tail = head.replace("\n", newline), tail.replace("\n", newline)
    note = head + yaml_text.replace("\n", newline) + tail
    op = data.draw(st.sampled_from(["set", "add", "delete", "many"]))
    existing = list(mapping)
    if op in ("set", "delete") and not existing:
        op = "add"
    if op == "set":
        changes = {data.draw(st.sampled_from(existing)): data.draw(values)}
    elif op == "delete":
        changes = {data.draw(st.sampled_from(existing)): None}
    elif op == "add":
        changes = {data.draw(keys.filter(lambda k: k not in mapping)): data.draw(values.filter(lambda v: v is not None))}
    else:
        changes = data.draw(st.dictionaries(keys, values, min_size=1, max_size=3))

    new_note = edit_frontmatter(note, changes, "n.md")

    # The opening line and the body are untouched, byte for byte.
    assert new_note.startswith(head) and new_note.endswith(tail)
    new_yaml = new_note[len(head): len(new_note) - len(tail)]

    # The mapping is exactly the old one with the changes applied, in the same key order.
    expected = dict(mapping)
    for key, value in changes.items():
        if value is None:
            expected.pop(key, None)
        else:
            expected[key] = value
    parsed = yaml.safe_load(new_yaml.replace("\r\n", "\n")) or {}
    assert repr(parsed) == repr(expected)
    if repr(expected) == repr(mapping):
        assert new_note == note  # nothing to change: nothing is written
        return

    # Every untouched key and every comment is still there, byte for byte and in order; what is left
    # over is exactly the changed keys.
    lines, position = _lines(new_yaml), 0
    for kind, key, text in segments:
        if kind == "key" and key in changes:
            continue
        wanted = _lines(text.replace("\n", newline))
        at = next((i for i in range(position, len(lines) - len(wanted) + 1) if lines[i:i + len(wanted)] == wanted), None)
        assert at is not None, f"untouched segment {text!r} was changed"
        del lines[at:at + len(wanted)]
        position = at
    rest = "".join(lines)
    leftover = yaml.safe_load(rest.replace("\r\n", "\n")) or {}
    changed = [k for k, v in changes.items() if v is not None]
    assert repr(leftover) == repr({k: expected[k] for k in expected if k in changed})


def test_inline_yaml_keeps_the_sign_of_zero_whatever_came_before():
    for value in (0.0, -0.0, 0.0):  # equal and one hash: a cache keyed by value gave -0.0 the text of 0.0
        assert repr(yaml.safe_load(f"key: {inline_yaml(value)}\n")) == repr({"key": value})


@given(values)
@settings(max_examples=EXAMPLES, deadline=None)
def test_inline_yaml_round_trips(value):
    assert "\n" not in inline_yaml(value)
    assert repr(yaml.safe_load(f"key: {inline_yaml(value)}\n")) == repr({"key": value})
