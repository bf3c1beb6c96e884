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

from palace_cli.core.text import GREETINGS, LATIN_WORD, split_sentences
from palace_cli.core.dates import RELATIVE
from palace_cli.memory.patterns import (PATTERNS, SECOND, first_person, informative_words, is_filler, is_question,
                                        plain)

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


# Fitted by `palace bench distill --locomo locomo-dev5.json --fit` (5 conversations, 2,760 turns, 962 of them
# a memory that recalls an observation).
FITTED = Weights(
    mean={"words": 2.9886, "relative_length": -0.1099, "statement_words": 2.6795, "informative": 1.9015,
          "informative_share": 0.2936, "first_person": 0.5092, "speaker_statements": 0.5594, "second_person": 0.4251,
          "question_share": 0.1168, "exclamations": 0.3864, "greetings": 0.7224, "dated": 0.0844, "plan": 0.1543,
          "photo": 0.2181, "opens_session": 0.0464, "answers_question": 0.2967, "names_someone": 0.3917,
          "we": 0.1142},
    scale={"words": 0.5695, "relative_length": 0.5395, "statement_words": 0.9697, "informative": 0.6468,
          "informative_share": 0.1096, "first_person": 0.5434, "speaker_statements": 0.4965, "second_person": 0.5381,
          "question_share": 0.1997, "exclamations": 0.2895, "greetings": 0.7006, "dated": 0.278, "plan": 0.3613,
          "photo": 0.413, "opens_session": 0.2103, "answers_question": 0.4568, "names_someone": 0.4881, "we": 0.2841},
    weights={"words": -0.6179, "relative_length": 0.5771, "statement_words": 0.8059, "informative": 0.593,
          "informative_share": 0.1231, "first_person": 0.3715, "speaker_statements": 0.1906, "second_person": 0.02,
          "question_share": -0.1193, "exclamations": -0.1553, "greetings": -0.09, "dated": 0.1709, "plan": -0.0474,
          "photo": -0.0274, "opens_session": 0.343, "answers_question": 0.4518, "names_someone": 0.1576, "we": 0.104},
    bias=-1.1283)


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


# The work scorer: the same logistic over a work-session unit's signals (work.SIGNALS), fitted on both labelled
# sets pooled (22 sessions: `cat benchmarks/agent-sessions.jsonl benchmarks/agent-sessions-heldout.jsonl > all.jsonl;
# palace bench distill --sessions all.jsonl --fit`); its threshold is the one chosen by leaving one session out
# (docs/benchmarks.md, "distill: agent sessions").
WORK_THRESHOLD = 0.31
WORK_FITTED = Weights(
    mean={
        "decision": 0.2266, "convention": 0.277, "fact": 0.2806, "solution": 0.1439, "milestone": 0.0719, "agent":
        0.1439, "accepted": 0.1187, "proposal_rule": 0.036, "offer": 0.0108, "proposal_words": 0.3615, "rule": 0.3453,
        "choice": 0.0827, "settled": 0.0108, "one_off": 0.0144, "request": 0.0504, "imperative": 0.1511, "hedge": 0.0,
        "reason": 0.2122, "transient": 0.1115, "person": 0.2626, "codeish": 0.2971, "first_singular": 0.1619,
        "first_plural": 0.241, "words": 2.8151, "informative": 2.2734, "item": 0.0647, "first_turn": 0.1511,
        "after_proposal": 0.2662, "done": 0.0899, "verified": 0.1763, "cause": 0.1835, "backed": 0.1619, "at_hand":
        0.1223, "pointing": 0.0396, "evaluative": 0.054, "scope": 0.4173, "reported": 0.0072, "numbers": 0.2761,
        "answers": 0.1151, "problem": 0.1187, "owner": 0.1151, "past": 0.1918, "named": 0.8525, "proposal_fix": 0.018,
        "strong": 0.0899},
    scale={
        "decision": 0.4186, "convention": 0.4475, "fact": 0.4493, "solution": 0.351, "milestone": 0.2584, "agent":
        0.351, "accepted": 0.3234, "proposal_rule": 0.1862, "offer": 0.1033, "proposal_words": 0.9931, "rule": 0.4755,
        "choice": 0.2755, "settled": 0.1033, "one_off": 0.1191, "request": 0.2187, "imperative": 0.3581, "hedge": 1.0,
        "reason": 0.4089, "transient": 0.2115, "person": 0.44, "codeish": 0.3425, "first_singular": 0.3683,
        "first_plural": 0.4277, "words": 0.7423, "informative": 0.7184, "item": 0.2461, "first_turn": 0.3581,
        "after_proposal": 0.442, "done": 0.2861, "verified": 0.381, "cause": 0.387, "backed": 0.3683, "at_hand": 0.3276,
        "pointing": 0.1949, "evaluative": 0.2259, "scope": 0.4931, "reported": 0.0845, "numbers": 0.3697, "answers":
        0.3192, "problem": 0.3234, "owner": 0.3192, "past": 0.2855, "named": 0.3546, "proposal_fix": 0.1329, "strong":
        0.2861},
    weights={
        "decision": -0.3523, "convention": -0.1358, "fact": 0.2313, "solution": -0.2811, "milestone": 0.7855, "agent":
        -0.8689, "accepted": -0.2004, "proposal_rule": 0.1867, "offer": -0.0969, "proposal_words": -0.085, "rule":
        0.4396, "choice": 0.1424, "settled": 0.0324, "one_off": -0.2805, "request": -0.4746, "imperative": 0.2106,
        "hedge": 0.0, "reason": -0.2163, "transient": 0.1842, "person": 0.1472, "codeish": -0.1345, "first_singular":
        -0.2121, "first_plural": -0.206, "words": 0.1935, "informative": 1.8448, "item": 0.2302, "first_turn": 0.372,
        "after_proposal": 0.2588, "done": 0.0595, "verified": -0.0466, "cause": -0.3844, "backed": 0.1753, "at_hand":
        0.169, "pointing": 0.1238, "evaluative": -0.1291, "scope": 0.5031, "reported": 0.2485, "numbers": 0.5914,
        "answers": 0.2036, "problem": 0.3286, "owner": 0.2513, "past": -0.4901, "named": 0.2093, "proposal_fix":
        -0.6284, "strong": 0.6156},
    bias=0.8858)
