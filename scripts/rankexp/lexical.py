"""BM25 family over multi-field documents, in numpy: whoosh's per-field sum, true BM25F, one concatenated field.

Three ways to score a query term t against a document with fields f (weights w_f, length
normalisation b_f):

- perfield (what palace does today through whoosh): sum over fields of w_f * BM25(tf_f, len_f),
  each field saturating on its own, with whoosh's per-field idf ln(N/(df_f+1))+1 and its
  one-byte quantised field lengths;
- bm25f (Robertson and Zaragoza): one pseudo-frequency tf~ = sum_f w_f tf_f / (1 - b_f + b_f
  len_f/avg_f), saturated once: idf * tf~ (k1+1) / (k1 + tf~), idf over whole documents;
- concat: plain BM25 over the fields written one after another (tf and length summed), which is
  what a "60-line BM25 over subject+image+content" does.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace

import numpy as np
from whoosh.util.numeric import byte_to_length, length_to_byte

from .text import analyzer

# Today's defaults (palace_cli/index/text.py): whoosh BM25F(B=0.75, K1=1.2) and these weights.
PALACE_WEIGHTS = {"subject": 1.0, "keywords": 1.0, "anchor": 0.5, "image": 0.2, "content": 1.0}


@dataclass(frozen=True)
class LexConfig:
    """One lexical ranking: scoring model, k1, b (global and per field), field weights, analyzer, idf."""

    model: str = "perfield"
    k1: float = 1.2
    b: float = 0.75
    weights: tuple = tuple(PALACE_WEIGHTS.items())
    field_b: tuple = ()
    stem: str = "porter"
    stopwords: bool = True
    idf: str = "whoosh"      # whoosh: ln(N/(df+1))+1; robertson: ln(1 + (N-df+0.5)/(df+0.5))
    quantize: bool = True    # whoosh keeps field lengths in one byte; only the perfield model uses this
    side: tuple = ()         # (field, weight): scored as its own BM25 and added (e.g. the body's rest beside one field)

    def with_weights(self, **weights: float) -> LexConfig:
        """A copy with some field weights changed (0 drops a field)."""
        merged = dict(self.weights)
        merged.update(weights)
        return replace(self, weights=tuple(merged.items()))

    def with_b(self, **field_b: float) -> LexConfig:
        """A copy with per-field b overrides."""
        merged = dict(self.field_b)
        merged.update(field_b)
        return replace(self, field_b=tuple(merged.items()))

    def describe(self) -> str:
        """Compact, reproducible spelling of this config (what the tables print)."""
        weights = " ".join(f"{f[:3]}{w:g}" for f, w in self.weights if w)
        fb = (" b[" + " ".join(f"{f[:3]}{v:g}" for f, v in self.field_b) + "]") if self.field_b else ""
        side = (" side[" + " ".join(f"{f}{w:g}" for f, w in self.side) + "]") if self.side else ""
        return f"{self.model}{side} k1={self.k1:g} b={self.b:g}{fb} {self.stem}{'' if self.stopwords else '/stop-off'} idf={self.idf} | {weights}"


def _idf(kind: str, n: int, df: np.ndarray | int):
    if kind == "whoosh":
        return np.log(n / (np.asarray(df) + 1.0)) + 1.0
    return np.log(1.0 + (n - np.asarray(df) + 0.5) / (np.asarray(df) + 0.5))


@dataclass
class FieldIndex:
    """Postings and lengths of one field over one group of documents."""

    postings: dict[str, tuple[np.ndarray, np.ndarray]]
    lengths: np.ndarray
    quantized: np.ndarray
    avg: float


@dataclass
class LexicalIndex:
    """All fields of one group of documents (a corpus, or one LoCoMo conversation) under one analyzer."""

    n: int
    fields: dict[str, FieldIndex] = field(default_factory=dict)

    @classmethod
    def build(cls, docs: list[dict[str, str]], stem: str = "porter", stopwords: bool = True) -> LexicalIndex:
        """Index `docs` (each a dict field -> text)."""
        analyse = analyzer(stem, stopwords)
        names = sorted({name for doc in docs for name in doc})
        index = cls(len(docs))
        for name in names:
            postings: dict[str, dict[int, int]] = defaultdict(dict)
            lengths = np.zeros(len(docs), dtype=np.float64)
            for row, doc in enumerate(docs):
                terms = analyse(doc.get(name, ""))
                lengths[row] = len(terms)
                for term in terms:
                    postings[term][row] = postings[term].get(row, 0) + 1
            arrays = {t: (np.fromiter(p.keys(), dtype=np.int64, count=len(p)),
                          np.fromiter(p.values(), dtype=np.float64, count=len(p))) for t, p in postings.items()}
            quantized = np.array([byte_to_length(length_to_byte(int(x))) for x in lengths], dtype=np.float64)
            index.fields[name] = FieldIndex(arrays, lengths, quantized, float(lengths.mean()) if len(docs) else 0.0)
        return index

    def score(self, terms: list[str], config: LexConfig) -> np.ndarray:
        """Scores of every document for the (analysed, distinct) query terms."""
        scores = self._score(terms, config)
        for name, weight in config.side:
            if weight and name in self.fields:
                scores += self._score(terms, replace(config, model="perfield", weights=((name, weight),), side=()))
        return scores

    def _score(self, terms: list[str], config: LexConfig) -> np.ndarray:
        scores = np.zeros(self.n, dtype=np.float64)
        weights = {f: w for f, w in config.weights if w and f in self.fields}
        field_b = dict(config.field_b)
        if not terms or not weights:
            return scores
        if config.model == "perfield":
            for name, weight in weights.items():
                fi = self.fields[name]
                b = field_b.get(name, config.b)
                avg = fi.avg or 1.0
                lengths = fi.quantized if config.quantize else fi.lengths
                for term in terms:
                    posting = fi.postings.get(term)
                    if posting is None:
                        continue
                    rows, tf = posting
                    idf = _idf(config.idf, self.n, len(rows))
                    norm = config.k1 * ((1 - b) + b * lengths[rows] / avg)
                    scores[rows] += weight * idf * tf * (config.k1 + 1) / (tf + norm)
            return scores
        for term in terms:
            hits = [(name, self.fields[name].postings.get(term)) for name in weights]
            hits = [(name, p) for name, p in hits if p is not None]
            if not hits:
                continue
            rows_all = np.unique(np.concatenate([p[0] for _, p in hits]))
            idf = float(_idf(config.idf, self.n, len(rows_all)))
            if config.model == "bm25f":
                pseudo = np.zeros(self.n)
                for name, (rows, tf) in hits:
                    fi = self.fields[name]
                    b = field_b.get(name, config.b)
                    pseudo[rows] += weights[name] * tf / ((1 - b) + b * fi.lengths[rows] / (fi.avg or 1.0))
                part = pseudo[rows_all]
                scores[rows_all] += idf * part * (config.k1 + 1) / (config.k1 + part)
            elif config.model == "concat":
                tf_sum = np.zeros(self.n)
                for name, (rows, tf) in hits:
                    tf_sum[rows] += weights[name] * tf
                length = self._concat_lengths(weights)
                avg = float(length.mean()) or 1.0
                tf = tf_sum[rows_all]
                norm = config.k1 * ((1 - config.b) + config.b * length[rows_all] / avg)
                scores[rows_all] += idf * tf * (config.k1 + 1) / (tf + norm)
            else:
                raise ValueError(f"unknown lexical model {config.model!r}")
        return scores

    def _concat_lengths(self, weights: dict[str, float]) -> np.ndarray:
        key = tuple(sorted(weights.items()))
        cache = self.__dict__.setdefault("_concat_cache", {})
        if key not in cache:
            cache[key] = sum(w * self.fields[f].lengths for f, w in weights.items())
        return cache[key]


def top(scores: np.ndarray, id_rank: np.ndarray, limit: int, positive: bool = True) -> list[tuple[int, float]]:
    """(row, score) of the best `limit` scores (positive ones only for BM25), ties broken by id."""
    rows = np.flatnonzero(scores > 0) if positive else np.flatnonzero(np.isfinite(scores))
    if len(rows) == 0:
        return []
    if len(rows) > 4 * limit:  # cut first, then sort exactly (ties at the cut are kept by the >= test)
        cut = np.partition(scores[rows], len(rows) - limit)[len(rows) - limit]
        rows = rows[scores[rows] >= cut]
    order = rows[np.lexsort((id_rank[rows], -scores[rows]))][:limit]
    return [(int(r), float(scores[r])) for r in order]
