"""Text from a note or a chat made inert before a terminal sees it: no control sequence reaches the screen.

A note or an imported chat can hold `ESC]52;c;...BEL` (a clipboard write, in terminals that allow OSC 52),
`ESC[2J` (clear the screen) or `ESC[31m`. Printed as they are, the terminal obeys them. Every face that
prints text (render.py's consoles, the plain lines of the CLI, the hook's stderr) passes it through
`inert`, which shows each control character as a visible symbol (ESC as `␛`, BEL as `␇`) and keeps tabs and
line breaks. JSON stays exact data: `json_text` only writes the characters JSON leaves raw (DEL and the C1
controls) as `\\u` escapes, which read back as the same string.

No rich here: the hook pays for its imports on every Claude Code session.
"""

from __future__ import annotations

import re

# C0 controls but tab and line feed, DEL, the C1 controls, and lone surrogates (bytes that were not UTF-8).
UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
JSON_RAW = re.compile(r"[\x7f-\x9f]")  # json.dumps(ensure_ascii=False) escapes C0 but leaves these as they are


def _shown(match: re.Match) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ␀ ... ␟ (␛ for ESC)
    if code == 0x7F:
        return "\u2421"  # ␡
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"  # a byte that was not UTF-8, as Python's surrogateescape kept it
    if code >= 0xD800:
        return "\ufffd"
    return f"\\x{code:02x}"  # a C1 control (0x9b is CSI to some terminals)


def inert(text) -> str:
    """`text` (any object, as str) with every control character shown as a visible symbol; `\\r\\n` read as `\\n`."""
    text = str(text)
    if not UNSAFE.search(text):
        return text
    return UNSAFE.sub(_shown, text.replace("\r\n", "\n"))


def json_text(text: str) -> str:
    """JSON text with DEL and the C1 controls written as `\\u` escapes: the same data, nothing a terminal obeys."""
    return JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
