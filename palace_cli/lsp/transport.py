"""What reaches pygls from the editor: well-framed JSON-RPC messages, whatever arrives on stdin; and an answer
to every request, an error if need be.

pygls owns the framing: its reader loop takes `Content-Length` headers and bodies through the `readline`
and `read` of the stream it is given, and trusts them. A header it cannot read makes it read the body as
headers and go deaf (it then ignores `exit`), a length longer than memory is a MemoryError, and a body
that is not a message is logged and dropped with no reply. `Framing` is the stream pygls is given instead
of stdin: it reads each message itself, checks its headers, length and JSON, hands pygls the good ones
as they came, and for a bad one hands pygls a stand-in request (`REJECT`) that `Protocol` answers with a
JSON-RPC error to the bad message's id (null when it cannot be read), then finds the next message.
`Protocol` also answers what pygls drops: a request after `shutdown`, params of the wrong shape.
"""

from __future__ import annotations

import json
import logging
import re
from collections import deque

from pygls.exceptions import JsonRpcException
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import RPCRequest

MAX_MESSAGE = 64 * 1024 * 1024  # bytes of one message; a 32 MB session file opened in the editor fits
MAX_HEADER_LINE = 8192
MAX_HEADERS = 32
CHUNK = 65536
REJECT = "$/palace/reject"  # the stand-in request through which a bad message is answered
HEADER = b"Content-Length:"
HEADER_LINE = re.compile(rb"[A-Za-z0-9-]+:[^\r\n]*")  # `Name: value`
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, SHUT_DOWN = -32700, -32600, -32601, -32600
log = logging.getLogger("palace.lsp")


class Framing:
    """A byte stream for pygls's reader that yields only well-framed messages, whatever the client sends."""

    def __init__(self, raw):
        self.raw = raw
        self._buffer = bytearray()
        self._eof = False
        self._lines: deque[bytes] = deque()  # header lines pygls reads next
        self._body = b""
        self._resync = False  # the stream lost its framing: skip to the next Content-Length header

    # ---- what pygls calls ----------------------------------------------------------------------

    def readline(self) -> bytes:
        """The next header line of the next good message (b"" at the end of the stream)."""
        while not self._lines:
            if not self._next():
                return b""
        return self._lines.popleft()

    def read(self, size: int) -> bytes:
        """The body announced by the header just read (pygls asks for exactly its length)."""
        body, self._body = self._body[:size], self._body[size:]
        return body

    # ---- reading the client's stream -----------------------------------------------------------

    def _fill(self) -> bool:
        """Read what the client has sent into the buffer; False at the end of the stream."""
        if self._eof:
            return False
        read = getattr(self.raw, "read1", self.raw.read)
        chunk = read(CHUNK)
        if not chunk:
            self._eof = True
            return False
        self._buffer += chunk
        return True

    def _line(self) -> bytes | None:
        """One line, newline included; None at the end of the stream; b"" for a line too long to be a header."""
        while True:
            end = self._buffer.find(b"\n", 0, MAX_HEADER_LINE)
            if end >= 0:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                return line
            if len(self._buffer) >= MAX_HEADER_LINE:
                return b""
            if not self._fill():
                return None

    def _exactly(self, size: int) -> bytes | None:
        while len(self._buffer) < size:
            if not self._fill():
                return None
        body = bytes(self._buffer[:size])
        del self._buffer[:size]
        return body

    def _skip_to_header(self) -> bool:
        """Drop bytes up to the next `Content-Length:` (memory stays bounded); False at the end of the stream."""
        while True:
            found = self._buffer.find(HEADER)
            if found >= 0:
                del self._buffer[:found]
                return True
            del self._buffer[: max(len(self._buffer) - len(HEADER), 0)]
            if not self._fill():
                return False

    def _headers(self) -> tuple[int | None, str, str]:
        """(length, problem, kind) of the next header block. kind: "ok" (the length can be trusted), "length" (a
        well-formed block whose length cannot), "garbage" (not a header block: the framing is lost), "end"."""
        length, problem, count = None, "", 0
        while True:
            line = self._line()
            if line is None:
                return None, "", "end"
            if line == b"":
                self._resync = True
                return None, "a header line longer than 8 KB", "garbage"
            text = line.rstrip(b"\r\n")
            if not text:
                if count:
                    break
                continue  # a blank line between messages
            count += 1
            if count > MAX_HEADERS or not HEADER_LINE.fullmatch(text):
                self._garbage(line)
                return None, f"{_shown(text)} is not a header", "garbage"
            name, _, value = text.partition(b":")
            value = value.strip()
            if name.lower() == b"content-length" and not problem:
                if not value.isdigit() or len(value) > 15:
                    problem = f"Content-Length {_shown(value)} is not a length"
                elif int(value) > MAX_MESSAGE:
                    problem = f"Content-Length {int(value):,} is over the {MAX_MESSAGE:,} byte limit"
                else:
                    length = int(value)
        if length is None and not problem:
            problem = "no Content-Length header"
        return length, problem, "length" if problem else "ok"

    def _garbage(self, line: bytes) -> None:
        """A line that is no header: when a `Content-Length:` starts inside it (the tail of a message that was
        longer than it said), the next message starts there; else the stream is skipped up to the next one."""
        found = line.find(HEADER, 1)
        if found > 0:
            self._buffer[:0] = line[found:]
        else:
            self._resync = True

    def _next(self) -> bool:
        """Queue the next good message, or a stand-in for a bad one; False at the end of the stream."""
        if self._resync:
            if not self._skip_to_header():
                return False
            self._resync = False
        length, problem, kind = self._headers()
        if kind == "end":
            return False
        if kind == "garbage":
            self._reject(None, PARSE_ERROR, f"bad framing: {problem}")
        elif kind == "length":
            self._unframed(problem)
        else:
            body = self._exactly(length)
            if body is None:
                return False  # the client went away in the middle of a message
            self._framed(body, length)
        return True

    def _framed(self, body: bytes, length: int) -> None:
        """A body of the announced length: pass it on, or find where the message really ended."""
        try:
            message = json.loads(body)
        except RecursionError:
            self._reject(None, PARSE_ERROR, "the message is nested too deeply to be read")
            return
        except ValueError:
            found, end = _first_value(body + bytes(self._buffer))
            if found is None:
                self._reject(None, PARSE_ERROR, f"the body of {length:,} bytes is not JSON")
                return
            if end <= len(body):
                self._buffer[:0] = body[end:]  # the length ran into the next message: give its start back
            else:
                del self._buffer[: end - len(body)]  # the message went on past the length
            self._reject(_id_of(found), PARSE_ERROR,
                         f"bad framing: Content-Length {length:,}, but the message is {end:,} bytes")
            return
        if self._envelope_ok(message):
            self._lines += (b"Content-Length: %d\r\n" % len(body), b"\r\n")
            self._body = body

    def _unframed(self, problem: str) -> None:
        """A header block whose length cannot be trusted: the message after it, if it is there already, is
        answered; else the stream is read up to the next header."""
        if not self._buffer:
            self._fill()
        found, end = _first_value(bytes(self._buffer))
        if found is None:
            self._resync = True
            self._reject(None, PARSE_ERROR, f"bad framing: {problem}")
            return
        del self._buffer[:end]
        self._reject(_id_of(found), PARSE_ERROR, f"bad framing: {problem}", answer="id" in found)

    def _envelope_ok(self, message) -> bool:
        """True for a JSON-RPC 2.0 message pygls can take; anything else is answered here."""
        if not isinstance(message, dict):
            self._reject(None, INVALID_REQUEST, "not a JSON-RPC message (an object was expected)")
            return False
        note_id = message.get("id")
        has_id = "id" in message
        if has_id and not _valid_id(note_id):
            self._reject(None, INVALID_REQUEST, "the id must be a string, a number or null")
            return False
        if message.get("jsonrpc") != "2.0" or ("method" in message and not isinstance(message["method"], str)):
            if has_id and "method" in message:
                self._reject(note_id, INVALID_REQUEST, 'not a JSON-RPC 2.0 request ("jsonrpc": "2.0", a method name)')
            else:
                log.warning("palace lsp: dropped a message that is not JSON-RPC 2.0")
            return False
        return True

    def _reject(self, note_id, code: int, message: str, answer: bool = True) -> None:
        """Queue the stand-in request that makes Protocol answer note_id with an error (a notification, which
        has no id to answer, is only logged)."""
        log.warning("palace lsp: %s", message)
        if not answer:
            return
        body = json.dumps({"jsonrpc": "2.0", "id": note_id, "method": REJECT,
                           "params": {"code": code, "message": message}}).encode("utf-8")
        self._lines += (b"Content-Length: %d\r\n" % len(body), b"\r\n")
        self._body = body


def _shown(value: bytes) -> str:
    return repr(value[:40].decode("utf-8", "replace")) + ("…" if len(value) > 40 else "")


def _valid_id(value) -> bool:
    return value is None or (isinstance(value, (str, int, float)) and not isinstance(value, bool))


def _id_of(message) -> object:
    """The id to answer a message with: its own when it is a request with a valid id, else None."""
    if isinstance(message, dict) and _valid_id(message.get("id")):
        return message.get("id")
    return None


def _first_value(data: bytes) -> tuple[object | None, int]:
    """(the JSON object at the start of data, the byte where it ends), or (None, 0)."""
    start = re.match(rb"\s*", data).end()
    text = data[start : start + MAX_MESSAGE].decode("utf-8", "surrogateescape")
    try:
        found, end = json.JSONDecoder().raw_decode(text)
    except (ValueError, RecursionError):
        return None, 0
    if not isinstance(found, dict):
        return None, 0
    return found, start + len(text[:end].encode("utf-8", "surrogateescape"))


class Protocol(LanguageServerProtocol):
    """pygls's LSP protocol, answering every request: stand-ins for bad messages, requests after shutdown, and
    requests whose params do not have the method's shape (pygls drops all three)."""

    def structure_message(self, data):
        """pygls's, except that a request whose params cannot be read becomes a stand-in answered with the error."""
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            method = data.get("method")
            if not isinstance(method, str) or "id" not in data:
                raise
            if method in self.fm.features or method in self.fm.builtin_features:
                code, message = exc.code, f"{method}: the params cannot be read"
            else:
                code, message = METHOD_NOT_FOUND, f"no method {method!r}"
            return {"jsonrpc": "2.0", "id": data["id"], "method": REJECT, "params": {"code": code, "message": message}}

    def handle_message(self, message):
        """pygls's, after answering stand-ins and requests that come after shutdown."""
        if isinstance(message, dict) and message.get("method") == REJECT:  # a stand-in from structure_message
            self._send_response(message["id"], error=_error(message["params"]))
            return
        method = getattr(message, "method", None)
        if method == REJECT:
            self._send_response(message.id, error=_error(message.params))
            return
        if self._shutdown and isinstance(message, RPCRequest) and method != "exit":
            self._send_response(message.id, error=_error({"code": SHUT_DOWN, "message": "the server is shut down"}))
            return
        super().handle_message(message)


def _error(params):
    from lsprotocol.types import ResponseError

    get = params.get if isinstance(params, dict) else lambda name: getattr(params, name, None)
    return ResponseError(code=int(get("code") or PARSE_ERROR), message=str(get("message") or "bad message"))
