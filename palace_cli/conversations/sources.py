"""The conversation sources palace reads, registered in one table: a format's reader and how to tell its files.

A new source is a module with `FORMAT`, `SUFFIXES`, `sniff(head)` and `read(path, include)`, and one
line in `SOURCES`. Which format a path holds is decided in one place, `palace_cli.importers.formats`,
which asks these sniffers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from palace_cli.errors import UsageError
from palace_cli.conversations import chat_text, chatgpt, claude_ai, claude_code, locomo
from palace_cli.conversations.model import INCLUDABLE, ReadResult


@dataclass(frozen=True)
class Source:
    """One conversation format: its reader, the file suffixes it reads, and a look at a file's first megabyte."""

    format: str
    read: Callable[[Path, frozenset[str]], ReadResult]
    suffixes: tuple[str, ...]
    sniff: Callable[[str], bool]


SOURCES: dict[str, Source] = {module.FORMAT: Source(module.FORMAT, module.read, module.SUFFIXES, module.sniff)
                              for module in (claude_code, chatgpt, claude_ai, locomo, chat_text)}
FORMATS = tuple(SOURCES)


def read_conversations(path: Path, format: str, include: frozenset[str] = frozenset()) -> ReadResult:
    """Every session in a file or directory of the given format; unreadable records are in `.problems`."""
    unknown = set(include) - set(INCLUDABLE)
    if unknown:
        raise UsageError(f"cannot include {', '.join(sorted(unknown))}; choose from {', '.join(INCLUDABLE)}")
    source = SOURCES.get(format)
    if source is None:
        raise UsageError(f"unknown conversation format {format!r}; use one of {', '.join(FORMATS)}")
    result = source.read(Path(path), frozenset(include))
    result.problems += result.time_problems()
    return result
