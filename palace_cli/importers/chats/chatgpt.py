"""ChatGPT data export: `conversations.json`, an array of conversations.

A conversation is `{id|conversation_id, title, create_time, update_time, current_node, mapping}`;
`mapping` is a tree of `{id, parent, children, message|null}`. The thread the person saw is the
path from `current_node` up through `parent`; other branches were edited away or regenerated.
A message has `author.role`, `create_time` (may be null), `content{content_type, parts}`,
`metadata` and `recipient` (not "all" when the assistant calls a tool).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from palace_cli.conversations.model import ReadProblem, ReadResult, Session, Turn, clean_text, participants_of, session_id, text_id
from palace_cli.core.text import one_line, slug
from palace_cli.importers.chats.reading import read_export, text_value, thinking_block, threads, tool_line

FORMAT = SOURCE = "chatgpt"
SUFFIXES = (".json",)
KEYS = re.compile(r'"(?:mapping|current_node)"\s*:')
TOOL_OUTPUT = {"execution_output", "tether_browsing_display", "tether_quote", "system_error", "computer_output"}
THINKING = {"thoughts", "reasoning_recap"}
HIDDEN = {"user_editable_context", "model_editable_context"}


def read(path: Path, include: frozenset[str]) -> ReadResult:
    """Every conversation of an export's conversations.json (the file, or the unpacked export folder)."""
    return read_export(path, FORMAT, include, _conversation)


def sniff(head: str) -> bool:
    """True when a JSON file's first megabyte has the keys of ChatGPT conversations."""
    return KEYS.search(head) is not None


def _conversation(conversation, where: str, line: int, number: int, include: frozenset[str],
                  result: ReadResult) -> None:
    def problem(message: str) -> None:
        result.problems.append(ReadProblem(where, line, f"conversation {number}: {message}"))

    if not isinstance(conversation, dict):
        problem("not a JSON object; left out")
        return
    cid = text_value(conversation.get("conversation_id"), "conversation_id") or text_value(conversation.get("id"), "id")
    if not cid:
        problem("no `id` or `conversation_id`; left out")
        return
    found = _threads(conversation, cid, problem)
    if found is None:
        return
    nodes, main, branches = found
    title = one_line(conversation.get("title") or "", 120)
    started = result.time(conversation.get("create_time"), where, line)
    source_id = cid
    base_id = session_id(SOURCE, source_id)

    def when(value) -> str | None:
        return result.time(value, where, line)

    turns = _turns([nodes[key] for key in main], include, result, when)
    meta = {"model": conversation["default_model_slug"]} if conversation.get("default_model_slug") else {}
    sessions = [_session(source_id, title, started, turns, meta, "")]
    for fork, chain in branches:
        branch_turns = _turns([nodes[key] for key in chain], include, result, when, count=False)
        if not branch_turns:
            continue
        if "branches" not in include:
            result.left_out["branches"] += len(branch_turns)
            continue
        fork_turn = text_id(fork) if fork else None
        sessions.append(_session(source_id, title, started, branch_turns,
                                 {**meta, "branch_of": base_id, "forks_at": fork_turn}, f"branch-{text_id(chain[0])[:8]}"))
    for session in sessions:
        if session.turns:
            result.add(session, where, line)


def _threads(conversation: dict, cid: str, problem) -> tuple[dict, list[str], list] | None:
    """(nodes by key, the main thread's keys, the branches) of a conversation's `mapping`; None when it has none."""
    mapping = conversation.get("mapping")
    if not isinstance(mapping, dict):
        problem(f"{cid}: no `mapping`; left out")
        return None
    nodes = {key: node for key, node in mapping.items() if isinstance(node, dict)}
    if len(nodes) < len(mapping):
        problem(f"{cid}: {len(mapping) - len(nodes)} mapping entries are not objects; left out")
    parents = {key: text_value(node.get("parent"), "parent") for key, node in nodes.items()}
    current = text_value(conversation.get("current_node"), "current_node")
    if current not in nodes:
        leaves = [key for key in nodes if not nodes[key].get("children")]
        current = leaves[-1] if leaves else None
        problem(f"{cid}: `current_node` is not in the mapping; following the last leaf instead")
    main, branches = threads(parents, list(nodes), current)
    return nodes, main, branches


def _session(source_id: str, title: str, started: str | None, turns: list[Turn], meta: dict, suffix: str) -> Session:
    sid = f"{source_id}/{suffix}" if suffix else source_id
    shown_title = (title or one_line(turns[0].text if turns else "", 80)) + (" (edited-away branch)" if suffix else "")
    session = Session(id=session_id(SOURCE, sid), source=SOURCE, source_id=sid, title=shown_title,
                      started=started or (turns[0].time if turns else None), participants=participants_of(turns),
                      turns=turns, meta=meta)
    date = (session.started or "")[:10]
    session.stem = "-".join(p for p in (date, slug(title or shown_title, 40), slug(source_id)[:8], suffix) if p)
    return session


def _turns(nodes: list[dict], include: frozenset[str], result: ReadResult, when: Callable[[object], str | None],
           count: bool = True) -> list[Turn]:
    """The turns of a chain of mapping nodes; what is left out is counted (when `count`)."""
    turns = []
    for node in nodes:
        message = node.get("message")
        if not isinstance(message, dict):
            continue  # the root and other empty nodes carry no message
        turn, left_out = _turn(node, message, include, when)
        if turn is not None:
            turns.append(turn)
        elif left_out and count:
            result.left_out[left_out] += 1
    return turns


def _turn(node: dict, message: dict, include: frozenset[str], when: Callable[[object], str | None]
          ) -> tuple[Turn | None, str]:
    """(turn, "") or (None, what it was: system, tools, thinking, empty)."""
    author = message.get("author") if isinstance(message.get("author"), dict) else {}
    role = str(author.get("role") or "unknown")
    content = message.get("content") if isinstance(message.get("content"), dict) else {}
    kind = str(content.get("content_type") or "text")
    metadata = message.get("metadata") if isinstance(message.get("metadata"), dict) else {}
    turn_id = text_id(text_value(message.get("id"), "id") or text_value(node.get("id"), "id") or "")
    time = when(message.get("create_time"))
    text = _text(content)
    recipient = message.get("recipient")

    if role == "system" or kind in HIDDEN or metadata.get("is_visually_hidden_from_conversation"):
        if "system" not in include or not text.strip():
            return None, "system"
        return Turn(turn_id, "system", clean_text(text), time), ""
    if role == "tool" or kind in TOOL_OUTPUT:
        if "tools" not in include:
            return None, "tools"
        name = author.get("name") or role
        return Turn(turn_id, "tool", clean_text(f"[tool result: {name}]\n{text}"), time), ""
    if kind in THINKING:
        if "thinking" not in include or not text.strip():
            return None, "thinking"
        return Turn(turn_id, "assistant", thinking_block(text), time), ""
    if role == "assistant" and recipient not in (None, "all"):
        return Turn(turn_id, "assistant", tool_line(str(recipient), text), time), ""
    text = clean_text(text)
    if not text:
        return None, "empty"
    return Turn(turn_id, role, text, time), ""


def _text(content: dict) -> str:
    """The text of a message's content: its parts (images as a line), or its `text`, `thoughts` or `result`."""
    parts = content.get("parts")
    if isinstance(parts, list):
        out = []
        for part in parts:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    out.append(part["text"])
                else:
                    kind = str(part.get("content_type") or "attachment")
                    out.append("[image]" if "image" in kind else f"[{kind}]")
        return "\n".join(out)
    if isinstance(content.get("thoughts"), list):
        return "\n\n".join(str(t.get("content") or t.get("summary") or "") for t in content["thoughts"]
                           if isinstance(t, dict))
    for key in ("text", "result", "content"):
        if isinstance(content.get(key), str):
            return content[key]
    return ""
