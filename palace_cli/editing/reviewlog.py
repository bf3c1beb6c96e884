"""The append-only study log: `reviews/*.jsonl`, one review per line, never rewritten, merged by git union."""

from __future__ import annotations

import errno
import getpass
import json
import math
import os
import socket
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from palace_cli.core.dates import format_log_time, parse_log_time
from palace_cli.core.disk import disk_error
from palace_cli.errors import PalaceError
from palace_cli.palace import Palace
from palace_cli.core.layout import REVIEWS, Problem
from palace_cli.core.text import slug

RATINGS = {"again": 1, "hard": 2, "good": 3, "easy": 4}
RATING_NAMES = {value: name for name, value in RATINGS.items()}
PERSON = "person"
FORMAT_VERSION = 1
MAX_DURATION_MS = 2**31 - 1  # 24.8 days: a longer answer is a clock error


@dataclass(frozen=True)
class Review:
    """One graded recall of one memory by one learner."""

    id: str
    at: datetime
    rating: int  # 1 Again, 2 Hard, 3 Good, 4 Easy (FSRS)
    kind: str = ""
    strategy: str = ""
    learner: str = PERSON
    duration_ms: int | None = None
    score: float | None = None  # the Evaluator's grade, 0..1, when there was one

    @property
    def rating_name(self) -> str:
        return RATING_NAMES[self.rating]

    def sort_key(self) -> tuple:
        """Order by time, then by content: the same set of lines replays the same whatever file order git left."""
        return (self.at, self.id, self.learner, self.rating, self.kind, self.strategy,
                self.duration_ms if self.duration_ms is not None else -1)

    def as_dict(self) -> dict:
        """The JSON object written as one log line."""
        data = {"v": FORMAT_VERSION, "id": self.id, "at": format_log_time(self.at), "rating": self.rating_name,
                "kind": self.kind, "strategy": self.strategy, "learner": self.learner}
        if self.duration_ms is not None:
            data["duration_ms"] = int(self.duration_ms)
        if self.score is not None:
            data["score"] = round(float(self.score), 3)
        return data


@dataclass
class LogRead:
    """Every review found in the log files, sorted for replay, and the lines that could not be read."""

    reviews: list[Review] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    duplicates: int = 0
    files: list[str] = field(default_factory=list)

    def for_learner(self, learner: str) -> list[Review]:
        """The reviews of one learner, in replay order."""
        return [r for r in self.reviews if r.learner == learner]

    def learners(self) -> list[str]:
        """Every learner that has reviews, sorted."""
        return sorted({r.learner for r in self.reviews})


def parse_rating(value) -> int:
    """A rating from a name (again/hard/good/easy) or a number 1-4. Raises ValueError."""
    if isinstance(value, bool):
        raise ValueError(f"bad rating {_brief(value)}")
    if isinstance(value, int) and 1 <= value <= 4:
        return value
    if isinstance(value, str) and value.strip().lower() in RATINGS:
        return RATINGS[value.strip().lower()]
    if isinstance(value, str) and value.strip() in ("1", "2", "3", "4"):
        return int(value.strip())
    raise ValueError(f"bad rating {_brief(value)} (use again, hard, good or easy)")


def review_from_dict(data: dict) -> Review:
    """A Review from one parsed log line. Raises ValueError naming what is wrong."""
    if not isinstance(data, dict):
        raise ValueError("a review line must be a JSON object")
    memory_id = data.get("id")
    if not isinstance(memory_id, str) or not memory_id.strip():
        raise ValueError("missing memory `id`")
    if "at" not in data or not isinstance(data["at"], str):
        raise ValueError("missing time `at`")
    duration = data.get("duration_ms")
    if duration is not None and not (_number(duration) and 0 <= duration <= MAX_DURATION_MS):
        raise ValueError(f"bad duration_ms {_brief(duration)} (a number of milliseconds, 0 to {MAX_DURATION_MS})")
    score = data.get("score")
    if score is not None and not (_number(score) and 0 <= score <= 1):
        raise ValueError(f"bad score {_brief(score)} (a number from 0 to 1)")
    for name in ("kind", "strategy", "learner"):
        if data.get(name) is not None and not isinstance(data[name], str):
            raise ValueError(f"bad {name} {_brief(data[name])} (text)")
    return Review(
        id=memory_id.strip(),
        at=parse_log_time(data["at"]),
        rating=parse_rating(data.get("rating")),
        kind=str(data.get("kind") or ""),
        strategy=str(data.get("strategy") or ""),
        learner=str(data.get("learner") or PERSON),
        duration_ms=int(duration) if duration is not None else None,
        score=float(score) if score is not None else None,
    )


def _number(value) -> bool:
    """A real, finite number: JSON's NaN and Infinity (which Python's json reads) and true/false are not."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or isinstance(value, float) and math.isfinite(value)


def _brief(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def log_name() -> str:
    """This machine's log file name: `<user>-<host>.jsonl`, slugged (`_` kept)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "user"
    host = socket.gethostname().split(".")[0] or "host"
    return f"{slug(f'{user}-{host}', None, keep='_') or 'reviews'}.jsonl"


def learner_name() -> str:
    """The person studying: $PALACE_LEARNER, or `person` (one person, any number of machines)."""
    return os.environ.get("PALACE_LEARNER", "").strip() or PERSON


class ReviewLog:
    """The review log files of a palace: reads all of `reviews/*.jsonl`, appends to this machine's file."""

    def __init__(self, palace: Palace, filename: str | None = None):
        self.palace = palace
        self.directory = palace.root / REVIEWS
        self.path = self.directory / (filename or log_name())

    def files(self) -> list[Path]:
        """Every log file, sorted by name."""
        if not self.directory.is_dir():
            return []
        return sorted(p for p in self.directory.glob("*.jsonl") if p.is_file())

    def read(self) -> LogRead:
        """Every readable review, deduplicated and sorted; bad lines are reported as `file:line` problems."""
        result = LogRead()
        seen: set[tuple] = set()
        for path in self.files():
            relpath = self.palace.rel(path)
            result.files.append(relpath)
            try:
                data = path.read_bytes()
            except OSError as exc:
                result.problems.append(Problem(relpath, None, "error", "review-unreadable", f"cannot read: {exc.strerror}"))
                continue
            lines = data.split(b"\n")
            torn = not data.endswith(b"\n") and data != b""
            for number, raw in enumerate(lines, start=1):
                if not raw.strip():
                    continue
                try:
                    review = review_from_dict(json.loads(raw.decode("utf-8")))
                except (ValueError, UnicodeDecodeError, RecursionError) as exc:
                    last = torn and number == len(lines)
                    code = "review-torn" if last else "review-bad-line"
                    message = ("last line is incomplete (an interrupted write); it is ignored"
                               if last else f"unreadable review line, ignored: {_reason(exc)}")
                    result.problems.append(Problem(relpath, number, "warning", code, message))
                    continue
                key = review.sort_key()
                if key in seen:
                    result.duplicates += 1  # the same line in two files, e.g. a copied log
                    continue
                seen.add(key)
                result.reviews.append(review)
        result.reviews = self._follow_renames(result.reviews)
        result.reviews.sort(key=Review.sort_key)
        return result

    def _follow_renames(self, reviews: list[Review]) -> list[Review]:
        """Reviews of an id a memory had before `palace mv` count for the memory under its new id (the note
        lists its `previous_ids`); the log itself is never rewritten. An id some memory holds now stays its own."""
        memories = self.palace.index.scan(light=True).memories
        renames = {old: m.id for m in memories.values() for old in m.previous_ids if old not in memories}
        if not renames:
            return reviews
        return [replace(r, id=renames[r.id]) if r.id in renames else r for r in reviews]

    def append(self, review: Review) -> None:
        """Append one review as one line with a single O_APPEND write, then fsync."""
        line = json.dumps(review.as_dict(), ensure_ascii=False, separators=(", ", ": ")) + "\n"
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise PalaceError(f"{self.palace.rel(self.path)}: cannot open the review log: {exc.strerror}") from None
        size = None
        try:
            size = os.fstat(fd).st_size
            # A crash mid-write can leave a torn last line; start on a fresh line so only that line is lost.
            if size and not _ends_with_newline(self.path):
                line = "\n" + line
            raw = line.encode("utf-8")
            if os.write(fd, raw) != len(raw):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # a short write: the disk filled up
            os.fsync(fd)
        except OSError as exc:
            if size is not None:
                try:
                    os.ftruncate(fd, size)  # the log as it was, not a torn line
                except OSError:
                    pass
            raise disk_error(exc, f"{self.palace.rel(self.path)}: cannot append the review",
                             "the log is as it was") or exc
        finally:
            os.close(fd)


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


def _reason(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON ({exc.msg} at column {exc.colno})"
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8"
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply"
    return str(exc)
