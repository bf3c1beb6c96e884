"""The watcher with a real watchdog observer seeing real writes, renames and deletes."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conversation_fixtures import locomo_samples
from palace_cli.editing.authoring import init_palace
from palace_cli.importers import import_path
from palace_cli.index.files import check_index_files
from palace_cli.core.disk import atomic_write
from palace_cli.palace import Palace
from palace_cli.search.retrieve import search
from palace_cli.watch import Watcher, relevant

WAIT_S = 30.0  # a guard against hanging, not a speed requirement: events normally land within a second


def note(note_id: str, word: str) -> str:
    return (f"---\nid: {note_id}\nsubject: {note_id.title()}\nanchor: a tin drum\nkeywords: [{word}]\n"
            f"verify: {note_id} tin drum\n---\n# {note_id}\n\n## Image\nThe {note_id} tin drum.\n\n## Content\n{word}\n")


class Recorder:
    """Collects watcher events; next_refresh() waits for the next one that refreshed."""

    def __init__(self):
        self.events = queue.Queue()

    def __call__(self, event):
        self.events.put(event)

    def next_refresh(self):
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                event = self.events.get(timeout=deadline - time.monotonic())
            except queue.Empty:
                break
            if event.kind == "error":
                raise AssertionError(event.error)
            if event.kind == "refreshed":
                return event
        raise AssertionError("no refresh within the guard time")

    def refresh_where(self, predicate):
        """Refresh events until one whose report satisfies predicate (editors can cause several refreshes).

        A file written in place (`write_text`) is created or truncated, then written: a refresh in between
        sees it empty and reports it added or updated (an unreadable note), and the write's own event brings
        the refresh that reads its words. So a test waits for what it asserts (`hits(...)`), not for the first
        refresh that names the file."""
        while True:
            event = self.next_refresh()
            if predicate(event.report):
                return event


def hits(palace, word):
    return [i for i, _ in palace.index.text.search(word, limit=5)]


@pytest.fixture
def watched(small_palace):
    palace = Palace(small_palace)
    recorder = Recorder()
    watcher = Watcher(palace, recorder, embedder=None, debounce=0.1, max_delay=0.5)
    watcher.start()
    yield palace, recorder, watcher
    watcher.stop()


@pytest.mark.parametrize("relpath, expected", [
    ("memories/a/note.md", True),
    ("memories/a", True),
    ("memories", True),
    ("conversations", True),
    ("conversations/locomo/conv-1-s01.md", True),
    ("conversations/locomo/.conv-1-s01.md.123.abc.tmp", False),
    ("palace.toml", True),
    ("memories/a/.note.md.swp", False),
    ("memories/a/.note.md.x1y2.tmp", False),  # our own atomic_write temp file
    ("memories/a/note.md~", False),
    ("memories/a/#note.md#", False),
    ("memories/a/.#note.md", False),
    ("memories/a/4913", False),
    ("INDEX.md", False),
    ("index/a.md", False),
    (".palace/notes.sqlite-wal", False),
    (".git/index", False),
    ("reviews/2026.jsonl", False),
])
def test_relevant_paths(relpath, expected):
    assert relevant(relpath) is expected


def test_in_place_write_is_indexed(watched):
    palace, recorder, _ = watched
    path = palace.root / "memories/storage/bloom-filter.md"
    text = path.read_text()
    path.write_text(text.replace("no false negatives", "no false negatives, a quetzal on each bit"))  # same inode
    event = recorder.refresh_where(lambda r: hits(palace, "quetzal"))
    assert event.report.updated == ["memories/storage/bloom-filter.md"]
    assert "memories/storage/bloom-filter.md" in event.triggers
    assert hits(palace, "quetzal") == ["bloom-filter"]


def test_vim_style_save_backup_rename_then_write(watched):
    palace, recorder, _ = watched
    path = palace.root / "memories/distributed/saga.md"
    text = path.read_text()
    (palace.root / "memories/distributed/.saga.md.swp").write_bytes(b"swap")
    (palace.root / "memories/distributed/4913").write_bytes(b"")  # vim's probe file
    (palace.root / "memories/distributed/4913").unlink()
    os.rename(path, palace.root / "memories/distributed/saga.md~")
    path.write_text(text.replace("lemon cakes", "lemon cakes and axolotls"))
    (palace.root / "memories/distributed/saga.md~").unlink()
    (palace.root / "memories/distributed/.saga.md.swp").unlink()
    event = recorder.refresh_where(lambda r: hits(palace, "axolotls"))
    assert hits(palace, "axolotls") == ["saga"]
    assert not any(t.endswith((".swp", "~", "4913")) for t in event.triggers)


def test_temp_file_then_rename_over_the_note(watched):
    palace, recorder, _ = watched
    path = palace.root / "memories/distributed/two-phase-commit.md"
    atomic_write(path, path.read_text().replace("coordinator", "narwhal coordinator"))
    recorder.refresh_where(lambda r: r.updated)
    assert hits(palace, "narwhal") == ["two-phase-commit"]


def test_a_note_seen_empty_mid_write_is_read_when_its_words_land(watched):
    """What a loaded machine does to `write_text`: the refresh between creating the file and writing it sees
    it empty (added, with no words); the write's own event brings the refresh that reads it."""
    palace, recorder, _ = watched
    path = palace.root / "memories/storage/heron.md"
    with path.open("w") as handle:
        recorder.refresh_where(lambda r: "memories/storage/heron.md" in r.added)
        assert hits(palace, "heron") == []  # what a wait for the first refresh naming the file gets
        handle.write(note("heron", "heron"))
    recorder.refresh_where(lambda r: hits(palace, "heron"))
    assert hits(palace, "heron") == ["heron"]


def test_new_folder_with_a_file_and_a_folder_moved_in(watched, tmp_path):
    palace, recorder, _ = watched
    folder = palace.root / "memories/zoology"
    folder.mkdir()
    (folder / "pangolin.md").write_text(note("pangolin", "pangolin"))
    recorder.refresh_where(lambda r: hits(palace, "pangolin"))
    assert hits(palace, "pangolin") == ["pangolin"]
    assert (palace.root / "index/zoology.md").exists()
    outside = tmp_path / "botany"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "baobab.md").write_text(note("baobab", "baobab"))
    shutil.move(str(outside), str(palace.root / "memories/botany"))
    recorder.refresh_where(lambda r: "memories/botany/deep/baobab.md" in r.added)
    assert hits(palace, "baobab") == ["baobab"]
    # and a file written later inside the moved-in folder is seen too (the new folder is watched)
    (palace.root / "memories/botany/deep/fern.md").write_text(note("fern", "fern"))
    recorder.refresh_where(lambda r: hits(palace, "fern"))
    assert hits(palace, "fern") == ["fern"]


def test_rename_move_and_delete(watched, parse_notes):
    palace, recorder, _ = watched
    os.rename(palace.root / "memories/storage/bloom-filter.md", palace.root / "memories/distributed/bloom.md")
    event = recorder.refresh_where(lambda r: r.removed)
    assert event.report.added == ["memories/distributed/bloom.md"]
    assert event.report.removed == ["memories/storage/bloom-filter.md"]
    assert "bloom-filter" in (palace.root / "index/distributed.md").read_text()
    (palace.root / "memories/distributed/bloom.md").unlink()
    recorder.refresh_where(lambda r: r.removed == ["memories/distributed/bloom.md"])
    assert hits(palace, "lightbulbs") == []
    assert check_index_files(palace.site, parse_notes(palace)) == []


def test_session_files_appearing_changing_and_going_are_indexed(watched, tmp_path):
    """conversations/ is made by the first import (or a git pull) after the watcher started: it is watched
    from then on, and a hand edit of a turn is searchable without any command."""
    palace, recorder, _ = watched
    (tmp_path / "locomo.json").write_text(json.dumps(locomo_samples()))
    elsewhere = Palace(init_palace(tmp_path / "elsewhere", name="Elsewhere"))
    import_path(elsewhere, tmp_path / "locomo.json")
    shutil.copytree(elsewhere.root / "conversations", palace.root / "conversations")  # as a pull brings them
    copied = sorted(str(p.relative_to(palace.root)) for p in (palace.root / "conversations").rglob("*.md"))
    added: list[str] = []
    recorder.refresh_where(lambda r: added.extend(r.added) or sorted(added) == copied)  # copytree: one or more
    assert search(palace, "two pairs this week", mode="lexical", kind="turn").hits[0].id == "locomo-conv-1-s02/D2:3"
    path = palace.root / "conversations/locomo/conv-1-s02.md"
    path.write_text(path.read_text().replace("two pairs this week", "three loafers this week"))
    event = recorder.refresh_where(lambda r: search(palace, "loafers", mode="lexical").hits)
    assert event.report.updated == ["conversations/locomo/conv-1-s02.md"]
    assert search(palace, "loafers", mode="lexical").hits[0].id == "locomo-conv-1-s02/D2:3"
    path.unlink()
    recorder.refresh_where(lambda r: r.removed == ["conversations/locomo/conv-1-s02.md"])
    assert search(palace, "loafers", mode="lexical").hits == []


def test_memories_folder_replaced_whole(watched, tmp_path):
    """A git checkout can delete memories/ and write a new one: the watcher follows the new folder."""
    palace, recorder, _ = watched
    backup = tmp_path / "backup"
    shutil.move(str(palace.root / "memories"), str(backup))
    recorder.refresh_where(lambda r: len(r.removed) == 3)
    shutil.move(str(backup), str(palace.root / "memories"))
    recorder.refresh_where(lambda r: len(r.added) == 3)
    (palace.root / "memories/storage/gecko.md").write_text(note("gecko", "gecko"))
    recorder.refresh_where(lambda r: hits(palace, "gecko"))
    assert hits(palace, "gecko") == ["gecko"]


def test_palace_toml_change_reloads_the_config(watched):
    palace, recorder, _ = watched
    toml = palace.root / "palace.toml"
    toml.write_text(toml.read_text() + '\n[domains.storage]\ndescription = "Where the bits sleep."\n')
    recorder.refresh_where(lambda r: "index/storage.md" in r.index_files)
    assert "Where the bits sleep." in (palace.root / "index/storage.md").read_text()
    assert palace.config.domains["storage"].description == "Where the bits sleep."


def test_a_broken_config_is_reported_and_the_watcher_carries_on(watched):
    palace, recorder, watcher = watched
    toml = palace.root / "palace.toml"
    good = toml.read_text()
    # written whole (rename), so the broken file is one event, one reload and one error: written in place, it
    # is a truncate and a write, which a loaded machine can see as two batches, two errors
    atomic_write(toml, "this is = = not toml")
    deadline = time.monotonic() + WAIT_S
    while True:
        event = recorder.events.get(timeout=max(deadline - time.monotonic(), 0.01))
        if event.kind == "error":
            assert "palace.toml" in event.error
            break
    atomic_write(toml, good)
    (palace.root / "memories/storage/ibis.md").write_text(note("ibis", "ibis"))
    recorder.refresh_where(lambda r: hits(palace, "ibis"))
    assert hits(palace, "ibis") == ["ibis"]


# ---- the command, as a process ----------------------------------------------------------------


def _start_cli_watch(root: Path, env: dict) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", "from palace_cli.cli import main; main()", "--palace", str(root),
                                "watch", "--json", "--debounce", "0.1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
    first = json.loads(process.stdout.readline())
    assert first["event"] == "started"
    return process


def _interrupt(process: subprocess.Popen) -> tuple[str, str]:
    """Ctrl-C, then (stdout, stderr); a watcher that does not stop is killed, never left running."""
    process.send_signal(signal.SIGINT)
    try:
        return process.communicate(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        err = process.communicate()[1]
        raise AssertionError(f"palace watch did not stop within {WAIT_S} s of Ctrl-C; stderr: {err}") from None


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime, in clock ticks


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads CPU time from /proc (Linux)")
def test_cli_watch_is_idle_when_nothing_happens_and_ctrl_c_exits_130(small_palace):
    process = _start_cli_watch(small_palace, dict(os.environ))
    try:
        time.sleep(0.5)  # let start-up work settle
        before = _cpu_ticks(process.pid)
        time.sleep(2.0)
        idle = _cpu_ticks(process.pid) - before
        assert idle <= 2, f"watcher used {idle} clock ticks of CPU while idle"
        (small_palace / "memories/storage/okapi.md").write_text(note("okapi", "okapi"))
        event = json.loads(process.stdout.readline())
        assert event["event"] == "refreshed" and event["report"]["added"] == ["memories/storage/okapi.md"]
    finally:
        out, err = _interrupt(process)
    assert process.returncode == 130, err
    assert json.loads(out.splitlines()[-1])["event"] == "stopped"
    assert "Traceback" not in err
    # nothing was left locked or half-written
    assert Palace(small_palace).refresh(embedder=None).changed is False


@pytest.mark.slow
def test_watcher_and_several_commands_at_once(small_palace, parse_notes):
    """A CLI watcher and three `palace index` processes run while notes are written: no errors, and
    the end state is exactly what a build from nothing gives."""
    process = _start_cli_watch(small_palace, dict(os.environ))
    workers = []
    try:
        for round_ in range(6):
            for i in range(5):
                (small_palace / f"memories/storage/n{round_}-{i}.md").write_text(note(f"n{round_}-{i}", f"w{round_}x{i}"))
            if round_ % 2:
                (small_palace / f"memories/storage/n{round_ - 1}-0.md").unlink()
            workers += [subprocess.Popen([sys.executable, "-c", "from palace_cli.cli import main; main()", "--palace",
                                          str(small_palace), "index", "--json"], stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True) for _ in range(3 if round_ % 3 == 0 else 1)]
        for worker in workers:
            out, err = worker.communicate(timeout=120)
            assert worker.returncode == 0, err
            json.loads(out)
    finally:
        out, err = _interrupt(process)
    assert process.returncode == 130, err
    assert not any(json.loads(line)["event"] == "error" for line in out.splitlines()), out
    palace = Palace(small_palace)
    report = palace.refresh(embedder=None)
    with palace.index.text.open().searcher() as searcher:
        docs = sorted(d["id"] for d in searcher.all_stored_fields())
    expected = sorted(parse_notes(Palace(small_palace)).memories)
    assert docs == expected and len(docs) == 3 + 30 - 3
    assert check_index_files(palace.site, parse_notes(palace)) == [] and report.problems == []
    assert hits(palace, "w5x4") == ["n5-4"] and hits(palace, "w4x0") == []


def test_cli_watch_stops_cleanly_on_sigterm(small_palace):
    process = _start_cli_watch(small_palace, dict(os.environ))
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=WAIT_S)
    assert process.returncode == 143, err
    assert json.loads(out.splitlines()[-1])["event"] == "stopped"


def test_stop_after_a_start_that_failed_halfway_joins_nothing_unstarted(small_palace, monkeypatch):
    # The language server stops its watcher when shutdown comes, which may be before start() has started
    # its threads: stop() must not join a thread that never ran.
    watcher = Watcher(Palace(small_palace), lambda event: None)

    def unreadable(name):
        raise OSError(13, "Permission denied")

    monkeypatch.setattr(watcher, "_watch_content", unreadable)
    with pytest.raises(OSError):
        watcher.start()
    watcher.stop()
    assert watcher._stopped.is_set()


@pytest.mark.slow
def test_the_watcher_embeds_between_saves_and_a_save_re_embeds_its_note(small_palace, with_models):
    palace, seen = Palace(small_palace), Palace(small_palace)  # the watcher's, and the test thread's own
    recorder = Recorder()
    watcher = Watcher(palace, recorder, debounce=0.1, max_delay=0.5)
    report = watcher.start()
    try:
        assert report.waiting and report.vectors is None  # the first refresh left the vectors to the watcher
        embedded = []
        deadline = time.monotonic() + 600
        while seen.embedding().waiting and time.monotonic() < deadline:
            try:
                event = recorder.events.get(timeout=1)
            except queue.Empty:
                continue
            embedded += [event.embedded] if event.kind == "embedded" else []
        assert sum(embedded) == seen.embedding().counts.total > 0
        path = small_palace / "memories/distributed/two-phase-commit.md"
        atomic_write(path, path.read_text().replace("coordinator", "coordinating node", 1))
        while True:
            event = recorder.events.get(timeout=600)
            if event.kind == "embedded":
                break
        assert event.embedded == 1 and seen.embedding().waiting == 0
    finally:
        watcher.stop()
