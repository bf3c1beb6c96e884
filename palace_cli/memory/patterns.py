"""The words and patterns distill reads turns with: who "I" and "you" are, filler, memory types, attributes.

Pure functions over text, no palace. The word lists are English and small on purpose: they were written from
how people talk, not fitted to a corpus (the fitted part is scorer.py's weights, cross-validated).
"""

from __future__ import annotations

import re

from palace_cli.core.text import LATIN_CUT, LATIN_WORD, NOT_VERBS, REACTIONS, STOPWORDS, straight_apostrophes

# What distill calls a memory (docs/memory.md): the first that matches a memory's text wins, in this order.
MEMORY_TYPES = ("decision", "event", "plan", "preference", "relationship", "opinion", "fact")


# First person: the speaker. Each value is a template over the speaker's name {n}.
FIRST = {"i": "{n}", "me": "{n}", "my": "{n}'s", "mine": "{n}'s", "myself": "{n}", "i'm": "{n} is",
         "im": "{n} is", "i've": "{n} has", "i'll": "{n} will", "i'd": "{n} would"}
# Second person: the one person spoken to, when a session has exactly two people.
SECOND = {"you": "{n}", "your": "{n}'s", "yours": "{n}'s", "yourself": "{n}", "you're": "{n} is",
          "you've": "{n} has", "you'll": "{n} will", "you'd": "{n} would"}
SUBJECTS = {"i", "you"}
# After a subject turned into a name, these verbs change; words that are already past or modal do not.
AGREEMENT = {"am": "is", "are": "is", "'m": "is", "were": "was", "have": "has", "do": "does", "don't": "doesn't",
             "haven't": "hasn't", "aren't": "isn't", "weren't": "wasn't", "go": "goes"}
UNCHANGED = frozenset("""gonna wanna gotta was did had can could will would shall should may might must need ought used got went
made took saw came gave found felt bought met began won lost left ran wrote told said became heard knew thought
brought caught taught sent spent built kept slept sat stood held paid meant led fought sold drove rode flew grew
drew threw wore broke spoke chose woke forgot ate drank sang swam put cut let set quit hurt read finally
can't couldn't won't wouldn't shouldn't didn't wasn't hadn't mightn't mustn't""".split())
ADVERBS = frozenset("""just really also always never still recently finally usually actually even totally
definitely truly often sometimes already absolutely honestly literally seriously only mostly kinda""".split())

PATTERNS = {
    "decision": re.compile(r"\b(decided|decide to|chose|choose to|settled on|going with|go with|made up (?:my|our) "
                           r"mind|made the (?:call|decision)|we'll use|i'll use|let's use|switched to|picked)\b"),
    "plan": re.compile(r"\b(gonna|going to|plan(?:ning)? to|plans? (?:on|for)|will|'ll|want to|wanna|hope to|"
                       r"hoping to|thinking (?:of|about)|about to|intend to|looking forward|can't wait to|next "
                       r"(?:week|month|year|weekend|summer|time))\b"),
    "preference": re.compile(r"\b(love|loves|loved|like|likes|enjoy|enjoys|enjoyed|favou?rite|fave|fav|prefer|"
                             r"prefers|passion(?:ate)?|into|hate|hates|can't stand|fan of|obsessed)\b"),
    "relationship": re.compile(r"\b(my|our) (son|sons|daughter|daughters|kids?|children|husband|wife|partner|"
                               r"boyfriend|girlfriend|mom|mother|dad|father|parents?|brother|sister|siblings?|"
                               r"grandma|grandpa|family|friends?|bestie|best friend|fianc[ée]e?|cousin|aunt|uncle|"
                               r"niece|nephew|dog|cat|pet|puppy|kitten)\b|\b(married|engaged|divorced|dating|"
                               r"broke up|adopted|pregnant|baby)\b"),
    "event": re.compile(r"\b(went|got|had|made|took|saw|did|came|gave|found|bought|met|started|finished|joined|"
                        r"visited|tried|learned|won|lost|ran|wrote|became|attended|signed|adopted|moved|painted|"
                        r"celebrated|graduated|launched|opened|performed|traveled|travelled|received|volunteered|"
                        r"organized|hosted|completed|quit)\b"),
    "opinion": re.compile(r"\b(think|believe|feel that|important|key to|crucial|matters?|essential|worth it|"
                          r"the best way|should always|makes a (?:big |huge )?difference)\b"),
}

# A person's attribute that has one value at a time: a newer value supersedes the older memory.
ATTRIBUTES = (
    ("job", re.compile(r"\b(?:i work as|i'm working as|i am working as|job as|work as|started (?:a new job|working) "
                       r"as|got a job as|i'm now an?|became an?) (an? )?(?P<value>[a-z][a-z -]{2,40}?)(?=[.,!;]| at | "
                       r"for |$)")),
    ("home", re.compile(r"\b(?i:i live in|i'm living in|moved to|we live in|relocated to) (?P<value>[A-Z][\w -]{1,40}?)"
                        r"(?=[.,!;]| with | and |$)")),
    ("favorite", re.compile(r"\bmy (?:favou?rite|fave|fav) (?P<what>[a-z][a-z ]{1,30}?) (?:is|are|has to be) "
                            r"(?P<value>[^.,!;]{2,40})")),
    ("name", re.compile(r"\b(?i:my) (?P<what>(?i:dog|cat|pet|puppy|kitten|son|daughter|baby|husband|wife|partner|"
                        r"boyfriend|girlfriend))(?i:'s name is| is named| is called|, named) (?P<value>[A-Z][\w-]{1,30})")),
    ("status", re.compile(r"\b(?:i'm|i am|i got|we got|just got) (?P<value>married|engaged|divorced|single|separated)"
                          r"\b")),
    ("age", re.compile(r"\b(?:i'm|i am|i just turned|i turned) (?P<value>\d{1,3})(?: years old)?\b")),
)


PAST_VALUE = re.compile(r"\b(lost|quit|left|former|old|previous|ex-|used to|no longer)\b")


def is_question(sentence: str) -> bool:
    """True for a sentence asking something (ends with a question mark, quotes and brackets aside)."""
    return sentence.rstrip(" \"')]”").endswith("?")


def first_person(text: str) -> int:
    """How many first-person singular words a text holds."""
    return sum(1 for m in LATIN_WORD.finditer(straight_apostrophes(text)) if m.group().lower() in FIRST)


def is_filler(sentence: str, names=()) -> bool:
    """True for greetings, thanks and reactions, made only of such words, stopwords and names ("Hey Mel!",
    "Good to see you!", "Wow, that's so cool, Caroline!", "Thanks, Jon!", "Keep it up!")."""
    skip = {n.lower() for n in names}
    return all(w in STOPWORDS or w in REACTIONS or w in skip or w.removesuffix("'s") in skip
               for w in (m.group().lower() for m in LATIN_WORD.finditer(straight_apostrophes(sentence))))


def _third_person(word: str) -> str:
    """A present-tense verb as it follows he or she: love -> loves, try -> tries, watch -> watches."""
    low = word.lower()
    if low in AGREEMENT:
        return AGREEMENT[low] if word.islower() else AGREEMENT[low].capitalize()
    if low in UNCHANGED or low.endswith(("ed", "'d", "ing", "s")) or not low.isalpha():
        return word
    if low.endswith("y") and len(low) > 2 and low[-2] not in "aeiou":
        return word[:-1] + "ies"
    if low.endswith(("sh", "ch", "x", "z", "o")):
        return word + "es"
    return word + "s"




# After a person is named once, first (or second) person goes on as "they": "Jon loves his dog" needs a gender
# nobody told, "Jon loves Jon's dog" reads like a form.
THEY = {"i": "they", "me": "them", "my": "their", "mine": "theirs", "myself": "themselves", "i'm": "they're",
        "im": "they're", "i've": "they've", "i'll": "they'll", "i'd": "they'd", "you": "they", "your": "their",
        "yours": "theirs", "yourself": "themselves", "you're": "they're", "you've": "they've", "you'll": "they'll",
        "you'd": "they'd"}
THEY_AGREEMENT = {"am": "are", "was": "were", "'m": "are"}


def rewrite(sentence: str, speaker: str, addressee: str | None = None) -> str:
    """A sentence with first person written as the speaker's name (and second person as the addressee's, when
    there is one), named once and "they" after: "I love my dog" said by Jon -> "Jon loves their dog"; verbs
    agree with the name."""
    tokens = LATIN_CUT.findall(straight_apostrophes(sentence))
    out: list[str] = []
    agree = ""  # "i" or "you" when the last word written was that subject turned into a name
    named: set[str] = set()  # "i", "you": whose name was written already
    for token in tokens:
        low = token.lower()
        if not token[0].isalpha():
            out.append(token)
            if not token.isspace():
                agree = ""
            continue
        table = FIRST if low in FIRST else SECOND if addressee and low in SECOND else None
        if table is not None:
            who, other = ("i", "you") if table is FIRST else ("you", "i")
            name = speaker if table is FIRST else addressee
            other_name = addressee if table is FIRST else speaker
            if who in named and other not in named and low in THEY and not (other_name and other_name in "".join(out)):
                word = THEY[low]
                starts = not "".join(out).strip() or "".join(out).rstrip()[-1] in ".!?"
                out.append(word.capitalize() if starts else word)
                agree = "they" if low in SUBJECTS else ""
                continue
            out.append(table[low].format(n=name))
            if low not in ("my", "mine", "your", "yours"):
                named.add(who)  # "Jon's dog and Jon went out": a possessive does not name the subject
            agree = low if low in SUBJECTS else ""
            continue
        if agree and low in ADVERBS:
            out.append(token)
            continue
        if agree == "they":
            out.append(THEY_AGREEMENT.get(low, token) if low in THEY_AGREEMENT else token)
            agree = ""
            continue
        # "you" is as often an object as a subject: after it only be/have/do change ("you are" -> "Gina is").
        changes = low in AGREEMENT or (agree == "i" and (low not in STOPWORDS or low == "own") and low not in NOT_VERBS)
        out.append(_third_person(token) if agree and changes else token)
        agree = ""
    return "".join(out)


# A sentence that starts with one of these has left out its subject, the speaker ("Lost my job yesterday",
# "Gonna continue my studies"): "I" is put back, and rewrite makes it the name. ("Been ..." is left alone: it
# leaves out "I" as often as "it".)
ELIDED = {"gonna": "I'm gonna", "wanna": "I want to", "gotta": "I've got to",
          "just": "I just", "finally": "I finally", "recently": "I recently", "can't": "I can't"}
LEAD = re.compile(r"^((?:(?:oh|yeah|yes|yep|well|so|and|but|also|plus|actually|honestly|ha+|lol|wow),?\s+)*)"
                  r"([A-Za-z']+)", re.IGNORECASE)


def with_subject(sentence: str) -> str:
    """The sentence with "I" put back when it starts with a past-tense verb or a word like "gonna" or "been"
    that has left the speaker out."""
    match = LEAD.match(sentence)
    if not match:
        return sentence
    word = match.group(2)
    low = word.lower()
    if low in ELIDED:
        lead = ELIDED[low]
    elif (low in UNCHANGED and low not in ("can", "could", "will", "would", "shall", "should", "may", "might",
                                           "must", "need", "ought", "read", "let", "put", "set", "cut")
          or (low.endswith("ed") and len(low) > 4 and low not in ("need", "indeed"))) \
            and (word[0].isupper() or match.group(1)):
        lead = "I " + low
    else:
        return sentence
    return sentence[: match.start(2)] + lead + sentence[match.end(2):]


def memory_type(text: str) -> str:
    """The type of a memory's text: the first of MEMORY_TYPES whose pattern it matches, else fact."""
    low = straight_apostrophes(text).lower()
    for name in MEMORY_TYPES[:-1]:
        if PATTERNS[name].search(low):
            return name
    return "fact"


def attribute(text: str) -> tuple[str, str] | None:
    """(attribute, value) when the text states one of a person's one-at-a-time attributes (job, home, a
    favourite, a pet's or child's name, marital status, age), else None."""
    said = straight_apostrophes(text)
    for name, pattern in ATTRIBUTES:
        match = pattern.search(said if name in ("home", "name") else said.lower())
        if match and PAST_VALUE.search(said[max(0, match.start() - 24) : match.start() + 12].lower()):
            continue  # "lost my job as a banker": a value that no longer holds
        if match:
            what = match.groupdict().get("what")
            key = f"{name} {what.strip().lower()}" if what else name
            return key, match.group("value").strip().lower()
    return None
