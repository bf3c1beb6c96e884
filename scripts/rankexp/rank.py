"""One ranking variant end to end: lexical, dense, fusion, hop-1 routing, the trimmed context; per-query results."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, fields, replace

import numpy as np

from .corpora import Corpus, tokens
from .lexical import LexConfig, top
from .text import analyzer

DEPTH = 100  # palace asks each ranker for its top 100 before fusing
KEEP = 50    # ranked rows kept per query (LoCoMo reports recall@50)


@dataclass(frozen=True)
class Variant:
    """A full retrieval configuration; `spec()` spells it so any row of a table can be re-run with --variant."""

    lex: LexConfig = field(default_factory=LexConfig)
    fuse: str = "rrf"         # lexical | dense | rrf | minmax | zscore | tiebreak
    rrf_k: float = 60
    w_lex: float = 1.0        # RRF weights
    w_dense: float = 1.0
    alpha: float = 0.5        # lexical share in minmax / zscore sums
    depth: int = DEPTH
    embed: str = "palace"     # which text is embedded (corpora.EMBED_TEXTS)
    route: str = "flat"       # flat | today | today-noguard | keep:F | top:N | boost:B | reorder:K | aggregate:N
    trim_lex: float = 0.5     # palace's trim: a later hit is handed over when its BM25 >= this share of the best's...
    trim_dense: float = 0.08  # ...or its cosine is within this of the best's (1 = no trim)
    # ideas after issue 16's recommendation (docs/ranking-experiments.md, section 6)
    mv: str = ""              # several vectors per doc: parts | chunks:N (words) | turn (LoCoMo: the turn alone too)
    mv_w: float = 1.0         # cosine = (1 - mv_w) x whole text's + mv_w x the best of whole and parts
    prf: str = ""             # lexical RM3-style feedback K:M:B: top K fused docs give M terms at weight B
    rocchio: str = ""         # dense feedback K:B: query vector + B x mean of the top K fused docs' vectors
    peak: float = 0.0         # alpha per query: 0.5 + peak x (lexical list's top gap - dense list's top gap)
    phrase: float = 0.0       # fused bonus when the doc's subject (2+ terms) appears as a phrase in the query
    bigram: float = 0.0       # BM25 over word bigrams of the one field, added at this weight to the lexical score
    pairs: str = "adjacent"   # which term pairs: adjacent (a_b) | unordered (adjacent, either order) | skip (within 2)

    def spec(self) -> str:
        """key=value pairs that differ from the defaults (parse_variant reads them back)."""
        base, out = Variant(), []
        for f in fields(LexConfig):
            value = getattr(self.lex, f.name)
            if value != getattr(base.lex, f.name):
                if f.name == "weights":
                    out += [f"w.{k}={v:g}" for k, v in value if dict(base.lex.weights).get(k, 0.0) != v]
                    out += [f"w.{k}=0" for k in dict(base.lex.weights) if k not in dict(value)]
                elif f.name == "field_b":
                    out += [f"b.{k}={v:g}" for k, v in value]
                elif f.name == "side":
                    out += [f"side.{k}={v:g}" for k, v in value]
                else:
                    out.append(f"{f.name}={value}")
        for f in fields(Variant):
            if f.name != "lex" and getattr(self, f.name) != getattr(base, f.name):
                out.append(f"{f.name}={getattr(self, f.name)}")
        return " ".join(out) or "(today's flat hybrid)"


def parse_variant(spec: str, start: Variant | None = None) -> Variant:
    """Read `model=bm25f k1=1.2 w.image=1 b.content=0.9 fuse=rrf rrf_k=30 route=today` onto a base variant."""
    variant = start or Variant()
    lex = variant.lex
    for item in shlex.split(spec.replace(",", " ")):
        key, _, value = item.partition("=")
        if key.startswith("side."):
            lex = replace(lex, side=tuple({**dict(lex.side), key[5:]: float(value)}.items()))
        elif key.startswith("w."):
            lex = lex.with_weights(**{key[2:]: float(value)})
        elif key.startswith("b."):
            lex = lex.with_b(**{key[2:]: float(value)})
        elif key in {f.name for f in fields(LexConfig)}:
            kind = type(getattr(lex, key))
            lex = replace(lex, **{key: (value.lower() in ("1", "true", "on", "yes")) if kind is bool else kind(value)})
        elif key in {f.name for f in fields(Variant)}:
            kind = type(getattr(variant, key))
            variant = replace(variant, **{key: kind(value)})
        else:
            raise SystemExit(f"unknown variant key {key!r} in {spec!r}")
    return replace(variant, lex=lex)


@dataclass
class Ranked:
    """A query's ranking: doc rows best first, with each row's raw lexical score and cosine when known."""

    rows: list[int]
    lexical: dict[int, float] = field(default_factory=dict)
    dense: dict[int, float] = field(default_factory=dict)
    routed: set[str] | None = None
    fallback: bool = False


class Runner:
    """Ranks a corpus's queries under variants; caches terms, vectors and routes across variants."""

    def __init__(self, corpus: Corpus, cache=None, routes: dict | None = None):
        self.corpus = corpus
        self.cache = cache
        self.routes = routes or {}
        self._doc_vectors: dict[str, np.ndarray] = {}
        self._query_vectors: np.ndarray | None = None
        self._terms: dict = {}
        self._lists: dict = {}  # unmasked top lists per (lexical config | embedding text, query)

    # ---- inputs ----

    def doc_vectors(self, embed: str) -> np.ndarray:
        if embed not in self._doc_vectors:
            self._doc_vectors[embed] = self.cache.get(self.corpus.embed_texts(embed), f"{self.corpus.name} docs ({embed})")
        return self._doc_vectors[embed]

    def query_vectors(self) -> np.ndarray:
        if self._query_vectors is None:
            self._query_vectors = self.cache.get([q.text for q in self.corpus.queries], f"{self.corpus.name} queries")
        return self._query_vectors

    def terms(self, lex: LexConfig, text: str) -> list[str]:
        key = (lex.stem, lex.stopwords, text)
        if key not in self._terms:
            self._terms[key] = analyzer(lex.stem, lex.stopwords).query_terms(text)
        return self._terms[key]

    # ---- ranking ----

    def lexical_scores(self, v: Variant, qi: int) -> np.ndarray:
        """Lexical scores of the query's group, aligned with corpus.groups[group]."""
        q = self.corpus.queries[qi]
        lex = v.lex
        if self.corpus.extra_weights:
            merged = dict(self.corpus.extra_weights)
            merged.update(dict(lex.weights))
            lex = replace(lex, weights=tuple(merged.items()))
        index = self.corpus.lexical(lex.stem, lex.stopwords)[q.group]
        return index.score(self.terms(lex, q.text), lex)

    def dense_scores(self, v: Variant, qi: int, query: np.ndarray | None = None) -> np.ndarray:
        rows = self.corpus.groups[self.corpus.queries[qi].group]
        q = self.query_vectors()[qi] if query is None else query
        whole = self.doc_vectors(v.embed)[rows] @ q
        if not v.mv:
            return whole
        parts, owner = self.part_vectors(v)
        pos = {int(r): i for i, r in enumerate(rows)}
        best = whole.copy()
        if len(owner):
            cos = parts @ q
            for j, row in enumerate(owner):
                i = pos.get(int(row))
                if i is not None and cos[j] > best[i]:
                    best[i] = cos[j]
        return (1 - v.mv_w) * whole + v.mv_w * best

    def part_vectors(self, v: Variant) -> tuple[np.ndarray, np.ndarray]:
        """Extra vectors per doc (text parts or chunks) and the doc row each belongs to."""
        key = ("mv", v.mv, v.embed)
        if key not in self._lists:
            texts, owner = [], []
            kind, _, arg = v.mv.partition(":")
            for row, d in enumerate(self.corpus.docs):
                for text in doc_parts(self.corpus, d, kind, arg, v.embed):
                    texts.append(text)
                    owner.append(row)
            vectors = self.cache.get(texts, f"{self.corpus.name} parts ({v.mv})") if texts else np.zeros((0, 384))
            self._lists[key] = (vectors, np.array(owner, dtype=np.int64))
        return self._lists[key]

    def bigram_scores(self, v: Variant, qi: int) -> np.ndarray:
        q = self.corpus.queries[qi]
        index = self.corpus.bigram_index(v.lex, v.pairs)[q.group]
        terms = list(dict.fromkeys(bigrams(analyzer(v.lex.stem, v.lex.stopwords)(q.text), v.pairs)))
        cfg = replace(v.lex, stem="none", stopwords=False, side=(), weights=(("text", 1.0),))
        return index.score(terms, cfg)

    def rank(self, v: Variant, qi: int, mask: np.ndarray | None = None) -> Ranked:
        """Flat (or masked to some domains) ranking of one query in the variant's fusion."""
        corpus = self.corpus
        rows = corpus.groups[corpus.queries[qi].group]
        id_rank = corpus.id_rank[rows]
        lex_list, dense_list = [], []
        depth = max(DEPTH, KEEP, v.depth)
        lex_scores = cos = None
        if v.fuse != "dense":
            key = ("lex", v.lex, v.bigram, v.pairs, qi, depth)
            if mask is not None or key not in self._lists or v.prf:
                lex_scores = self.lexical_scores(v, qi)
                if v.bigram:
                    lex_scores = lex_scores + v.bigram * self.bigram_scores(v, qi)
                if mask is not None:
                    lex_scores = np.where(mask, lex_scores, 0.0)
                lex_list = top(lex_scores, id_rank, depth)
                if mask is None:
                    self._lists[key] = lex_list
            else:
                lex_list = self._lists[key]
        if v.fuse != "lexical" and self.cache is not None:
            key = ("dense", v.embed, v.mv, v.mv_w, qi, depth)
            if mask is not None or key not in self._lists or v.rocchio:
                cos = self.dense_scores(v, qi)
                if mask is not None:
                    cos = np.where(mask, cos, -np.inf)
                dense_list = top(cos, id_rank, depth, positive=False)
                if mask is None:
                    self._lists[key] = dense_list
            else:
                dense_list = self._lists[key]
        lex_list, dense_list = lex_list[: v.depth], dense_list[: v.depth]
        order = fuse(v, lex_list, dense_list, id_rank)
        if v.phrase:
            order = self.phrase_boost(v, qi, order, lex_list, dense_list, id_rank)
        if v.prf or v.rocchio:
            feedback = order[: int((v.prf or v.rocchio).split(":")[0])]
            if v.prf and lex_list:
                lex_scores = self.expanded_lexical(v, qi, lex_scores, feedback, order)
                if mask is not None:
                    lex_scores = np.where(mask, lex_scores, 0.0)
                lex_list = top(lex_scores, id_rank, depth)[: v.depth]
            if v.rocchio and dense_list:
                _, share = v.rocchio.split(":")
                vectors = self.doc_vectors(v.embed)[rows[feedback]]
                query = self.query_vectors()[qi] + float(share) * vectors.mean(axis=0)
                cos = self.dense_scores(v, qi, query / np.linalg.norm(query))
                if mask is not None:
                    cos = np.where(mask, cos, -np.inf)
                dense_list = top(cos, id_rank, depth, positive=False)[: v.depth]
            order = fuse(v, lex_list, dense_list, id_rank)
            if v.phrase:
                order = self.phrase_boost(v, qi, order, lex_list, dense_list, id_rank)
        order = order[:KEEP]
        return Ranked([int(rows[i]) for i in order], {int(rows[i]): s for i, s in lex_list},
                      {int(rows[i]): s for i, s in dense_list})

    def expanded_lexical(self, v: Variant, qi: int, scores: np.ndarray, feedback: list[int], order) -> np.ndarray:
        """RM3-style: terms of the feedback docs weighted by tf/len x idf x the doc's rank weight, top M added at B."""
        q = self.corpus.queries[qi]
        _, m, share = v.prf.split(":")
        rows = self.corpus.groups[q.group]
        index = self.corpus.lexical(v.lex.stem, v.lex.stopwords)[q.group]
        analyse = analyzer(v.lex.stem, v.lex.stopwords)
        original = set(self.terms(v.lex, q.text))
        weights: dict[str, float] = {}
        n = len(rows)
        for rank, local in enumerate(feedback):
            doc = self.corpus.docs[int(rows[local])]
            terms = [t for f, w in v.lex.weights if w for t in analyse(doc.fields.get(f, ""))]
            if not terms:
                continue
            counts: dict[str, int] = {}
            for t in terms:
                counts[t] = counts.get(t, 0) + 1
            for t, c in counts.items():
                if t in original:
                    continue
                df = max((len(index.fields[f].postings[t][0]) for f in index.fields
                          if f in dict(v.lex.weights) and t in index.fields[f].postings), default=0)
                if df < 2 or df > n / 2:  # a word only this doc has, or half the corpus has, says nothing
                    continue
                idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
                weights[t] = weights.get(t, 0.0) + (c / len(terms)) * idf / (rank + 1)
        chosen = sorted(weights.items(), key=lambda p: (-p[1], p[0]))[: int(m)]
        if not chosen:
            return scores
        out = scores.copy()
        top_weight = chosen[0][1]
        for term, weight in chosen:
            out = out + float(share) * (weight / top_weight) * index.score([term], v.lex)
        return out

    def phrase_boost(self, v: Variant, qi: int, order, lex_list, dense_list, id_rank) -> list[int]:
        """Move up docs whose subject's terms (2 or more) occur in order, adjacent, in the query's terms."""
        q = self.corpus.queries[qi]
        rows = self.corpus.groups[q.group]
        qterms = analyzer(v.lex.stem, v.lex.stopwords)(q.text)
        joined = " " + " ".join(qterms) + " "
        base = fuse_scores(v, lex_list, dense_list)
        boosted = {}
        for i in order:
            doc = self.corpus.docs[int(rows[i])]
            sterms = analyzer(v.lex.stem, v.lex.stopwords)(doc.fields.get("subject", ""))
            hit = len(sterms) >= 2 and (" " + " ".join(sterms) + " ") in joined
            boosted[i] = base.get(i, 0.0) + (v.phrase if hit else 0.0)
        return sorted(boosted, key=lambda i: (-boosted[i], id_rank[i]))


def doc_parts(corpus: Corpus, d, kind: str, arg: str, embed: str) -> list[str]:
    """The extra texts embedded for one doc under a multi-vector variant."""
    if kind == "turn":  # LoCoMo window units: the turn alone, as the turn+date unit embeds it
        line = f"{d.fields['subject']}: {d.fields['content']}" if "subject" in d.fields else d.fields["content"]
        return [f"{d.fields['date']}\n{line}" if "date" in d.fields else line]
    if d.memory is None:  # SciFact: title, then chunks of the abstract
        if kind != "chunks":
            return []
        title, words = d.fields.get("subject", ""), d.fields.get("content", "").split()
        size = int(arg or 120)
        return [f"{title}\n{' '.join(words[i:i + size])}" for i in range(size, len(words), size)]
    f = d.fields
    head = "\n".join(x for x in (f["subject"], f["anchor"]) if x)
    if kind == "parts3":
        keys = f"{head}\n{f['keywords']}" if f["keywords"] else head
        return [keys] + doc_parts(corpus, d, "parts", arg, embed)
    if kind == "image":
        return [f"{head}\n{f['image']}"] if f["image"] else []
    if kind == "parts":
        return [t for t in (f"{head}\n{f['image']}" if f["image"] else "", f"{head}\n{f['content']}" if f["content"] else "") if t]
    if kind == "chunks":
        words = f"{f['content']}\n{f['image']}".split()
        size = int(arg or 120)
        return [f"{f['subject']}\n{' '.join(words[i:i + size])}" for i in range(0, len(words), size)]
    raise SystemExit(f"unknown multi-vector kind {kind!r}")


def bigrams(terms: list[str], kind: str = "adjacent") -> list[str]:
    """Term pairs joined by '_': adjacent ones, adjacent in either order, or within two positions."""
    pairs = list(zip(terms, terms[1:]))
    if kind == "skip":
        pairs += list(zip(terms, terms[2:]))
    if kind in ("unordered", "skip"):
        pairs = [tuple(sorted(p)) for p in pairs]
    return [f"{a}_{b}" for a, b in pairs]


def fuse_scores(v: Variant, lex_list, dense_list) -> dict[int, float]:
    """The min-max fused score per local row (for bonuses added after fusion)."""
    score: dict[int, float] = {}
    for weight, ranking in ((v.alpha, lex_list), (1 - v.alpha, dense_list)):
        if not ranking:
            continue
        values = np.array([s for _, s in ranking])
        low, spread = values.min(), values.max() - values.min()
        if spread == 0:
            low, spread = values.min() - 1.0, 1.0
        for i, s in ranking:
            score[i] = score.get(i, 0.0) + weight * (s - low) / spread
    return score


def fuse(v: Variant, lex_list, dense_list, id_rank) -> list[int]:
    """Local rows in fused order."""
    if v.fuse == "lexical" or not dense_list:
        return [i for i, _ in lex_list] if v.fuse != "dense" else [i for i, _ in dense_list]
    if v.fuse == "dense" or not lex_list:
        return [i for i, _ in dense_list]
    score: dict[int, float] = {}
    if v.fuse == "rrf":
        for weight, ranking in ((v.w_lex, lex_list), (v.w_dense, dense_list)):
            for rank, (i, _) in enumerate(ranking, start=1):
                score[i] = score.get(i, 0.0) + weight / (v.rrf_k + rank)
    elif v.fuse in ("minmax", "zscore"):
        alpha = v.alpha
        if v.peak:
            alpha = min(0.9, max(0.1, alpha + v.peak * (_gap(lex_list) - _gap(dense_list))))
        for weight, ranking in ((alpha, lex_list), (1 - alpha, dense_list)):
            values = np.array([s for _, s in ranking])
            if v.fuse == "minmax":
                low, spread = values.min(), values.max() - values.min()
                if spread == 0:  # one candidate, or all equal: each listed doc gets the full share
                    low, spread = values.min() - 1.0, 1.0
            else:
                low, spread = values.mean(), values.std() or 1.0
            floor = 0.0 if v.fuse == "minmax" else (values.min() - low) / spread  # missing: the list's worst
            normed = {i: (s - low) / spread for i, s in ranking}
            for i in set(normed) | set(score) | {j for j, _ in lex_list} | {j for j, _ in dense_list}:
                score[i] = score.get(i, 0.0) + weight * normed.get(i, floor)
    elif v.fuse == "tiebreak":
        cos = dict(dense_list)
        low = min(cos.values())
        lexd = dict(lex_list)
        keyed = {i: (lexd.get(i, 0.0), cos.get(i, low)) for i in set(lexd) | set(cos)}
        return sorted(keyed, key=lambda i: (-round(keyed[i][0], 9), -keyed[i][1], id_rank[i]))
    else:
        raise SystemExit(f"unknown fusion {v.fuse!r}")
    return sorted(score, key=lambda i: (-score[i], id_rank[i]))


def _gap(ranking) -> float:
    """How far the first score stands above the second, as a share of the list's range (1: alone at the top)."""
    if len(ranking) < 2:
        return 1.0
    spread = ranking[0][1] - ranking[-1][1]
    return (ranking[0][1] - ranking[1][1]) / spread if spread > 0 else 0.0


# ---- the context handed over ----------------------------------------------------------------

def trimmed(ranked: Ranked, k: int = 3, share: float = 0.5, gap: float = 0.08) -> list[int]:
    """palace's trim rule on the top k: keep hits close to the best by BM25 share or cosine gap."""
    rows = ranked.rows[:k]
    if len(rows) <= 1:
        return rows
    best = rows[0]
    kept = [best]
    for row in rows[1:]:
        close = False
        if row in ranked.lexical and best in ranked.lexical:
            close |= ranked.lexical[row] >= share * ranked.lexical[best]
        if row in ranked.dense and best in ranked.dense:
            close |= ranked.dense[row] >= ranked.dense[best] - gap
        if not close:
            break
        kept.append(row)
    return kept


def context_size(corpus: Corpus, rows: list[int]) -> int:
    """Bytes of palace's reference-profile context for memories; tokens of the units for LoCoMo."""
    if corpus.name == "locomo":
        return sum(tokens(corpus.docs[r].context) for r in rows)
    from palace_cli.search.profiles import PROFILES
    from palace_cli.search.context import build_context
    from palace_cli.search.hits import Hit

    spec = PROFILES["reference"]
    hits = [Hit(corpus.docs[r].id, "", corpus.docs[r].domain, "", 0, 0.0, {}, corpus.docs[r].memory) for r in rows]
    return len(build_context(hits, spec, spec.budget).encode("utf-8"))
