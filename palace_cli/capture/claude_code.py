"""Claude Code hooks: import a session as it happens, and hand the palace's wake-up context to a new one.

Claude Code runs `palace hook claude-code` with one JSON object on stdin: `session_id`, `transcript_path`
(the session's JSONL log), `cwd` and `hook_event_name`. On PreCompact, SessionEnd and Stop the transcript
is imported into conversations/claude-code/ (new turns appended, nothing else touched; the index catches
up at the next command that reads it, embeddings with it). On SessionStart the wake-up text is returned
for Claude Code to add to the session's context: core memories, then the recent decisions and conventions
distilled from sessions run in the same project (the payload's `cwd`), then the most important memories,
within WAKE_UP_TOKENS; past SESSION_START_SECONDS the hook gives up and the session starts without it.

The palace is the one given with `--palace` (written into the hook command by `palace hook install`), else
the one found walking up from the session's `cwd`. A hook must never break the session: every failure is
a HookError (or any other exception) that the face turns into one line on stderr and exit status 0.
"""

from __future__ import annotations

import json
import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from palace_cli.core.wording import plural
from palace_cli.errors import PalaceError

EVENTS = ("SessionStart", "PreCompact", "SessionEnd", "Stop")
IMPORTING = ("PreCompact", "SessionEnd", "Stop")
WAKE_UP_TOKENS = 1200  # what SessionStart adds to the context: a fraction of any model's window (issue 33: < 1,500)
SESSION_START_SECONDS = 15.0  # a new session waits this long at most for its context (Claude Code's own limit is 60)
MAX_PAYLOAD = 1_000_000  # bytes of hook input read: Claude Code sends a few hundred
WAIT_S = 3.0  # the longest a hook waits for a lock another palace process holds


class HookError(PalaceError):
    """Why a hook did nothing (bad input, no palace, a busy palace); shown as one line, never failing the session."""


@dataclass
class HookResult:
    """What a hook did: the event, the palace, the JSON to print (SessionStart), and a summary line."""

    event: str
    palace: str = ""
    output: dict | None = None
    summary: str = ""


def read_payload(raw: str) -> dict:
    """The hook's JSON object; HookError when it is not one or lacks `hook_event_name`."""
    try:
        payload = json.loads(raw)
    except ValueError as exc:
        raise HookError(f"the hook input is not JSON ({exc})") from None
    if not isinstance(payload, dict):
        raise HookError("the hook input is not a JSON object")
    event = payload.get("hook_event_name")
    if event not in EVENTS:
        raise HookError(f"hook_event_name {event!r} is not one palace handles ({', '.join(EVENTS)})")
    return payload


def find_palace(palace_dir: str | None, payload: dict):
    """The palace a hook works on: the explicit one, else the one above the session's cwd."""
    from palace_cli.palace import Palace

    cwd = payload.get("cwd")
    start = Path(cwd) if isinstance(cwd, str) and cwd else None
    if palace_dir is None and start is None:
        raise HookError("no --palace and no cwd in the hook input: cannot tell which palace to use")
    try:
        return Palace.find(palace_dir, start=start)
    except PalaceError as exc:
        raise HookError(str(exc)) from None


@contextmanager
def deadline(seconds: float | None):
    """HookError when the body is still running after `seconds` (a real-time alarm: on the main thread of a POSIX
    process only; elsewhere, or with None, no limit). What was cut is a read, so nothing is left half done."""
    if not seconds or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expired(_signum, _frame):
        raise HookError(f"no wake-up context this time: it took over {seconds:g} s (a first scan of a big palace; "
                        "`palace index` builds its cache once)")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def handle(payload: dict, palace_dir: str | None = None, seconds: float | None = SESSION_START_SECONDS) -> HookResult:
    """Run one hook event on its palace (see the module); HookError or another PalaceError when it cannot.

    Every lock it takes waits at most WAIT_S (`locks.patience`): a palace another process holds longer (an
    index build, a distill's slice) is left alone this time, and said so. SessionStart gives up after `seconds`
    (a HookError); imports run to the end (they write, and a rerun resumes them anyway)."""
    event = payload["hook_event_name"]
    if event == "SessionStart":
        with deadline(seconds):
            return _handle(payload, palace_dir, event)
    return _handle(payload, palace_dir, event)


def _handle(payload: dict, palace_dir: str | None, event: str) -> HookResult:
    from palace_cli.index.locks import Busy, patience

    palace = find_palace(palace_dir, payload)
    result = HookResult(event, str(palace.root))
    try:
        with patience(WAIT_S):
            if event == "SessionStart":
                from palace_cli.search.wakeup import wake_up

                cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else None
                text = wake_up(palace, budget_tokens=WAKE_UP_TOKENS, cwd=cwd).text
                result.output = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}
                result.summary = f"wake-up context: {len(text)} characters from {palace.root}"
                return result
            result.summary = import_transcript(palace, payload)
    except Busy as exc:
        raise HookError(f"{palace.root} is busy ({exc}); " + ("no wake-up context this time" if event == "SessionStart"
                                                              else "the session is imported next time")) from None
    return result


def import_transcript(palace, payload: dict) -> str:
    """Import the hook's transcript into the palace, new turns only; a summary line."""
    from palace_cli.importers.chats.writer import import_conversations

    transcript = payload.get("transcript_path")
    if not isinstance(transcript, str) or not transcript:
        raise HookError("the hook input has no transcript_path")
    path = Path(transcript).expanduser()
    if not path.is_file():
        raise HookError(f"{path}: no such transcript")
    report = import_conversations(palace, path, "claude-code")
    counts = report.counts()
    refused = f", {counts['refused']} refused" if counts["refused"] else ""
    redacted = f"; {plural(report.redacted, 'secret')} redacted" if report.redacted else ""
    read = (f"read {report.read_bytes:,} bytes from byte {report.resumed_at:,}" if report.resumed_at is not None
            else f"read whole, {report.read_bytes:,} bytes")
    return (f"imported {path.name} into {palace.root}: {counts['turns_written']} new turns "
            f"({counts['added']} added, {counts['appended']} appended, {counts['skipped']} unchanged, "
            f"{counts['conflict']} conflicts{refused}; {read}){_problems(report.problems)}{redacted}")


def _problems(problems: list) -> str:
    """What the import could not take, in the summary line: how many, and the one that matters most (a transcript
    cut short at the size limit, else the first), so that nothing is left out without saying why."""
    if not problems:
        return ""
    worst = next((p for p in problems if "limit" in p.message), problems[0])
    more = f" ({len(problems) - 1} more: `palace import` lists them)" if len(problems) > 1 else ""
    return f"; not imported: {worst}{more}"
