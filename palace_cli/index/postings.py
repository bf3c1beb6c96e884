"""Exact BM25 top-k over whoosh's postings with numpy: the big index's matcher.

Whoosh scores a union of terms one posting at a time in Python; at 100,000 notes a 5-word query spent
most of its 120-330 ms there, and a 20-word query about 900 ms. This reads each query term's postings a
block at a time (whoosh's own blocks, decompressed and unpickled as whoosh does), scores them with
whoosh's BM25 formula, document lengths and live statistics as arrays, and keeps the best. The scores are
whoosh's to the last bits of a double (the order of the additions differs), so the ranking is the same;
tests/index/test_postings.py checks it against whoosh's matchers.

It leans on whoosh 2.7's segment internals (the W3 codec's block reader and length column), checked
where they are touched: anything else (another codec, inlined postings) goes through whoosh's matcher API.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from itertools import chain
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# Decoded postings kept between queries, per segment, counted in postings (12 bytes each): the common
# terms of a palace recur in most queries and are the longest to decode; 2 million postings is 16 MB.
CACHE_POSTINGS = 2_000_000


class PostingCache:
    """Decoded (docnums, frequencies) of recently used terms, per segment, least recently used out first."""

    def __init__(self, capacity: int = CACHE_POSTINGS):
        self.capacity = capacity
        self._items: OrderedDict[tuple, tuple] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, key: tuple, load: Callable[[], tuple]) -> tuple:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
                return found
        found = load()
        size = len(found[0])
        if size > self.capacity:
            return found
        with self._lock:
            if key in self._items:  # another thread loaded it meanwhile: count it once
                return self._items[key]
            self._items[key] = found
            self._size += size
            while self._size > self.capacity:
                _, (ids, _) = self._items.popitem(last=False)
                self._size -= len(ids)
        return found

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._size = 0


def term_postings(leaf, fieldname: str, term: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(docnums as int32, frequencies as float32) of a term in one segment, deleted documents included (the
    caller masks them)."""
    import numpy as np

    matcher = leaf._terms.matcher(fieldname, term, leaf.schema[fieldname].format)
    if not hasattr(matcher, "_read_data") or getattr(matcher, "_byteids", False):
        ids, weights = [], []  # inlined postings (a term in one document), another codec: whoosh's own walk
        while matcher.is_active():
            ids.append(matcher.id())
            weights.append(matcher.weight())
            matcher.next()
        return np.array(ids, dtype=np.int32), np.array(weights, dtype=np.float32)
    deltas, weights, starts, bases = [], [], [], []
    count, previous = 0, 0
    while True:
        if matcher._data is None:
            matcher._read_data()
        block_ids, block_weights = matcher._data[0], matcher._data[1]
        n = len(block_ids)
        deltas.append(block_ids)  # each block's ids are deltas from 0: its first id is absolute
        if block_weights is None:
            block_weights = (1.0,) * n
        elif isinstance(block_weights, float):
            block_weights = (block_weights,) * n
        weights.append(block_weights)
        starts.append(count)
        bases.append(previous)
        count += n
        previous = matcher._maxid
        if matcher._lastblock:
            break
        matcher._next_block()
    flat = np.fromiter(chain.from_iterable(deltas), dtype=np.int64, count=count)
    flat[starts] -= np.array(bases, dtype=np.int64)  # make every block's first id a delta from the last block's end
    # whoosh keeps frequencies as float32 (its "f" arrays): stored so, they lose nothing
    return (np.cumsum(flat).astype(np.int32),
            np.fromiter(chain.from_iterable(weights), dtype=np.float32, count=count))


def field_lengths(leaf, fieldname: str) -> np.ndarray:
    """Every document's length in a field as whoosh's BM25 sees it (its one-byte approximation), as floats."""
    import numpy as np
    from whoosh.util.numeric import byte_to_length

    table = np.array([byte_to_length(b) for b in range(256)], dtype=np.float64)
    total = leaf.doc_count_all()
    perdoc = leaf._perdoc
    column = perdoc._cached_reader(f"_{fieldname}_len", _lengths_column()) if hasattr(perdoc, "_cached_reader") else None
    if column is not None and hasattr(column, "_dbfile") and getattr(column, "_fixedlen", 0) == 1:
        stored = min(column._count, total)
        raw = np.zeros(total, dtype=np.uint8)
        raw[:stored] = np.frombuffer(bytes(column._dbfile.get(column._basepos, stored)), dtype=np.uint8)
        return table[raw]
    return np.array([leaf.doc_field_length(d, fieldname, 0) or 0 for d in range(total)], dtype=np.float64)


def _lengths_column():
    from whoosh.codec.whoosh3 import LENGTHS_COLUMN

    return LENGTHS_COLUMN


class SegmentArrays:
    """What scoring a segment needs besides postings: field lengths and the deleted documents, made once."""

    def __init__(self, leaf):
        import numpy as np

        self.leaf = leaf
        self.total = leaf.doc_count_all()
        self.segment_id = leaf.segment().segment_id()  # a segment's postings never change, only its deletions
        self._lengths: dict[str, np.ndarray] = {}
        self.live = np.ones(self.total, dtype=bool)
        if leaf.has_deletions():
            self.live[np.fromiter(leaf.deleted_docs_set, dtype=np.int64)] = False

    def lengths(self, fieldname: str) -> np.ndarray:
        if fieldname not in self._lengths:
            self._lengths[fieldname] = field_lengths(self.leaf, fieldname)
        return self._lengths[fieldname]


def top_k(searcher, segments: list[tuple[SegmentArrays, int]], clauses, weighting, limit: int | None,
          cache: PostingCache, allowed=None, masked=None) -> list[tuple[int, float]]:
    """[(global docnum, score)] of the best `limit` documents matching any clause (field, term, boost), best
    first, with every document tied with the last one kept (the caller orders ties); allowed/masked: sets of
    global docnums to keep to / leave out (None: no such filter)."""
    import numpy as np

    found_ids, found_scores = [], []
    K1 = weighting.K1
    for arrays, offset in segments:
        leaf = arrays.leaf
        scores = np.zeros(arrays.total, dtype=np.float64)
        matched = np.zeros(arrays.total, dtype=bool)
        for fieldname, text, boost in clauses:
            term = leaf._text_to_bytes(fieldname, text)
            if (fieldname, term) not in leaf:
                continue
            B = weighting._field_B.get(fieldname, weighting.B)
            idf = searcher.idf(fieldname, text)
            avgfl = weighting.stats.avg_field_length(fieldname) or 1
            ids, tf = cache.get((arrays.segment_id, fieldname, term),
                                lambda leaf=leaf, fieldname=fieldname, term=term: term_postings(leaf, fieldname, term))
            tf = tf.astype(np.float64)  # whoosh scores in doubles: so must we, for the same ranking
            fl = arrays.lengths(fieldname)[ids]
            part = idf * ((tf * (K1 + 1)) / (tf + K1 * ((1 - B) + B * fl / avgfl)))
            if boost != 1.0:
                part = part * boost
            scores[ids] += part  # a term's docnums are distinct: plain fancy indexing adds once each
            matched[ids] = True
        keep = matched & arrays.live
        if allowed is not None:
            keep &= _members(allowed, offset, arrays.total)
        if masked is not None:
            keep &= ~_members(masked, offset, arrays.total)
        docnums = np.flatnonzero(keep)
        found_ids.append(docnums + offset)
        found_scores.append(scores[docnums])
    if not found_ids:
        return []
    docnums, scores = np.concatenate(found_ids), np.concatenate(found_scores)
    if limit is not None and len(scores) > limit:
        cut = np.partition(scores, len(scores) - limit)[len(scores) - limit]  # the limit-th best score
        chosen = scores >= cut
        docnums, scores = docnums[chosen], scores[chosen]
    order = np.argsort(-scores, kind="stable")
    return [(int(docnums[i]), float(scores[i])) for i in order]


def _members(docnums, offset: int, total: int) -> np.ndarray:
    """A boolean array over one segment's documents: which of the global docnums fall in it."""
    import numpy as np

    inside = np.zeros(total, dtype=bool)
    local = np.fromiter(docnums, dtype=np.int64) - offset
    inside[local[(local >= 0) & (local < total)]] = True
    return inside
