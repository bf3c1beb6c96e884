"""The Evaluator: grades a typed answer by fuzzy matching of the expected elements."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from palace_cli.core.text import STOPWORDS, normalize, stem, words

AGAIN, HARD, GOOD, EASY = 1, 2, 3, 4
GIVE_UP = {"", "?", "??", "idk", "i don t know", "dont know", "don t know", "no idea", "pass", "skip", "dunno"}
NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "thousand": 1000, "million": 1000000,
}
TYPO_RATIO = 0.8  # difflib ratio at which a long word counts as a misspelling of another
TYPO_MIN_LENGTH = 5


@dataclass
class Element:
    """One thing an answer must contain; any of `forms` counts (e.g. `Two-Phase Commit`, `2PC`).

    A name (`partial=False`) needs every content word; a longer fact phrase (`partial=True`) two thirds.
    """

    label: str
    forms: list[str] = field(default_factory=list)
    partial: bool = False

    def __post_init__(self):
        if not self.forms:
            self.forms = [self.label]


@dataclass
class Grade:
    """How an answer measured up: the share of elements found, which, and a suggested rating."""

    score: float
    verdict: str  # correct, partial, wrong, empty
    matched: list[str]
    missing: list[str]
    suggested: int
    confused_with: str | None = None

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {"score": round(self.score, 3), "verdict": self.verdict, "matched": self.matched,
                "missing": self.missing, "suggested": self.suggested, "confused_with": self.confused_with}


def _number(word: str) -> int | None:
    if word.isdigit():
        return int(word)
    return NUMBER_WORDS.get(word)


def _content(text: str) -> list[str]:
    return [w for w in words(text) if w not in STOPWORDS]


def word_matches(expected: str, given: str) -> bool:
    """One expected word against one given word: same stem, same number, or a near spelling of a long word."""
    if expected == given or stem(expected) == stem(given):
        return True
    a, b = _number(expected), _number(given)
    if a is not None or b is not None:
        return a is not None and a == b
    if min(len(expected), len(given)) < TYPO_MIN_LENGTH:
        return False
    return SequenceMatcher(None, expected, given).ratio() >= TYPO_RATIO


def form_coverage(form: str, answer: str) -> float:
    """The share of a form's content words found in the answer (1.0 for an exact phrase or acronym).

    A number in the form that the answer lacks makes it 0: "three-phase" is not "two-phase".
    """
    needle, haystack = normalize(form), normalize(answer)
    if not needle:
        return 0.0
    if f" {needle} " in f" {haystack} ":
        return 1.0
    expected = _content(form) or words(form)
    given = words(answer)
    if len(expected) >= 2 and any(w == "".join(x[0] for x in expected) for w in given):
        return 1.0  # "tpc" for "two phase commit"
    if not expected or not given:
        return 0.0
    found = 0
    for word in expected:
        if any(word_matches(word, g) for g in given):
            found += 1
        elif _number(word) is not None:
            return 0.0
    return found / len(expected)


def element_matched(element: Element, answer: str) -> bool:
    """True when any form is covered: all its words, or two thirds of a 3+ word form that allows partial."""
    for form in element.forms:
        size = len(_content(form) or words(form))
        coverage = form_coverage(form, answer)
        if coverage >= 1.0 or (element.partial and size >= 3 and coverage >= 2 / 3 - 1e-9):
            return True
    return False


def is_empty(answer: str) -> bool:
    """True for a blank answer or an explicit give-up (`?`, `idk`, `pass`)."""
    return normalize(answer) in GIVE_UP or not re.search(r"\w", answer)


def grade(expected: list[Element], answer: str, need: int | None = None,
          confusers: dict[str, list[str]] | None = None) -> Grade:
    """Grade an answer: score = matched elements / needed elements (capped at 1)."""
    labels = [e.label for e in expected]
    if is_empty(answer) or not expected:
        return Grade(0.0, "empty", [], labels, AGAIN)
    matched = [e.label for e in expected if element_matched(e, answer)]
    missing = [label for label in labels if label not in matched]
    wanted = min(need or len(expected), len(expected))
    score = min(1.0, len(matched) / wanted)
    if score >= 1.0:
        verdict, suggested = "correct", GOOD
    elif score > 0:
        verdict, suggested = "partial", HARD
    else:
        verdict, suggested = "wrong", AGAIN
    confused = None
    if verdict == "wrong" and confusers:
        for other_id, forms in confusers.items():
            if element_matched(Element(other_id, forms), answer):
                confused = other_id
                break
    return Grade(score, verdict, matched, missing, suggested, confused)
