"""`palace init`: a plan that names every file it will create or change, checked whole before anything is written,
then done in an order a rerun can finish (palace.toml last)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from palace_cli.core.config import CONFIG_NAME
from palace_cli.core.disk import atomic_write
from palace_cli.core.walk import FolderRules, walk_files
from palace_cli.core.layout import CACHE_DIR, INDEX_DIR, MEMORIES, REVIEWS, ROOT_INDEX, Scan, within
from palace_cli.editing.gitsetup import (DRIVER, IGNORED, GitSetup, append_lines, apply_git, attribute_lines,
                                         missing_lines, plan_git, work_tree_top)
from palace_cli.errors import PalaceError
from palace_cli.palace import Palace

# Where an adopted vault's generated INDEX.md and index/<domain>.md go: a dot-folder, which Obsidian, zk and
# Foam's graph do not read as notes. palace.toml's [notes] index_folder may name a visible one; a palace whose
# palace.toml names another place (`_palace`, made before this) keeps it.
ADOPTED_INDEX_FOLDER = ".palace-index"

ADOPT_SETTINGS = """
[notes]
# This folder already held Markdown: every .md file is a note where it lies, any depth, any name
# (docs/obsidian.md). Globs are relative to this folder and compared without case; folders whose name
# starts with "." (.obsidian/, .git/), palace's own files and conversations/ are never notes.
include = ["**/*.md"]
exclude = ["templates/**", "_templates/**"]
# domains = "folder"        # a note's domain is its top folder; "single": one domain for every note
# root_domain = "root"      # the domain of the notes at the top
# inbox = "inbox"           # the folder `palace add "a quick thought"` writes into
# template = ["Cards/**"]   # notes palace may write its template into (Image, anchor, verify token)
index_folder = "{index_folder}"  # palace's generated index files: a dot-folder vault tools do not read as notes
"""


def template_text(name: str) -> str:
    """A file from palace_cli/templates."""
    return resources.files("palace_cli").joinpath("templates", name).read_text(encoding="utf-8")


@dataclass
class Step:
    """One file or setting init creates or changes: `path` as shown (relative to the palace; a folder ends in
    `/`), what it is, and whether git sees it (a file in the work tree that is not ignored)."""

    path: str
    what: str
    tracked: bool = True
    new: bool = True


@dataclass
class InitPlan:
    """What `palace init` will do, checked and not yet done."""

    root: Path
    adopt: bool
    settings: str
    folders: list[str]
    git: str  # "init" (make a repository), "setup" (set one up), "" (leave git alone, or there is none)
    git_setup: GitSetup | None
    files: GitSetup  # the .gitignore and .gitattributes lines (written even outside a repository)
    steps: list[Step] = field(default_factory=list)


@dataclass
class Init:
    """What `palace init` did: the root, whether it adopted notes already there (how many), what it wrote."""

    root: Path
    adopted: bool = False
    notes: int = 0
    git: str = ""  # "initialised", "set up" (merge driver and hook), or "" (no git, or not a repository)
    written: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)


def init_palace(directory: Path, name: str | None = None) -> Path:
    """Create a palace in directory, adopting the Markdown already there (see `init`); returns the root."""
    return init(directory, name).root


def init(directory: Path, name: str | None = None, git_setup: bool = True) -> Init:
    """Create a palace in directory (see plan_init): plan, then do."""
    return apply_init(plan_init(directory, name, git_setup))


def plan_init(directory: Path, name: str | None = None, git_setup: bool = True) -> InitPlan:
    """Plan a palace in directory, changing nothing. An empty folder gets the memories/ layout (and `git init`
    when it is in no repository); a folder that already holds Markdown is adopted where it lies: palace.toml
    with a [notes] table, reviews/, the generated index in a dot-folder, the cache, and (in a repository) its
    .gitignore and .gitattributes lines, the merge driver and its hook. `git_setup=False` leaves git alone.

    PalaceError, in one line, when something in the way would leave a palace half-made or write outside it
    through a link (a `reviews` file, a `.gitignore` folder, a folder linked out)."""
    root = Path(directory).expanduser().resolve()
    if os.path.lexists(root / CONFIG_NAME):
        raise PalaceError(f"{root} is already a palace ({CONFIG_NAME} exists)")
    if root.exists() and not root.is_dir():
        raise PalaceError(f"{root} is a file, not a directory")
    adopt = root.is_dir() and _holds_markdown(root)
    title = name or root.name.replace("-", " ").replace("_", " ").title()
    toml_name = json.dumps(title, ensure_ascii=False)[1:-1]  # a JSON string body is a valid TOML basic string
    settings = template_text("palace.toml").replace("{name}", toml_name)
    if adopt:
        settings += ADOPT_SETTINGS.replace("{index_folder}", ADOPTED_INDEX_FOLDER)
        root_index, index_dir = f"{ADOPTED_INDEX_FOLDER}/{ROOT_INDEX}", f"{ADOPTED_INDEX_FOLDER}/{INDEX_DIR}"
    else:
        root_index, index_dir = ROOT_INDEX, INDEX_DIR
    owned = [REVIEWS, CACHE_DIR] + ([ADOPTED_INDEX_FOLDER] if adopt else [MEMORIES, INDEX_DIR])
    for folder in owned:
        _check_folder(root, folder)
    probe = root
    while not probe.is_dir():  # a folder not made yet is in the repository its nearest existing parent is in
        probe = probe.parent
    top = work_tree_top(probe)
    git = "" if not git_setup or not shutil.which("git") else "setup" if top else "" if adopt else "init"
    files = GitSetup()
    if git_setup:
        inside = top or root
        files = GitSetup(attributes=missing_lines(root / ".gitattributes", attribute_lines(root_index, index_dir),
                                                  inside),
                         ignored=missing_lines(root / ".gitignore", IGNORED, inside))
    setup = plan_git(root, root_index, index_dir, top=top) if git == "setup" else None
    if setup is not None:
        setup.attributes, setup.ignored = [], []  # `files` holds them: written once, in or out of a repository
    plan = InitPlan(root, adopt, settings, [REVIEWS] if adopt else [MEMORIES, INDEX_DIR, REVIEWS], git, setup, files)
    plan.steps = _steps(plan, root_index, index_dir, top)
    return plan


def _check_folder(root: Path, folder: str) -> None:
    """A folder palace writes into must be a folder (or nothing yet) and, through any link, stay in the palace."""
    path = root / folder
    if not os.path.lexists(path):
        return
    real = os.path.realpath(path)
    if os.path.islink(path) and not within(real, str(root)):
        raise PalaceError(f"{folder} is a link to {real}, outside the palace: palace would write there; make it a "
                          "folder inside the palace (nothing was written)")
    if not os.path.isdir(real):
        raise PalaceError(f"{folder} is a file, not a folder: palace keeps its own files in a folder of that name; "
                          "rename the file (nothing was written)")


def _steps(plan: InitPlan, root_index: str, index_dir: str, top: Path | None) -> list[Step]:
    """Every file and setting the plan creates or changes, in the order they are done."""
    root = plan.root
    steps = []
    for folder in plan.folders:
        if not (root / folder).is_dir() or not any((root / folder).iterdir()):
            steps.append(Step(f"{folder}/.gitkeep", _FOLDER_WHAT[folder]))
    if plan.files.ignored:
        steps.append(Step(".gitignore", "+ " + ", ".join(plan.files.ignored), new=not (root / ".gitignore").exists()))
    if plan.files.attributes:
        steps.append(Step(".gitattributes", "+ " + ", ".join(plan.files.attributes),
                          new=not (root / ".gitattributes").exists()))
    if plan.git == "init":
        steps.append(Step(".git/", "a new git repository (git init)", tracked=False))
    hooks = []
    if plan.git == "init":
        steps.append(Step(".git/config", f"merge.{DRIVER}.name, merge.{DRIVER}.driver: the merge driver of the "
                                         "generated files (this clone only)", tracked=False, new=False))
        hooks = [str(root / ".git" / "hooks" / "pre-merge-commit")]
    elif plan.git_setup is not None:
        if plan.git_setup.config:
            config = Path(top or root) / ".git" / "config"
            steps.append(Step(_shown(root, config), ", ".join(plan.git_setup.config) + ": the merge driver of the "
                              "generated files (this clone only)", tracked=False, new=False))
        hooks = plan.git_setup.hooks
    for hook in hooks:
        steps.append(Step(_shown(root, Path(hook)), "regenerates the index files after a merge (this clone only)",
                          tracked=_in_work_tree(Path(hook), top)))
    steps.append(Step(CONFIG_NAME, "the palace's settings" + (": every .md file is a note where it lies" if plan.adopt
                                                              else "")))
    generated = root_index.rsplit("/", 1)[0] + "/" if plan.adopt else f"{root_index}, {index_dir}/"
    steps.append(Step(generated, f"the generated index ({ROOT_INDEX}, {INDEX_DIR}/<domain>.md)"
                      + (", apart from your notes" if plan.adopt else "")))
    ignored = f"{CACHE_DIR}/" in _present_lines(root / ".gitignore") | set(plan.files.ignored)
    steps.append(Step(f"{CACHE_DIR}/", "the cache: search index, vectors" + (" (ignored by git)" if ignored else ""),
                      tracked=not ignored and (top is not None or plan.git == "init")))
    return steps


_FOLDER_WHAT = {REVIEWS: "the study log's folder", MEMORIES: "the memories' folder (memories/<domain>/<id>.md)",
                INDEX_DIR: "the generated domain index files' folder"}


def _present_lines(path: Path) -> set[str]:
    try:
        return {line.strip() for line in path.read_bytes().decode("utf-8", "replace").splitlines()}
    except OSError:
        return set()


def _shown(root: Path, path: Path) -> str:
    """A path relative to the palace when it is inside it, else as it is."""
    return os.path.relpath(path, root) if within(os.path.realpath(path), str(root)) else str(path)


def _in_work_tree(path: Path, top: Path | None) -> bool:
    """True when a hook file lies in the work tree, outside .git/ (core.hooksPath naming a tracked folder)."""
    if top is None:
        return False
    real = os.path.realpath(path)
    return within(real, str(top)) and not within(real, str(top / ".git"))


def apply_init(plan: InitPlan) -> Init:
    """Do what plan_init planned: folders, git files and settings, then palace.toml (last, atomically: a run
    stopped before it leaves no palace, so a rerun starts again), then the first refresh."""
    root = plan.root
    root.mkdir(parents=True, exist_ok=True)
    done = Init(root, plan.adopt, steps=plan.steps)
    for folder in plan.folders:
        (root / folder).mkdir(exist_ok=True)
        if not any((root / folder).iterdir()):
            (root / folder / ".gitkeep").touch()
            done.written.append(f"{folder}/.gitkeep")
    for path, lines in ((".gitignore", plan.files.ignored), (".gitattributes", plan.files.attributes)):
        append_lines(root / path, lines)
        done.written += [path] * bool(lines)
    if plan.git == "init":
        subprocess.run(["git", "init", "-q"], cwd=root, check=False, capture_output=True)
        done.git = "initialised"
        apply_git(root, plan_git(root, ROOT_INDEX, INDEX_DIR))
    elif plan.git == "setup" and plan.git_setup is not None:
        apply_git(root, plan.git_setup)
        done.git = "set up"
    atomic_write(root / CONFIG_NAME, plan.settings)
    done.written.insert(0, CONFIG_NAME)
    palace = Palace(root)
    if plan.adopt:
        report = palace.refresh(embedder=None)  # reads every note (and writes the generated index files)
        done.notes = report.unchanged + len(report.added) + len(report.updated)
        done.written += sorted(report.index_files)
    else:
        from palace_cli.index.files import write_index_files

        done.written += write_index_files(palace.site, Scan()).written  # a new palace holds no memories yet
    return done


def _holds_markdown(root: Path) -> bool:
    """True when a folder already holds a Markdown file the one walk finds (hidden and SKIPPED_DIRS folders left
    out): a vault to adopt."""
    return bool(walk_files(root, FolderRules((".md",), exact_case=True), limit=1))
