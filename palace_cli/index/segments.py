"""Writing the lexical index's documents fast: each field's terms counted once and kept per term in document order,
then written a block at a time; a big build cut into contiguous slices that worker processes write as one
segment each.

Whoosh's own `add_document` analyses a field through a generator of Token objects and pools every posting, its
flush sorts them all and reads every posting's document length back from the file it has just written: most of
a vault's build (docs/benchmarks.md, "Where the time goes"). This writes the same postings, block statistics,
stored fields and lengths (tests/index/test_segments.py compares them with whoosh's). Whoosh's multiprocessing
writer is not used: its forked children wait on a queue with no timeout and outlive a killed parent, holding the
refresh lock. Here the workers are new interpreters (they inherit no lock), die with their parent
(PR_SET_PDEATHSIG), and write segments that only the parent's commit lists: a build killed half-way leaves files
that the next commit deletes, and an index the next refresh rebuilds."""

from __future__ import annotations

import ctypes
import heapq
import inspect
import os
import pickle
import signal
import subprocess
import sys
import tempfile
from array import array
from itertools import groupby
from operator import itemgetter
from pathlib import Path

from whoosh.codec.whoosh3 import W3FieldWriter
from whoosh.system import pack_uint
from whoosh.util.numeric import byte_to_length, length_to_byte

from palace_cli.errors import PalaceError

PR_SET_PDEATHSIG = 1
F_SETPIPE_SZ = 1031
PIPE_BYTES = 1 << 20
# whoosh's PostingPool.add sizes a posting as 150 bytes plus its field name, twice its term and its value
POSTING_BYTES = 150
POSTING_MEMORY = 48  # bytes a kept posting costs, its term's share included (FastAdder's budget)


class FastAdder:
    """Adds pre-analysed documents to an open whoosh SegmentWriter. `pooled`: into whoosh's posting pool, for the
    writer's own commit (it may merge other segments in); else kept as each term's arrays of document numbers,
    frequencies and weights, already in order, which `finish` writes as the segment (no sort of every posting, no
    length read back from the file)."""

    def __init__(self, writer, pooled: bool = True):
        self.writer = writer
        self.pooled = pooled
        self.lengths: dict[str, bytearray] = {}
        self.base = writer.docnum
        self.terms: dict[str, dict[str, tuple[array, array, array]]] = {}  # field -> term -> its postings
        self.valued: set[str] = set()  # fields whose postings carry their frequency (not whoosh's Existence)
        self._bytes: dict[str, bytes] = {}
        # Past this many kept postings they are spilled to a temporary file as a sorted run, as whoosh's pool
        # spills past its limit: a build's memory stays bounded at any size.
        self.budget = max(1000, writer.pool.limit // POSTING_MEMORY)
        self.kept = 0
        self.runs: list = []

    def add(self, plain: dict[str, str], counted: dict[str, tuple[dict, int]]) -> None:
        """One document: `plain` fields (ID, STORED) as whoosh indexes them, `counted` text fields as
        (term -> (frequency, weight), length)."""
        writer = self.writer
        writer._check_state()
        schema, docnum = writer.schema, writer.docnum
        perdoc = writer.perdocwriter
        perdoc.start_doc(docnum)
        for name in sorted([*plain, *counted]):
            field = schema[name]
            length = 0
            if name in counted:
                terms, length = counted[name]
                if not terms:
                    continue
                self._post(name, docnum, terms.items(), True)
                self._length(name, docnum, length)
            else:
                value = plain[name]
                if field.indexed:
                    self._post(name, docnum, [(t.decode("utf-8"), (f, w)) for t, f, w, _ in field.index(value)],
                               False)
            perdoc.add_field(name, field, value if field.stored and name not in counted else None, length)
        perdoc.finish_doc()
        writer._added = True
        writer.docnum += 1
        if self.kept > self.budget:
            self._spill()

    def _post(self, name: str, docnum: int, terms, valued: bool) -> None:
        """The postings of one field of one document: term -> (frequency, weight)."""
        encoded = self._bytes
        if self.pooled:
            pool = self.writer.pool
            size = 0
            for term, (frequency, weight) in terms:
                tbytes = encoded.get(term) or encoded.setdefault(term, term.encode("utf-8"))
                value = pack_uint(frequency) if valued else b""
                pool.current.append((name, tbytes, docnum, weight, value))
                size += POSTING_BYTES + len(name) + 2 * len(tbytes) + len(value)
            pool.fieldnames.add(name)
            pool.currentsize += size
            if pool.currentsize > pool.limit:
                pool.save()
            return
        if valued:
            self.valued.add(name)
        kept = self.terms.get(name)
        if kept is None:
            kept = self.terms[name] = {}
        self.kept += len(terms)
        for term, (frequency, weight) in terms:
            arrays = kept.get(term)
            if arrays is None:
                arrays = kept[term] = (array("I"), array("I"), array("f"))
            arrays[0].append(docnum)
            arrays[1].append(frequency)
            arrays[2].append(weight)

    def _length(self, name: str, docnum: int, length: int) -> None:
        column = self.lengths.setdefault(name, bytearray())
        index = docnum - self.base
        if len(column) < index:
            column.extend(bytes(index - len(column)))
        column.append(length_to_byte(length) if length else 0)

    def _write_postings(self, fieldwriter) -> None:
        """What whoosh's FieldWriter.add_postings writes with the W3 codec, a block of a term's postings at a time
        instead of a method call per posting: the same blocks, block statistics and term infos."""
        packed: dict[int, bytes] = {}
        field, column = None, b""
        for name, btext, postings in self._merged():
            if name != field:
                if field is not None:
                    fieldwriter.finish_field()
                fieldwriter.start_field(name, self.writer.schema[name])
                field, column = name, self.lengths.get(name, b"")
            self._write_term(fieldwriter, name, btext, postings, column, packed)
        if field is not None:
            fieldwriter.finish_field()

    def _sorted(self):
        """(field, term bytes, postings) of the kept postings in whoosh's order (field, then the term's bytes),
        forgetting them as they go."""
        for name in sorted(self.terms):
            terms = self.terms.pop(name)
            for btext, term in sorted((term.encode("utf-8"), term) for term in terms):
                yield name, btext, terms.pop(term)
        self.kept = 0

    def _spill(self) -> None:
        """Write the kept postings to a temporary file (unlinked already: a kill leaves nothing) as a sorted run."""
        run = tempfile.TemporaryFile()
        for item in self._sorted():
            pickle.dump(item, run, pickle.HIGHEST_PROTOCOL)
        run.seek(0)
        self.runs.append(run)

    def _merged(self):
        """`_sorted` over the spilled runs and what is kept: a term's postings from each run, in document order."""
        if not self.runs:
            yield from self._sorted()
            return
        self._spill()
        merged = heapq.merge(*(_read_run(run) for run in self.runs), key=itemgetter(0, 1))  # stable: runs in order
        for (name, btext), group in groupby(merged, key=itemgetter(0, 1)):
            parts = [postings for _, _, postings in group]
            postings = parts[0]
            for more in parts[1:]:
                for kept, added in zip(postings, more):
                    kept.extend(added)
            yield name, btext, postings
        for run in self.runs:
            run.close()
        self.runs = []

    def _write_term(self, fieldwriter, name: str, btext: bytes, postings: tuple, column, packed: dict) -> None:
        """One term's postings in whoosh's blocks of `_blocklimit`, with the statistics its add_posting keeps."""
        ids, frequencies, weights = postings
        fieldwriter.start_term(btext)
        block_writer = fieldwriter._postwriter
        limit = block_writer._blocklimit
        for start in range(0, len(ids), limit):
            if start:
                block_writer._write_block()  # whoosh writes a full block when the next posting comes
            block_ids = ids[start : start + limit]
            block_weights = weights[start : start + limit]
            block_writer._ids = block_ids
            block_writer._weights = block_weights
            block_writer._values = [packed.get(f) or packed.setdefault(f, pack_uint(f))
                                    for f in frequencies[start : start + limit]] if name in self.valued else []
            lbytes = [column[d - self.base] for d in block_ids if d - self.base < len(column)]
            lbytes = list(filter(None, lbytes))  # whoosh leaves a length of 0 out of the block's minimum
            block_writer._minlength = byte_to_length(min(lbytes)) if lbytes else None
            block_writer._maxlength = byte_to_length(max(lbytes)) if lbytes else 0
            block_writer._maxweight = max(0, max(block_weights))
        fieldwriter.finish_term()

    def finish(self):
        """Flush, close and assemble the segment as whoosh's `_finalize_segment` does; returns the segment.
        Only for a writer that added nothing but through this adder (no merged segments)."""
        writer = self.writer
        writer.perdocwriter.close()
        if not isinstance(writer.fieldwriter, W3FieldWriter) or not writer.codec.length_stats:
            raise PalaceError("the lexical index's codec is not whoosh's W3")  # what _write_postings writes
        self._write_postings(writer.fieldwriter)
        writer.fieldwriter.close()
        writer._close_segment()
        writer._assemble_segment()
        return writer.get_segment()


def write_segment(directory: str, function, args: tuple, limitmb: int, progress=None, total: int = 0) -> tuple:
    """Write the documents `function(*args)` yields as a segment of the index in `directory`, not listed in it
    until a writer commits it (TextIndex.rebuild_parallel); returns (the segment, how many documents it holds)."""
    from whoosh.writing import SegmentWriter

    from palace_cli.index.text import TextIndex, _cancel

    text = TextIndex(Path(directory))
    writer = SegmentWriter(text.open(create=False), _lk=False, limitmb=limitmb)
    try:
        adder = FastAdder(writer, pooled=False)
        written = text._add_all(adder, function(*args), progress, total)
        segment = adder.finish()
    except BaseException:
        _cancel(writer)
        raise
    return segment, written


def _read_run(run):
    while True:
        try:
            yield pickle.load(run)
        except EOFError:
            return


def commit_segments(writer, segments: list) -> None:
    """Replace every segment of the index with these (written by FastAdder.finish), in one commit of the writer."""
    if not writer._added:
        writer._close_segment()  # the writer's own segment is empty; `segments` were finished apart
    writer._commit_toc(segments)
    writer._finish()


# A worker's import path is palace's own folder and the interpreter's, never the current folder: a palace's
# `inspect.py` or `pickle.py` must not run in a worker as `python -m` would let it.
WORKER = ("import sys; sys.path[:] = [sys.argv[1]] + [p for p in sys.path if p not in ('', '.')]; "
          "from palace_cli.index.segments import serve; serve()")
MISSING = object()


class WorkerFailed(PalaceError):
    """A build worker could not start or did not finish: the caller builds in this process instead."""


class Workers:
    """One worker process per (function, args) job, `function(*args)` run there (a segment's `write_segment`, the
    notes a refresh reads): started at once, read back in job order, a generator's items as they come. A plain interpreter (`python -m palace_cli.index.segments`), not multiprocessing: nothing of this
    process is inherited (its locks, its main module), and it is killed when this process dies."""

    def __init__(self, jobs: list[tuple]):
        command = [sys.executable, "-c", WORKER, str(Path(__file__).resolve().parents[2]), str(os.getpid())]
        self.procs = []
        try:
            for job in jobs:
                errors = tempfile.TemporaryFile()  # read after the worker ends: a pipe it filled would block it
                proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors)
                proc.errors = errors
                self.procs.append(proc)
                try:  # a bigger pipe (Linux): the worker runs ahead of a reader busy with what it read before
                    import fcntl

                    fcntl.fcntl(proc.stdout.fileno(), F_SETPIPE_SZ, PIPE_BYTES)
                except (ImportError, OSError, AttributeError):
                    pass
                proc.stdin.write(pickle.dumps(job))
                proc.stdin.close()
        except BaseException as exc:
            self.stop()
            raise WorkerFailed(f"a lexical index worker could not start ({exc})") from exc

    def results(self) -> list:
        """Each job's result, in job order."""
        out = []
        for index in range(len(self.procs)):
            result = next(self.stream(index), MISSING)
            if result is MISSING:  # exited 0 without a word: no result to build on
                raise WorkerFailed("a lexical index worker ended without a result")
            out.append(result)
        return out

    def stream(self, index: int):
        """What job `index` yields, one item at a time as the worker writes it (a generator's items, or its one
        result); raises WorkerFailed when the worker did not finish."""
        proc = self.procs[index]
        while True:
            try:
                yield pickle.load(proc.stdout)
            except EOFError:
                break
        if proc.wait() != 0:
            proc.errors.seek(0)
            lines = proc.errors.read().decode("utf-8", "replace").strip().splitlines()
            raise WorkerFailed(f"a lexical index worker failed ({lines[-1] if lines else proc.returncode})")

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            proc.stdout.close()
            proc.errors.close()


def _die_with_parent(parent: int) -> None:
    """In a worker: be killed when the process that started it dies (a kill -9 leaves no worker behind)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the parent's kill leaves the worker to finish its slice
        pass
    if os.getppid() != parent:  # the parent died before the prctl took effect
        os._exit(1)


def serve() -> None:
    """A worker's whole life: read one pickled job from stdin, write what it yields to stdout."""
    _die_with_parent(int(sys.argv[2]))
    function, args = pickle.load(sys.stdin.buffer)
    result = function(*args)
    for item in result if inspect.isgenerator(result) else [result]:
        pickle.dump(item, sys.stdout.buffer, pickle.HIGHEST_PROTOCOL)
        sys.stdout.buffer.flush()
