"""How likely a turn is to say something worth remembering: a logistic score over a few signals of the turn.

The signals are counts anyone would look at (how much the speaker says beyond chit-chat, about themselves,
with a date, in answer to a question); the weights are fitted on LoCoMo's own observation annotations
(`palace bench distill --locomo FILE --fit` prints them) and checked by leaving one conversation out
(`--cross-validate`, docs/benchmarks.md), never on the conversations that judge the work.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from palace_cli.core.text import split_sentences
from palace_cli.core.dates import RELATIVE
from palace_cli.memory.patterns import (GREETINGS, PATTERNS, SECOND, WORD, first_person, informative_words, is_filler,
                                        is_question, plain)

SIGNALS = ("words", "relative_length", "statement_words", "informative", "informative_share", "first_person",
           "speaker_statements", "second_person", "question_share", "exclamations", "greetings", "dated", "plan",
           "photo", "opens_session", "answers_question", "names_someone", "we")
PHOTO = re.compile(r"\[shares a photo: ([^\]]*)\]")
WE = frozenset("we we're we've we'll our ours us".split())

# The probability at or above which a turn becomes a memory: the cross-validated point where precision stays
# at 0.55 or more with the most recall (docs/benchmarks.md, "distill").
THRESHOLD = 0.2


@dataclass(frozen=True)
class Weights:
    """A fitted scorer: the mean and spread of each signal, the weight of each standardised signal, the bias."""

    mean: dict
    scale: dict
    weights: dict
    bias: float

    def probability(self, values: dict[str, float]) -> float:
        """The probability that a turn with these signals says something worth remembering."""
        z = self.bias + sum(w * (values[n] - self.mean[n]) / self.scale[n] for n, w in self.weights.items())
        return 1 / (1 + math.exp(-max(min(z, 40.0), -40.0)))

    def as_dict(self) -> dict:
        """JSON-ready form (what `--fit` prints)."""
        return {"mean": self.mean, "scale": self.scale, "weights": self.weights, "bias": self.bias}


# Fitted by `palace bench distill --locomo locomo-dev5.json --fit` (5 conversations, 2,760 turns, 932 of them
# a memory that recalls an observation).
FITTED = Weights(
    mean={"words": 2.9886, "relative_length": -0.1099, "statement_words": 2.6795, "informative": 1.9015,
          "informative_share": 0.2936, "first_person": 0.5092, "speaker_statements": 0.5594,
          "second_person": 0.4251, "question_share": 0.1168, "exclamations": 0.3864, "greetings": 0.7224,
          "dated": 0.0844, "plan": 0.1543, "photo": 0.2181, "opens_session": 0.0464,
          "answers_question": 0.2967, "names_someone": 0.3917, "we": 0.1142},
    scale={"words": 0.5695, "relative_length": 0.5395, "statement_words": 0.9697, "informative": 0.6468,
          "informative_share": 0.1096, "first_person": 0.5434, "speaker_statements": 0.4965,
          "second_person": 0.5381, "question_share": 0.1997, "exclamations": 0.2895, "greetings": 0.7006,
          "dated": 0.278, "plan": 0.3613, "photo": 0.413, "opens_session": 0.2103,
          "answers_question": 0.4568, "names_someone": 0.4881, "we": 0.2841},
    weights={"words": -0.6798, "relative_length": 0.5644, "statement_words": 0.8996, "informative": 0.6266,
          "informative_share": 0.1539, "first_person": 0.3982, "speaker_statements": 0.258,
          "second_person": 0.0139, "question_share": -0.0471, "exclamations": -0.1342, "greetings": -0.107,
          "dated": 0.1327, "plan": -0.0416, "photo": -0.0297, "opens_session": 0.3576,
          "answers_question": 0.4404, "names_someone": 0.1522, "we": 0.0967},
    bias=-1.2457)


@dataclass
class TurnView:
    """What the scorer reads of one turn: its text, who said it, who else is there, what came before it."""

    text: str
    speaker: str
    people: tuple[str, ...] = ()
    previous: str = ""
    position: int = 0
    session_words: float = 0.0  # the mean log word count of the session's turns


def signals(view: TurnView) -> dict[str, float]:
    """The signals of one turn (names in SIGNALS)."""
    text = plain(view.text)
    photo = bool(PHOTO.search(text))
    said = PHOTO.sub(" ", text)
    words = [w.lower() for w in WORD.findall(said)]
    count = max(len(words), 1)
    sentences = split_sentences(said) or [said]
    statements = [s for s in sentences if not is_question(s) and not is_filler(s, view.people)]
    statement_words = sum(len(WORD.findall(s)) for s in statements)
    informative = informative_words(said, view.people)
    others = {p.lower() for p in view.people if p != view.speaker}
    return {
        "words": math.log(count),
        "relative_length": math.log(count) - view.session_words,
        "statement_words": math.log(statement_words + 1),
        "informative": math.log(len(informative) + 1),
        "informative_share": len(informative) / count,
        "first_person": 10 * first_person(said) / count,
        "speaker_statements": float(any(first_person(s) for s in statements)),
        "second_person": 10 * sum(w in SECOND for w in words) / count,
        "question_share": sum(map(is_question, sentences)) / len(sentences),
        "exclamations": said.count("!") / len(sentences),
        "greetings": 10 * sum(w in GREETINGS for w in words) / count,
        "dated": float(bool(RELATIVE.search(said))),
        "plan": float(bool(PATTERNS["plan"].search(said.lower()))),
        "photo": float(photo),
        "opens_session": float(view.position == 0),
        "answers_question": float("?" in view.previous),
        "names_someone": float(any(w in others for w in words)),
        "we": 10 * sum(w in WE for w in words) / count,
    }


def session_words(texts: list[str]) -> float:
    """The mean log word count of a session's turns (what `relative_length` compares a turn with)."""
    return sum(math.log(max(len(WORD.findall(t)), 1)) for t in texts) / len(texts) if texts else 0.0


def fit(rows: list[dict[str, float]], labels: list[bool], l2: float = 1.0, names=SIGNALS) -> Weights:
    """Weights fitted to labelled signals (the `names` of each row): Newton's method on an L2-regularised
    logistic loss."""
    import numpy as np

    names = list(names)
    matrix = np.array([[row[n] for n in names] for row in rows], dtype=float)
    mean, scale = matrix.mean(axis=0), matrix.std(axis=0)
    scale[scale == 0] = 1.0
    x = np.hstack([np.ones((len(rows), 1)), (matrix - mean) / scale])
    y = np.array(labels, dtype=float)
    w = np.zeros(x.shape[1])
    penalty = l2 * np.eye(x.shape[1])
    penalty[0, 0] = 0.0  # the bias is not shrunk
    for _ in range(50):
        p = 1 / (1 + np.exp(-x @ w))
        gradient = x.T @ (p - y) + penalty @ w
        hessian = (x.T * (p * (1 - p))) @ x + penalty
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return Weights(dict(zip(names, mean.round(4).tolist())), dict(zip(names, scale.round(4).tolist())),
                   dict(zip(names, w[1:].round(4).tolist())), round(float(w[0]), 4))


# The work scorer: the same logistic over a work-session unit's signals (work.SIGNALS), fitted by
# `palace bench distill --sessions benchmarks/agent-sessions.jsonl --fit`; its threshold is the one chosen by
# leaving one session out (docs/benchmarks.md, "distill: agent sessions").
WORK_THRESHOLD = 0.22
WORK_FITTED = Weights(
    mean={
        "decision": 0.3448, "convention": 0.2452, "fact": 0.2261, "solution": 0.1188, "milestone": 0.0651,
        "agent": 0.1073, "accepted": 0.0575, "proposal_rule": 0.0115, "offer": 0.0115, "proposal_words": 0.1615,
        "rule": 0.2529, "choice": 0.1226, "settled": 0.0192, "one_off": 0.069, "request": 0.0613,
        "imperative": 0.3142, "hedge": 0.0077, "reason": 0.2069, "transient": 0.0856, "person": 0.1839,
        "codeish": 0.2077, "first_singular": 0.1303, "first_plural": 0.1916, "words": 2.4722, "informative": 1.9463,
        "item": 0.0536, "first_turn": 0.1533, "after_proposal": 0.1877, "done": 0.0728, "verified": 0.1226,
        "cause": 0.1073, "backed": 0.1456, "at_hand": 0.1762, "pointing": 0.0307, "evaluative": 0.0613,
        "scope": 0.2989, "reported": 0.0115, "numbers": 0.1925, "answers": 0.1111, "problem": 0.1034, "owner": 0.092,
        "past": 0.1188, "named": 0.8697, "proposal_fix": 0.0038, "strong": 0.0651},
    scale={
        "decision": 0.4753, "convention": 0.4302, "fact": 0.4183, "solution": 0.3235, "milestone": 0.2468,
        "agent": 0.3095, "accepted": 0.2327, "proposal_rule": 0.1066, "offer": 0.1066, "proposal_words": 0.6655,
        "rule": 0.4347, "choice": 0.328, "settled": 0.1371, "one_off": 0.2534, "request": 0.2399,
        "imperative": 0.4642, "hedge": 0.0872, "reason": 0.4051, "transient": 0.1724, "person": 0.3874,
        "codeish": 0.2897, "first_singular": 0.3366, "first_plural": 0.3935, "words": 0.7534, "informative": 0.7354,
        "item": 0.2253, "first_turn": 0.3602, "after_proposal": 0.3905, "done": 0.2598, "verified": 0.328,
        "cause": 0.3095, "backed": 0.3527, "at_hand": 0.381, "pointing": 0.1724, "evaluative": 0.2399,
        "scope": 0.4578, "reported": 0.1066, "numbers": 0.3298, "answers": 0.3143, "problem": 0.3045, "owner": 0.289,
        "past": 0.2278, "named": 0.3366, "proposal_fix": 0.0618, "strong": 0.2468},
    weights={
        "decision": -0.4635, "convention": -0.3035, "fact": 0.0367, "solution": 0.317, "milestone": 0.9441,
        "agent": -0.7496, "accepted": 0.1178, "proposal_rule": 0.2547, "offer": -0.1101, "proposal_words": -0.0873,
        "rule": 0.2002, "choice": 0.0999, "settled": -0.5189, "one_off": -0.5361, "request": 0.1148,
        "imperative": -0.3868, "hedge": -0.4493, "reason": -0.2868, "transient": 0.2642, "person": 0.3876,
        "codeish": 0.3563, "first_singular": -0.1108, "first_plural": -0.0617, "words": 0.2643,
        "informative": 1.0555, "item": 0.3722, "first_turn": 0.1402, "after_proposal": 0.4731, "done": -0.1463,
        "verified": -0.5745, "cause": -0.0131, "backed": 0.8286, "at_hand": 0.341, "pointing": -0.0625,
        "evaluative": -0.5503, "scope": 0.5857, "reported": 0.0687, "numbers": 0.1884, "answers": -0.0155,
        "problem": 0.052, "owner": 0.1892, "past": 0.0972, "named": -0.3174, "proposal_fix": -0.3293,
        "strong": 0.1705},
    bias=-1.1103)
