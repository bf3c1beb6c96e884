"""The lexical index: Whoosh BM25F over a memory's fields. The only module that imports whoosh."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from whoosh import index as whoosh_index
from whoosh import scoring
from whoosh.analysis import StemmingAnalyzer
from whoosh.fields import ID, TEXT, Schema
from whoosh.query import And, Or, Term

from .errors import PalaceError

# Query-time field weights. Chosen by measurement on example-palace/queries.jsonl
# (see docs/search.md, "Field weights"); override in palace.toml [retrieval] field_weights.
DEFAULT_FIELD_WEIGHTS = {"subject": 3.0, "keywords": 2.5, "anchor": 1.5, "image": 0.6, "content": 1.0, "domain": 0.5}
FIELDS = tuple(DEFAULT_FIELD_WEIGHTS)
LOCK_TIMEOUT_S = 30.0


def _schema() -> Schema:
    analyzer = StemmingAnalyzer()
    return Schema(
        path=ID(stored=True, unique=True),
        id=ID(stored=True),
        domain_key=ID(stored=True),
        subject=TEXT(analyzer=analyzer),
        keywords=TEXT(analyzer=analyzer),
        anchor=TEXT(analyzer=analyzer),
        image=TEXT(analyzer=analyzer),
        content=TEXT(analyzer=analyzer),
        domain=TEXT(analyzer=analyzer),
    )


@dataclass
class Doc:
    """The fields the lexical index holds for one memory."""

    path: str
    id: str
    domain: str
    subject: str
    keywords: str
    anchor: str
    image: str
    content: str


class TextIndex:
    """A Whoosh index on disk under .palace/whoosh."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self._index = None
        self._analyzer = StemmingAnalyzer()

    def open(self, create: bool = True):
        """Open the index, creating it when missing; raises PalaceError when it is unreadable."""
        if self._index is None:
            if whoosh_index.exists_in(str(self.directory)):
                self._index = whoosh_index.open_dir(str(self.directory))
            elif create:
                self.directory.mkdir(parents=True, exist_ok=True)
                self._index = whoosh_index.create_in(str(self.directory), _schema())
            else:
                raise PalaceError(f"no search index at {self.directory}")
        return self._index

    def reset(self) -> None:
        """Delete and recreate the index (it is a cache; the notes are the truth)."""
        self._index = None
        shutil.rmtree(self.directory, ignore_errors=True)
        self.open(create=True)

    def doc_count(self) -> int:
        """Number of live documents."""
        return self.open().doc_count()

    def apply(self, upserts: Iterable[Doc], deletes: Iterable[str], progress=None) -> int:
        """Delete docs by path and upsert docs, in one commit under the write lock; returns docs written."""
        ix = self.open()
        writer = ix.writer(timeout=LOCK_TIMEOUT_S, limitmb=256)
        written = 0
        try:
            for path in deletes:
                writer.delete_by_term("path", path)
            for doc in upserts:
                writer.update_document(path=doc.path, id=doc.id, domain_key=doc.domain, subject=doc.subject,
                                       keywords=doc.keywords, anchor=doc.anchor, image=doc.image,
                                       content=doc.content, domain=doc.domain.replace("-", " "))
                written += 1
                if progress and written % 500 == 0:
                    progress(written)
            writer.commit(optimize=False)
        except BaseException:
            writer.cancel()
            raise
        self._index = None  # reopen to see the new generation
        return written

    def terms(self, text: str) -> list[str]:
        """The analysed terms of a query (stemmed, stopwords removed), deduplicated in order."""
        seen = []
        for token in self._analyzer(text):
            if token.text not in seen:
                seen.append(token.text)
        return seen

    def search(self, text: str, limit: int = 10, domains: Iterable[str] | None = None,
               field_weights: dict[str, float] | None = None) -> list[tuple[str, float]]:
        """BM25F search: [(memory id, score)] best first; empty when the query has no usable terms."""
        terms = self.terms(text)
        if not terms:
            return []
        weights = field_weights or DEFAULT_FIELD_WEIGHTS
        clauses = [Term(field, term, boost=weight) for term in terms for field, weight in weights.items() if weight > 0]
        query = Or(clauses)
        domain_filter = None
        if domains is not None:
            domains = list(domains)
            if not domains:
                return []
            domain_filter = Or([Term("domain_key", d) for d in domains])
        ix = self.open()
        with ix.searcher(weighting=scoring.BM25F(B=0.75, K1=1.2)) as searcher:
            results = searcher.search(query, limit=limit, filter=domain_filter)
            return [(hit["id"], float(hit.score)) for hit in results]

    def close(self) -> None:
        self._index = None


__all__ = ["Doc", "TextIndex", "DEFAULT_FIELD_WEIGHTS", "FIELDS", "And"]
