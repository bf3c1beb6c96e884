"""What a user's sentence to a coding agent could be kept as: its kind (decision, convention, fact, solution,
milestone or none), the sentences told apart inside it (a one-off instruction and the rule behind it, two facts, a
lead-in and what it announces), and the sentences grouped into units (a rule and its reason). Pure functions over
text; work.py builds the units from them.
"""

from __future__ import annotations

import re
from functools import lru_cache

from palace_cli.memory import cues
from palace_cli.memory.patterns import is_filler
from palace_cli.memory.proposals import Piece, empty, informative

def rule_apart(piece: Piece) -> list[Piece]:
    """A sentence that gives a one-off instruction and the standing rule behind it ("don't drop today, we drop
    indexes only after one week of observation"), as the instruction and the rule; any other sentence as it is."""
    parts = [p.strip(" ,") for p in re.split(r",\s+(?:but\s+)?|\s+[—–]\s+|;\s+|:\s+", piece.text) if p.strip(" ,")]
    standing = [p for p in parts if cues.RULE.search(p) and not cues.ONE_OFF.search(p) and len(p.split()) >= 4]
    standing += [p for before, p in zip(parts, parts[1:]) if before in standing and p not in standing
                 and fragment(p) and not cues.ONE_OFF.search(p)]  # "we only deploy in the window, Tue and Thu 8-10"
    standing = [p for p in parts if p in standing]
    if len(parts) > 1 and standing and any(cues.ONE_OFF.search(p) for p in parts):
        rest = [p for p in parts if p not in standing]  # the rule first: the instruction never joins it
        return [Piece(", ".join(standing), piece.item, piece.paragraph), Piece(", ".join(rest), piece.item,
                                                                               piece.paragraph)]
    return [piece]


# A lead-in that says settled things follow: "two things Jun and I settled, please put them in the doc: ...".
ANNOUNCES = re.compile(r"\b(?:we|i|they|[\w-]+ and (?:i|me))(?: have|'ve)? (?:settled|decided|agreed|chose|picked)\b|"
                       r"\b(?:the|our|new|two|three|some) (?:rules?|decisions?|conventions?)\b", re.I)


def announced_apart(piece: Piece) -> list[Piece]:
    """A sentence whose lead-in says that what follows its colon was settled ("two things we settled this morning,
    write them into RELEASING.md: X, and Y"), as what it announces; any other sentence as it is."""
    lead, colon, body = piece.text.partition(": ")
    if not colon or not ANNOUNCES.search(lead) or len(lead.split()) > 25 or len(body.split()) < 5 \
            or cues.is_asking(body) or cues.HYPOTHETICAL.search(lead):
        return [piece]
    return [Piece(body, piece.item, piece.paragraph)]  # the lead-in says only that something follows


def facts_apart(piece: Piece) -> list[Piece]:
    """A sentence that tells two facts apart ("I own ingestion, not the dbt models — those are Tomasz's"), as
    two pieces; any other sentence as it is."""
    parts = [p.strip(" ,") for p in re.split(r"\s+[—–]\s+|;\s+", piece.text)]
    if len(parts) > 1 and all(len(p.split()) >= 3 and kind_of(p) == "fact" for p in parts):
        return [Piece(p, piece.item, piece.paragraph) for p in parts]
    return [piece]


@lru_cache(maxsize=1 << 14)
def kind_of(sentence: str) -> str:
    """The kind of memory a user's sentence could be, or "" for none (a question, a pleasantry, an instruction
    with no rule in it, a hypothetical)."""
    core = cues.opened(sentence)
    head = ASIDE.split(core)[0]  # "every release gets 48 h, no exceptions - the crash would have shown": a reason
    if cues.is_asking(sentence) or empty(core) or cues.HYPOTHETICAL.search(head if cues.STRONG.search(head) else core) or \
            (len(core.split()) < 2 and not cues.SETTLED.search(sentence)):
        return ""
    if cues.REJECTED.search(core) and not cues.RULE.search(core):
        return ""  # a rejected option on its own: the choice made, when said, is the memory
    if cues.RECAP.search(sentence):
        return "solution"
    if cues.RESTATED.search(sentence):
        return ""  # said again: the memory was made when it was first said
    if cues.DECLARED.match(core):
        return "decision"
    if cues.DONE.search(cues.main_clause(core)) and not cues.REQUEST.match(core) and not cues.imperative(core) and not cues.RULE.search(core):
        return "milestone"
    if cues.RULE.search(core) and not (cues.HAPPENING.search(core) and not WE.match(core)):
        return "convention"
    if cues.CHOICE.search(core) or cues.SETTLED.search(sentence):
        return "decision"
    if cues.imperative(core) or cues.REQUEST.match(core):
        return "decision"
    if fact_like(core) or keyed_fact(core):
        return "fact"
    return ""


# "Stack: .NET 8, EF Core, Postgres 16", "hw: 4x a100 80g, node gpu-07": a value given under a short name.
KEYED = re.compile(r"^\W*(?P<key>[A-Za-z][\w.+/-]*(?: [\w.+/-]+){0,2}):\s+(?P<value>\S.*)$")
ABOUT_ITEM = re.compile(r"^\W*(?:for|on|in|about|as|to|with|at|from|re|regarding|and|or|but)\b", re.I)  # "For 1: ..."
NOT_A_KEY = frozenset("next first then todo problem question note update ps edit re step steps task goal issue error "
                      "bug fix plan summary context background facts rules style also ok so now and but why what how "
                      "answer example e.g proposal option options idea".split())


def keyed_fact(core: str) -> bool:
    """A value given under a short name ("Stack: .NET 8, EF Core", "hw: 4x a100 80g, node gpu-07"): a fact when the
    value names things (a number or a name of code in it), not a task, a question or an instruction."""
    keyed = KEYED.match(core)
    if not keyed or keyed.group("key").lower() in NOT_A_KEY or cues.is_asking(core) or ABOUT_ITEM.match(core):
        return False
    value = keyed.group("value")
    return bool(re.search(r"\d", value) or cues.CODEISH.search(value)) and len(informative(value)) >= 2 and not (
        cues.imperative(value) or cues.REQUEST.match(value) or cues.PROBLEM.search(value) or cues.WANTED.search(value))


def fact_like(core: str) -> bool:
    """A statement that holds beyond today: a present-tense claim about something named (a system, a person, a
    number), not a report of what just happened, a judgement, or the speaker's own doing. Who owns or runs what
    is a fact however it is said ("that's Grace, she runs our SOC2 audit")."""
    if not cues.TELLING.search(core) or cues.EVALUATIVE.search(core):
        return False
    if cues.OWNED_BY.search(core) and not cues.FIRST_SINGULAR.match(core):
        return True
    if cues.POINTING.match(core) and not cues.NAMES_IT.match(core) or cues.PROBLEM.search(core) or cues.TRANSIENT_NOW.search(core) \
            or cues.FUTURE.search(core) and not cues.DATED.search(core):
        return False
    if cues.WANTED.search(core) or cues.ONE_OFF.search(core):
        return False  # what someone needs or wants done, or how it went this time: the task at hand
    if cues.FIRST_SINGULAR.match(core) and not cues.OWNER.search(core) and not cues.JOINED.search(core):
        return False
    return True


ASIDE = re.compile(r"\s+[—–]\s+")
ANOTHER = re.compile(r"^\W*(?:and|also|plus|another)\b", re.I)
SUBJECT = re.compile(r"^\W*(?:we|i|you|they|he|she|it)\b", re.I)  # a clause with its own subject is no fragment
WE = re.compile(r"^\W*we\b", re.I)  # "we never ...": a rule in a report's words; "our setup has never been" is none


def groups_of(pieces: list[Piece], kinds: list[str]) -> list[tuple[str, list[Piece]]]:
    """Pieces grouped into units: a decision or convention takes the sentences after it in its paragraph that go
    on with it (its reason, the rule's other half); facts and list items stand alone."""
    groups: list[tuple[str, list[Piece]]] = []
    for piece, kind in zip(pieces, kinds):
        if groups and not piece.item and not groups[-1][1][-1].item and groups[-1][1][-1].paragraph == piece.paragraph:
            head, members = groups[-1]
            if head == "" and len(members) == 1 and kind in ("decision", "convention") and leads_in(members[0].text):
                groups[-1] = (kind, [*members, piece])  # "Quiet hours 22 to 8, only for marketing. X always ..."
                continue
            if kind == "convention" and head in ("", "fact") and len(members) <= 2 and fragment(piece.text) \
                    and not cues.is_asking(members[-1].text) and not ANOTHER.match(piece.text) \
                    and not SUBJECT.match(ADVERBS.sub("", piece.text)):
                groups[-1] = (kind, [*members, piece])  # "titles here are `area: what`. always the area": its rule
                continue
            going_on = head in ("decision", "convention") and len(members) < 3 and (
                (kind in ("", "decision") or fragment(piece.text) or cues.REASON.match(cues.opened(piece.text)))
                and not cues.is_asking(piece.text)
                and not cues.REQUEST.match(cues.opened(piece.text)) and not cues.ONE_OFF.search(piece.text)
                and not cues.HYPOTHETICAL.search(piece.text) and not keyed_fact(cues.opened(piece.text))) and not (
                kind == "convention" and ANOTHER.match(piece.text))  # "And no names in the timeline, ever": a new rule
            if going_on and (kind or continues(piece.text)):
                members.append(piece)
                continue
            if head == "milestone" and (kind in ("milestone", "") or kind == "fact" and len(members) < 3) \
                    and not cues.is_asking(piece.text) \
                    and not cues.REQUEST.match(cues.opened(piece.text)) and not empty(cues.opened(piece.text)):
                members.append(piece)  # one event a turn: "Beatriz approved and merged it!! first PR done"
                continue
            if head == "fact" and len(members) == 1 and kind in ("fact", "") and len(piece.text.split()) <= 8 \
                    and not cues.is_asking(piece.text) and not cues.REQUEST.match(cues.opened(piece.text)) \
                    and not empty(cues.opened(piece.text)) and not cues.imperative(cues.opened(piece.text)) \
                    and not cues.WANTED.search(piece.text):
                members.append(piece)  # "max_connections is still 500 though": the fact's other half
                continue
        groups.append((kind, [piece]))
    return groups


def leads_in(sentence: str) -> bool:
    """A sentence with no verb of its own that names what the rule after it is about ("Quiet hours 22 to 8 in
    the user's local time, only for marketing."): not a question, a request, a reaction or a maybe."""
    core = cues.opened(sentence)
    return len(informative(core)) >= 3 and fragment(core) and not (
        cues.is_asking(sentence) or cues.REQUEST.match(core) or empty(core) or cues.HYPOTHETICAL.search(core)
        or cues.HEDGE.search(core) or cues.PROBLEM.search(core) or cues.EVALUATIVE.search(core))


CONTINUES = re.compile(r"^\W*(?:always|never|no\b|not\b|and\b|but\b|so\b|because|since|that'?s|it'?s|they|we|"
                       r"this|those|these|use\b|otherwise|which|[a-z])", re.I)
ADVERBS = re.compile(r"^\W*(?:(?:always|never|no|not|also|and|but|so|only|just|then|please)\W+)+", re.I)


def continues(sentence: str) -> bool:
    return bool(CONTINUES.match(sentence)) and not is_filler(cues.opened(sentence))


def fragment(sentence: str) -> bool:
    """True for a sentence that does not stand on its own as a rule ("always timezone.now(), never
    datetime.now()"): no verb of its own after its adverbs."""
    rest = ADVERBS.sub("", cues.opened(sentence))
    return not (cues.imperative(rest) or cues.TELLING.search(rest) or cues.FIRST_SINGULAR.match(rest))
