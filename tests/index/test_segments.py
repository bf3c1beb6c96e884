"""The fast lexical build (index/segments.py): the same index whoosh's own add_document writes, postings, stored
fields and lengths alike, whether one process writes it or several write a segment each."""

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
from palace_cli.index import refresh, segments
from palace_cli.index.livestats import LENGTHS
from palace_cli.index.text import (NEIGHBOURS, PARTS, Doc, PalaceAnalyzer, TextIndex, WORD, default_pattern,
                                   pairs_of, term_counts, text_of)
from palace_cli.palace import Palace
from test_crash import CHILD, assert_repaired, generated_files, lexical  # noqa: F401 (a fixture)

ODD = ("İstanbul façade naïve ÆON x*y a.b.c 3.14 don't the THE a I e-mail _under_ ﬁne Straße "
       "co-operate rock'n'roll  ユニコード 中文 über-cool ....  x.y. **bold**")


def docs() -> list[Doc]:
    """Units of every kind, odd words, repeats, neighbours and parts included."""
    out = []
    for n in range(150):  # past whoosh's block of 128 postings
        words = f"lantern harbour {n} walnut lanterns running runs ran {ODD[n % 40:n % 40 + 60]}"
        out.append(Doc(f"memories/d/n{n}.md", f"n{n}", "d" if n % 3 else "e", f"Subject {n} lantern",
                       "key words", "an anchor", f"image {words}", f"content {words} {words}",
                       time="2024-01-0%d" % (n % 9 + 1) if n % 2 else "", rest=f"rest of the body {n} harbour"))
        out.append(Doc(f"memories/d/n{n}.md", f"n{n}#s{n}", "d", f"Subject {n} › Part", "", "", "",
                       f"section {words}", kind="section"))
        out.append(Doc(f"conversations/s{n % 4}.md", f"s{n % 4}:{n}", "", "Ana", "monday", "", "",
                       f"turn {words}", kind="turn", time="2024-02-01", session=f"s{n % 4}",
                       context=f"Bo: lantern {n}{PARTS}x"))
    out.append(Doc("memories/d/empty.md", "empty", "d", "", "", "", "", ""))
    out.append(Doc("memories/d/odd.md", "odd", "d", f"a{NEIGHBOURS}b", "", "", "", f"x {PARTS} y{NEIGHBOURS}z z"))
    return out


def whoosh_build(directory: Path, units: list[Doc]) -> TextIndex:
    """The index as whoosh's own add_document writes it (the build before the fast one)."""
    analyzer = PalaceAnalyzer()

    def length(text: str) -> int:
        return sum(1 for _ in analyzer(text))

    index = TextIndex(directory)
    writer = index.open().writer()
    for doc in units:
        fields = dict(path=doc.path, id=doc.id, kind=doc.kind, text=text_of(doc), rest=doc.rest,
                      pairs=pairs_of(doc) if doc.kind != "section" else "")
        if doc.domain:
            fields["domain_key"] = doc.domain
        fields[LENGTHS] = (length(fields["text"]), length(doc.rest),
                           sum(max(0, length(part) - 1) for part in fields["pairs"].split(PARTS)))
        for name in ("time", "session"):
            if getattr(doc, name):
                fields[name] = getattr(doc, name)
        writer.add_document(**fields)
    writer.commit()
    index.close()
    return index


def contents(index: TextIndex) -> dict:
    """Everything a search reads: every posting with its weight and value, stored fields, each document's length
    byte per field, field totals; numbered across segments."""
    ix = index.open(create=False)
    with ix.searcher() as searcher:
        reader = searcher.reader()
        postings = []
        for fieldname, term in reader.all_terms():
            matcher = reader.postings(fieldname, term)
            while matcher.is_active():
                postings.append((fieldname, term, matcher.id(), matcher.weight(), matcher.value()))
                matcher.next()
        docs_ = reader.doc_count_all()
        stored = [reader.stored_fields(d) for d in range(docs_)]
        fields = ("text", "rest", "pairs")
        lengths = [[reader.doc_field_length(d, f) for f in fields] for d in range(docs_)]
        totals = [reader.field_length(f) for f in fields]
        maxima = [reader.max_field_length(f) if reader.field_length(f) else 0 for f in fields]
        infos = {(f, t): (i.weight(), i.doc_frequency(), i.min_length(), i.max_length(), i.max_weight())
                 for f, t in reader.all_terms() for i in [reader.term_info(f, t)]}
    index.close()
    return {"postings": sorted(postings), "stored": stored, "lengths": lengths, "totals": totals, "maxima": maxima,
            "infos": infos}


def test_term_counts_are_the_analyzers_terms():
    analyzer = PalaceAnalyzer()
    for value in (ODD, f"kiln pottery\n{NEIGHBOURS}Ana: kiln kilns", f"{NEIGHBOURS}only near", "", "a the I"):
        expected: dict = {}
        for token in analyzer(value):
            frequency, weight = expected.get(token.text, (0, 0.0))
            expected[token.text] = (frequency + 1, weight + token.boost)
        assert term_counts(value) == (expected, sum(f for f, _ in expected.values()))
    assert [m.group() for m in default_pattern.finditer(ODD)] == WORD.findall(ODD)


def test_the_fast_build_writes_what_whoosh_writes(tmp_path):
    units = docs()
    fast = TextIndex(tmp_path / "fast")
    fast.rebuild(units)
    assert contents(fast) == contents(whoosh_build(tmp_path / "whoosh", units))


def test_an_update_through_the_fast_adder_matches_whoosh(tmp_path):
    units = docs()
    fast = TextIndex(tmp_path / "fast")
    fast.rebuild(units[:60])
    fast.apply(units[60:], ["memories/d/n3.md"])
    gone = {"memories/d/n3.md"} | {u.path for u in units[60:]}  # apply replaces every upserted path's documents
    slow = whoosh_build(tmp_path / "whoosh", [u for u in units[:60] if u.path not in gone] + units[60:])
    for query in ("lantern harbour", "walnut running", "istanbul", "monday lantern", "section 3"):
        assert fast.search(query, limit=None) == slow.search(query, limit=None)


def test_a_build_in_worker_processes_is_the_same_index(example_palace, monkeypatch):
    """Each core's slice written as a segment of its own: every posting, length and stored field where one
    process puts it, documents numbered alike, and the same rankings."""
    serial = Palace(example_palace)
    serial.refresh(embedder=None)
    expected = contents(serial.index.text)
    rankings = {q: serial.index.text.search(q, limit=None) for q in ("retry jitter backoff", "raft leader", "cache")}
    monkeypatch.setattr(refresh, "PARALLEL_UNITS", 0)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    assert len(refresh._slices(serial.index.store, 1)) == 3
    report = serial.refresh(embedder=None, rebuild=True)
    assert report.rebuilt_lexical
    assert len(list((example_palace / ".palace" / "whoosh").glob("*.seg"))) == 3
    assert contents(serial.index.text) == expected
    assert {q: serial.index.text.search(q, limit=None) for q in rankings} == rankings


def workers_of(parent: int) -> list[int]:
    """Pids of the live build workers started by `parent` (their command line names it)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = next(line for line in (entry / "status").read_text().splitlines() if line.startswith("State:"))
        except (OSError, StopIteration):
            continue
        if any(b"palace_cli.index.segments" in arg for arg in argv) and str(parent).encode() in argv \
                and "zombie" not in state:
            found.append(int(entry.name))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["reading notes 400 ", "lexical index 500 "])
def test_a_killed_parallel_build_leaves_no_worker_and_is_repaired(tmp_path, assert_repaired, moment):
    """kill -9 of the build while its workers read notes or write their segments: they die with it (none is
    left holding anything), and the next refresh rebuilds what an uninterrupted build gives."""
    template = generate_palace(tmp_path / "template", 1500, seed=5, embedder="none")  # a slice of 750 a process
    expected_root = tmp_path / "expected"
    shutil.copytree(template, expected_root)
    Palace(expected_root).refresh(embedder=None)
    expected = {"lexical": lexical(Palace(expected_root)), "files": generated_files(expected_root)}
    root = tmp_path / "p"
    shutil.copytree(template, root)
    child_code = CHILD.replace("r.COMMIT_EVERY = 250", "r.COMMIT_EVERY = 250; r.PARALLEL_UNITS = r.PARALLEL_NOTES = 0")
    child = subprocess.Popen([sys.executable, "-c", child_code, str(root), "none", "0"], stdout=subprocess.PIPE,
                             text=True)
    for line in child.stdout:
        if line.startswith(moment):
            break
    assert workers_of(child.pid), "the build started no worker"
    child.send_signal(signal.SIGKILL)
    rest, _ = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL and "finished" not in rest, "the build ended before the kill"
    for _ in range(100):  # the kernel delivers the workers' SIGKILL as their parent exits; reaping takes a moment
        if not workers_of(child.pid):
            break
        time.sleep(0.1)
    assert workers_of(child.pid) == []
    assert_repaired(root, expected)


def test_postings_spilled_to_runs_write_the_same_index(tmp_path, monkeypatch):
    """A build past its memory budget spills sorted runs to temporary files and merges them: the same index."""
    units = docs()
    whole = TextIndex(tmp_path / "whole")
    whole.rebuild(units)
    monkeypatch.setattr(segments, "POSTING_MEMORY", 10**12)  # the smallest budget: a run every 1,000 postings
    spilled = TextIndex(tmp_path / "spilled")
    runs = []
    spill = segments.FastAdder._spill
    monkeypatch.setattr(segments.FastAdder, "_spill", lambda self: (runs.append(1), spill(self)))
    spilled.rebuild(units)
    assert len(runs) > 3
    assert contents(spilled) == contents(whole)


def test_a_worker_that_cannot_start_leaves_the_build_to_this_process(example_palace, monkeypatch):
    palace = Palace(example_palace)
    palace.refresh(embedder=None)
    expected = contents(palace.index.text)
    monkeypatch.setattr(refresh, "PARALLEL_UNITS", 0)
    monkeypatch.setattr(sys, "executable", str(example_palace / "no-such-python"))
    notices = []
    monkeypatch.setattr(type(palace.site), "notice", lambda self, message: notices.append(message))
    assert palace.refresh(embedder=None, rebuild=True).rebuilt_lexical
    assert [n for n in notices if "lexical index worker could not start" in n]
    assert len(list((example_palace / ".palace" / "whoosh").glob("*.seg"))) == 1
    assert contents(palace.index.text) == expected


def cache_rows(palace: Palace) -> tuple:
    """The note cache's rows but the stat time (a file written within the last 2 s is recorded as -1)."""
    db = palace.index.store.db
    return (db.execute("SELECT path, size, file_hash, id, domain, text_hash, data, error, error_line, light, "
                       "vector_key FROM notes ORDER BY path").fetchall(),
            db.execute("SELECT * FROM sections ORDER BY path, ord").fetchall())


def test_notes_read_by_worker_processes_fill_the_cache_alike(example_palace, monkeypatch, bad_files, warned_files):
    """Every core's share of the changed notes read and parsed in a worker: the same rows, unreadable and
    warned-about notes included, and a note whose bytes did not change is only touched."""
    for relpath, data, _code, _line in [*bad_files, *warned_files]:
        (example_palace / relpath).parent.mkdir(parents=True, exist_ok=True)
        (example_palace / relpath).write_bytes(data)
    serial = Palace(example_palace)
    first = serial.refresh(embedder=None)
    expected = cache_rows(serial)
    monkeypatch.setattr(refresh, "PARALLEL_NOTES", 0)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    started = []
    workers = refresh.Workers
    monkeypatch.setattr(refresh, "Workers", lambda jobs: (started.append(len(jobs)), workers(jobs))[1])
    report = serial.refresh(embedder=None, rebuild=True)
    assert started == [2]
    assert sorted(report.added) == sorted(first.added) and report.problems == first.problems
    assert cache_rows(serial) == expected
    touched = sorted(example_palace.glob("memories/*/*.md"))[:5]
    for path in touched:
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns - 10**10))
    started.clear()
    again = serial.refresh(embedder=None)
    # Read again in the workers too: the same bytes are only touched; a file that cannot be read is recorded
    # again, as one process records it.
    assert started == [2] and not again.added and not again.removed
    assert set(again.updated) <= {relpath for relpath, *_ in bad_files}
    assert cache_rows(serial) == expected


def test_a_worker_never_imports_a_module_from_the_folder_it_runs_in(tmp_path, monkeypatch):
    """A vault's own `inspect.py` or `pickle.py` (the folder a command runs in) is not run by a build worker."""
    import operator

    from palace_cli.index.segments import Workers

    for name in ("inspect", "pickle", "tempfile"):
        (tmp_path / f"{name}.py").write_text("raise SystemExit('a module of the vault was imported')\n")
    monkeypatch.chdir(tmp_path)
    assert Workers([(operator.add, (1, 2)), (operator.mul, (3, 4))]).results() == [3, 12]
