"""Every format `palace import` reads, in one table, and the one detector that tells which a path holds.

The table is ordered: the first format that claims a path is its format. A memory format names its
reader as `module:function` (loaded when used, so a conversation import never loads numpy); a
conversation format is a reader module of `palace_cli.importers.chats` (its `read`, and a `sniff` that looks
inside files). A new format is one line here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable

from palace_cli.conversations.model import INCLUDABLE, ReadResult
from palace_cli.errors import UsageError
from palace_cli.importers.chats import chat_text, chatgpt, claude_ai, claude_code, locomo
from palace_cli.core.walk import files_under
from palace_cli.importers.chats.reading import EXPORT, peek, redact_sessions

MARKDOWN = (".md", ".markdown")
BEIR_CORPUS = "corpus.jsonl"


class Look:
    """What detection needs to know about a path, each part read once and only when asked."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.is_file = self.path.is_file()
        self.is_dir = not self.is_file and self.path.is_dir()
        self.suffix = self.path.suffix.lower()
        self._heads: dict[Path, str] = {}

    def head(self, file: Path) -> str:
        """A file's first megabyte as text."""
        if file not in self._heads:
            self._heads[file] = peek(file)
        return self._heads[file]

    def json_kind(self, file: Path) -> str | None:
        """The conversation format of a JSON file (the first JSON source whose keys it has), or None."""
        return next((f.name for f in TABLE.values() if ".json" in f.suffixes and f.sniff(self.head(file))), None)

    @cached_property
    def corpus(self) -> bool:
        """A BEIR corpus: the file, or a folder holding one."""
        return self.path.name == BEIR_CORPUS if self.is_file else (self.path / BEIR_CORPUS).is_file()

    @cached_property
    def export(self) -> Path | None:
        """The `conversations.json` of an unpacked export folder."""
        file = self.path / EXPORT
        return file if self.is_dir and file.is_file() else None

    @cached_property
    def json_files(self) -> list[Path]:
        """The folder's own `*.json` files (not its subfolders')."""
        return [p for p in self.path.iterdir() if p.suffix.lower() == ".json" and p.is_file()] if self.is_dir else []

    @cached_property
    def json_kinds(self) -> set[str | None]:
        """The conversation formats of the folder's JSON files (None for JSON that is no conversation)."""
        return {self.json_kind(p) for p in self.json_files}

    @cached_property
    def jsonl(self) -> list[Path]:
        """`*.jsonl` files under the folder."""
        return files_under(self.path, (".jsonl",))

    @cached_property
    def texts(self) -> list[Path]:
        """Text and Markdown files under the folder."""
        return files_under(self.path, chat_text.SUFFIXES)

    @cached_property
    def markdown(self) -> bool:
        """The folder holds Markdown notes (as the Markdown importer finds them)."""
        from palace_cli.importers.markdown import SUFFIXES

        return bool(files_under(self.path, SUFFIXES, limit=1))

    def conversations_only(self, *, jsonl_too: bool = False) -> bool:
        """A folder that no other rule claims first: no BEIR corpus, no export, no JSON (and no JSONL)."""
        return not (self.corpus or self.export or self.json_files or (jsonl_too and self.jsonl))


def _claude_code(look: Look) -> bool:
    sniff = claude_code.sniff
    if look.is_file:
        return look.suffix == ".jsonl" and not look.corpus and sniff(look.head(look.path))
    return look.conversations_only() and any(sniff(look.head(p)) for p in look.jsonl[:5])


def _json_source(format: str) -> Callable[[Look], bool]:
    def claims(look: Look) -> bool:
        if look.is_file:
            return look.suffix == ".json" and look.json_kind(look.path) == format
        if look.corpus:
            return False
        if look.export is not None:
            return look.json_kind(look.export) == format
        return look.json_kinds == {format}

    return claims


def _chat_text(look: Look) -> bool:
    sniff = chat_text.sniff
    if look.is_file:
        return look.suffix == ".txt" or (look.suffix in MARKDOWN and sniff(look.head(look.path)))
    return (look.conversations_only(jsonl_too=True) and bool(look.texts)
            and all(p.suffix.lower() == ".txt" or sniff(look.head(p)) for p in look.texts))


def _memory_json(look: Look) -> bool:
    return look.suffix == ".json" if look.is_file else bool(look.json_files) and not look.markdown


def _markdown(look: Look) -> bool:
    return look.suffix in MARKDOWN if look.is_file else look.markdown and not look.json_files


@dataclass(frozen=True)
class Format:
    """One importable format: what it holds, when it claims a path, and how it is read."""

    name: str
    kind: str  # "memories" or "conversations"
    claims: Callable[[Look], bool]
    reader: str = ""  # memories: "module:function" reading (path, options) into a Batch
    read_chats: Callable[[Path, frozenset[str]], ReadResult] | None = None  # conversations: the reader's `read`
    suffixes: tuple[str, ...] = ()  # conversations: the file suffixes the reader reads
    sniff: Callable[[str], bool] | None = None  # conversations: a look at a file's first megabyte
    # conversations a source appends to: the reader's `resume`, the turns after a resume record (chats/resume.py)
    resume: Callable[[Path, frozenset[str], dict], ReadResult | None] | None = None


def _chats(module, claims: Callable[[Look], bool]) -> Format:
    """The row of a conversation reader module (FORMAT, SUFFIXES, sniff, read)."""
    return Format(module.FORMAT, "conversations", claims, read_chats=module.read, suffixes=module.SUFFIXES,
                  sniff=module.sniff, resume=getattr(module, "resume", None))


TABLE: dict[str, Format] = {f.name: f for f in (
    Format("beir", "memories", lambda look: look.corpus, "palace_cli.importers.beir:read_beir"),
    _chats(claude_code, _claude_code),
    *(_chats(module, _json_source(module.FORMAT)) for module in (chatgpt, claude_ai, locomo)),
    _chats(chat_text, _chat_text),
    Format("memory-palace-json", "memories", _memory_json,
           "palace_cli.importers.memory_palace_json:read_memory_palace_json"),
    Format("markdown", "memories", _markdown, "palace_cli.importers.markdown:read_markdown"),
)}
NOTE_FORMATS = ("memory-palace-json", "markdown", "beir")  # in the order `--format` lists them
CONVERSATION_FORMATS = tuple(f.name for f in TABLE.values() if f.kind == "conversations")
FORMATS = NOTE_FORMATS + CONVERSATION_FORMATS


def detect_format(path: Path) -> str:
    """The format of a file or directory: the first format in TABLE that claims it (from its names and, for
    conversations, a look inside); UsageError when none does."""
    look = Look(path)
    if not (look.is_file or look.is_dir):
        raise UsageError(f"{path}: no such file or directory")
    for format in TABLE.values():
        if format.claims(look):
            return format.name
    if look.is_dir and look.json_files and look.markdown:
        raise UsageError(f"{path} holds both .json and .md files; pass --format")
    raise UsageError(f"cannot tell the format of {path}; pass --format ({', '.join(FORMATS)})")


def read(path: Path, format: str, options: dict):
    """Read and validate a memory source in the given format into a Batch (ImportFailed on a malformed record)."""
    entry = TABLE.get(format)
    if entry is None or entry.kind != "memories":
        raise UsageError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")
    module, function = entry.reader.split(":")
    return getattr(importlib.import_module(module), function)(Path(path), options)


def read_conversations(path: Path, format: str, include: frozenset[str] = frozenset(),
                       keep_secrets: bool = False) -> ReadResult:
    """Every session in a file or directory of the given format, its secrets redacted unless `keep_secrets`
    (`.redacted` counts them); unreadable records are in `.problems`."""
    result = _chat_format(format, include).read_chats(Path(path), frozenset(include))
    return _finished(result, keep_secrets)


def resume_conversations(path: Path, format: str, include: frozenset[str], record: dict) -> ReadResult | None:
    """The turns appended to a source file since the read that left a resume record (chats/resume.py), their
    secrets redacted, as read_conversations gives them; None when the file must be read whole (or the format
    cannot read a tail)."""
    entry = _chat_format(format, include)
    if entry.resume is None or not Path(path).is_file():
        return None
    result = entry.resume(Path(path), frozenset(include), record)
    return None if result is None else _finished(result, False)


def _chat_format(format: str, include: frozenset[str]) -> Format:
    unknown = set(include) - set(INCLUDABLE)
    if unknown:
        raise UsageError(f"cannot include {', '.join(sorted(unknown))}; choose from {', '.join(INCLUDABLE)}")
    entry = TABLE.get(format)
    if entry is None or entry.kind != "conversations":
        raise UsageError(f"unknown conversation format {format!r}; use one of {', '.join(CONVERSATION_FORMATS)}")
    return entry


def _finished(result: ReadResult, keep_secrets: bool) -> ReadResult:
    result.problems += result.time_problems()
    if not keep_secrets:
        result.redacted = redact_sessions(result.sessions)
    return result
