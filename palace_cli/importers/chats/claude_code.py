"""Claude Code session logs: `~/.claude/projects/<project>/<session>.jsonl`, one JSON record per line.

Records of type user and assistant carry `message{role, content}`; content is a string or blocks
of text, thinking, tool_use, tool_result. Each assistant content block is its own record (same
`message.id`): they make one turn. The thread is the chain of `parentUuid` (or
`logicalParentUuid` across a compaction) up from the last record; records that branch off it
were rewound away. `isSidechain` records are a subagent's conversation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from palace_cli.errors import ImportFailed
from palace_cli.importers.chats.jsonstream import CHUNK, MAX_RECORD_BYTES, open_source
from palace_cli.conversations.sessionfile import MAX_SESSION_BYTES
from palace_cli.conversations.model import ReadProblem, ReadResult, Session, Turn, clean_text, participants_of, session_id
from palace_cli.core.text import one_line, slug
from palace_cli.core.walk import files_under
from palace_cli.importers.chats.reading import (BadRecord, RecordGuard, block_text, shown, text_value,
                                              thinking_block, threads, tool_line)

FORMAT = SOURCE = "claude-code"
SUFFIXES = (".jsonl",)
MESSAGES = ("user", "assistant", "system")
# Fields that must be text (or absent): a line where one is a list or an object is left out.
IDS = ("type", "uuid", "parentUuid", "logicalParentUuid", "leafUuid", "sessionId")


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


def _records(file: Path, result: ReadResult) -> list[tuple[int, dict]]:
    """(line, record) for each readable line; a torn, invalid, too deep or too big line is reported and the rest
    read."""
    where = shown(file)
    records = []
    kept = 0  # bytes of the lines read: past the cap a session file cannot hold them, so reading stops there
    for number, raw in _lines(file, where, result.problems):
        if not raw.strip():
            continue
        kept += len(raw) + 1
        if kept > MAX_SESSION_BYTES:
            result.problems.append(ReadProblem(where, number, _cut_short(file, kept - len(raw) - 1, number)))
            break
        try:
            record = json.loads(raw)
        except UnicodeDecodeError:
            result.problems.append(ReadProblem(where, number, "not UTF-8; line left out"))
            continue
        except ValueError as exc:
            message = f"{exc.msg}, column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else str(exc)
            result.problems.append(ReadProblem(where, number, f"not valid JSON ({message}); line left out"))
            continue
        except RecursionError:
            result.problems.append(ReadProblem(where, number, "nested deeper than Python can read; line left out"))
            continue
        if not isinstance(record, dict):
            result.problems.append(ReadProblem(where, number, "not a JSON object; line left out"))
            continue
        try:
            for key in IDS:
                if key in record:
                    record[key] = text_value(record[key], key)
        except BadRecord as exc:
            result.problems.append(ReadProblem(where, number, f"{exc}; line left out"))
            continue
        records.append((number, record))
    return records


def _cut_short(file: Path, read: int, number: int) -> str:
    """Why a transcript was read only up to this line: what was kept, what was left, and the limit."""
    try:
        size = file.stat().st_size
    except OSError:
        size = 0
    rest = f"the rest ({size - read:,} of {size:,} bytes)" if size > read else "the rest"
    return (f"{rest} is left out: the session file would be over the {MAX_SESSION_BYTES:,} byte limit for a session "
            f"file; the first {number - 1:,} lines ({read:,} bytes) are read")


def _lines(file: Path, where: str, problems: list[ReadProblem]) -> Iterator[tuple[int, bytes]]:
    """(number, bytes) of each line; a line over MAX_RECORD_BYTES is reported and passed over, never held whole."""
    handle = open_source(file, where, problems)
    if handle is None:
        return
    with handle:
        number = 0
        while raw := handle.readline(MAX_RECORD_BYTES + 1):
            number += 1
            if len(raw) > MAX_RECORD_BYTES and not raw.endswith(b"\n"):
                del raw
                while (rest := handle.readline(CHUNK)) and not rest.endswith(b"\n"):
                    pass
                problems.append(ReadProblem(where, number, f"line is over the {MAX_RECORD_BYTES:,} byte limit for a "
                                            "session file; left out"))
                continue
            yield number, raw.removesuffix(b"\n")


def _read_file(file: Path, include: frozenset[str], result: ReadResult) -> None:
    where = shown(file)
    records = _records(file, result)
    messages = [(n, r) for n, r in records if r.get("type") in MESSAGES]
    main_records = [(n, r) for n, r in messages if not r.get("isSidechain")]
    side_records = [(n, r) for n, r in messages if r.get("isSidechain")]
    branches, branch_of = _branches(main_records)
    thread = [(n, r) for n, r in main_records if r.get("uuid") not in branch_of]
    base = _base(file, records)
    tools: dict[str, str] = {}
    session = _session(base, _turns(thread, include, result, where, tools), "", where, result)
    if session is not None:
        result.add(session, where)
    branch_records = {}
    for n, r in main_records:
        if r.get("uuid") in branch_of:
            branch_records.setdefault(branch_of[r["uuid"]], []).append((n, r))
    for index, chunk in sorted(branch_records.items()):
        if "branches" not in include:
            result.left_out["branches"] += len(chunk)
            continue
        fork = branches[index][0]
        extra = _session(base, _turns(chunk, include, result, where, tools), f"branch-{chunk[0][1]['uuid'][:8]}",
                         where, result, {"branch_of": base.id, "forks_at": fork})
        if extra is not None:
            result.add(extra, where)
    if side_records:
        if "sidechains" not in include:
            result.left_out["sidechains"] += len(side_records)
        else:
            extra = _session(base, _turns(side_records, include, result, where, tools), "sidechain", where, result,
                             {"sidechain_of": base.id} if session is not None else {})
            if extra is not None:
                result.add(extra, where)


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
           tools: dict[str, str]) -> list[Turn]:
    """Turns of records in order: one per user record, one per assistant message (its records merged)."""
    turns: list[Turn] = []
    merging = None  # the assistant message whose records the open turn collects
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
    return turns


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
