"""The labelled agent-session sets keep the format and rules of benchmarks/agent-sessions.md."""

from __future__ import annotations

import json
import re

import pytest

from conftest import REPO

FILES = [
    "agent-sessions.jsonl",
    "agent-sessions-heldout.jsonl",
    "agent-sessions-heldout2.jsonl",
    "agent-sessions-heldout3.jsonl",
    "agent-sessions-heldout4.jsonl",
]
KINDS = {"decision", "convention", "fact", "solution", "milestone"}
TURN_KEYS = {"id", "speaker", "time", "text", "thinking", "tool", "tool_output", "memories", "restates"}
MEMORY_KEYS = {"id", "kind", "about", "text", "reason"}
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
# A memory is written in the third person or impersonally: no "I", "you", "we" (the doc's rule).
PERSON = re.compile(r"\b(?:I|[Mm]e|[Mm]y|[Mm]ine|[Ww]e|[Uu]s|[Oo]urs?|[Yy]ou|[Yy]ours?)\b")
SECRET = re.compile(
    r"://[^:/\s@]+:([^@\s]+)@"  # a password in a URL
    r"|(?:PASSWORD|SECRET[A-Z_]*)=(\S+)"  # env lines
    # config and env lines with a key or token (heldout3: flyway.password=, DD_API_KEY:, GRAFANA_CLOUD_TOKEN=)
    r"|(?:\b[a-z.]*password|[A-Z_]*(?:API_KEY|TOKEN))[=:]\s*([^\s\"']+)"
    r"|--project-token=(\S+)"
    r"|((?:sk|rk)[-_]live[-_]\S+)"  # live Stripe secret and restricted keys (heldout4: rk_live_ pasted by a user)
)


def sessions(name: str) -> list[dict]:
    """The sessions of one labelled file, one JSON object a line."""
    lines = (REPO / "benchmarks" / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def secrets_in(session: dict) -> set[str]:
    """Passwords and keys that appear anywhere in a session's turns (pasted URLs, env lines, live keys)."""
    found = set()
    for turn in session["turns"]:
        # the tool call line too: heldout4 has a password in a curl URL on it (s37-t004)
        for field in ("text", "tool", "tool_output", "thinking"):
            for match in SECRET.finditer(turn.get(field, "")):
                found |= {value for value in match.groups() if value and len(value) >= 6}
    return found


def check_memory(memory: dict, expected_id: str, secrets: set[str]) -> None:
    """One memory: its keys, id, kind, and whole third-person sentences with no secret in them."""
    assert set(memory) <= MEMORY_KEYS and {"id", "kind", "about", "text"} <= set(memory), memory
    assert memory["id"] == expected_id and memory["kind"] in KINDS and memory["about"], memory
    for field in ("text", "reason"):
        value = memory.get(field)
        if value is None:
            continue
        assert value.endswith("."), (memory["id"], value)
        assert not PERSON.search(value), (memory["id"], PERSON.search(value).group())
        assert not [secret for secret in secrets if secret in value], memory["id"]


def check_session(session: dict, seen_memories: set[str]) -> None:
    """One session: turn ids in order, time never going back, speakers, memories and restatements."""
    assert set(session) == {"session", "work", "cwd", "user", "started", "turns"}
    prefix = session["session"][:3]
    assert re.fullmatch(r"s\d\d-[a-z0-9-]+", session["session"]), session["session"]
    assert session["started"] == session["turns"][0]["time"]
    secrets, previous, count = secrets_in(session), "", 0
    for number, turn in enumerate(session["turns"], 1):
        assert set(turn) <= TURN_KEYS and turn["id"] == f"{prefix}-t{number:03d}", turn["id"]
        assert TIME.fullmatch(turn["time"]) and turn["time"] >= previous, turn["id"]
        previous = turn["time"]
        assert turn["speaker"] in ("user", "assistant") and turn["text"].strip(), turn["id"]
        if turn["speaker"] == "user":
            assert not {"thinking", "tool", "tool_output"} & set(turn), turn["id"]
        assert "tool_output" not in turn or "tool" in turn, turn["id"]
        if "restates" in turn:
            assert turn["restates"] in seen_memories, turn["id"]
        for memory in turn["memories"]:
            count += 1
            check_memory(memory, f"{prefix}-m{count}", secrets)
            seen_memories.add(memory["id"])


@pytest.mark.parametrize("name", FILES)
def test_every_session_keeps_the_written_format(name):
    seen: set[str] = set()
    for session in sessions(name):
        check_session(session, seen)
    assert seen


@pytest.mark.parametrize("name", FILES[1:])
def test_each_held_out_set_is_apart_from_the_other_sets(name):
    others = [s for other in FILES if other != name for s in sessions(other)]
    held_out = sessions(name)
    assert not {s["session"][:3] for s in others} & {s["session"][:3] for s in held_out}
    assert not {s["session"] for s in others} & {s["session"] for s in held_out}
    assert len(held_out) >= 6 and sum(len(s["turns"]) for s in held_out) >= 240
    kinds = {m["kind"] for s in held_out for t in s["turns"] for m in t["memories"]}
    assert kinds == KINDS
