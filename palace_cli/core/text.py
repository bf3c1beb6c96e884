"""Words and sentences of a text: normalisation, stopwords, slugs, sentence splitting, and four stemmers,
each named for what it is tuned to.

- `stem`: crude suffix stripping; the quiz examiner and evaluator are tuned to it.
- `root`: a careful root for guessability checks (lint, similar names): couples/couple, freezing/freeze.
- `fold`: plural endings only; how two spellings of a verify token are matched in an answer.
- `prefix_root`: the first five letters; how the quiz examiner tells that a word gives an answer away.

`split_sentences` splits prose (lists kept whole, abbreviations and parentheses respected); `split_at_stops`
is the naive splitter that one benchmark keeps for comparability.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

STOPWORDS = frozenset(
    "a an and are as at be but by for from has have he her his in into is it its of on or our she "
    "that the their them then there these they this to was were what when where which while who why "
    "will with you your yours i me my we us not no so if than too very can just over under up down out "
    "off all any each both few more most other some such only own same again once here how".split()
)
# Words a question is phrased with that say nothing about what it asks (beyond STOPWORDS).
QUESTION_WORDS = frozenset("do does did doing done should would could shall may might must need get make use "
                           "using used work works explain tell difference between".split())
WORD = re.compile(r"[^\W_]+")
PUNCTUATION = re.compile(r"[^\w\s]|_")
SHORT_TEXT = 200  # names, subjects, aliases, tokens: normalised again and again by long-lived processes


def question_terms(analyze, question: str) -> list[str]:
    """The terms of a question that say what it asks, in order, once each: `analyze` gives (term, word as
    written) pairs (an index's analyzer); stopwords and question words are left out."""
    return list(dict.fromkeys(term for term, word in analyze(question)
                              if word.lower() not in STOPWORDS and word.lower() not in QUESTION_WORDS))


def normalize(text: str) -> str:
    """Lowercase, strip accents, hyphens/punctuation to spaces, collapse whitespace."""
    return _normalize_short(text) if len(text) <= SHORT_TEXT else _normalize(text)


def _normalize(text: str) -> str:
    if not text.isascii():  # NFKD and accent stripping change nothing in ASCII text
        text = unicodedata.normalize("NFKD", text)
        text = "".join(ch for ch in text if not unicodedata.combining(ch))
    return " ".join(PUNCTUATION.sub(" ", text.lower()).split())


# The language server rebuilds its name tables after every save: at 10,000 notes normalising the same
# 90,000 names was 0.66 s of each 1.7 s rebuild. Short texts only, so the cache stays a few MB.
_normalize_short = lru_cache(maxsize=1 << 17)(_normalize)


def words(text: str) -> list[str]:
    """Normalised words of a text."""
    return normalize(text).split()


def stem(word: str) -> str:
    """A crude plural/verb stem (the quiz examiner and evaluator are tuned to it; see `root` for lint)."""
    for suffix in ("ies", "es", "s", "ing", "ed"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


@lru_cache(maxsize=1 << 16)
def root(word: str) -> str:
    """A word's root for guessability: 'couples'/'couple', 'freezing'/'freeze', 'coordinated'/'coordinate' match."""
    if len(word) <= 3 or word.isdigit():
        return word
    if len(word) > 4 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif word.endswith(("sses", "xes", "ches", "shes", "zzes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("ing") and len(word) >= 7:
        word = word[:-3]
        if word[-1] == word[-2] and word[-1] not in "lsz":
            word = word[:-1]  # running -> run
    elif word.endswith("ed") and not word.endswith("eed") and len(word) >= 5:
        word = word[:-2]
        if word[-1] == word[-2] and word[-1] not in "lsz":
            word = word[:-1]  # stopped -> stop
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word


def content_words(text: str) -> set[str]:
    """Roots of the non-stopword words in a text."""
    return {root(w) for w in words(text) if w not in STOPWORDS}


@lru_cache(maxsize=1 << 16)
def fold(word: str) -> str:
    """A normalised word with its plural ending folded: 'couples' and 'couple' give the same form."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes", "zzes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def slugify(text: str) -> str:
    """A note id from a subject: its slug without the parenthesised asides, at most 80 characters."""
    return slug(re.sub(r"\(([^)]*)\)", " ", text), 80) or "memory"


ABBREVIATIONS = frozenset("e.g i.e etc vs cf approx incl fig dr mr mrs al".split())
BOUNDARY = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(“\[`*])")
LOWER_BOUNDARY = re.compile(r"(?<=[.!?])\s+(?=[A-Za-z0-9\"'(“\[`*])")  # chat written in lowercase
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


def split_sentences(text: str, lowercase: bool = False) -> list[str]:
    """Sentences of prose, list items kept whole; an abbreviation (e.g., vs.) or an open parenthesis does
    not end one. With `lowercase`, a sentence may also start with a small letter (chat: "ok. do it")."""
    out: list[str] = []
    paragraph: list[str] = []

    def flush():
        if paragraph:
            out.extend(_split_paragraph(" ".join(paragraph), LOWER_BOUNDARY if lowercase else BOUNDARY))
            paragraph.clear()

    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            flush()
        elif LIST_ITEM.match(line):
            flush()
            paragraph.append(LIST_ITEM.sub("", line).strip())
        else:
            paragraph.append(line.strip())
    flush()
    return out


def _split_paragraph(text: str, boundary: re.Pattern = BOUNDARY) -> list[str]:
    pieces = [p for p in boundary.split(" ".join(text.split())) if p]
    merged: list[str] = []
    for piece in pieces:
        if merged and _continues(merged[-1]):
            merged[-1] += " " + piece
        else:
            merged.append(piece)
    return merged


def _continues(previous: str) -> bool:
    """Whether a piece ended on a false boundary: an abbreviation, an ellipsis, or inside parentheses."""
    last = previous.rsplit(None, 1)[-1].lower().rstrip(".").lstrip("(")
    if last in ABBREVIATIONS or previous.endswith(("...", "…")):
        return True
    return previous.count("(") > previous.count(")")


def repetitive(text: str) -> bool:
    """True for the loops small models fall into: a sentence said three times, or few distinct sentences."""
    said = [" ".join(s.lower().split()) for s in split_sentences(text)]
    counts = {s: said.count(s) for s in said}
    return bool(said) and (max(counts.values()) >= 3 or len(counts) < 0.7 * len(said))


def split_at_stops(text: str) -> list[str]:
    """Pieces of text split after every `.`, `!` or `?` and a space, abbreviations and lists ignored.

    Not for prose: `split_sentences` is. `palace bench verify` builds its forged answers with this one so
    that its figures stay comparable with every earlier run."""
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def content_stems(text: str) -> set[str]:
    """Stems of the content words of a text."""
    return {stem(w) for w in words(text) if w not in STOPWORDS}


def prefix_root(word: str) -> str:
    """A coarse root, the first five letters: "recency" gives away "recently", "ranges" gives away "range"."""
    word = word.lower()
    return word[:5] if len(word) >= 5 else stem(word)


def prefix_roots(text: str) -> set[str]:
    """Roots of the content words of a text (single letters carry no meaning of their own)."""
    return {prefix_root(w) for w in words(text) if w not in STOPWORDS and len(w) > 1}


def one_line(text: str, limit: int = 0) -> str:
    """Whitespace collapsed to single spaces, cut at limit characters with an ellipsis."""
    flat = " ".join(str(text).split())
    if limit and len(flat) > limit:
        return flat[: limit - 1].rstrip() + "…"
    return flat


# Characters a vault's file names cannot hold: file systems forbid some, wikilinks read `#`, `^`, `|`, `[` and `]`.
UNTITLED = re.compile(r'[\\/:*?"<>|#^\[\]\x00-\x1f\x7f]+')


def title_name(text: str, limit: int = 60) -> str:
    """A file name (without .md) from the first line of a text, as a vault names notes by title: its words, case
    and spaces kept, what file names or wikilinks cannot hold dropped, cut at a word near `limit` characters."""
    first = next((line.strip().lstrip("#").strip() for line in str(text).splitlines() if line.strip()), "")
    name = " ".join(UNTITLED.sub(" ", first).split())
    if len(name) > limit:
        name = name[:limit].rsplit(" ", 1)[0] if " " in name[:limit] else name[:limit]
    return name.strip(" .-") or ""


def slug(text: str, limit: int = 60) -> str:
    """Lowercase ASCII words joined by hyphens, at most `limit` characters: the one rule for file names and ids."""
    out = re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")
    return out[:limit].rstrip("-")
