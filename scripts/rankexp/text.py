"""Analyzers: palace's (whoosh's StemmingAnalyzer terms), a light S-stemmer, Porter2, and no stemming."""

from __future__ import annotations

from functools import lru_cache

from whoosh.analysis.filters import STOP_WORDS
from whoosh.analysis.tokenizers import default_pattern
from whoosh.lang.porter import stem as porter
from whoosh.lang.porter2 import stem as porter2


def s_stem(word: str) -> str:
    """Harman's S-stemmer (1991): plurals only, three rules; the lightest stemmer in the literature."""
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


STEMMERS = {"porter": porter, "porter2": porter2, "s": s_stem, "none": lambda w: w}


class Analyzer:
    """Regex words, lowercase, drop words under 2 letters and (optionally) stopwords, then stem.

    With stem="porter" and stopwords on, the terms equal palace's PalaceAnalyzer (tested in
    scripts/ranking_experiments.py check).
    """

    def __init__(self, stem: str = "porter", stopwords: bool = True):
        self.name = f"{stem}{'' if stopwords else '-nostop'}"
        self._stem = lru_cache(maxsize=None)(STEMMERS[stem])
        self._stop = STOP_WORDS if stopwords else frozenset()

    def __call__(self, text: str) -> list[str]:
        stop, stem = self._stop, self._stem
        out = []
        for match in default_pattern.finditer(text):
            word = match.group().lower()
            if len(word) < 2 or word in stop:
                continue
            out.append(stem(word))
        return out

    def query_terms(self, text: str) -> list[str]:
        """Distinct terms in order (palace deduplicates query terms the same way)."""
        return list(dict.fromkeys(self(text)))


_ANALYZERS: dict[tuple[str, bool], Analyzer] = {}


def analyzer(stem: str = "porter", stopwords: bool = True) -> Analyzer:
    """A shared analyzer instance (stem caches are per instance)."""
    key = (stem, stopwords)
    if key not in _ANALYZERS:
        _ANALYZERS[key] = Analyzer(stem, stopwords)
    return _ANALYZERS[key]
