"""`palace bench retrieval`: `palace recall` against flat fused, lexical and dense rankings on the same queries, with CIs."""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from palace_cli.bench.baselines import BASELINES, DENSE_BASELINES, baseline_ranking, handed
from palace_cli.errors import PalaceError
from palace_cli.palace import Palace
from palace_cli.search.profiles import BYTES_PER_TOKEN, PROFILES
from palace_cli.search.retrieve import hit_confidence, recall, search, trim_hits
from palace_cli.search.context import build_context
from palace_cli.core.dates import parse_moment

ALL_MODES = ("recall", "lexical", "dense", "fused")
# Rows of earlier versions, still accepted: `2hop` is `recall` (it ranks flat), `hybrid` is `fused`.
OLD_ROW_NAMES = {"2hop": "recall", "hybrid": "fused"}
CUTOFFS = (1, 3, 5, 10)
BOOTSTRAP = 1000


@dataclass
class Query:
    """One benchmark question: expected ids (empty means the palace does not hold the answer), or expected paths
    (an adopted vault's questions name notes by path; resolve_paths turns them into ids), and the heading
    under which the first one answers (`section`)."""

    qid: str
    query: str
    expected: list[str]
    kind: str = ""
    as_of: str = ""  # asked about this date (the expected memories are the versions valid then)
    expected_paths: list[str] = field(default_factory=list)
    section: str = ""


def row_names(modes) -> list[str]:
    """The benchmark rows asked for, an earlier name read as today's, each once."""
    return list(dict.fromkeys(OLD_ROW_NAMES.get(m, m) for m in modes))


def load_queries(path: Path) -> list[Query]:
    """Read a JSON-lines query file; a bad line raises PalaceError naming file and line."""
    queries = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            query = Query(str(data["qid"]), str(data["query"]), [str(e) for e in data.get("expected") or []],
                          str(data.get("kind", "")), str(data.get("as_of") or ""),
                          [str(p) for p in data.get("expected_paths") or []], str(data.get("section") or ""))
            if query.as_of:
                parse_moment(query.as_of)
            queries.append(query)
        except (ValueError, KeyError, TypeError) as exc:
            raise PalaceError(f"{path}:{number}: not a query line ({exc})") from None
    return queries


def resolve_paths(palace: Palace, queries: list[Query]) -> list[Query]:
    """Queries whose `expected_paths` are turned into the ids of the notes at those paths; a path no note has
    raises PalaceError (a question about a note the palace does not index would count as absent)."""
    palace.refresh(embedder=None)
    paths = palace.index.names().paths
    for query in queries:
        if query.expected_paths and not query.expected:
            missing = [p for p in query.expected_paths if p not in paths]
            if missing:
                raise PalaceError(f"{query.qid}: no note at {', '.join(missing)} in {palace.root}")
            query.expected = [paths[p].id for p in query.expected_paths]
    return queries


def _section_hit(hit, heading: str) -> bool:
    """True when a hit is handed as the section a question's answer stands under (its heading on the hit's path,
    or the heading of a short section joined into it)."""
    from palace_cli.core.text import normalize

    wanted = normalize(heading)
    if hit.kind != "section" or not wanted:
        return False
    if any(normalize(part) == wanted for part in hit.heading):
        return True
    text = hit.memory.content if hit.memory is not None else ""
    return any(normalize(line) == wanted for line in text.splitlines()[:60] if len(line) < 200)


def ndcg_at(ranked: list[str], expected: set[str], k: int = 10) -> float:
    """Binary-relevance nDCG@k."""
    dcg = sum(1 / math.log2(i + 2) for i, item in enumerate(ranked[:k]) if item in expected)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(expected), k)))
    return dcg / ideal if ideal else 0.0


def query_metrics(ranked: list[str], expected: list[str]) -> dict[str, float]:
    """recall@1/3/5/10, reciprocal rank and nDCG@10 of one ranking."""
    wanted = set(expected)
    out = {f"recall@{k}": len(wanted & set(ranked[:k])) / len(wanted) for k in CUTOFFS}
    rank = next((i for i, item in enumerate(ranked, start=1) if item in wanted), None)
    out["mrr"] = 1 / rank if rank else 0.0
    out["ndcg@10"] = ndcg_at(ranked, wanted)
    return out


def bootstrap_ci(values: list[float], seed: int = 7) -> list[float]:
    """95% percentile bootstrap interval of the mean."""
    if not values:
        return [0.0, 0.0]
    data = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(BOOTSTRAP, len(data)))].mean(axis=1)
    return [round(float(np.percentile(means, 2.5)), 4), round(float(np.percentile(means, 97.5)), 4)]


@dataclass
class ModeRun:
    """Per-query results of one mode."""

    metrics: list[dict[str, float]] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)            # the kind of each answerable query, aligned
    context_bytes: list[int] = field(default_factory=list)
    context_hit: list[float] = field(default_factory=list)
    irrelevant: list[float] = field(default_factory=list)     # units of another kind than asked about, handed
    absent_units: list[float] = field(default_factory=list)   # units handed for questions the palace cannot answer
    absent_turns: list[float] = field(default_factory=list)   # the turns among them
    latencies_ms: list[float] = field(default_factory=list)
    fallbacks: int = 0
    section_hit: list[float] = field(default_factory=list)    # questions with a `section`: handed as that section
    route_hit: list[float] = field(default_factory=list)
    absent_confidence: list[float] = field(default_factory=list)
    present_confidence: list[float] = field(default_factory=list)
    current_at_1: list[float] = field(default_factory=list)   # queries about a changed fact, asked about now
    as_of_at_1: list[float] = field(default_factory=list)     # the same, asked as of a past date
    stale_handed: int = 0                                     # queries about now handed a memory not valid now
    stale_handed_as_of: int = 0                               # as-of queries handed a memory not valid then


def _run_query(palace: Palace, mode: str, query: Query, profile: str, include_superseded: bool = False):
    """(ranked ids, handed-over units, context bytes, fallback, routed domains, confidence) for one query. recall
    is `palace recall` as an agent calls it (the relevance rule, the caps, the budget); the flat modes hand the
    first k of their ranking, trimmed as the profile trims. A section's id is its note's."""
    spec = PROFILES[profile]
    when = dict(as_of=query.as_of or None, include_superseded=include_superseded)
    if mode == "recall":
        result = recall(palace, query.query, profile=profile, do_refresh=False, depth=10, **when)
        return (_unit_ids(result.ranked), result.handed, result.context_bytes, result.fallback,
                {r.domain for r in result.route}, result.confidence)
    if mode in BASELINES:
        hidden = frozenset() if include_superseded else palace.index.catalog().hidden(parse_moment(query.as_of)
                                                                                     if query.as_of else None)
        ranked = baseline_ranking(palace, mode, query.query, hidden)
        top = trim_hits(ranked[: spec.k]) if spec.trim else ranked[: spec.k]
        handed(palace, top)
        context = build_context(top, spec, spec.budget)
        return _unit_ids(ranked), top, len(context.encode("utf-8")), False, None, hit_confidence(ranked)
    result = search(palace, query.query, mode=mode, k=10, do_refresh=False, **when)
    top = result.ranked[: spec.k]  # search() already loaded these hits' memories
    top = trim_hits(top) if spec.trim else top
    context = build_context(top, spec, spec.budget)
    return (_unit_ids(result.ranked), top, len(context.encode("utf-8")), False, None,
            hit_confidence(result.ranked))


def _unit_ids(hits) -> list[str]:
    """The ids a question's expected answers name: a memory's, a section's note's, a turn's."""
    return [h.memory_id or h.id for h in hits]


def run_retrieval_bench(palace: Palace, queries: list[Query], modes=ALL_MODES, profile: str = "reference",
                        progress: Callable[[str, int, int], None] | None = None, dataset: str = "",
                        include_superseded: bool = False) -> dict:
    """Run every mode over every query (one warm-up pass, then timed) and summarise with bootstrap CIs.

    Queries about a fact that changed (an expected memory with other versions) also give current@1 (the
    version valid at the query's moment ranked first; as_of@1 for queries asked about a past date) and
    stale handed (queries whose context held a memory not valid at that moment). include_superseded runs
    every query over all versions: what the validity filter prevents."""
    palace.refresh()
    embedder, dense, _ = palace.index.dense()
    queries = resolve_paths(palace, queries)
    modes = [m for m in row_names(modes) if m in ALL_MODES and (embedder is not None or m not in ("dense",))]
    sectioned = set(palace.index.catalog().sections_of)
    # The flat baselines (bench/baselines.py), on every corpus: a ranking change below one of them shows at once.
    modes += [m for m in BASELINES if embedder is not None or m not in DENSE_BASELINES]
    answerable = [q for q in queries if q.expected]
    absent = [q for q in queries if not q.expected]
    # Warm-up: load catalogs, whoosh readers and the query-embedding cache once, so latency is warm.
    for q in queries:
        recall(palace, q.query, do_refresh=False)
    summary = {"dataset": dataset, "queries": len(answerable), "absent_queries": len(absent), "profile": profile,
               "dense": dense, "include_superseded": include_superseded, "modes": {}}
    versions = palace.index.versions()
    changed = {q.qid for q in answerable if any(len(versions.chain(e)) > 1 for e in q.expected)}
    summary["changed_fact_queries"] = {"now": sum(1 for q in answerable if q.qid in changed and not q.as_of),
                                       "as_of": sum(1 for q in answerable if q.qid in changed and q.as_of)}
    runs = {mode: ModeRun() for mode in modes}
    # Modes take turns on each query, in a rotating order, so drift in the machine's speed (other
    # load, caches, clock) falls on every mode alike rather than on whichever ran first.
    for position, q in enumerate(queries):
        for turn in range(len(modes)):
            mode = modes[(position + turn) % len(modes)]
            run = runs[mode]
            # Warm means indexes and models loaded, not answers remembered: each timed query embeds itself.
            palace.index.forget_query_vectors()
            started = time.perf_counter()
            ranked, handed_hits, context_bytes, fallback, routed, confidence = _run_query(palace, mode, q, profile,
                                                                                          include_superseded)
            elapsed = (time.perf_counter() - started) * 1000
            _record(palace, run, q, versions, q.qid in changed, sectioned,
                    (ranked, handed_hits, context_bytes, fallback, routed, confidence), elapsed)
        if progress:
            progress("queries", position + 1, len(queries))
    for mode in modes:
        summary["modes"][mode] = summarise(runs[mode])
    kinds = sorted({q.kind for q in answerable if q.kind})
    if len(kinds) > 1:  # one kind would repeat the whole run
        summary["kinds"] = {kind: {"queries": sum(1 for q in answerable if q.kind == kind),
                                   "modes": {mode: summarise_kind(runs[mode], kind) for mode in modes}}
                            for kind in kinds}
    return summary


def _record(palace: Palace, run: ModeRun, q: Query, versions, changed: bool, sectioned: set[str], outcome: tuple,
            elapsed: float) -> None:
    """Add one query's outcome (ranked ids, handed hits, context bytes, fallback, routed domains, confidence) to
    its mode's run."""
    ranked, handed_hits, context_bytes, fallback, routed, confidence = outcome
    handed = _unit_ids(handed_hits)
    if q.section and q.expected:  # the section, or the whole note when it is too short to be cut
        run.section_hit.append(float(any(h.memory_id == q.expected[0] and (
            _section_hit(h, q.section) or (h.kind == "memory" and h.id not in sectioned)) for h in handed_hits)))
    moment = parse_moment(q.as_of) if q.as_of else None
    if any(not versions.valid_at(i, moment) for i in handed):
        if q.as_of:
            run.stale_handed_as_of += 1
        else:
            run.stale_handed += 1
    if changed:
        (run.as_of_at_1 if q.as_of else run.current_at_1).append(float(bool(ranked) and ranked[0] in q.expected))
    if not q.expected:
        run.absent_confidence.append(confidence)
        run.absent_units.append(float(len(handed_hits)))
        run.absent_turns.append(float(sum(h.kind == "turn" for h in handed_hits)))
        return
    # a question about memories (or sections) is not answered by a conversation turn
    run.irrelevant.append(float(sum(h.kind == "turn" for h in handed_hits)))
    run.present_confidence.append(confidence)
    run.latencies_ms.append(elapsed)
    run.metrics.append(query_metrics(ranked, q.expected))
    run.kinds.append(q.kind)
    run.context_bytes.append(context_bytes)
    run.context_hit.append(float(bool(set(handed) & set(q.expected))))
    run.fallbacks += int(fallback)
    if routed is not None:
        domains = {palace_domain(palace, e) for e in q.expected}
        run.route_hit.append(float(bool(domains & routed)))


KIND_METRICS = ("recall@1", "recall@3", "mrr", "ndcg@10")


def summarise_kind(run: ModeRun, kind: str) -> dict:
    """Means and CIs of the main metrics (and context recall) over the queries of one kind."""
    rows = [i for i, k in enumerate(run.kinds) if k == kind]
    out: dict = {}
    ci: dict = {}
    for name in KIND_METRICS:
        values = [run.metrics[i][name] for i in rows]
        out[name] = round(statistics.fmean(values), 4) if values else 0.0
        ci[name] = bootstrap_ci(values)
    hits = [run.context_hit[i] for i in rows]
    out["context_recall"] = round(statistics.fmean(hits), 4) if hits else 0.0
    out["context_bytes"] = round(statistics.fmean([run.context_bytes[i] for i in rows]), 1) if rows else 0.0
    out["ci"] = ci
    return out


def palace_domain(palace: Palace, note_id: str) -> str | None:
    catalog = palace.index.catalog()
    row = catalog.row_of.get(note_id)
    return catalog.domains[row] if row is not None else None


def summarise(run: ModeRun) -> dict:
    """Means, CIs and latency percentiles of one mode."""
    out: dict = {}
    ci: dict = {}
    for name in [f"recall@{k}" for k in CUTOFFS] + ["mrr", "ndcg@10"]:
        values = [m[name] for m in run.metrics]
        out[name] = round(statistics.fmean(values), 4) if values else 0.0
        ci[name] = bootstrap_ci(values)
    out["context_bytes"] = round(statistics.fmean(run.context_bytes), 1) if run.context_bytes else 0.0
    out["context_recall"] = round(statistics.fmean(run.context_hit), 4) if run.context_hit else 0.0
    ci["context_recall"] = bootstrap_ci(run.context_hit)
    out["context_tokens"] = round(statistics.fmean(run.context_bytes) / BYTES_PER_TOKEN, 1) if run.context_bytes else 0.0
    out["irrelevant_handed"] = round(statistics.fmean(run.irrelevant), 4) if run.irrelevant else 0.0
    ci["irrelevant_handed"] = bootstrap_ci(run.irrelevant)
    if run.absent_units:
        out["absent_units_handed"] = round(statistics.fmean(run.absent_units), 4)
        out["absent_turns_handed"] = round(statistics.fmean(run.absent_turns), 4)
    if run.section_hit:
        out["section_recall"] = round(statistics.fmean(run.section_hit), 4)
        out["section_queries"] = len(run.section_hit)
        ci["section_recall"] = bootstrap_ci(run.section_hit)
    lat = sorted(run.latencies_ms)
    out["p50_ms"] = round(float(np.percentile(lat, 50)), 2) if lat else 0.0
    out["p95_ms"] = round(float(np.percentile(lat, 95)), 2) if lat else 0.0
    if run.route_hit:
        out["route_accuracy"] = round(statistics.fmean(run.route_hit), 4)
        out["fallbacks"] = run.fallbacks
    if run.current_at_1 or run.as_of_at_1:
        out["current@1"] = round(statistics.fmean(run.current_at_1), 4) if run.current_at_1 else None
        out["as_of@1"] = round(statistics.fmean(run.as_of_at_1), 4) if run.as_of_at_1 else None
        ci["current@1"] = bootstrap_ci(run.current_at_1)
        ci["as_of@1"] = bootstrap_ci(run.as_of_at_1)
    out["stale_handed"] = run.stale_handed
    out["stale_handed_as_of"] = run.stale_handed_as_of
    if run.absent_confidence:
        out["confidence_absent_mean"] = round(statistics.fmean(run.absent_confidence), 4)
        out["confidence_present_mean"] = round(statistics.fmean(run.present_confidence), 4)
        out["abstain_auc"] = round(_auc(run.present_confidence, run.absent_confidence), 4)
    out["ci"] = ci
    return out


def _auc(positives: list[float], negatives: list[float]) -> float:
    """Probability that an answerable query's confidence beats an absent one's (ties count half)."""
    if not positives or not negatives:
        return 0.0
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


def markdown_table(summary: dict) -> str:
    """The summary as a Markdown table, one row per mode."""
    columns = ["recall@1", "recall@3", "recall@5", "recall@10", "mrr", "ndcg@10", "context_recall",
               "context_tokens", "irrelevant_handed", "p50_ms", "p95_ms"]
    lines = [f"dataset: {summary['dataset']}, {summary['queries']} queries"
             + (f" (+{summary['absent_queries']} absent)" if summary.get("absent_queries") else "")
             + f", profile {summary['profile']}, dense {summary['dense']}", "",
             "| mode | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for mode, row in summary["modes"].items():
        cells = []
        for column in columns:
            value = row.get(column, 0)
            interval = row["ci"].get(column)
            cells.append(f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else f"{value:g}")
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    extra = [f"{m}: route accuracy {r['route_accuracy']:.3f} (an expected memory's domain among those handed over)"
             for m, r in summary["modes"].items() if "route_accuracy" in r]
    extra += [f"{m}: section recall {r['section_recall']:.3f} (of {r['section_queries']} questions whose answer stands "
              "under a heading: handed that section, or the whole note when it is too short to be cut)"
              for m, r in summary["modes"].items() if "section_recall" in r]
    extra += [f"{m}: abstention AUC {r['abstain_auc']:.3f} (confidence answerable {r['confidence_present_mean']:.3f}"
              f" vs absent {r['confidence_absent_mean']:.3f})" for m, r in summary["modes"].items() if "abstain_auc" in r]
    if summary.get("kinds"):
        extra += ["", "by kind (recall@1 / recall@3 / MRR):", "",
                  "| kind | queries | " + " | ".join(summary["modes"]) + " |", "|---" * (len(summary["modes"]) + 2) + "|"]
        for kind, row in summary["kinds"].items():
            cells = [" / ".join(f"{m[name]:.3f}" for name in ("recall@1", "recall@3", "mrr")) for m in row["modes"].values()]
            extra.append(f"| {kind} | {row['queries']} | " + " | ".join(cells) + " |")
    counts = summary.get("changed_fact_queries") or {}
    if counts.get("now") or counts.get("as_of"):
        extra += ["", f"facts that change ({counts['now']} queries about now, {counts['as_of']} as of a past date"
                  + (", every version ranked: --include-superseded" if summary.get("include_superseded") else "")
                  + "):", "", "| mode | current@1 | as_of@1 | stale handed | stale handed (as of) |", "|---|---|---|---|---|"]
        for mode, row in summary["modes"].items():
            cells = []
            for name in ("current@1", "as_of@1"):
                interval = row["ci"].get(name)
                value = row.get(name)
                cells.append("-" if value is None else f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]")
            extra.append(f"| {mode} | {cells[0]} | {cells[1]} | {row['stale_handed']} | {row['stale_handed_as_of']} |")
    return "\n".join(lines + [""] + extra) + "\n"


def corpus_palace(source: Path, workdir: Path | None = None, progress=None) -> tuple[Palace, Path]:
    """A palace for any corpus and its default query file: DIR itself when it is a palace; a BEIR directory as
    beir_palace makes it; anything else `palace import` reads (its format guessed) imported once into a
    palace cached under $PALACE_HOME/bench, keyed by the source's files, sizes and times."""
    import hashlib

    from palace_cli.editing.initplan import init_palace
    from palace_cli.backends.install import models_dir
    from palace_cli.importers import import_path

    source = Path(source).expanduser().resolve()
    if (source / "palace.toml").is_file():
        return Palace(source), source / "queries.jsonl"
    if (source / "corpus.jsonl").is_file():
        return beir_palace(source, workdir, progress)
    files = sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else [source]
    if not files:
        raise PalaceError(f"{source}: no files to import")
    stamp = "\n".join(f"{p.relative_to(source) if p != source else p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}"
                      for p in files)
    digest = hashlib.sha256(stamp.encode("utf-8")).hexdigest()[:12]
    root = Path(workdir) if workdir else models_dir().parent / "bench" / f"{source.name}-{digest}"
    marker = root / "bench-source.txt"  # written once the import finished: a killed import is redone
    if source.is_dir() and _is_vault(files):
        return _vault_palace(source, root, marker)
    if not marker.is_file():
        if not (root / "palace.toml").exists():
            init_palace(root, name=f"corpus {source.name}")
        import_path(Palace(root), source, queries=root / "queries.jsonl", progress=progress)
        marker.write_text(f"{source}\n", encoding="utf-8")
    return Palace(root), root / "queries.jsonl"


def _is_vault(files: list[Path]) -> bool:
    """True for a folder of Markdown notes (an Obsidian vault, a Foam workspace): nothing `palace import` reads
    as records (JSON), at least one `.md`."""
    suffixes = {p.suffix.lower() for p in files if not p.name.startswith(".")}
    return ".md" in suffixes and not suffixes & {".json", ".jsonl"}


def _vault_palace(source: Path, root: Path, marker: Path) -> tuple[Palace, Path]:
    """A copy of a vault adopted where it lies (`palace init` on the copy: the notes are read as they are, not
    imported), made once and reused."""
    import shutil

    from palace_cli.editing.initplan import init_palace

    if not marker.is_file():
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(source, root, ignore=shutil.ignore_patterns(".git", ".palace", ".obsidian"))
        for folder, _dirs, names in os.walk(root):  # the data may be read-only; the copy is the bench's own
            os.chmod(folder, 0o755)
            for name in names:
                os.chmod(os.path.join(folder, name), 0o644)
        init_palace(root, name=f"vault {source.name}")
        marker.write_text(f"{source}\n", encoding="utf-8")
    return Palace(root), root / "queries.jsonl"


def beir_palace(beir_dir: Path, workdir: Path | None = None, progress=None) -> tuple[Palace, Path]:
    """A palace holding a BEIR corpus (imported once, then reused), and its query file."""
    from palace_cli.editing.initplan import init_palace
    from palace_cli.importers import import_path
    from palace_cli.backends.install import models_dir

    beir_dir = Path(beir_dir).expanduser().resolve()
    if not (beir_dir / "corpus.jsonl").is_file():
        raise PalaceError(f"{beir_dir}: not a BEIR directory (no corpus.jsonl)")
    stat = (beir_dir / "corpus.jsonl").stat()
    root = Path(workdir) if workdir else models_dir().parent / "bench" / f"{beir_dir.name}-{stat.st_size}-{int(stat.st_mtime)}"
    queries = root / "queries.jsonl"
    if not (root / "palace.toml").exists():
        init_palace(root, name=f"BEIR {beir_dir.name}")
    palace = Palace(root)
    if not queries.exists() or not any(palace.memories_dir.rglob("*.md")):
        import_path(palace, beir_dir, format="beir", queries=queries, progress=progress)
    return palace, queries
