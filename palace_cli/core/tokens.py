"""Verify tokens: fingerprints, proposals, finding them in an answer, and the checks lint runs."""

from __future__ import annotations

import hashlib
import re

from palace_cli.core.text import STOPWORDS, WORD, content_words, fold, normalize, root, words

MIN_WORDS, MAX_WORDS = 2, 5


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
    return [w for w in words(token) if w not in STOPWORDS and root(w) in known]


def token_problems(token: str, image: str, subject: str, keywords: list[str], content: str,
                   others: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(code, message) for everything wrong with a verify token; empty when it is good.

    `others` maps memory id -> token for the rest of the palace (lint passes only those that could
    collide); two tokens collide when verify would read one as the other (same words up to case,
    punctuation, spacing of compounds and plural endings).
    """
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
    key = phrase_key(token)
    for other_id, other_token in sorted((others or {}).items()):
        if phrase_key(other_token) == key:
            problems.append(("token-duplicate", f"verify token is also used by {other_id}"))
    return problems


def run_keys(phrase: str) -> set[str]:
    """The phrase key of every run of consecutive words of a phrase (the whole phrase included)."""
    folded = [fold(w) for w in words(phrase)]
    return {"".join(folded[i:j]) for i in range(len(folded)) for j in range(i + 1, len(folded) + 1)}


def propose_token(image: str, subject: str = "", keywords: list[str] | None = None, content: str = "",
                  taken: set[str] | None = None, anchor: str = "", shown: list[str] | None = None) -> str | None:
    """A 2-4 word phrase from the image that is unguessable and does not overlap a taken token, or None.

    Not guessable: no word of the subject, keywords or content. Not overlapping: neither the phrase
    nor any run of its words reads as a taken token, and it is not a run of a taken token, of the
    anchor or of a phrase in `shown` (other notes' anchors: anchors are printed in the index files).
    """
    known = content_words(subject) | content_words(" ".join(keywords or [])) | content_words(content)
    taken_keys = {phrase_key(t) for t in (taken or set())} - {""}
    inside_taken = set().union(*(run_keys(t) for t in (taken or set()))) if taken else set()
    inside_anchor = set().union(*(run_keys(phrase) for phrase in [anchor, *(shown or [])] if phrase))
    anchor_words = content_words(anchor)
    best: tuple[float, int, str] | None = None
    for sentence_index, sentence in enumerate(re.split(r"[.!?;:\n]+", image)):
        tokens = words(sentence)
        for size in (3, 2, 4):
            for start in range(len(tokens) - size + 1):
                gram = tokens[start : start + size]
                if gram[0] in STOPWORDS or gram[-1] in STOPWORDS:
                    continue
                meaningful = [w for w in gram if w not in STOPWORDS]
                if len(meaningful) < 2 or any(root(w) in known for w in meaningful):
                    continue
                if any(len(w) < 3 and not w.isdigit() for w in meaningful):
                    continue
                phrase = " ".join(gram)
                key = phrase_key(phrase)
                if key in inside_taken or key in inside_anchor or run_keys(phrase) & taken_keys:
                    continue
                # Rarer-looking words (long, numeric) make better tokens; 3 words is the sweet spot.
                score = sum(min(len(w), 10) for w in meaningful) + 4 * any(w.isdigit() for w in gram)
                score -= abs(size - 3) * 3 + 5 * sum(root(w) in anchor_words for w in meaningful)
                rank = (score, -sentence_index * 1000 - start, phrase)
                if best is None or rank[:2] > best[:2]:
                    best = rank
    return best[2] if best else None


class PhraseIndex:
    """Many phrases (owner -> phrase), found in any text by their phrase keys (verify's matching rule)."""

    def __init__(self, phrases: dict[str, str]):
        self.owners: dict[str, list[str]] = {}
        for owner, phrase in sorted(phrases.items()):
            key = phrase_key(phrase)
            if key:
                self.owners.setdefault(key, []).append(owner)
        self.longest = max((len(k) for k in self.owners), default=0)
        self.heads = {k[:4] for k in self.owners}  # prunes runs that cannot start any key

    def _runs(self, folded: list[str]):
        for i in range(len(folded)):
            joined = ""
            for j in range(i, len(folded)):
                joined += folded[j]
                if len(joined) > self.longest or (len(joined) >= 4 and joined[:4] not in self.heads):
                    break
                owners = self.owners.get(joined)
                if owners:
                    yield i, j, owners

    def owners_in(self, text: str) -> set[str]:
        """Owners of every phrase that occurs in text."""
        if not self.owners:
            return set()
        return {o for _, _, owners in self._runs([fold(w) for w in words(text)]) for o in owners}

    def find(self, text: str) -> list[tuple[int, int, list[str]]]:
        """(start, end, owners) character spans of the phrases in text (exotic Unicode may go unspanned)."""
        return self._spans(text) if self.owners_in(text) else []

    def _spans(self, text: str) -> list[tuple[int, int, list[str]]]:
        spans = [(fold(w), m.start(), m.end()) for m in WORD.finditer(text) for w in words(m.group())]
        return [(spans[i][1], spans[j][2], owners) for i, j, owners in self._runs([s[0] for s in spans])]

    def redact(self, text: str, mask: str = "(hidden)") -> str:
        """text with every phrase occurrence replaced by mask; the whole text is masked if that is not enough."""
        if not self.owners_in(text):
            return text
        for _ in range(3):
            hits = self._spans(text)
            if not hits:
                break
            merged: list[list[int]] = []
            for start, end, _owners in sorted(hits):
                if merged and start <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], end)
                else:
                    merged.append([start, end])
            for start, end in reversed(merged):
                text = text[:start] + mask + text[end:]
        return mask if self.owners_in(text) else text


# ---- finding tokens in an LLM's answer ------------------------------------------------------


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
