"""A real kill -9 in the middle of a build leaves a state the next refresh repairs, giving the right answers."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from palace_cli.bench.synth import generate_palace
from palace_cli.index.files import check_index_files
from palace_cli.core.disk import atomic_write
from palace_cli.palace import Palace

SIZE = 700
CHILD = """
import os, signal, sys
import palace_cli.index.refresh as r
from palace_cli.palace import Palace
root, stage, nth = sys.argv[1], sys.argv[2], int(sys.argv[3])
r.COMMIT_EVERY = 250  # several note transactions even in a small palace
import palace_cli.index.turns as t
t.SESSIONS_EVERY = 10  # several session transactions too
seen = 0
def progress(name, done, total):
    global seen
    print(name, done, total, flush=True)
    if name == stage:
        seen += 1
        if seen == nth:
            os.kill(os.getpid(), signal.SIGKILL)
Palace(root).refresh(embedder=r.AUTO if stage == "embedding" else None, progress=progress)
print("finished", flush=True)
"""


def run_child(root: Path, stage: str, nth: int, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, str(root), stage, str(nth)], capture_output=True, text=True,
                          env=env, timeout=600)


def lexical(palace: Palace) -> dict[str, str]:
    with palace.index.text.open().searcher() as searcher:
        return {d["path"]: d["id"] for d in searcher.all_stored_fields()}


def generated_files(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in [root / "INDEX.md", *sorted((root / "index").glob("*.md"))]}


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return generate_palace(tmp_path_factory.mktemp("crash") / "template", SIZE, seed=7, embedder="none")


@pytest.fixture(scope="module")
def reference(template, tmp_path_factory) -> dict:
    """What an uninterrupted build gives."""
    root = tmp_path_factory.mktemp("crash-ref") / "p"
    shutil.copytree(template, root)
    palace = Palace(root)
    palace.refresh(embedder=None)
    return {"lexical": lexical(palace), "files": generated_files(root)}


@pytest.fixture
def assert_repaired(parse_notes):
    """A check that the next refresh repairs a killed build: what an uninterrupted build gives, then no-ops."""
    def check(root: Path, expected: dict) -> None:
        palace = Palace(root)
        report = palace.refresh(embedder=None)
        assert report.problems == []
        assert lexical(palace) == expected["lexical"]
        assert generated_files(root) == expected["files"]
        assert palace.stale() == [] and palace.unindexed() == [] and check_index_files(palace.site, parse_notes(palace)) == []
        assert palace.refresh(embedder=None).changed is False

    return check


@pytest.mark.slow
@pytest.mark.parametrize("stage, nth", [
    ("reading notes", 2),   # 400 notes read: the first 250 committed, the next batch not
    ("lexical index", 1),   # notes all committed, the lexical build not started
    ("lexical index", 2),   # half-way through adding documents to whoosh
    ("index files", 1),     # whoosh committed, index files not yet written
])
def test_kill_during_a_full_build(template, reference, tmp_path, stage, nth, assert_repaired):
    root = tmp_path / "p"
    shutil.copytree(template, root)
    child = run_child(root, stage, nth)
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert "finished" not in child.stdout
    assert_repaired(root, reference)


@pytest.fixture(scope="module")
def big_build(tmp_path_factory) -> dict:
    """A palace of 2,100 notes (its lexical build reports progress at 500, 1,000, 1,500 and 2,000 documents)
    and what its uninterrupted build gives."""
    template = generate_palace(tmp_path_factory.mktemp("crash-big") / "template", 3 * SIZE, seed=11, embedder="none")
    root = tmp_path_factory.mktemp("crash-big-ref") / "p"
    shutil.copytree(template, root)
    palace = Palace(root)
    palace.refresh(embedder=None)
    return {"template": template, "expected": {"lexical": lexical(palace), "files": generated_files(root)}}


@pytest.mark.slow
@pytest.mark.parametrize("documents, delay", [(500, 0.0), (1000, 0.05), (1500, 0.1), (2000, 0.02)])
def test_kill_from_outside_at_arbitrary_moments(big_build, tmp_path, documents, delay, assert_repaired):
    """The parent kills the build with SIGKILL from outside, a moment after the build reports that many
    lexical documents added (inside whoosh's document adds; at 2,000 of 2,100, a few adds before its commit).
    Placed by progress, not by the clock, so the kill lands before the build ends on any machine (asserted)."""
    root = tmp_path / "p"
    shutil.copytree(big_build["template"], root)
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(root), "none", "0"], stdout=subprocess.PIPE, text=True)
    for line in child.stdout:
        if line.startswith(f"lexical index {documents} "):
            break
    time.sleep(delay)
    child.send_signal(signal.SIGKILL)
    rest, _ = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL and "finished" not in rest, "the build ended before the kill"
    assert_repaired(root, big_build["expected"])


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["lexical index", "index files"])
def test_kill_during_an_incremental_refresh(template, tmp_path, stage, assert_repaired):
    """Edits, deletes and renames committed to the note cache but not yet to whoosh or the index files."""
    root = tmp_path / "p"
    shutil.copytree(template, root)
    Palace(root).refresh(embedder=None)
    files = sorted((root / "memories").rglob("*.md"))
    for i, path in enumerate(files[:40]):
        atomic_write(path, path.read_text().replace("## Content\n", f"## Content\nZanzibar{i} "))
    for path in files[40:43]:
        path.unlink()
    for path in files[43:45]:
        path.rename(root / "memories" / files[0].parent.name / f"renamed-{path.name}")
    child = run_child(root, stage, 1)
    assert child.returncode == -signal.SIGKILL, child.stderr
    expected_root = tmp_path / "expected"
    shutil.copytree(root, expected_root, ignore=shutil.ignore_patterns(".palace"))
    expected_palace = Palace(expected_root)
    expected_palace.refresh(embedder=None)
    expected = {"lexical": {p: i for p, i in lexical(expected_palace).items()}, "files": generated_files(expected_root)}
    assert_repaired(root, expected)
    palace = Palace(root)
    for i in (0, 17, 39):
        assert [h for h, _ in palace.index.text.search(f"zanzibar{i}", limit=3)] == \
               [files[i].read_text().split("id: ", 1)[1].split("\n", 1)[0]]


def test_kill_during_embedding_keeps_vectors_right(small_palace, with_models, parse_notes):
    from palace_cli.backends import load_embedder

    child = run_child(small_palace, "embedding", 1, env=dict(os.environ))  # PALACE_HOME: the models' home
    assert child.returncode == -signal.SIGKILL, child.stderr
    palace = Palace(small_palace)
    report = palace.refresh()
    assert report.dense == "on"
    model_id, keys, matrix = palace.index.vectors.load()
    assert sorted(keys) == sorted(palace.index.store.text_hashes().values()) and matrix.shape[0] == 3
    embedder = load_embedder()
    texts = {m.id: m.search_text() for m in parse_notes(palace).memories.values()}
    fresh = embedder.embed_batch(list(texts.values()))
    from palace_cli.index.store import text_hash

    by_key = dict(zip(keys, matrix))
    for memory, vector in zip(parse_notes(palace).memories.values(), fresh):
        assert float(by_key[text_hash(memory)] @ vector) > 0.999


# ---- session files: turns go through the same refresh -------------------------------------------


def all_docs(palace: Palace) -> list[tuple[str, str]]:
    """(path, id) of every lexical document: a session file holds one document per turn."""
    with palace.index.text.open().searcher() as searcher:
        return sorted((d["path"], d["id"]) for d in searcher.all_stored_fields())


def talk_samples(conversations: int = 3, sessions: int = 20, turns: int = 15) -> list[dict]:
    """LoCoMo-shaped conversations, big enough for several session transactions and lexical progress steps."""
    samples = []
    for c in range(conversations):
        talk = {"speaker_a": "Ana", "speaker_b": "Ben"}
        for s in range(1, sessions + 1):
            talk[f"session_{s}_date_time"] = f"1:{s:02d} pm on {s} May, 2023"
            talk[f"session_{s}"] = [{"speaker": "Ana" if t % 2 else "Ben", "dia_id": f"D{s}:{t}",
                                     "text": f"conversation {c} session {s} turn {t} word{(c * 7 + s * 3 + t) % 97}"}
                                    for t in range(1, turns + 1)]
        samples.append({"sample_id": f"conv-{c}", "conversation": talk})
    return samples


@pytest.fixture(scope="module")
def talk_template(tmp_path_factory) -> Path:
    import json

    from palace_cli.editing.authoring import init_palace
    from palace_cli.importers import import_path

    base = tmp_path_factory.mktemp("crash-talk")
    (base / "talk.json").write_text(json.dumps(talk_samples()))
    root = init_palace(base / "template", name="Talk")
    import_path(Palace(root), base / "talk.json")
    shutil.rmtree(root / ".palace")  # the import indexed them: start every test from the files alone
    return root


def fresh_build(root: Path, tmp_path: Path) -> dict:
    """What a build from nothing of the same files gives."""
    copy = tmp_path / "fresh"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".palace"))
    palace = Palace(copy)
    palace.refresh(embedder=None)
    return {"docs": all_docs(palace), "problems": [(p.path, p.code) for p in palace.refresh(embedder=None).problems]}


def assert_sessions_repaired(root: Path, expected: dict) -> None:
    palace = Palace(root)
    report = palace.refresh(embedder=None)
    assert [(p.path, p.code) for p in report.problems] == expected["problems"]
    assert all_docs(palace) == expected["docs"]
    assert palace.refresh(embedder=None).changed is False
    catalog = palace.index.catalog()
    assert sorted(zip(catalog.paths, catalog.ids))[-len(expected["docs"]):] == \
        [d for d in expected["docs"] if "/" in d[1]]


@pytest.mark.slow
@pytest.mark.parametrize("stage, nth", [
    ("reading sessions", 2),  # 40 session files read: 30 committed in three transactions, 10 not
    ("lexical index", 1),     # every session committed, no turn in whoosh yet
    ("lexical index", 2),     # half-way through adding the 900 turns to whoosh
])
def test_kill_while_indexing_session_files(talk_template, tmp_path, stage, nth):
    root = tmp_path / "p"
    shutil.copytree(talk_template, root)
    child = run_child(root, stage, nth)
    assert child.returncode == -signal.SIGKILL, child.stderr
    expected = fresh_build(root, tmp_path)
    assert len(expected["docs"]) == 900
    assert_sessions_repaired(root, expected)


@pytest.mark.slow
def test_kill_during_an_incremental_refresh_of_session_files(talk_template, tmp_path):
    """Edited, deleted and copied session files (a repeated id changes owner) committed to the note cache but
    not yet to whoosh."""
    root = tmp_path / "p"
    shutil.copytree(talk_template, root)
    Palace(root).refresh(embedder=None)
    files = sorted((root / "conversations" / "locomo").glob("*.md"))
    for i, path in enumerate(files[:5]):
        atomic_write(path, path.read_text().replace("turn 3 ", f"turn 3 Zanzibar{i} "))
    files[5].unlink()
    shutil.copy(files[6], files[6].with_name("aaa-copy.md"))  # sorts first: the copy now owns the session id
    child = run_child(root, "lexical index", 1)
    assert child.returncode == -signal.SIGKILL, child.stderr
    expected = fresh_build(root, tmp_path)
    assert ("conversations/locomo/" + files[6].name, "duplicate-session-id") in expected["problems"]
    assert_sessions_repaired(root, expected)
    palace = Palace(root)
    from palace_cli.search.retrieve import search

    assert [h.id for h in search(palace, "zanzibar2", mode="lexical", k=1).hits] == \
           [f"locomo-{files[2].stem}/D{int(files[2].stem.split('-s')[1])}:3"]
    assert {h.path for h in search(palace, f"conversation {files[6].stem[5]}", mode="lexical", k=200).hits
            if h.turn and h.turn.session == f"locomo-{files[6].stem}"} == {"conversations/locomo/aaa-copy.md"}
