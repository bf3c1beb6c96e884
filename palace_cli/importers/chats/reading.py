"""What the conversation readers share: reading text and JSON records, the threads of
a message tree, and the short lines a tool call or a thinking block becomes."""

from __future__ import annotations

import json
import re
from pathlib import Path

from palace_cli.importers.chats.jsonstream import MAX_RECORD_BYTES, json_records
from palace_cli.conversations.model import ReadProblem, ReadResult, Session, clean_text
from palace_cli.core.secrets import redact
from palace_cli.core.text import one_line, slug
from palace_cli.core.disk import read_capped
from palace_cli.errors import ImportFailed, NoteError

PEEK_BYTES = 1 << 20
EXPORT = "conversations.json"  # the file a ChatGPT or Claude.ai export holds its conversations in
TOOL_DETAIL_KEYS = ("command", "file_path", "path", "pattern", "url", "query", "description", "prompt", "code")


class BadRecord(Exception):
    """A record a reader cannot use (an id that is a list, say): it is reported and left out, the rest is read."""


# What a hostile record makes Python raise while a reader takes it apart: a field of the wrong type
# (TypeError, AttributeError; a list as a dict key), a value no conversion takes (ValueError,
# OverflowError), nesting a recursive walk cannot follow (RecursionError).
RECORD_ERRORS = (BadRecord, RecursionError, TypeError, AttributeError, KeyError, IndexError, ValueError,
                 OverflowError)


class RecordGuard:
    """`with RecordGuard(problems, where, line, what):` runs a reader over one record; when the record breaks it,
    the record is reported (as `what`) and left out, and the import goes on."""

    __slots__ = ("problems", "where", "line", "what")

    def __init__(self, problems: list[ReadProblem], where: str, line: int | None, what: str):
        self.problems, self.where, self.line, self.what = problems, where, line, what

    def __enter__(self) -> "RecordGuard":
        return self

    def __exit__(self, kind, exc, traceback) -> bool:
        if exc is None or not isinstance(exc, RECORD_ERRORS):
            return False
        if isinstance(exc, BadRecord):
            message = f"{self.what}: {exc}; left out"
        else:
            detail = one_line(str(exc), 120)
            message = (f"{self.what} could not be read ({type(exc).__name__}" + (f": {detail}" if detail else "")
                       + "); left out")
        self.problems.append(ReadProblem(self.where, self.line, message))
        return True


BRANCH_ASIDE = re.compile(r" \([^()]*\)$")  # a title's ` (edited-away branch)`, which its file name's slug leaves out


def redact_sessions(sessions: list[Session]) -> int:
    """Redact the secrets in every session's title, file name and turns and drop its `<private>` spans
    (core/secrets.py), before anything is written; a turn that was all private is left out. How many were."""
    total = 0
    for session in sessions:
        title = session.title
        session.title, titled = redact(title)
        session.stem, named = redact(_file_name_without(session.stem, title, session.title) if titled else session.stem)
        total += titled + named
        kept = []
        for turn in session.turns:
            text, count = redact(turn.text)
            if count:
                turn.text = clean_text(text)
                total += count
            if turn.text or not count:
                kept.append(turn)
        session.turns = kept
    return total


def _file_name_without(stem: str, title: str, redacted: str) -> str:
    """The file name `stem` with the slug of a title that held a secret (`password is Tr0ub4dor&3xyz` gave
    `password-is-tr0ub4dor-3xyz`, which no pattern knows) replaced by the slug of the title redacted. The
    readers slug a title at 40 characters, with or without its `(edited-away branch)` aside."""
    for old, new in ((title, redacted), (BRANCH_ASIDE.sub("", title), BRANCH_ASIDE.sub("", redacted))):
        before = slug(old, 40)
        if before and before in stem:
            return stem.replace(before, slug(new, 40) or "session", 1)
    return stem


def text_value(value, what: str) -> str | None:
    """A source's id or name as text (a number as its digits); None when absent; BadRecord for a list, an object,
    true or false, which no id can be."""
    if value is None or (isinstance(value, str) and not value):
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise BadRecord(f"`{what}` is {kind_of(value)}, not text")


def kind_of(value) -> str:
    """What a JSON value is, in words: a list, an object, true/false, a number, text, null."""
    if isinstance(value, bool):
        return "true/false"
    return {list: "a list", dict: "an object", str: "text", type(None): "null"}.get(type(value), "a number")


def read_export(path: Path, format: str, include: frozenset[str], conversation) -> ReadResult:
    """Every conversation of a `conversations.json` export (the file, or the unpacked export folder).

    `conversation(record, where, line, number, include, result)` reads one record into `result`;
    the ChatGPT and Claude.ai exports differ only in that. A record it cannot read is reported and
    left out; the others are read.
    """
    file = path / EXPORT if path.is_dir() else path
    if not file.is_file():
        raise ImportFailed(f"{path}: no {EXPORT}")
    result = ReadResult(format)
    where = shown(file)
    for number, line, record in json_records(file, where, result.problems, "conversation"):
        with RecordGuard(result.problems, where, line, f"conversation {number}"):
            conversation(record, where, line, number, include, result)
    return result


def shown(path: Path) -> str:
    """A path as reports print it."""
    return str(path)


def read_text(path: Path, result: ReadResult) -> str | None:
    """A source file's text (None, reported, when it is over the session cap or cannot be read); undecodable
    bytes are replaced and reported with their line."""
    try:
        data = read_capped(path, shown(path), MAX_RECORD_BYTES, "a conversation to import")
    except NoteError as exc:
        result.problems.append(ReadProblem(shown(path), None, exc.reason + "; not read"))
        return None
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        result.problems.append(ReadProblem(shown(path), line, f"not UTF-8 (byte 0x{data[exc.start]:02x}); "
                                           "undecodable bytes read as U+FFFD"))
        return data.decode("utf-8", "replace")


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
