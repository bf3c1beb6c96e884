"""Hostile palaces edited at random and a real refresh process killed at a random write: the next refresh gives
exactly what a fresh build of the same files gives (notes, problems, lexical documents and their BM25
scores, generated index files), and leaves no temp file (docs/reliability.md).

The default run tries EDIT_EXAMPLES palaces (12); PALACE_HYPOTHESIS_EXAMPLES raises it with the others.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conftest import REPO
from palace_cli.palace import Palace
from test_hostile import WORDS, build, note_bytes, palaces

EDIT_EXAMPLES = max(12, int(os.environ.get("PALACE_HYPOTHESIS_EXAMPLES", "0")) // 4)
EDITED = settings(max_examples=EDIT_EXAMPLES, deadline=None, derandomize=False,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# A refresh that SIGKILLs itself at its nth write point: an fsync, a rename, an unlink, or the start or end
# of a note-cache transaction (SQLite's own writes happen inside those).
KILLED_REFRESH = """
import os, signal, sys
from contextlib import contextmanager
root, nth, calls = sys.argv[1], int(sys.argv[2]), [0]
def point():
    calls[0] += 1
    if calls[0] == nth:
        os.kill(os.getpid(), signal.SIGKILL)
for name in ("fsync", "replace", "rename", "unlink"):
    def wrapped(*args, _real=getattr(os, name), **kwargs):
        point()
        return _real(*args, **kwargs)
    setattr(os, name, wrapped)
from palace_cli.index.store import NoteStore
transaction = NoteStore.transaction
@contextmanager
def counted(self):
    point()
    with transaction(self):
        yield
    point()
NoteStore.transaction = counted
from palace_cli.palace import Palace
Palace(root).refresh(embedder=None)
print("finished", calls[0], flush=True)
"""


@st.composite
def edits(draw) -> list[tuple]:
    """(kind, which note, new bytes or name) of up to six edits; `which` picks among the notes on disk."""
    out = []
    for j in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["rewrite", "rewrite", "delete", "add", "rename", "touch"]))
        word = WORDS[j % len(WORDS)]
        data = draw(note_bytes(f"e{j}" if kind == "add" else f"n{j}", word)) if kind in ("rewrite", "add") else b""
        out.append((kind, draw(st.integers(0, 50)), data, word))
    return out


def apply(root: Path, changes: list[tuple]) -> None:
    """The same edits, the same way, on any copy of a palace."""
    for j, (kind, which, data, word) in enumerate(changes):
        notes = sorted(p for p in (root / "memories").rglob("*.md") if p.is_file() and not p.is_symlink())
        if kind == "add" or not notes:
            folder = root / "memories" / "added"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{word}-{j}.md").write_bytes(data or b"---\nid: x\n---\n")
            continue
        note = notes[which % len(notes)]
        if kind == "rewrite":
            note.write_bytes(data)
        elif kind == "delete":
            note.unlink()
        elif kind == "rename":
            note.rename(note.with_name(f"renamed-{j}.md"))
        else:
            os.utime(note, ns=(note.stat().st_mtime_ns + 10**9,) * 2)


def state(palace: Palace) -> dict:
    """Everything a refresh derives from the files, in a form two palaces can be compared in."""
    idx = palace.index
    with idx.text.open().searcher() as searcher:
        lexical = sorted((d["path"], d["id"]) for d in searcher.all_stored_fields())
    generated = {p.relative_to(palace.root).as_posix(): p.read_bytes()
                 for p in [palace.root / "INDEX.md", *sorted((palace.root / "index").glob("*.md"))] if p.exists()}
    return {
        "memories": [m.__dict__ for m in idx.store.memories()],
        "errors": idx.store.errors(),
        "problems": sorted(str(p) for p in idx.problems),
        "lexical": lexical,
        "scores": {w: idx.text.search(w, limit=50) for w in WORDS + ["memory owls hook"]},
        "generated": generated,
    }


def differences(got, expected) -> list:
    """What differs between two states' values, field by field for memories (a failure names the field)."""
    if not (isinstance(got, list) and got and isinstance(got[0], dict)):
        return [got, expected]
    mine, theirs = ({m["path"]: m for m in side} for side in (got, expected))
    out = [("only here", sorted(mine.keys() - theirs.keys())), ("only fresh", sorted(theirs.keys() - mine.keys()))]
    for path in sorted(mine.keys() & theirs.keys()):
        out += [(path, name, mine[path][name], theirs[path][name])
                for name in theirs[path] if mine[path].get(name) != theirs[path][name]]
    return out


@pytest.mark.slow
@EDITED
@given(spec=palaces(), changes=edits(), nth=st.integers(1, 24))
def test_edits_and_a_killed_refresh_leave_what_a_fresh_build_gives(spec, changes, nth):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        root, fresh = tmp / "palace", tmp / "fresh"
        build(root, tmp / "outside", spec)
        Palace(root).refresh(embedder=None)
        apply(root, changes)
        child = subprocess.run([sys.executable, "-c", KILLED_REFRESH, str(root), str(nth)], capture_output=True,
                               text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=300)
        assert child.returncode in (0, -signal.SIGKILL), child.stderr
        event("killed" if child.returncode else "finished before the kill")
        mine = Palace(root)
        mine.refresh(embedder=None)
        build(fresh, tmp / "outside-fresh", spec)
        apply(fresh, changes)
        theirs = Palace(fresh)
        theirs.refresh(embedder=None)
        got, expected = state(mine), state(theirs)
        for key in expected:
            assert got[key] == expected[key], (key, differences(got[key], expected[key]))
        left = [p for p in root.rglob("*.tmp") if ".palace" not in p.parts]
        assert left == []
