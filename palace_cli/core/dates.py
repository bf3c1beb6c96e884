"""Dates and times, every parser palace has, each named for the text it reads.

- Validity moments (`parse_moment`, `format_moment`): a note's `valid_from`/`valid_until`/`--as-of`;
  a date is the start of that UTC day, a time without a zone is UTC.
- Source timestamps (`iso_time`): what a conversation export says, kept at its own precision.
- Review-log times (`parse_log_time`, `format_log_time`): the study log's UTC milliseconds, 2000-2199.
- Filter bounds (`time_bound`): `--since`/`--until` as an ISO prefix that sorts against unit times.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

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


# ---- relative dates in what someone said ---------------------------------------------------------

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
            "nine": 9, "ten": 10, "a couple of": 2, "a couple": 2, "a few": 3, "few": 3, "several": 3}
_UNIT = r"(day|week|month|year)s?"
_COUNT = r"(\d{1,2}|an?|one|two|three|four|five|six|seven|eight|nine|ten|a couple(?: of)?|a few|few|several)"
RELATIVE = re.compile(
    r"\b(?:(?P<dby>the day before yesterday)|(?P<dat>the day after tomorrow)|(?P<yesterday>yesterday)"
    r"|(?P<tomorrow>tomorrow)|(?P<lastnight>last night)|(?P<today>today|tonight|this (?:morning|afternoon|evening))"
    rf"|(?P<ago>{_COUNT} {_UNIT} ago)"
    r"|(?P<rel>last|this|next|past) (?P<what>week(?:end)?|month|year|(?:mon|tues|wednes|thurs|fri|satur|sun)day"
    r"|summer|winter|spring|fall|autumn)"
    r")\b", re.IGNORECASE)
# Words after which a date stands bare ("since 7 May 2023"), not after "on" or "in".
_PREPOSITIONS = frozenset("since until till from by before after of to on in at for during around".split())
_SEASON_START = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}


@dataclass
class RelativeDate:
    """One relative date a text holds, resolved against the moment it was said."""

    phrase: str              # as written ("last week")
    start: int               # its span in the original text
    end: int
    day: date                # the first day it names
    precision: str           # day, week, weekend, month, season or year
    written: str             # how the resolved text puts it ("the week of 1 May 2023")
    past: bool               # it names a time before the day it was said on


def _day_text(day: date) -> str:
    return f"{day.day} {MONTHS[day.month - 1]} {day.year}"


def _month(year: int, month0: int) -> tuple[date, str, str]:
    """(first day, precision, text) of a month counted from January of `year` (month0 may leave the year)."""
    day = date(year + month0 // 12, month0 % 12 + 1, 1)
    return day, "month", f"{MONTHS[day.month - 1]} {day.year}"


def _week(day: date) -> tuple[date, str, str]:
    monday = day - timedelta(days=day.weekday())
    return monday, "week", f"the week of {_day_text(monday)}"


def _resolve(match: re.Match, said: date) -> tuple[date, str, str]:
    """(first day, precision, bare text) of one RELATIVE match said on `said`."""
    groups = {k: v for k, v in match.groupdict().items() if v}
    offsets = {"dby": -2, "dat": 2, "yesterday": -1, "tomorrow": 1, "lastnight": -1, "today": 0}
    for name, offset in offsets.items():
        if name in groups:
            day = said + timedelta(days=offset)
            return day, "day", _day_text(day)
    if "ago" in groups:
        count_text, unit = (part.lower() for part in re.match(rf"{_COUNT} {_UNIT}", groups["ago"], re.I).groups())
        count = int(count_text) if count_text.isdigit() else _NUMBERS[count_text]
        if unit == "year":
            return date(said.year - count, 1, 1), "year", str(said.year - count)
        if unit == "month":
            return _month(said.year, said.month - 1 - count)
        if unit == "week":
            return _week(said - timedelta(weeks=count))
        day = said - timedelta(days=count)
        return day, "day", _day_text(day)
    step = {"last": -1, "past": -1, "this": 0, "next": 1}[groups["rel"].lower()]
    what = groups["what"].lower()
    if what == "week":
        return _week(said + timedelta(weeks=step))
    if what == "weekend":
        # This weekend is the coming one, or the one under way (a Sunday's is the day before).
        saturday = said - timedelta(days=1) if said.weekday() == 6 else said + timedelta(days=(5 - said.weekday()) % 7)
        saturday += timedelta(weeks=step)
        return saturday, "weekend", f"the weekend of {_day_text(saturday)}"
    if what == "month":
        return _month(said.year, said.month - 1 + step)
    if what == "year":
        return date(said.year + step, 1, 1), "year", str(said.year + step)
    if what in _SEASON_START:
        return _season(what, step, said)
    weekday = WEEKDAYS.index(what)
    if step < 0:
        day = said - timedelta(days=(said.weekday() - weekday) % 7 or 7)  # the latest one before today
    elif step > 0:
        day = said + timedelta(days=(weekday - said.weekday()) % 7 or 7)  # the first one after today
    else:
        day = said + timedelta(days=weekday - said.weekday())  # this week's
    return day, "day", f"{WEEKDAYS[weekday].title()}, {_day_text(day)}"


def _season(name: str, step: int, said: date) -> tuple[date, str, str]:
    """A season relative to `said`: "this" is the one under way or coming, "last" the one before the one under
    way or the latest one, "next" the one after this one."""
    start = _SEASON_START[name]
    begun = said.year if said.month >= start else said.year - 1  # the year its latest start fell in
    inside = (said.month - start) % 12 < 3
    this = begun if inside else begun + 1
    year = (begun - 1 if inside else begun) if step < 0 else this + step
    label = "autumn" if name == "fall" else name
    years = f"{year}/{(year + 1) % 100:02d}" if name == "winter" else str(year)  # a winter spans the new year
    return date(year, start, 1), "season", f"the {label} of {years}"


def said_on(moment) -> date | None:
    """The calendar day of a moment as the speaker saw it (a time's own zone, not UTC); None when unreadable."""
    if isinstance(moment, datetime):
        return moment.date()
    if isinstance(moment, date):
        return moment
    try:
        return date.fromisoformat(str(moment).strip()[:10])
    except ValueError:
        return None


def resolve_relative(text: str, moment) -> tuple[str, list[RelativeDate]]:
    """The text with its relative dates ("yesterday", "last week", "next month", "two days ago", "last Friday")
    written as the dates they name when said at `moment` (a date, datetime or ISO text), and each one found.

    "yesterday" becomes "on 7 May 2023", "last month" "in April 2023"; after a preposition the date stands
    bare ("since the week of 1 May 2023"). Vague words (recently, lately, a while ago) are left as they are.
    Weeks start on Monday; seasons are the northern hemisphere's (summer from 1 June). ValueError (saying which
    phrase) when one names a day no calendar date holds ("next month" said on 31 December 9999)."""
    said = said_on(moment)
    if said is None:
        return text, []
    found: list[RelativeDate] = []
    out, position = [], 0
    for match in RELATIVE.finditer(text):
        try:
            day, precision, bare = _resolve(match, said)
        except (ValueError, OverflowError):  # date() past 9999 or before 0001
            raise ValueError(f"{match.group(0)!r} said on {said.isoformat()} names a day outside the years "
                             "0001-9999") from None
        before = text[: match.start()].rstrip().rsplit(None, 1)
        if before and before[-1].lower() in _PREPOSITIONS:
            written = bare
        else:
            written = ("on " if precision in ("day", "weekend") else "in ") + bare
        past = day < said if precision == "day" else day + timedelta(days=6) < said if precision == "week" \
            else match.group(0).lower().startswith(("last", "past")) or "ago" in match.group(0).lower()
        found.append(RelativeDate(match.group(0), match.start(), match.end(), day, precision, bare, past))
        out += [text[position : match.start()], written]
        position = match.end()
    out.append(text[position:])
    return "".join(out), found
