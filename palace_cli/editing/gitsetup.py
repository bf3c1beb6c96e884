"""Git without conflicts in what palace generates: attributes, the merge driver, and two hooks.

- `reviews/*.jsonl merge=union`: the review logs are append-only, so two machines' lines are both kept.
- `INDEX.md` and `index/*.md merge=palace-index`: a merge driver (`palace git merge-driver`, set in the
  repository's config, which git never copies on clone) merges the generated files line by line
  (`index/merge.py`), so they never conflict.
- A `pre-merge-commit` hook regenerates them from the merged notes. When that changes anything (the
  line merge cannot order two lines both branches added at the same place, or merge two edits of one
  memory) it stages the files and stops the merge, since git commits a merge from the tree it merged
  and not from what a hook staged; `git commit --no-edit` then finishes it with exact files.
  `--hook` adds a `pre-commit` hook running `palace index --check`.

Git starts drivers and hooks with its own environment, where `palace` may not be on PATH (a GUI client,
another shell): each command tries `palace` on PATH, then the executable that ran `palace git setup`;
without either, the driver falls back to git's union merge and the hooks say what to run by hand.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from palace_cli.core.disk import atomic_write
from palace_cli.core.layout import REVIEWS, within
from palace_cli.core.notefile import parse_note
from palace_cli.core.notes import Memory
from palace_cli.errors import NoteError, PalaceError
from palace_cli.palace import Palace

DRIVER = "palace-index"
# What palace generates and never commits: its cache and the temp files of a writer killed mid-write (swept by
# the next command). Nothing else: a vault's own settings (.obsidian/) are the owner's to track or not.
IGNORED = (".palace/", ".*.tmp")


def attributes(palace: Palace) -> tuple[str, ...]:
    """The .gitattributes lines: the review logs merge by union, the generated index files (wherever
    [notes] index_folder puts them) by the merge driver."""
    return attribute_lines(palace.root_index, palace.index_dir)


def attribute_lines(root_index: str, index_dir: str) -> tuple[str, ...]:
    """The .gitattributes lines for generated files at these paths (relative to the palace root)."""
    return (f"{REVIEWS}/*.jsonl merge=union", f"{root_index} merge={DRIVER}", f"{index_dir}/*.md merge={DRIVER}")


HOOK_MARK = "# installed by `palace git setup`"


@dataclass
class GitSetup:
    """What `palace git setup` changes (planned by plan_git, done by apply_git): lines added to files, config set,
    hooks written or left alone (with why)."""

    attributes: list[str] = field(default_factory=list)  # lines added to .gitattributes
    ignored: list[str] = field(default_factory=list)     # lines added to .gitignore
    config: dict[str, str] = field(default_factory=dict)
    hooks: list[str] = field(default_factory=list)       # hook files written
    skipped: list[str] = field(default_factory=list)     # hooks left alone, with the reason
    hook_texts: dict[str, str] = field(default_factory=dict, repr=False)  # hook path -> its text

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {"attributes": self.attributes, "ignored": self.ignored, "config": self.config, "hooks": self.hooks,
                "skipped": self.skipped}


def _git(root: Path, *args: str, check: bool = True) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    except FileNotFoundError:
        raise PalaceError("git is not installed") from None
    if check and done.returncode != 0:
        raise PalaceError(f"git {' '.join(args)}: {done.stderr.strip() or 'failed'}")
    return done.stdout.strip()


def work_tree_top(folder: Path) -> Path | None:
    """The top of the git work tree holding folder, or None when it is in none (or git is not installed)."""
    if not shutil.which("git"):
        return None
    top = _git(folder, "rev-parse", "--show-toplevel", check=False)
    return Path(top).resolve() if top else None


def repository_top(palace: Palace) -> Path | None:
    """The top of the git work tree holding the palace, or None when it is not in one."""
    return work_tree_top(palace.root)


def _palace_commands() -> list[str]:
    """`palace` on PATH first, then the executable running now (a virtualenv git may not have on its PATH)."""
    candidates = ["palace"]
    here = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
    for path in (here, Path(sys.executable).parent / "palace"):
        if path is not None and path.name == "palace" and path.is_file() and os.access(path, os.X_OK):
            candidates.append(str(path))
            break
    return candidates


def _find_palace_sh() -> str:
    """A shell line setting $PALACE to the first palace command that exists (empty when none does)."""
    words = " ".join(shlex.quote(c) for c in _palace_commands())
    return (f'PALACE=""; for candidate in {words}; do if command -v "$candidate" >/dev/null 2>&1; '
            'then PALACE="$candidate"; break; fi; done')


def driver_command() -> str:
    """The merge driver as git runs it (through sh, %O %A %B %P substituted): palace, else git's union merge."""
    script = (_find_palace_sh() + '; if [ -n "$PALACE" ]; then exec "$PALACE" git merge-driver "$1" "$2" "$3" "$4"; '
              'fi; echo "palace not found: $4 merged by union; run palace index to regenerate it" >&2; '
              'exec git merge-file --union "$2" "$1" "$3"')
    return f"sh -c {shlex.quote(script)} palace-merge %O %A %B %P"


def _hook(name: str, body: str) -> str:
    return f"#!/bin/sh\n{HOOK_MARK} ({name})\n{_find_palace_sh()}\n{body}"


def _merge_hook(relroot: str) -> str:
    return _hook("pre-merge-commit",
                 'if [ -z "$PALACE" ]; then\n'
                 f'  echo "palace not found: run \'palace --palace {relroot} index\' and commit INDEX.md and index/" >&2\n'
                 '  exit 0\nfi\n'
                 f'exec "$PALACE" --palace {shlex.quote(relroot)} git regenerate --merge\n')


def _check_hook(relroot: str) -> str:
    return _hook("pre-commit",
                 'if [ -z "$PALACE" ]; then\n'
                 '  echo "palace not found: the generated index files were not checked" >&2\n  exit 0\nfi\n'
                 f'exec "$PALACE" --palace {shlex.quote(relroot)} index --check\n')


def _plan_hook(top: Path, name: str, text: str, report: GitSetup) -> None:
    """Plan one hook: written when missing or palace's own and different; a hook of someone else's, or a hooks
    folder outside the repository (core.hooksPath shared by every repository), is left alone with a reason."""
    hooks = Path(_git(top, "rev-parse", "--git-path", "hooks"))
    folder = hooks if hooks.is_absolute() else top / hooks
    common = Path(_git(top, "rev-parse", "--git-common-dir"))
    common = common if common.is_absolute() else top / common
    line = text.strip().splitlines()[-1]
    if not any(within(os.path.realpath(folder), os.path.realpath(base)) for base in (top, common)):
        report.skipped.append(f"{name}: the hooks folder {folder} is outside this repository (core.hooksPath); "
                              f"palace writes nothing there; add this line to its {name}: {line}")
        return
    target = Path(os.path.realpath(folder)) / name
    if os.path.lexists(target):
        try:
            current = target.read_text(encoding="utf-8", errors="replace")
        except OSError:
            current = ""
        if HOOK_MARK not in current:
            report.skipped.append(f"{name}: {target} exists and is not palace's; add this line to it: {line}")
            return
        if current == text:
            return
    report.hooks.append(str(target))
    report.hook_texts[str(target)] = text


def missing_lines(path: Path, lines: tuple[str, ...] | list[str], inside: Path) -> list[str]:
    """The lines a file (.gitignore, .gitattributes) lacks; PalaceError in one line when palace could not add
    them: the name is a folder, a link out of `inside`, or unreadable. Any bytes are read (not only UTF-8)."""
    shown = path.name
    real = os.path.realpath(path)
    if os.path.islink(path) and not within(real, os.path.realpath(inside)):
        raise PalaceError(f"{shown} is a link to {real}, outside {inside}: palace writes nothing through it; add "
                          "these lines yourself, or run init with --no-git-setup (nothing was written): "
                          + ", ".join(lines))
    if os.path.isdir(real):
        raise PalaceError(f"{shown} is a folder, not a file: git reads no rules from it; move it away, or run "
                          "init with --no-git-setup (nothing was written)")
    try:
        existing = Path(real).read_bytes() if os.path.lexists(real) else b""
    except OSError as exc:
        raise PalaceError(f"{shown}: cannot read it ({exc.strerror}); run with --no-git-setup to leave git alone") \
            from None
    have = {line.strip() for line in existing.decode("utf-8", "surrogateescape").splitlines()}
    return [line for line in lines if line.strip() not in have]


def append_lines(path: Path, lines: list[str]) -> None:
    """Append lines to a file as they are (its bytes kept, its line ends followed); through a symlink, the file it
    names is written and the link stays."""
    if not lines:
        return
    real = Path(os.path.realpath(path))
    existing = real.read_bytes() if real.exists() else b""
    end = b"\r\n" if b"\r\n" in existing else b"\n"
    lead = b"" if not existing or existing.endswith(b"\n") else end
    atomic_write(real, existing + lead + b"".join(line.encode("utf-8") + end for line in lines))


def driver_settings() -> dict[str, str]:
    """The repository config the merge driver needs."""
    return {f"merge.{DRIVER}.name": "palace: merge generated index files line by line (regenerated after)",
            f"merge.{DRIVER}.driver": driver_command()}


def plan_git(root: Path, root_index: str, index_dir: str, hook: bool = False, top: Path | None = None) -> GitSetup:
    """What setup_git would change for the palace at root (its generated files at root_index and index_dir), changing
    nothing (`top`: the work tree's top, when known); PalaceError when root is in no repository or a file it must
    change cannot be changed."""
    top = top or work_tree_top(root)
    if top is None:
        raise PalaceError(f"{root} is not in a git repository; run `git init` first")
    report = GitSetup(attributes=missing_lines(root / ".gitattributes", attribute_lines(root_index, index_dir), top),
                      ignored=missing_lines(root / ".gitignore", IGNORED, top))
    for key, value in driver_settings().items():
        if _git(top, "config", "--local", "--get", key, check=False) != value:
            report.config[key] = value
    relroot = os.path.relpath(root, top)
    _plan_hook(top, "pre-merge-commit", _merge_hook(relroot), report)
    if hook:
        _plan_hook(top, "pre-commit", _check_hook(relroot), report)
    return report


def apply_git(root: Path, report: GitSetup) -> GitSetup:
    """Make the changes plan_git planned; returns the report."""
    append_lines(root / ".gitattributes", report.attributes)
    append_lines(root / ".gitignore", report.ignored)
    top = work_tree_top(root) or root
    for key, value in report.config.items():
        _git(top, "config", "--local", key, value)
    for target, text in report.hook_texts.items():
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        atomic_write(Path(target), text)
        Path(target).chmod(0o755)
    return report


def setup_git(palace: Palace, hook: bool = False) -> GitSetup:
    """Make merges of this palace conflict-free: attributes, the merge driver in the repository's config, the
    pre-merge-commit hook that regenerates the index files, and with `hook` a pre-commit check. Idempotent."""
    return apply_git(palace.root, plan_git(palace.root, palace.root_index, palace.index_dir, hook))


def stage(palace: Palace, paths: list[str]) -> None:
    """`git add -A` these palace paths (written or removed), when the palace is in a git work tree."""
    if paths and repository_top(palace) is not None:
        _git(palace.root, "add", "-A", "--", *paths)


def merge_changes(palace: Palace, merging: bool = False) -> tuple[set[str], list[Memory]]:
    """While a merge is in progress: the notes it adds or changes against HEAD (palace-relative paths) and the
    notes it removes (as HEAD had them). Empty when no merge is in progress or git is not there.

    `merging`: the caller knows (git's pre-merge-commit hook runs before git writes MERGE_HEAD)."""
    top = repository_top(palace)
    if top is None or not (merging or _git(top, "rev-parse", "-q", "--verify", "MERGE_HEAD", check=False)):
        return set(), []
    listed = _git(top, "diff", "--cached", "--name-status", "--no-renames", "-z", "HEAD", "--", check=False)
    fields = listed.split("\0")
    changed, removed = set(), []
    for status, path in zip(fields[0::2], fields[1::2]):
        relpath = os.path.relpath(top / path, palace.root).replace(os.sep, "/")
        if not relpath.endswith(".md") or relpath.startswith("../"):
            continue
        if status != "D":
            changed.add(relpath)
            continue
        text = _git(top, "show", f"HEAD:{path}", check=False)
        try:
            removed.append(parse_note(text + "\n", relpath, palace.domain_of(relpath)))
        except NoteError:
            continue  # an unreadable note named nothing a link could reach
    return changed, removed
