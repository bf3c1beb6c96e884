"""Domains for corpora that have none: TF-IDF in numpy, spherical k-means with a fixed seed, named by top terms."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from palace_cli.core.text import PROSE_WORDS, STOPWORDS, TERM, prefix_root, slugify

MAX_K = 64
MAX_TERMS = 50_000


@dataclass
class Sparse:
    """A CSR matrix in three numpy arrays (rows are documents, L2-normalised)."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    shape: tuple[int, int]

    def rows(self) -> np.ndarray:
        """The row number of every stored value."""
        return np.repeat(np.arange(self.shape[0]), np.diff(self.indptr))

    def dense_row(self, i: int) -> np.ndarray:
        out = np.zeros(self.shape[1], dtype=np.float32)
        a, b = self.indptr[i], self.indptr[i + 1]
        out[self.indices[a:b]] = self.data[a:b]
        return out


@dataclass
class Tfidf:
    """TF-IDF vectors of a corpus and the vocabulary behind them."""

    matrix: Sparse
    terms: list[str]


@dataclass
class Clustering:
    """Cluster label per document, and per cluster a unique slug name and its top terms."""

    labels: np.ndarray
    names: list[str]
    top_terms: list[list[str]]
    method: str  # "tfidf" or the embedder's model id
    iterations: int = 0
    sizes: list[int] = field(default_factory=list)

    def as_dict(self) -> dict:
        """JSON-ready summary."""
        return {"method": self.method, "k": len(self.names), "iterations": self.iterations,
                "clusters": [{"name": n, "size": s, "terms": t[:8]}
                             for n, s, t in zip(self.names, self.sizes, self.top_terms)]}


def choose_k(n: int) -> int:
    """About sqrt(n/2) clusters, at least 1, at most MAX_K."""
    if n < 8:
        return 1
    return max(2, min(MAX_K, round(math.sqrt(n / 2))))


def topic_terms(text: str) -> list[str]:
    """Terms that can name or separate topics: lowercase ASCII words of three letters or more, hyphenated compounds
    whole (`t-cell`), no numbers, no stopwords of prose.

    Not `core.text.words` on purpose: that one keeps every word (accents folded, hyphens split) for matching;
    cluster names are slugs, and clusters are drawn from the rarer, longer terms.
    """
    return [w for w in TERM.findall(text.lower())
            if len(w) > 2 and w not in STOPWORDS and w not in PROSE_WORDS and not w.isdigit()]


def tfidf(texts: list[str], min_df: int = 2, max_df: float = 0.5) -> Tfidf:
    """Sublinear TF-IDF rows (L2-normalised) over terms in at least min_df and at most max_df of the texts."""
    counts = [Counter(topic_terms(t)) for t in texts]
    df = Counter()
    for c in counts:
        df.update(c.keys())
    n = len(texts)
    ceiling = max(min_df, int(max_df * n)) if n > 20 else n
    kept = sorted((t for t, d in df.items() if min_df <= d <= ceiling), key=lambda t: (-df[t], t))[:MAX_TERMS]
    if not kept:  # tiny corpora: every term counts
        kept = sorted(df, key=lambda t: (-df[t], t))[:MAX_TERMS]
    kept.sort()
    column = {t: i for i, t in enumerate(kept)}
    idf = np.array([math.log((1 + n) / (1 + df[t])) + 1.0 for t in kept], dtype=np.float32)
    indptr, indices, data = [0], [], []
    for c in counts:
        row = sorted((column[t], 1.0 + math.log(v)) for t, v in c.items() if t in column)
        indices.extend(i for i, _ in row)
        data.extend(v for _, v in row)
        indptr.append(len(indices))
    indices_a = np.asarray(indices, dtype=np.int64)
    data_a = np.asarray(data, dtype=np.float32) * idf[indices_a] if indices else np.zeros(0, np.float32)
    indptr_a = np.asarray(indptr, dtype=np.int64)
    matrix = Sparse(indptr_a, indices_a, data_a.astype(np.float32), (n, len(kept)))
    _normalise_rows(matrix)
    return Tfidf(matrix, kept)


def _normalise_rows(m: Sparse) -> None:
    norms = np.sqrt(np.bincount(m.rows(), weights=m.data.astype(np.float64) ** 2, minlength=m.shape[0]))
    norms[norms == 0] = 1.0
    m.data /= norms[m.rows()].astype(np.float32)


def _similarities(x, centroids: np.ndarray) -> np.ndarray:
    """Cosine of every row of x (dense or Sparse, unit rows) to every centroid (unit rows): (n, k)."""
    if isinstance(x, np.ndarray):
        return x @ centroids.T
    n = x.shape[0]
    out = np.zeros((n, centroids.shape[0]), dtype=np.float32)
    columns = np.ascontiguousarray(centroids.T)
    nnz = np.diff(x.indptr)
    start = 0
    while start < n:  # row chunks of about 200k stored values keep the (nnz, k) product small
        stop = int(np.searchsorted(x.indptr, x.indptr[start] + 200_000, side="right")) - 1
        stop = min(max(stop, start + 1), n)
        a, b = x.indptr[start], x.indptr[stop]
        if b > a:
            products = columns[x.indices[a:b]] * x.data[a:b, None]
            nonempty = nnz[start:stop] > 0
            # reduceat over the starts of non-empty rows only: an empty row would end its neighbour's slice
            offsets = x.indptr[start:stop][nonempty] - a
            out[start:stop][nonempty] = np.add.reduceat(products, offsets, axis=0)
        start = stop
    return out


def _sums(x, labels: np.ndarray, k: int) -> np.ndarray:
    """Sum of the rows of x in each cluster: (k, dim)."""
    if isinstance(x, np.ndarray):
        out = np.zeros((k, x.shape[1]), dtype=np.float64)
        np.add.at(out, labels, x)
        return out
    dim = x.shape[1]
    flat = labels[x.rows()] * dim + x.indices
    return np.bincount(flat, weights=x.data, minlength=k * dim).reshape(k, dim)


def _row(x, i: int) -> np.ndarray:
    return x[i].astype(np.float32) if isinstance(x, np.ndarray) else x.dense_row(i)


def _unit(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (rows / norms).astype(np.float32)


def spherical_kmeans(x, k: int, seed: int = 0, max_iter: int = 50) -> tuple[np.ndarray, np.ndarray, int]:
    """(labels, unit centroids, iterations): k-means++ seeding on cosine distance, then Lloyd steps to a fixed point."""
    n = x.shape[0]
    rng = np.random.default_rng(seed)
    if k <= 1 or n <= 1:
        return np.zeros(n, dtype=np.int64), _unit(_sums(x, np.zeros(n, dtype=np.int64), 1)), 0
    chosen = [int(rng.integers(n))]
    centroids = [_row(x, chosen[0])]
    closest = _similarities(x, np.stack(centroids))[:, 0]
    for _ in range(1, k):
        distance = np.clip(1.0 - closest, 0.0, None).astype(np.float64)
        total = distance.sum()
        pick = int(rng.choice(n, p=distance / total)) if total > 0 else int(rng.integers(n))
        chosen.append(pick)
        centroids.append(_row(x, pick))
        closest = np.maximum(closest, _similarities(x, centroids[-1][None, :])[:, 0])
    centres = _unit(np.stack(centroids))
    labels = np.full(n, -1, dtype=np.int64)
    iterations = 0
    for iterations in range(1, max_iter + 1):
        sims = _similarities(x, centres)
        new = sims.argmax(axis=1)
        sizes = np.bincount(new, minlength=k)
        for empty in np.flatnonzero(sizes == 0):  # reseed an empty cluster with the worst-fitting document
            fit = sims[np.arange(n), new]
            worst = int(np.argmin(np.where(sizes[new] > 1, fit, np.inf)))
            sizes[new[worst]] -= 1
            new[worst] = empty
            sizes[empty] = 1
        if np.array_equal(new, labels):
            break
        labels = new
        centres = _unit(_sums(x, labels, k))
    return labels, centres, iterations


def name_clusters(vectors: Tfidf, labels: np.ndarray, k: int, taken: set[str] | None = None,
                  words_per_name: int = 2) -> tuple[list[str], list[list[str]]]:
    """A unique slug per cluster from its most distinctive terms, and those terms (best first).

    A term's score in a cluster is coverage (share of the cluster's documents holding it) times
    precision (share of the documents holding it that are in the cluster): common inside, rare outside.
    """
    m = vectors.matrix
    present = np.bincount(labels[m.rows()] * m.shape[1] + m.indices, minlength=k * m.shape[1])
    present = present.reshape(k, m.shape[1]).astype(np.float64)
    sizes = np.bincount(labels, minlength=k).astype(np.float64)
    score = (present / np.maximum(sizes[:, None], 1.0)) * (present / np.maximum(present.sum(axis=0), 1.0))
    used = set(taken or ())
    names, tops = [], []
    for c in range(k):
        terms: list[str] = []
        for i in np.argsort(-score[c], kind="stable")[:40]:
            term = vectors.terms[i]
            if score[c, i] > 0 and not any(prefix_root(t) == prefix_root(term) for t in terms):  # not tumor and tumors
                terms.append(term)
            if len(terms) == 12:
                break
        tops.append(terms)
        name = ""
        for count in range(words_per_name, len(terms) + 1):
            name = slugify("-".join(terms[:count])) if terms else ""
            if name and name not in used:
                break
        base = name or "cluster"
        suffix = 2
        while name in used or not name:
            name = f"{base}-{suffix}"
            suffix += 1
        used.add(name)
        names.append(name)
    return names, tops


def cluster(texts: list[str], vectors: np.ndarray | None = None, k: int | None = None, seed: int = 0,
            method: str = "tfidf", taken: set[str] | None = None) -> Clustering:
    """Cluster texts into k domains (dense vectors when given, else TF-IDF) and name them from TF-IDF terms."""
    lexical = tfidf(texts)
    k = min(k or choose_k(len(texts)), max(1, len(texts)))
    points = np.asarray(vectors, dtype=np.float32) if vectors is not None else lexical.matrix
    labels, _, iterations = spherical_kmeans(points, k, seed=seed)
    names, tops = name_clusters(lexical, labels, k, taken)
    sizes = np.bincount(labels, minlength=k).tolist()
    return Clustering(labels, names, tops, method if vectors is not None else "tfidf", iterations, sizes)
