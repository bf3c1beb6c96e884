"""Escape sequences in a note or a chat reach a real terminal inert (issue 34 row 5): list, show, search and recall
print them as visible symbols, never as the bytes a terminal obeys (a clipboard write, a cleared screen, colour)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from palace_cli.cli.inert import inert, json_text

PALACE_BIN = Path(sys.executable).parent / "palace"
OSC52 = "\x1b]52;c;cm0gLXJmIH4=\x07"  # "write `rm -rf ~` to the clipboard"
CLEAR = "\x1b[2J"
RED = "\x1b[31m"
HOSTILE = f"kestrel {OSC52} wipes {CLEAR} and {RED}paints"
OBEYED = ("\x1b]", "\x07", "\x1b[2J", "\x1b[31m", "\x9b")  # what a terminal would act on


def _terminal(palace_dir: Path, *args: str) -> str:
    """What the command writes to a real pseudo-terminal (raw bytes, decoded; colours off so that palace's own
    styling cannot be mistaken for the note's)."""
    pexpect = pytest.importorskip("pexpect")
    env = dict(os.environ, COLUMNS="200", LINES="50", TERM="xterm-256color", NO_COLOR="1")
    child = pexpect.spawn(str(PALACE_BIN), ["--palace", str(palace_dir), *args], env=env, encoding="utf-8",
                          codec_errors="replace", timeout=120, dimensions=(50, 200))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    return child.before


@pytest.mark.slow
@pytest.mark.skipif(not PALACE_BIN.exists(), reason="the palace console script is not installed in this venv")
def test_escape_sequences_in_a_note_and_a_chat_print_inert(example_palace, tmp_path):
    note = example_palace / "memories" / "storage-engines" / "kestrel.md"
    note.write_text(f'---\nid: kestrel\nsubject: "Kestrel \\e[2J\\e[31mred"\ntype: fact\n---\n\n{HOSTILE}\n',
                    encoding="utf-8")
    chat = tmp_path / "kestrel-chat.txt"
    chat.write_text(f"Ann: the kestrel {OSC52} hovers {CLEAR} over {RED} the field\nBob: noted\n", encoding="utf-8")
    subprocess.run([str(PALACE_BIN), "--palace", str(example_palace), "import", str(chat)], check=True,
                   capture_output=True)
    shown = {args[0]: _terminal(example_palace, *args) for args in (
        ("list",), ("show", "kestrel"), ("search", "kestrel", "--mode", "lexical"),
        ("recall", "kestrel", "--format", "prompt"), ("recall", "kestrel"))}
    for command, output in shown.items():
        assert not [seq for seq in OBEYED if seq in output], (command, output)
    assert "␛]52;c;cm0gLXJmIH4=␇" in shown["show"] and "␛[2J" in shown["show"] and "␛[31m" in shown["show"]
    assert "kestrel" in shown["list"] and "␛[2J" in shown["list"]
    assert "␛]52" in shown["search"] and "␛]52" in shown["recall"]  # the chat's turn and the note are found


def test_inert_shows_every_control_and_keeps_lines():
    assert inert(HOSTILE) == "kestrel ␛]52;c;cm0gLXJmIH4=␇ wipes ␛[2J and ␛[31mpaints"
    assert inert("a\tb\r\nc\x9bd\x7f") == "a\tb\nc\\x9bd␡"
    assert inert("plain text, unchanged") == "plain text, unchanged"
    assert json_text('"\x9b\x85"') == '"\\u009b\\u0085"'
