"""Fit recall's relevance rule (issue 26) by leaving one corpus out: docs/ranking-experiments.md, section 7.

    python scripts/relevance_experiments.py collect OUT.jsonl PALACE QUESTIONS [CORPUS]
    python scripts/relevance_experiments.py sizes DIR/sizes.json PALACE DIR/*.jsonl
    python scripts/relevance_experiments.py fit DIR

`collect` ranks every question of a questions file (JSON lines; a LoCoMo .json file; CORPUS keeps the lines
of one `corpus`, as in near-miss.queries.jsonl) with `recall(depth=30)` and writes each ranked unit's kind,
rank score, BM25, cosine and words share. `sizes` writes the bytes each ranked unit takes in a context
(run it once per palace into the same file: it merges). `fit` reads DIR's files (named as below), replays every rule of
the grid on them (handing memories up to k 3 and turns up to 10 as recall does), and prints, for each
corpus left out, the rule fitted on the others (the smallest context whose recall stays within 0.005 of
the earlier rule's on every corpus fitted on) and how it does on every corpus.

Corpora (files in DIR): mixed1 = mixed1-ex, mixed1-exnm, mixed1-locomo (example-palace beside LoCoMo's
conv-26); skill = skill, skill-nm; locomo = locomo (LoCoMo dev alone); checked, never fitted on:
mixed5 = mixed-ex, mixed-exnm, mixed-locomo (example-palace beside all five conversations).
"""

from __future__ import annotations

import itertools
import json
import re
import statistics
import sys
from pathlib import Path

TRIM_LEXICAL, TRIM_DENSE = 0.6, 0.06


def collect(out: str, palace_dir: str, questions: str, corpus: str | None = None, depth: int = 30) -> None:
    """Rank every question and write the ranked units' measures, one JSON line a question."""
    from palace_cli.bench.locomo import load_questions
    from palace_cli.palace import Palace
    from palace_cli.search.retrieve import recall

    palace = Palace(Path(palace_dir))
    palace.refresh()
    if questions.endswith(".json"):
        found = load_questions(palace, Path(questions))
        items = [(q.qid, q.text, [] if q.category == 5 else q.evidence, f"locomo{q.category}")
                 for q in found.answerable + found.adversarial]
    else:
        items = []
        for line in Path(questions).read_text(encoding="utf-8").splitlines():
            data = json.loads(line)
            if (corpus and data.get("corpus") != corpus) or data.get("as_of"):
                continue
            items.append((data["qid"], data["query"], data.get("expected") or [], data.get("kind", "")))
    with open(out, "w", encoding="utf-8") as handle:
        for qid, query, expected, kind in items:
            result = recall(palace, query, depth=depth, do_refresh=False)
            handle.write(json.dumps({"qid": qid, "query": query, "expected": expected, "kind": kind, "ranked": [
                {"id": h.id, "kind": h.kind, "score": h.score, "parts": h.parts, "words": h.words}
                for h in result.ranked]}) + "\n")


def sizes(out: str, palace_dir: str, *files: str) -> None:
    """unit id -> the bytes its block takes in the reference context, for the units the files rank."""
    from palace_cli.palace import Palace
    from palace_cli.search.context import assemble_context
    from palace_cli.search.hits import Hit
    from palace_cli.search.profiles import PROFILES
    from palace_cli.search.retrieve import attach_hits

    palace = Palace(Path(palace_dir))
    catalog = palace.index.catalog()
    found = json.loads(Path(out).read_text()) if Path(out).exists() else {}
    ids = {h["id"] for f in files for line in open(f, encoding="utf-8") for h in json.loads(line)["ranked"]}
    for unit_id in ids - set(found):
        row = catalog.row_of.get(unit_id)
        if row is None:
            continue
        hit = Hit(unit_id, "", catalog.domains[row], catalog.paths[row], 0, 0.0, {}, kind=catalog.kinds[row])
        attach_hits(palace, [hit], catalog)
        context = assemble_context([hit], PROFILES["reference"], None)[0]
        found[unit_id] = len(context.encode("utf-8")) - len(context.split("\n", 1)[0]) - 1
    Path(out).write_text(json.dumps(found))


def _lex(h): return h["parts"].get("lexical", 0.0)
def _cos(h): return h["parts"].get("dense")


def _about(p, h):
    c = _cos(h)
    return (h["words"] or 0) >= p["wf"] or (c is not None and c >= p["mf"])


def _refused(p, h, best, first):
    if not _about(p, h):
        return True
    if first:
        return False
    if best["score"] > 0 and h["score"] < p["rel"] * best["score"]:
        return True
    c = _cos(h)
    if (h["words"] or 0) < p["nw"] and (c is None or c < p["nm"]):
        return True
    return p.get("nm0") is not None and (h["words"] or 0) == 0 and (c is None or c < p["nm0"])


def _close(h, best):
    ok = False
    if "lexical" in h["parts"] and "lexical" in best["parts"]:
        ok |= _lex(h) >= TRIM_LEXICAL * _lex(best)
    if "dense" in h["parts"] and "dense" in best["parts"]:
        ok |= _cos(h) >= _cos(best) - TRIM_DENSE
    return ok


def handed(row, p, k=3, turns=10):
    """What a rule hands: the earlier rule (`p["before"]`: trimmed memories, the first turns) or the new one."""
    ranked = row["ranked"]
    if p.get("before"):
        memories = [h for h in ranked if h["kind"] == "memory"][:k]
        kept = memories[:1]
        for h in memories[1:]:
            if not _close(h, memories[0]):
                break
            kept.append(h)
        return kept + [h for h in ranked if h["kind"] == "turn"][:turns]
    if not ranked or not _about(p, ranked[0]):
        return []
    out, counts, trimmed, caps = [], {"memory": 0, "turn": 0}, False, {"memory": k, "turn": turns}
    for i, h in enumerate(ranked):
        kind = "turn" if h["kind"] == "turn" else "memory"
        if _refused(p, h, ranked[0], i == 0):
            continue
        if kind == "memory" and i > 0:
            trimmed = trimmed or not _close(h, ranked[0])
            if trimmed:
                continue
        if counts[kind] >= caps[kind]:
            continue
        counts[kind] += 1
        out.append(h)
    return out


def _conversation(unit_id):
    m = re.match(r"locomo-(conv-\d+)-s", unit_id)
    return m.group(1) if m else None


def measure(rows, p, sizes) -> dict:
    """recall (memory questions: an expected memory handed; LoCoMo: the share of evidence turns handed),
    irrelevant units (turns for a note question; memories and other conversations' turns for LoCoMo), tokens."""
    recalls, irrelevant, tokens = [], [], []
    for row in rows:
        units = handed(row, p)
        ids, expected = {u["id"] for u in units}, set(row["expected"])
        if row["kind"].startswith("locomo"):
            own = row["qid"].split("#")[0]
            irrelevant.append(sum(u["kind"] == "memory" or _conversation(u["id"]) != own for u in units))
            if expected:
                recalls.append(len(expected & ids) / len(expected))
        else:
            irrelevant.append(sum(u["kind"] == "turn" for u in units))
            if expected:
                recalls.append(float(bool(expected & ids)))
        tokens.append(sum(sizes.get(u["id"], 300) for u in units) / 4)
    return {"recall": statistics.fmean(recalls) if recalls else 0.0, "irrelevant": statistics.fmean(irrelevant),
            "tokens": statistics.fmean(tokens)}


CORPORA = {"mixed1": ["mixed1-ex", "mixed1-exnm", "mixed1-locomo"], "skill": ["skill", "skill-nm"],
           "locomo": ["locomo"], "mixed5": ["mixed-ex", "mixed-exnm", "mixed-locomo"]}


def grid():
    for rel, nw, nm in itertools.product((0.3, 0.35, 0.4, 0.45, 0.5), (0, 0.2, 0.3, 0.4), (0, 0.2, 0.25, 0.3, 0.35)):
        yield {"wf": 0.1, "mf": 0.35, "rel": rel, "nw": nw, "nm": nm}


def fit_all(directory: str) -> None:
    """Leave each of the three fitting corpora out in turn; print the fitted rule and every corpus's figures."""
    folder = Path(directory)
    rows = {name: [json.loads(line) for part in parts if (folder / f"{part}.jsonl").exists()
                   for line in open(folder / f"{part}.jsonl", encoding="utf-8")] for name, parts in CORPORA.items()}
    sizes = json.loads((folder / "sizes.json").read_text()) if (folder / "sizes.json").exists() else {}
    before = {name: measure(r, {"before": True}, sizes) for name, r in rows.items() if r}
    cache: dict = {}

    def m(p, name):
        key = (json.dumps(p, sort_keys=True), name)
        if key not in cache:
            cache[key] = measure(rows[name], p, sizes)
        return cache[key]

    folds = ["mixed1", "skill", "locomo"]
    for held in folds + [None]:
        train = [n for n in folds if n != held]
        best = None
        for p in grid():
            if any(m(p, n)["recall"] < before[n]["recall"] - 0.005 for n in train):
                continue
            key = statistics.fmean(m(p, n)["tokens"] / before[n]["tokens"] for n in train)
            if best is None or key < best[0] - 1e-9:
                best = (key, p)
        print(f"fitted without {held}: {best[1]}")
        for name in rows:
            if rows[name]:
                after, was = m(best[1], name), before[name]
                print(f"    {name:7} recall {was['recall']:.4f} -> {after['recall']:.4f}, irrelevant units "
                      f"{was['irrelevant']:.3f} -> {after['irrelevant']:.3f}, tokens {was['tokens']:.0f} -> "
                      f"{after['tokens']:.0f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["collect"]:
        collect(*sys.argv[2:6])
    elif sys.argv[1:2] == ["sizes"]:
        sizes(*sys.argv[2:])
    elif sys.argv[1:2] == ["fit"]:
        fit_all(sys.argv[2])
    else:
        print(__doc__)
