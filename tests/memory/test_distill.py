"""`palace distill` on a real palace: written notes, their turns, known facts, superseding, idempotence, the CLI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from distill_fixtures import locomo_sample, write_locomo
from palace_cli.cli import cli
from palace_cli.core.notefile import load_note
from palace_cli.editing.authoring import init_palace
from palace_cli.importers import import_path
from palace_cli.memory.distill import distill
from palace_cli.palace import Palace


@pytest.fixture
def chat_palace(tmp_path):
    """A new palace holding the fixture conversation, imported."""
    root = init_palace(tmp_path / "chat-palace", "Chat")
    palace = Palace(root)
    import_path(palace, write_locomo(tmp_path / "conv.json"))
    return palace


def _files(palace) -> dict[str, bytes]:
    return {str(p.relative_to(palace.root)): p.read_bytes() for p in sorted((palace.root / "memories").rglob("*.md"))}


def _by_turn(palace) -> dict[str, object]:
    palace.refresh(embedder=None)
    return {m.meta["turn"]: m for m in palace.index.scan().memories.values() if m.meta.get("turn")}


def test_memories_point_at_their_turns(chat_palace):
    report = distill(chat_palace)
    memories = _by_turn(chat_palace)
    assert {"D1:3", "D1:5", "D2:2", "D3:2", "D3:3"} <= set(memories)
    assert not {"D1:1", "D1:4", "D1:7", "D2:6", "D3:4"} & set(memories)  # greetings and reactions
    nurse = memories["D1:3"]
    assert nurse.path.startswith("memories/distilled/") and nurse.domain == "distilled"
    assert nurse.meta["about"] == "Ada" and nurse.type == "event" and nurse.meta["attribute"] == "job"
    assert nurse.valid_from == "2023-05-07"  # "yesterday", said on 8 May 2023
    assert "Ada works as a nurse" in nurse.content and "yesterday (7 May 2023) they ran their first half marathon" in nurse.content
    assert 0 < nurse.meta["confidence"] <= 1 and nurse.meta["session"] == "locomo-conv-t-s01"
    path, line = nurse.meta["source"].rsplit(":", 1)
    header = (chat_palace.root / path).read_text(encoding="utf-8").splitlines()[int(line) - 1]
    assert header.startswith("### Ada · ") and header.endswith(" · D1:3")
    keys = list(nurse.meta)
    assert keys[:3] == ["id", "subject", "type"] and {"about", "source", "turn", "valid_from", "confidence",
                                                      "created"} <= set(keys)
    trip = memories["D3:3"]
    assert trip.type == "plan" and "next month (September 2023)" in trip.content and trip.valid_from == "2023-08-02"
    assert report.as_dict()["counts"]["written"] == len(memories)


def test_a_newer_job_supersedes_the_older_and_a_repeated_fact_is_confirmed(chat_palace):
    report = distill(chat_palace)
    memories = _by_turn(chat_palace)
    nurse, teacher = memories["D1:3"], memories["D2:2"]
    assert report.superseded == [{"old": nurse.id, "new": teacher.id, "attribute": "job"}]
    assert nurse.superseded_by == [teacher.id] and nurse.valid_until == "2023-06-12"
    assert teacher.supersedes == [nurse.id] and teacher.valid_from == "2023-06-12"
    hiking = memories["D1:5"]
    assert "D2:4" not in memories  # the same fact, told again in session 2
    assert hiking.meta["confirmed_by"] == ["locomo-conv-t-s02/D2:4"] and str(hiking.meta["confirmed"]) == "2023-06-20"
    assert [k["memory"] for k in report.known] == [hiking.id]


def test_a_second_run_changes_nothing(chat_palace):
    first = distill(chat_palace)
    before = _files(chat_palace)
    second = distill(chat_palace)
    assert first.written and not second.written and not second.known and not second.superseded
    assert second.already == len(first.written) + len(first.known)
    assert _files(chat_palace) == before


def test_dry_run_and_filters_write_nothing_or_only_what_was_asked(chat_palace):
    dry = distill(chat_palace, dry_run=True)
    assert dry.written and not (chat_palace.root / "memories" / "distilled").exists()
    only = distill(chat_palace, session="locomo-conv-t-s03")
    assert {m["turn"].split("/")[0] for m in only.written} == {"locomo-conv-t-s03"}
    later = distill(chat_palace, since="2023-06", until="2023-06-30")
    assert {m["turn"].split("/")[0] for m in later.written} == {"locomo-conv-t-s02"}
    assert distill(chat_palace, until="2023-05").written  # session 1 was left for last
    with pytest.raises(Exception, match="no imported session"):
        distill(chat_palace, session="nope")


def test_the_domain_is_palace_tomls(chat_palace):
    config = chat_palace.root / "palace.toml"
    config.write_text(config.read_text(encoding="utf-8") + '\n[distill]\ndomain = "people"\n', encoding="utf-8")
    chat_palace.reload_config()
    distill(chat_palace, session="locomo-conv-t-s01")
    assert {p.parent.name for p in (chat_palace.root / "memories").rglob("*.md")} == {"people"}
    config.write_text(config.read_text(encoding="utf-8") + 'threshold = "high"\n', encoding="utf-8")
    chat_palace.reload_config()
    with pytest.raises(Exception, match=r"\[distill\] threshold"):
        distill(chat_palace)


def test_a_memory_of_a_session_wakes_up_and_is_found(chat_palace):
    distill(chat_palace)
    from palace_cli.search.retrieve import search

    hits = search(chat_palace, "greyhound called Biscuit", k=5).hits
    memory_hits = [h for h in hits if h.kind == "memory"]
    assert memory_hits and load_note(chat_palace.root, memory_hits[0].path, "distilled").meta["turn"] == "D3:2"


def test_cli_distill(chat_palace):
    runner = CliRunner()
    dry = runner.invoke(cli, ["--palace", str(chat_palace.root), "distill", "--dry-run", "--session",
                              "locomo-conv-t-s03"])
    assert dry.exit_code == 0, dry.output
    assert "Would write 2 memories" in dry.output and "adopted a second dog" in dry.output
    done = runner.invoke(cli, ["--palace", str(chat_palace.root), "distill", "--json"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert data["counts"]["written"] >= 5 and data["counts"]["superseded"] == 1 and not data["dry_run"]
    again = runner.invoke(cli, ["--palace", str(chat_palace.root), "distill"])
    assert again.exit_code == 0 and "Wrote 0 memories" in again.output


def test_bench_scores_the_fixture(tmp_path):
    from palace_cli.bench.distill import Scored, load_observations, run_distill_bench, score

    two = [locomo_sample("conv-t"), locomo_sample("conv-u")]
    path = tmp_path / "two.json"
    path.write_text(json.dumps(two), encoding="utf-8")
    observations = load_observations(path)
    assert len(observations["conv-t"]) == 8
    perfect = [Scored("conv-t", ("D1:3",), "Ada works as a nurse at the city hospital", "fact"),
               Scored("conv-t", ("D1:4",), "Wow congrats", "fact")]
    scored = score(perfect, {"conv-t": observations["conv-t"]})
    assert scored["recall"] == 1 / 8 and scored["precision"] == 0.5 and scored["by_type"]["fact"]["memories"] == 2
    summary = run_distill_bench(path, modes=("lexical",))
    assert summary["observations"] == 16 and summary["speed"]["turns"] == 34
    assert 0.5 <= summary["palace"]["recall"] <= 1 and 0.5 <= summary["palace"]["precision"] <= 1
    assert set(summary["cross_validated"]["by_conversation"]) == {"conv-t", "conv-u"}
    evidence = summary["evidence_recall@10"]["lexical"]
    assert evidence["questions"] == 8 and 0 <= evidence["turns"] <= 1 and 0 <= evidence["memories+turns"] <= 1


def test_mcp_distill_tool(chat_palace):
    import anyio

    from test_mcp import call, session

    async def scenario():
        async with session(chat_palace.root) as client:
            return await call(client, "distill"), await call(client, "distill")

    done, again = anyio.run(scenario)
    assert not done[0] and done[1].startswith("wrote ") and "1 superseding" in done[1].splitlines()[0]
    assert "[event] Ben finally adopted a second dog" in done[1] and "(conversations/locomo/conv-t-s03.md:" in done[1]
    assert again == (False, "wrote 0 memories from 17 turns; 0 already known, 0 superseding")


def test_the_memory_core_imports_no_click_or_rich():
    import subprocess
    import sys

    code = ("import sys, palace_cli.memory.distill, palace_cli.memory.consolidate, palace_cli.memory.llmstage, "
            "palace_cli.capture.claude_code, palace_cli.capture.settings, palace_cli.bench.distill; "
            "bad = [m for m in ('click', 'rich') if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr[-500:]


def test_links_said_in_a_chat_are_quoted_not_linked(tmp_path):
    """`[[Home]]` typed in a chat is text someone said: the memory shows it as written and links nothing."""
    sample = locomo_sample()
    turn = sample["conversation"]["session_3"][2]
    turn["text"] = turn["text"].replace("hike the fjords.", "hike the fjords, the plan is in [[Home]].")
    (tmp_path / "conv.json").write_text(json.dumps([sample]), encoding="utf-8")
    palace = Palace(init_palace(tmp_path / "chat-palace", "Chat"))
    import_path(palace, tmp_path / "conv.json")
    distill(palace)
    trip = _by_turn(palace)["D3:3"]
    assert "\\[\\[Home\\]\\]" in trip.content and "[[Home]]" not in trip.content.replace("\\[\\[Home\\]\\]", "")
    assert trip.body_links == [] and trip.all_links == []


def _said_over_and_over(path, sentences: list[str], session: str):
    """A Claude Code session whose user says each sentence in turn, the agent answering the same each time."""
    lines, parent = [], None
    for i, text in enumerate(sentences):
        for kind, uuid, content in (("user", f"u{i}", text),
                                    ("assistant", f"a{i}", [{"type": "text", "text": "Understood, I will use tabs."}])):
            message = {"role": kind, "content": content, **({"id": f"m{i}"} if kind == "assistant" else {})}
            lines.append(json.dumps({"parentUuid": parent, "isSidechain": False, "cwd": "/p", "sessionId": session,
                                     "type": kind, "uuid": uuid, "message": message,
                                     "timestamp": f"2025-06-02T18:{i:02d}:{30 if kind == 'assistant' else 0}.000Z"}))
            parent = uuid
    path.mkdir(parents=True, exist_ok=True)
    (path / f"{session}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_thirty_identical_turns_are_one_memory_and_consolidate_merges_nothing(tmp_path):
    """Issue 34 row 18: "I prefer tabs" thirty times in a session (in case and punctuation variants), then again in a
    later session distilled by a later run: one memory, confirmed by the other turns (it was 30 memories, and
    consolidate proposed 84 merges)."""
    from palace_cli.memory.consolidate import consolidate

    palace = Palace(init_palace(tmp_path / "p", "Tabs"))
    said = ["I prefer tabs", "I prefer tabs.", "i prefer tabs", "I prefer tabs!", "I PREFER TABS"] * 6
    import_path(palace, _said_over_and_over(tmp_path / "one", said, "11111111-2222-3333-4444-555555555555"))
    first = distill(palace)
    [memory] = [m for m in _by_turn(palace).values() if "tabs" in m.content.lower()]
    assert len(first.written) == 1 and all(k["memory"] == memory.id for k in first.known)
    import_path(palace, _said_over_and_over(tmp_path / "two", said[:3], "11111111-2222-3333-4444-666666666666"))
    second = distill(palace)
    assert not second.written and not second.superseded
    assert len(_by_turn(palace)) == 1
    assert consolidate(palace).merges == []


def test_a_session_said_on_9999_12_31_is_skipped_in_one_line_and_the_others_distilled(tmp_path):
    """Issue 34 row 6: a LoCoMo session dated 9999-12-31 whose turn says "next month" (year 10000): that session is
    skipped with one line, every other is distilled, and every later run too; MCP distill answers (it said only
    "Error executing tool distill", and every distill died on the traceback)."""
    import subprocess
    import sys

    import anyio

    from test_mcp import call, session

    sample = locomo_sample()
    sample["conversation"]["session_3_date_time"] = "7:30 pm on 31 December, 9999"
    source = tmp_path / "conv.json"
    source.write_text(json.dumps([sample]), encoding="utf-8")
    palace = Palace(init_palace(tmp_path / "p", "Far"))
    import_path(palace, source)
    palace_bin = [sys.executable, "-c", "from palace_cli.cli import main; main()", "--palace", str(palace.root)]
    skipped = ("warning: conversations/locomo/conv-t-s03.md: 'next month' said on 9999-12-31 names a day outside the "
               "years 0001-9999; session skipped")
    for _ in range(2):
        done = subprocess.run([*palace_bin, "distill"], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0 and skipped in done.stderr and "Traceback" not in done.stderr
    turns = {m.meta["turn"] for m in _by_turn(palace).values()}
    assert {"D1:3", "D2:2"} <= turns and not any(t.startswith("D3:") for t in turns)

    async def scenario():
        async with session(palace.root) as client:
            return await call(client, "distill")

    failed, text = anyio.run(scenario)
    assert not failed and "wrote 0 memories" in text and "9999-12-31" in text
