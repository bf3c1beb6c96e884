"""Verify tokens: normalisation, fingerprints, proposals and the checks lint runs."""

from __future__ import annotations

import hashlib
import re
import unicodedata

STOPWORDS = frozenset(
    "a an and are as at be but by for from has have he her his in into is it its of on or our she "
    "that the their them then there these they this to was were what when where which while who why "
    "will with you your yours i me my we us not no so if than too very can just over under up down out "
    "off all any each both few more most other some such only own same again once here how".split()
)
MIN_WORDS, MAX_WORDS = 2, 5


def normalize(text: str) -> str:
    """Lowercase, strip accents, hyphens/punctuation to spaces, collapse whitespace."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    text = re.sub(r"[^\w\s]|_", " ", text)
    return " ".join(text.split())


def words(text: str) -> list[str]:
    """Normalised words of a text."""
    return normalize(text).split()


def stem(word: str) -> str:
    """A crude plural/verb stem, so 'couples' and 'couple' count as the same word."""
    for suffix in ("ies", "es", "s", "ing", "ed"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> set[str]:
    """Stems of the non-stopword words in a text."""
    return {stem(w) for w in words(text) if w not in STOPWORDS}


def fingerprint(token: str) -> str:
    """A short, stable fingerprint of a verify token: proves which token without revealing it."""
    if not token.strip():
        return "vt:--------"
    return "vt:" + hashlib.sha256(normalize(token).encode("utf-8")).hexdigest()[:8]


def contains_phrase(haystack: str, phrase: str) -> bool:
    """True when the normalised phrase occurs in the normalised text on word boundaries."""
    needle = normalize(phrase)
    return bool(needle) and f" {needle} " in f" {normalize(haystack)} "


def guessable_words(token: str, subject: str, keywords: list[str], content: str) -> list[str]:
    """Words of the token that also appear in the subject, keywords or content."""
    known = content_words(subject) | content_words(" ".join(keywords)) | content_words(content)
    return [w for w in words(token) if w not in STOPWORDS and stem(w) in known]


def token_problems(token: str, image: str, subject: str, keywords: list[str], content: str,
                   others: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(code, message) for everything wrong with a verify token; empty when it is good."""
    if not token.strip():
        return [("token-missing", "no verify token (`verify:`); `palace lint --fix` can propose one")]
    problems = []
    count = len(words(token))
    if not MIN_WORDS <= count <= MAX_WORDS:
        problems.append(("token-length", f"verify token has {count} words; use {MIN_WORDS}-{MAX_WORDS}"))
    if not contains_phrase(image, token):
        problems.append(("token-not-in-image", "verify token does not appear in the Image"))
    leaked = guessable_words(token, subject, keywords, content)
    if leaked:
        problems.append(("token-guessable", f"verify token word(s) {', '.join(leaked)} appear in the subject, keywords or content"))
    for other_id, other_token in (others or {}).items():
        if normalize(other_token) == normalize(token):
            problems.append(("token-duplicate", f"verify token is also used by {other_id}"))
    return problems


def propose_token(image: str, subject: str = "", keywords: list[str] | None = None, content: str = "",
                  taken: set[str] | None = None) -> str | None:
    """A 2-4 word phrase from the image that is unguessable and unused, or None when none qualifies."""
    known = content_words(subject) | content_words(" ".join(keywords or [])) | content_words(content)
    used = {normalize(t) for t in (taken or set())}
    best: tuple[float, int, str] | None = None
    for sentence_index, sentence in enumerate(re.split(r"[.!?;:\n]+", image)):
        tokens = words(sentence)
        for size in (3, 2, 4):
            for start in range(len(tokens) - size + 1):
                gram = tokens[start : start + size]
                if gram[0] in STOPWORDS or gram[-1] in STOPWORDS:
                    continue
                meaningful = [w for w in gram if w not in STOPWORDS]
                if len(meaningful) < 2 or any(stem(w) in known for w in meaningful):
                    continue
                if any(len(w) < 3 and not w.isdigit() for w in meaningful):
                    continue
                phrase = " ".join(gram)
                if phrase in used:
                    continue
                # Rarer-looking words (long, numeric) make better tokens; 3 words is the sweet spot.
                score = sum(min(len(w), 10) for w in meaningful) + 4 * any(w.isdigit() for w in gram)
                score -= abs(size - 3) * 3
                key = (score, -sentence_index * 1000 - start, phrase)
                if best is None or key[:2] > best[:2]:
                    best = key
    return best[2] if best else None


# ---- finding tokens in an LLM's answer ------------------------------------------------------


def fold(word: str) -> str:
    """A normalised word with its plural ending folded: 'couples' and 'couple' give the same form."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes", "zzes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def phrase_key(phrase: str) -> str:
    """The key two spellings of a phrase share when they differ only in case, punctuation, hyphens,
    spacing of compounds or plural endings: the folded words, joined without spaces."""
    return "".join(fold(w) for w in words(phrase))


def find_phrases(text: str, phrases: dict[str, str], slack: int = 2) -> list[tuple[str, int, int, bool]]:
    """Every occurrence in `text` of the phrases (key -> phrase) as (key, first word, end word, exact).

    A match is a run of whole words of the normalised text whose folded, joined form equals the
    phrase's key; `exact` says the words were the phrase's own words, not a variant spelling.
    """
    keys: dict[str, list[str]] = {}
    for key, phrase in phrases.items():
        folded = phrase_key(phrase)
        if folded:
            keys.setdefault(folded, []).append(key)
    if not keys:
        return []
    longest = max(len(words(p)) for p in phrases.values()) + slack
    longest_key = max(len(k) for k in keys)
    tokens = words(text)
    folded_words = [fold(w) for w in tokens]
    wanted = {key: words(phrases[key]) for ids in keys.values() for key in ids}
    found = []
    for start in range(len(tokens)):
        joined = ""
        for end in range(start + 1, min(len(tokens), start + longest) + 1):
            joined += folded_words[end - 1]
            if len(joined) > longest_key:
                break
            for key in keys.get(joined, ()):
                found.append((key, start, end, tokens[start:end] == wanted[key]))
    return found
