"""Hostile disks, for real: a read-only palace (a read-only bind mount), a full disk (a small tmpfs), and the
temp files a killed writer leaves. Mounts happen in an unprivileged user and mount namespace (`unshare -rm`),
so no root is needed and nothing outside the test sees them."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import EXAMPLE, REPO, copy_palace, needs_namespace

CLI = [sys.executable, "-c", "from palace_cli.cli import main; main()"]


def env() -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO), PALACE_DIR="")


def palace_run(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=root, capture_output=True, text=True, env=env(), timeout=300)


def in_namespace(script: str, *args: str) -> subprocess.CompletedProcess:
    """Run a Python script as root of a fresh user and mount namespace (its mounts vanish with it)."""
    return subprocess.run(["unshare", "-rm", sys.executable, "-c", script, *args], capture_output=True, text=True,
                          env=env(), timeout=600)


def tree_digest(root: Path) -> dict[str, str]:
    """path -> sha256 of every file under root except the cache."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and ".palace" not in path.parts and ".git" not in path.parts:
            out[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def temp_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob(".*.tmp"))


# ---- a read-only palace ----------------------------------------------------------------------------------

READ_COMMANDS = [
    ["list", "--json"],
    ["show", "two-phase-commit", "--json"],
    ["search", "coordinator crash", "--mode", "lexical", "--json"],
    ["recall", "coordinator crash", "--json"],
    ["due", "--json"],
    ["stats", "--json"],
    ["index", "--check"],
    ["verify", "--response", "{answer}", "--context", "{context}", "--json"],
]

RUN_READ_ONLY = """
import json, subprocess, sys
root, commands = sys.argv[1], json.loads(sys.argv[2])
subprocess.run(["mount", "--bind", root, root], check=True)
subprocess.run(["mount", "-o", "remount,bind,ro", root, root], check=True)
out = []
for args in commands:
    done = subprocess.run([sys.executable, "-c", "from palace_cli.cli import main; main()", *args], cwd=root,
                          capture_output=True, text=True)
    out.append({"args": args, "rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr})
print(json.dumps(out))
"""


def comparable(args: list[str], stdout: str):
    """What must be equal between a read-only run and a writable one (clock readings left out)."""
    if "--json" not in args:
        return stdout
    data = json.loads(stdout)
    if isinstance(data, dict):
        for key in ("elapsed_ms", "now", "timings"):
            data.pop(key, None)
    return data


@pytest.mark.slow
@needs_namespace
@pytest.mark.parametrize("cache", ["none", "built"])
def test_a_read_only_palace_answers_every_read_command(tmp_path, cache):
    """Every read command on a read-only mount answers as on a writable copy, says once where its cache went,
    and `add` is one line leaving nothing (the cache the palace had seeds the one elsewhere)."""
    writable = copy_palace(EXAMPLE, tmp_path / "writable")
    readonly = copy_palace(EXAMPLE, tmp_path / "readonly")
    recall = palace_run(writable, "recall", "coordinator crash", "--json")
    (tmp_path / "context.json").write_text(recall.stdout)
    token = json.loads(recall.stdout)["memories"][0]["verify"]
    (tmp_path / "answer.txt").write_text(f"It blocks ({token}).\n")
    commands = [[a.format(answer=tmp_path / "answer.txt", context=tmp_path / "context.json") for a in c]
                for c in READ_COMMANDS]
    if cache == "built":
        assert palace_run(readonly, "index").returncode == 0
    before = tree_digest(readonly)
    done = in_namespace(RUN_READ_ONLY, str(readonly), json.dumps(commands + [["add", "A new idea", "--domain",
                                                                                  "storage-engines", "--image",
                                                                                  "A lantern on a unicycle."]]))
    assert done.returncode == 0, done.stderr
    runs = json.loads(done.stdout)
    for run in runs[:-1]:
        expected = palace_run(writable, *run["args"])
        assert "Traceback" not in run["stderr"], run
        assert run["rc"] == expected.returncode, run
        assert comparable(run["args"], run["stdout"]) == comparable(run["args"], expected.stdout), run["args"]
        notices = [line for line in run["stderr"].splitlines() if "cannot write the cache" in line]
        assert len(notices) == 1, run
        assert "Read-only file system" in notices[0]
    add = runs[-1]
    assert add["rc"] == 1 and add["stdout"] == ""
    errors = [line for line in add["stderr"].splitlines() if "cannot write the cache" not in line]
    assert errors == [f"palace: cannot write {readonly}/memories/storage-engines/a-new-idea.md: Read-only file "
                      "system; nothing was written"]
    assert tree_digest(readonly) == before
    assert temp_files(readonly) == []


@pytest.mark.slow
@needs_namespace
def test_the_cache_elsewhere_is_seeded_from_the_palace_cache_once(tmp_path):
    """A read-only palace with a built cache: the cache elsewhere starts as a copy (no rebuild), then is kept."""
    readonly = copy_palace(EXAMPLE, tmp_path / "readonly")
    assert palace_run(readonly, "index").returncode == 0
    commands = [["index", "--json"], ["index", "--json"]]
    done = in_namespace(RUN_READ_ONLY, str(readonly), json.dumps(commands))
    first, second = json.loads(done.stdout)
    assert first["rc"] == 0, first
    assert json.loads(first["stdout"])["rebuilt_lexical"] is False  # the seed's whoosh index was used as it was
    assert json.loads(first["stdout"])["added"] == []
    assert json.loads(second["stdout"])["added"] == []
    caches = list((Path(os.environ["PALACE_HOME"]) / "cache" / "palaces").iterdir())
    assert len(caches) == 1 and (caches[0] / "notes.sqlite").is_file()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through chmod a-w; the namespace tests cover read-only")
def test_a_palace_without_write_permission_answers_from_a_cache_elsewhere(tmp_path):
    root = copy_palace(EXAMPLE, tmp_path / "p")
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    try:
        done = palace_run(root, "search", "coordinator", "--mode", "lexical", "--json")
        assert done.returncode == 0 and json.loads(done.stdout)["hits"]
        assert done.stderr.count("cannot write the cache") == 1
        add = palace_run(root, "add", "A new idea", "--domain", "storage-engines", "--image", "A lantern on a unicycle.")
        assert add.returncode == 1 and "Permission denied; nothing was written" in add.stderr
        assert "Traceback" not in add.stderr
    finally:
        for path in [root, *root.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)


# ---- a full disk -------------------------------------------------------------------------------------------

FULL_DISK = r"""
import json, os, shutil, subprocess, sys
mount_point, template, frees, edits = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", mount_point], check=True)
cli = [sys.executable, "-c", "from palace_cli.cli import main; main()"]

def run(root, *args):
    done = subprocess.run([*cli, *args], cwd=root, capture_output=True, text=True)
    return {"args": list(args), "rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr}

def fill(free):
    reserve = os.path.join(mount_point, "reserve")
    with open(reserve, "wb") as handle:
        handle.write(b"r" * free)
    fd = os.open(os.path.join(mount_point, "fill"), os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"f" * 4096):
            pass
    except OSError:
        pass
    os.close(fd)
    os.unlink(reserve)

out = []
for free in frees:
    root = os.path.join(mount_point, "p")
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(template, root)
    for relpath, text in edits.items():
        path = os.path.join(root, relpath)
        if text is None:
            os.unlink(path)
        else:
            with open(path, encoding="utf-8") as handle:
                note = handle.read()
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(note.replace("\n## Links", f"\n{text}\n\n## Links", 1))
    fill(free)
    step = {"free": free, "search": run(root, "search", "zebrafish coordinator", "--mode", "lexical", "--json"),
            "add": run(root, "add", "A new idea", "--domain", "storage-engines", "--image", "lantern " * 500)}
    step["left"] = sorted(os.path.relpath(os.path.join(d, n), root) for d, _, names in os.walk(root)
                          for n in names if n.endswith(".tmp") and ".palace" not in d)
    os.unlink(os.path.join(mount_point, "fill"))
    if step["add"]["rc"] == 0:  # the note it added goes again: what is left must read as the fresh build
        os.unlink(os.path.join(root, "memories", "storage-engines", "a-new-idea.md"))
    step["after"] = run(root, "search", "zebrafish coordinator", "--mode", "lexical", "--json")
    step["check"] = run(root, "index", "--check")
    step["notes"] = {relpath: open(os.path.join(root, relpath), "rb").read().hex() for relpath in edits
                     if edits[relpath] is not None}
    out.append(step)
print(json.dumps(out))
"""
DISK_FULL_LINE = ("No space left on device", "database or disk is full")


@pytest.mark.slow
@needs_namespace
def test_a_full_disk_is_one_clear_line_and_loses_nothing(tmp_path):
    """A palace on a real 6 MB tmpfs, its cache built, three notes edited and one deleted, the disk then filled
    to 0 B-1 MB free: `search` and `add` either work or say in one line that the disk is full; no temp file is
    left, no note changes; with room again, `search` gives what a fresh build gives and nothing is stale."""
    template = copy_palace(EXAMPLE, tmp_path / "template", git=False)
    assert palace_run(template, "index").returncode == 0
    edits = {"memories/storage-engines/b-tree.md": "A zebrafish swims by.",
             "memories/storage-engines/write-skew.md": "zebrafish zebrafish",
             "memories/consensus-coordination/two-phase-commit.md": "The zebrafish coordinator.",
             "memories/storage-engines/snapshot-isolation.md": None}
    fresh = copy_palace(template, tmp_path / "fresh", git=False)
    for relpath, text in edits.items():
        if text is None:
            (fresh / relpath).unlink()
        else:
            note = (fresh / relpath).read_text(encoding="utf-8")
            (fresh / relpath).write_text(note.replace("\n## Links", f"\n{text}\n\n## Links", 1), encoding="utf-8")
    args = ["search", "zebrafish coordinator", "--mode", "lexical", "--json"]
    expected = comparable(args, palace_run(fresh, *args).stdout)
    assert {"two-phase-commit", "write-skew", "b-tree"} <= {hit["id"] for hit in expected["hits"]}
    mount_point = tmp_path / "m"
    mount_point.mkdir()
    frees = [0, 8_000, 64_000, 256_000, 1_000_000]
    done = in_namespace(FULL_DISK, str(mount_point), str(template), json.dumps(frees), json.dumps(edits))
    assert done.returncode == 0, done.stderr
    failures = 0
    for step in json.loads(done.stdout):
        for name in ("search", "add"):
            run = step[name]
            assert "Traceback" not in run["stderr"], step
            if run["rc"] != 0:
                failures += 1
                assert run["rc"] == 1 and run["stdout"] == "", step
                lines = run["stderr"].splitlines()
                assert len(lines) == 1 and any(what in lines[0] for what in DISK_FULL_LINE), step
        if step["search"]["rc"] == 0:
            assert comparable(args, step["search"]["stdout"]) == expected
        assert step["left"] == [], step
        assert step["after"]["rc"] == 0 and comparable(args, step["after"]["stdout"]) == expected, step
        assert step["check"]["rc"] == 0, step
        for relpath, hexed in step["notes"].items():
            assert bytes.fromhex(hexed) == (fresh / relpath).read_bytes()
    assert failures >= 2  # the fuller disks did refuse (the test would prove nothing otherwise)


# ---- temp files a killed writer left ---------------------------------------------------------------------

KILLED_IMPORT = """
import os, signal, sys
from palace_cli.cli import main
kill_at, calls = int(sys.argv.pop()), [0]
def dying(real):
    def landing(src, dst, *args, **kwargs):
        if str(dst).endswith(".md") and "/memories/" in str(dst):
            calls[0] += 1
            if calls[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)  # between the temp file's fsync and its rename (or link)
        return real(src, dst, *args, **kwargs)
    return landing
os.replace, os.link = dying(os.replace), dying(os.link)  # a new note lands by link (never over a file)
main()
"""


def dead_pid() -> int:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(child.stdout)


def make_sources(folder: Path, count: int) -> Path:
    folder.mkdir()
    for i in range(count):
        (folder / f"idea-{i:02d}.md").write_text(f"# Idea {i}\n\nThe idea number {i} about lanterns{i}.\n")
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", [1, 7])
def test_a_killed_import_leaves_nothing_the_next_command_does_not_repair(tmp_path, kill_at):
    """A real import killed between writing a note's temp file and renaming it: the temp file is ignored by git
    (palace init's .gitignore), the next command sweeps it, and the palace then reads as a fresh build."""
    root = tmp_path / "p"
    assert palace_run(tmp_path, "init", str(root)).returncode == 0
    sources = make_sources(tmp_path / "sources", 12)
    killed = subprocess.run([sys.executable, "-c", KILLED_IMPORT, "import", str(sources), "--format", "markdown",
                             "--domain", "ideas", str(kill_at)], cwd=root, capture_output=True, text=True, env=env())
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = temp_files(root)
    assert len(left) >= 1 and all(name.startswith("memories/ideas/.") for name in left)
    status = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all"], cwd=root,
                            capture_output=True, text=True).stdout
    assert all(f"!! {name}" in status for name in left)  # `git add -A` would not commit them
    listed = palace_run(root, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert temp_files(root) == []
    rerun = palace_run(root, "import", str(sources), "--format", "markdown", "--domain", "ideas")
    assert rerun.returncode == 0, rerun.stderr
    fresh = tmp_path / "fresh"
    shutil.copytree(root, fresh, ignore=shutil.ignore_patterns(".palace"))
    for args in (["list", "--json"], ["search", "lanterns3 idea", "--mode", "lexical", "--json"]):
        mine, theirs = palace_run(root, *args), palace_run(fresh, *args)
        assert comparable(args, mine.stdout) == comparable(args, theirs.stdout)
    assert palace_run(root, "index", "--check").returncode == 0


def test_temp_files_of_dead_writers_are_swept_and_live_ones_kept(tmp_path):
    """pid-aware: a temp file whose writer is gone goes, a live writer's stays, as does what is not palace's."""
    from palace_cli.palace import Palace

    root = copy_palace(EXAMPLE, tmp_path / "p", git=False)
    (root / "conversations" / "chat").mkdir(parents=True)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead = dead_pid()
        names = {
            "memories/storage-engines/.b-tree.md.{dead}.k2j3h4k5.tmp": "swept",
            "memories/storage-engines/.b-tree.md.{live}.k2j3h4k5.tmp": "kept",
            "conversations/chat/.s.md.{dead}.abcdefgh.tmp": "swept",
            "index/.storage-engines.md.{dead}.abcdefgh.tmp": "swept",
            ".INDEX.md.{dead}.abcdefgh.tmp": "swept",
            "memories/storage-engines/.old.md.k2j3h4k5.tmp": "swept",  # no pid (an older palace), an hour old
            "memories/storage-engines/.new.md.k2j3h4k5.tmp": "kept",  # no pid, a moment old
            "memories/storage-engines/.other-tool.k2j3h4k5.tmp": "kept",  # not a note's
        }
        paths = {}
        for name, fate in names.items():
            path = root / name.format(dead=dead, live=live.pid)
            path.write_text("half a note")
            paths[path] = fate
        hour_ago = time.time() - 3700
        os.utime(root / "memories/storage-engines/.old.md.k2j3h4k5.tmp", (hour_ago, hour_ago))
        report = Palace(root).refresh(embedder=None)
        assert {p for p, fate in paths.items() if fate == "swept"} == {root / p for p in report.swept}
        for path, fate in paths.items():
            assert path.exists() == (fate == "kept"), path
    finally:
        live.kill()
        live.wait()


@pytest.mark.slow
def test_a_write_refused_by_the_disk_is_one_error_and_leaves_nothing(tmp_path):
    """A real write limit (RLIMIT_FSIZE, in a child process: no root needed) stops `add` halfway through
    writing the note: one line naming the file, no note, no temp file, no new folder, the palace as it was."""
    root = copy_palace(EXAMPLE, tmp_path / "p")
    assert palace_run(root, "index").returncode == 0
    before = tree_digest(root)
    limited = ("import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
               "resource.setrlimit(resource.RLIMIT_FSIZE, (40_000, 40_000)); "
               "from palace_cli.cli import main; main()")
    done = subprocess.run([sys.executable, "-c", limited, "add", "A long idea", "--domain", "new-domain",
                           "--new-domain", "--image", "lantern " * 6000], cwd=root, capture_output=True, text=True,
                          env=env())
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"palace: cannot write {root}/memories/new-domain/a-long-idea.md: File too "
                                        "large; nothing was written; free some space and run it again"]
    assert tree_digest(root) == before
    assert temp_files(root) == [] and not (root / "memories" / "new-domain").exists()
