"""`palace bench ask`: when `ask` answers and when it abstains, per corpus, and how good its answers are.

Every question is put through what `ask` does before any generation (recall, the quoted evidence, the
evidence's measures: answers/abstention.py), so that every rule can be scored on the same evidence. Rules
are fitted by leaving one corpus out (each corpus is decided by thresholds fitted on the others), with the
macro-averaged balanced accuracy (absent questions abstained, answerable ones answered) as the objective.
Per corpus: abstention precision and recall (an absent question abstained on is a true positive), the
wrong-citation rate among answered answerable questions (the quotes cite no expected unit), the share of
answerable questions answered with a right citation, and for labelled questions whether the quotes hold
an answer phrase (LoCoMo: the gold answer's words), each with a 95% bootstrap interval.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from palace_cli.answers.abstention import ABSTAIN_BELOW, MIN_UNITS, standout_of, weigh
from palace_cli.answers.extract import extract, sources_of
from palace_cli.bench.retrieval import bootstrap_ci, load_queries
from palace_cli.core.text import STOPWORDS, normalize, words
from palace_cli.errors import PalaceError
from palace_cli.palace import Palace
from palace_cli.search.retrieve import recall

Progress = Callable[[str, int, int], None]


@dataclass
class Asked:
    """One question: what it expects, the evidence `ask` would quote, and that evidence's measures."""

    corpus: str
    source: str                     # the questions file (near-miss questions are reported apart)
    qid: str
    kind: str
    expected: list[str]
    features: dict = field(default_factory=dict)   # confidence, coverage, missing, standout, relevant, signal
    cited: list[str] = field(default_factory=list)  # the units the quotes come from
    quoted: str = ""                # the quoted sentences with their frames
    phrases: list[str] = field(default_factory=list)
    gold: str = ""                  # LoCoMo's answer

    @property
    def absent(self) -> bool:
        return not self.expected

    @property
    def right(self) -> bool:
        """Whether the quotes cite a unit that holds the answer."""
        return bool(set(self.cited) & set(self.expected))


def _ask_evidence(palace: Palace, item: Asked, question: str, as_of=None) -> Asked:
    result = recall(palace, question, do_refresh=False, as_of=as_of)
    sources = sources_of(result.handed)
    quoted = extract(palace.index.text, question, sources)
    evidence = weigh(palace, question, result, quoted)
    item.features = {"confidence": evidence.confidence, "coverage": evidence.coverage, "missing": evidence.missing,
                     "standout": standout_of(palace, question), "relevant": result.relevant and bool(quoted),
                     "signal": evidence.signal, "sure": evidence.sure}
    item.cited = list(dict.fromkeys(s.source.id for s in quoted))
    item.quoted = " ".join(f"{s.text} {s.source.frame}" for s in quoted)
    return item


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


def _lines(path: Path, corpus: str | None) -> list[dict]:
    """The JSON lines of a questions file, those of one `corpus` when it names one (near-miss files do)."""
    out = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                data = json.loads(line)
            except ValueError as exc:
                raise PalaceError(f"{path}:{number}: not a query line ({exc})") from None
            if corpus is None or data.get("corpus") in (None, corpus):
                out.append(data)
    return out


def ids_for_paths(palace: Palace, paths: list[str]) -> list[str]:
    """The ids of the notes at these paths (relative to the vault that was adopted, or imported: `imported: {from:
    markdown:PATH}` in the note's frontmatter)."""
    memories = palace.scan().memories.values()
    out = []
    for wanted in paths:
        for memory in memories:
            imported = memory.meta.get("imported") if isinstance(memory.meta.get("imported"), dict) else {}
            origin = str(imported.get("from", "")).partition(":")[2]
            if memory.path == wanted or memory.path.endswith("/" + wanted) or origin == wanted:
                out.append(memory.id)
    return list(dict.fromkeys(out))


def collect(name: str, palace: Palace, queries_path: Path, answers_path: Path | None, corpus: str | None = None,
            progress: Progress | None = None) -> list[Asked]:
    """Every question of a questions file (as_of questions skipped: they test validity, not answering)."""
    palace.refresh()
    answers = load_answers(answers_path)
    lines = [d for d in _lines(queries_path, corpus) if not d.get("as_of")]
    queries = {q.qid: q for q in load_queries(queries_path)}
    out = []
    for position, data in enumerate(lines, start=1):
        query = queries[str(data["qid"])]
        expected = query.expected or (ids_for_paths(palace, data["expected_paths"]) if data.get("expected_paths")
                                      else [])
        item = Asked(name, Path(queries_path).stem, query.qid, query.kind, expected,
                     phrases=answers.get(query.qid, []))
        out.append(_ask_evidence(palace, item, query.query))
        if progress:
            progress(name, position, len(lines))
    return out


def collect_locomo(name: str, palace: Palace, path: Path, limit: int | None = None,
                   progress: Progress | None = None) -> list[Asked]:
    """LoCoMo's questions: categories 1-4 expect their evidence turns and carry a gold answer; category 5
    (adversarial: it presumes something never said) counts as absent."""
    from palace_cli.bench.locomo import ADVERSARIAL, load_questions

    palace.refresh()
    questions = load_questions(palace, path)
    gold = {}
    for sample in json.loads(Path(path).read_text(encoding="utf-8")):
        for number, qa in enumerate(sample.get("qa") or []):
            gold[f"{sample.get('sample_id')}#{number}"] = str(qa.get("answer", ""))
    asked = questions.answerable + questions.adversarial
    asked = asked[:limit] if limit else asked
    out = []
    for position, q in enumerate(asked, start=1):
        item = Asked(name, "locomo", q.qid, f"category {q.category}",
                     [] if q.category == ADVERSARIAL else q.evidence, gold=gold.get(q.qid, ""))
        out.append(_ask_evidence(palace, item, q.text))
        if progress:
            progress(name, position, len(asked))
    return out


# ---- rules -----------------------------------------------------------------------------------


def _standout_or(item: Asked, confidence: float, coverage: float, standout: float) -> bool:
    f = item.features
    if f["standout"] is not None:
        return f["standout"] >= standout
    return f["confidence"] >= confidence or f["coverage"] >= coverage


# name -> (decide(item, params) -> answers?, grid of params, what it is). Every rule tried (docs/answers.md).
RULES: dict[str, tuple] = {
    "confidence or coverage (the rule before)": (
        lambda i, p: i.features["confidence"] >= p[0] or i.features["coverage"] >= p[1],
        [(c / 100, v) for c in range(20, 70) for v in (0.5, 9.0)],
        "the earlier rule (cosine or coverage), on the quoted evidence's coverage"),
    "names held and confidence": (
        lambda i, p: not i.features["missing"] and i.features["confidence"] >= p[0],
        [(c / 100,) for c in range(0, 70)], "every name and number quoted, and the cosine above a line"),
    "names held and (confidence or coverage)": (
        lambda i, p: not i.features["missing"] and (i.features["confidence"] >= p[0] or i.features["coverage"] >= p[1]),
        [(c / 50, v / 20) for c in range(10, 35) for v in range(6, 21)], "names, then either signal"),
    "names held and (confidence or coverage 0.75) (default)": (
        lambda i, p: not i.features["missing"] and (i.features["confidence"] >= p[0] or i.features["coverage"] >= 0.75),
        [(c / 100,) for c in range(0, 70)], "names, then the cosine, or three quarters of the question's words quoted"),
    "names held and confidence and coverage": (
        lambda i, p: not i.features["missing"] and i.features["confidence"] >= p[0] and i.features["coverage"] >= p[1],
        [(c / 50, v / 20) for c in range(0, 30) for v in range(0, 16)], "names, then both signals"),
    "names held and standout": (
        lambda i, p: not i.features["missing"] and _standout_or(i, ABSTAIN_BELOW["dense"], ABSTAIN_BELOW["coverage"],
                                                                p[0]),
        [(s / 20,) for s in range(30, 120)], "names, then the top unit standing out of the palace's cosines"),
    "names held and standout and coverage": (
        lambda i, p: not i.features["missing"] and _standout_or(i, 9, 9, p[0]) and i.features["coverage"] >= p[1],
        [(s / 10, v / 20) for s in range(15, 50) for v in range(0, 16)], "names, standout and coverage"),
}
DEFAULT_RULE = "names held and (confidence or coverage 0.75) (default)"


def _balanced(items: list[Asked], decide, params) -> float:
    answered = [decide(i, params) for i in items]
    absent = [not a for a, i in zip(answered, items) if i.absent]
    present = [a for a, i in zip(answered, items) if not i.absent]
    parts = [statistics.fmean(x) for x in (absent, present) if x]
    return statistics.fmean(parts) if parts else 0.0


def fit(items: list[Asked], rule: str) -> tuple:
    """The parameters of `rule` with the best balanced accuracy, averaged over the corpora of `items`."""
    decide, grid, _ = RULES[rule]
    corpora = sorted({i.corpus for i in items})
    by = {c: [i for i in items if i.corpus == c] for c in corpora}
    return max(grid, key=lambda p: (statistics.fmean(_balanced(by[c], decide, p) for c in corpora), [-x for x in p]))


def decisions(items: list[Asked], rule: str, params: tuple | None) -> list[bool]:
    """True where the rule answers; params None: fitted with each corpus left out of its own fit."""
    decide = RULES[rule][0]
    if params is not None:
        return [bool(i.features["relevant"]) and decide(i, params) for i in items]
    out = [False] * len(items)
    for corpus in sorted({i.corpus for i in items}):
        train = [i for i in items if i.corpus != corpus] or items
        fitted = fit(train, rule)
        for index, item in enumerate(items):
            if item.corpus == corpus:
                out[index] = bool(item.features["relevant"]) and decide(item, fitted)
    return out


def score(items: list[Asked], answered: list[bool]) -> dict:
    """Abstention precision and recall, wrong citations among answers, answered-and-right, quotes holding the
    answer, each with its 95% bootstrap interval."""
    absent = [(a, i) for a, i in zip(answered, items) if i.absent]
    present = [(a, i) for a, i in zip(answered, items) if not i.absent]
    abstained = [i for a, i in zip(answered, items) if not a]
    out: dict = {"questions": len(items), "absent": len(absent), "answerable": len(present)}
    caught = [float(not a) for a, _ in absent]
    precise = [float(i.absent) for i in abstained]
    answers = [i for a, i in present if a]
    out["abstention_recall"] = _mean_ci(caught)
    out["abstention_precision"] = _mean_ci(precise)
    out["wrong_citation"] = _mean_ci([float(not i.right) for i in answers])
    out["answered_right"] = _mean_ci([float(a and i.right) for a, i in present])
    labelled = [i for a, i in present if a and i.phrases]
    if labelled:
        out["quote_holds_phrase"] = _mean_ci([float(any(normalize(p) in normalize(i.quoted) for p in i.phrases))
                                              for i in labelled])
    golden = [i for a, i in present if a and i.gold]
    if golden:
        shares = [_gold_share(i.gold, i.quoted) for i in golden]
        out["gold_in_quote"] = _mean_ci([float(s == 1.0) for s in shares])
        out["gold_words_in_quote"] = _mean_ci(shares)
    return out


def _gold_share(gold: str, quoted: str) -> float:
    """The share of the gold answer's words (normalised, stopwords left out) the quotes hold."""
    wanted = [w for w in words(gold) if w not in STOPWORDS] or words(gold)
    held = set(words(quoted))
    return sum(w in held for w in wanted) / len(wanted) if wanted else 0.0


def _mean_ci(values: list[float]) -> dict:
    if not values:
        return {"value": None, "n": 0, "ci": None}
    return {"value": round(statistics.fmean(values), 4), "n": len(values), "ci": bootstrap_ci(values)}


def _correct(item: Asked, answered: bool) -> float:
    """1 when the decision is right: an absent question abstained on, an answerable one answered with a right
    citation."""
    return float(not answered) if item.absent else float(answered and item.right)


def paired(items: list[Asked], answered: list[bool], baseline: list[bool]) -> dict:
    """The mean difference in right decisions against a baseline's, on the same questions, with its 95% paired
    bootstrap interval."""
    diffs = [_correct(i, a) - _correct(i, b) for i, a, b in zip(items, answered, baseline)]
    return {"value": round(statistics.fmean(diffs), 4) if diffs else None, "n": len(diffs),
            "ci": bootstrap_ci(diffs) if diffs else None}


def report(items: list[Asked]) -> dict:
    """Every rule, fitted on all corpora and cross-validated (each corpus left out of its own fit), scored per
    corpus and per questions file, and compared question by question with the default rule."""
    out: dict = {}
    baseline = decisions(items, DEFAULT_RULE, None)
    for rule in RULES:
        fitted = fit(items, rule)
        rows: dict = {"fitted": [round(float(x), 4) for x in fitted], "description": RULES[rule][2]}
        for how, params in (("cross_validated", None), ("fitted_on_all", fitted)):
            answered = decisions(items, rule, params)
            rows[how] = {group: score([i for i in items if key(i)], [a for a, i in zip(answered, items) if key(i)])
                         for group, key in _groups(items)}
            if how == "cross_validated":
                for group, key in _groups(items):
                    chosen = [(i, a, b) for i, a, b in zip(items, answered, baseline) if key(i)]
                    rows[how][group]["right_vs_default"] = paired([c[0] for c in chosen], [c[1] for c in chosen],
                                                                  [c[2] for c in chosen])
        if rule == DEFAULT_RULE:
            answered = [bool(i.features["relevant"]) and bool(i.features["sure"]) for i in items]
            rows["shipped"] = {group: score([i for i in items if key(i)],
                                            [a for a, i in zip(answered, items) if key(i)])
                               for group, key in _groups(items)}
        out[rule] = rows
    return out


def _groups(items: list[Asked]):
    """(name, membership) per corpus, per questions file within a corpus when it has several, and the near-miss
    questions (a questions file whose name starts with "near") pooled with the answerable ones of their corpora
    ("near-domain")."""
    groups = [(c, lambda i, c=c: i.corpus == c) for c in sorted({i.corpus for i in items})]
    for corpus in sorted({i.corpus for i in items}):
        files = sorted({i.source for i in items if i.corpus == corpus})
        if len(files) > 1:
            groups += [(f"{corpus} / {f}", lambda i, c=corpus, f=f: i.corpus == c and i.source == f) for f in files]
    near = {i.corpus for i in items if i.source.startswith("near")}
    if near:
        groups.append(("near-domain", lambda i: i.corpus in near and (i.source.startswith("near") or not i.absent)))
    return groups


def run_ask_bench(sets: list[tuple[Path, Path, Path | None]], locomo: list[tuple[Path, Path]] = (),
                  progress: Progress | None = None, limit: int | None = None) -> dict:
    """The whole benchmark over (palace dir, questions file [#corpus], answers file or None) sets and (palace
    dir, LoCoMo file) sets."""
    started = time.perf_counter()
    items: list[Asked] = []
    names = []
    for root, queries_path, answers_path in sets:
        queries, _, corpus = str(queries_path).partition("#")
        palace = Palace(Path(root))
        name = palace.config.name
        names.append({"palace": name, "root": str(root), "queries": str(queries_path),
                      "answers": str(answers_path) if answers_path else None})
        items += collect(name, palace, Path(queries), answers_path, corpus or None, progress)
    for root, path in locomo:
        palace = Palace(Path(root))
        names.append({"palace": f"LoCoMo ({palace.config.name})", "root": str(root), "locomo": str(path)})
        items += collect_locomo(f"LoCoMo ({palace.config.name})", palace, Path(path), limit, progress)
    return {"sets": names, "rules": report(items), "min_units": MIN_UNITS, "defaults": ABSTAIN_BELOW,
            "wall_s": round(time.perf_counter() - started, 1)}


def _cell(metric: dict | None) -> str:
    if not metric or metric.get("value") is None:
        return "-"
    low, high = metric["ci"]
    return f"{metric['value']:.3f} [{low:.2f}, {high:.2f}]"


def markdown_report(summary: dict) -> str:
    """The summary as Markdown tables for docs/answers.md: the shipped rule, then every rule cross-validated."""
    lines = ["sets: " + "; ".join(f"{s['palace']} ({s.get('queries') or s.get('locomo')})" for s in summary["sets"]),
             ""]
    columns = ["abstention_precision", "abstention_recall", "wrong_citation", "answered_right", "quote_holds_phrase",
               "gold_in_quote", "right_vs_default"]
    head = "| group | questions (absent) | " + " | ".join(c.replace("_", " ") for c in columns) + " |"
    for rule, rows in summary["rules"].items():
        for how in ("shipped", "cross_validated"):
            if how not in rows:
                continue
            lines += [f"**{rule}**, {how.replace('_', ' ')}" + (f" (fitted on all: {rows['fitted']})"
                                                                if how == "cross_validated" else ""), "",
                      head, "|---" * (len(columns) + 2) + "|"]
            for group, row in rows[how].items():
                lines.append(f"| {group} | {row['questions']} ({row['absent']}) | "
                             + " | ".join(_cell(row.get(c)) for c in columns) + " |")
            lines.append("")
    lines.append(f"the whole run: {summary['wall_s']} s")
    return "\n".join(lines) + "\n"
