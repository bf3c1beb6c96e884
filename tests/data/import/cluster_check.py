"""How topical are the domains `palace import` made for SciFact? (docs/import.md, "Measured")

    .venv/bin/python tests/data/import/cluster_check.py PALACE [PALACE2]

For each palace holding the SciFact import (../shared/data/scifact): cluster sizes; for queries with
2+ relevant documents, how often all of them share a domain (against random clusters of the same
sizes); centroid routing, i.e. how often the cluster whose TF-IDF centroid is nearest to the query
holds a relevant document (top-1/3/5, against always choosing the largest clusters); with two
palaces, the NMI between their clusterings; with $PALACE_HOME holding the embedder and a palace
whose vectors were made with it, the same routing with dense centroids.
"""

from __future__ import annotations

import math
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from palace_cli.importers.clustering import _sums, _unit, tfidf, topic_terms  # noqa: E402

BEIR = REPO.parent / "shared" / "data" / "scifact"


def load():
    import json

    docs = [json.loads(line) for line in open(BEIR / "corpus.jsonl")]
    queries = {}
    for line in open(BEIR / "queries.jsonl"):
        query = json.loads(line)
        queries[query["_id"]] = query["text"]
    qrels = defaultdict(list)
    for split in ("test", "train"):
        for line in (BEIR / "qrels" / f"{split}.tsv").read_text().splitlines()[1:]:
            qid, doc, score = line.split("\t")
            if int(score) > 0:
                qrels[(split, qid)].append(doc)
    return docs, queries, qrels


def domains(palace: Path) -> dict[str, str]:
    return {p.stem: p.parent.name for p in (palace / "memories").rglob("*.md")}


def nmi(a, b) -> float:
    n = len(a)
    ca, cb, cab = Counter(a), Counter(b), Counter(zip(a, b))
    mi = sum(c / n * math.log(c * n / (ca[x] * cb[y])) for (x, y), c in cab.items())
    entropy = lambda counts: -sum(c / n * math.log(c / n) for c in counts.values())  # noqa: E731
    return mi / math.sqrt(entropy(ca) * entropy(cb))


def routing(scores: np.ndarray, gold: list[set[int]]) -> dict[int, float]:
    order = np.argsort(-scores, axis=1)
    return {r: float(np.mean([bool(set(order[i, :r]) & gold[i]) for i in range(len(gold))])) for r in (1, 3, 5)}


def main(palaces: list[Path]) -> None:
    docs, queries, qrels = load()
    ids = [d["_id"] for d in docs]
    texts = [f"{' '.join(d['title'].split())}\n{d['text'].strip()}" for d in docs]
    lexical = tfidf(texts)
    column = {t: i for i, t in enumerate(lexical.terms)}
    df = Counter()
    for text in texts:
        df.update(set(topic_terms(text)))
    idf = {t: math.log((1 + len(texts)) / (1 + df[t])) + 1 for t in lexical.terms}

    def query_vector(text: str) -> np.ndarray:
        v = np.zeros(len(lexical.terms), np.float32)
        for term, count in Counter(topic_terms(text)).items():
            if term in column:
                v[column[term]] = (1 + math.log(count)) * idf[term]
        return v / (np.linalg.norm(v) or 1)

    labelings = []
    for palace in palaces:
        dom = domains(palace)
        names = sorted(set(dom.values()))
        index = {name: i for i, name in enumerate(names)}
        labels = np.array([index[dom[i]] for i in ids])
        labelings.append(labels)
        k = len(names)
        sizes = np.bincount(labels, minlength=k)
        centroids = _unit(_sums(lexical.matrix, labels, k))
        print(f"== {palace}: k={k}, sizes min {sizes.min()} median {int(np.median(sizes))} max {sizes.max()}")
        for split in ("test", "train"):
            keys = [key for key in qrels if key[0] == split]
            multi = [key for key in keys if len(qrels[key]) > 1]
            together = sum(len({dom[d] for d in qrels[key]}) == 1 for key in multi)
            share = sizes / sizes.sum()
            chance = np.mean([float(np.sum(share ** len(qrels[key]))) for key in multi])
            gold = [{index[dom[d]] for d in qrels[key]} for key in keys]
            lex = routing(np.stack([query_vector(queries[key[1]]) for key in keys]) @ centroids.T, gold)
            base = routing(np.tile(sizes.astype(float), (len(keys), 1)), gold)
            print(f"  {split}: {len(keys)} judged queries; {len(multi)} with 2+ relevant docs, all in one cluster: "
                  f"{together}/{len(multi)} (random clusters of these sizes: {chance:.2f})")
            print(f"    lexical centroid routing top-1/3/5: {lex[1]:.3f} {lex[3]:.3f} {lex[5]:.3f}"
                  f"   (largest clusters: {base[1]:.3f} {base[3]:.3f} {base[5]:.3f})")
            dense = dense_routing(palace, ids, dom, index, labels, [queries[key[1]] for key in keys], gold)
            if dense:
                print(f"    dense centroid routing top-1/3/5:   {dense[1]:.3f} {dense[3]:.3f} {dense[5]:.3f}")
    if len(labelings) == 2:
        print(f"NMI between the two clusterings: {nmi(labelings[0].tolist(), labelings[1].tolist()):.3f}")


def dense_routing(palace_root, ids, dom, index, labels, texts, gold):
    if not os.environ.get("PALACE_HOME"):
        return None
    from palace_cli.backends import load_embedder
    from palace_cli.palace import Palace

    embedder = load_embedder()
    if embedder is None:
        return None
    idx = Palace(palace_root).index
    model_id, keys, matrix = idx.vectors.load()
    if model_id != embedder.model_id:
        return None
    row = {k: i for i, k in enumerate(keys)}
    by_path = idx.store.text_hashes()
    vectors = np.stack([matrix[row[by_path[f"memories/{dom[i]}/{i}.md"]]] for i in ids])
    centroids = _unit(_sums(vectors, labels, len(index)))
    queries = np.concatenate([embedder.embed_batch(texts[s : s + 32]) for s in range(0, len(texts), 32)])
    return routing(queries @ centroids.T, gold)


if __name__ == "__main__":
    main([Path(p) for p in sys.argv[1:]])
