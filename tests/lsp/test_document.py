"""LiveDocument: an incremental change costs the lines it touches and leaves what pygls's TextDocument leaves."""

from __future__ import annotations

import random

from lsprotocol import types as lsp
from pygls.workspace import TextDocument

from palace_cli.lsp.document import LiveDocument

PIECES = ["a", "b", " ", "\n", "\r", "\r\n", "é", "[[", "\u2028", "\x0c", "ü"]
INCREMENTAL = lsp.TextDocumentSyncKind.Incremental


def _text(rng: random.Random, most: int) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, most)))


def _change(rng: random.Random, lines) -> lsp.TextDocumentContentChangePartial:
    """A valid range (inside lines, start before end) and new text, as an editor sends them."""
    count = len(lines)
    width = lambda n: len(lines[n].rstrip("\r\n")) if n < count else 0  # noqa: E731
    first = rng.randint(0, count)
    last = rng.randint(first, count)
    start = rng.randint(0, width(first))
    end = rng.randint(start if last == first else 0, width(last))
    return lsp.TextDocumentContentChangePartial(lsp.Range(lsp.Position(first, start), lsp.Position(last, end)),
                                                _text(rng, 6))


def test_edits_leave_the_text_pygls_leaves():
    """600 random buffers of line breaks of every kind (CRLF split and joined by an edit, U+2028, form feeds),
    eight edits each: the same text and lines as pygls's own document after every edit."""
    for seed in range(600):
        rng = random.Random(seed)
        text = _text(rng, 30)
        theirs = TextDocument("file:///n.md", text, sync_kind=INCREMENTAL)
        ours = LiveDocument("file:///n.md", text, sync_kind=INCREMENTAL)
        for _ in range(8):
            change = _change(rng, theirs.lines)
            theirs.apply_change(change)
            ours.apply_change(change)
            assert list(ours.lines) == list(theirs.lines), seed
            assert ours.source == theirs.source, seed
        ours.apply_change(lsp.TextDocumentContentChangeWholeDocument("whole\nnew"))
        assert ours.lines == ["whole\n", "new"] and ours.source == "whole\nnew"


def test_a_keystroke_joins_and_splits_nothing_whole():
    """A keystroke in a big buffer replaces a few lines of the list it keeps; the text is joined again only when
    read (it was split and rewritten whole, 143 ms a keystroke at 13 MB)."""
    text = "- a line about [[lsm-tree]]\n" * 100_000
    doc = LiveDocument("file:///n.md", text, sync_kind=INCREMENTAL)
    lines = doc.lines
    for column in range(50):
        where = lsp.Position(5_000, 2 + column)
        doc.apply_change(lsp.TextDocumentContentChangePartial(lsp.Range(where, where), "x"))
    assert doc.lines is lines and doc._stale and doc._source is text  # nothing joined or split whole yet
    assert lines[5_000] == "- " + "x" * 50 + "a line about [[lsm-tree]]\n" and len(lines) == 100_000
    expected = text.splitlines(True)
    expected[5_000] = lines[5_000]
    assert doc.source == "".join(expected) and not doc._stale
