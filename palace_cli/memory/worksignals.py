"""The signals of a work-session unit: what the work scorer (scorer.WORK_FITTED) weighs, and what is kept
whatever its score (a decision or rule said outright, the agent's summary of a checked fix)."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from palace_cli.core.text import informative_words
from palace_cli.memory import cues

if TYPE_CHECKING:
    from palace_cli.memory.work import Unit

KINDS = ("decision", "convention", "fact", "solution", "milestone")

SIGNALS = ("decision", "convention", "fact", "solution", "milestone", "agent", "accepted", "proposal_rule", "offer",
           "proposal_words", "rule",
           "choice", "settled", "one_off", "request", "imperative", "hedge", "reason", "transient", "person",
           "codeish", "first_singular", "first_plural", "words", "informative", "item", "first_turn",
           "after_proposal", "done", "verified", "cause", "backed", "at_hand", "pointing", "evaluative", "scope",
           "reported", "numbers", "answers", "problem", "owner", "past", "named", "proposal_fix", "strong")


def strong(unit: Unit) -> bool:
    """True for a user's decision or rule said outright ("Decision: ...", "from now on ...", "I prefer ..."), with
    nothing that makes it one-off or only imagined: kept whatever its score."""
    said = cues.opened(unit.said)
    if unit.turn.role == "assistant":  # its closing summary of a fix it checked: "Summary: X failed because Y; Z fixed it"
        return unit.kind == "solution" and bool(cues.SUMMARY.search(said) and cues.CAUSE.search(said)
                                                  and cues.FIX.search(said))
    return (unit.kind in ("decision", "convention") and bool(cues.STRONG.search(said))
            and not (cues.ONE_OFF.search(said) or cues.HEDGE.search(said) or cues.HYPOTHETICAL.search(said)
                     or cues.is_asking(said) or cues.RESTATED.search(unit.said)))


def signals_of(unit: Unit, extra: dict) -> dict[str, float]:
    """The signals of a unit (names in SIGNALS): its kind, who said it, the cues in what was said."""
    said = unit.said
    core = cues.opened(said)
    count = max(len(said.split()), 1)
    values = {kind: float(unit.kind == kind) for kind in KINDS}
    values.update({
        "agent": float(unit.turn.role == "assistant"),
        "rule": float(bool(cues.RULE.search(core))),
        "choice": float(bool(cues.CHOICE.search(core)) and unit.turn.role == "user"),  # the user choosing
        "settled": float(bool(cues.SETTLED.search(said))),
        "one_off": float(bool(cues.ONE_OFF.search(said))),
        "request": float(bool(cues.REQUEST.match(said))),
        "imperative": float(cues.imperative(core)),
        "hedge": float(bool(cues.HEDGE.search(said))),
        "reason": float(bool(cues.REASON.search(said))),
        "transient": min(len(cues.TRANSIENT.findall(said)), 3) / 3,
        "person": float(bool(cues.PERSON.search(core))),
        "codeish": min(len(cues.CODEISH.findall(said)), 5) / 5,
        "first_singular": float(bool(cues.FIRST_SINGULAR.search(said))),
        "first_plural": float(bool(cues.FIRST_PLURAL.search(said))),
        "words": math.log(count),
        "informative": math.log(len(informative_words(said)) + 1),
        "done": float(bool(cues.DONE.search(said))),
        "verified": float(bool(cues.VERIFIED.search(said))),
        "cause": float(bool(cues.CAUSE.search(said))),
        "at_hand": float(bool(cues.AT_HAND.match(core))),
        "pointing": float(bool(cues.POINTING.match(core))),
        "evaluative": float(bool(cues.EVALUATIVE.search(said))),
        "scope": float(bool(cues.SCOPE.search(core))),
        "reported": float(bool(cues.REPORTED.search(said))),
        "numbers": min(len(re.findall(r"\d+", said)), 4) / 4,
        "problem": float(bool(cues.PROBLEM.search(core))),
        "strong": float(strong(unit)),
        "owner": float(bool(cues.OWNER.search(core))),
        "past": min(len(cues.PAST.findall(core)), 3) / 3,
        "named": float(not re.match(r"\W*(?:it|this|that|these|those|i|we|you|they|he|she|there|here)\b", core, re.I)),
        "proposal_rule": 0.0,
        "offer": 0.0,
        "proposal_fix": 0.0,
        "proposal_words": 0.0,
    })
    values.update(extra)
    return {name: float(values.get(name, 0.0)) for name in SIGNALS}
