"""The lab (corpora, caches, runners) and the named experiment tables."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from . import corpora
from .dense import EmbeddingCache
from .evaluate import Result, bootstrap_ci, paired, run
from .rank import Runner, Variant, parse_variant
from .routing import palace_routes

PRIMARY = {"example": "mrr", "skill": "mrr", "scifact": "ndcg@10", "locomo": "recall@10"}


class Lab:
    """Loads each corpus once, shares one embedding cache, and memoises results per (corpus, unit, variant)."""

    def __init__(self, cache: Path, dense: bool = True, unit: str = "turn", embedder_path: Path | None = None):
        self.cache_dir = Path(cache)
        self.embedder_path = embedder_path
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.dense = dense
        self.unit = unit
        self._embedder = None
        self._embeddings = None
        self._runners: dict[tuple[str, str], Runner] = {}
        self._results: dict = {}

    @property
    def embedder(self):
        if self._embedder is None and self.dense:
            from palace_cli.backends import load_embedder

            self._embedder = load_embedder(self.embedder_path)
            if self._embedder is None:
                raise SystemExit("no embedding model: set PALACE_HOME=~/.cache/palace-test-home (or --lexical-only)")
        return self._embedder

    @property
    def embeddings(self) -> EmbeddingCache | None:
        if self._embeddings is None and self.dense:
            self._embeddings = EmbeddingCache(self.cache_dir / "embeddings", self.embedder)
        return self._embeddings

    def runner(self, name: str, unit: str | None = None) -> Runner:
        unit = unit or self.unit if name == "locomo" else ""
        key = (name, unit)
        if key not in self._runners:
            started = time.time()
            corpus = corpora.load(name, self.cache_dir, self.embedder if self.dense else None, unit or "turn")
            if corpus.palace is not None and self.embeddings is not None:
                # palace's own vectors (keyed by the same text hash) seed the cache: nothing is embedded twice
                model_id, keys, matrix = corpus.palace.index.vectors.load()
                if model_id == self.embeddings.model_id and len(keys):
                    self.embeddings.seed(keys, matrix)
            routes = palace_routes(corpus, self.cache_dir) if corpus.palace is not None and self.dense else {}
            self._runners[key] = Runner(corpus, self.embeddings, routes)
            print(f"[{name}{'/' + unit if unit else ''}: {len(corpus.docs)} docs, {len(corpus.queries)} queries, "
                  f"{corpus.note}; loaded in {time.time() - started:.1f} s]", file=__import__("sys").stderr)
        return self._runners[key]

    def prepare(self, name: str) -> None:
        """Load a corpus and embed its docs (today's text) and queries."""
        runner = self.runner(name)
        if self.dense:
            runner.doc_vectors("palace")
            runner.query_vectors()

    def result(self, name: str, variant: Variant, unit: str | None = None) -> Result:
        unit = (unit or self.unit) if name == "locomo" else ""
        key = (name, unit, variant)
        if key not in self._results:
            self._results[key] = run(self.runner(name, unit), variant)
        return self._results[key]


# ---- checks ---------------------------------------------------------------------------------


def check(lab: Lab) -> str:
    """The harness reproduces palace: analyzer terms, and the whoosh BM25 top 10 on example-palace and the skill corpus."""
    from palace_cli.index.text import PalaceAnalyzer

    from .lexical import top
    from .text import analyzer

    lines = []
    # palace's index is one `text` field plus `rest` at 0.1 since issue 16 (before: the per-field sum, Variant()),
    # and word pairs at 0.25 since section 6
    palace_lexical = parse_variant(f"fuse=lexical {CONCAT} b=0.5 side.rest=0.1 bigram=0.25")
    palace_analyzer, ours = PalaceAnalyzer(), analyzer("porter", True)
    for name in ("example", "skill"):
        runner = lab.runner(name)
        corpus = runner.corpus
        texts = [t for d in corpus.docs for t in d.fields.values()] + [q.text for q in corpus.queries]
        same_terms = sum([t.text for t in palace_analyzer(x)] == ours(x) for x in texts)
        text_index = corpus.palace.index.text
        same, gaps = 0, []
        for qi, q in enumerate(corpus.queries):
            theirs = text_index.search(q.text, limit=10)
            scores = runner.lexical_scores(palace_lexical, qi) + 0.25 * runner.bigram_scores(palace_lexical, qi)
            mine = top(scores, corpus.id_rank, 10)
            same += [i for i, _ in theirs] == [corpus.docs[r].id for r, _ in mine]
            exact = dict(mine)
            gaps += [abs(s - exact[corpus.row_of[i]]) / exact[corpus.row_of[i]] for i, s in theirs
                     if corpus.row_of.get(i) in exact]
        lines.append(f"{name}: analyzer terms equal on {same_terms}/{len(texts)} texts; top-10 ids equal on "
                     f"{same}/{len(corpus.queries)} queries; a shared hit's score differs by {np.median(gaps):.2%} "
                     f"(median), {max(gaps):.2%} at most (whoosh keeps lengths in one byte)")
    return "\n".join(lines) + "\n" + whoosh_one_field(lab)


def whoosh_one_field(lab: Lab, names=("example", "skill", "scifact")) -> str:
    """The recommended lexical ranking built in real whoosh (one `text` field plus `rest` at 0.1, BM25 k1 1.2,
    b 0.5, Robertson idf through a WeightingModel subclass): its MRR beside the harness's, and query times
    beside palace's five-field index on the same machine."""
    import math
    import statistics
    import tempfile

    from whoosh import index as whoosh_index
    from whoosh import scoring
    from whoosh.fields import ID, TEXT, Schema
    from whoosh.query import Or, Term

    from palace_cli.index.text import PalaceAnalyzer

    from .evaluate import query_metrics
    from .rank import Ranked

    class RobertsonBM25F(scoring.BM25F):
        def idf(self, searcher, fieldname, text):
            n = searcher.get_parent().doc_frequency(fieldname, text)
            total = searcher.get_parent().doc_count_all()
            return math.log(1 + (total - n + 0.5) / (n + 0.5))

    spec = parse_variant(f"fuse=lexical {CONCAT} b=0.5 side.rest=0.1")
    lines = []
    for name in names:
        runner = lab.runner(name)
        corpus = runner.corpus
        directory = tempfile.mkdtemp(prefix="rankexp-whoosh-")
        analyzer = PalaceAnalyzer()
        ix = whoosh_index.create_in(directory, Schema(id=ID(stored=True), text=TEXT(analyzer=analyzer, phrase=False),
                                                      rest=TEXT(analyzer=analyzer, phrase=False)))
        writer = ix.writer(limitmb=256)
        for doc in corpus.docs:
            f = doc.fields
            writer.add_document(id=doc.id, text="\n".join(f[k] for k in ("subject", "keywords", "anchor", "image", "content")),
                                rest=f.get("rest", ""))
        writer.commit()
        theirs_mrr, ours_mrr, same, times_one, times_palace = [], [], 0, [], []
        text_index = corpus.palace.index.text
        with ix.searcher(weighting=RobertsonBM25F(B=0.5, K1=1.2)) as searcher:
            for qi, q in enumerate(corpus.queries):
                terms = analyzer_terms(q.text)
                query = Or([Term("text", t) for t in terms] + [Term("rest", t, boost=0.1) for t in terms])
                query.matcher_type = Or.ARRAY_MATCHER
                started = time.perf_counter()
                hits = [h["id"] for h in searcher.search(query, limit=10)] if terms else []
                times_one.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                text_index.search(q.text, limit=10)
                times_palace.append((time.perf_counter() - started) * 1000)
                mine = runner.rank(spec, qi).rows[:10]
                same += hits == [corpus.docs[r].id for r in mine]
                theirs_mrr.append(query_metrics(corpus, Ranked([corpus.row_of[h] for h in hits]), q.expected)["mrr"])
                ours_mrr.append(query_metrics(corpus, Ranked(mine), q.expected)["mrr"])
        lines.append(f"{name}: whoosh one field MRR {statistics.fmean(theirs_mrr):.3f}, harness {statistics.fmean(ours_mrr):.3f}; "
                     f"top-10 equal on {same}/{len(corpus.queries)} (whoosh keeps lengths in one byte); "
                     f"query p50 {statistics.median(times_one):.2f} ms one field vs {statistics.median(times_palace):.2f} ms "
                     "palace's five fields")
    return "\n".join(lines)


def analyzer_terms(text: str) -> list[str]:
    from .text import analyzer

    return analyzer("porter", True).query_terms(text)


# ---- tables ---------------------------------------------------------------------------------


def fmt(x: float) -> str:
    return f"{x:.3f}"


def run_table(lab: Lab, name: str, specs: list[str], metrics: tuple[str, ...] | None = None,
              unit: str | None = None) -> str:
    """One corpus, several variants: means with 95% CIs, and deltas against the first variant."""
    variants = [parse_variant(s) for s in specs]
    results = [lab.result(name, v, unit) for v in variants]
    if metrics is None:
        metrics = (("recall@1", "recall@5", "recall@10", "recall@25", "recall@50", "ndcg@10") if name == "locomo"
                   else ("recall@1", "recall@3", "recall@5", "mrr", "ndcg@10", "context_recall"))
    head = ["variant"] + list(metrics) + ["context " + ("tokens@10" if name == "locomo" else "bytes"),
                                         f"Δ{PRIMARY[name]} vs first [95% CI] wins/losses"]
    rows = []
    for spec, result in zip(specs, results):
        cells = [f"`{spec}`"]
        for m in metrics:
            values = result.values(m)
            low, high = bootstrap_ci(values)
            cells.append(f"{fmt(values.mean())} [{fmt(low)}, {fmt(high)}]" if len(values) else "—")
        cells.append(f"{result.mean('context'):.0f}")
        cells.append(paired(results[0], result, PRIMARY[name]).cell() if result is not results[0] else "—")
        rows.append(cells)
    return _markdown(f"{name}", head, rows)


def _markdown(title: str, head: list[str], rows: list[list[str]]) -> str:
    lines = [f"**{title}**", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def cross_table(lab: Lab, names: list[str], rows: list[tuple[str, str]], title: str,
                unit: str | None = None, r1: bool = True) -> str:
    """Variants (rows) across corpora: each corpus's primary metric, its delta against the first row
    (bold when the 95% paired bootstrap interval excludes 0) and per-query wins/losses; recall@1 too."""
    head = ["variant", "spec"]
    for name in names:
        if r1 and name in ("example", "skill", "scifact"):
            head.append(f"{name} r@1")
        head.append(f"{name} {PRIMARY[name]} (Δ, W/L)")
    out = []
    base = {name: lab.result(name, parse_variant(rows[0][1]), unit) for name in names}
    for label, spec in rows:
        cells = [label, f"`{spec}`"]
        for name in names:
            result = lab.result(name, parse_variant(spec), unit)
            if r1 and name in ("example", "skill", "scifact"):
                cells.append(fmt(result.mean("recall@1")))
            metric = PRIMARY[name]
            if result is base[name] or result.per_query == base[name].per_query and spec == rows[0][1]:
                cells.append(fmt(result.mean(metric)))
            else:
                p = paired(base[name], result, metric)
                star = "**" if p.low > 0 or p.high < 0 else ""
                cells.append(f"{fmt(result.mean(metric))} ({star}{p.delta:+.3f}{star}, {p.wins}/{p.losses})")
        out.append(cells)
    return _markdown(title, head, out)


CONCAT = "model=concat idf=robertson w.image=1 w.anchor=1"
BM25F = "model=bm25f idf=robertson w.image=1 w.anchor=1 w.subject=2 w.keywords=2"
LEXICAL = [
    ("today: whoosh per-field BM25 sum, palace weights", "fuse=lexical"),
    ("same, exact field lengths (no 1-byte quantisation)", "fuse=lexical quantize=0"),
    ("same, Robertson idf", "fuse=lexical idf=robertson"),
    ("image 0.5", "fuse=lexical w.image=0.5"),
    ("image 1, anchor 1 (uniform)", "fuse=lexical w.image=1 w.anchor=1"),
    ("uniform + body rest 1 (every word)", "fuse=lexical w.image=1 w.anchor=1 w.rest=1"),
    ("today + body rest 0.5", "fuse=lexical w.rest=0.5"),
    ("per-field b: short fields unnormalised", "fuse=lexical b.subject=0 b.keywords=0 b.anchor=0"),
    ("uniform, short fields b=0", "fuse=lexical w.image=1 w.anchor=1 b.subject=0 b.keywords=0 b.anchor=0"),
    ("subject boost 2", "fuse=lexical w.subject=2"),
    ("one field: subject+image+content (issue's plain BM25)",
     "fuse=lexical model=concat idf=robertson w.keywords=0 w.anchor=0 w.image=1"),
    ("one field: every field", "fuse=lexical model=concat idf=robertson w.image=1 w.anchor=1"),
    ("one field: every field + body rest", "fuse=lexical model=concat idf=robertson w.image=1 w.anchor=1 w.rest=1"),
    ("one field + body rest as a side field 0.1", f"fuse=lexical {CONCAT} side.rest=0.1"),
    ("one field + body rest as a side field 0.2", f"fuse=lexical {CONCAT} side.rest=0.2"),
    ("one field + body rest as a side field 0.3", f"fuse=lexical {CONCAT} side.rest=0.3"),
    ("one field, subject counted twice", "fuse=lexical model=concat idf=robertson w.image=1 w.anchor=1 w.subject=2"),
    ("one field, whoosh idf", "fuse=lexical model=concat w.image=1 w.anchor=1"),
    ("true BM25F, palace weights", "fuse=lexical model=bm25f idf=robertson"),
    ("true BM25F, uniform", "fuse=lexical model=bm25f idf=robertson w.image=1 w.anchor=1"),
    ("true BM25F, uniform, short fields b=0",
     "fuse=lexical model=bm25f idf=robertson w.image=1 w.anchor=1 b.subject=0 b.keywords=0 b.anchor=0"),
    ("true BM25F, subject 2 keywords 2", "fuse=lexical model=bm25f idf=robertson w.image=1 w.anchor=1 w.subject=2 w.keywords=2"),
    ("true BM25F, S2 K2, image 0.5", f"fuse=lexical {BM25F} w.image=0.5"),
    ("true BM25F, S2 K2, body rest 0.2", f"fuse=lexical {BM25F} w.rest=0.2"),
    ("true BM25F, S2 K2, body rest 0.5", f"fuse=lexical {BM25F} w.rest=0.5"),
    ("true BM25F, S2 K2, b 0.5", f"fuse=lexical {BM25F} b=0.5"),
    ("true BM25F, S2 K2, content b 0.9, short fields b 0.3",
     f"fuse=lexical {BM25F} b.content=0.9 b.image=0.9 b.subject=0.3 b.keywords=0.3 b.anchor=0.3"),
]

ANALYSIS = [
    ("today (Porter, stopwords)", "fuse=lexical"),
    ("today, no stemming", "fuse=lexical stem=none"),
    ("today, S-stemmer (plurals)", "fuse=lexical stem=s"),
    ("today, Porter2", "fuse=lexical stem=porter2"),
    ("today, stopwords kept", "fuse=lexical stopwords=0"),
    ("one field (Porter, stopwords)", f"fuse=lexical {CONCAT}"),
    ("one field, no stemming", f"fuse=lexical {CONCAT} stem=none"),
    ("one field, S-stemmer", f"fuse=lexical {CONCAT} stem=s"),
    ("one field, Porter2", f"fuse=lexical {CONCAT} stem=porter2"),
    ("one field, stopwords kept", f"fuse=lexical {CONCAT} stopwords=0"),
]


def k1b_rows(prefix: str) -> list[tuple[str, str]]:
    rows = [("k1 1.2, b 0.75", f"{prefix}")]
    for k1 in (0.6, 0.9, 1.2, 1.6, 2.0):
        for b in (0.3, 0.5, 0.75, 0.9):
            if (k1, b) != (1.2, 0.75):
                rows.append((f"k1 {k1:g}, b {b:g}", f"{prefix} k1={k1:g} b={b:g}"))
    return rows


KIND_ROWS = [("BM25 today", "fuse=lexical"), ("hybrid today (RRF 60)", "fuse=rrf"), ("dense", "fuse=dense"),
             ("BM25 one field", f"fuse=lexical {CONCAT}"), ("BM25F S2 K2", f"fuse=lexical {BM25F}"),
             ("RRF 60, one field", f"fuse=rrf {CONCAT}"), ("RRF 10, BM25F S2 K2", f"fuse=rrf rrf_k=10 {BM25F}"),
             ("min-max 0.5, one field", f"fuse=minmax alpha=0.5 {CONCAT}"),
             ("min-max 0.5, BM25F S2 K2", f"fuse=minmax alpha=0.5 {BM25F}")]


def kinds_table(lab: Lab, names: list[str], rows=None) -> str:
    """recall@1 / MRR per question kind (the skill questions: direct, paraphrase, scene, scenario)."""
    out = []
    for name in [n for n in names if n in ("example", "skill")]:
        kinds = sorted({q.kind for q in lab.runner(name).corpus.queries})
        head = ["ranking", "spec"] + [f"{k} ({len(lab.result(name, parse_variant(KIND_ROWS[0][1])).values('mrr', k))}) r@1 / MRR"
                                      for k in kinds] + ["all r@1 / MRR"]
        body = []
        for label, spec in rows or KIND_ROWS + [("recommended", RECOMMENDED)]:
            r = lab.result(name, parse_variant(spec))
            body.append([label, f"`{spec}`"] + [f"{fmt(r.mean('recall@1', k))} / {fmt(r.mean('mrr', k))}" for k in kinds]
                        + [f"{fmt(r.mean('recall@1'))} / {fmt(r.mean('mrr'))}"])
        out.append(_markdown(f"{name}: by question kind", head, body))
    return "\n".join(out)


def lexical_table(lab: Lab, names: list[str]) -> str:
    return cross_table(lab, names, LEXICAL, "Lexical: field weights, models, length normalisation (flat, lexical only)")


def analysis_table(lab: Lab, names: list[str]) -> str:
    return cross_table(lab, names, ANALYSIS, "Lexical: stemming and stopwords (flat, lexical only)")


def k1b_table(lab: Lab, names: list[str]) -> str:
    return (cross_table(lab, names, k1b_rows("fuse=lexical"), "k1 and b, today's per-field sum") + "\n"
            + cross_table(lab, names, k1b_rows(f"fuse=lexical {CONCAT}"), "k1 and b, one field") + "\n"
            + cross_table(lab, names, k1b_rows(f"fuse=lexical {BM25F}"), "k1 and b, true BM25F (subject 2, keywords 2)"))


def fusion_rows(lexical: str) -> list[tuple[str, str]]:
    lex = f" {lexical}" if lexical else ""
    return [
        ("RRF k=60 (today)", f"fuse=rrf{lex}"),
        ("lexical only", f"fuse=lexical{lex}"),
        ("dense only", f"fuse=dense{lex}"),
        ("RRF k=30", f"fuse=rrf rrf_k=30{lex}"),
        ("RRF k=10", f"fuse=rrf rrf_k=10{lex}"),
        ("RRF k=60, depth 20", f"fuse=rrf depth=20{lex}"),
        ("weighted RRF lexical 2 : dense 1", f"fuse=rrf w_lex=2{lex}"),
        ("weighted RRF lexical 1.5 : dense 1", f"fuse=rrf w_lex=1.5{lex}"),
        ("weighted RRF lexical 1 : dense 1.5", f"fuse=rrf w_dense=1.5{lex}"),
        ("min-max sum, lexical 0.3", f"fuse=minmax alpha=0.3{lex}"),
        ("min-max sum, lexical 0.5", f"fuse=minmax alpha=0.5{lex}"),
        ("min-max sum, lexical 0.7", f"fuse=minmax alpha=0.7{lex}"),
        ("z-score sum, lexical 0.5", f"fuse=zscore alpha=0.5{lex}"),
        ("z-score sum, lexical 0.7", f"fuse=zscore alpha=0.7{lex}"),
        ("lexical, dense breaks ties", f"fuse=tiebreak{lex}"),
    ]


def fusion_table(lab: Lab, names: list[str]) -> str:
    return (cross_table(lab, names, fusion_rows(""), "Fusion over today's lexical ranking (flat)") + "\n"
            + cross_table(lab, names, fusion_rows(CONCAT), "Fusion over the one-field BM25 (flat)"))


EMBED = [("today: subject, anchor, keywords, image, content", "fuse=dense")] + [
    (name, f"fuse=dense embed={name}")
    for name in ("no-image", "subject+content", "subject+image+content", "everything", "content-first")]


def embed_table(lab: Lab, names: list[str]) -> str:
    names = [n for n in names if n in ("example", "skill")]  # SciFact and LoCoMo have one text per unit
    hybrid = [(label + ", RRF", spec.replace("fuse=dense", "fuse=rrf")) for label, spec in EMBED]
    return (cross_table(lab, names, EMBED, "What is embedded: dense only (flat)") + "\n"
            + cross_table(lab, names, hybrid, "What is embedded: RRF with today's lexical (flat)"))


ROUTES = [("flat", "route=flat"), ("today: route, filter, guard", "route=today"),
          ("today without the guard", "route=today-noguard"), ("keep domains to 90% of the mass", "route=keep:0.9"),
          ("keep domains to 95% of the mass", "route=keep:0.95"), ("best 2 domains", "route=top:2"),
          ("best 3 domains", "route=top:3"), ("domains of the flat top 10 (aggregate)", "route=aggregate:10"),
          ("boost 0.02: rank score x (1 + 0.02 conf)", "route=boost:0.02"), ("boost 0.05", "route=boost:0.05"),
          ("boost 0.2", "route=boost:0.2"), ("boost 1", "route=boost:1"),
          ("reorder the flat top 3 only", "route=reorder:3")]
ROUTE_METRICS = ("route_hit", "fallback", "recall@1", "recall@3", "recall@5", "mrr", "ndcg@10", "context_recall")


def routing_table(lab: Lab, names: list[str], hybrid: str = "") -> str:
    out = []
    for name in [n for n in names if n != "locomo"]:
        specs = [f"{spec} {hybrid}".strip() for _, spec in ROUTES]
        out.append(run_table(lab, name, specs, ROUTE_METRICS))
    return "\n".join(out)


UNIT_RANKINGS = [("BM25 today", "fuse=lexical"), ("BM25 one field", f"fuse=lexical {CONCAT}"), ("dense", "fuse=dense"),
                 ("hybrid today (RRF 60)", "fuse=rrf"), ("hybrid RRF 10, one field", f"fuse=rrf rrf_k=10 {CONCAT}")]
UNITS = ("turn", "turn-nospeaker", "turn+date", "window1", "window2", "window2+date", "exchange", "exchange+date",
         "chunk4", "chunk4+date", "chunk6+date", "chunk8+date")
UNIT_ROWS = ([(unit, label, spec) for unit in UNITS for label, spec in UNIT_RANKINGS]
             + [("window1", "BM25 one field, neighbours weight 0.25", f"fuse=lexical {CONCAT} w.context=0.25"),
                ("window1", "BM25 one field, neighbours weight 1", f"fuse=lexical {CONCAT} w.context=1"),
                ("window1", "hybrid RRF 10, neighbours weight 0.25", f"fuse=rrf rrf_k=10 {CONCAT} w.context=0.25"),
                ("turn+date", "BM25 one field, date weight 0", f"fuse=lexical {CONCAT} w.date=0")])
LOCOMO_METRICS = ("recall@1", "recall@5", "recall@10", "recall@25", "recall@50", "recall@900tok", "recall@1800tok")


def units_table(lab: Lab, names: list[str], rows=None, base_row: int = 3) -> str:
    """LoCoMo: retrieval unit x ranking; recall@k is the share of evidence turns the top k units hold."""
    if "locomo" not in names:
        return ""
    rows = rows or UNIT_ROWS
    base = lab.result("locomo", parse_variant(rows[base_row][2]), rows[base_row][0])
    head = (["unit", "ranking", "spec"] + list(LOCOMO_METRICS)
            + ["tokens@10", f"Δrecall@10 vs {rows[base_row][0]}, {rows[base_row][1]} [95% CI] W/L"])
    out = []
    for unit, label, spec in rows:
        result = lab.result("locomo", parse_variant(spec), unit)
        cells = [unit, label, f"`{spec}`"] + [fmt(result.mean(m)) for m in LOCOMO_METRICS]
        cells.append(f"{result.mean('context'):.0f}")
        cells.append(paired(base, result, "recall@10").cell() if result is not base else "—")
        out.append(cells)
    return _markdown("LoCoMo dev, 759 questions of categories 1-4: the unit", head, out)


def categories_table(lab: Lab, rows: list[tuple[str, str, str]]) -> str:
    """LoCoMo recall@10 and @50 per category, with 95% bootstrap intervals."""
    cats = [("cat1", "multi-hop"), ("cat2", "temporal"), ("cat3", "open-domain"), ("cat4", "single-hop")]
    head = ["unit", "ranking"] + [f"{c} {name} (n) r@10 / r@50" for c, name in cats] + ["all r@10", "tokens@10"]
    out = []
    for unit, label, spec in rows:
        result = lab.result("locomo", parse_variant(spec), unit)
        cells = [unit, label]
        for c, _ in cats:
            values = result.values("recall@10", c)
            low, high = bootstrap_ci(values)
            cells.append(f"({len(values)}) {fmt(values.mean())} [{fmt(low)}, {fmt(high)}] / {fmt(result.mean('recall@50', c))}")
        low, high = bootstrap_ci(result.values("recall@10"))
        cells += [f"{fmt(result.mean('recall@10'))} [{fmt(low)}, {fmt(high)}]", f"{result.mean('context'):.0f}"]
        out.append(cells)
    return _markdown("LoCoMo by category", head, out)


GRID_LEXICAL = [("today's per-field sum", ""), ("per-field, Robertson idf", "idf=robertson"), ("one field", CONCAT),
                ("one field S+I+C", "model=concat idf=robertson w.keywords=0 w.anchor=0 w.image=1"),
                ("BM25F uniform", "model=bm25f idf=robertson w.image=1 w.anchor=1"),
                ("BM25F subject 2 keywords 2", BM25F)]
GRID_K1B = ["", "k1=0.9 b=0.5", "k1=1.2 b=0.5", "k1=1.2 b=0.3", "k1=1.6 b=0.75"]
GRID_FUSION = ["fuse=lexical", "fuse=rrf", "fuse=rrf rrf_k=30", "fuse=rrf rrf_k=10", "fuse=rrf w_lex=1.5",
               "fuse=rrf rrf_k=10 w_lex=1.5", "fuse=rrf depth=20", "fuse=minmax alpha=0.5", "fuse=minmax alpha=0.7",
               "fuse=zscore alpha=0.5"]


def grid() -> list[str]:
    """Every candidate configuration of the leave-one-corpus-out selection (flat, no routing)."""
    return [" ".join(p for p in (fusion, lexical, k1b) if p)
            for _, lexical in GRID_LEXICAL for k1b in GRID_K1B for fusion in GRID_FUSION]


def loco_table(lab: Lab, names: list[str]) -> str:
    """Leave one corpus out: choose on the other corpora (mean gain of the primary metric over today's
    flat hybrid), report on the held-out one; then the choice on all of them and the most robust one."""
    specs = grid()
    base_spec = "fuse=rrf"
    gains = {}
    for name in names:
        base = lab.result(name, parse_variant(base_spec))
        for spec in specs:
            gains[name, spec] = lab.result(name, parse_variant(spec)).mean(PRIMARY[name]) - base.mean(PRIMARY[name])
    head = ["held out", "chosen on the others", "today (flat hybrid)", "chosen", "Δ [95% CI] W/L",
            "best on the held-out corpus", "chosen's rank"]
    rows, chosen_all = [], []
    for held in names:
        train = [n for n in names if n != held]
        chosen = max(specs, key=lambda s: (sum(gains[n, s] for n in train) / len(train), s == base_spec))
        chosen_all.append(chosen)
        base = lab.result(held, parse_variant(base_spec))
        result = lab.result(held, parse_variant(chosen))
        oracle = max(specs, key=lambda s: gains[held, s])
        rank = 1 + sum(gains[held, s] > gains[held, chosen] + 1e-12 for s in specs)
        metric = PRIMARY[held]
        rows.append([held, f"`{chosen}`", f"{metric} {fmt(base.mean(metric))}", fmt(result.mean(metric)),
                     paired(base, result, metric).cell(), f"`{oracle}` {fmt(lab.result(held, parse_variant(oracle)).mean(metric))}",
                     f"{rank} of {len(specs)}"])
    table = _markdown(f"Leave one corpus out over {len(specs)} flat configurations "
                      f"(metric: {', '.join(f'{n} {PRIMARY[n]}' for n in names)})", head, rows)
    mean_best = max(specs, key=lambda s: sum(gains[n, s] for n in names))
    robust = max(specs, key=lambda s: min(gains[n, s] for n in names))
    summary = ["", (f"Chosen on all {len(names)} corpora (mean gain): `{mean_best}`; "
                    f"most robust (best worst-case gain): `{robust}`."), "",
               "| spec | " + " | ".join(f"{n} Δ{PRIMARY[n]}" for n in names) + " | mean Δ | worst Δ |",
               "|---|" + "---|" * (len(names) + 2)]
    top = sorted(specs, key=lambda s: -sum(gains[n, s] for n in names))[:12]
    for spec in dict.fromkeys([mean_best, robust] + chosen_all + top):
        values = [gains[n, spec] for n in names]
        summary.append(f"| `{spec}` | " + " | ".join(f"{v:+.3f}" for v in values)
                       + f" | {sum(values) / len(values):+.3f} | {min(values):+.3f} |")
    return table + "\n".join(summary) + "\n"


CATEGORY_ROWS = [("turn", "hybrid today (RRF 60)", "fuse=rrf"),
                 ("turn", "BM25 today", "fuse=lexical"),
                 ("turn", "recommended", "RECOMMENDED"),
                 ("turn+date", "recommended", "RECOMMENDED"),
                 ("window2+date", "recommended", "RECOMMENDED"),
                 ("window3+date", "recommended", "RECOMMENDED"),
                 ("chunk4+date", "recommended", "RECOMMENDED")]


def categories(lab: Lab, names: list[str]) -> str:
    rows = [(unit, label, RECOMMENDED if spec == "RECOMMENDED" else spec) for unit, label, spec in CATEGORY_ROWS]
    return categories_table(lab, rows) if "locomo" in names else ""


RECOMMENDED = f"fuse=minmax alpha=0.5 {CONCAT} b=0.5 side.rest=0.1 embed=content-first"
FINALISTS = [("today: flat hybrid", "fuse=rrf"),
             ("A: one field, min-max 0.5", f"fuse=minmax alpha=0.5 {CONCAT}"),
             ("B: A with b 0.5", f"fuse=minmax alpha=0.5 {CONCAT} b=0.5"),
             ("C: A with b 0.3", f"fuse=minmax alpha=0.5 {CONCAT} b=0.3"),
             ("D: B + body rest as a side field 0.2", f"fuse=minmax alpha=0.5 {CONCAT} b=0.5 side.rest=0.2"),
             ("D': B + body rest 0.1, content embedded before the Image (recommended)", RECOMMENDED),
             ("E: B, whoosh idf", "fuse=minmax alpha=0.5 model=concat w.image=1 w.anchor=1 b=0.5"),
             ("F: B, subject and keywords twice", f"fuse=minmax alpha=0.5 {CONCAT} b=0.5 w.subject=2 w.keywords=2"),
             ("G: true BM25F S2 K2, b 0.5, min-max", f"fuse=minmax alpha=0.5 {BM25F} b=0.5"),
             ("H: B with z-score", f"fuse=zscore alpha=0.5 {CONCAT} b=0.5"),
             ("I: B with RRF k=10", f"fuse=rrf rrf_k=10 {CONCAT} b=0.5"),
             ("J: B with RRF k=60", f"fuse=rrf {CONCAT} b=0.5"),
             ("K: B, min-max lexical 0.4", f"fuse=minmax alpha=0.4 {CONCAT} b=0.5"),
             ("L: B, min-max lexical 0.6", f"fuse=minmax alpha=0.6 {CONCAT} b=0.5")]


def finalists_table(lab: Lab, names: list[str]) -> str:
    return cross_table(lab, names, FINALISTS, "Finalists (flat)")


TRIMS = [("today's trim: BM25 >= 0.5 x best or cosine within 0.08", ""), ("0.6 / 0.06", "trim_lex=0.6 trim_dense=0.06"),
         ("0.7 / 0.05", "trim_lex=0.7 trim_dense=0.05"), ("0.8 / 0.03", "trim_lex=0.8 trim_dense=0.03"),
         ("the best hit only", "trim_lex=9 trim_dense=-1"), ("no trim (k = 3)", "trim_lex=0 trim_dense=1")]


def context_table(lab: Lab, names: list[str]) -> str:
    """The trim rule on the recommended ranking: context bytes against the share of questions answered in context."""
    out = []
    for name in [n for n in names if n != "locomo"]:
        specs = [f"{RECOMMENDED} {t}".strip() for _, t in TRIMS]
        out.append(run_table(lab, name, specs, ("recall@1", "recall@3", "context_recall")))
    return "\n".join(out)


BEFORE_AFTER = ["fuse=rrf route=today", "fuse=rrf", "fuse=lexical", RECOMMENDED, f"{RECOMMENDED} trim_lex=0.6 trim_dense=0.06",
                f"{RECOMMENDED} route=today",
                f"{RECOMMENDED} route=aggregate:10"]
LOCOMO_BEFORE_AFTER = [("turn", "hybrid today", "fuse=rrf"), ("turn", "BM25 today", "fuse=lexical"),
                       ("turn", "recommended", RECOMMENDED), ("turn+date", "recommended", RECOMMENDED),
                       ("window2+date", "recommended", RECOMMENDED),
                       ("window2+date", "recommended, neighbours at weight 1 (one plain field)", f"{RECOMMENDED} w.context=1"),
                       ("window2+date", "RRF 10, one field", f"fuse=rrf rrf_k=10 {CONCAT}"),
                       ("window2+date", "recommended with b 0.3", f"{RECOMMENDED} b=0.3"),
                       ("window3+date", "recommended", RECOMMENDED), ("chunk4+date", "recommended", RECOMMENDED)]


def before_after_table(lab: Lab, names: list[str]) -> str:
    """Today's modes against the recommendation, per corpus (the first row is today's default, 2-hop)."""
    out = [run_table(lab, name, BEFORE_AFTER, ("recall@1", "recall@3", "recall@5", "mrr", "ndcg@10", "context_recall",
                                               "route_hit"))
           for name in names if name != "locomo"]
    if "locomo" in names:
        out.append(units_table(lab, names, LOCOMO_BEFORE_AFTER, 0))
    return "\n".join(out)


BUILT = f"{RECOMMENDED} trim_lex=0.6 trim_dense=0.06"  # what palace ranks with since issue 16
IDEAS = [("built (issue 16)", ""),
         ("alpha per query from the lists' top gaps, 0.25", "peak=0.25"),
         ("alpha per query, 0.5", "peak=0.5"),
         ("alpha per query, 1", "peak=1"),
         ("lexical feedback (RM3-like): top 3, 10 terms, 0.3", "prf=3:10:0.3"),
         ("lexical feedback: top 3, 10 terms, 0.15", "prf=3:10:0.15"),
         ("lexical feedback: top 3, 5 terms, 0.3", "prf=3:5:0.3"),
         ("lexical feedback: top 2, 10 terms, 0.3", "prf=2:10:0.3"),
         ("lexical feedback: top 5, 10 terms, 0.3", "prf=5:10:0.3"),
         ("dense feedback (Rocchio): top 3 at 0.15", "rocchio=3:0.15"),
         ("dense feedback: top 1 at 0.2", "rocchio=1:0.2"),
         ("subject as a phrase in the query: +0.1 fused", "phrase=0.1"),
         ("subject as a phrase: +0.2 fused", "phrase=0.2"),
         ("word-pair BM25 at 0.1", "bigram=0.1"),
         ("word-pair BM25 at 0.15", "bigram=0.15"),
         ("**word-pair BM25 at 0.25**", "bigram=0.25"),
         ("word-pair BM25 at 0.35", "bigram=0.35"),
         ("word-pair BM25 at 0.5", "bigram=0.5"),
         ("word-pair BM25 at 1", "bigram=1"),
         ("word pairs in either order, 0.25", "bigram=0.25 pairs=unordered"),
         ("word pairs within two positions, 0.25", "bigram=0.25 pairs=skip"),
         ("word pairs 0.25 + subject phrase 0.1", "bigram=0.25 phrase=0.1"),
         ("fusion over each list's top 20", "depth=20"),
         ("fusion over each list's top 50", "depth=50"),
         ("vectors: whole + (head, Image) + (head, Content), max", "mv=parts"),
         ("vectors: parts, half whole half max", "mv=parts mv_w=0.5"),
         ("vectors: parts + (head, keywords), max", "mv=parts3"),
         ("vectors: whole + (head, Image), max", "mv=image"),
         ("vectors: whole + 120-word chunks, max", "mv=chunks:120"),
         ("vectors: chunks, half whole half max", "mv=chunks:120 mv_w=0.5"),
         ("vectors: whole + the unit alone (LoCoMo turn; subject: content), max", "mv=turn"),
         ("vectors: unit alone, half whole half max", "mv=turn mv_w=0.5"),
         ("vectors: parts, max + word pairs 0.25", "mv=parts bigram=0.25"),
         ("vectors: parts3, max + word pairs 0.25", "mv=parts3 bigram=0.25")]
IDEAS_DENSE_ONLY_PALACES = ("mv=parts", "mv=image", "mv=chunks")  # SciFact has no Image/Content parts: no row


def ideas_table(lab: Lab, names: list[str]) -> str:
    """Section 6: ideas tried on the built ranking; LoCoMo with its built unit (window2+date)."""
    head = ["idea", "spec"]
    for name in names:
        head += ([f"{name} r@1", f"{name} r@3"] if name != "locomo" else []) + [f"{name} {PRIMARY[name]} Δ [95% CI] W/L"]
    rows = []
    base = {n: lab.result(n, parse_variant(BUILT), "window2+date") for n in names}
    for label, extra in IDEAS:
        cells = [label, f"`{extra}`" if extra else "(the built ranking)"]
        for name in names:
            skip = name == "scifact" and extra.startswith(IDEAS_DENSE_ONLY_PALACES)
            r = None if skip else lab.result(name, parse_variant(f"{BUILT} {extra}".strip()), "window2+date")
            if name != "locomo":
                cells += ["—", "—"] if r is None else [fmt(r.mean("recall@1")), fmt(r.mean("recall@3"))]
            metric = PRIMARY[name]
            if r is None:
                cells.append("—")
            elif not extra:
                cells.append(fmt(r.mean(metric)))
            else:
                cells.append(f"{fmt(r.mean(metric))} {paired(base[name], r, metric).cell()}")
        rows.append(cells)
    return _markdown("Ideas on the built ranking (flat; LoCoMo unit window2+date)", head, rows)


def ideas_kinds_table(lab: Lab, names: list[str]) -> str:
    """recall@1 / MRR per question kind for the built ranking and the ideas that won somewhere."""
    rows = [("built", BUILT)] + [(label.strip("*"), f"{BUILT} {extra}") for label, extra in IDEAS
                                 if extra in ("bigram=0.25", "prf=3:10:0.3", "mv=parts", "mv=parts bigram=0.25")]
    return kinds_table(lab, names, rows)


TABLES: dict = {"lexical": lexical_table, "analysis": analysis_table, "k1b": k1b_table, "fusion": fusion_table,
                "embed": embed_table, "routing": routing_table, "units": units_table,
                "categories": categories, "kinds": kinds_table,
                "loco": loco_table, "finalists": finalists_table, "context": context_table,
                "before-after": before_after_table, "ideas": ideas_table, "ideas-kinds": ideas_kinds_table}
