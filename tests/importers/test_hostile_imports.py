"""Hostile exports (issue 25, rows 5-12 and 19): one bad record is reported and skipped, the rest imported.

Every reproduction of the issue is a real file imported into a real palace; the last test generates hostile
exports with hypothesis (dates, ids, nesting, headers inside text) and checks that no exception escapes, every
good record is imported as it was, and nothing is written outside the palace.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from conversation_fixtures import (SESSION, chatgpt_conversations, claude_ai_conversations, claude_code_lines,
                                   locomo_samples, write_chatgpt, write_claude_code)

from palace_cli.conversations import load_session, session_files
from palace_cli.conversations.model import clean_text
from palace_cli.core.dates import iso_time
from palace_cli.conversations.sessionfile import MAX_SESSION_BYTES
from palace_cli.editing.authoring import init_palace
from palace_cli.editing.lint import lint
from palace_cli.errors import ImportFailed
from palace_cli.importers import import_path
from palace_cli.palace import Palace
from palace_cli.search.retrieve import search

DEEP = "[" * 100_000 + "]" * 100_000  # past any recursion limit: json.loads raises RecursionError


@pytest.fixture
def palace(tmp_path) -> Palace:
    return Palace(init_palace(tmp_path / "p", name="Hostile"))


def sessions(palace: Palace) -> dict[str, object]:
    """Every session file of the palace, read back: relpath -> Session."""
    return {rel: load_session(palace.root, rel) for rel, _, _ in session_files(palace.root)}


def problems(report) -> list[str]:
    return [str(p) for p in report.problems]


def cc_record(uuid, parent, kind="user", text="hello", **extra) -> dict:
    """A Claude Code record of the fixture's session."""
    record = {"parentUuid": parent, "isSidechain": False, "cwd": "/home/me/code", "sessionId": SESSION,
              "type": kind, "uuid": uuid, "timestamp": "2025-06-02T18:46:59.937Z",
              "message": {"role": kind, "content": text}}
    if kind == "assistant":
        record["message"]["id"] = f"msg-{uuid}"
    record.update(extra)
    return record


def write_lines(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


# ---- row 5: one bad record never stops an import -------------------------------------------------


@pytest.mark.parametrize("bad, why", [
    ('{"type":"user","uuid":"deep","message":{"role":"user","content":' + DEEP + "}}",
     ":16: nested deeper than Python can read; line left out"),
    (json.dumps(cc_record(["a", "list"], "u4")), ":16: `uuid` is a list, not text; line left out"),
    (json.dumps(cc_record("z1", ["u4"])), ":16: `parentUuid` is a list, not text; line left out"),
    (json.dumps({"type": "summary", "summary": "s", "leafUuid": ["u4"]}),
     ":16: `leafUuid` is a list, not text; line left out"),
    (json.dumps(cc_record("z2", "u4", text="lone \\ud800 half")).replace("\\\\ud800", "\\ud800"),
     ": session " + SESSION + ": lone surrogate escapes"),
])
def test_one_bad_claude_code_line_is_reported_and_the_session_imported(palace, tmp_path, bad, why):
    file = write_claude_code(tmp_path / "project", claude_code_lines() + [bad])
    report = import_path(palace, file)
    assert report.counts()["added"] == 1
    assert any(p.startswith(str(file)) and why in p for p in problems(report)), problems(report)
    [session] = sessions(palace).values()
    assert session.problems == [] and {"u1", "a1", "a5"} <= {t.id for t in session.turns}
    assert "\ud800" not in (palace.root / session.path).read_text(encoding="utf-8")


def _chatgpt_with(tmp_path: Path, bad_json: str) -> Path:
    """A ChatGPT export: the fixture's conversations with a bad one between them (raw JSON text)."""
    good = [json.dumps(c) for c in chatgpt_conversations()]
    folder = tmp_path / "gpt"
    folder.mkdir()
    (folder / "conversations.json").write_text("[\n" + ",\n".join([good[0], bad_json] + good[1:]) + "\n]\n")
    return folder


def _renamed(conversation: dict, cid: str) -> dict:
    copy = json.loads(json.dumps(conversation))
    copy["id"] = copy["conversation_id"] = cid
    return copy


@pytest.mark.parametrize("bad, why", [
    ('{"id": "deep", "mapping": ' + DEEP + "}", "conversations.json:3: conversation 2 is nested deeper than Python"),
    (json.dumps({**_renamed(chatgpt_conversations()[0], "c-list"), "current_node": ["n1"]}),
     "conversations.json:3: conversation 2: `current_node` is a list, not text; left out"),
    (json.dumps(_renamed(chatgpt_conversations()[0], "c-sur")).replace('"title": "', '"title": "\\udc00', 1),
     "conversations.json:3: session c-sur: lone surrogate escapes"),
    (json.dumps({**_renamed(chatgpt_conversations()[0], "c-parent"),
                 "mapping": {"n1": {"id": "n1", "parent": ["root"], "message": None}}}),
     "conversations.json:3: conversation 2: `parent` is a list, not text; left out"),
])
def test_one_bad_chatgpt_conversation_is_reported_and_the_others_imported(palace, tmp_path, bad, why):
    clean = Palace(init_palace(tmp_path / "clean", name="Clean"))
    expected = import_path(clean, write_chatgpt(tmp_path / "plain")).counts()["added"]
    report = import_path(palace, _chatgpt_with(tmp_path, bad))
    assert any(why in p for p in problems(report)), problems(report)
    read = sessions(palace)
    assert len(read) >= expected and all(s.problems == [] for s in read.values())
    assert {s.source_id for s in read.values()} >= {s.source_id for s in sessions(clean).values()}


def test_a_claude_ai_message_with_attachments_5_is_imported_without_them(palace, tmp_path):
    conversations = claude_ai_conversations()
    conversations[0]["chat_messages"][0]["attachments"] = 5
    conversations.append({"uuid": "deep", "name": "x", "chat_messages": [{"uuid": "m", "sender": "human",
                                                                           "text": "hi", "content": None}]})
    folder = tmp_path / "claude"
    folder.mkdir()
    text = json.dumps(conversations, indent=1).replace('"content": null', '"content": ' + DEEP)
    (folder / "conversations.json").write_text(text)
    report = import_path(palace, folder)
    assert any("`attachments` is a number, not a list; left out" in p for p in problems(report)), problems(report)
    assert any(f"conversation {len(conversations)} is nested deeper than Python can read" in p
               for p in problems(report)), problems(report)
    first = conversations[0]["chat_messages"][0]
    [session] = [s for s in sessions(palace).values() if s.source_id == conversations[0]["uuid"]]
    assert session.turns[0].id == first["uuid"] and first["text"] in session.turns[0].text


def test_a_bad_locomo_sample_and_turn_are_left_out_and_the_rest_imported(palace, tmp_path):
    samples = locomo_samples()
    samples[0]["conversation"]["session_1"][1]["dia_id"] = ["D1:2"]
    text = json.dumps(samples).replace('"sample_id": "conv-2"', '"sample_id": ' + DEEP, 1)
    (tmp_path / "locomo.json").write_text(text)
    report = import_path(palace, tmp_path / "locomo.json", format="locomo")
    shown = problems(report)
    assert any("conv-1 session_1[1]: `dia_id` is a list, not text; left out" in p for p in shown), shown
    assert any("sample 2 is nested deeper than Python can read; left out" in p for p in shown), shown
    read = {s.source_id: s for s in sessions(palace).values()}
    assert set(read) == {"conv-1/session_1", "conv-1/session_2"}
    assert "D1:2" not in {t.id for t in read["conv-1/session_1"].turns} and len(read["conv-1/session_1"].turns) >= 1


def test_memory_imports_refuse_deep_json_whole_and_read_a_lone_surrogate_as_ufffd(palace, tmp_path):
    (tmp_path / "deep.json").write_text(DEEP)
    (tmp_path / "beir").mkdir()
    (tmp_path / "beir" / "corpus.jsonl").write_text('{"_id": "d0", "text": "fine"}\n'
                                                    '{"_id": "d1", "text": ' + DEEP + "}\n")
    for source, why in ((tmp_path / "deep.json", "deep.json: JSON nested too deeply to read"),
                        (tmp_path / "beir", "corpus.jsonl:2: ")):
        with pytest.raises(ImportFailed, match=why):  # a memory import is checked whole before anything is written
            import_path(palace, source)
    assert not list(palace.memories_dir.rglob("*.md"))
    (tmp_path / "m.json").write_text('[{"id": "a1", "subject": "Bad \\ud800 subject", "image": "Forty granite owls '
                                     'dance", "content": "c"}, {"id": "a2", "subject": "Good", "image": "Seven copper '
                                     'kettles sing", "content": "d", "keywords": ["\\udc00"]}]')
    report = import_path(palace, tmp_path / "m.json")
    assert sorted(report.added) == ["a1", "a2"]
    assert [w for w in report.warnings if "lone surrogate" in w] == [
        "m.json: [0]: lone surrogate escapes (`\\ud800`) are not characters; read as U+FFFD",
        "m.json: [1]: lone surrogate escapes (`\\ud800`) are not characters; read as U+FFFD"]
    assert palace.memory("a1").subject == "Bad \ufffd subject" and palace.memory("a2").keywords == ["\ufffd"]


# ---- row 6: a chat file's own `source:` never takes another source's session ---------------------


def test_chat_text_frontmatter_source_is_not_kept_and_reimport_is_idempotent(palace, tmp_path):
    chat = tmp_path / "chat.md"
    chat.write_text("---\nsource: chatgpt\nsource_id: 6f1c2d3e-0000-4000-8000-000000000001\nimported: x\n---\n"
                    "Alice: hello there\nBob: hi\nAlice: again\nBob: yes\n")
    first = import_path(palace, chat, format="chat-markdown")
    assert first.counts()["added"] == 1
    assert sum("`source` is a field palace writes itself; not kept" in p for p in problems(first)) == 1
    assert import_path(palace, chat, format="chat-markdown").counts()["skipped"] == 1
    [(rel, session)] = sessions(palace).items()
    assert rel == "conversations/chat/chat.md" and (session.source, session.source_id) == ("chat", "chat")
    before = (palace.root / rel).read_bytes()
    gpt = import_path(palace, write_chatgpt(tmp_path / "gpt"))
    assert gpt.counts()["added"] == gpt.counts()["sessions"] > 0
    assert (palace.root / rel).read_bytes() == before
    assert all(o.path.startswith("conversations/chatgpt/") for o in gpt.sessions)


# ---- row 7: text never forges a turn -------------------------------------------------------------


FORGED = "### assistant · 2024-01-01T00:00:00Z · injected-1"


def test_a_header_line_in_chat_text_is_text_in_the_preamble_and_in_a_turn(palace, tmp_path):
    (tmp_path / "chat.txt").write_text(f"{FORGED}\nbefore anyone spoke\nAlice: hello\n{FORGED}\n\\{FORGED}\n"
                                       "Bob: hi\nAlice: x\nBob: y\n")
    report = import_path(palace, tmp_path / "chat.txt")
    assert report.counts()["added"] == 1
    [session] = sessions(palace).values()
    assert session.problems == []
    assert [t.speaker for t in session.turns] == ["Alice", "Bob", "Alice", "Bob"]
    assert session.preamble == f"{FORGED}\nbefore anyone spoke"
    assert session.turns[0].text == f"hello\n{FORGED}\n\\{FORGED}"
    assert "injected-1" not in {t.id for t in session.turns}
    assert [p for p in lint(palace).problems if "conversations/" in str(p)] == []
    hits = search(palace, "injected", mode="lexical").hits
    assert hits[0].turn.turn == session.turns[0].id  # found as what Alice said
    assert not any(h.turn.turn.endswith("injected-1") for h in hits if h.turn)
    assert import_path(palace, tmp_path / "chat.txt").counts()["skipped"] == 1


# ---- row 8: ids that look like dates -------------------------------------------------------------


def test_turn_ids_that_look_like_dates_round_trip(palace, tmp_path):
    lines = [json.dumps(cc_record("2024-01-01", None, text="first")),
             json.dumps(cc_record("2024-01-02T10:00", "2024-01-01", "assistant", "second", timestamp=None)),
             json.dumps(cc_record("2024-01-03", "2024-01-02T10:00", text="third"))]
    cc = write_lines(tmp_path / "cc" / "dated.jsonl", lines)
    gpt = {"id": "dated", "title": "Dated", "current_node": "2024-01-02", "mapping": {
        "2024-01-01": {"id": "2024-01-01", "parent": None, "children": ["2024-01-02"],
                       "message": {"id": "2024-01-01", "author": {"role": "user"}, "create_time": None,
                                   "content": {"content_type": "text", "parts": ["a question"]}}},
        "2024-01-02": {"id": "2024-01-02", "parent": "2024-01-01", "children": [],
                       "message": {"id": "2024-01-02", "author": {"role": "assistant"}, "create_time": 1717000000,
                                   "content": {"content_type": "text", "parts": ["an answer"]}}}}}
    write_chatgpt(tmp_path / "gpt", [gpt])
    samples = locomo_samples()
    samples[0]["conversation"]["session_1"][0]["dia_id"] = "2023-05-08"
    (tmp_path / "locomo.json").write_text(json.dumps(samples))
    for source in (cc, tmp_path / "gpt", tmp_path / "locomo.json"):
        report = import_path(palace, source)
        assert report.counts()["added"] >= 1
        assert [p for p in problems(report) if "no dia_id" not in p] == []  # the fixture's one malformed turn
    read = {s.source: s for s in sessions(palace).values() if s.source_id in ("dated", "conv-1/session_1")}
    assert [t.id for t in read["claude-code"].turns] == ["2024-01-01", "2024-01-02T10:00", "2024-01-03"]
    assert [t.text for t in read["claude-code"].turns] == ["first", "second", "third"]
    assert [(t.id, t.time) for t in read["chatgpt"].turns] == [("2024-01-01", None),
                                                               ("2024-01-02", "2024-05-29T16:26:40Z")]
    assert read["claude-code"].turns[1].time is None and read["locomo"].turns[0].id == "2023-05-08"
    assert all(s.problems == [] for s in read.values())
    text = (palace.root / read["claude-code"].path).read_text()
    assert "### assistant · - · 2024-01-02T10:00\n" in text
    assert import_path(palace, cc).counts()["skipped"] == 1


# ---- row 9: a deep cwd -----------------------------------------------------------------------------


@pytest.mark.parametrize("cwd, kept", [
    ("/" + "/".join(f"folder {i}" for i in range(150)), True),
    (json.loads("[" * 150 + '"/home"' + "]" * 150), False),
])
def test_a_deep_claude_code_cwd_reads_back_and_reimport_adds_nothing(palace, tmp_path, cwd, kept):
    lines = [json.dumps(cc_record("u1", None, cwd=cwd)), json.dumps(cc_record("a1", "u1", "assistant", "hi", cwd=cwd))]
    file = write_lines(tmp_path / "cc" / "deep.jsonl", lines)
    report = import_path(palace, file)
    assert report.counts()["added"] == 1
    assert kept or any("`cwd` is nested more than 50 levels deep; not kept" in p for p in problems(report))
    [session] = sessions(palace).values()
    assert session.problems == [] and (session.meta.get("cwd") == cwd) == kept
    again = import_path(palace, file)
    assert again.counts()["skipped"] == 1 and len(sessions(palace)) == 1


# ---- row 10: one session id in two exports ---------------------------------------------------------


def test_one_session_id_in_two_exports_is_kept_apart_and_each_reimport_is_a_skip(palace, tmp_path):
    first = write_chatgpt(tmp_path / "export-may")
    other = chatgpt_conversations()
    for conversation in other:
        conversation["title"] = "Something else entirely"
        for node in conversation.get("mapping", {}).values():
            parts = ((node.get("message") or {}).get("content") or {}).get("parts")
            if parts and isinstance(parts[0], str):
                parts[0] = "another conversation that happens to share the ids"
    second = write_chatgpt(tmp_path / "export-june", other)
    added = import_path(palace, first).counts()["added"]
    before = {rel: (palace.root / rel).read_bytes() for rel in sessions(palace)}
    report = import_path(palace, second)
    assert report.counts()["added"] == added and report.counts()["updated"] == 0
    assert sum("is also in chatgpt:export-may/conversations.json, with other text under" in p
               for p in problems(report)) == added
    assert all((palace.root / rel).read_bytes() == data for rel, data in before.items())
    assert len(sessions(palace)) == 2 * added
    for export in (first, second):
        assert import_path(palace, export).counts()["skipped"] == added
    assert len(sessions(palace)) == 2 * added


def test_the_same_export_grown_still_follows_the_source_and_says_what_it_replaced(palace, tmp_path):
    lines = [json.dumps(cc_record("u1", None, text="question")),
             json.dumps(cc_record("a1", "u1", "assistant", "Let me look.")),
             json.dumps(cc_record("u2", "a1", text="thanks"))]
    file = write_lines(tmp_path / "project" / "s.jsonl", lines)
    import_path(palace, tmp_path / "project")  # the project folder; then its file alone (a hook does that)
    grown = json.loads(lines[1])  # a second record of the same message: the turn's text grows
    grown.update({"uuid": "a2", "parentUuid": "a1", "message": {**grown["message"], "content": "Found it."}})
    lines.insert(2, json.dumps(grown))
    lines[3] = lines[3].replace('"parentUuid": "a1"', '"parentUuid": "a2"')
    write_lines(file, lines)
    report = import_path(palace, file)
    assert report.counts()["updated"] == 1 and len(sessions(palace)) == 1
    assert any("1 turn changed in the source since the last import (the first: a1)" in p for p in problems(report))
    [session] = sessions(palace).values()
    assert session.turns[1].text == "Let me look.\n\nFound it."


# ---- row 11: timestamps that cannot be read are reported -------------------------------------------


def test_unreadable_and_out_of_range_timestamps_are_reported_and_early_years_kept(palace, tmp_path):
    stamps = ["0999-03-04T05:06:07Z", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "yesterday",
              1e300, "2024-01-01T10:00:00Z"]
    lines, parent = [], None
    for n, stamp in enumerate(stamps):
        lines.append(json.dumps(cc_record(f"t{n}", parent, "user" if n % 2 == 0 else "assistant", f"turn {n}",
                                          timestamp=stamp)))
        parent = f"t{n}"
    file = write_lines(tmp_path / "cc" / "times.jsonl", lines)
    report = import_path(palace, file)
    assert f"{file}:2: 4 timestamps cannot be read or are out of range (the first: " \
           "'0001-01-01T00:00:00+01:00'); left without a time" in problems(report)
    [session] = sessions(palace).values()
    assert [t.time for t in session.turns] == ["0999-03-04T05:06:07Z", None, None, None, None, "2024-01-01T10:00:00Z"]
    assert session.started == "0999-03-04T05:06:07Z" and session.problems == []


# ---- row 12: LoCoMo sessions by number ---------------------------------------------------------------


def test_locomo_sessions_are_read_by_number_not_spelling(palace, tmp_path):
    samples = locomo_samples()
    conversation = samples[0]["conversation"]
    conversation["session_01"] = conversation.pop("session_1")
    conversation["session_01_date_time"] = conversation.pop("session_1_date_time")
    conversation["session_002"] = json.loads(json.dumps(conversation["session_2"]))
    (tmp_path / "locomo.json").write_text(json.dumps(samples))
    report = import_path(palace, tmp_path / "locomo.json")
    shown = problems(report)
    assert any("conv-1 session_002: session 2 again (it is `session_2` too); left out" in p for p in shown), shown
    read = {s.source_id: s for s in sessions(palace).values()}
    assert {"conv-1/session_1", "conv-1/session_2"} <= set(read)
    assert read["conv-1/session_1"].started is not None and read["conv-1/session_1"].turns[0].id.startswith("D1:")


# ---- row 19: a 200 MB message -------------------------------------------------------------------------


MEMORY_PROBE = """
import resource, sys
from palace_cli.palace import Palace
from palace_cli.importers import import_path
report = import_path(Palace(sys.argv[1]), sys.argv[2])
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, report.counts()["added"])
for problem in report.problems:
    print(problem)
"""


def _peak_mb(palace: Palace, source: Path) -> tuple[int, int, str]:
    """(peak resident MB, sessions added, problem lines) of an import in a fresh process."""
    done = subprocess.run([sys.executable, "-c", MEMORY_PROBE, str(palace.root), str(source)], capture_output=True,
                          text=True, check=True, env={**os.environ, "PALACE_HOME": str(palace.root.parent / "h")})
    first, *rest = done.stdout.splitlines()
    peak, added = map(int, first.split())
    return peak, added, "\n".join(rest)


@pytest.mark.slow
@pytest.mark.parametrize("format", ["claude-code", "chatgpt"])
def test_a_200_mb_message_is_refused_with_memory_near_the_cap(palace, tmp_path, format):
    huge = "x" * 200_000_000
    if format == "claude-code":
        lines = [json.dumps(cc_record("u1", None, text="small question")),
                 json.dumps(cc_record("a1", "u1", "assistant", huge)),
                 json.dumps(cc_record("u2", "u1", text="and a small answer"))]
        source = write_lines(tmp_path / "cc" / "huge.jsonl", lines)
        del lines
        why = f"huge.jsonl:2: line is over the {MAX_SESSION_BYTES:,} byte limit for a session file; left out"
    else:
        conversations = chatgpt_conversations()
        big = _renamed(conversations[0], "big")
        big["mapping"]["n1"]["message"]["content"]["parts"] = ["HUGE"]
        text = json.dumps(conversations[:1] + [big] + conversations[1:]).replace('["HUGE"]', f'["{huge}"]')
        source = tmp_path / "gpt" / "conversations.json"
        source.parent.mkdir()
        source.write_text(text)
        del text
        why = f"is over the {MAX_SESSION_BYTES:,} byte limit for a session file; left out"
    del huge
    (tmp_path / "small.txt").write_text("Ann: hi\nBob: ho\n")
    baseline, _, _ = _peak_mb(Palace(init_palace(tmp_path / "small", name="Small")), tmp_path / "small.txt")
    peak, added, shown = _peak_mb(palace, source)
    assert why in shown
    assert added >= 1  # the records beside it are imported
    cap_mb = MAX_SESSION_BYTES / 1e6
    # One record is held at most (up to the cap, as text and decoded): a few times the cap, not the message.
    assert peak - baseline < 6 * cap_mb, (peak, baseline)


# ---- the property: generated hostile exports ----------------------------------------------------------

HOSTILE_EXAMPLES = int(os.environ.get("PALACE_HYPOTHESIS_EXAMPLES", "25"))
HOSTILE = settings(max_examples=HOSTILE_EXAMPLES, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Text that is fine in JSON and in a file: anything but lone surrogates (those are another test's).
PLAIN = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
HEADERS = st.sampled_from([FORGED, "\\" + FORGED, "\\\\" + FORGED, "### user · x", "### Bob · 2024-03-01", "---",
                           "# title", "### a · - · 2024-01-01", "Alice: hi", "```", "[[link]]"])
TEXT = st.tuples(st.lists(st.one_of(PLAIN, HEADERS), max_size=4), st.integers(0, 999)).map(
    lambda t: "\n".join(t[0] + [f"word{t[1]}"]))  # never blank: a blank message is left out, by design
IDS = st.one_of(st.from_regex(r"[A-Za-z0-9_:.#-]{1,12}", fullmatch=True),
                st.sampled_from(["2024-01-01", "2024-01-01T10:00", "0999-12-31", "a · b", "x  y", "-", "D1:1"]))
TIMES = st.one_of(st.none(), st.sampled_from(["2024-01-01T00:00:00Z", "0001-01-01T00:00:00+01:00", "0999-01-01",
                                              "9999-12-31T23:59:59-01:00", "yesterday", "", "2024-13-45"]),
                  st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**20, 10**20), PLAIN)
BAD_IDS = st.one_of(st.lists(st.text(max_size=3), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(),
                                                                               max_size=2), st.booleans())
SPEAKERS = st.one_of(st.sampled_from(["Ana", "Ben", "user", "Dr · Who", "### x"]), PLAIN.filter(str.strip))


@st.composite
def conversations(draw, format: str, number: int) -> tuple[dict, list[tuple[str, str, str, object]]]:
    """A good conversation: (its record, its turns as (id, speaker, text, time) the source gives them)."""
    ids = draw(st.lists(IDS, min_size=1, max_size=5, unique_by=lambda i: "-".join(i.split())))
    turns = []
    for n, turn_id in enumerate(ids):
        speaker = draw(SPEAKERS) if format == "locomo" else ("user", "assistant")[n % 2]
        turns.append((turn_id, speaker, draw(TEXT), None if format == "locomo" else draw(TIMES)))
    cid = f"good-{number}"
    if format == "chatgpt":
        mapping = {}
        for n, (turn_id, role, text, time) in enumerate(turns):
            parent = turns[n - 1][0] if n else None
            children = [turns[n + 1][0]] if n + 1 < len(turns) else []
            mapping[turn_id] = {"id": turn_id, "parent": parent, "children": children,
                                "message": {"id": turn_id, "author": {"role": role}, "create_time": time,
                                            "content": {"content_type": "text", "parts": [text]}}}
        return {"id": cid, "title": draw(PLAIN), "current_node": turns[-1][0], "mapping": mapping}, turns
    if format == "claude-ai":
        messages = [{"uuid": turn_id, "sender": "human" if role == "user" else role, "text": text, "created_at": time}
                    for turn_id, role, text, time in turns]
        return {"uuid": cid, "name": draw(PLAIN), "chat_messages": messages}, turns
    if format == "claude-code":
        lines = [cc_record(turn_id, turns[n - 1][0] if n else None, role, text, timestamp=time)
                 for n, (turn_id, role, text, time) in enumerate(turns)]
        return {"lines": lines}, turns
    entries = [{"speaker": speaker, "dia_id": turn_id, "text": text} for turn_id, speaker, text, _ in turns]
    date = draw(st.sampled_from(["1:56 pm on 8 May, 2023", "never", "1:00 am on 1 January, 0999"]))
    return {"sample_id": cid, "conversation": {"speaker_a": "Ana", "speaker_b": "Ben", "session_1": entries,
                                               "session_1_date_time": date}}, turns


@st.composite
def hostile(draw, format: str, number: int) -> str:
    """A bad record, as JSON text: an id that is not text, nesting past the recursion limit, a lone surrogate."""
    record, _ = draw(conversations(format, number))
    kind = draw(st.sampled_from(["id", "deep", "surrogate", "shape"]))
    if kind == "shape":
        return json.dumps(draw(st.one_of(st.lists(st.integers(), max_size=2), st.text(max_size=5), st.none(),
                                         st.just({"mapping": 5, "chat_messages": 5, "conversation": 5}))))
    if format == "claude-code":
        line = record["lines"][draw(st.integers(0, len(record["lines"]) - 1))]
        key = draw(st.sampled_from(["uuid", "parentUuid", "type", "message", "timestamp"]))
        record = line
    else:
        key = {"chatgpt": "current_node", "claude-ai": "uuid", "locomo": "conversation"}[format]
    record[key] = draw(BAD_IDS) if kind == "id" else "__DEEP__" if kind == "deep" else "__LONE__"
    return json.dumps(record)  # the markers become nesting and a lone surrogate when the file is written


def _hostile_text(text: str) -> str:
    return text.replace('"__DEEP__"', DEEP).replace('"__LONE__"', '"lone \\ud800 half"')


def _export(draw, format: str, folder: Path) -> tuple[Path, dict[str, list]]:
    """Write an export of the format with good and hostile records; returns (source, {source id: turns})."""
    good, texts = {}, []
    folder.mkdir(parents=True)
    for number in range(draw(st.integers(1, 3))):
        record, turns = draw(conversations(format, number))
        good[f"good-{number}/session_1" if format == "locomo" else f"good-{number}"] = turns
        bad = _hostile_text(draw(hostile(format, 100 + number))) if draw(st.booleans()) else None
        if format == "claude-code":  # a session is a file: a bad line goes into a file of its own
            write_lines(folder / f"good-{number}.jsonl", [json.dumps(line) for line in record["lines"]])
            if bad is not None:
                write_lines(folder / f"bad-{number}.jsonl", [bad])
        else:
            texts += [json.dumps(record)] + ([bad] if bad is not None else [])
    if format == "claude-code":
        return folder, good
    name = "locomo.json" if format == "locomo" else "conversations.json"
    (folder / name).write_text("[\n" + ",\n".join(texts) + "\n]\n")
    return folder / name, good


def _chat(draw, folder: Path) -> tuple[Path, list[str]]:
    """A chat text file with hostile frontmatter, preamble and messages; returns (file, a marker per message)."""
    folder.mkdir(parents=True)
    head = draw(st.sampled_from(["", "---\nsource: chatgpt\nsource_id: good-0\nimported: {}\n---\n",
                                 "---\nid: [a, b]\ndate: yesterday\ntitle: 5\n---\n", "---\n: : :\n---\n",
                                 "---\ndate: 0001-01-01T00:00:00+01:00\nparticipants: Ann\ncwd: [[[[x]]]]\n---\n"]))
    lines, markers = [head + draw(TEXT)], []
    for n in range(draw(st.integers(2, 5))):
        stamp = draw(st.sampled_from(["", "[09:02] ", "2024-03-01 09:02 ", "[99:99] ", "0001-01-01 00:00 "]))
        markers.append(f"mark{n}x")
        lines.append(f"{stamp}{('Ann', 'Bob')[n % 2]}: {markers[-1]} {draw(TEXT)}")
    (folder / "chat.md").write_text("\n".join(lines), encoding="utf-8")
    return folder / "chat.md", markers


def _snapshot(root: Path, skip: Path | None = None) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and (skip is None or not p.is_relative_to(skip))}


@pytest.mark.slow
@HOSTILE
@given(st.data(), st.sampled_from(["claude-code", "chatgpt", "claude-ai", "locomo", "chat-markdown"]))
def test_generated_hostile_exports_import_every_good_record_and_nothing_else(data, format):
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        palace = Palace(init_palace(base / "palace", name="P"))
        if format == "chat-markdown":
            source, markers = _chat(data.draw, base / "export")
            good = {}
        else:
            source, good = _export(data.draw, format, base / "export")
        outside, inside = _snapshot(base, palace.root), _snapshot(palace.root)
        report = import_path(palace, source, format=format)  # no exception may escape
        assert _snapshot(base, palace.root) == outside  # the source and everything beside the palace untouched
        changed = {p for p, data in _snapshot(palace.root).items() if inside.get(p) != data}
        assert all(p.startswith(("conversations/", "index/", ".palace/")) or p == "INDEX.md" for p in changed), changed
        read = {s.source_id: s for s in sessions(palace).values()}
        assert all(s.problems == [] for s in read.values()), [s.problems for s in read.values()]
        for source_id, turns in good.items():
            session = read[source_id]
            expected = [("-".join(i.split()), " ".join(s.split()).replace(" · ", " - "), clean_text(t), iso_time(w))
                        for i, s, t, w in turns]
            assert [(t.id, t.speaker, t.text, t.time) for t in session.turns] == expected
        if format == "chat-markdown":  # chat text is parsed by rules, not fields: every message is somewhere
            [session] = read.values()
            said = "\n".join([session.preamble] + [turn.text for turn in session.turns])
            assert all(marker in said for marker in markers) and session.source == "chat"
        again = import_path(palace, source, format=format)
        assert again.counts()["sessions"] == again.counts()["skipped"] == report.counts()["sessions"]


# ---- the streaming reader itself ----------------------------------------------------------------------

JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats(allow_nan=False)
                           | st.text(st.characters(blacklist_categories=("Cs",)), max_size=12),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                                         max_size=4), max_leaves=20)


def _stream(file: Path, chunk: int, limit: int | None = None) -> tuple[list, list]:
    """(records, problems) of json_records with tiny chunks (every value cut somewhere) and perhaps a tiny cap."""
    from palace_cli.importers.chats import jsonstream

    saved = jsonstream.CHUNK, jsonstream.MAX_RECORD_BYTES
    jsonstream.CHUNK, jsonstream.MAX_RECORD_BYTES = chunk, limit or saved[1]
    try:
        problems = []
        return list(jsonstream.json_records(file, "x.json", problems)), [str(p) for p in problems]
    finally:
        jsonstream.CHUNK, jsonstream.MAX_RECORD_BYTES = saved


@settings(max_examples=100, deadline=None)
@given(st.lists(JSON_VALUES, max_size=6), st.sampled_from([None, 1, 2]), st.booleans(), st.integers(1, 40),
       st.booleans())
def test_json_records_read_in_small_chunks_equal_json_loads(values, indent, ascii_only, chunk, bom):
    text = json.dumps(values, indent=indent, ensure_ascii=ascii_only)
    with tempfile.TemporaryDirectory() as scratch:
        file = Path(scratch) / "x.json"
        file.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
        read, problems = _stream(file, chunk)
    assert problems == []
    assert [(number, value) for number, _, value in read] == list(enumerate(values, 1))
    if indent == 1:  # each top-level element starts a line with one space: its line number is checkable
        starts = [n for n, line in enumerate(text.split("\n"), 1) if line.startswith(" ") and line[1:2] != " "
                  and (n == 2 or not text.split("\n")[n - 2].startswith(" ") or text.split("\n")[n - 2].endswith(","))]
        assert [line for _, line, _ in read] == starts[:len(values)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(JSON_VALUES, st.just("__DEEP__")), max_size=6), st.integers(1, 40), st.integers(20, 80))
def test_json_records_pass_over_what_is_too_deep_or_too_big_and_read_the_rest(values, chunk, limit):
    deep = "[" * 3000 + "]" * 3000  # past the recursion limit, small enough to scan a byte at a time
    text = "[\n" + ",\n".join(deep if value == "__DEEP__" else json.dumps(value) for value in values) + "\n]\n"
    with tempfile.TemporaryDirectory() as scratch:
        file = Path(scratch) / "x.json"
        file.write_text(text)
        read, problems = _stream(file, chunk, limit)
    got = {number: value for number, _, value in read}
    for number, value in enumerate(values, 1):
        size = len(deep) if value == "__DEEP__" else len(json.dumps(value))
        passed_over = [p for p in problems if f"x.json:{number + 1}: record {number} is " in p]
        if number in got:
            assert got[number] == value and value != "__DEEP__" and size <= limit + chunk + 12
        else:
            assert passed_over and (value == "__DEEP__" or size > limit), (number, value, problems)
    assert len(problems) == len(values) - len(got)
