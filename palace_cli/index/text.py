"""The lexical index: Whoosh BM25F over a memory's fields. The only module that imports whoosh."""

from __future__ import annotations

import pickle
import shutil
import struct
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from whoosh import index as whoosh_index
from whoosh.analysis import Analyzer, Token
from whoosh.analysis.filters import STOP_WORDS
from whoosh.analysis.tokenizers import default_pattern
from whoosh.fields import ID, STORED, TEXT, Schema
from whoosh.lang.porter import stem
from whoosh.query import And, Or, Term, TermRange
from whoosh.writing import CLEAR

from ..errors import PalaceError
from ..notes import atomic_write
from ..progress import Progress
from .livestats import LENGTHS, LiveBM25F, LiveStats
from .scope import Scope

# Query-time field weights. Chosen by measurement on example-palace/queries.jsonl
# (see docs/search.md, "Field weights"); override in palace.toml [retrieval] field_weights.
# `context` is a turn's neighbours' text (see index/turns.py); memories leave it empty. `rest` is every other
# word of a note's body (notes.rest_of_body), measured in docs/search.md ("The rest of the body").
DEFAULT_FIELD_WEIGHTS = {"subject": 1.0, "keywords": 1.0, "anchor": 0.5, "image": 0.2, "content": 1.0, "rest": 0.1,
                         "domain": 0.0, "context": 0.5}
FIELDS = tuple(DEFAULT_FIELD_WEIGHTS)
LOCK_TIMEOUT_S = 30.0
MAX_DELETED, MAX_DELETED_SHARE = 500, 0.01  # deleted documents kept before an update merges every segment


SCHEMA_VERSION = "5"  # bump when the schema or analyzer changes: old indexes are rebuilt
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
            token.boost = 1.0
            token.stopped = False
            if positions:
                token.pos = position
                position += 1
            if chars:
                token.startchar, token.endchar = start_char + match.start(), start_char + match.end()
            yield token


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
        subject=TEXT(**text),
        keywords=TEXT(**text),
        anchor=TEXT(**text),
        image=TEXT(**text),
        content=TEXT(**text),
        rest=TEXT(**text),
        domain=TEXT(**text),
        context=TEXT(**text),
        lengths=STORED,  # exact length per text field: statistics leave deleted documents out (livestats.py)
    )


@dataclass
class Doc:
    """The fields the lexical index holds for one unit: a memory, or a turn (path: its session file)."""

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
        self._lengths: tuple[int, dict[str, int]] | None = None  # (generation, live field lengths)

    def _current_schema(self) -> bool:
        try:
            return (self.directory / SCHEMA_MARKER).read_text(encoding="utf-8").strip() == SCHEMA_VERSION
        except OSError:
            return False

    def open(self, create: bool = True):
        """Open the index, creating it when missing or built by an older palace; raises PalaceError when absent."""
        if self._index is None:
            if whoosh_index.exists_in(str(self.directory)) and self._current_schema():
                self._index = whoosh_index.open_dir(str(self.directory))
            elif create:
                self.reset()
            else:
                raise PalaceError(f"no search index at {self.directory}")
        return self._index

    def reset(self) -> None:
        """Delete and recreate the index (it is a cache; the notes are the truth). Callers hold the refresh lock."""
        self._index = None
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

    def _add(self, writer, doc: Doc) -> None:
        fields = dict(path=doc.path, id=doc.id, kind=doc.kind, subject=doc.subject, keywords=doc.keywords,
                      anchor=doc.anchor, image=doc.image, content=doc.content, context=doc.context, rest=doc.rest)
        if doc.domain:
            fields.update(domain_key=doc.domain, domain=doc.domain.replace("-", " "))
        fields[LENGTHS] = tuple(self._length(fields.get(name) or "") for name in FIELDS)
        if doc.time:
            fields["time"] = doc.time
        if doc.session:
            fields["session"] = doc.session
        writer.add_document(**fields)

    def apply(self, upserts: Iterable[Doc], deletes: Iterable[str], progress: Progress | None = None,
              delete_ids: Iterable[str] = ()) -> int:
        """Delete docs by path (and by memory id), then add `upserts`, in one commit under the write lock."""
        ix = self.open()
        # Deleted documents stay in their segment until it is merged; past a bound, merge all (every search
        # takes them back out of the statistics, at a cost that grows with their number).
        optimize = ix.doc_count_all() - ix.doc_count() > max(MAX_DELETED, MAX_DELETED_SHARE * ix.doc_count())
        writer = ix.writer(timeout=LOCK_TIMEOUT_S, limitmb=256)
        try:
            upserts = list(upserts)
            for path in sorted(set(deletes) | {doc.path for doc in upserts}):
                writer.delete_by_term("path", path)
            for note_id in sorted(set(delete_ids)):
                writer.delete_by_term("id", note_id)
            written = self._add_all(writer, upserts, progress, len(upserts))
            writer.commit(optimize=optimize)
        except BaseException:
            writer.cancel()
            raise
        self._index = None  # reopen to see the new generation
        return written

    def _add_all(self, writer, docs: Iterable[Doc], progress: Progress | None = None, total: int = 0) -> int:
        """Add docs to an open writer, reporting progress every 500; returns how many."""
        written = 0
        for doc in docs:
            self._add(writer, doc)
            written += 1
            if progress and written % 500 == 0:
                progress("lexical index", written, total)
        return written

    def rebuild(self, docs: Iterable[Doc], progress: Progress | None = None, total: int = 0) -> int:
        """Replace every document in one commit; readers see the old index until it lands."""
        self._index = None  # look at the disk again: the directory may have been deleted under a cached handle
        try:
            ix = self.open()
            ix.latest_generation()
        except Exception:  # an unreadable index is only a cache: start a new one (the caller holds the refresh lock)
            self.reset()
            ix = self.open()
        writer = ix.writer(timeout=LOCK_TIMEOUT_S, limitmb=256)
        try:
            written = self._add_all(writer, docs, progress, total)
            writer.commit(mergetype=CLEAR)
        except BaseException:
            writer.cancel()
            raise
        self._index = None
        return written

    def _length(self, text: str) -> int:
        """The number of terms whoosh counts as a field's length (what the analyzer keeps)."""
        words = (match.group().lower() for match in default_pattern.finditer(text))
        return sum(1 for word in words if len(word) >= 2 and word not in STOP_WORDS)

    def stats(self, reader) -> LiveStats:
        """Statistics of the live documents of a reader of this index (field lengths kept per generation)."""
        generation = reader.generation()
        kept = self._lengths[1] if self._lengths and self._lengths[0] == generation else None
        stats = LiveStats(reader, FIELDS, kept)
        if kept is None and generation is not None:
            self._lengths = (generation, stats.field_lengths())
        return stats

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
        with self.open(create=False).searcher() as searcher:
            stats = self.stats(searcher.reader())
            frequencies = {term: max(stats.doc_frequency(name, term) for name in FIELDS) for term in set(terms)}
            return stats.doc_count, frequencies

    def search(self, text: str, limit: int = 10, domains: Iterable[str] | None = None,
               field_weights: dict[str, float] | None = None, exclude: Iterable[str] = (),
               only: Iterable[str] | None = None, scope: Scope | None = None) -> list[tuple[str, float]]:
        """BM25F search: [(unit id, score)] best first, within the scope (or domains: memories only); empty when
        the query has no usable terms or nothing can be in scope.

        `exclude` leaves those ids out; `only` keeps just those (cheaper when most are left out)."""
        terms = self.terms(text)
        if not terms:
            return []
        weights = field_weights or DEFAULT_FIELD_WEIGHTS
        clauses = [Term(field, term, boost=weight) for term in terms for field, weight in weights.items() if weight > 0]
        query = Or(clauses)
        # Whoosh's default binary tree of union matchers spends most of a long query in block-quality
        # bookkeeping; the array matcher gives the same ranking (checked on SciFact) at about 2/3 of
        # the median time and 1/3 of the p95.
        query.matcher_type = Or.ARRAY_MATCHER
        if domains is not None:
            scope = Scope(kind="memory", domains=tuple(domains))
        if scope is not None and not (scope.memories or scope.turns):
            return []
        domain_filter = _filter(scope) if scope is not None and not scope.unbounded else None
        if only is not None:
            only = sorted(only)
            if not only:
                return []
            kept = Or([Term("id", i) for i in only])
            domain_filter = kept if domain_filter is None else And([domain_filter, kept])
        exclude = sorted(exclude)
        mask = Or([Term("id", i) for i in exclude]) if exclude else None
        for attempt in range(RETRIES):
            try:
                with self.open(create=False).searcher() as searcher:
                    searcher.weighting = LiveBM25F(self.stats(searcher.reader()), B=0.75, K1=1.2)
                    return _ranked(searcher, query, limit, filter=domain_filter, mask=mask)
            except (OSError, whoosh_index.IndexError):
                # A concurrent commit merged away a segment this reader was opening: reopen and try again.
                self._index = None
                if attempt == RETRIES - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
            except DAMAGE as exc:
                # A damaged file (a disk fault, a hand edit): forget the index so the next refresh rebuilds it.
                (self.directory / SCHEMA_MARKER).unlink(missing_ok=True)
                self._index = None
                raise PalaceError(f"the search index under {self.directory} is damaged ({type(exc).__name__}); "
                                  "it is rebuilt by the next command, or now by `palace index`") from None
        return []

    def close(self) -> None:
        self._index = None


def _ranked(searcher, query, limit: int | None, **options) -> list[tuple[str, float]]:
    """[(id, score)] best first, equal scores in id order: whoosh breaks ties by document number, which differs
    between an incrementally updated index and a fresh build, so ties at the cut are fetched whole."""
    if limit is not None and limit <= 0:
        return []
    want = None if limit is None else limit + 8
    while True:
        results = searcher.search(query, limit=want, **options)
        hits = sorted(((hit["id"], float(hit.score)) for hit in results), key=lambda h: (-h[1], h[0]))
        if want is None or len(hits) < want or hits[limit - 1][1] > hits[-1][1]:
            return hits if limit is None else hits[:limit]
        want *= 2


def _filter(scope: Scope):
    """The whoosh query a scope allows: (memories in its domains | turns in its sessions) within its time window."""
    parts = []
    if scope.memories:
        memory = Term("kind", "memory")
        if scope.domains is not None:
            memory = And([memory, Or([Term("domain_key", d) for d in scope.domains])])
        parts.append(memory)
    if scope.turns:
        turn = Term("kind", "turn")
        if scope.sessions is not None:
            turn = And([turn, Or([Term("session", s) for s in scope.sessions])])
        parts.append(turn)
    allowed = parts[0] if len(parts) == 1 else Or(parts)
    if scope.timed:
        allowed = And([allowed, TermRange("time", scope.since, scope.upper(), startexcl=False, endexcl=False)])
    return allowed


__all__ = ["Doc", "TextIndex", "DEFAULT_FIELD_WEIGHTS", "FIELDS", "And"]
