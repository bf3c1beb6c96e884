"""`palace lsp` against what a broken or hostile client sends, over the real stdio of a real process: bad framing,
bad JSON, requests after shutdown, params of the wrong shape, and huge buffers.

The client here writes bytes itself (pygls's client would refuse to send most of this) and reads the server's
framed replies on a thread, so a server that goes deaf fails a test by its timeout instead of hanging it.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pygls")

from conftest import EXAMPLE, copy_palace  # noqa: E402
from test_lsp import BTREE, ENTRY, Editor, server_env  # noqa: E402

from lsprotocol import types as lsp  # noqa: E402

from palace_cli.lsp.transport import MAX_MESSAGE, REJECT, Framing  # noqa: E402


class Raw:
    """`palace lsp` in a subprocess, spoken to in bytes."""

    def __init__(self, root: Path, env: dict, tmp: Path):
        self.stderr = open(tmp / "server.log", "wb")
        self.process = subprocess.Popen([sys.executable, "-c", ENTRY, "lsp"], cwd=root, env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr)
        self.replies: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.root = root

    def _read(self) -> None:
        out = self.process.stdout
        while True:
            header = out.readline()
            if not header:
                self.replies.put(None)
                return
            length = int(header.split(b":")[1])
            while out.readline().strip():
                pass
            self.replies.put(json.loads(out.read(length)))

    def write(self, data: bytes) -> None:
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send(self, message: dict, length: int | str | None = None) -> None:
        body = json.dumps(message).encode()
        self.write(b"Content-Length: %s\r\n\r\n" % str(len(body) if length is None else length).encode() + body)

    def request(self, number: int, method: str, params=None) -> None:
        self.send({"jsonrpc": "2.0", "id": number, "method": method, **({} if params is None else {"params": params})})

    def reply(self, number, timeout: float = 60) -> dict:
        """The reply to request `number` (None: the error for a message whose id could not be read)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = self.replies.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise AssertionError(f"no reply to {number!r} in {timeout} s") from None
            assert message is not None, f"the server closed its output before answering {number!r}"
            if "method" not in message and message.get("id") == number:
                return message

    def initialize(self) -> None:
        self.request(1, "initialize", {"processId": None, "rootUri": self.root.as_uri(), "capabilities": {}})
        assert "capabilities" in self.reply(1)["result"]
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})

    def exit_code(self, timeout: float = 30) -> int:
        self.send({"jsonrpc": "2.0", "method": "exit"})
        try:
            return self.process.wait(timeout)
        finally:
            self.close()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process.stdin.close()
        self.stderr.close()


@pytest.fixture(scope="module")
def hostile_palace(tmp_path_factory) -> Path:
    return copy_palace(EXAMPLE, tmp_path_factory.mktemp("hostile") / "palace", git=False)


@pytest.fixture
def raw(hostile_palace, tmp_path):
    client = Raw(hostile_palace, server_env(tmp_path), tmp_path)
    client.initialize()
    yield client
    client.close()


HOVER = {"textDocument": {"uri": "file:///nowhere.md"}, "position": {"line": 0, "character": 0}}


def test_bad_content_length_is_answered_and_the_next_message_read(raw):
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "textDocument/hover", "params": HOVER}).encode()
    raw.write(b"Content-Length: abc\r\n\r\n" + body)
    error = raw.reply(7)["error"]
    assert error["code"] == -32700 and "Content-Length 'abc' is not a length" in error["message"]
    raw.request(8, "textDocument/hover", HOVER)
    assert raw.reply(8) == {"jsonrpc": "2.0", "id": 8, "result": None}
    raw.request(9, "shutdown")
    assert "error" not in raw.reply(9)
    assert raw.exit_code() == 0


def test_a_length_shorter_than_the_body_is_answered(raw):
    raw.send({"jsonrpc": "2.0", "id": 11, "method": "textDocument/hover", "params": HOVER}, length=30)
    error = raw.reply(11)["error"]
    assert "Content-Length 30, but the message is" in error["message"]
    raw.request(12, "textDocument/hover", HOVER)
    assert raw.reply(12)["result"] is None
    assert raw.exit_code() == 1  # exit without shutdown, as the protocol says


def test_a_length_longer_than_memory_is_answered_without_reading_it(raw):
    raw.send({"jsonrpc": "2.0", "id": 13, "method": "textDocument/hover", "params": HOVER}, length=999999999999)
    error = raw.reply(13)["error"]
    assert f"over the {MAX_MESSAGE:,} byte limit" in error["message"]
    raw.request(14, "shutdown")
    assert raw.reply(14)["result"] is None
    assert raw.exit_code() == 0


def test_garbage_between_messages_is_reported_and_skipped(raw):
    raw.write(b"hello there\r\n\r\n{not json at all")
    assert raw.reply(None)["error"]["code"] == -32700
    raw.request(15, "textDocument/hover", HOVER)
    assert raw.reply(15)["result"] is None
    raw.send("not an object")  # well framed, but not a message
    assert "an object was expected" in raw.reply(None)["error"]["message"]
    raw.write(b"Content-Length: 9\r\n\r\n{\"a\": 1,}")  # well framed, not JSON
    assert "is not JSON" in raw.reply(None)["error"]["message"]
    deep = b'{"jsonrpc": "2.0", "id": 16, "method": "textDocument/hover", "params": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    raw.write(b"Content-Length: %d\r\n\r\n" % len(deep) + deep)
    assert raw.reply(None)["error"]["code"] == -32700
    raw.request(17, "textDocument/hover", HOVER)
    assert raw.reply(17)["result"] is None
    assert raw.exit_code() == 1


def test_every_request_gets_a_reply(raw):
    raw.request(21, "textDocument/hover", [1])
    assert raw.reply(21)["error"]["code"] == -32602  # invalid params
    raw.request(22, "textDocument/hover", {"textDocument": 5})
    assert raw.reply(22)["error"]["code"] == -32602
    raw.request(23, "no/such/method")
    assert raw.reply(23)["error"]["code"] == -32601
    raw.send({"jsonrpc": "1.0", "id": 24, "method": "textDocument/hover", "params": HOVER})
    assert raw.reply(24)["error"]["code"] == -32600
    raw.send({"jsonrpc": "2.0", "id": [25], "method": "shutdown"})
    assert raw.reply(None)["error"]["code"] == -32600
    raw.send({"jsonrpc": "2.0", "id": 26, "method": "textDocument/hover",
              "params": {**HOVER, "textDocument": {"uri": "file:///x/\ud800.md"}}})
    assert "id" in raw.reply(26)
    raw.request(27, "shutdown")
    assert raw.reply(27)["result"] is None
    raw.request(28, "textDocument/hover", HOVER)
    error = raw.reply(28)["error"]
    assert error["code"] == -32600 and "shut down" in error["message"]
    assert raw.exit_code() == 0


def test_the_client_going_away_ends_the_server(raw):
    raw.write(b"Content-Length: 100\r\n\r\n{\"jsonrpc\"")  # cut off in the middle of a message
    raw.process.stdin.close()
    assert raw.process.wait(30) == 1


M = b'{"jsonrpc": "2.0", "method": "m"}'  # a good message (a notification)
N = b"Content-Length: %d\r\n\r\n" % len(M) + M


@pytest.mark.parametrize("stream, expected", [
    (N, [("ok", M)]),
    (b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" % len(M) + M,
     [("ok", M)]),
    (b"content-length: %d\n\n" % len(M) + M, [("ok", M)]),  # bare newlines, any case
    (b"\r\n" + N + N, [("ok", M), ("ok", M)]),  # a blank line between messages
    (b'Content-Length: x\r\n\r\n{"id": 3}' + N, [("reject", 3), ("ok", M)]),
    (b'Content-Length: 5\r\n\r\n{"id": 4, "a": 1}' + N, [("reject", 4), ("ok", M)]),  # the length too short
    (b'Content-Length: 12\r\n\r\n{"id": 5}' + N, [("reject", 5), ("ok", M)]),  # too long: the next one starts inside
    (b'Content-Length: 99999999999999999999\r\n\r\n{"id": 6}' + N, [("reject", 6), ("ok", M)]),
    (b'Content-Length: 999999999999\r\n\r\n{"id": 8}', [("reject", 8)]),
    (b'Content-Type: x\r\n\r\n{"id": 7}', [("reject", 7)]),  # no length at all
    (b'Content-Length: x\r\n\r\n{"method": "n"}' + N, [("ok", M)]),  # a notification gets no answer
    (b"junk\r\nmore junk " + N, [("reject", None), ("ok", M)]),
    (b"x" * 10000 + N, [("reject", None), ("ok", M)]),  # a line too long to be a header
    (b'Content-Length: 4\r\n\r\n{"a"', [("reject", None)]),
    (b"Content-Length: 3\r\n\r\n[1]" + N, [("reject", None), ("ok", M)]),
    (b'Content-Length: 9\r\n\r\n{"id": 9}' + N, [("ok", M)]),  # not JSON-RPC 2.0: dropped
    (b"Content-Length: 10\r\n\r\n{}", []),  # the client went away in the middle of a body
])
def test_framing_reads_what_pygls_can_trust(stream, expected):
    """Framing in-process, on the byte streams above: what pygls would read from it."""
    framing = Framing(io.BytesIO(stream))
    got = []
    while True:
        header = framing.readline()
        if not header:
            break
        assert framing.readline() == b"\r\n"
        body = framing.read(int(header.split(b":")[1]))
        message = json.loads(body)
        got.append(("reject", message["id"]) if isinstance(message, dict) and message.get("method") == REJECT
                   else ("ok", body))
    assert got == expected


def _frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _drain(framing: Framing) -> list:
    """What pygls reads from a Framing: the messages, parsed."""
    got = []
    while True:
        header = framing.readline()
        if not header:
            return got
        assert header.startswith(b"Content-Length: ") and framing.readline() == b"\r\n"
        got.append(json.loads(framing.read(int(header.split(b":")[1]))))


GOOD = st.builds(lambda n, text: {"jsonrpc": "2.0", "id": n, "method": "textDocument/hover", "params": {"t": text}},
                 st.integers(0, 10**6), st.text(max_size=30))
SEGMENT = st.one_of(
    GOOD.map(lambda m: ("good", m)),
    st.binary(max_size=120).map(lambda b: ("bad", b)),
    st.tuples(st.sampled_from([b"abc", b"-1", b"999999999999", b"", b"1e3", b"0", b"12 34"]), GOOD).map(
        lambda t: ("bad", b"Content-Length: " + t[0] + b"\r\n\r\n" + json.dumps(t[1]).encode())),
    st.tuples(st.integers(0, 300), GOOD).map(  # a length that is wrong (or, now and then, right)
        lambda t: ("bad", b"Content-Length: %d\r\n\r\n" % t[0] + json.dumps(t[1]).encode())),
    st.sampled_from([b"[1]", b"{}", b"null", b'{"jsonrpc": "2.0", "id": [1], "method": "x"}', b'{"jsonrpc": "1.0"}',
                     b"[" * 3000 + b"]" * 3000, b'{"a": "\\ud800"}', b"\xff\xfe"]).map(lambda b: ("bad", _frame(b))),
)


@settings(max_examples=int(os.environ.get("PALACE_HYPOTHESIS_EXAMPLES", "200")), deadline=None)
@given(st.lists(SEGMENT, max_size=10))
def test_framing_never_fails_and_hands_pygls_only_messages(segments):
    """Any mix of good messages and hostile bytes: Framing never raises and ends; what it hands pygls is a
    JSON-RPC 2.0 object or a stand-in answer; good messages before anything bad come through unchanged."""
    stream = b"".join(_frame(json.dumps(x).encode()) if kind == "good" else x for kind, x in segments)
    got = _drain(Framing(io.BytesIO(stream)))
    for message in got:
        assert isinstance(message, dict) and message["jsonrpc"] == "2.0" and isinstance(message["method"], str)
    leading = [x for _, x in itertools.takewhile(lambda segment: segment[0] == "good", segments)]
    assert got[: len(leading)] == leading
    if all(kind == "good" for kind, _ in segments):
        assert got == leading


# ---- big buffers ------------------------------------------------------------------------------------


@pytest.fixture
def editor(example_palace, tmp_path):
    session = Editor(example_palace, server_env(tmp_path))
    session.diagnosed(session.open(BTREE))
    yield session
    if not session.loop.is_closed():
        session.close()


@pytest.mark.slow
def test_a_huge_buffer_of_links_is_answered_at_once(editor):
    """20 MB of [[links]]: one diagnostic (the note is over the size limit), and hover in it and elsewhere."""
    relpath = "memories/storage-engines/huge.md"
    line = "- [[lsm-tree]] and [[no-such-memory]] and [[write-ahead-log]]\n"
    text = (editor.root / BTREE).read_text().replace("id: b-tree", "id: huge") + line * (20_000_000 // len(line))
    uri = editor.open(relpath, text)
    other = editor.uri(BTREE)
    assert "Write-Ahead Log" in editor.hover(other, editor.at(other, "[[write-ahead-log]]", 4))
    [diagnostic] = editor.diagnosed(uri)
    assert diagnostic.code == "unreadable-note" and "over the 1,000,000 byte limit" in diagnostic.message
    last = len(editor.texts[uri].split("\n")) - 2
    assert "Log-Structured" in editor.hover(uri, lsp.Position(last, 6))
    assert "no memory `no-such-memory`" in editor.hover(uri, lsp.Position(last, 24))
    items = editor.complete(uri, lsp.Position(last, 6))
    assert items[0].data["id"] == "lsm-tree"
    assert editor.close() == 0


@pytest.mark.slow
def test_linting_a_big_buffer_holds_up_no_request(editor):
    """Just under the size limit, every link broken: lint takes a while, on its own thread; a hover on another
    document is answered before it ends, and the diagnostics arrive capped."""
    relpath = "memories/storage-engines/big.md"
    text = (editor.root / BTREE).read_text().replace("id: b-tree", "id: big")
    lines, size = [], len(text.encode())
    while size < 990_000:
        lines.append(f"- [[no-such-memory-{len(lines)}]]")
        size += len(lines[-1]) + 1
    uri = editor.open(relpath, text + "\n".join(lines) + "\n")
    other = editor.uri(BTREE)
    assert "Write-Ahead Log" in editor.hover(other, editor.at(other, "[[write-ahead-log]]", 4))
    assert uri not in editor.diagnostics  # the hover did not wait for the lint
    found = editor.diagnosed(uri)
    assert len(found) == 1001 and found[-1].code == "more-problems"
    broken = [d for d in found if d.code == "broken-link"]
    assert len(broken) > 990  # besides a few about the copied frontmatter (its verify token is b-tree's)
    for diagnostic in broken[:50]:
        start, end = diagnostic.range.start, diagnostic.range.end
        assert editor.texts[uri].split("\n")[start.line][start.character : end.character].startswith("no-such-memory-")
    assert editor.close() == 0


@pytest.mark.slow
def test_a_typing_storm_in_a_13_mb_buffer_holds_up_no_completion(editor):
    """Issue 34 row 19: 2,000 keystrokes into a 13 MB buffer, then `[[` completion and a hover on the typed line: both
    answered, from the buffer as typed (each keystroke rewrote the whole buffer: 2,000 blocked the client 286 s)."""
    relpath = "memories/storage-engines/storm.md"
    line = "- a line of notes about [[lsm-tree]] and other things"
    lines = ["---", "id: storm", "---", "# Storm"] + [line] * (13_000_000 // (len(line) + 1))
    uri = editor.open(relpath, "\n".join(lines) + "\n")
    middle = len(lines) // 2
    for column in range(2, 2_002):  # sent without the test client's own copy of the text: it would split it each time
        editor.versions[uri] += 1
        where = lsp.Position(middle, column)
        editor.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(editor.versions[uri], uri),
            [lsp.TextDocumentContentChangePartial(lsp.Range(where, where), "x")]))
    editor.type_at(uri, middle + 1, 0, "[[lsm")
    items = editor.complete(uri, lsp.Position(middle + 1, 5))
    assert items[0].data["id"] == "lsm-tree"  # listed by its title, the subject
    assert "Log-Structured" in editor.hover(uri, lsp.Position(middle, 2_000 + line.index("lsm-tree")))
    assert editor.hover(uri, lsp.Position(middle, 30)) is None  # the x's pushed the link right
    assert editor.close() == 0
