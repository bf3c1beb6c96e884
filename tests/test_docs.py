"""Docs that are generated from code must match it."""

import re
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


# Docs show no machine's paths. Anywhere in README.md and docs/*.md: no /work, /root, /private, /var/folders or
# /mnt path, no home folder but the placeholder user `me` (/home/me, /Users/me), no absolute path into a .venv
# outside it (the neutral form is `.venv/bin/palace`), no `user-host` of the machine the docs were run on. In
# fenced blocks, /tmp/ only in what the reader types (`$ ` and `>>> ` lines and their `\` continuations, sh and
# python blocks): real output shows `~/kb`, `~/vault`.
MACHINE_ROOTS = ("/work/", "/root/", "/private/", "/var/folders/", "/mnt/", "/home/", "/Users/")
PLACEHOLDER_HOMES = ("/home/me/", "/Users/me/")
TYPED_BLOCKS = {"sh", "bash", "shell", "zsh", "python", "py"}
# file -> why /tmp/ may stay in its output
TMP_IN_OUTPUT = {"docs/cli.md": "generated from --help: the `--workdir /tmp/...` examples are commands to type"}
ABSOLUTE_PATH = re.compile(r"(?<![\w~.$/-])/[\w.@+-]+(?:/[\w.@+-]*)*")


def machine_paths(name: str, text: str) -> list[str]:
    """`file:line: path` for every path of a machine in a Markdown text (the rules above)."""
    import getpass
    import socket

    here = f"{getpass.getuser()}-{socket.gethostname().split('.')[0]}".lower()
    found, fence, info, typed_before = [], None, "", False
    for number, line in enumerate(text.splitlines(), 1):
        opening = re.match(r"^\s*(```+|~~~+)\s*([\w+-]*)", line)
        if opening and (fence is None or line.strip().startswith(fence)):
            fence, info = (opening.group(1), opening.group(2).lower()) if fence is None else (None, "")
            typed_before = False
            continue
        if here in line.lower() or here.replace("-", "@") in line.lower():
            found.append(f"{name}:{number}: {here} (this machine's user and host)")
        typed = info in TYPED_BLOCKS or line.lstrip().startswith(("$ ", ">>> ")) or typed_before
        typed_before = fence is not None and typed and line.rstrip().endswith("\\")
        for path in ABSOLUTE_PATH.findall(line):
            slashed = path + "/"
            if slashed.startswith(PLACEHOLDER_HOMES):
                continue
            if slashed.startswith(MACHINE_ROOTS) or "/.venv/" in slashed:
                found.append(f"{name}:{number}: {path}")
            elif fence is not None and path.startswith("/tmp/") and not typed and name not in TMP_IN_OUTPUT:
                found.append(f"{name}:{number}: {path} (in output: show ~/kb or ~/vault)")
    return found


def test_docs_show_no_machine_paths():
    """README.md and docs/*.md name no machine they were run on (rules above machine_paths)."""
    found = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        found += machine_paths(path.relative_to(REPO).as_posix(), path.read_text(encoding="utf-8"))
    assert not found, "neutral paths in docs (~/kb, ~/vault, .venv/bin/palace):\n" + "\n".join(found)


def test_machine_paths_are_found():
    """Each kind of machine path is caught, and the neutral forms pass."""
    import getpass
    import socket

    here = f"{getpass.getuser()}-{socket.gethostname().split('.')[0]}"
    text = "\n".join([
        "Run `/work/wt-x/.venv/bin/palace` once.",           # 1: a worktree's path in prose
        "```console",
        "$ palace init /tmp/kb && cd /tmp/kb",                # typed: fine
        "Created a palace in /tmp/tour/kb.",                  # 4: output
        "Created a palace in ~/kb.",                          # neutral
        f"logged to reviews/{here}.jsonl",                    # 6: this machine
        "$ palace bench --workdir \\",
        "    /tmp/b",                                         # a continued command: fine
        "hook /opt/x/.venv/bin/palace added",                 # 9: an absolute .venv
        "```",
        "```sh",
        "palace --palace /tmp/skill bench ask",               # an sh block: fine
        "```",
        "```json",
        '{"command": "/Users/me/.venvs/palace/bin/palace", "cwd": "/home/ann/kb"}',  # 15: a real user's home
        "```",
        "Adopted in /root/vault.",                            # 17
    ])
    found = [f.split(":")[1] for f in machine_paths("x.md", text)]
    assert found == ["1", "4", "6", "9", "15", "17"], machine_paths("x.md", text)
