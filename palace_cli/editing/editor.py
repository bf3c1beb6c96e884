"""The person's editor: which one ($VISUAL, then $EDITOR, as git does) and how to open a file at a line."""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

from palace_cli.errors import PalaceError

# How editors take a line, by the name of their executable. `+LINE FILE` is the old vi convention that
# most terminal editors kept; the GUI editors each chose their own.
PLUS_LINE = {"vi", "vim", "nvim", "gvim", "mvim", "view", "nano", "pico", "emacs", "emacsclient", "kak", "micro",
             "joe", "jed", "mg", "ne", "mcedit", "gedit", "xed", "pluma", "geany", "vis", "ed"}
COLON_LINE = {"subl", "sublime_text", "hx", "helix", "zed", "atom"}  # FILE:LINE
GOTO_LINE = {"code", "code-insiders", "codium", "cursor", "windsurf"}  # -g FILE:LINE
DASH_L = {"kate", "mate"}  # -l LINE FILE


def editor() -> list[str]:
    """The editor command line: $VISUAL, else $EDITOR, else vi; PalaceError when there is none."""
    chosen = os.environ.get("VISUAL", "").strip() or os.environ.get("EDITOR", "").strip()
    if not chosen:
        if not shutil.which("vi"):
            raise PalaceError("no editor: set $EDITOR (for example `export EDITOR=nano`)")
        chosen = "vi"
    try:
        return shlex.split(chosen)
    except ValueError as exc:
        raise PalaceError(f"cannot read the editor command {chosen!r}: {exc}") from None


def editor_command(path: Path, line: int | None = None, command: list[str] | None = None) -> list[str]:
    """The command that opens `path` at `line` in the person's editor (at the top when the editor is unknown)."""
    command = list(command or editor())
    name = Path(command[0]).name.lower().removesuffix(".exe")
    if not line or line < 1:
        return command + [str(path)]
    if name in PLUS_LINE:
        return command + [f"+{line}", str(path)]
    if name in COLON_LINE:
        return command + [f"{path}:{line}"]
    if name in GOTO_LINE:
        return command + ["-g", f"{path}:{line}"]
    if name in DASH_L:
        return command + ["-l", str(line), str(path)]
    return command + [str(path)]
