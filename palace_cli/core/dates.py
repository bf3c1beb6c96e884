"""Dates and times, every parser palace has, each named for the text it reads.

- Validity moments (`parse_moment`, `format_moment`): a note's `valid_from`/`valid_until`/`--as-of`;
  a date is the start of that UTC day, a time without a zone is UTC.
- Source timestamps (`iso_time`): what a conversation export says, kept at its own precision.
- Review-log times (`parse_log_time`, `format_log_time`): the study log's UTC milliseconds, 2000-2199.
- Filter bounds (`time_bound`): `--since`/`--until` as an ISO prefix that sorts against unit times.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timezone

from palace_cli.errors import UsageError

DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
MOMENT = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?([Zz]|[+-]\d{2}:?\d{2})?$")
NEVER = datetime.min.replace(tzinfo=timezone.utc)  # the end of a superseded memory nobody dated


def parse_moment(value) -> datetime | None:
    """A UTC datetime from a YAML date or datetime or ISO text (None when empty); ValueError for anything else."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=timezone.utc)
    elif isinstance(value, str):
        text = value.strip()
        if not (DAY.match(text) or MOMENT.match(text)):
            raise ValueError(f"{text!r} is not a date: write YYYY-MM-DD, or YYYY-MM-DDTHH:MM[:SS] with Z or +HH:MM")
        try:
            if DAY.match(text):
                day = date.fromisoformat(text)
                return datetime(day.year, day.month, day.day, tzinfo=timezone.utc)
            iso = re.sub(r"[Zz]$", "+00:00", text.replace(" ", "T", 1))
            moment = datetime.fromisoformat(re.sub(r"([+-]\d{2})(\d{2})$", r"\1:\2", iso))
        except ValueError as exc:
            raise ValueError(f"{text!r} is not a date ({exc})") from None
    else:
        raise ValueError(f"{value!r} is not a date: write YYYY-MM-DD")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return moment.astimezone(timezone.utc)
    except OverflowError:  # 0001-01-01T00:00+01:00 is in year 0 in UTC, 9999-12-31T23:59-01:00 in year 10000
        raise ValueError(f"{str(value).strip()!r} is outside the years 0001-9999 once moved to UTC") from None


def format_moment(moment: datetime | None) -> str:
    """`2026-03-02` for the start of a UTC day, `2026-03-02T10:00:00Z` otherwise; "" for None."""
    if moment is None or moment == NEVER:
        return ""
    moment = moment.astimezone(timezone.utc)
    if (moment.hour, moment.minute, moment.second, moment.microsecond) == (0, 0, 0, 0):
        return moment.date().isoformat()
    return moment.replace(tzinfo=None).isoformat() + "Z"


def normalize_moment(value) -> str:
    """The text a Memory keeps for a date field: `format_moment` of it; ValueError when it is no date."""
    return format_moment(parse_moment(value))


def yaml_moment(moment: datetime):
    """The value to write into frontmatter: a date when it is the start of a UTC day, else the ISO text."""
    text = format_moment(moment)
    return date.fromisoformat(text) if DAY.match(text) else text


def today() -> datetime:
    """The start of today in UTC."""
    now = datetime.now(timezone.utc)
    return datetime(now.year, now.month, now.day, tzinfo=timezone.utc)


def now() -> datetime:
    """This moment, in UTC."""
    return datetime.now(timezone.utc)


DATE_ONLY = re.compile(r"\d{4}-\d\d-\d\d")
WITH_SECONDS = re.compile(r"\d\d:\d\d:\d\d")


def iso_time(value, seconds: bool = True) -> str | None:
    """An ISO 8601 string for a time from a source (epoch seconds, ISO text, datetime); None if unreadable
    or out of range (no UTC moment: year 1 ahead of UTC, 9999 behind it; epoch seconds past year 9999).

    Text keeps its own precision (a date, minutes or seconds; fractions dropped); a UTC offset
    of zero is written `Z`, naive times stay naive. Years are written with four digits (`0999`).
    """
    if value is None or isinstance(value, (bool, list, dict)) or (isinstance(value, str) and not value):
        return None
    if isinstance(value, (int, float)):
        try:
            moment = datetime.fromtimestamp(float(value), tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
    elif isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        return value.isoformat()
    else:
        text = str(value).strip()
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            return None
        if DATE_ONLY.fullmatch(text):
            return moment.date().isoformat()
        seconds = bool(WITH_SECONDS.search(text))
    if moment.tzinfo is not None:
        try:
            moment.astimezone(timezone.utc)  # a moment UTC cannot hold is out of range for every later comparison
        except (OverflowError, ValueError):
            return None
    out = moment.replace(tzinfo=None, microsecond=0).isoformat(timespec="seconds" if seconds else "minutes")
    offset = moment.utcoffset()
    if offset is not None:
        minutes = int(offset.total_seconds() // 60)
        out += "Z" if not minutes else f"{'+' if minutes > 0 else '-'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    return out


EARLIEST = datetime(2000, 1, 1, tzinfo=timezone.utc)
LATEST = datetime(2200, 1, 1, tzinfo=timezone.utc)


def format_log_time(moment: datetime) -> str:
    """UTC ISO 8601 with milliseconds and a Z: `2026-11-29T10:11:12.345Z`."""
    moment = moment.astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_log_time(text: str) -> datetime:
    """Parse an ISO time; naive times are taken as UTC. Raises ValueError."""
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        moment = moment.astimezone(timezone.utc)
    except OverflowError:  # year 1 or 9999 shifted by its offset
        raise ValueError(f"time {text!r} is outside 2000-2199") from None
    if not EARLIEST <= moment < LATEST:
        raise ValueError(f"time {text!r} is outside 2000-2199")
    return moment


BOUND = re.compile(r"\d{4}(?:-\d\d(?:-\d\d(?:[T ]\d\d(?::\d\d(?::\d\d)?)?)?)?)?")


def time_bound(value: str | None, option: str = "--since") -> str | None:
    """A --since/--until value checked and written as an ISO prefix (a space before the time becomes `T`)."""
    if value is None or value == "":
        return None
    text = str(value).strip()
    if not BOUND.fullmatch(text):
        raise UsageError(f"{option} {value!r}: give a date or time like 2023-05-08, 2023-05 or 2023-05-08T13:56")
    return text.replace(" ", "T")
