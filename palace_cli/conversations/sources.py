"""Reading conversation sources: format detection, dispatch to a reader, helpers the readers share."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator

from palace_cli.errors import ImportFailed, UsageError
from palace_cli.conversations.model import INCLUDABLE, ReadProblem, ReadResult, one_line

FORMATS = ("claude-code", "chatgpt", "claude-ai", "locomo", "chat-markdown")
SKIP_DIRS = {".git", ".palace", "node_modules", ".venv", "__pycache__", ".obsidian", ".trash"}
PEEK_BYTES = 1 << 20
_WS = re.compile(r"\s*")
_JSON_KINDS = (("chatgpt", re.compile(r'"(?:mapping|current_node)"\s*:')),
               ("claude-ai", re.compile(r'"chat_messages"\s*:')),
               ("locomo", re.compile(r'"(?:speaker_a|session_1_date_time)"\s*:')))
TOOL_DETAIL_KEYS = ("command", "file_path", "path", "pattern", "url", "query", "description", "prompt", "code")


def read_conversations(path: Path, format: str, include: frozenset[str] = frozenset()) -> ReadResult:
    """Every session in a file or directory of the given format; unreadable records are in `.problems`."""
    unknown = set(include) - set(INCLUDABLE)
    if unknown:
        raise UsageError(f"cannot include {', '.join(sorted(unknown))}; choose from {', '.join(INCLUDABLE)}")
    if format == "claude-code":
        from palace_cli.conversations.claude_code import read
    elif format == "chatgpt":
        from palace_cli.conversations.chatgpt import read
    elif format == "claude-ai":
        from palace_cli.conversations.claude_ai import read
    elif format == "locomo":
        from palace_cli.conversations.locomo import read
    elif format == "chat-markdown":
        from palace_cli.conversations.chat_text import read
    else:
        raise UsageError(f"unknown conversation format {format!r}; use one of {', '.join(FORMATS)}")
    return read(Path(path), frozenset(include))


def read_export(path: Path, format: str, include: frozenset[str], conversation) -> ReadResult:
    """Every conversation of a `conversations.json` export (the file, or the unpacked export folder).

    `conversation(record, where, line, number, include, result)` reads one record into `result`;
    the ChatGPT and Claude.ai exports differ only in that.
    """
    file = path / "conversations.json" if path.is_dir() else path
    if not file.is_file():
        raise ImportFailed(f"{path}: no conversations.json")
    result = ReadResult(format)
    where = shown(file)
    text = read_text(file, result)
    for number, (line, record) in enumerate(json_records(text, where, result.problems), 1):
        conversation(record, where, line, number, include, result)
    return result


def files_under(directory: Path, suffixes: tuple[str, ...]) -> list[Path]:
    """Files with one of the suffixes under a directory, sorted, skipping hidden and tool folders."""
    found = []
    for path in sorted(directory.rglob("*")):
        parts = path.relative_to(directory).parts
        if any(p.startswith(".") or p in SKIP_DIRS for p in parts):
            continue
        if path.suffix.lower() in suffixes and path.is_file():
            found.append(path)
    return found


def shown(path: Path) -> str:
    """A path as reports print it."""
    return str(path)


def read_text(path: Path, result: ReadResult) -> str | None:
    """A source file's text; undecodable bytes are replaced and reported with their line."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ImportFailed(f"{path}: cannot read: {exc.strerror}") from None
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        result.problems.append(ReadProblem(shown(path), line, f"not UTF-8 (byte 0x{data[exc.start]:02x}); "
                                           "undecodable bytes read as U+FFFD"))
        return data.decode("utf-8", "replace")


def json_records(text: str, where: str, problems: list[ReadProblem]) -> Iterator[tuple[int, object]]:
    """(line, value) for each element of a top-level JSON array (or the one top-level object).

    Elements are decoded one at a time, so a file cut short or broken in the middle still
    yields every element before the break; the break is reported with its line and column.
    """
    decoder = json.JSONDecoder()
    index = _WS.match(text, 0).end()
    line = text.count("\n", 0, index) + 1
    if index >= len(text):
        problems.append(ReadProblem(where, 1, "empty file"))
        return
    if text[index] != "[":
        try:
            value, end = decoder.raw_decode(text, index)
        except json.JSONDecodeError as exc:
            problems.append(ReadProblem(where, exc.lineno, f"not valid JSON: {exc.msg} (column {exc.colno})"))
            return
        yield line, value
        return
    index += 1
    position = index
    while True:
        index = _WS.match(text, index).end()
        line += text.count("\n", position, index)
        position = index
        if index < len(text) and text[index] == "]":
            return
        try:
            value, end = decoder.raw_decode(text, index)
        except json.JSONDecodeError as exc:
            problems.append(ReadProblem(where, exc.lineno, f"not valid JSON: {exc.msg} (column {exc.colno}); "
                                        "this record and the rest of the file left out"))
            return
        yield line, value
        index = _WS.match(text, end).end()
        line += text.count("\n", position, index)
        position = index
        if index < len(text) and text[index] == ",":
            index += 1
            continue
        if index < len(text) and text[index] == "]":
            return
        problems.append(ReadProblem(where, line, "not valid JSON: expected `,` or `]` after a record; "
                                    "the rest of the file left out"))
        return


def threads(parents: dict[str, str | None], order: list[str], current: str | None
            ) -> tuple[list[str], list[tuple[str | None, list[str]]]]:
    """The thread a person saw (root to `current`) and every other branch as (fork node, its own nodes).

    `parents` maps each node to its parent; `order` is creation order, which orders the branches.
    A branch's nodes start after the last node it shares with a thread listed before it; a chain
    that never meets one has fork None.
    """

    def path_to(node: str | None) -> list[str]:
        chain, seen = [], set()
        while node is not None and node in parents and node not in seen:
            seen.add(node)
            chain.append(node)
            node = parents[node]
        return chain[::-1]

    main = path_to(current)
    covered = set(main)
    has_child = {p for p in parents.values() if p is not None}
    branches = []
    for node in order:
        if node in covered or node in has_child:
            continue
        chain = path_to(node)
        fork = None
        for i in range(len(chain) - 1, -1, -1):
            if chain[i] in covered:
                fork, chain = chain[i], chain[i + 1 :]
                break
        covered.update(chain)
        if chain:
            branches.append((fork, chain))
    return main, branches


def tool_line(name: str, arguments=None) -> str:
    """The one short line a tool call becomes: `[tool: Name — first argument]`."""
    detail = ""
    if isinstance(arguments, dict):
        for key in TOOL_DETAIL_KEYS:
            value = arguments.get(key)
            if isinstance(value, str) and value.strip():
                detail = value
                break
    elif isinstance(arguments, str):
        detail = arguments
    detail = one_line(detail, 80)
    return f"[tool: {one_line(name) or '?'} — {detail}]" if detail else f"[tool: {one_line(name) or '?'}]"


def thinking_block(text: str) -> str:
    """Thinking kept in a turn (`--include thinking`), fenced off from what was said."""
    return f"<thinking>\n{text.strip()}\n</thinking>"


def block_text(content) -> str:
    """Plain text of a tool result's or message's content: a string, or a list of blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                if isinstance(block.get("text"), str):
                    parts.append(block["text"])
                elif block.get("type"):
                    parts.append(f"[{block['type']}]")
        return "\n".join(parts)
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return content["text"]
    return "" if content is None else json.dumps(content, ensure_ascii=False)


# ---- detection -------------------------------------------------------------------------------


def _peek(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read(PEEK_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def json_kind(path: Path) -> str | None:
    """The conversation format of a JSON file, from the keys in its first megabyte; None for other JSON."""
    head = _peek(path)
    for kind, pattern in _JSON_KINDS:
        if pattern.search(head):
            return kind
    return None


def _is_claude_code(path: Path) -> bool:
    for raw in _peek(path).split("\n")[:50]:
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if isinstance(record, dict) and ("sessionId" in record or record.get("type") in ("summary", "user", "assistant")):
            return True
    return False


def _is_chat_text(path: Path) -> bool:
    from palace_cli.conversations.chat_text import looks_like_chat
    from palace_cli.conversations.sessionfile import is_session_text

    text = _peek(path)
    return is_session_text(text) or looks_like_chat(text)


def detect(path: Path) -> str | None:
    """The conversation format of a file or directory, or None when it does not look like conversations."""
    path = Path(path)
    if path.is_file():
        suffix = path.suffix.lower()
        if suffix == ".jsonl" and path.name != "corpus.jsonl":
            return "claude-code" if _is_claude_code(path) else None
        if suffix == ".json":
            return json_kind(path)
        if suffix == ".txt":
            return "chat-markdown"
        if suffix in (".md", ".markdown"):
            return "chat-markdown" if _is_chat_text(path) else None
        return None
    if not path.is_dir():
        return None
    if (path / "corpus.jsonl").is_file():
        return None
    if (path / "conversations.json").is_file():
        return json_kind(path / "conversations.json")
    kinds = {json_kind(p) for p in path.iterdir() if p.suffix.lower() == ".json" and p.is_file()}
    if len(kinds) == 1 and None not in kinds:
        return kinds.pop()
    jsonl = files_under(path, (".jsonl",))
    if jsonl and not kinds and any(_is_claude_code(p) for p in jsonl[:5]):
        return "claude-code"
    texts = files_under(path, (".txt", ".md", ".markdown"))
    if texts and not kinds and not jsonl and all(p.suffix.lower() == ".txt" or _is_chat_text(p) for p in texts):
        return "chat-markdown"
    return None
