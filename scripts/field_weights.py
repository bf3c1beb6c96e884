"""Compare BM25F field weightings on the example palace and on SciFact (title -> subject, abstract -> content).

Run: .venv/bin/python scripts/field_weights.py   (needs ../shared/data/scifact; builds a throwaway index)
Prints recall@1, recall@3, MRR and nDCG@10 for each weighting; docs/benchmarks.md records the choice.
"""

import json
import tempfile
from pathlib import Path

import numpy as np

from palace_cli.bench.retrieval import load_queries, query_metrics
from palace_cli.palace import Palace
from palace_cli.index.refresh import refresh
from palace_cli.index.text import Doc, TextIndex

REPO = Path(__file__).resolve().parent.parent
SCIFACT = REPO.parent / "shared" / "data" / "scifact"
WEIGHTINGS = [
    dict(subject=1, keywords=1, anchor=1, image=1, content=1, domain=1),
    dict(subject=3, keywords=2.5, anchor=1.5, image=0.6, content=1, domain=0.5),
    dict(subject=2, keywords=2, anchor=1, image=0.5, content=1, domain=0.5),
    dict(subject=1.5, keywords=1.5, anchor=0.5, image=0.3, content=1, domain=0),
    dict(subject=1, keywords=1, anchor=0.5, image=0, content=1, domain=0),
    dict(subject=1, keywords=1, anchor=0.5, image=0.2, content=1, domain=0),
    dict(subject=4, keywords=3, anchor=1, image=0.5, content=1, domain=0.5),
]


def evaluate(index, queries, weights):
    """Mean metrics of one weighting over (query, expected ids) pairs."""
    rows = [query_metrics([i for i, _ in index.search(q, limit=10, field_weights=weights)], expected)
            for q, expected in queries]
    return {m: round(float(np.mean([r[m] for r in rows])), 4) for m in ("recall@1", "recall@3", "mrr", "ndcg@10")}


def scifact_index():
    index = TextIndex(Path(tempfile.mkdtemp()) / "whoosh")
    docs = [json.loads(line) for line in open(SCIFACT / "corpus.jsonl")]
    index.apply((Doc(d["_id"], d["_id"], "all", d.get("title", ""), "", "", "", d["text"]) for d in docs), [])
    texts = {json.loads(l)["_id"]: json.loads(l)["text"] for l in open(SCIFACT / "queries.jsonl")}
    relevant = {}
    for number, line in enumerate(open(SCIFACT / "qrels" / "test.tsv")):
        qid, doc, score = line.rstrip("\n").split("\t")
        if number and int(score) > 0:
            relevant.setdefault(qid, []).append(doc)
    return index, [(texts[q], docs_) for q, docs_ in relevant.items()]


def main():
    palace = Palace(REPO / "example-palace")
    refresh(palace)
    example = [(q.query, q.expected) for q in load_queries(palace.root / "queries.jsonl") if q.expected]
    sci_index, sci_queries = scifact_index()
    for weights in WEIGHTINGS:
        print(weights, "example", evaluate(palace.index.text, example, weights),
              "scifact", evaluate(sci_index, sci_queries, weights))


if __name__ == "__main__":
    main()
