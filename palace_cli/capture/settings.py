"""`palace hook install|uninstall claude-code`: palace's entries in Claude Code's settings.json, merged in.

Claude Code reads hooks from `~/.claude/settings.json` (--user) and `<project>/.claude/settings.json`
(--project): `{"hooks": {"<Event>": [{"matcher": ..., "hooks": [{"type": "command", "command": ...}]}]}}`.
Install adds one group per event holding palace's command, unless a group already runs it; uninstall
removes palace's commands (any `... hook claude-code` of a palace executable) and the groups and events
left empty. Everything else in the file (other hooks, other settings, their order) stays as it was; the
file is rewritten as 2-space JSON, atomically. A settings.json that is a symlink (dotfiles kept in a repository)
stays one: the file it points to is rewritten. A file palace cannot read as settings is left as it is, in one
line (a group that is not an object of hooks is kept as it is, and never taken for palace's).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from palace_cli.capture.claude_code import EVENTS
from palace_cli.core.disk import atomic_write
from palace_cli.errors import PalaceError

HOOK_ARGS = ("hook", "claude-code")
TIMEOUT_S = 30


@dataclass
class SettingsChange:
    """What install or uninstall did to one settings file."""

    path: str
    command: str = ""
    added: list[str] = field(default_factory=list)     # events that gained palace's hook
    kept: list[str] = field(default_factory=list)      # events that already had it
    removed: list[str] = field(default_factory=list)   # events it was removed from

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return dict(self.__dict__)


def settings_path(scope: str, project: Path | None = None) -> Path:
    """The settings file for --user (~/.claude/settings.json) or --project (<project>/.claude/settings.json)."""
    if scope == "user":
        return Path.home() / ".claude" / "settings.json"
    return Path(project or Path.cwd()) / ".claude" / "settings.json"


def palace_executable() -> str:
    """How the hook calls palace: this process's own `palace` script when it is one, else `palace` on PATH."""
    argv0 = Path(sys.argv[0])
    if argv0.name == "palace" and argv0.exists():
        return str(argv0.resolve())
    return shutil.which("palace") or "palace"


def hook_command(palace_root: Path | None = None, executable: str | None = None) -> str:
    """The command line a hook runs: `palace hook claude-code`, with `--palace ROOT` when one is given."""
    parts = [executable or palace_executable(), *HOOK_ARGS]
    if palace_root is not None:
        parts += ["--palace", str(palace_root)]
    return " ".join(shlex.quote(part) for part in parts)


def is_ours(command) -> bool:
    """True for a command that runs a palace executable's `hook claude-code`."""
    try:
        words = shlex.split(command) if isinstance(command, str) else []
    except ValueError:
        return False
    return len(words) >= 3 and Path(words[0]).name == "palace" and tuple(words[1:3]) == HOOK_ARGS


def _load(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise PalaceError(f"{path}: cannot read it as JSON ({exc}); left as it is") from None
    except RecursionError:
        raise PalaceError(f"{path}: nested deeper than palace reads; left as it is") from None
    if not isinstance(data, dict):
        raise PalaceError(f"{path}: not a JSON object; left as it is")
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict) or not all(isinstance(v, list) for v in hooks.values()):
        raise PalaceError(f"{path}: `hooks` is not an object of event lists; left as it is")
    return data


def _save(path: Path, data: dict) -> None:
    """Write the settings atomically; through a symlink to the file it names (the link stays a link)."""
    target = Path(os.path.realpath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _runs(group, command: str) -> bool:
    """True when a hook group (an object with a list of hooks) holds this command."""
    entries = group.get("hooks") if isinstance(group, dict) else None
    return isinstance(entries, list) and any(isinstance(h, dict) and h.get("command") == command for h in entries)


def install(path: Path, command: str) -> SettingsChange:
    """Merge palace's hook into a settings file for every event it handles; returns what changed."""
    data = _load(path)
    hooks = data.setdefault("hooks", {})
    change = SettingsChange(str(path), command)
    for event in EVENTS:
        groups = hooks.setdefault(event, [])
        if any(_runs(group, command) for group in groups):
            change.kept.append(event)
            continue
        groups.append({"hooks": [{"type": "command", "command": command, "timeout": TIMEOUT_S}]})
        change.added.append(event)
    if change.added:
        _save(path, data)
    return change


def uninstall(path: Path) -> SettingsChange:
    """Remove palace's hooks from a settings file (and the groups and events they leave empty)."""
    change = SettingsChange(str(path))
    if not path.exists():
        return change
    data = _load(path)
    hooks = data.get("hooks", {})
    for event in list(hooks):
        kept_groups = []
        for group in hooks[event]:
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                kept_groups.append(group)
                continue
            entries = [h for h in group["hooks"] if not (isinstance(h, dict) and is_ours(h.get("command")))]
            if len(entries) < len(group["hooks"]):
                if event not in change.removed:
                    change.removed.append(event)
                if not entries:
                    continue
                group = {**group, "hooks": entries}
            kept_groups.append(group)
        if kept_groups:
            hooks[event] = kept_groups
        elif event in change.removed:
            del hooks[event]
    if "hooks" in data and not data["hooks"]:
        del data["hooks"]
    if change.removed:
        _save(path, data)
    return change
