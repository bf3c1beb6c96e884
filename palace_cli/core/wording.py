"""Small pieces of English shared by core messages and the faces."""

from __future__ import annotations

IRREGULAR = {"memory": "memories", "entry": "entries", "this": "these", "is": "are", "was": "were", "has": "have"}


def plural(count: int, noun: str, many: str | None = None) -> str:
    """`1 memory`, `2 memories`, `0 domains`: the count and the noun in the right number."""
    return f"{count:,} {noun if count == 1 else many or IRREGULAR.get(noun) or noun + 's'}"


def duration(seconds: float) -> str:
    """A span of time as a person says it: `40 s`, `12 min`, `1 h 20 min`."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min" if minutes % 60 else f"{minutes // 60} h"
