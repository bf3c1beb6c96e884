"""Docs that are generated from code must match it."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_cli_reference_is_current():
    """docs/cli.md is what cog generates from --help now (run `make docs` to update)."""
    result = subprocess.run([sys.executable, "-m", "cogapp", "--check", "docs/cli.md"], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, "docs/cli.md is out of date: run `make docs`\n" + result.stdout + result.stderr


def test_core_imports_no_click_or_rich():
    """The core library is free of the faces' libraries."""
    code = ("import sys, palace_cli.search.retrieve, palace_cli.index.refresh, palace_cli.answers.verify, palace_cli.editing.lint, "
            "palace_cli.editing.authoring, palace_cli.search.wakeup, palace_cli.importers, palace_cli.core.smashin, "
            "palace_cli.importers.chats.writer, palace_cli.importers.chats.claude_code, palace_cli.importers.chats.chatgpt, "
            "palace_cli.importers.chats.claude_ai, palace_cli.importers.chats.locomo, palace_cli.importers.chats.chat_text; "
            "bad = [m for m in ('click', 'rich') if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, f"core imported {result.stdout.strip()} {result.stderr[-500:]}"


def test_lazy_command_map_matches_the_face_modules():
    """Every command a face module defines is in COMMAND_MODULES under its own module, and vice versa."""
    import importlib

    from palace_cli.cli import COMMAND_MODULES

    defined = {}
    for module_name in sorted(set(COMMAND_MODULES.values())):
        module = importlib.import_module(f"palace_cli.cli.{module_name}")
        for command in module.COMMANDS:
            defined[command.name] = module_name
    assert defined == COMMAND_MODULES
