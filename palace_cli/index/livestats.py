"""Collection statistics of the live documents of a whoosh index: what a fresh build of the same documents counts.

Whoosh keeps a deleted document in its segment until the segment is merged, and keeps counting it: in the
number of documents, in every term's document frequency and in each field's total length. So after an
incremental update, BM25 scores differ from those of a fresh build and ranks can swap. This module takes the
deleted documents back out: the count from the live count, document frequencies by looking each deleted
document up in the term's postings, and field lengths from the exact lengths each document stores (whoosh's
own per-document lengths are rounded to a byte).
"""

from __future__ import annotations

from math import log

from whoosh.scoring import BM25F, BM25FScorer

LENGTHS = "lengths"  # the stored field holding a document's exact length per text field, in FIELDS order


class LiveStats:
    """Document count, document frequencies and field lengths of a reader's live documents."""

    def __init__(self, reader, fields: tuple[str, ...], lengths: dict[str, int] | None = None):
        self.reader = reader
        self.fields = fields
        self.doc_count = reader.doc_count()
        # (leaf reader, sorted deleted docnums) of every segment holding deleted documents
        self.deleted = [(leaf, sorted(leaf.deleted_docs_set)) for leaf, _offset in reader.leaf_readers()
                        if leaf.has_deletions()]
        self._lengths = lengths  # the field lengths of this generation, when a caller kept them
        self._frequencies: dict[tuple[str, str], int] = {}

    def field_lengths(self) -> dict[str, int]:
        """Total length of every text field over the live documents."""
        if self._lengths is None:
            gone = [0] * len(self.fields)
            for leaf, docnums in self.deleted:
                for docnum in docnums:
                    stored = leaf.stored_fields(docnum).get(LENGTHS) or ()
                    for i, length in enumerate(stored[: len(gone)]):
                        gone[i] += length
            self._lengths = {name: self.reader.field_length(name) - gone[i] for i, name in enumerate(self.fields)}
        return self._lengths

    def field_length(self, fieldname: str) -> int:
        """Total length of a field over the live documents."""
        lengths = self.field_lengths()
        return lengths[fieldname] if fieldname in lengths else self.reader.field_length(fieldname)

    def avg_field_length(self, fieldname: str) -> float:
        """Mean length of a field over the live documents."""
        return self.field_length(fieldname) / (self.doc_count or 1)

    def doc_frequency(self, fieldname: str, text) -> int:
        """Number of live documents holding the term in the field."""
        key = (fieldname, text)
        if key not in self._frequencies:
            count = self.reader.doc_frequency(fieldname, text)
            for leaf, docnums in self.deleted:
                count -= _deleted_holding(leaf, fieldname, text, docnums)
            self._frequencies[key] = count
        return self._frequencies[key]


def _deleted_holding(leaf, fieldname: str, text, docnums: list[int]) -> int:
    """How many of the (deleted) docnums hold the term, found by skipping through its raw postings."""
    if (fieldname, text) not in leaf:
        return 0
    # The segment's own postings, deletions not filtered out (the reader's postings() would hide them).
    matcher = leaf._terms.matcher(fieldname, leaf._text_to_bytes(fieldname, text), leaf.schema[fieldname].format)
    if leaf.doc_frequency(fieldname, text) <= len(docnums):  # a rare term: walk its postings
        deleted = leaf.deleted_docs_set
        return sum(1 for docnum in matcher.all_ids() if docnum in deleted)
    found = 0
    for docnum in docnums:
        if not matcher.is_active():
            break
        if matcher.id() < docnum:
            matcher.skip_to(docnum)
            if not matcher.is_active():
                break
        if matcher.id() == docnum:
            found += 1
    return found


class LiveBM25F(BM25F):
    """Whoosh's BM25F with its idf and average field lengths taken over the live documents only."""

    def __init__(self, stats: LiveStats, B=0.75, K1=1.2):
        super().__init__(B=B, K1=K1)
        self.stats = stats

    def idf(self, searcher, fieldname, text):
        frequency = self.stats.doc_frequency(fieldname, text)
        if frequency <= 0:
            return 0.0  # only deleted documents hold it: nothing it scores is ever seen
        return log(self.stats.doc_count / (frequency + 1)) + 1

    def scorer(self, searcher, fieldname, text, qf=1):
        scorer = super().scorer(searcher, fieldname, text, qf=qf)
        if isinstance(scorer, BM25FScorer):
            scorer.avgfl = self.stats.avg_field_length(fieldname) or 1
            scorer.setup(searcher, fieldname, text)  # the quality bounds from the live average
        return scorer
