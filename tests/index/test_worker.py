"""The background embedding worker as real processes: started by one command, seen by the next, one at a time,
resumed after kill -9, none when the embedder is off; the progress bar of `index --wait`; vectors kept by mv."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from palace_cli.palace import Palace

PALACE_BIN = Path(sys.executable).parent / "palace"
WAIT_S = 900  # a generous limit for a worker to finish on a loaded machine (a safety net, not a measurement)


@pytest.fixture
def background(with_models, monkeypatch) -> dict:
    """The environment of a command as a person runs it: vectors in the background, the worker at full priority
    (a loaded test machine would otherwise starve it)."""
    monkeypatch.setenv("PALACE_VECTORS", "background")
    monkeypatch.setenv("PALACE_WORKER_NICE", "0")
    return dict(os.environ)


def cli(root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from palace_cli.cli import main; main()", "--palace", str(root),
                           *args], capture_output=True, text=True, env=env, check=True)


def cli_json(root: Path, *args: str) -> dict:
    return json.loads(cli(root, *args, "--json").stdout)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting for {what} after {WAIT_S} s")
        time.sleep(0.05)


def embed_state(root: Path) -> dict:
    try:
        return json.loads((root / ".palace" / "embed.json").read_text())
    except (OSError, ValueError):
        return {}


def stored(root: Path) -> dict[str, bytes]:
    """vector key -> the bytes of its stored vector."""
    vectors = Palace(root).index.vectors.snapshot()
    if vectors is None:
        return {}
    keys = sorted(vectors.where)
    return dict(zip(keys, (row.tobytes() for row in vectors.gather(keys))))


def unique_units(root: Path) -> int:
    from palace_cli.index.embedding import wanted

    return len(wanted(Palace(root).index.store))


def add_notes(root: Path, count: int) -> None:
    folder = root / "memories" / "generated"
    folder.mkdir(parents=True)
    for n in range(count):
        (folder / f"g{n}.md").write_text(f"---\nid: g{n}\nsubject: Generated note {n}\n---\n# Generated note {n}\n\n"
                                         f"Note {n} says that item {n * 7 % 97} follows item {n * 13 % 89}.\n")


@pytest.mark.slow
def test_one_worker_started_by_a_command_is_seen_by_the_next_and_fills_every_vector(example_palace, background):
    first = cli_json(example_palace, "index")
    pid = first["worker_started"]
    assert pid and first["vectors_waiting"] and first["vectors"]["embedded"] < first["vectors"]["total"]
    os.kill(pid, signal.SIGSTOP)  # held mid-way: what the next commands see of it
    try:
        state = cli_json(example_palace, "status")
        assert state["embedding"]["pid"] == pid and state["embedding"]["kind"] == "worker"
        assert state["vectors"]["waiting"] > 0
        again = cli_json(example_palace, "index")
        assert again["worker_started"] is None  # it embeds already: no second worker
        hits = cli_json(example_palace, "search", "saga")  # answered now, from words and the vectors so far
        assert hits["hits"] and hits["vectors"]["total"] == first["vectors"]["total"]
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_until(lambda: not alive(pid), "the worker to stop")
    done = cli_json(example_palace, "status")
    assert done["embedding"] is None and done["vectors"]["waiting"] == 0
    assert done["vectors"]["embedded"] == done["vectors"]["total"] == first["vectors"]["total"]
    last = cli_json(example_palace, "index")
    assert last["worker_started"] is None and not last["vectors_waiting"]


@pytest.mark.slow
def test_commands_started_at_once_start_one_worker(example_palace, background):
    command = [sys.executable, "-c", "from palace_cli.cli import main; main()", "--palace", str(example_palace),
               "index", "--json"]
    running = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(4)]
    reports = [json.loads(process.communicate()[0]) for process in running]
    started = [report["worker_started"] for report in reports if report["worker_started"]]
    assert len(started) == 1, reports
    wait_until(lambda: not alive(started[0]), "the worker to stop")
    assert len(stored(example_palace)) == unique_units(example_palace)


@pytest.mark.slow
def test_a_worker_killed_mid_way_is_resumed_and_every_unit_is_embedded_once(example_palace, background):
    add_notes(example_palace, 300)  # three batches at least
    pid = cli_json(example_palace, "index")["worker_started"]
    assert pid
    wait_until(lambda: embed_state(example_palace).get("done", 0) > 0 or not alive(pid), "a first batch")
    os.kill(pid, signal.SIGSTOP)
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not alive(pid), "the killed worker to go")
    kept = stored(example_palace)
    total = unique_units(example_palace)
    assert 0 < len(kept) < total  # one batch or more committed, not all

    resumed = cli_json(example_palace, "index")["worker_started"]  # the next command resumes it
    assert resumed and resumed != pid
    wait_until(lambda: not alive(resumed), "the resumed worker to stop")
    assert embed_state(example_palace)["done"] == total - len(kept)  # it embedded only what was missing
    final = stored(example_palace)
    assert len(final) == total
    assert all(final[key] == row for key, row in kept.items())  # what the killed worker committed is kept


@pytest.mark.slow
def test_embedder_off_starts_no_worker(example_palace, background):
    toml = example_palace / "palace.toml"
    toml.write_text(toml.read_text() + '\n[models]\nembedder = "off"\n')
    report = cli_json(example_palace, "index")
    assert report["worker_started"] is None and not report["vectors_waiting"] and report["dense"] == "disabled"
    state = cli_json(example_palace, "status")
    assert state["embedding"] is None and state["vectors"]["waiting"] == 0 and state["dense"] == "disabled"
    assert not (example_palace / ".palace" / "embed.log").exists()


@pytest.mark.slow
@pytest.mark.skipif(not PALACE_BIN.exists(), reason="the palace console script is not installed in this venv")
def test_the_progress_bar_is_drawn_in_a_terminal_and_never_in_a_pipe(example_palace, background, tmp_path):
    pexpect = pytest.importorskip("pexpect")
    add_notes(example_palace, 200)  # more than one batch: the bar moves, and shows a rate
    other = tmp_path / "piped"
    subprocess.run(["cp", "-r", str(example_palace), str(other)], check=True)
    child = pexpect.spawn(str(PALACE_BIN), ["--palace", str(example_palace), "index", "--wait"],
                          env=dict(background, COLUMNS="120", TERM="xterm-256color"), encoding="utf-8",
                          timeout=WAIT_S, dimensions=(40, 120))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    assert re.search(r"embedding.*\d+/\d+.*units/s", child.before), child.before
    piped = cli(other, "index", "--wait", env=background)
    assert "embedding" not in piped.stderr and "units/s" not in piped.stderr and "━" not in piped.stderr
    assert Palace(other).embedding().waiting == 0  # it embedded all the same, silently


def linked_vault(root: Path, linkers: int = 15) -> Path:
    root.mkdir()
    (root / "Target.md").write_text("# Target\n\nThe note every other note links to, about tide pools.\n")
    for n in range(linkers):
        (root / f"Linker {n}.md").write_text(f"# Linker {n}\n\nLinker {n} reads [[Target]] about crab number {n}.\n"
                                             f"A second line of linker {n}.\n")
    return root


@pytest.mark.slow
def test_mv_of_a_linked_note_re_embeds_nothing_and_a_one_line_edit_one_unit(tmp_path, with_models):
    vault = linked_vault(tmp_path / "vault")
    cli(vault, "init", str(vault))
    cli(vault, "index", "--wait")
    before = stored(vault)
    linker_keys = {path: key for key, _h, _kind, path, _o in Palace(vault).index.store.vector_units()
                   if path.startswith("Linker")}

    cli(vault, "mv", "Target.md", "Renamed")
    assert "[[Renamed]]" in (vault / "Linker 3.md").read_text()  # every link was rewritten
    report = cli_json(vault, "index", "--wait")
    assert report["embedded"] <= 1  # the renamed note itself at most: its links' rewrites are no new meaning
    after = stored(vault)
    for path, key in linker_keys.items():
        assert after[key] == before[key], path  # the same vector, untouched

    linker = vault / "Linker 4.md"
    linker.write_text(linker.read_text().replace("A second line", "An edited second line"))
    assert cli_json(vault, "index", "--wait")["embedded"] == 1


@pytest.mark.slow
def test_a_new_cut_of_the_default_embedder_re_embeds_every_unit(example_palace, with_models):
    toml = example_palace / "palace.toml"
    base = toml.read_text()
    toml.write_text(base + '\n[models]\nembedder = "default:64"\n')
    first = Palace(example_palace).refresh()
    assert first.vectors.embedded > 0 and Palace(example_palace).embedding().waiting == 0
    assert Palace(example_palace).refresh().vectors is None  # up to date: nothing loaded, nothing embedded
    toml.write_text(base + '\n[models]\nembedder = "default:128"\n')
    again = Palace(example_palace)
    assert again.embedding().counts.embedded == 0  # the vectors of the old cut rank nothing now
    assert again.refresh().vectors.embedded == first.vectors.embedded


@pytest.mark.slow
def test_a_one_line_edit_in_a_long_note_re_embeds_its_section_and_keeps_the_notes_own_vector(tmp_path, with_models):
    vault = tmp_path / "vault"
    vault.mkdir()
    opening = " ".join(f"Tide pool fact {n} says anemones close at low water on rock {n}." for n in range(60))
    middle = " ".join(f"Barnacle {n} feeds with its feet when the tide covers rock {n}." for n in range(8))
    last = " ".join(f"Limpet {n} grazes algae on rock {n} and returns home." for n in range(8))
    (vault / "Tides.md").write_text(f"# Tides\n\n## Opening\n\n{opening}\n\n## Middle\n\n{middle}\n\n## Last\n\n{last}\n"
                                    "The last line about limpets.\n")
    cli(vault, "init", str(vault))
    cli(vault, "index", "--wait")
    store = Palace(vault).index.store
    note_key = next(key for key, _h, kind, _p, _o in store.vector_units() if kind == "note")
    before = stored(vault)

    note = vault / "Tides.md"
    note.write_text(note.read_text().replace("about limpets", "about limpets and whelks"))
    report = cli_json(vault, "index", "--wait")
    assert report["embedded"] == 1  # the edited section; the note's own unit reads only its first 256 pieces
    after = stored(vault)
    new_note_key = next(key for key, _h, kind, _p, _o in Palace(vault).index.store.vector_units() if kind == "note")
    assert new_note_key != note_key  # its text changed past the cut...
    assert after[new_note_key] == before[note_key]  # ...and it took the vector the model would compute again
    assert note_key not in after  # the old rows are dropped once the pass ends

    note.write_text(note.read_text().replace("Tide pool fact 0 says", "Tide pool fact zero says"))
    assert cli_json(vault, "index", "--wait")["embedded"] == 2  # an edit the model reads: the section and the note
