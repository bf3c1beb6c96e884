"""What the conversation readers share: walking a folder, reading text and JSON records, the threads of
a message tree, and the short lines a tool call or a thinking block becomes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator

from palace_cli.errors import ImportFailed
from palace_cli.conversations.model import ReadProblem, ReadResult, one_line

SKIP_DIRS = {".git", ".palace", "node_modules", ".venv", "__pycache__", ".obsidian", ".trash"}
PEEK_BYTES = 1 << 20
_WS = re.compile(r"\s*")
TOOL_DETAIL_KEYS = ("command", "file_path", "path", "pattern", "url", "query", "description", "prompt", "code")


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


def peek(path: Path) -> str:
    """The first megabyte of a file as text (what format detection looks at); "" when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            return handle.read(PEEK_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""
