"""The lexical index: Whoosh BM25 over one field per unit, plus the rest of a note's body. With its helpers,
livestats.py (statistics of the live documents), postings.py (the numpy scorer), segments.py (the build) and
textquery.py (a search's whoosh queries), the only modules that import whoosh.

A memory's subject, keywords and aliases, anchor, Image and Content are one field, `text`, saturated once by
BM25 (k1 1.2, b 0.5, Robertson's idf); every other word of its body is a second field, `rest`, queried at
0.1; the same parts' adjacent word pairs are a third, `pairs`, queried at 0.25 with the query's pairs. A
turn's `text` is its speaker, date in words and words, then its neighbours' words at half weight.
Chosen by cross-validation over four corpora (docs/ranking-experiments.md): summing a BM25 per field
counted a word found in the subject, anchor and Image three times, and the Image at 0.2 lost the
questions that describe a scene.
"""

from __future__ import annotations

import math
import os
import pickle
import re
import shutil
import struct
import sys
import threading
import time
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from whoosh import index as whoosh_index
from whoosh.analysis import Analyzer, Token
from whoosh.analysis.filters import STOP_WORDS
from whoosh.analysis.tokenizers import default_pattern
from whoosh.fields import ID, STORED, TEXT, Schema
from whoosh.filedb.filestore import FileStorage
from whoosh.lang.porter import stem
from whoosh.query import And, Or, Term

from palace_cli.errors import ConfigError, PalaceError
from palace_cli.core.disk import atomic_write
from palace_cli.progress import Progress
from palace_cli.index.livestats import LENGTHS, LiveBM25F, LiveStats
from palace_cli.index.postings import PostingCache, SegmentArrays, top_k
from palace_cli.index.scope import Scope
from palace_cli.index.segments import FastAdder, Workers, commit_segments, write_segment
from palace_cli.index.textquery import search_limits, ranked

# Query-time field weights: `text` holds what a unit is about, `rest` every other word of a note's body
# (notes.rest_of_body), which at full weight pulled in the topics a Links section names; 0.1 costs nothing
# measurable (docs/ranking-experiments.md). Override in palace.toml [retrieval] field_weights.
# `pairs` holds each part's adjacent terms joined (`replic_lag`): a query that keeps two of a memory's words
# together gains a little over one that only shares them. At 0.25 it gained the unseen skill corpus 0.009 MRR
# (recall@1 0.772 -> 0.789) and changed example-palace, SciFact and LoCoMo by under 0.004, none significantly
# (docs/ranking-experiments.md, "Ideas after the recommendation").
DEFAULT_FIELD_WEIGHTS = {"text": 1.0, "rest": 0.1, "pairs": 0.25}
FIELDS = tuple(DEFAULT_FIELD_WEIGHTS)
WORD_FIELDS = ("text", "rest")  # the fields whose terms are words (a query's terms are looked up in these)
K1, B = 1.2, 0.5
# Tokens after this character in a field's value count at NEIGHBOUR_BOOST: a turn's neighbours. Whoosh's
# Frequency format sums token boosts into the posting's weight, which is the frequency BM25 sees.
NEIGHBOURS = "\x1e"
NEIGHBOUR_BOOST = 0.5
PARTS = "\x1f"  # between the parts of the `pairs` field's value: no pair spans two parts (nor NEIGHBOURS)
LOCK_TIMEOUT_S = 30.0
SEGMENT_MB = 256  # whoosh's posting pool per writer before it spills sorted runs to disk
MAX_DELETED, MAX_DELETED_SHARE = 500, 0.01  # deleted documents kept before an update merges every segment


SCHEMA_VERSION = "8"  # bump when the schema or analyzer changes: old indexes are rebuilt (8: section units)
SCHEMA_MARKER = "palace-schema"
RETRIES = 3
DAMAGE = (EOFError, struct.error, zlib.error, pickle.UnpicklingError, ValueError)


class PalaceAnalyzer(Analyzer):
    """Whoosh's StemmingAnalyzer (regex words, lowercase, stopwords, Porter stems) in one pass.

    Produces the same terms as the four-stage whoosh chain at about twice the speed, which is most of
    the time a full build spends outside whoosh's posting writer.
    """

    def __init__(self):
        self._stems: dict[str, str] = {}

    def __getstate__(self):
        return {}  # the schema is pickled into the index: leave the stem cache out

    def __setstate__(self, state):
        self._stems = {}

    def __eq__(self, other):
        return type(other) is type(self)

    def __call__(self, value, positions=False, chars=False, keeporiginal=False, removestops=True, start_pos=0,
                 start_char=0, tokenize=True, mode="", **kwargs):
        token = Token(positions, chars, removestops=removestops, mode=mode, **kwargs)
        stems = self._stems
        position = start_pos
        neighbours = value.find(NEIGHBOURS)
        if neighbours < 0:
            neighbours = len(value)
        for match in default_pattern.finditer(value):
            word = match.group().lower()
            if len(word) < 2 or word in STOP_WORDS:
                continue
            text = stems.get(word)
            if text is None:
                text = stem(word)
                if len(stems) < 200_000:
                    stems[word] = text
            token.text = text
            token.boost = 1.0 if match.start() < neighbours else NEIGHBOUR_BOOST
            token.stopped = False
            if positions:
                token.pos = position
                position += 1
            if chars:
                token.startchar, token.endchar = start_char + match.start(), start_char + match.end()
            yield token


# default_pattern without its capturing group, for findall; the terms are PalaceAnalyzer's (tests/index/test_segments.py)
WORD = re.compile(default_pattern.pattern.replace("(", "(?:"), default_pattern.flags)
_TERMS: dict[str, str] = {}  # a lowercased word -> its term, or "" when the analyzer drops it


def term_counts(value: str) -> tuple[dict[str, tuple[int, float]], int]:
    """(term -> (frequency, weight), length) of a text field's value: PalaceAnalyzer's terms, counted once, the
    words after NEIGHBOURS at NEIGHBOUR_BOOST; what whoosh's Frequency format would make of its tokens."""
    cut = value.find(NEIGHBOURS)
    own = _terms_of(value if cut < 0 else value[:cut])
    counts = {term: (count, float(count)) for term, count in Counter(own).items()}
    length = len(own)
    if cut >= 0:
        near = _terms_of(value[cut:])
        length += len(near)
        for term, count in Counter(near).items():
            frequency, weight = counts.get(term, (0, 0.0))
            counts[term] = (frequency + count, weight + count * NEIGHBOUR_BOOST)
    return counts, length


def _terms_of(text: str) -> list[str]:
    terms = _TERMS
    out = []
    for word in WORD.findall(text):
        word = word.lower()
        term = terms.get(word)
        if term is None:
            term = "" if len(word) < 2 or word in STOP_WORDS else stem(word)
            if len(terms) < 200_000:
                terms[word] = term
        if term:
            out.append(term)
    return out


class PairAnalyzer(PalaceAnalyzer):
    """Adjacent pairs of PalaceAnalyzer's terms, `first_second`, never across PARTS or NEIGHBOURS; a pair counts at
    the smaller of its words' boosts (a neighbour's pairs at NEIGHBOUR_BOOST)."""

    def __call__(self, value, positions=False, chars=False, keeporiginal=False, removestops=True, start_pos=0,
                 start_char=0, tokenize=True, mode="", **kwargs):
        pair = Token(positions, chars, removestops=removestops, mode=mode, **kwargs)
        previous, previous_start, previous_end, previous_boost, position = None, 0, 0, 1.0, start_pos
        for token in super().__call__(value, chars=True, mode=mode):
            start = token.startchar
            if previous is not None:
                gap = value[previous_end:start]
                if PARTS not in gap and NEIGHBOURS not in gap:
                    pair.text = f"{previous}_{token.text}"
                    pair.boost = min(previous_boost, token.boost)
                    pair.stopped = False
                    if positions:
                        pair.pos = position
                        position += 1
                    if chars:
                        pair.startchar, pair.endchar = start_char + previous_start, start_char + token.endchar
                    yield pair
            previous, previous_start, previous_end, previous_boost = token.text, start, token.endchar, token.boost


def _schema() -> Schema:
    analyzer = PalaceAnalyzer()
    text = dict(analyzer=analyzer, phrase=False)  # BM25F needs frequencies, not positions: a smaller, faster index
    return Schema(
        path=ID(stored=True, unique=True),
        id=ID(stored=True),
        domain_key=ID(stored=True),
        kind=ID(stored=True),
        time=ID(),
        session=ID(),
        text=TEXT(**text),
        rest=TEXT(**text),
        pairs=TEXT(analyzer=PairAnalyzer(), phrase=False),
        lengths=STORED,  # exact length per text field: statistics leave deleted documents out (livestats.py)
    )


# From this many documents (or whenever numpy is already loaded, as it is with embeddings) a query is scored
# with numpy over whole posting lists (postings.py) instead of whoosh's array union matcher: the same scores,
# and at 100,000 notes 5-20x faster; below, whoosh takes a few ms and a lexical command need not import numpy.
# (Whoosh's default block-skipping union matcher is not exact: at 100,000 notes it left a common term's share
# out of some documents' scores and changed the top 10 of 4 of 75 two-word queries; docs/benchmarks.md.)
SCAN_DOCS = 20_000
# Above this many bytes of segments the index is read through file handles instead of whoosh's memory map,
# where every opened segment file is copied whole into memory (its BufferFile) and kept as long as the
# searcher is: at 100,000 notes that held 265 MB more and took 120-180 ms more CPU to open, for 3-4 ms less
# per query (docs/benchmarks.md). Below it, the map is faster (6.0 against 7.6 ms CPU at 1,000 notes).
MAP_MAX_BYTES = 64 * 1024 * 1024


class RobertsonBM25(LiveBM25F):
    """BM25 over the live documents (livestats.py) with Robertson's idf, ln(1 + (N - df + 0.5) / (df + 0.5)),
    instead of whoosh's ln(N / (df + 1)) + 1: on LoCoMo's turns it gained 2 points of recall@10 in one field
    and changed nothing elsewhere (docs/ranking-experiments.md)."""

    def idf(self, searcher, fieldname, text):
        frequency = self.stats.doc_frequency(fieldname, text)
        if frequency <= 0:
            return 0.0  # only deleted documents hold it: nothing it scores is ever seen
        return math.log(1 + (self.stats.doc_count - frequency + 0.5) / (frequency + 0.5))


def text_of(doc: Doc) -> str:
    """What the `text` field holds for a unit: subject, keywords, anchor, Image, Content, then the neighbours."""
    own = "\n".join(part for part in (doc.subject, doc.keywords, doc.anchor, doc.image, doc.content) if part)
    return f"{own}\n{NEIGHBOURS}{doc.context}" if doc.context else own


def pairs_of(doc: Doc) -> str:
    """What the `pairs` field holds: the unit's own parts with PARTS between them, not a turn's neighbours.

    A section unit gets none (`_add`): a long note's prose gives a pair term per word, each a term of its own
    in whoosh, which made a vault's build 3.5x slower (41 against 12 s for 1,000 notes of 5 KB) for no
    recall on Foam's questions (docs/benchmarks.md)."""
    return PARTS.join(part for part in (doc.subject, doc.keywords, doc.anchor, doc.image, doc.content) if part)


@dataclass
class Doc:
    """The fields the lexical index holds for one unit: a memory, a section of one (path: its note), or a turn
    (path: its session file)."""

    path: str
    id: str
    domain: str
    subject: str
    keywords: str
    anchor: str
    image: str
    content: str
    kind: str = "memory"
    time: str = ""
    session: str = ""
    context: str = ""
    rest: str = ""  # every other word of a note's body (notes.rest_of_body)


class TextIndex:
    """A Whoosh index on disk under .palace/whoosh."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self._index = None
        self._analyzer = PalaceAnalyzer()
        self._pairs = PairAnalyzer()
        self._lengths: tuple[int, dict[str, int]] | None = None  # (generation, live field lengths)
        # One searcher kept open between queries until another commit lands: opening one copies the segment's
        # files into memory (whoosh's BufferFile), 50-100 ms at 100,000 notes. The lock serialises its use.
        self._open: tuple | None = None  # (whoosh index, searcher, [(SegmentArrays, offset)] or None)
        self._lock = threading.RLock()
        self._postings = PostingCache()

    def _current_schema(self) -> bool:
        try:
            return (self.directory / SCHEMA_MARKER).read_text(encoding="utf-8").strip() == SCHEMA_VERSION
        except OSError:
            return False

    def open(self, create: bool = True):
        """Open the index, creating it when missing or built by an older palace; raises PalaceError when absent."""
        if self._index is None:
            if whoosh_index.exists_in(str(self.directory)) and self._current_schema():
                self._index = _storage(self.directory).open_index()
            elif create:
                self.reset()
            else:
                raise PalaceError(f"no search index at {self.directory}")
        return self._index

    def reset(self) -> None:
        """Delete and recreate the index (it is a cache; the notes are the truth). Callers hold the refresh lock."""
        self._forget()
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._index = whoosh_index.create_in(str(self.directory), _schema())
        atomic_write(self.directory / SCHEMA_MARKER, SCHEMA_VERSION + "\n")

    def doc_count(self) -> int:
        """Number of live documents, from the table of contents (no segment is opened)."""
        return sum(segment.doc_count() for segment in self.open()._segments())

    def generation(self) -> int:
        """The generation of the latest commit (changes on every commit, by any process)."""
        return self.open().latest_generation()

    def _add(self, adder: FastAdder, doc: Doc) -> None:
        text, rest = term_counts(text_of(doc)), term_counts(doc.rest)
        plain = dict(path=doc.path, id=doc.id, kind=doc.kind)
        counted = {"text": text, "rest": rest}
        pair_length = 0
        if doc.kind != "section":
            pairs = pairs_of(doc)
            counted["pairs"] = self._pair_counts(pairs)
            # A part of n terms gives n - 1 pairs (PairAnalyzer): counted from the terms, not by pairing them again.
            pair_length = sum(max(0, len(_terms_of(part)) - 1) for part in pairs.split(PARTS))
        if doc.domain:
            plain["domain_key"] = doc.domain
        plain[LENGTHS] = (text[1], rest[1], pair_length)
        if doc.time:
            plain["time"] = doc.time
        if doc.session:
            plain["session"] = doc.session
        adder.add(plain, counted)

    def _pair_counts(self, value: str) -> tuple[dict[str, tuple[int, float]], int]:
        """term_counts of the `pairs` field: PairAnalyzer's pairs."""
        counts: dict[str, tuple[int, float]] = {}
        length = 0
        for token in self._pairs(value):
            frequency, weight = counts.get(token.text, (0, 0.0))
            counts[token.text] = (frequency + 1, weight + token.boost)
            length += 1
        return counts, length

    def apply(self, upserts: Iterable[Doc], deletes: Iterable[str], progress: Progress | None = None,
              delete_ids: Iterable[str] = ()) -> int:
        """Delete docs by path (and by memory id), then add `upserts`, in one commit under the write lock."""
        ix = self.open()
        # Deleted documents stay in their segment until it is merged; past a bound, merge all (every search
        # takes them back out of the statistics, at a cost that grows with their number).
        optimize = ix.doc_count_all() - ix.doc_count() > max(MAX_DELETED, MAX_DELETED_SHARE * ix.doc_count())
        writer = ix.writer(timeout=LOCK_TIMEOUT_S, limitmb=SEGMENT_MB)
        try:
            upserts = list(upserts)
            for path in sorted(set(deletes) | {doc.path for doc in upserts}):
                writer.delete_by_term("path", path)
            for note_id in sorted(set(delete_ids)):
                writer.delete_by_term("id", note_id)
            written = self._add_all(FastAdder(writer), upserts, progress, len(upserts))
            writer.commit(optimize=optimize)
        except BaseException:
            _cancel(writer)
            raise
        self._forget()  # reopen to see the new generation
        return written

    def _add_all(self, adder: FastAdder, docs: Iterable[Doc], progress: Progress | None = None, total: int = 0) -> int:
        """Add docs to an open writer, reporting progress every 500; returns how many."""
        written = 0
        for doc in docs:
            self._add(adder, doc)
            written += 1
            if progress and written % 500 == 0:
                progress("lexical index", written, total)
        return written

    def _fresh_index(self):
        """The index as on disk now, a new one when it cannot be read (a cache: the caller holds the refresh lock)."""
        self._forget()  # look at the disk again: the directory may have been deleted under a cached handle
        try:
            ix = self.open()
            ix.latest_generation()
        except Exception:
            self.reset()
            ix = self.open()
        return ix

    def rebuild(self, docs: Iterable[Doc], progress: Progress | None = None, total: int = 0) -> int:
        """Replace every document in one commit; readers see the old index until it lands."""
        return self.rebuild_parallel([(iter, (docs,))], progress, total)

    def rebuild_parallel(self, jobs: list[tuple], progress: Progress | None = None, total: int = 0) -> int:
        """`rebuild` from the documents `function(*args)` yields for each (function, args) job, in job order: the
        first job in this process, the others in worker processes (picklable jobs), one segment each (segments.py)."""
        # Held while the workers write (no other writer commits); readers see the old index until the commit.
        writer = self._fresh_index().writer(timeout=LOCK_TIMEOUT_S)
        limit = max(32, SEGMENT_MB // len(jobs))
        workers = None
        try:
            workers = Workers([(write_segment, (str(self.directory), function, args, limit))
                               for function, args in jobs[1:]])
            parts = [write_segment(str(self.directory), *jobs[0], limit, progress, total)] + workers.results()
            commit_segments(writer, [segment for segment, written in parts if written])
        except BaseException:
            _cancel(writer)
            raise
        finally:
            if workers is not None:
                workers.stop()
        self._forget()
        return sum(written for _, written in parts)

    def stats(self, reader) -> LiveStats:
        """Statistics of the live documents of a reader of this index (field lengths kept per generation)."""
        generation = reader.generation()
        kept = self._lengths[1] if self._lengths and self._lengths[0] == generation else None
        stats = LiveStats(reader, FIELDS, kept)
        if kept is None and generation is not None:
            self._lengths = (generation, stats.field_lengths())
        return stats

    def pair_terms(self, text: str) -> list[str]:
        """The adjacent pairs of a query's analysed terms (the `pairs` field's terms), deduplicated in order."""
        return list(dict.fromkeys(token.text for token in self._pairs(text)))

    def terms(self, text: str) -> list[str]:
        """The analysed terms of a query (stemmed, stopwords removed), deduplicated in order."""
        seen = []
        for token in self._analyzer(text):
            if token.text not in seen:
                seen.append(token.text)
        return seen

    def words(self, text: str) -> list[tuple[str, str]]:
        """(term, the word as written) for every analysed word of a text, in order, repeats included."""
        return [(token.text, text[token.startchar : token.endchar]) for token in self._analyzer(text, chars=True)]

    def document_frequencies(self, terms: Iterable[str]) -> tuple[int, dict[str, int]]:
        """(documents in the index, term -> documents holding it in any field), the field counts' maximum
        standing in for their union."""
        with self._lock:
            searcher = self._searcher()
            stats = searcher.weighting.stats
            frequencies = {term: max(stats.doc_frequency(name, term) for name in WORD_FIELDS) for term in set(terms)}
            return stats.doc_count, frequencies

    def holding_every(self, terms: list[str], ids: Iterable[str]) -> set[str]:
        """The ids among `ids` whose units hold every one of `terms` (analysed terms) in a word field."""
        ids = sorted(set(ids))
        if not terms or not ids:
            return set()
        query = And([Or([Term(field, term) for field in WORD_FIELDS]) for term in dict.fromkeys(terms)])
        with self._lock:
            searcher = self._searcher()
            docs = searcher.docs_for_query(And([query, Or([Term("id", i) for i in ids])]))
            return {searcher.stored_fields(docnum)["id"] for docnum in docs}

    def _searcher(self):
        """The kept searcher (its weighting holds the live statistics), reopened when a commit landed since."""
        ix = self.open(create=False)
        if self._open is not None:
            kept_ix, searcher, _ = self._open
            if kept_ix is ix and searcher.up_to_date():
                return searcher
            self._close_searcher()
        searcher = ix.searcher()
        try:
            searcher.weighting = RobertsonBM25(self.stats(searcher.reader()), B=B, K1=K1)
        except BaseException:
            searcher.close()
            raise
        self._open = (ix, searcher, None)
        return searcher

    def _segments(self) -> list:
        """[(SegmentArrays, docnum offset)] of the kept searcher's segments, made on first use."""
        ix, searcher, segments = self._open
        if segments is None:
            segments = [(SegmentArrays(leaf), offset) for leaf, offset in searcher.reader().leaf_readers()
                        if leaf.segment() is not None]  # an empty index has one reader and no segment
            self._open = (ix, searcher, segments)
        return segments

    def _close_searcher(self) -> None:
        if self._open is not None:
            searcher, self._open = self._open[1], None
            try:
                searcher.close()
            except Exception:  # closing a reader whose files went away: nothing is left to release
                pass

    def _forget(self) -> None:
        """Drop the open index and searcher: the next use reads the disk again."""
        with self._lock:
            self._close_searcher()
            self._index = None

    def search(self, text: str, limit: int = 10, domains: Iterable[str] | None = None,
               field_weights: dict[str, float] | None = None, exclude: Iterable[str] = (),
               only: Iterable[str] | None = None, scope: Scope | None = None) -> list[tuple[str, float]]:
        """BM25 search: [(unit id, score)] best first, within the scope (or domains: memories only); empty when
        the query has no usable terms or nothing can be in scope.

        `exclude` leaves those ids out; `only` keeps just those (cheaper when most are left out)."""
        terms = self.terms(text)
        if not terms:
            return []
        weights = field_weights_of(field_weights)
        clauses = [Term(field, term, boost=weights[field]) for term in terms for field in WORD_FIELDS
                   if weights[field] > 0]
        if weights["pairs"] > 0:
            clauses += [Term("pairs", pair, boost=weights["pairs"]) for pair in self.pair_terms(text)]
        limits = search_limits(Scope(kind="memory", domains=tuple(domains)) if domains is not None else scope, only, exclude)
        return self._search(clauses, limit, *limits) if limits is not None else []

    def _search(self, clauses: list[Term], limit: int | None, allowed, mask) -> list[tuple[str, float]]:
        """The BM25 ranking of the clauses among the allowed documents, the masked ones left out; a reader that
        went away is reopened, a damaged index is forgotten (the next refresh rebuilds it)."""
        query = Or(clauses)
        query.matcher_type = Or.ARRAY_MATCHER  # scores every match: exact BM25, unlike the block-skipping tree
        for attempt in range(RETRIES):
            try:
                with self._lock:
                    searcher = self._searcher()
                    if _scan_wanted(searcher.doc_count()):
                        triples = [(c.fieldname, c.text, c.boost) for c in clauses]
                        return self._scanned(searcher, triples, limit, allowed, mask)
                    return ranked(searcher, query, limit, filter=allowed, mask=mask)
            except (OSError, whoosh_index.IndexError):
                # A concurrent commit merged away a segment this reader was opening: reopen and try again.
                self._forget()
                if attempt == RETRIES - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
            except DAMAGE as exc:
                # A damaged file (a disk fault, a hand edit): forget the index so the next refresh rebuilds it.
                (self.directory / SCHEMA_MARKER).unlink(missing_ok=True)
                self._forget()
                raise PalaceError(f"the search index under {self.directory} is damaged ({type(exc).__name__}); "
                                  "it is rebuilt by the next command, or now by `palace index`") from None
        return []

    def _scanned(self, searcher, clauses, limit: int | None, allowed, masked) -> list[tuple[str, float]]:
        """What ranked returns, scored by postings.top_k: [(id, score)] best first, ties in id order."""
        if limit is not None and limit <= 0:
            return []
        allowed = None if allowed is None else set(searcher.docs_for_query(allowed))
        masked = None if masked is None else set(searcher.docs_for_query(masked))
        best = top_k(searcher, self._segments(), clauses, searcher.weighting, limit, self._postings, allowed, masked)
        hits = sorted(((searcher.stored_fields(docnum)["id"], score) for docnum, score in best),
                      key=lambda h: (-h[1], h[0]))
        return hits if limit is None else hits[:limit]

    def forget_postings(self) -> None:
        """Empty the decoded-postings cache (a benchmark times queries whose terms it has not seen)."""
        self._postings.clear()

    def close(self) -> None:
        self._forget()


def _storage(directory: Path) -> FileStorage:
    """The index's files: memory-mapped when small, read through file handles when big (MAP_MAX_BYTES)."""
    try:
        size = sum(entry.stat().st_size for entry in os.scandir(directory) if entry.name.endswith(".seg"))
    except OSError:
        size = 0
    return FileStorage(str(directory), supports_mmap=size <= MAP_MAX_BYTES)


def _scan_wanted(documents: int) -> bool:
    """Whether to score with numpy (postings.py) rather than whoosh's matcher: a big index, or numpy already paid for."""
    return documents >= SCAN_DOCS or "numpy" in sys.modules


def _cancel(writer) -> None:
    """Cancel a write; when the write failed half-way (a full disk while whoosh closed a segment file), cancel
    can fail on the files already closed, and the first error, not that one, is what to report."""
    try:
        writer.cancel()
    except (OSError, ValueError):
        try:
            writer._finish()  # what cancel does after closing the files: drop temp storage, release the write lock
        except (OSError, ValueError):
            pass


def field_weights_of(configured: dict | None) -> dict[str, float]:
    """The query's field weights: the defaults, with palace.toml's [retrieval] field_weights over them."""
    if not configured:
        return DEFAULT_FIELD_WEIGHTS
    unknown = sorted(set(configured) - set(FIELDS))
    if unknown:
        raise ConfigError(f"palace.toml: [retrieval] field_weights names {', '.join(unknown)}; the lexical index has "
                          f"the fields {', '.join(FIELDS)} (one `text` field since issue 16: subject, keywords, "
                          "anchor, Image and Content together)")
    return {**DEFAULT_FIELD_WEIGHTS, **{name: float(weight) for name, weight in configured.items()}}


__all__ = ["Doc", "TextIndex", "DEFAULT_FIELD_WEIGHTS", "FIELDS", "And"]
