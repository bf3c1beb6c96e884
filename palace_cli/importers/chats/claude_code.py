"""Claude Code session logs: `~/.claude/projects/<project>/<session>.jsonl`, one JSON record per line.

Records of type user and assistant carry `message{role, content}`; content is a string or blocks
of text, thinking, tool_use, tool_result. Each assistant content block is its own record (same
`message.id`): they make one turn. The thread is the chain of `parentUuid` (or
`logicalParentUuid` across a compaction) up from the last record; records that branch off it
were rewound away. `isSidechain` records are a subagent's conversation.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import BinaryIO, Iterator

from palace_cli.errors import ImportFailed
from palace_cli.importers.chats.jsonstream import CHUNK, MAX_RECORD_BYTES, open_source
from palace_cli.conversations.sessionfile import MAX_SESSION_BYTES
from palace_cli.conversations.model import ReadProblem, ReadResult, Session, Turn, clean_text, participants_of, session_id
from palace_cli.core.text import one_line, slug
from palace_cli.core.walk import files_under
from palace_cli.importers.chats.reading import (RECORD_ERRORS, BadRecord, RecordGuard, block_text, shown,
                                                text_value, thinking_block, threads, tool_line)
from palace_cli.importers.chats.resume import mark, where_to_resume

FORMAT = SOURCE = "claude-code"
SUFFIXES = (".jsonl",)
MESSAGES = ("user", "assistant", "system")
# Fields that must be text (or absent): a line where one is a list or an object is left out.
IDS = ("type", "uuid", "parentUuid", "logicalParentUuid", "leafUuid", "sessionId")
MAX_PENDING = 20  # summaries naming a record not (yet) in the file, kept in a resume record; past it, read whole


class CannotResume(Exception):
    """A tail that does not carry the thread on by itself (a rewind, a message begun before it, a new title): the
    file is read whole."""


def sniff(head: str) -> bool:
    """True when a file's first megabyte holds Claude Code records (one of its first 50 lines will do)."""
    for raw in head.split("\n")[:50]:
        try:
            record = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict) and ("sessionId" in record or record.get("type") in ("summary", "user", "assistant")):
            return True
    return False


def read(path: Path, include: frozenset[str]) -> ReadResult:
    """Every session of a session file, or of every `*.jsonl` under a project directory."""
    result = ReadResult(FORMAT)
    files = [path] if path.is_file() else files_under(path, (".jsonl",))
    if not files:
        raise ImportFailed(f"{path}: no .jsonl session files")
    for file in files:
        with RecordGuard(result.problems, shown(file), None, "the session"):
            _read_file(file, include, result)
    return result


def resume(path: Path, include: frozenset[str], record: dict) -> ReadResult | None:
    """The turns appended to a session file since the read that left `record` (resume.py), as a session of those
    turns alone (its `resumed_from` the record); None when the file must be read whole."""
    result = ReadResult(FORMAT)
    where = shown(path)
    handle = open_source(path, where, [])
    if handle is None:
        return None
    with handle:
        point = where_to_resume(handle.fileno(), record, include)
        if point is None or os.fstat(handle.fileno()).st_size > MAX_SESSION_BYTES:
            return None
        at, line, checked = point
        handle.seek(at)
        records, end, lines = _records(handle, where, result, line, at)
        result.read_bytes, result.resumed_at = checked + handle.tell() - at, at
        try:
            turns, state = _tail(records, include, result, where, record["state"])
        except (CannotResume, *RECORD_ERRORS):  # a record that breaks the reader: the whole read reports it
            return None
        session = Session(id=session_id(SOURCE, path.stem), source=SOURCE, source_id=path.stem, turns=turns,
                          resume=mark(handle.fileno(), end, lines, include, state), resumed_from=record)
    result.add(session, where)
    return result


class _Tools(dict):
    """Tool call ids and their tools' names, noting a result whose call is not among them (made before a tail)."""

    missed = False

    def get(self, key, default=None):
        self.missed = self.missed or key not in self
        return super().get(key, default)


def _tail(records: list[tuple[int, dict]], include: frozenset[str], result: ReadResult, where: str, state: dict
          ) -> tuple[list[Turn], dict]:
    """(the turns of a tail's records, the state after them); CannotResume when the whole file would read otherwise
    than the records before with these after them: the thread does not go on from its last record, a summary
    may retitle the session, a field the session takes from its first record turns up first."""
    leaf, pending = state.get("leaf"), state.get("pending")
    if not isinstance(leaf, str) or not isinstance(pending, list) or not isinstance(state.get("message"), (str, type(None))):
        raise CannotResume("no thread to carry on")
    thread = []
    for number, record in records:
        kind = record.get("type")
        if kind == "summary" or record.get("uuid") in pending:
            raise CannotResume("a summary may retitle the session")
        if (record.get("cwd") and not state.get("cwd")) or (record.get("gitBranch") and not state.get("branch")):
            raise CannotResume("the session's cwd or git branch turns up")
        if kind not in MESSAGES:
            continue
        if record.get("isSidechain"):
            if "sidechains" in include:
                raise CannotResume("a sidechain session grows")
            result.left_out["sidechains"] += 1
            continue
        uuid = record.get("uuid")
        if not isinstance(uuid, str) or (record.get("parentUuid") or record.get("logicalParentUuid")) != leaf:
            raise CannotResume("the thread does not go on from its last record (a rewind)")
        leaf = uuid
        thread.append((number, record))
    tools = _Tools()
    turns, merging = _turns(thread, include, result, where, tools, state.get("message"))
    if tools.missed:
        raise CannotResume("a tool result whose call came before the tail")
    return turns, {**state, "leaf": leaf, "message": merging}


def _records(handle: BinaryIO, where: str, result: ReadResult, line: int = 0, at: int = 0
             ) -> tuple[list[tuple[int, dict]], int, int]:
    """((line, record) for each readable line from byte `at` (after `line` lines) on; the byte and line just past
    the last line taken). A torn, invalid, too deep or too big line is reported and the rest read; a last line that
    is torn (no newline, no JSON yet) is not taken: a writer may still be finishing it."""
    records = []
    kept, end = at, (at, line)  # kept: bytes of the lines read: past the cap a session file cannot hold them
    for number, raw, after in _lines(handle, where, result.problems, line, at):
        whole, raw = raw.endswith(b"\n"), raw.removesuffix(b"\n")
        if not raw.strip():
            end = (after, number)
            continue
        kept += len(raw) + 1
        if kept > MAX_SESSION_BYTES:
            result.problems.append(ReadProblem(where, number, _cut_short(handle, kept - len(raw) - 1, number)))
            break
        record = _record(raw, where, number, result.problems if whole else [])
        if whole or record is not None:
            end = (after, number)
        if record is not None:
            records.append((number, record))
    return records, *end


def _record(raw: bytes, where: str, number: int, problems: list[ReadProblem]) -> dict | None:
    """The record of one line, or None (reported into `problems`)."""
    try:
        record = json.loads(raw)
    except UnicodeDecodeError:
        problems.append(ReadProblem(where, number, "not UTF-8; line left out"))
        return None
    except ValueError as exc:
        message = f"{exc.msg}, column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        problems.append(ReadProblem(where, number, f"not valid JSON ({message}); line left out"))
        return None
    except RecursionError:
        problems.append(ReadProblem(where, number, "nested deeper than Python can read; line left out"))
        return None
    if not isinstance(record, dict):
        problems.append(ReadProblem(where, number, "not a JSON object; line left out"))
        return None
    try:
        for key in IDS:
            if key in record:
                record[key] = text_value(record[key], key)
    except BadRecord as exc:
        problems.append(ReadProblem(where, number, f"{exc}; line left out"))
        return None
    return record


def _cut_short(handle: BinaryIO, read: int, number: int) -> str:
    """Why a transcript was read only up to this line: what was kept, what was left, and the limit."""
    size = os.fstat(handle.fileno()).st_size
    rest = f"the rest ({size - read:,} of {size:,} bytes)" if size > read else "the rest"
    return (f"{rest} is left out: the session file would be over the {MAX_SESSION_BYTES:,} byte limit for a session "
            f"file; the first {number - 1:,} lines ({read:,} bytes) are read")


def _lines(handle: BinaryIO, where: str, problems: list[ReadProblem], number: int, at: int
           ) -> Iterator[tuple[int, bytes, int]]:
    """(number, bytes with the newline, byte just past it) of each line; a line over MAX_RECORD_BYTES is reported and
    passed over, never held whole."""
    while raw := handle.readline(MAX_RECORD_BYTES + 1):
        number += 1
        at += len(raw)
        if len(raw) > MAX_RECORD_BYTES and not raw.endswith(b"\n"):
            del raw
            while (rest := handle.readline(CHUNK)) and not rest.endswith(b"\n"):
                at += len(rest)
            at += len(rest)
            problems.append(ReadProblem(where, number, f"line is over the {MAX_RECORD_BYTES:,} byte limit for a "
                                        "session file; left out"))
            continue
        yield number, raw, at


def _read_file(file: Path, include: frozenset[str], result: ReadResult) -> None:
    where = shown(file)
    handle = open_source(file, where, result.problems)
    if handle is None:
        return
    with handle:
        records, end, lines = _records(handle, where, result)
        result.read_bytes += handle.tell()
        messages = [(n, r) for n, r in records if r.get("type") in MESSAGES]
        main_records = [(n, r) for n, r in messages if not r.get("isSidechain")]
        branches, branch_of = _branches(main_records)
        thread = [(n, r) for n, r in main_records if r.get("uuid") not in branch_of]
        base = _base(file, records)
        tools: dict[str, str] = {}
        turns, merging = _turns(thread, include, result, where, tools)
        session = _session(base, turns, "", where, result)
        if session is not None:
            result.add(session, where)
        side_records = [(n, r) for n, r in messages if r.get("isSidechain")]
        extras = _extras(base, session, (main_records, side_records), (branches, branch_of), include, result, tools,
                         where)
        state = _state(records, main_records, thread, merging) if session is not None and not extras else None
        if state is not None and os.fstat(handle.fileno()).st_size <= MAX_SESSION_BYTES:
            session.resume = mark(handle.fileno(), end, lines, include, state)


def _extras(base: Session, session: Session | None, records: tuple[list, list], forks: tuple[list, dict],
            include: frozenset[str], result: ReadResult, tools: dict[str, str], where: str) -> int:
    """The sessions of a file beside its thread (its branches, its sidechain) that `include` asks for; how many."""
    (main_records, side_records), (branches, branch_of) = records, forks
    added = 0
    branch_records = {}
    for n, r in main_records:
        if r.get("uuid") in branch_of:
            branch_records.setdefault(branch_of[r["uuid"]], []).append((n, r))
    for index, chunk in sorted(branch_records.items()):
        if "branches" not in include:
            result.left_out["branches"] += len(chunk)
            continue
        fork = branches[index][0]
        extra = _session(base, _turns(chunk, include, result, where, tools)[0], f"branch-{chunk[0][1]['uuid'][:8]}",
                         where, result, {"branch_of": base.id, "forks_at": fork})
        if extra is not None:
            result.add(extra, where)
            added += 1
    if side_records:
        if "sidechains" not in include:
            result.left_out["sidechains"] += len(side_records)
        else:
            extra = _session(base, _turns(side_records, include, result, where, tools)[0], "sidechain", where, result,
                             {"sidechain_of": base.id} if session is not None else {})
            if extra is not None:
                result.add(extra, where)
                added += 1
    return added


def _state(records: list[tuple[int, dict]], main_records: list, thread: list, merging: str | None) -> dict | None:
    """What a tail read of the file needs to carry on its thread (resume.py's `state`); None when it cannot."""
    leaf = next((r.get("uuid") for _, r in reversed(main_records) if isinstance(r.get("uuid"), str)), None)
    if leaf is None or not thread or thread[-1][1].get("uuid") != leaf:
        return None
    uuids = {r.get("uuid") for _, r in records}
    pending = sorted({r.get("leafUuid") for _, r in records if r.get("type") == "summary"
                      and isinstance(r.get("summary"), str) and isinstance(r.get("leafUuid"), str)} - uuids)
    if len(pending) > MAX_PENDING or not (merging is None or isinstance(merging, str)):
        return None
    return {"leaf": leaf, "message": merging, "pending": pending,
            "cwd": any(bool(r.get("cwd")) for _, r in records),
            "branch": any(bool(r.get("gitBranch")) for _, r in records)}


def _branches(main_records: list[tuple[int, dict]]) -> tuple[list, dict[str, int]]:
    """The branches off the main thread (threads' fork and chain) and, for each record on one, its branch."""
    parents = {}
    for _, record in main_records:
        if isinstance(record.get("uuid"), str):
            parents[record["uuid"]] = record.get("parentUuid") or record.get("logicalParentUuid")
    last = next((r.get("uuid") for _, r in reversed(main_records) if isinstance(r.get("uuid"), str)), None)
    _, branches = threads(parents, list(parents), last)
    # Records on a branch off the thread were rewound away. A chain that never meets the thread (its
    # history is in another file) has no fork: it stays, as it cannot be shown to be abandoned.
    return branches, {node: i for i, (fork, chain) in enumerate(branches) if fork is not None for node in chain}


def _base(file: Path, records: list[tuple[int, dict]]) -> Session:
    """A file's session before its turns: its id, the title a summary of one of its records gives, cwd, git branch."""
    source_id = file.stem
    base = Session(id=session_id(SOURCE, source_id), source=SOURCE, source_id=source_id)
    summaries = [r for _, r in records if r.get("type") == "summary" and isinstance(r.get("summary"), str)]
    uuids = {r.get("uuid") for _, r in records}
    for summary in summaries:
        if summary.get("leafUuid") in uuids:
            base.title = one_line(summary["summary"], 120)
    first = next((r for _, r in records if r.get("cwd")), {})
    if first.get("cwd"):
        base.meta["cwd"] = first["cwd"]
    branch = next((r.get("gitBranch") for _, r in records if r.get("gitBranch")), None)
    if branch:
        base.meta["git_branch"] = branch
    return base


def _session(base: Session, turns: list[Turn], suffix: str, where: str, result: ReadResult,
             extra_meta: dict | None = None) -> Session | None:
    """A session of these turns, or None when none are left (a file of nothing but left-out records)."""
    if not turns:
        return None
    source_id = f"{base.source_id}/{suffix}" if suffix else base.source_id
    title = base.title or one_line(next((t.text for t in turns if t.role == "user"), turns[0].text), 80)
    if suffix:
        title = f"{title} ({'edited-away branch' if suffix.startswith('branch') else suffix})"
    session = Session(id=session_id(SOURCE, source_id), source=SOURCE, source_id=source_id, title=title,
                      started=turns[0].time, participants=participants_of(turns), turns=turns,
                      meta={**base.meta, **(extra_meta or {})})
    date = (session.started or "")[:10]
    session.stem = "-".join(p for p in (date, slug(title, 40), slug(base.source_id)[:8], suffix) if p)
    return session


def _turns(records: list[tuple[int, dict]], include: frozenset[str], result: ReadResult, where: str,
           tools: dict[str, str], merging: str | None = None) -> tuple[list[Turn], str | None]:
    """(turns of records in order: one per user record, one per assistant message (its records merged); the message
    still open at the end). `merging`: the message open before the first record (a tail read's)."""
    turns: list[Turn] = []
    first: tuple[str, str | None] = ("", None)  # uuid and time of that message's first record: the turn's
    open_turn: Turn | None = None
    for number, record in records:
        kind = record.get("type")
        uuid = str(record.get("uuid") or f"line-{number}")
        time = result.time(record.get("timestamp"), where, number)
        message = record.get("message")
        if kind == "system" or record.get("isMeta"):
            merging, open_turn = None, None
            turns += _system_turn(record, uuid, time, include, result, where, number)
            continue
        if not isinstance(message, dict) or "content" not in message:
            result.problems.append(ReadProblem(where, number, f"{kind} record without a message; left out"))
            continue
        parts = None
        with RecordGuard(result.problems, where, number, f"{kind} record"):  # content nested too deep, say
            parts = _content(message["content"], include, result, tools)
        if parts is None:
            continue
        pieces, outputs = parts
        text = clean_text("\n\n".join(p for p in pieces if p.strip()))
        if kind == "assistant":
            message_id = message.get("id")
            if not (message_id and message_id == merging):
                # A message's first record names its turn, whether or not it holds text (a thinking block
                # left out): the turn id does not depend on --include.
                merging, first, open_turn = message_id, (uuid, time), None
            elif not first[0]:
                raise CannotResume("a message begun before the tail goes on in it")
            if text and open_turn is not None:
                open_turn.text = open_turn.text + "\n\n" + text
            elif text:
                open_turn = Turn(first[0], "assistant", text, first[1])
                turns.append(open_turn)
        else:
            merging, open_turn = None, None
            if text:
                turns.append(Turn(uuid, "user", text, time))
        content = message["content"]
        if not text and not outputs and (not content or (isinstance(content, str) and not content.strip())):
            result.left_out["empty"] += 1
        for n, output in enumerate(outputs):
            turns.append(Turn(f"{uuid}/tool" + (f"-{n + 1}" if n else ""), "tool", output, time))
    return turns, merging


def _system_turn(record: dict, uuid: str, time: str | None, include: frozenset[str], result: ReadResult, where: str,
                 number: int) -> list[Turn]:
    """A system record's turn, with `--include system` (without, it is counted as left out); none when empty."""
    if "system" not in include:
        result.left_out["system"] += 1
        return []
    text = ""
    with RecordGuard(result.problems, where, number, "system record"):
        text = clean_text(str(record.get("content") or block_text((record.get("message") or {}).get("content")) or ""))
    return [Turn(uuid, "system", text, time)] if text else []


def _content(content, include: frozenset[str], result: ReadResult, tools: dict[str, str]) -> tuple[list[str], list[str]]:
    """(pieces of what was said, tool outputs kept by `--include tools`) of a message's content."""
    if isinstance(content, str):
        return [content], []
    if not isinstance(content, list):
        return [block_text(content)], []
    pieces, outputs = [], []
    for block in content:
        if not isinstance(block, dict):
            pieces.append(block_text([block]))
            continue
        kind = block.get("type")
        if kind == "text":
            pieces.append(str(block.get("text") or ""))
        elif kind in ("thinking", "redacted_thinking"):
            if "thinking" in include and block.get("thinking"):
                pieces.append(thinking_block(str(block["thinking"])))
            else:
                result.left_out["thinking"] += 1
        elif kind == "tool_use":
            name = str(block.get("name") or "?")
            tools[str(block.get("id"))] = name
            pieces.append(tool_line(name, block.get("input")))
        elif kind == "tool_result":
            if "tools" in include:
                name = tools.get(str(block.get("tool_use_id")), "?")
                outputs.append(clean_text(f"[tool result: {name}]\n{block_text(block.get('content'))}"))
            else:
                result.left_out["tools"] += 1
        else:
            pieces.append(f"[{kind}]")  # image, document: a line that says one was there
    return pieces, outputs
