"""`palace bench ask`: when `ask` abstains, and how well its extractive answers quote the answer, measured
over the questions of one or more palaces pooled (so no threshold is fitted to one file).

Abstention: every question's recall (hybrid with an embedder, and lexical), its top hit's confidence and
coverage (abstention.weigh), and for each rule precision and recall of abstaining on the absent-knowledge
questions, cross-validated (6 folds stratified by palace and label) and across palaces (fit on one, test on
the other). Extractive answers: for questions labelled with answer phrases (an answers file: qid, expected,
answer), whether the quoted sentences contain them, from the expected memories alone ("oracle") and from
what recall handed over ("end to end"), for several ways of choosing sentences.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from palace_cli.answers import extract as ex
from palace_cli.answers.abstention import ABSTAIN_BELOW, weigh
from palace_cli.errors import PalaceError
from palace_cli.palace import Palace
from palace_cli.search.retrieve import recall
from palace_cli.core.text import normalize
from palace_cli.bench.retrieval import load_queries
from palace_cli.bench.verify import detection_metrics

Progress = Callable[[str, int, int], None]
FOLDS = 6
PREVIOUS = {"dense": 0.351, "lexical": 0.886}   # the thresholds calibrated on example-palace alone
SELECTIONS = {                                   # name: (weights, sentences)
    "first sentences": ({"position": 1.0}, 2),
    "question terms": ({"terms": 1.0}, 2),
    "terms + position + rank (default)": (ex.WEIGHTS, ex.MAX_SENTENCES),
    "default, one sentence": (ex.WEIGHTS, 1),
    "default, three sentences": (ex.WEIGHTS, 3),
    "default + sentence cosine": ({**ex.WEIGHTS, "dense": 1.0}, ex.MAX_SENTENCES),
}


@dataclass
class Asked:
    """One question, what recall's top hit showed in each mode, and its labelled answer phrases if any."""

    palace: str
    qid: str
    kind: str
    expected: list[str]
    signals: dict[str, dict] = field(default_factory=dict)    # mode -> {confidence, coverage, top}
    phrases: list[str] = field(default_factory=list)
    quoted: dict[str, dict[str, str]] = field(default_factory=dict)  # "oracle"/"e2e" -> selection -> text

    @property
    def absent(self) -> bool:
        return not self.expected


def load_answers(path: Path | None) -> dict[str, list[str]]:
    """qid -> answer phrases from a JSON-lines answers file (none: {})."""
    if path is None:
        return {}
    out = {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                data = json.loads(line)
                out[str(data["qid"])] = [str(p) for p in data["answer"]]
            except (ValueError, KeyError, TypeError) as exc:
                raise PalaceError(f"{path}:{number}: not an answer line ({exc})") from None
    return out


def _quote(palace: Palace, question: str, memories: list, embedder, timings: list[float]) -> dict[str, str]:
    """The extractive answer under every selection rule (the sentence cosine only with an embedder)."""
    text = palace.index.text
    pool = ex.candidates([m for m in memories if m.verify] or memories)
    started = time.perf_counter()
    terms = ex.question_terms(text.words, question)
    ex.score(pool, terms, text.words, ex.idf_of(text.document_frequencies, terms))
    timings.append((time.perf_counter() - started) * 1000)
    cosines = None
    if embedder is not None and pool:
        cosines = list(embedder.embed_batch([s.text for s in pool]) @ palace.index.query_vector(question))
    out = {}
    for name, (weights, limit) in SELECTIONS.items():
        if "dense" in weights and cosines is None:
            continue
        for i, sentence in enumerate(pool):
            parts = dict(sentence.parts, **({"dense": float(cosines[i])} if cosines is not None else {}))
            sentence.score = sum(weights.get(k, 0.0) * v for k, v in parts.items())
        out[name] = " ".join(s.text for s in ex.choose(pool, limit))
    return out


def collect(name: str, palace: Palace, queries_path: Path, answers_path: Path | None,
            progress: Progress | None = None, timings: list[float] | None = None) -> list[Asked]:
    """Every question of one palace: recall in both modes, the evidence, and quotes for labelled ones."""
    palace.refresh()
    answers = load_answers(answers_path)
    memories = palace.scan().memories
    embedder = palace.index.dense().embedder
    timings = timings if timings is not None else []
    queries = load_queries(queries_path)
    out = []
    for position, q in enumerate(queries, start=1):
        item = Asked(name, q.qid, q.kind, q.expected, phrases=answers.get(q.qid, []))
        handed = []
        for mode in ("hybrid", "lexical"):
            result = recall(palace, q.query, mode=mode, do_refresh=False, as_of=q.as_of or None)
            if mode == "hybrid" and not (result.hits and "dense" in result.hits[0].parts):
                continue  # no embedder: the lexical row is the only one
            evidence = weigh(palace, q.query, result)
            item.signals[evidence.signal] = {"confidence": evidence.confidence, "coverage": evidence.coverage,
                                             "top": result.hits[0].id if result.hits else None}
            if not handed:
                handed = [h.memory for h in result.handed if h.memory]
        if item.phrases:
            oracle = [memories[e] for e in q.expected if e in memories]
            item.quoted = {"oracle": _quote(palace, q.query, oracle, embedder, []),
                           "e2e": _quote(palace, q.query, handed, embedder, timings)}
        out.append(item)
        if progress:
            progress(name, position, len(queries))
    return out


# ---- abstention rules ------------------------------------------------------------------------


def _decide(items: list[Asked], signal: str, confidence: float, coverage: float) -> list[bool]:
    """Abstain when neither the confidence nor the coverage reaches its threshold."""
    return [i.signals[signal]["confidence"] < confidence and i.signals[signal]["coverage"] < coverage for i in items]


def _score(items: list[Asked], signal: str, decisions: list[bool]) -> dict:
    m = detection_metrics(decisions, [i.absent for i in items])
    answered = [i for i, d in zip(items, decisions) if not i.absent and not d]
    correct = sum(i.signals[signal]["top"] in i.expected for i in answered)
    return {"precision": round(m["precision"], 4), "recall": round(m["recall"], 4), "f1": round(m["f1"], 4),
            "abstained_answerable": m["fp"], "answered_absent": m["fn"],
            "answered_correctly": round(correct / len(answered), 4) if answered else 0.0}


def _candidates(values: list[float]) -> list[float]:
    ordered = sorted(set(round(v, 4) for v in values))
    return [ordered[0] - 1e-4] + [(a + b) / 2 for a, b in zip(ordered, ordered[1:])] + [ordered[-1] + 1e-4]


def fit(items: list[Asked], signal: str, coverage: float | None) -> tuple[float, float]:
    """(confidence, coverage) thresholds with the best abstention F1 on `items`; coverage fixed when given
    (2.0 means coverage is not used). Ties go to the lower thresholds, which abstain less."""
    absent = [i.absent for i in items]
    confidences = _candidates([i.signals[signal]["confidence"] for i in items])
    coverages = [coverage] if coverage is not None else _candidates([i.signals[signal]["coverage"] for i in items])
    best = max(((c, v) for c in confidences for v in coverages),
               key=lambda t: (detection_metrics(_decide(items, signal, *t), absent)["f1"], -t[0], -t[1]))
    return round(best[0], 4), round(best[1], 4)


def _folds(items: list[Asked]) -> list[int]:
    fold, seen = [], {}
    for item in items:
        key = (item.palace, item.absent)
        fold.append(seen.get(key, 0) % FOLDS)
        seen[key] = seen.get(key, 0) + 1
    return fold


def _by_palace(items: list[Asked], decisions: list[bool]) -> dict:
    """Per palace: answerable questions and how many were answered, absent ones and how many abstained."""
    out: dict = {}
    for item, abstain in zip(items, decisions):
        row = out.setdefault(item.palace, {"answerable": 0, "answered": 0, "absent": 0, "abstained": 0})
        if item.absent:
            row["absent"] += 1
            row["abstained"] += abstain
        else:
            row["answerable"] += 1
            row["answered"] += not abstain
    return out


def cross_validate(items: list[Asked], signal: str, coverage: float | None) -> dict:
    """Each question decided by thresholds fitted without its fold; the thresholds' range over folds."""
    fold = _folds(items)
    decisions = [False] * len(items)
    fitted = []
    for f in range(FOLDS):
        train = [i for i, k in zip(items, fold) if k != f]
        thresholds = fit(train, signal, coverage)
        fitted.append(thresholds)
        for index, k in enumerate(fold):
            if k == f:
                decisions[index] = _decide([items[index]], signal, *thresholds)[0]
    out = _score(items, signal, decisions)
    out["by_palace"] = _by_palace(items, decisions)
    out["confidence_range"] = [min(t[0] for t in fitted), max(t[0] for t in fitted)]
    out["coverage_range"] = [min(t[1] for t in fitted), max(t[1] for t in fitted)]
    return out


def across(items: list[Asked], signal: str, coverage: float | None) -> list[dict]:
    """Fit on one palace, test on each other one."""
    names = sorted({i.palace for i in items})
    out = []
    for train in names:
        thresholds = fit([i for i in items if i.palace == train], signal, coverage)
        for test in names:
            if test != train:
                held = [i for i in items if i.palace == test]
                out.append({"fit_on": train, "test_on": test, "thresholds": list(thresholds),
                            **_score(held, signal, _decide(held, signal, *thresholds))})
    return out


def abstention(items: list[Asked]) -> dict:
    """Every rule, per signal: fixed thresholds in-sample, fitted ones cross-validated and across palaces."""
    out = {}
    for signal in ("dense", "lexical"):
        rows = [i for i in items if signal in i.signals]
        if not rows or not any(i.absent for i in rows):
            continue
        default = (ABSTAIN_BELOW[signal], ABSTAIN_BELOW["coverage"])
        out[signal] = {
            "questions": len(rows), "absent": sum(i.absent for i in rows),
            "previous": {"thresholds": [PREVIOUS[signal], 2.0],
                         **_score(rows, signal, _decide(rows, signal, PREVIOUS[signal], 2.0))},
            "default": {"thresholds": list(default), **_score(rows, signal, _decide(rows, signal, *default))},
            "default_by_palace": {name: {"thresholds": list(default), **_score(
                [i for i in rows if i.palace == name], signal,
                _decide([i for i in rows if i.palace == name], signal, *default))}
                for name in sorted({i.palace for i in rows})},
            "confidence_only": {**cross_validate(rows, signal, 2.0), "across": across(rows, signal, 2.0)},
            "or_coverage_half": {**cross_validate(rows, signal, 0.5), "across": across(rows, signal, 0.5),
                                 "fitted": list(fit(rows, signal, 0.5))},
            "or_coverage_fitted": {**cross_validate(rows, signal, None), "fitted": list(fit(rows, signal, None))},
        }
    return out


# ---- extractive answers ----------------------------------------------------------------------


def quoting(items: list[Asked]) -> dict:
    """Per palace and selection: the share of labelled questions whose quote holds an answer phrase (hit),
    the share of phrases held (recall) and the words quoted, from the expected memories and end to end."""
    out: dict = {}
    for name in sorted({i.palace for i in items}):
        labelled = [i for i in items if i.palace == name and i.quoted]
        for where in ("oracle", "e2e"):
            for selection in SELECTIONS:
                rows = [(i.phrases, i.quoted[where][selection]) for i in labelled if selection in i.quoted[where]]
                if not rows:
                    continue
                hits = [[normalize(p) in normalize(text) for p in phrases] for phrases, text in rows]
                out.setdefault(name, {}).setdefault(where, {})[selection] = {
                    "n": len(rows), "hit": round(sum(any(h) for h in hits) / len(rows), 4),
                    "recall": round(statistics.fmean(sum(h) / len(h) for h in hits), 4),
                    "words": round(statistics.fmean(len(text.split()) for _, text in rows), 1)}
    return out


# ---- what `ask` itself answers ----------------------------------------------------------------


def outcomes(name: str, palace: Palace, queries_path: Path, generate: str, use_cache: bool = True,
             progress: Progress | None = None) -> dict:
    """`ask` run on every question (generate: auto, always, never): per answerable and absent questions, how
    many were answered grounded (generated or extractive), ungrounded or abstained, and why a generated
    answer was not used."""
    from palace_cli.answers.ask import ask

    queries = load_queries(queries_path)
    out: dict = {}
    for position, q in enumerate(queries, start=1):
        answer = ask(palace, q.query, generate=generate, use_cache=use_cache)
        group = out.setdefault("absent" if not q.expected else "answerable",
                               {"questions": 0, "outcomes": {}, "model_answer_not_used": {}, "top_expected": 0})
        group["questions"] += 1
        outcome = answer.status if answer.status == "abstained" else f"{answer.status} {answer.mode}"
        group["outcomes"][outcome] = group["outcomes"].get(outcome, 0) + 1
        if answer.generated:
            why = answer.generated["status"]
            group["model_answer_not_used"][why] = group["model_answer_not_used"].get(why, 0) + 1
        if answer.status != "abstained" and answer.memories and answer.memories[0]["id"] in q.expected:
            group["top_expected"] += 1
        if progress:
            progress(f"{name} ask", position, len(queries))
    return out


def run_ask_bench(sets: list[tuple[Path, Path, Path | None]], progress: Progress | None = None,
                  generate: str | None = None, use_cache: bool = True) -> dict:
    """The whole benchmark over (palace dir, queries file, answers file or None) sets; with `generate`, also
    `ask` itself on every question (outcomes)."""
    started = time.perf_counter()
    items: list[Asked] = []
    timings: list[float] = []
    names = []
    asked: dict = {}
    for root, queries_path, answers_path in sets:
        palace = Palace(root)
        name = palace.config.name
        names.append({"palace": name, "root": str(root), "queries": str(queries_path),
                      "answers": str(answers_path) if answers_path else None})
        items += collect(name, palace, queries_path, answers_path, progress, timings)
        if generate:
            asked[name] = outcomes(name, palace, queries_path, generate, use_cache, progress)
    return {"sets": names, "abstention": abstention(items), "extract": quoting(items),
            **({"ask": {"generate": generate, **asked}} if generate else {}),
            "extract_ms_median": round(statistics.median(timings), 2) if timings else None,
            "wall_s": round(time.perf_counter() - started, 1)}


def _thresholds(row: dict) -> str:
    """`0.323, 0.5` for fixed thresholds, `0.32-0.34, 0.5` for the range fitted over folds; coverage 2 is unused."""
    def shown(low, high=None):
        if low >= 2:
            return "-"
        return f"{low:g}" if high is None or high == low else f"{low:g}-{high:g}"
    if "thresholds" in row:
        return f"{shown(row['thresholds'][0])}, {shown(row['thresholds'][1])}"
    return f"{shown(*row['confidence_range'])}, {shown(*row['coverage_range'])}"


def markdown_report(summary: dict) -> str:
    """The summary as Markdown tables for docs/benchmarks.md."""
    lines = ["sets: " + "; ".join(f"{s['palace']} ({s['queries']})" for s in summary["sets"]), ""]
    for signal, a in summary["abstention"].items():
        lines += [f"**{signal}** ({a['questions']} questions, {a['absent']} absent)", "",
                  "| rule | thresholds (confidence, coverage) | precision | recall | F1 | abstained answerable "
                  "| answered absent | answered correctly |", "|---" * 8 + "|"]
        rows = [("previous: confidence only, fitted on example-palace", a["previous"], "in-sample"),
                ("default: confidence or coverage", a["default"], "in-sample"),
                ("confidence only", a["confidence_only"], "cross-validated"),
                ("confidence or coverage >= 0.5", a["or_coverage_half"], "cross-validated"),
                ("confidence or coverage, both fitted", a["or_coverage_fitted"], "cross-validated")]
        rows[2:2] = [(f"default, {name} alone", row, "in-sample") for name, row in a["default_by_palace"].items()]
        for label, row, how in rows:
            lines.append(f"| {label} ({how}) | {_thresholds(row)} | {row['precision']:.3f} | {row['recall']:.3f} | "
                         f"{row['f1']:.3f} | {row['abstained_answerable']} | {row['answered_absent']} | "
                         f"{row['answered_correctly']:.3f} |")
        for key, label in (("confidence_only", "confidence only"), ("or_coverage_half", "or coverage >= 0.5")):
            for row in a[key]["across"]:
                lines.append(f"| {label}, fitted on {row['fit_on']}, tested on {row['test_on']} | "
                             f"{_thresholds(row)} | {row['precision']:.3f} | {row['recall']:.3f} | {row['f1']:.3f} | "
                             f"{row['abstained_answerable']} | {row['answered_absent']} | "
                             f"{row['answered_correctly']:.3f} |")
        for key, label in (("confidence_only", "confidence only"), ("or_coverage_half", "or coverage >= 0.5")):
            counts = "; ".join(f"{name} {c['answered']}/{c['answerable']} answerable answered, "
                               f"{c['abstained']}/{c['absent']} absent abstained"
                               for name, c in sorted(a[key]["by_palace"].items()))
            lines += ["", f"{label}, cross-validated, per palace: {counts}"]
        lines.append("")
    for name, where in summary["extract"].items():
        lines += [f"**extractive answers, {name}**", "",
                  "| sentences chosen by | from the expected memory: hit | phrases | words "
                  "| end to end: hit | phrases | words |", "|---" * 7 + "|"]
        for selection, o in where.get("oracle", {}).items():
            e = where.get("e2e", {}).get(selection, {})
            lines.append(f"| {selection} | {o['hit']:.3f} | {o['recall']:.3f} | {o['words']:.0f} | "
                         f"{e.get('hit', 0):.3f} | {e.get('recall', 0):.3f} | {e.get('words', 0):.0f} |")
        lines.append("")
    if "ask" in summary:
        lines += [f"**ask --generate {summary['ask']['generate']}**", "",
                  "| palace | questions | outcomes | model answer not used | answered from an expected memory |",
                  "|---" * 5 + "|"]
        for name, groups in summary["ask"].items():
            if name == "generate":
                continue
            for kind, g in groups.items():
                shares = ", ".join(f"{k} {v} ({v / g['questions']:.1%})" for k, v in sorted(g["outcomes"].items()))
                unused = ", ".join(f"{k} {v}" for k, v in sorted(g["model_answer_not_used"].items())) or "-"
                answered = g["questions"] - g["outcomes"].get("abstained", 0)
                expected = f"{g['top_expected']} of {answered}" if kind == "answerable" else "-"
                lines.append(f"| {name}, {kind} | {g['questions']} | {shares} | {unused} | {expected} |")
        lines.append("")
    if summary.get("extract_ms_median") is not None:
        lines.append(f"choosing sentences took {summary['extract_ms_median']} ms per question (median); "
                     f"the whole run {summary['wall_s']} s")
    return "\n".join(lines) + "\n"
