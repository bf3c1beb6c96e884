"""The journal of a write that changes several files: written before the first of them, removed after the last.

A process killed in the middle (kill -9, a power cut) leaves it beside the caches; the next writer
(`writes.writing`, which every write of palace goes through, `palace mv` rerun included) finishes the job
first: a file that still holds what was planned gets its new bytes, one that holds them already is left, and
one that someone changed since is left as it is and named. Rerunning the interrupted command finds it done.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field

from palace_cli.core.disk import atomic_write
from palace_cli.editing.writes import Change, digest, put
from palace_cli.errors import PalaceError
from palace_cli.palace import Palace

JOURNAL = "journal.json"


@dataclass
class Finished:
    """A write a killed process left half done, finished: what it was, what it had to say, what was left."""

    what: str
    result: dict = field(default_factory=dict)
    left: list[str] = field(default_factory=list)


def _path(palace: Palace):
    return palace.site.cache_dir / JOURNAL


def record(palace: Palace, what: str, changes: list[Change], result: dict | None = None) -> None:
    """Write the journal of a write about to start: each file's path, a digest of what it holds, its new bytes."""
    entries = [{"path": c.path, "before": digest(c.before), "source": c.source,
                "after": None if c.after is None else base64.b64encode(c.after).decode("ascii")} for c in changes]
    atomic_write(_path(palace), json.dumps({"what": what, "result": result or {}, "changes": entries}))


def clear(palace: Palace) -> None:
    """Remove the journal of a write that finished."""
    _path(palace).unlink(missing_ok=True)


def pending(palace: Palace) -> str | None:
    """What a write left half done says it was (None when there is none), without finishing it."""
    data = _load(palace)
    return None if data is None else data["what"]


def _load(palace: Palace) -> dict | None:
    try:
        data = json.loads(_path(palace).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError):
        return {"what": "", "result": {}, "changes": []}  # written atomically, so never torn: not ours; dropped
    if not isinstance(data, dict) or not isinstance(data.get("changes"), list):
        return {"what": "", "result": {}, "changes": []}
    return data


def finish(palace: Palace) -> Finished | None:
    """Finish the write a killed process left half done (the caller holds the write lock); None when none was."""
    data = _load(palace)
    if data is None:
        return None
    done = Finished(str(data.get("what") or "a write"), data.get("result") or {})
    for entry in data["changes"]:
        after = entry.get("after")
        change = Change(entry["path"], entry.get("before"), None if after is None else base64.b64decode(after),
                        entry.get("source") or "")
        try:
            left = put(palace, change)
        except (OSError, ValueError, PalaceError) as exc:
            left = f"{change.path} ({exc})"
        if left:
            done.left.append(left)
    clear(palace)
    message = f"finished `{done.what}`, which was interrupted"
    if done.left:
        message += f"; left as they are (changed since): {', '.join(done.left)}"
    palace.notice(message)
    return done
