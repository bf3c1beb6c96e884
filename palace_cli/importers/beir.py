"""BEIR datasets: corpus.jsonl (_id, title, text), queries.jsonl, qrels/test.tsv.

Documents become notes (subject = title, content = text, no image, no verify token); their ids
stay (slugified when they are not valid note ids, the original kept as `source_id`). BEIR has no
domains, so documents are clustered (see clustering.py) and each cluster becomes a domain named
after its distinctive terms. Judged test queries become a palace query file for `palace bench`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from palace_cli.backends import Embedder
from palace_cli.errors import ImportFailed, UsageError
from palace_cli.core.text import slugify
from palace_cli.progress import Progress
from palace_cli.importers.records import Batch, Record, json_line_error, map_ids
from palace_cli.importers.clustering import cluster

FORMAT = "beir"
EMBED_BATCH = 128  # the embedder packs a batch into few sequences; bigger batches keep both workers busy
CLUSTER_WITH = ("auto", "tfidf", "embedder")


class RememberedEmbedder(Embedder):
    """An embedder that answers from vectors already computed for these texts, asking the model only for others."""

    def __init__(self, inner: Embedder, known: dict[str, np.ndarray]):
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.known = known

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        missing = [i for i, text in enumerate(texts) if text not in self.known]
        for i, text in enumerate(texts):
            if text in self.known:
                out[i] = self.known[text]
        if missing:
            out[missing] = self.inner.embed_batch([texts[i] for i in missing])
        return out


def read_beir(path: Path, options: dict) -> Batch:
    """Read and validate a BEIR directory (or its corpus.jsonl); queries and qrels are optional."""
    directory = path.parent if path.is_file() else path
    if options.get("cluster_with", "auto") not in CLUSTER_WITH:
        raise UsageError(f"--cluster-with must be one of {', '.join(CLUSTER_WITH)}")
    corpus = directory / "corpus.jsonl"
    if not corpus.is_file():
        raise ImportFailed(f"{directory}: no corpus.jsonl")
    dataset = slugify(directory.resolve().name)
    batch = Batch(FORMAT, [])
    docs = []
    for lineno, doc in _jsonl(corpus):
        where = f"corpus.jsonl:{lineno}"
        source_id = _id(doc, where)
        for name in ("title", "text"):
            if doc.get(name) is not None and not isinstance(doc[name], str):
                raise ImportFailed(f'{where} (_id "{source_id}"): "{name}" must be a string')
        if doc.get("metadata") is not None and not isinstance(doc["metadata"], dict):
            raise ImportFailed(f'{where} (_id "{source_id}"): "metadata" must be an object')
        docs.append((where, source_id, doc))
    seen: dict[str, str] = {}
    for where, source_id, _ in docs:
        if source_id in seen:
            raise ImportFailed(f'{where}: _id "{source_id}" is also used on {seen[source_id]}')
        seen[source_id] = where
    ids = map_ids([source_id for _, source_id, _ in docs])
    for where, source_id, doc in docs:
        title, text = " ".join((doc.get("title") or "").split()), (doc.get("text") or "").strip()
        if not title and not text:
            batch.warnings.append(f'{where} (_id "{source_id}"): empty title and text; not imported')
            continue
        fields = {"source_id": source_id} if ids[source_id] != source_id else {}
        if doc.get("metadata"):
            fields["source"] = doc["metadata"]
        batch.records.append(Record(
            id=ids[source_id], subject=title or _first_words(text), origin=where, source=f"{FORMAT}:{dataset}",
            domain_derived=True, content=text, verify="", fields=fields))
    batch.queries = _queries(directory, dataset, ids)
    batch.assign_domains = lambda palace, records, needing, progress: _assign(
        batch, palace, records, needing, progress, options, dataset)
    return batch


def _jsonl(path: Path):
    """(line number, object) for each non-blank line; ImportFailed naming the line otherwise."""
    with open(path, "rb") as handle:
        for lineno, raw in enumerate(handle, 1):
            try:
                line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise ImportFailed(f"{path.name}:{lineno}: not UTF-8 (byte 0x{raw[exc.start]:02x})") from None
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                exc.lineno = lineno
                raise json_line_error(path.name, exc) from None
            except RecursionError:
                raise ImportFailed(f"{path.name}:{lineno}: JSON nested too deeply to read") from None
            if not isinstance(value, dict):
                raise ImportFailed(f"{path.name}:{lineno}: each line must be a JSON object")
            yield lineno, value


def _id(doc: dict, where: str) -> str:
    value = doc.get("_id")
    if value is None or not str(value).strip() or isinstance(value, (dict, list, bool)):
        raise ImportFailed(f'{where}: missing "_id"')
    return str(value).strip()


def _first_words(text: str, count: int = 12) -> str:
    words = text.split()
    return " ".join(words[:count]) + (" ..." if len(words) > count else "")


def _queries(directory: Path, dataset: str, ids: dict[str, str]) -> list[dict]:
    """Judged queries of qrels/test.tsv as {qid, query, expected: [note ids], kind: beir}."""
    qrels_path, queries_path = directory / "qrels" / "test.tsv", directory / "queries.jsonl"
    if not qrels_path.is_file() or not queries_path.is_file():
        return []
    texts = {}
    for lineno, query in _jsonl(queries_path):
        qid = _id(query, f"queries.jsonl:{lineno}")
        if not isinstance(query.get("text"), str) or not query["text"].strip():
            raise ImportFailed(f'queries.jsonl:{lineno} (_id "{qid}"): missing "text"')
        texts[qid] = query["text"].strip()
    judged: dict[str, list[str]] = {}
    for lineno, line in enumerate(qrels_path.read_text(encoding="utf-8").splitlines(), 1):
        cells = line.strip().split("\t") if "\t" in line else line.split()
        if not cells or (lineno == 1 and cells[0].lower() in ("query-id", "query_id", "qid")):
            continue
        where = f"qrels/test.tsv:{lineno}"
        if len(cells) < 3:
            raise ImportFailed(f"{where}: expected query-id, corpus-id, score separated by tabs")
        qid, doc_id, score = cells[0], cells[1], cells[-1]
        try:
            relevant = float(score) > 0
        except ValueError:
            raise ImportFailed(f"{where}: score {score!r} is not a number") from None
        if qid not in texts:
            raise ImportFailed(f'{where}: query-id "{qid}" is not in queries.jsonl')
        if doc_id not in ids:
            raise ImportFailed(f'{where}: corpus-id "{doc_id}" is not in corpus.jsonl')
        if relevant and ids[doc_id] not in judged.setdefault(qid, []):
            judged[qid].append(ids[doc_id])
    return [{"qid": f"{dataset}-{qid}", "query": texts[qid], "expected": judged[qid], "kind": "beir"}
            for qid in texts if judged.get(qid)]


def search_text(record: Record) -> str:
    """The text the palace embeds for a note without anchor, keywords or image (Memory.search_text)."""
    return "\n".join(part for part in (record.subject.strip(), record.content.strip()) if part)


def _assign(batch: Batch, palace, records: list[Record], needing: list[Record], progress: Progress | None,
            options: dict, dataset: str) -> dict:
    """Cluster every document (so the result does not depend on what is already imported); name domains."""
    how = options.get("cluster_with") or "auto"
    embedder = None
    if how != "tfidf":
        embedder, _status, reason = palace.index.dense()
        if embedder is None and how == "embedder":
            raise UsageError(reason or "no embedding model")
    vectors = None
    if embedder is not None:
        texts = [search_text(r) for r in records]
        rows = []
        for start in range(0, len(texts), EMBED_BATCH):
            rows.append(np.asarray(embedder.embed_batch(texts[start : start + EMBED_BATCH]), dtype=np.float32))
            if progress:
                progress("embedding for clustering", min(start + EMBED_BATCH, len(texts)), len(texts))
        vectors = np.concatenate(rows) if rows else None
        batch.refresh_embedder = RememberedEmbedder(embedder, dict(zip(texts, vectors)))
    if progress:
        progress("clustering", 0, 1)
    result = cluster([f"{r.subject}\n{r.content}" for r in records], vectors, k=options.get("clusters"),
                     method=embedder.model_id if embedder is not None else "tfidf")
    if progress:
        progress("clustering", 1, 1)
    wanted = {id(r) for r in needing}
    for record, label in zip(records, result.labels):
        if id(record) in wanted:
            record.domain = result.names[label]
    k = len(result.names)
    for name, size, terms in zip(result.names, result.sizes, result.top_terms):
        batch.domain_specs[name] = {
            "description": f"{dataset} documents about {', '.join(terms[:8])} "
                           f"({size} of {len(records)}, one of {k} clusters by {result.method})",
            "source": f"{FORMAT}:{dataset}"}
    return result.as_dict() | {"assigned": len(needing)}
