"""Small pieces of English shared by core messages and the faces."""

from __future__ import annotations

IRREGULAR = {"memory": "memories", "entry": "entries", "this": "these", "is": "are", "was": "were", "has": "have"}


def plural(count: int, noun: str, many: str | None = None) -> str:
    """`1 memory`, `2 memories`, `0 domains`: the count and the noun in the right number."""
    return f"{count:,} {noun if count == 1 else many or IRREGULAR.get(noun) or noun + 's'}"
