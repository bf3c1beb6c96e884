"""The four corpora as documents with fields and judged queries: example-palace, the skill corpus, SciFact, LoCoMo."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .lexical import LexicalIndex

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("PALACE_SHARED", REPO.parent.parent / "shared" if (REPO.parent.parent / "shared").exists()
                             else "/work/shared")) / "data"
SKILL_QUERIES = REPO / "benchmarks" / "memory-palace-skill.queries.jsonl"
CORPORA = ("example", "skill", "scifact", "locomo")
# The text palace embeds today (Memory.search_text), and the variants measured against it.
EMBED_TEXTS = {
    "palace": ("subject", "anchor", "keywords", "image", "content"),
    "no-image": ("subject", "anchor", "keywords", "content"),
    "subject+content": ("subject", "content"),
    "subject+image+content": ("subject", "image", "content"),
    "everything": ("subject", "anchor", "keywords", "image", "content", "rest"),
    "content-first": ("subject", "anchor", "keywords", "content", "image"),
}


@dataclass
class Doc:
    """One retrieval unit: fields for lexical ranking, the text to embed, and the judged items it covers."""

    id: str
    domain: str
    fields: dict[str, str]
    embed: str
    covers: tuple[str, ...]
    group: str = ""
    context: str = ""        # what a context block shows of it (LoCoMo token counts)
    memory: object = None    # palace Memory (context bytes are measured with palace's own builder)


@dataclass
class Query:
    """A judged question: expected items (memory ids or LoCoMo turn ids), searched within its group."""

    qid: str
    text: str
    expected: tuple[str, ...]
    kind: str = ""
    group: str = ""


@dataclass
class Corpus:
    """Documents, queries, and the per-group lexical indexes and vectors built on demand."""

    name: str
    docs: list[Doc]
    queries: list[Query]
    palace: object = None
    extra_weights: dict[str, float] = field(default_factory=dict)
    note: str = ""
    _lexical: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        groups: dict[str, list[int]] = {}
        for row, doc in enumerate(self.docs):
            groups.setdefault(doc.group, []).append(row)
        self.groups = {g: np.array(rows, dtype=np.int64) for g, rows in groups.items()}
        ids = [d.id for d in self.docs]
        order = sorted(range(len(ids)), key=ids.__getitem__)
        self.id_rank = np.empty(len(ids), dtype=np.int64)
        self.id_rank[order] = np.arange(len(ids))
        self.row_of = {d.id: r for r, d in enumerate(self.docs)}

    def lexical(self, stem: str, stopwords: bool) -> dict[str, LexicalIndex]:
        """group -> LexicalIndex over that group's docs (built once per analyzer)."""
        key = (stem, stopwords)
        if key not in self._lexical:
            self._lexical[key] = {g: LexicalIndex.build([self.docs[r].fields for r in rows], stem, stopwords)
                                  for g, rows in self.groups.items()}
        return self._lexical[key]

    def bigram_index(self, lex, kind: str = "adjacent") -> dict[str, LexicalIndex]:
        """group -> index of one field `text` holding each lexical field's adjacent term pairs (a_b); a LoCoMo
        turn's neighbours (`context`) give none, as in palace's `pairs` field."""
        key = ("bigram", lex.stem, lex.stopwords, kind)
        if key not in self._lexical:
            from .rank import bigrams
            from .text import analyzer

            analyse = analyzer(lex.stem, lex.stopwords)
            skip = {"rest", "domain", "context"}

            def text(doc: Doc) -> str:
                pairs = []
                for name, value in doc.fields.items():
                    if name not in skip:
                        terms = analyse(value)
                        pairs += bigrams(terms, kind)
                return " ".join(pairs)

            self._lexical[key] = {g: LexicalIndex.build([{"text": text(self.docs[r])} for r in rows], "none", False)
                                  for g, rows in self.groups.items()}
        return self._lexical[key]

    def embed_texts(self, variant: str) -> list[str]:
        """The text embedded for each doc under an embedding-text variant (`palace` is today's)."""
        if variant == "palace" or self.name in ("scifact", "locomo"):  # one text per unit there
            return [d.embed for d in self.docs]
        parts = EMBED_TEXTS[variant]
        out = []
        for d in self.docs:
            fields = dict(d.fields)
            fields["keywords"] = ", ".join(d.memory.keywords) if d.memory is not None else fields.get("keywords", "")
            out.append("\n".join(fields[p] for p in parts if fields.get(p)))
        return out


# ---- palaces ---------------------------------------------------------------------------------


def _body_rest(memory) -> str:
    """Body text outside the Image and Content sections (Links, unknown sections): invisible today (issue 14)."""
    from palace_cli.core.markdown import parse_sections

    sections = parse_sections(memory.body, 0)
    rest = [text for name, (text, _) in sections.items() if name not in ("image", "content")]
    first = re.search(r"^##[ \t]+", memory.body, re.MULTILINE)
    preamble = memory.body[: first.start()] if first else memory.body
    rest.insert(0, "\n".join(line for line in preamble.splitlines() if not line.startswith("# ")))
    return "\n".join(part for part in rest if part.strip())


def palace_docs(palace) -> list[Doc]:
    """Every memory of a palace, with the fields palace's lexical index holds plus the body's rest."""
    catalog = palace.index.catalog()
    memories = {m.path: m for m in palace.index.store.memories(catalog.paths)}
    docs = []
    for note_id, path, domain in zip(catalog.ids, catalog.paths, catalog.domains):
        m = memories[path]
        fields = {"subject": m.subject, "keywords": " ".join(m.keywords + m.aliases), "anchor": m.anchor,
                  "image": m.image, "content": m.content, "rest": _body_rest(m), "domain": domain.replace("-", " ")}
        docs.append(Doc(note_id, domain, fields, m.search_text(), (note_id,), memory=m))
    return docs


# Questions about which version of a fact holds (issue 13) test validity filtering, not ranking.
VALIDITY_KINDS = {"update", "as-of"}


def _queries(path: Path) -> list[Query]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            q = json.loads(line)
            if q.get("expected") and q.get("kind") not in VALIDITY_KINDS:
                out.append(Query(str(q["qid"]), q["query"], tuple(q["expected"]), q.get("kind", "")))
    return out


def _ready(root: Path, embedder):
    from palace_cli.index.refresh import refresh
    from palace_cli.palace import Palace

    palace = Palace(root)
    refresh(palace, embedder=embedder)
    return palace


def example_corpus(cache: Path, embedder) -> Corpus:
    """example-palace (copied into the cache so this repo's checkout is never indexed in place)."""
    root = cache / "palaces" / "example"
    if root.exists():
        shutil.rmtree(root / "memories")
    shutil.copytree(REPO / "example-palace", root, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".palace"))
    palace = _ready(root, embedder)
    return Corpus("example", palace_docs(palace), _queries(REPO / "example-palace" / "queries.jsonl"), palace,
                  note="example-palace/queries.jsonl (answerable, without the update and as-of kinds)")


def skill_corpus(cache: Path, embedder) -> Corpus:
    """The public memory-palace skill's 93 memories, imported as `palace import` does."""
    from palace_cli.editing.authoring import init_palace
    from palace_cli.importers import import_path
    from palace_cli.palace import Palace

    root = cache / "palaces" / "skill"
    exam = root / "red-queen.queries.jsonl"
    if not (root / "palace.toml").exists():
        init_palace(root, name="memory-palace skill")
        import_path(Palace(root), SHARED / "memory-palace-skill", format="memory-palace-json", queries=exam)
    palace = _ready(root, embedder)
    source = SKILL_QUERIES if SKILL_QUERIES.exists() else exam
    return Corpus("skill", palace_docs(palace), _queries(source), palace, note=str(source.relative_to(REPO)
                  if source.is_relative_to(REPO) else "Red Queen exam (5 questions)"))


def scifact_corpus(cache: Path, embedder) -> Corpus:
    """SciFact as `palace bench retrieval --beir` imports it (51 clustered domains); reuses that palace when built."""
    from palace_cli.backends.install import models_dir
    from palace_cli.bench.retrieval import beir_palace

    root = cache / "palaces" / "scifact"
    if not (root / "palace.toml").exists():
        built = sorted((models_dir().parent / "bench").glob("scifact-*"))
        done = [b for b in built if (b / "queries.jsonl").exists() and (b / ".palace" / "vectors" / "manifest.json").exists()]
        if done:
            shutil.copytree(done[-1], root, symlinks=True)
    palace, queries = beir_palace(SHARED / "scifact", workdir=root)
    palace = _ready(palace.root, embedder)
    return Corpus("scifact", palace_docs(palace), _queries(queries), palace, note="BEIR test split, 300 queries")


# ---- LoCoMo ----------------------------------------------------------------------------------

LOCOMO_UNITS = ("turn", "turn-nospeaker", "turn+date", "window1", "window2", "window2+date", "exchange",
                "exchange+date", "chunk4", "chunk4+date", "chunk6+date", "chunk8+date")
UNIT = re.compile(r"^(turn|window\d|exchange|chunk\d+)(-nospeaker)?(\+date)?$")
EVIDENCE = re.compile(r"^D(\d+):(\d+)$")


def _turn_text(turn: dict) -> str:
    text = turn["text"]
    if turn.get("blip_caption"):
        text += f" [shares a photo: {turn['blip_caption']}]"
    return text


def locomo_corpus(unit: str = "turn", path: Path | None = None) -> Corpus:
    """LoCoMo dev: one group per conversation; questions of categories 1-4; a unit per `unit`.

    turn: a turn alone (speaker as its subject field); windowN: the turn ranked with its
    neighbours (N each side, same session) as a second field, the hit being the single turn;
    exchange: consecutive pairs of turns as one unit; chunkN: N consecutive turns as one unit.
    `-nospeaker` leaves the speaker's name out; `+date` adds the session date (a field, and the
    first line of the embedded text).
    """
    match = UNIT.match(unit)
    if not match:
        raise SystemExit(f"unknown LoCoMo unit {unit!r}; e.g. {', '.join(LOCOMO_UNITS)}")
    data = json.loads(Path(path or SHARED / "locomo" / "locomo-dev5.json").read_text())
    docs, queries, malformed = [], [], 0
    for conv in data:
        group, c = conv["sample_id"], conv["conversation"]
        sessions = sorted((int(k.split("_")[1]), v) for k, v in c.items() if re.fullmatch(r"session_\d+", k) and v)
        ids = set()
        for number, turns in sessions:
            date = c.get(f"session_{number}_date_time", "")
            ids |= {t["dia_id"] for t in turns}
            docs += _units(group, number, date, turns, *match.groups())
        for i, qa in enumerate(conv["qa"]):
            if qa["category"] == 5:
                continue
            good = tuple(e for e in qa.get("evidence", []) if EVIDENCE.match(e) and e in ids)
            malformed += len(qa.get("evidence", [])) - len(good)
            if good:
                queries.append(Query(f"{group}-{i}", qa["question"], good, f"cat{qa['category']}", group))
    extra = {"context": 0.5, "date": 1.0}
    return Corpus("locomo", docs, queries, None, extra,
                  note=f"unit {unit}; {malformed} malformed or unknown evidence ids skipped")


def _units(group: str, session: int, date: str, turns: list[dict], base: str, nospeaker, with_date) -> list[Doc]:
    """The retrieval units of one session."""
    lines = [f"{t['speaker']}: {_turn_text(t)}" for t in turns]
    domain = f"{group}/S{session}"
    out = []
    if base == "exchange" or base.startswith("chunk"):
        size = 2 if base == "exchange" else int(base[5:])
        for start in range(0, len(turns), size):
            part = turns[start : start + size]
            text = "\n".join(lines[start : start + size])
            fields = {"content": " ".join(_turn_text(t) for t in part), "subject": " ".join(sorted({t["speaker"] for t in part}))}
            if with_date:
                fields["date"] = date
                text = f"{date}\n{text}"
            out.append(Doc(part[0]["dia_id"], domain, fields, text, tuple(t["dia_id"] for t in part), group,
                           f"[{date}]\n" + "\n".join(lines[start : start + size])))
        return out
    for i, turn in enumerate(turns):
        fields = {"content": _turn_text(turn)}
        embed = lines[i]
        if nospeaker:
            embed = _turn_text(turn)
        else:
            fields["subject"] = turn["speaker"]
        if base.startswith("window"):
            width = int(base[6:])
            around = [j for j in range(i - width, i + width + 1) if 0 <= j < len(turns) and j != i]
            fields["context"] = " ".join(_turn_text(turns[j]) for j in around)
            embed = "\n".join(lines[max(i - width, 0) : i + width + 1])
        if with_date:
            fields["date"] = date
            embed = f"{date}\n{embed}"
        out.append(Doc(turn["dia_id"], domain, fields, embed, (turn["dia_id"],), group, f"[{date}] {lines[i]}"))
    return out


def tokens(text: str) -> int:
    """Tokens at 4 bytes a token, the rule palace's wake-up budget uses."""
    return math.ceil(len(text.encode("utf-8")) / 4)


def load(name: str, cache: Path, embedder, unit: str = "turn") -> Corpus:
    """A corpus by name."""
    if name == "example":
        return example_corpus(cache, embedder)
    if name == "skill":
        return skill_corpus(cache, embedder)
    if name == "scifact":
        return scifact_corpus(cache, embedder)
    if name == "locomo":
        return locomo_corpus(unit)
    raise SystemExit(f"unknown corpus {name!r}; choose from {', '.join(CORPORA)}")
