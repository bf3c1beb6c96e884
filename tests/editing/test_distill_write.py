"""write_plain_memory: the one writer of plain memories (distill writes through it; quick capture will too)."""

from __future__ import annotations

import os

import pytest

from palace_cli.core.notefile import load_note
from palace_cli.editing.authoring import write_plain_memory
from palace_cli.errors import PalaceError, UsageError


def test_writes_frontmatter_in_order_and_content(palace):
    memory = write_plain_memory(palace, "Caroline went to a support group", "people",
                                "Caroline went to a LGBTQ support group on 7 May 2023.", type="event",
                                fields={"about": "Caroline", "source": "conversations/locomo/a.md:12", "turn": "D1:3",
                                        "confidence": 0.81}, valid_from="2023-05-07")
    text = (palace.root / memory.path).read_text(encoding="utf-8")
    keys = [line.split(":", 1)[0] for line in text.split("---\n")[1].splitlines()]
    assert keys == ["id", "subject", "type", "about", "source", "turn", "confidence", "valid_from", "created"]
    assert memory.path == "memories/people/caroline-went-to-a-support-group.md"
    assert memory.content == "Caroline went to a LGBTQ support group on 7 May 2023."
    assert memory.valid_from == "2023-05-07" and memory.type == "event"
    assert memory.meta["turn"] == "D1:3" and memory.meta["confidence"] == 0.81
    assert load_note(palace.root, memory.path, "people").subject == "Caroline went to a support group"


def test_a_taken_slug_gets_a_suffix_and_a_taken_id_is_refused(palace):
    first = write_plain_memory(palace, "Jon likes contemporary dance", "people", "Jon likes contemporary dance.")
    second = write_plain_memory(palace, "Jon likes contemporary dance", "people", "Jon loves contemporary dance.")
    assert (first.id, second.id) == ("jon-likes-contemporary-dance", "jon-likes-contemporary-dance-2")
    before = (palace.root / first.path).read_bytes()
    with pytest.raises(PalaceError, match="already exists"):
        write_plain_memory(palace, "Other", "people", "Other.", note_id=first.id)
    assert (palace.root / first.path).read_bytes() == before
    with pytest.raises(UsageError, match="content"):
        write_plain_memory(palace, "Empty", "people", "  ")
    with pytest.raises(UsageError, match="type"):
        write_plain_memory(palace, "Odd", "people", "Odd.", type="gossip")


def test_supersedes_edits_the_old_frontmatter_only(palace):
    old = write_plain_memory(palace, "Jon works as a banker", "people", "Jon works as a banker.",
                             valid_from="2023-01-01")
    body_before = (palace.root / old.path).read_text(encoding="utf-8").split("---\n", 2)[2]
    new = write_plain_memory(palace, "Jon runs a dance studio", "people", "Jon runs a dance studio.",
                             supersedes=[old.id], valid_from="2023-02-01")
    text = (palace.root / old.path).read_text(encoding="utf-8")
    assert text.split("---\n", 2)[2] == body_before
    reread = load_note(palace.root, old.path, "people")
    assert reread.superseded_by == [new.id] and reread.valid_until == "2023-02-01"
    assert new.supersedes == [old.id]
    with pytest.raises(UsageError, match="before"):  # a successor older than what it replaces
        write_plain_memory(palace, "Jon was a student", "people", "Jon was a student.", supersedes=[new.id],
                           valid_from="2022-01-01")


def test_a_given_scan_is_used_and_grows(palace):
    scan = palace.scan(light=True)
    memory = write_plain_memory(palace, "Gina has been to Rome", "people", "Gina has been to Rome once.", scan=scan)
    assert scan.memories[memory.id].path == memory.path
    again = write_plain_memory(palace, "Gina has been to Rome", "people", "Gina went to Rome.", scan=scan)
    assert again.id == "gina-has-been-to-rome-2"


BATCH = [("Gina has been to Rome", "people", "Gina has been to Rome once.", {"about": "Gina", "confidence": 0.5}),
         ("Gina has been to Rome", "people", "Gina went to Rome.\r\nTwice.", {"about": "Gina", "confidence": -0.0}),
         ("Jon runs a dance studio", "work", "Jon runs a dance studio.", {"about": "Jon", "turn": "D2:1"})]


def test_a_batch_writes_the_bytes_one_by_one_writes_and_returns_the_memories_they_read_as(palace, tmp_path):
    import shutil

    from palace_cli.editing.authoring import PlainMemories
    from palace_cli.palace import Palace

    other = Palace(shutil.copytree(palace.root, tmp_path / "other"))
    singly = [write_plain_memory(other, s, d, c, fields=f, valid_from="2023-05-07") for s, d, c, f in BATCH]
    batch = PlainMemories(palace, palace.scan(light=True))
    planned = [batch.write(s, d, c, fields=f, valid_from="2023-05-07") for s, d, c, f in BATCH]
    assert not (palace.root / planned[0].path).exists()  # nothing on disk before the flush
    batch.flush()
    for one, many in zip(singly, planned):
        assert (palace.root / many.path).read_bytes() == (other.root / one.path).read_bytes()
        assert many == load_note(palace.root, many.path, many.domain)
    assert [m.id for m in planned] == ["gina-has-been-to-rome", "gina-has-been-to-rome-2", "jon-runs-a-dance-studio"]


def test_a_disk_that_refuses_a_batch_leaves_no_note_no_temp_file_and_no_new_folder(palace, monkeypatch):
    import errno

    import palace_cli.core.disk as disk
    from palace_cli.editing.authoring import PlainMemories
    from palace_cli.errors import DiskError

    def full(fds):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(disk, "_sync_all", full)
    before = sorted(p.relative_to(palace.root) for p in palace.root.rglob("*") if ".palace" not in p.parts)
    batch = PlainMemories(palace, palace.scan(light=True))
    for subject, domain, content, fields in BATCH:
        batch.write(subject, "fresh-domain", content, fields=fields)
    with pytest.raises(DiskError, match="No space left"):
        batch.flush()
    assert sorted(p.relative_to(palace.root) for p in palace.root.rglob("*") if ".palace" not in p.parts) == before


def test_a_batch_links_no_note_into_place_before_every_note_is_on_the_disk(palace, monkeypatch):
    import palace_cli.core.disk as disk
    from palace_cli.editing.authoring import PlainMemories

    events = []
    real_fsync, real_link = os.fsync, os.link
    monkeypatch.setattr(disk.os, "fsync", lambda fd: (events.append(("fsync", os.fstat(fd).st_ino)), real_fsync(fd)))
    monkeypatch.setattr(disk.os, "link", lambda src, dst, **kw: (events.append(("link", os.stat(src).st_ino)),
                                                                  real_link(src, dst, **kw)))
    batch = PlainMemories(palace, palace.scan(light=True))
    planned = [batch.write(s, d, c, fields=f) for s, d, c, f in BATCH]
    batch.flush()
    notes = {os.stat(palace.root / m.path).st_ino for m in planned}
    links = [i for i, (what, inode) in enumerate(events) if what == "link" and inode in notes]
    synced = [i for i, (what, inode) in enumerate(events) if what == "fsync" and inode in notes]
    assert len(links) == len(synced) == len(planned) and max(synced) < min(links)


def test_a_batch_fsyncs_every_file_before_it_is_linked(tmp_path, monkeypatch):
    import palace_cli.core.disk as disk

    synced = []
    monkeypatch.setattr(disk.os, "fsync", lambda fd: synced.append(os.fstat(fd).st_ino))
    temps = disk.synced_temps([(tmp_path / "a.md", b"a"), (tmp_path / "b.md", b"b")])
    assert sorted(synced) == sorted(os.stat(t).st_ino for t in temps) and [open(t, "rb").read() for t in temps] == [b"a", b"b"]


def test_a_batch_larger_than_the_open_file_limit_is_staged_in_chunks(tmp_path):
    import subprocess
    import sys

    # In a process of its own with a soft limit of 100 open files: one temp file open per note failed near the 90th.
    code = ("import resource, sys; from pathlib import Path; import palace_cli.core.disk as disk; "
            "resource.setrlimit(resource.RLIMIT_NOFILE, (100, resource.getrlimit(resource.RLIMIT_NOFILE)[1])); "
            "root = Path(sys.argv[1]); "
            "temps = disk.synced_temps([(root / f'n{k}.md', b'x%d' % k) for k in range(200)]); "
            "print(len(temps), sum(Path(t).read_bytes() == b'x%d' % k for k, t in enumerate(temps)))")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["200", "200"]


def test_a_temp_write_the_disk_refuses_is_a_disk_error_and_leaves_no_temp_file(tmp_path, monkeypatch):
    import errno

    import palace_cli.core.disk as disk
    from palace_cli.errors import DiskError

    real = os.fdopen

    class Full:
        """A file whose buffered bytes never reach the disk: the flush and the close's flush both fail."""

        def __init__(self, fd, mode):
            self.raw = real(fd, mode)

        def write(self, data):
            return len(data)

        def flush(self):
            raise OSError(errno.ENOSPC, "No space left on device")

        def fileno(self):
            return self.raw.fileno()

        def close(self):
            self.raw.close()
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(disk.os, "fdopen", Full)
    with pytest.raises(DiskError, match="nothing was written"):
        disk.synced_temps([(tmp_path / "a.md", b"a"), (tmp_path / "b.md", b"b")])
    assert list(tmp_path.iterdir()) == []
