"""Words and sentences of a text: normalisation, stopwords, slugs, sentence splitting, and four stemmers,
each named for what it is tuned to. The one home of word patterns and word lists: those tuned to one job
(clustering, a session's key terms, distill, the quiz) are named for it here, beside the general ones.

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
# Word lists beyond STOPWORDS, each tuned to one job (its figures depend on it), all kept here.
# Clustering: words too common in prose (and in abstracts) to name or separate anything.
PROSE_WORDS = frozenset(
    "also before however using used use based between after during among within may might been being were whether "
    "would could should than both many much well via per non new found show shows shown showed study studies "
    "results result data analysis method methods two three one associated effect effects increased role".split()
)
# A session's key terms: words of conversation that say nothing of its topic; with STOPWORDS never key terms.
CHAT_WORDS = frozenset("""
about after also always amazing anything around awesome back been being better cool could definitely did does
doing done easy even ever every everything feel feeling feels felt found from fun getting give glad going gonna
good got great had hard having hear heard hello help here hey hope hopefully into it's i'm i've know last let
like little looking looks lot lots love made make makes making many maybe mean might much need new next nice
now okay one people pretty put really right said same say see seems should so some something soon sounds still
sure take talk talking tell thank thanks that's thing things think those though time times today together too
totally try trying want wanted way well went what's wow yeah year years yes you're you've your
can't wait keep myself others happy tough life blast photo shares shared
""".split())
# Distill: greetings and thanks (a signal of filler).
GREETINGS = frozenset("""hey hi hello heya yo bye goodbye cya cheers thanks thank thx ty congrats congratulations wow
whoa woah aww awww omg haha hahaha lol yay yeah yep yup yes no nope ok okay sure totally definitely absolutely
cool awesome nice great amazing glad sorry oh ah ooh hmm well man dude buddy gosh welcome bet""".split())
# Distill: words that carry nothing a memory would keep, beyond stopwords, chat words and greetings.
EMPTY = STOPWORDS | CHAT_WORDS | GREETINGS | frozenset("""i'd i'll it'd that'd there's here's let's what's how's
you'll you'd we're we've we'll they're don't didn't can't won't isn't wasn't doesn't couldn't wouldn't shouldn't
also just really so very super such quite pretty kinda sorta gonna wanna gotta lemme wish""".split())
# Distill: what a greeting, a thanks or a reaction is made of: a sentence of only these (and stopwords and names)
# is filler.
REACTIONS = GREETINGS | frozenset("""good see seeing seen glad hear hearing heard sounds sound looks look so sooo
much lot lots time long talk talking chat catch back fun blast wait can't keep up luck take care soon later again
you're that's it's what's how's there's here's let's such really too very pretty true right agree agreed exactly
same here meant means love lovely happy lucky welcome problem prob worries worry mind news hope hopefully doing
going went been well sweet wonderful fantastic incredible beautiful cute brilliant exciting interesting
impressive inspiring adorable gorgeous stunning perfect neat wild crazy asking ask thing way go ha haha gotcha
yup nah oof ouch must've should've could've would've must""".split())
# Distill: words that follow "I" without being its verb ("I, too", "I myself"): never given an -s.
NOT_VERBS = frozenset("about again also although around because even here there too maybe perhaps myself "
                      "alone instead though".split())
# The quiz: words too common in technical prose to be worth blanking.
DULL = frozenset(
    "also usually often used use uses using can may must might would could should every each many much more most "
    "less least like such one two first second new old same other another way ways thing things kind kinds make "
    "makes made get gets instead rather than whether either neither whole part parts rest still even only just "
    "always never sometimes several whatever whichever however because since until within without across around "
    "about after before between through during against among per via see lets let keeps keep".split()
)

# Word patterns. WORD is the rule of `words` (any script); the rest are tuned to one job each (and ASCII letters).
WORD = re.compile(r"[^\W_]+")
ALNUM = re.compile(r"[A-Za-z0-9]+")  # SMASHIN's cue words, the quiz's redaction of an image
ALNUM_CONTRACTED = re.compile(r"[A-Za-z0-9]+(?:'[a-z]+)?")  # the quiz's cloze blanks: `don't` is one word
LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z']*")  # distill's person rewriting: `I'm` and `you're` are one word
LATIN_CUT = re.compile(r"[A-Za-z][A-Za-z']*|[^A-Za-z]+")  # LATIN_WORD and what is between: a sentence cut whole
KEY_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{3,}")  # a session's key terms: four letters or more, hyphens kept
TERM = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")  # clustering's TF-IDF terms: hyphenated compounds kept whole
PUNCTUATION = re.compile(r"[^\w\s]|_")
ASIDE = re.compile(r"\(([^)]*)\)")  # a parenthesised aside in a subject, left out of its slug
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
    return " ".join(PUNCTUATION.sub(" ", transliterated(text).lower()).split())


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


APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'"})  # curly to straight: the word lists are written with '
NOT_LATIN = re.compile(r"[^\W\dA-Za-z_]")  # a letter of a script the word lists do not cover


def straight_apostrophes(text: str) -> str:
    """Text with curly apostrophes made straight."""
    return text.translate(APOSTROPHES)


def informative_words(text: str, names=()) -> list[str]:
    """The words of a text that carry something to remember: not stopwords, chat words, greetings or names."""
    skip = {n.lower() for n in names}
    return [w for w in (m.group().lower() for m in LATIN_WORD.finditer(straight_apostrophes(text)))
            if len(w) > 2 and w not in EMPTY and w not in skip and not w.endswith("'s") or
            (w.endswith("'s") and len(w) > 4 and w[:-2] not in EMPTY and w[:-2] not in skip)]


def substance(text: str, names=()) -> int:
    """How much a text says beyond chit-chat: its informative words, its numbers, and its words in other scripts
    (one per two letters, as Chinese or Japanese write no spaces), so that a text in a language the English word
    lists cannot read is never taken for chatter."""
    count = len(informative_words(text, names))
    for word in WORD.findall(text):
        if word.isdigit():
            count += 1
        elif NOT_LATIN.search(word) and not LATIN_WORD.match(word):
            count += max(1, len(word) // 2)
    return count


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
    return slug(ASIDE.sub(" ", text), 80) or "memory"


def slugify_without_accents(text: str) -> str:
    """slugify as it was before accents were transliterated (`Café` gave `caf`, each letter outside a to z a
    `-`): kept only to find what was filed under such an id (the reviews of a note whose id came from its file
    name)."""
    return slug(ASIDE.sub(" ", text).lower().encode("ascii", "replace").decode("ascii").replace("?", "-"), 80) \
        or "memory"


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


def transliterated(text: str) -> str:
    """Text with its accents and ligatures taken apart and the accents dropped: `Café` is `Cafe`, `ﬁ` is `fi`."""
    if text.isascii():
        return text
    return "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))


def slug(text: str, limit: int | None = 60, keep: str = "", scripts: bool = False) -> str:
    """The one slug rule, for file names and ids (docs/note-format.md, "Ids"): accents transliterated (`Café`
    is `cafe`), lowercase, each run of anything but letters, digits and the characters of `keep` one `-`, no
    `-` (nor `keep`) at either end, at most `limit` characters (None: any length). Letters are a to z, or with
    `scripts` letters of any script (an id derived from a vault's path: read, never written into a note)."""
    text = transliterated(str(text)).lower()
    ends = "-" + keep
    out = re.sub(r"[\W_]+" if scripts else f"[^a-z0-9{re.escape(keep)}]+", "-", text).strip(ends)
    return out if limit is None else out[:limit].rstrip(ends)


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
