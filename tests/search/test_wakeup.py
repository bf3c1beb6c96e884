"""Wake-up and the words agents are given fit the palace (issue 32 item 10): whole sentences, no empty line or
heading, and no request for verify tokens where the notes have none (they are cited by path:line), on an adopted
plain vault (Foam's documentation, copied) and on the example palace."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from palace_cli.answers.ask import ANSWER_INSTRUCTION, PLAIN_INSTRUCTION, build_prompt
from palace_cli.cli import cli
from palace_cli.core.notes import Memory
from palace_cli.editing.authoring import init_palace, write_plain_memory
from palace_cli.mcp import PalaceTools
from palace_cli.palace import Palace
from palace_cli.search.context import MEMORY_HEADER, agent_instructions, build_context
from palace_cli.search.hits import Hit
from palace_cli.search.profiles import PROFILES
from palace_cli.search.wakeup import said, wake_up
from test_vault import FOAM, needs_foam, writable_copy


def memory(note_id: str, subject: str, content: str, path: str = "memories/d/x.md", verify: str = "") -> Memory:
    return Memory(id=note_id, subject=subject, anchor="", verify=verify, domain="d", path=path, line=1,
                  content=content)


@pytest.fixture(scope="module")
def foam(tmp_path_factory) -> Palace:
    root = writable_copy(FOAM, tmp_path_factory.mktemp("adopted") / "foam")
    # A module fixture runs before the autouse user_dirs: without its settings `init` would start a background
    # worker embedding Foam with the real user's models, outliving this module (and the suite).
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PALACE_VECTORS", "wait")
        env.setenv("PALACE_HOME", str(tmp_path_factory.mktemp("no-models")))
        env.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))
        done = CliRunner().invoke(cli, ["init", str(root)], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    return Palace(root)


def test_an_empty_palace_wakes_up_in_one_sentence(tmp_path):
    result = wake_up(Palace(init_palace(tmp_path / "p", name="Desk")))
    assert result.text == "# Desk\nThis is Desk, a memory palace with no memories yet.\n" and not result.memories
    assert result.identity == "This is Desk, a memory palace with no memories yet."


def test_one_domain_and_a_cut_subject_read_as_sentences(tmp_path):
    palace = Palace(init_palace(tmp_path / "p", name="Desk"))
    sentence = "Ada prefers small commits, and always runs the tests with pytest -x before pushing."
    write_plain_memory(palace, "Ada prefers small commits, and always runs the tests with…", "work", sentence)
    text = wake_up(palace).text
    assert text.startswith("# Desk\nThis is Desk, a memory palace of 1 memory in the domain work.\n"
                           "Most important memories:\n")
    assert f"- {sentence} [work] memories/work/" in text and "…" not in text and "id:" not in text


def test_said_keeps_a_whole_subject_and_a_long_sentence_falls_back_to_it():
    whole = memory("a", "Write-Ahead Log", "Log first. Then apply.")
    cut = memory("b", "We chose Postgres because…", "We chose Postgres because of its JSON. Done.")
    long = memory("c", "A very long one…", "word " * 80 + "end.")
    assert said(whole) == "Write-Ahead Log" and said(cut) == "We chose Postgres because of its JSON."
    assert said(long) == "A very long one…"


def test_the_example_palace_keeps_its_tokens(readonly_palace):
    text = wake_up(readonly_palace, budget_tokens=300).text
    assert "It holds 89 memories in 6 domains: caching-performance, " in text and "Domains:" not in text
    assert "\n- Write-Ahead Log (WAL) [storage-engines] (surgeon's wrist notebook) id:write-ahead-log\n" in text
    told = agent_instructions(readonly_palace)
    assert "cite each used memory's token as [verify: token]" in told and "path:line" not in told
    assert "conversation" not in told  # the example palace holds none


@needs_foam
def test_an_adopted_vault_is_told_to_cite_places(foam):
    text = wake_up(foam, budget_tokens=200).text
    first, second, heading = text.splitlines()[:3]
    assert (first, second, heading) == ("# Foam", "This is Foam, a memory palace of 86 notes in 3 domains: dev, "
                                        "root, user.", "Most important notes:")
    assert "verify" not in text and "id:" not in text and "\n- Note Templates [user] user/features/templates.md:1\n" in text
    told = agent_instructions(foam)
    assert "verify token" not in told and "token as" not in told and "as [path:line]" in told
    recalled = PalaceTools(foam).recall("how do I embed a block of another note", max_tokens=600)
    assert "verify" not in recalled.split("## ")[0] and "turn" not in recalled.split("## ")[0]
    assert "cite it there, like [notes/Name.md:12]" in recalled
    place = recalled.split("## ", 1)[1].splitlines()[0].rsplit(" ", 1)[1]  # the handed unit's path:line
    got = PalaceTools(foam).get(place.split(":")[0])
    fields = got.split("\n## Content\n")[0]  # what get says above the note's own text
    assert "\ncite as: [user/" in fields and "anchor:" not in fields and "## Image" not in fields
    assert "verify" not in fields
    handed = recalled.splitlines()[0].removeprefix("handed: ").split(", ")[0]
    quote = "Embed a specific paragraph, list item, heading, or blockquote using a block anchor"
    assert place == "user/features/embeds.md:25" and quote in recalled
    checked = PalaceTools(foam).verify(f'Foam can embed one block: "{quote}" [{place}].', ids=[handed])
    assert checked.startswith("grounded"), checked
    wrong = PalaceTools(foam).verify(f'"Foam embeds whole folders" [{place}].', ids=[handed])
    assert wrong.startswith("NOT grounded (misquoted)"), wrong


def test_a_vault_of_several_folders_wakes_up_to_a_map_of_them(tmp_path, monkeypatch):
    """Not a flat list of every title: the most linked notes, then each folder (most notes first) with its count
    and its own most linked notes, a page named by its path named once."""
    notes = {"Home.md": "[[Tomatoes]] [[Beans]] [[Standup]]\n", "Garden/Tomatoes.md": "Grow by [[Beans]].\n",
             "Garden/Beans.md": "Climb.\n", "Garden/Soil.md": "Loam.\n", "Garden/Compost.md": "Heap.\n",
             "Work/Standup.md": "About [[Tomatoes]].\n", "Work/Retro.md": "Fridays.\n"}
    for relpath, text in notes.items():
        (tmp_path / "vault" / relpath).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "vault" / relpath).write_text(text)
    done = CliRunner().invoke(cli, ["init", str(tmp_path / "vault"), "--no-git-setup"], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    monkeypatch.setattr("palace_cli.search.wakeup.VAULT_HUBS", 2)  # a vault of 7 notes would list them all
    text = wake_up(Palace(tmp_path / "vault")).text
    assert text.split("\n", 2)[2] == (
        "Most important notes:\n- Beans [Garden] Garden/Beans.md:1\n- Tomatoes [Garden] Garden/Tomatoes.md:1\n"
        "By domain, most notes first.\nGarden, 4 notes, the most linked:\n- Garden/Compost.md:1\n- Garden/Soil.md:1\n"
        "Work, 2 notes:\n- Work/Standup.md:1\n- Work/Retro.md:1\nroot, 1 note:\n- Home.md:1\n")


@needs_foam
def test_foams_wake_up_is_a_map_not_every_title(foam):
    woken = wake_up(foam)
    hubs, domains = woken.text.split("By domain, most notes first.\n")
    assert hubs.count("\n- ") == 8 and "[user]" not in domains  # a domain's heading names it
    assert domains.startswith("user, 75 notes, the most linked:\n- Backlinks user/features/backlinking.md:1\n")
    assert "\ndev, 7 notes, the most linked:\n" in domains and domains.endswith("\n- inbox.md:1\n")
    assert len(woken.memories) == 8 + 6 + 3 + 3 < 86  # 3 per domain, one more per 25 notes


def test_a_context_of_plain_notes_asks_for_places_not_tokens():
    plain = memory("n", "Tomato bed", "Water at dawn.", path="Garden/Tomato bed.md")
    smashin = memory("m", "WAL", "Log first.", path="memories/s/wal.md", verify="a wrist notebook")
    hit = lambda m: Hit(m.id, m.subject, "d", m.path, m.line, 1.0, {}, m)  # noqa: E731
    only_plain = build_context([hit(plain)], PROFILES["reference"], None)
    assert "verify" not in only_plain and "cite it there, like [notes/Name.md:12]" in only_plain
    assert "## Tomato bed (n) Garden/Tomato bed.md:1\nContent: Water at dawn." in only_plain
    mixed = build_context([hit(smashin), hit(plain)], PROFILES["reference"], None)
    assert "like [verify: the token], or, for a note without one, cite where it is" in mixed
    tokens = build_context([hit(smashin)], PROFILES["reference"], None)
    assert tokens.startswith(MEMORY_HEADER) and "verify: a wrist notebook" in tokens
    assert build_prompt(only_plain, "Why?").endswith(PLAIN_INSTRUCTION)
    assert build_prompt(tokens, "Why?").endswith(ANSWER_INSTRUCTION)


@pytest.mark.parametrize("padding", [0, 20000])  # a session note's frontmatter inside the head read, and past it
def test_a_projects_decision_comes_after_core_and_before_the_rest(tmp_path, padding):
    palace = Palace(init_palace(tmp_path / "p", name="Work"))
    session = palace.root / "conversations" / "claude-code" / "s.md"
    session.parent.mkdir(parents=True)
    session.write_text(f"---\nid: s\ncwd: /home/me/code/shop\nnote: {'x' * padding}\n---\n# Session\n\n### t1\n"
                       "Decision: we keep the audit logs for 90 days.\n", encoding="utf-8")
    write_plain_memory(palace, "Ada reviews every schema change", "team", "Ada reviews schema changes.", core=True)
    write_plain_memory(palace, "We keep the audit logs…", "distilled", "We keep the audit logs for 90 days.",
                       type="fact", fields={"kind": "decision", "source": "conversations/claude-code/s.md:8"})
    write_plain_memory(palace, "Tabs or spaces", "distilled", "Spaces.", type="fact", fields={"kind": "convention"})
    text = wake_up(palace, cwd="/home/me/code/shop/src").text
    assert text.index("Core memories:\n- Ada reviews") < text.index(
        "Recent decisions and conventions of this project:\n- We keep the audit logs for 90 days. (decision, ") \
        < text.index("Most important memories:\n") < text.index("- Tabs or spaces")
    assert "of this project" not in wake_up(palace, cwd="/home/me/code/clock").text
