"""The records of a JSON export, one at a time, read from the file a megabyte at a time.

An export can be gigabytes (a heavy ChatGPT user's `conversations.json`), and one record in it can be
hostile: nested past Python's recursion limit, or one 200 MB message. Neither may stop the import or
take the memory down, so the file is never held whole: each record is decoded from a buffer that
grows only until the record is complete, and a record over MAX_RECORD_BYTES, or too deep to decode,
is passed over by a scanner that keeps only the chunk it is reading. Both are reported with their
line, and the records after them are read.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import BinaryIO, Iterator

from palace_cli.conversations.model import ReadProblem
from palace_cli.conversations.sessionfile import MAX_SESSION_BYTES

# A record over this could not become a session file under the cap (its text would be over it, or nearly):
# it is left out unread, and nothing bigger than it is ever held in memory.
MAX_RECORD_BYTES = MAX_SESSION_BYTES
CHUNK = 1 << 20
_WS = re.compile(r"\s*")
_STRUCTURE = re.compile(r'[\[\]{}"]')
_IN_STRING = re.compile(r'(?:[^"\\]+|\\.)*', re.S)  # the rest of a string's body, up to its closing quote
_SCALAR = re.compile(r"[^\s,\]}]*")
_NUMBER_GOES_ON = re.compile(r"[0-9.eE+-]*")


class _Buffer:
    """The decoded text of a file from the current record on, with the line and column where it starts."""

    def __init__(self, handle: BinaryIO, where: str, problems: list[ReadProblem]):
        self.handle, self.where, self.problems = handle, where, problems
        self.text = ""
        self.line, self.column = 1, 1  # of text[0]
        self.end = 0  # just past the value _element read last
        self._mark, self._mark_line = 0, 1  # a position and its line: lines of later positions count on from it
        self.eof = False
        self._pending = b""  # the bytes of a character cut by a chunk's end
        self._first = True
        self._reported = False

    def more(self, size: int | None = None) -> bool:
        """Read and decode about `size` more bytes (a chunk); False at the end of the file."""
        size = size or CHUNK
        raw = self.handle.read(max(size, 3) if self._first else size)  # a BOM comes whole
        data = self._pending + (raw.removeprefix(b"\xef\xbb\xbf") if self._first else raw)
        self._first = False
        if not raw:
            self.eof = True
            if data:  # a character the file cut short: U+FFFD, reported
                self._decode(data)
            self._pending = b""
            return False
        cut = _complete(data)
        self._pending = data[cut:]
        self._decode(data[:cut])
        return True

    def _decode(self, data: bytes) -> None:
        try:
            self.text += data.decode("utf-8")
        except UnicodeDecodeError as exc:
            if not self._reported:
                line = self.line + self.text.count("\n") + data[: exc.start].count(b"\n")
                self.problems.append(ReadProblem(self.where, line, f"not UTF-8 (byte 0x{data[exc.start]:02x}); "
                                                 "undecodable bytes read as U+FFFD"))
                self._reported = True
            self.text += data.decode("utf-8", "replace")

    def drop(self, index: int) -> None:
        """Forget the text before `index`, keeping count of its lines."""
        newlines = self.text.count("\n", 0, index)
        if newlines:
            self.line += newlines
            self.column = index - self.text.rfind("\n", 0, index)
        else:
            self.column += index
        self.text = self.text[index:]
        self._mark, self._mark_line = 0, self.line

    def line_of(self, index: int) -> int:
        """The line of a position at or after the last one asked about (counted on from there)."""
        if index < self._mark:
            return self.where_is(index)[0]
        self._mark_line += self.text.count("\n", self._mark, index)
        self._mark = index
        return self._mark_line

    def where_is(self, index: int) -> tuple[int, int]:
        """(line, column) of a position in the text."""
        newline = self.text.rfind("\n", 0, index)
        line = self.line + self.text.count("\n", 0, index)
        return line, (index - newline if newline >= 0 else self.column + index)

    def skip_space(self, index: int) -> int:
        """The first position from `index` that is not whitespace (reading on as needed); len(text) at the end."""
        while True:
            index = _WS.match(self.text, index).end()
            if index < len(self.text) or not self.more():
                return index


def _complete(data: bytes) -> int:
    """Where the last whole UTF-8 character of `data` ends (a chunk may end inside one)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # not a continuation byte: the start of the last character
            width = 1 if byte < 0x80 else 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4
            return len(data) if back >= width or byte < 0x80 else len(data) - back
    return len(data)


def json_records(file: Path, where: str, problems: list[ReadProblem], noun: str = "record"
                 ) -> Iterator[tuple[int, int, object]]:
    """(number, line, value) for each element of a top-level JSON array (or the one top-level value) of a file; reports
    name an element by its `noun` and number (`conversation 3`).

    A file cut short or broken in the middle still yields every element before the break; the break
    is reported with its line and column. An element too big or too deep is reported and passed over.
    """
    handle = open_source(file, where, problems)
    if handle is None:
        return
    with handle:
        buffer = _Buffer(handle, where, problems)
        start = buffer.skip_space(0)
        if start >= len(buffer.text):
            problems.append(ReadProblem(where, 1, "empty file"))
            return
        if buffer.text[start] != "[":
            value = _element(buffer, start, "the file", top=True)
            if value is not _LEFT_OUT and value is not _BROKEN:
                yield 1, buffer.where_is(start)[0], value
            return
        yield from _elements(buffer, start + 1, noun)


def _elements(buffer: _Buffer, index: int, noun: str) -> Iterator[tuple[int, int, object]]:
    number = 0
    while True:
        index = buffer.skip_space(index)
        if index < len(buffer.text) and buffer.text[index] == "]":
            return
        if index > CHUNK:  # what was read before this record is not needed again
            buffer.drop(index)
            index = 0
        number += 1
        line = buffer.line_of(index)
        value = _element(buffer, index, f"{noun} {number}")
        if value is _BROKEN:
            return
        if value is not _LEFT_OUT:
            yield number, line, value
        index = buffer.skip_space(buffer.end)
        if index < len(buffer.text) and buffer.text[index] == ",":
            index += 1
            continue
        if index < len(buffer.text) and buffer.text[index] == "]":
            return
        buffer.problems.append(ReadProblem(buffer.where, buffer.line_of(index), "not valid JSON: expected `,` or "
                                           "`]` after a record; the rest of the file left out"))
        return


_LEFT_OUT, _BROKEN = object(), object()


def _element(buffer: _Buffer, index: int, what: str, top: bool = False):
    """The value starting at `index` (buffer.end set past it); _LEFT_OUT when it was passed over, _BROKEN when
    the JSON is broken there (reported: the rest of the file cannot be read)."""
    decoder = json.JSONDecoder()
    while True:
        try:
            value, end = decoder.raw_decode(buffer.text, index)
        except json.JSONDecodeError as exc:
            if buffer.eof or not _cut_short(exc, buffer.text):
                line, column = buffer.where_is(exc.pos)
                rest = "" if top else "; this record and the rest of the file left out"
                buffer.problems.append(ReadProblem(buffer.where, line,
                                                   f"not valid JSON: {exc.msg} (column {column}){rest}"))
                return _BROKEN
        except RecursionError:
            return _pass_over(buffer, index, what, "nested deeper than Python can read")
        else:
            # A number that ends the buffer, or is followed only by what could go on with it (`0.`, `1e`), may be cut.
            if buffer.eof or not _NUMBER_GOES_ON.fullmatch(buffer.text, end):
                buffer.end = end
                return value
        have = len(buffer.text) - index
        if have > MAX_RECORD_BYTES:
            return _pass_over(buffer, index, what, f"over the {MAX_RECORD_BYTES:,} byte limit for a session file")
        # Doubling, so a big record is decoded a few times, not once a chunk; never much past the limit.
        buffer.more(max(CHUNK, min(have, MAX_RECORD_BYTES + 1 - have)))


def _cut_short(exc: json.JSONDecodeError, text: str) -> bool:
    """True when a decoding error is only the buffer ending inside the value (more text may complete it)."""
    return exc.msg.startswith("Unterminated string") or len(text) - exc.pos < 12 or not text[exc.pos:].strip()


def _pass_over(buffer: _Buffer, index: int, what: str, why: str):
    """Scan past the value at `index` without decoding it, keeping only the chunk in hand; report it."""
    line = buffer.where_is(index)[0]
    end = _scan(buffer, index)
    if end is None:
        buffer.problems.append(ReadProblem(buffer.where, line, f"{what} is {why}, and the file ends inside it; "
                                           "left out"))
        return _BROKEN
    buffer.problems.append(ReadProblem(buffer.where, line, f"{what} is {why}; left out"))
    buffer.end = end
    return _LEFT_OUT


def _scan(buffer: _Buffer, index: int) -> int | None:
    """The position just past the JSON value at `index`, by brackets and strings alone; None at the end of file."""
    depth, in_string = 0, False
    if buffer.text[index] not in '[{"':
        while True:
            end = _SCALAR.match(buffer.text, index).end()
            if end < len(buffer.text):
                return end
            buffer.drop(index)
            index = 0
            if not buffer.more():
                return None
    while True:
        text = buffer.text
        if in_string:
            index = _IN_STRING.match(text, index).end()
            if index < len(text) and text[index] == '"':
                in_string, index = False, index + 1
                if depth == 0:
                    return index
                continue
        else:
            match = _STRUCTURE.search(text, index)
            if match is not None:
                char, index = match.group(), match.end()
                if char == '"':
                    in_string = True
                elif char in "[{":
                    depth += 1
                else:
                    depth -= 1
                    if depth == 0:
                        return index
                continue
            index = len(text)
        buffer.drop(index)  # everything before is passed over; keep at most a trailing backslash's escape
        index = 0
        if not buffer.more():
            return None


def open_source(file: Path, where: str, problems: list[ReadProblem]) -> BinaryIO | None:
    """The file opened for reading, or None (reported) when it is no regular file or cannot be read."""
    try:
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not wait for a writer
    except OSError as exc:
        problems.append(ReadProblem(where, None, f"cannot read: {exc.strerror}"))
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        problems.append(ReadProblem(where, None, "not a regular file; not read"))
        return None
    return os.fdopen(fd, "rb")
