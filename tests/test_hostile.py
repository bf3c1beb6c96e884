"""Hostile palaces, generated: whatever lands in memories/, no command crashes, every readable note is listed
and indexed, and every unreadable one is reported with its path (docs/reliability.md).

The default run tries HOSTILE_EXAMPLES palaces (50); PALACE_HYPOTHESIS_EXAMPLES=2000 makes it a soak.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from palace_cli.cli import cli
from palace_cli.errors import PalaceError
from palace_cli.editing.lint import lint
from palace_cli.mcp import PalaceTools
from palace_cli.core.notefile import MAX_NOTE_BYTES
from palace_cli.palace import Palace
from palace_cli.core.layout import shown_path

HOSTILE_EXAMPLES = int(os.environ.get("PALACE_HYPOTHESIS_EXAMPLES", "50"))
HOSTILE = settings(max_examples=HOSTILE_EXAMPLES, deadline=None, derandomize=False,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

WORDS = ["quartz", "mango", "falcon", "tundra", "violet", "cobalt", "lantern", "saffron", "glacier", "pepper"]

# ---- what lands in the palace ------------------------------------------------------------------


def bomb(levels: int) -> str:
    names = "abcdefghijklmnop"
    lines = [f"{names[0]}: &{names[0]} [" + ",".join(['"lol"'] * 9) + "]"]
    lines += [f"{names[i]}: &{names[i]} [" + ",".join([f"*{names[i - 1]}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def good_fields(note_id: str, word: str) -> str:
    return (f"id: {note_id}\nsubject: The {word} memory\nanchor: a {word} hook\nkeywords: [{word}]\n"
            f"verify: nine {word} owls\n")


FRONTMATTER = st.one_of(
    st.just("{good}"),
    st.just("{good}"),  # most notes are fine: the bad ones must not hide the good ones
    st.just("{good}links: &l [x, y]\nsee_also: *l\n"),
    st.just("{good}base: &b {{a: 1}}\nmerged:\n  <<: *b\n  c: 2\n"),
    st.integers(2, 9).map(lambda n: "{good}" + bomb(n)),
    st.just("{good}loop: &a [*a]\n"),
    st.sampled_from(["- a\n- b\n", "just words\n", "42\n", "~\n", "", "[a, b]\n", "{{a: 1}}\n"]),
    st.sampled_from(["!!python/object/apply:os.system [ls]", "!!binary aGVsbG8=", "!!set {{a, b}}", "!foo bar",
                     "!!timestamp 2020-01-01", "!!float nan", "!!str", "&x y", "2024-02-30", "!!bool maybe", ".nan",
                     "-.inf", "9" * 5000, "!!int x", "2020-01-01T10:00:00+99:00", "!!binary '!'"]).map(
        lambda t: "{good}odd: " + t + "\n"),
    st.sampled_from([".nan", "2024-02-30", "[1]", "high"]).map(lambda v: "{good}importance: " + v + "\ncreated: " + v + "\n"),
    st.tuples(st.sampled_from(["valid_from", "valid_until", "supersedes", "superseded_by", "type", "core"]),
              st.sampled_from(["2024-02-30", "2020-01-01", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "[n0, n1]", "n0", "{a: 1}", "yes", ".inf", "[[x]]", "''"])
              ).map(lambda kv: "{good}" + f"{kv[0]}: {kv[1]}\n"),
    st.integers(1, 120_000).map(lambda n: "{good}" + "k" * n + ": v\n"),
    st.integers(1, 1_100).map(lambda n: "{good}deep: " + "[" * n + "]" * n + "\n"),
    st.just("{good}id: other\n"),
    st.just("{good}2020-01-01: a date key\n? [a, b]\n: complex key\n"),
    st.sampled_from(["12", "[a]", "1.5", "true", "Not An Id", "''", "{{a: 1}}"]).map(lambda v: "{rest}" + f"id: {v}\n"),
    st.sampled_from(["\x07", "\x00", "\ufeff", "\u2028", "\x85", "\udcff"]).map(lambda c: "{good}odd: a" + c + "b\n"),
    st.just("<<<<<<< HEAD\n{good}=======\nid: theirs\n>>>>>>> branch\n"),
)
BODY = st.one_of(
    st.just("# {subject}\n\n## Image\nA {word} juggles nine {word} owls.\n\n## Content\nFacts about {word}.\n"),
    st.just("# {subject}\n\n## Content\n<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> b\n"),
    st.just("# {subject}\n\n```\n---\n## Image\n```\n[[nowhere]] [[\n"),
    st.text(max_size=300),
    st.just(""),
)
ENCODING = st.sampled_from(["utf-8", "utf-8", "utf-8", "utf-8-sig", "utf-16", "latin-1", "cp1252"])
NEWLINE = st.sampled_from(["\n", "\n", "\r\n", "\r", "mixed"])
SIZE = st.sampled_from([None] * 27 + [-1, 0, 1])  # bytes past MAX_NOTE_BYTES, one note in ten
NAME = st.one_of(
    st.sampled_from(WORDS),
    st.sampled_from(["my note", "café", "-dash", "[[x]]", "#hash", "a|b", "x" * 200, "ünïcödé", "emoji-🦉"]),
    st.sampled_from(["new\nline", "tab\there", "esc\x1b[31m", "cr\rx", "sep\u2028x", "del\x7f"]),
    st.just(os.fsdecode(b"caf\xe9")),  # bytes that are not UTF-8
)
DOMAIN = st.sampled_from(["d", "d", "e", "with space", "ünï", os.fsdecode(b"bad\x01dir")])


@st.composite
def note_bytes(draw, note_id: str, word: str) -> bytes:
    """A note: a frontmatter shape, a body shape, then an encoding, line ends, maybe noise or a size at the limit."""
    good = good_fields(note_id, word)
    front = draw(FRONTMATTER).replace("{good}", good).replace("{rest}", good.split("\n", 1)[1])
    front = front.replace("{{", "{").replace("}}", "}")
    body = draw(BODY)
    if "{subject}" in body:
        body = body.replace("{subject}", f"The {word} memory").replace("{word}", word)
    text = f"---\n{front}---\n{body}"
    newline = draw(NEWLINE)
    if newline == "mixed":
        lines = text.split("\n")
        ends = draw(st.lists(st.sampled_from(["\n", "\r\n", "\r"]), min_size=len(lines), max_size=len(lines)))
        text = "".join(line + end for line, end in zip(lines, ends))
    elif newline != "\n":
        text = text.replace("\n", newline)
    encoding = draw(ENCODING)
    try:
        data = text.encode(encoding, "surrogateescape")  # a lone surrogate becomes a byte that is not UTF-8
    except UnicodeEncodeError:
        data = text.encode(encoding, "replace")
    if draw(st.integers(0, 9)) == 0:  # noise: random bytes somewhere
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(max_size=40)) + data[at:]
    past = draw(SIZE)
    if past is not None:
        data = data + b"x" * (MAX_NOTE_BYTES + past - len(data))
    return data


@dataclass
class Entry:
    kind: str  # note, link, fifo, folder-link
    relpath: str  # under the palace root, may hold odd characters
    data: bytes = b""
    target: str = ""
    word: str = ""
    note_id: str = ""


@dataclass
class Spec:
    entries: list[Entry] = field(default_factory=list)


@st.composite
def palaces(draw) -> Spec:
    spec = Spec()
    for i in range(draw(st.integers(1, 8))):
        word = WORDS[i % len(WORDS)] + ("" if i < len(WORDS) else str(i))
        note_id = draw(st.sampled_from([f"n{i}", f"n{i}", "n0"]))  # now and then an id used twice
        domain = draw(DOMAIN)
        relpath = f"memories/{domain}/{draw(NAME)}-{i}.md"
        kind = draw(st.sampled_from(["note"] * 6 + ["link", "fifo", "folder-link", "loose"]))
        if kind == "loose":
            spec.entries.append(Entry("note", f"memories/{word}-{i}.md", draw(note_bytes(note_id, word)), word=word,
                                      note_id=note_id))
        elif kind == "note":
            spec.entries.append(Entry("note", relpath, draw(note_bytes(note_id, word)), word=word, note_id=note_id))
        elif kind == "link":
            target = draw(st.sampled_from(["self", "..", "../..", "outside", "inner", "sibling", "dangling", "dir"]))
            spec.entries.append(Entry("link", relpath, target=target))
        elif kind == "fifo":
            spec.entries.append(Entry("fifo", relpath))
        else:
            spec.entries.append(Entry("folder-link", f"memories/{domain}/sub-{i}",
                                      target=draw(st.sampled_from(["..", "../..", "outside-dir", "self"]))))
    return spec


def build(root: Path, outside: Path, spec: Spec) -> list[Entry]:
    """Write the palace; returns the entries that were created (a later one never replaces an earlier one)."""
    (root / "memories").mkdir(parents=True)
    (root / "palace.toml").write_text('[palace]\nname = "Hostile"\n')
    (root / "notes").mkdir()
    (root / "notes" / "inner.md").write_text("---\n" + good_fields("inner", "inner") + "---\n# Inner\n")
    outside.mkdir()
    (outside / "secret.md").write_text("---\n" + good_fields("secret", "secret") + "---\n# Secret\n")
    made, notes = [], []
    for entry in spec.entries:
        path = Path(os.fsencode(root / entry.relpath).decode("utf-8", "surrogateescape"))
        if os.path.lexists(path):
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue  # a parent is a file or a link made by an earlier entry
        if entry.kind == "note":
            path.write_bytes(entry.data)
            notes.append(path)
        elif entry.kind == "fifo":
            os.mkfifo(path)
        else:
            target = {"self": path.name, "..": "..", "../..": "../..", "outside": str(outside / "secret.md"),
                      "inner": os.path.relpath(root / "notes" / "inner.md", path.parent),
                      "sibling": os.path.relpath(notes[0], path.parent) if notes else "missing.md",
                      "dangling": "/nonexistent/x.md", "dir": ".",
                      "outside-dir": str(outside)}[entry.target]
            os.symlink(target, path)
        made.append(entry)
    return made


# ---- the property ------------------------------------------------------------------------------


def parents(relpath: str) -> list[str]:
    """The path and each folder above it, up to memories/<domain>."""
    parts = relpath.split("/")
    return ["/".join(parts[:n]) for n in range(2, len(parts) + 1)]


def invoke(root: Path, *args: str):
    """One CLI command; a traceback of any kind fails the test, exit codes 0 and 1 are answers."""
    result = CliRunner().invoke(cli, ["--palace", str(root), *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"palace {' '.join(args)} crashed") from result.exception
    assert result.exit_code in (0, 1), (args, result.exit_code, result.output)
    assert "Traceback" not in result.output
    return result


@pytest.mark.slow
@HOSTILE
@given(spec=palaces())
def test_a_hostile_palace_never_crashes_and_hides_nothing(spec):
    with tempfile.TemporaryDirectory() as tmp:
        root, outside = Path(tmp) / "palace", Path(tmp) / "outside"
        made = build(root, outside, spec)

        # the core: every candidate under memories/ is read or reported, with its (printable) path
        scan = Palace(root).scan()
        by_path = {m.path: m for m in scan.memories.values()}
        reported = {p.path for p in scan.problems}
        report = lint(Palace(root))
        linted = {p.path for p in report.problems}
        for problem in report.problems:
            assert "\n" not in str(problem) and "\r" not in str(problem)
            str(problem).encode("utf-8")
        candidates = [e for e in made if e.relpath.startswith("memories/") and e.kind != "folder-link"]
        for entry in candidates:
            event(f"{entry.kind} {'read' if entry.relpath in by_path else 'reported'}")
        for entry in candidates:
            where = {shown_path(part) for part in parents(entry.relpath)}  # a note in a bad folder: the folder
            assert entry.relpath in by_path or where & reported, (entry.kind, where)
            assert entry.relpath in by_path or where & linted, (entry.kind, where)
            if entry.kind != "note":  # only a link to a note inside memories/ is read
                assert entry.relpath not in by_path or entry.target == "sibling", entry
        assert not {"secret", "inner"} & set(scan.memories)

        # the faces: the CLI lists and indexes exactly what the core reads
        indexed = invoke(root, "index")
        assert indexed.exit_code == 0
        listed = json.loads(invoke(root, "list", "--json").stdout)["memories"]
        assert sorted((m["id"], m["path"]) for m in listed) == sorted((m.id, m.path) for m in scan.memories.values())
        for memory in scan.memories.values():
            index_file = (root / "index" / f"{memory.domain}.md").read_text(encoding="utf-8")
            assert sum(line.endswith(f" id:{memory.id}") for line in index_file.splitlines()) == 1, memory.id
        lint_json = json.loads(invoke(root, "lint", "--json").stdout)
        paths = {p["path"] for p in lint_json["problems"]}
        for entry in [e for e in candidates if e.relpath not in by_path]:
            assert paths & {shown_path(part) for part in parents(entry.relpath)}, entry.relpath
        for entry in candidates:
            memory = by_path.get(entry.relpath)
            if memory is None or entry.kind != "note" or memory.id != entry.note_id or entry.word not in memory.subject:
                continue
            hits = json.loads(invoke(root, "search", "--mode", "lexical", "--include-superseded", entry.word,
                                     "--json").stdout)["hits"]  # superseded or expired: still found, marked
            assert memory.id in [h["id"] for h in hits], (entry.word, hits)
        for memory in list(scan.memories.values())[:3]:
            shown = json.loads(invoke(root, "show", memory.id, "--json").stdout)
            assert shown["id"] == memory.id
        tools = PalaceTools(Palace(root))  # the MCP face, without a transport
        for memory in list(scan.memories.values())[:2]:
            assert tools.get(memory.id).startswith(f"# {memory.subject} ({memory.id})")
            assert tools.get(memory.path).startswith(f"# {memory.subject} ({memory.id})")
        for entry in [e for e in candidates if e.relpath not in by_path][:2]:
            refused = invoke(root, "show", entry.relpath)
            assert refused.exit_code == 1 and refused.stderr.startswith("palace: ")
            with pytest.raises(PalaceError):
                tools.get(entry.relpath)
