"""Claude.ai data export: `conversations.json`, `[{uuid, name, created_at, chat_messages: [...]}]`.

A message is `{uuid, sender: human|assistant, text, content: [blocks], created_at, attachments,
files}`; `content` blocks (text, thinking, tool_use, tool_result) are preferred to `text` when
present. Newer exports give messages a `parent_message_uuid` and the conversation a
`current_leaf_message_uuid`: then the thread is the path up from that leaf, as in ChatGPT.
"""

from __future__ import annotations

import re
from pathlib import Path

from palace_cli.conversations.model import ReadProblem, ReadResult, Session, Turn, clean_text, participants_of, session_id, text_id
from palace_cli.core.text import one_line, slug
from palace_cli.importers.chats.reading import block_text, kind_of, read_export, text_value, thinking_block, threads, tool_line

FORMAT = SOURCE = "claude-ai"
SUFFIXES = (".json",)
KEYS = re.compile(r'"chat_messages"\s*:')
SPEAKERS = {"human": "user", "assistant": "assistant"}


def read(path: Path, include: frozenset[str]) -> ReadResult:
    """Every conversation of a Claude.ai export (conversations.json, or the unpacked export folder)."""
    return read_export(path, FORMAT, include, _conversation)


def sniff(head: str) -> bool:
    """True when a JSON file's first megabyte has the keys of Claude.ai conversations."""
    return KEYS.search(head) is not None


def _conversation(conversation, where: str, line: int, number: int, include: frozenset[str],
                  result: ReadResult) -> None:
    def problem(message: str) -> None:
        result.problems.append(ReadProblem(where, line, f"conversation {number}: {message}"))

    if not isinstance(conversation, dict):
        problem("not a JSON object; left out")
        return
    cid = text_value(conversation.get("uuid"), "uuid")
    messages = conversation.get("chat_messages")
    if not cid:
        problem("no `uuid`; left out")
        return
    if not isinstance(messages, list):
        problem(f"{cid}: no `chat_messages` list; left out")
        return
    chains, forks = _chains(conversation, cid, messages, problem)
    title = one_line(conversation.get("name") or "", 120)
    started = result.time(conversation.get("created_at"), where, line)
    base_id = session_id(SOURCE, cid)
    for index, (chain, fork) in enumerate(zip(chains, forks)):
        turns = [turn for message in chain for turn in _turns(message, include, result, (where, line), index == 0)]
        if index and "branches" not in include:
            result.left_out["branches"] += len(turns)
            continue
        if not turns:
            continue
        suffix = f"branch-{text_id(chain[0].get('uuid') or index)[:8]}" if index else ""
        source_id = f"{cid}/{suffix}" if suffix else str(cid)
        session = Session(id=session_id(SOURCE, source_id), source=SOURCE, source_id=source_id,
                          title=(title or one_line(turns[0].text, 80)) + (" (edited-away branch)" if index else ""),
                          started=started or turns[0].time, participants=participants_of(turns), turns=turns,
                          meta={"branch_of": base_id, "forks_at": fork} if index else {})
        date = (session.started or "")[:10]
        session.stem = "-".join(p for p in (date, slug(title or session.title, 40), slug(str(cid))[:8], suffix) if p)
        result.add(session, where, line)


def _chains(conversation: dict, cid: str, messages: list, problem) -> tuple[list[list[dict]], list[str | None]]:
    """The messages as threads (the main one first, then each edited-away branch) and where each forks (None for
    the main one); one thread in order when the export has no parent links."""
    ordered = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            problem(f"{cid}: message {index + 1} is not a JSON object; left out")
            continue
        ordered.append((text_value(message.get("uuid"), "uuid") or f"{cid}#{index + 1}", message))
    leaf = text_value(conversation.get("current_leaf_message_uuid"), "current_leaf_message_uuid")
    if not (leaf and any(m.get("parent_message_uuid") for _, m in ordered)):
        return [[m for _, m in ordered]], [None]
    by_id = dict(ordered)
    parents = {key: text_value(m.get("parent_message_uuid"), "parent_message_uuid") for key, m in ordered}
    main, branches = threads(parents, list(by_id), leaf if leaf in by_id else ordered[-1][0])
    return ([[by_id[k] for k in main]] + [[by_id[k] for k in chain] for _, chain in branches],
            [None] + [fork for fork, _ in branches])


def _turns(message: dict, include: frozenset[str], result: ReadResult, origin: tuple[str, int], count: bool
           ) -> list[Turn]:
    """The turn of one message (and, with `--include tools`, one per tool result in it)."""
    sender = str(message.get("sender") or "unknown")
    speaker = SPEAKERS.get(sender, sender)
    turn_id = text_id(text_value(message.get("uuid"), "uuid") or "")
    time = result.time(message.get("created_at"), *origin)
    pieces, outputs = [], []
    content = message.get("content")
    if isinstance(content, list) and content:
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                pieces.append(str(block.get("text") or ""))
            elif kind == "thinking":
                if "thinking" in include and block.get("thinking"):
                    pieces.append(thinking_block(str(block["thinking"])))
                elif count:
                    result.left_out["thinking"] += 1
            elif kind == "tool_use":
                pieces.append(tool_line(str(block.get("name") or "?"), block.get("input")))
            elif kind == "tool_result":
                if "tools" in include:
                    outputs.append(f"[tool result: {block.get('name') or '?'}]\n{block_text(block.get('content'))}")
                elif count:
                    result.left_out["tools"] += 1
            elif kind:
                pieces.append(f"[{kind}]")
    else:
        pieces.append(str(message.get("text") or ""))
    pieces += _attached(message, include, result, origin, count)
    turns = []
    text = clean_text("\n\n".join(p for p in pieces if p.strip()))
    if text:
        turns.append(Turn(turn_id, speaker, text, time))
    elif not outputs and count:
        result.left_out["empty"] += 1
    for n, output in enumerate(outputs):
        turns.append(Turn(f"{turn_id}/tool" + (f"-{n + 1}" if n else ""), "tool", clean_text(output), time))
    return turns


def _attached(message: dict, include: frozenset[str], result: ReadResult, origin: tuple[str, int], count: bool
              ) -> list[str]:
    """A line for each of a message's attachments (and its text, with `--include attachments`) and files."""
    pieces = []
    for attachment in listed(message, "attachments", result, origin):
        if not isinstance(attachment, dict):
            continue
        name = attachment.get("file_name") or "attachment"
        pieces.append(f"[attachment: {name}]")
        extracted = attachment.get("extracted_content")
        if extracted and "attachments" in include:
            pieces.append(str(extracted))
        elif extracted and count:
            result.left_out["attachments"] += 1
    for file in listed(message, "files", result, origin):
        if isinstance(file, dict) and file.get("file_name"):
            pieces.append(f"[file: {file['file_name']}]")
    return pieces


def listed(message: dict, key: str, result: ReadResult, origin: tuple[str, int]) -> list:
    """A message's list field (`attachments`, `files`); anything else there is reported and read as none."""
    value = message.get(key)
    if not value or isinstance(value, list):
        return value or []
    result.problems.append(ReadProblem(*origin, f"message {one_line(str(message.get('uuid')), 40)}: `{key}` is "
                                       f"{kind_of(value)}, not a list; left out"))
    return []
