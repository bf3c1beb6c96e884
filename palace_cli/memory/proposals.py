"""What the agent proposed and what the user took of it: a turn's sentences (pieces), the proposal a "yes, do that"
takes (the proposing sentences, or what the agent said last), and the decision it makes in the proposal's words.
Pure text in, text out; work.py builds the units."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

from palace_cli.conversations.model import Turn
from palace_cli.core.dates import resolve_relative
from palace_cli.core.text import informative_words, split_sentences
from palace_cli.memory import cues
from palace_cli.memory.patterns import is_filler


@dataclass(frozen=True)
class Piece:
    """One sentence or list item of a turn, with where it stands."""

    text: str
    item: bool
    paragraph: int


@lru_cache(maxsize=1 << 12)
def pieces_of(text: str) -> tuple[Piece, ...]:
    """The sentences and list items of what a turn said, in order (cached: a turn is read again as the context
    of the turns after it)."""
    out, paragraph, lines = [], 0, []

    def flush():
        if lines:
            out.extend(Piece(s, False, paragraph) for s in split_sentences(" ".join(lines), lowercase=True))
            lines.clear()

    for line in cues.said_text(text).splitlines():
        if not line.strip():
            flush()
            paragraph += 1
        elif cues.LIST_ITEM.match(line):
            flush()
            out.append(Piece(cues.LIST_ITEM.sub("", line).strip(), True, paragraph))
        else:
            lines.append(line.strip())
    flush()
    return tuple(p for p in out if p.text)


@lru_cache(maxsize=1 << 14)
def informative(text: str) -> frozenset[str]:
    """The informative words of a text (cached: proposals and recent turns are read again and again)."""
    return frozenset(informative_words(text))


def proposal_before(turns: list[Turn], index: int) -> str:
    """What the agent proposed in the turn just before a user's turn: its proposing sentences, or its whole
    answer when the user had asked for one; with the earlier proposal it points back to ("as described")."""
    if not index or turns[index - 1].role != "assistant":
        return ""
    asked = index > 1 and turns[index - 2].role == "user" and any(
        cues.is_asking(p.text) and cues.ADVICE.search(p.text) for p in pieces_of(turns[index - 2].text))
    proposal = proposal_in(cues.said_text(turns[index - 1].text), asked)
    if not proposal and opens_accepting(pieces_of(turns[index].text)) and not any(
            cues.is_asking(p.text) for p in pieces_of(turns[index - 1].text)[-2:]):
        answer = closing(cues.said_text(turns[index - 1].text))  # "yes, do that" takes what was said last
        proposal = answer if len(informative(answer)) >= 6 else ""
    if proposal and (len(informative(proposal)) < 10 or cues.POINTS_BACK.search(proposal)):
        for earlier in reversed(turns[max(0, index - 5):index - 1]):
            if earlier.role == "assistant":
                found = proposal_in(cues.said_text(earlier.text), False)
                if found and informative(found) & informative(proposal):
                    return f"{found} {proposal}"
    return proposal


def takes_a_choice(pieces, proposal: str) -> bool:
    """Whether an acceptance settles something: not a bare reaction ("fine", "good": acknowledged, not chosen), not
    a "yes please" to an offer to do something now ("Want me to go through a request end to end?"), not a turn
    that turns the proposal down ("Fair. No config then")."""
    if len(pieces) == 1 and not YES.match(pieces[0].text) and not cues.TAKE.search(cues.opened(pieces[0].text)):
        return False
    if any(cues.REJECTED.search(cues.opened(p.text)) for p in pieces):
        return False
    offered = split_sentences(proposal, lowercase=True)
    return not offered or not all(cues.is_asking(s) and cues.OFFER.search(s) for s in offered)


def opens_accepting(pieces) -> bool:
    """True for a turn that opens by taking what the agent said: "yes", "ok, do like this", "yep go with the
    protocol", "Ooh, that's neater. Yes, ..." (a reaction first)."""
    for piece in pieces[:2]:
        if cues.is_asking(piece.text) or NEW_REQUEST.match(cues.opened(piece.text)):
            return False
        if cues.TAKE.match(cues.opened(piece.text)) and not cues.TAKE.fullmatch(cues.opened(piece.text).strip(" .!")) \
                or cues.TAKE.fullmatch(cues.opened(piece.text).strip(" .!")) and YES.match(piece.text) \
                or REFERS_BACK.match(cues.opened(piece.text)):
            return True
        said_yes = YES.match(piece.text)
        if said_yes:  # "yes, suggest expiry at ...": a yes and what to do with it, not "yes, rtgw is ..."
            rest = piece.text[said_yes.end():].strip()
            if not rest.strip(" .!") and piece is pieces[0] and len(pieces) > 1:
                rest = pieces[1].text  # "yes. 2% is fine but post to the team channel": the yes, then its change
            return bool(cues.imperative(rest) or cues.CHOICE.match(rest) or refers_back(rest) or THAT_ONE.match(rest)
                        or AGREED_ON.match(piece.text) or FINE_BUT.match(rest) or (
                            re.search(r"\d", rest) and not cues.TELLING.search(rest)))  # "yes, 80% for 5 min, page"
        if not empty(cues.opened(piece.text)) and not (len(piece.text.split()) <= 4 and cues.EVALUATIVE.search(
                piece.text)):  # a reaction first: "Ooh, that's neater."
            return False
    return False


def accepts(sentence: str) -> bool:
    """True for a sentence that only takes what was proposed: "yes do that", "ok, go ahead", "fine.", "do it"."""
    rest = cues.ACCEPT.sub("", sentence.strip(), count=1)
    if rest == sentence.strip():
        return bool(cues.TAKE.fullmatch(sentence.strip(" .!")))
    rest = rest.strip(" .!,;:")
    return not rest or bool(cues.TAKE.fullmatch(rest)) or cues.OPENERS.sub("", rest).strip(" .!,") == ""


def empty(sentence: str) -> bool:
    """A sentence that says nothing to keep: pleasantries and reactions, no number or name of a thing in it."""
    return is_filler(sentence) and not cues.CODEISH.search(sentence)


YES = re.compile(r"^\W*(?:yes|yeah|yep|yup|sure|sí|si|agreed)\b[\s,.:;!—–-]*", re.I)
# "Please write a short page on ...": a new request of the agent, not a yes to what it said.
NEW_REQUEST = re.compile(r"^\W*(?:please|pls)\W+(?!do\b|go\b)[a-z]+", re.I)
# "Yes, that.", "that one": the yes points at what was just proposed.
THAT_ONE = re.compile(r"^\W*(?:that|this)(?: one)?\W*$", re.I)
# "Agreed on storing only the hash", "agreed to the weekly cadence": a part of the proposal taken by name.
AGREED_ON = re.compile(r"^\W*agreed (?:on|to|with)\b", re.I)
# "2% is fine but post to #ops-alerts": the proposal taken, with a change.
FINE_BUT = re.compile(r"^[^.!?]{0,40}\b(?:is|are|sounds|looks|seems) (?:fine|ok|okay|good|great)\W+but\b", re.I)


REFERS_BACK = re.compile(r"\b(do (?:that|it|this|like this|both|all)|make (?:that|it|this)|add that|that'?s how|like "
                         r"(?:that|this)|as (?:described|proposed|suggested)|your (?:plan|proposal|suggestion)|"
                         r"both|all three|that too)\b", re.I)


def refers_back(sentence: str) -> bool:
    """True for a sentence that points at what was proposed: "do that", "add that too", "both"."""
    return bool(REFERS_BACK.search(sentence))


# ---- proposals and what the user took ------------------------------------------------------------------


def proposal_in(before: str, asked: bool) -> str:
    """The sentences of an agent's turn that propose something, from the first that does (a question offering a
    choice included), or its answer when the user had asked: "" when it proposes nothing."""
    pieces = pieces_of(before) if before else []
    for i, piece in enumerate(pieces):
        if cues.PROPOSAL.search(piece.text):
            kept = [p.text for p in pieces[i:i + 5] if not (cues.is_asking(p.text) and not cues.PROPOSAL.search(p.text))]
            return " ".join(kept)
    if asked:
        return " ".join(p.text for p in pieces[:4] if not cues.is_asking(p.text) and not cues.NARRATION.match(p.text))
    return ""


def closing(before: str, most: int = 8) -> str:
    """The last paragraph of an agent's turn (a list with its lead-in is one), or its last four sentences, its
    questions and narration left out: what a bare "yes, do that" takes when no sentence of the turn proposes in
    so many words ("Alternative: entries expire at ...", "The zero-downtime approach: 1. ... 2. ...")."""
    kept = [p for p in pieces_of(before) if not cues.is_asking(p.text) and not cues.NARRATION.match(p.text)
            and not cues.has_secret(p.text)]
    last = [p.text for p in kept if p.paragraph == kept[-1].paragraph] if kept else []
    return " ".join(last[-most:] if len(last) >= 4 else [p.text for p in kept[-4:]])


def enumerated(proposal: str) -> list[str]:
    """The items of a proposal that lists two or more ("(1) ...; (2) ...", or a list): each a decision of its own."""
    parts = [p.strip(" ;,.") for p in cues.ENUMERATION.split(proposal) if p.strip(" ;,.")]
    if len(parts) >= 3:  # the lead-in, then the items
        return [p for p in parts[1:] if len(p.split()) > 3]
    return []


def proposal_signals(proposal: str) -> dict[str, float]:
    """What the scorer reads of an accepted proposal: a rule or a choice in it, or an offer to act now."""
    return {"accepted": 1.0, "proposal_rule": float(bool(cues.RULE.search(proposal) or cues.CHOICE.search(proposal))),
            "proposal_fix": float(bool(cues.FIX_PROPOSAL.search(proposal))),
            "offer": float(bool(cues.OFFER.search(proposal))),
            "proposal_words": math.log(len(informative_words(proposal)) + 1)}


LEAD_IN = re.compile(r"^(?:.{0,60}?\b(?:suggestion|proposal|plan|fix(?:es)?(?: together)?|options?)\b[^:]{0,40}:\s*|"
                     r"(?:then |so |ok[,.]? |(?:for|on|in) [^,]{1,25}, )?(?:i'?d (?:suggest|recommend)(?: that)?|i would (?:suggest|recommend)?|"
                     r"i suggest|i recommend|we could|you could|i'?d|i would|i can|i'll|should i|shall i|want me to|"
                     r"how about)\s+)", re.I)


def cleaned_proposal(proposal: str) -> str:
    """A proposal as a decision reads: lead-ins ("I'd suggest", "we could", "Should I") dropped."""
    out = []
    for sentence in split_sentences(proposal, lowercase=True):
        sentence = LEAD_IN.sub("", sentence.strip(), count=1).rstrip("?").strip()
        if sentence:
            out.append(sentence if sentence.endswith((".", "!", ")")) else sentence + ".")
    return " ".join(out)


EITHER_OR = re.compile(r",?\s+or\s+(?:else\s+)?", re.IGNORECASE)
OPTIONS_LEAD = re.compile(r"^\W*(?:(?:two|three|a few|some)\s+)?(?:options|choices|alternatives|ways)\s*:\s*", re.IGNORECASE)


def chosen_option(offered: str, choice: str) -> str:
    """Of an either-or the agent offered ("a CloudWatch alarm ..., or a dead-man's switch ..."), the option a
    choice names ("go with the dead man's switch"): the only one sharing its informative words; the text as it
    is when it offers no options or the choice names none or several."""
    options = [o.strip(" .") for o in EITHER_OR.split(OPTIONS_LEAD.sub("", offered.strip())) if o.strip(" .")]
    options = [re.sub(r"^either\s+", "", o, flags=re.IGNORECASE) for o in options]
    if len(options) < 2:
        return offered
    named = [o for o in options if informative(o) & informative(choice)]
    return f"{named[0][0].upper()}{named[0][1:]}." if len(named) == 1 else offered


def accepted_text(name: str, proposal: str, extra: list[str], said: str | None) -> str:
    """An accepted proposal as a decision: what was proposed, and what the user added."""
    taken = cleaned_proposal(proposal)
    if cues.imperative(taken) or cues.PROPOSED_VERB.match(taken):  # "freeze time with ..." reads on from "agreed to"
        text = f"{name} agreed to {taken[0].lower()}{taken[1:]}"
    else:
        text = f"{name} agreed: {taken}"
    added = " ".join(extra)
    if said and added:
        added = resolve_relative(added, said)[0]
    return f"{text} {added[0].upper() + added[1:]}" if added else text


# ---- a short answer that picks one of the options offered --------------------------------------------------

# "b", "(b) please", "option 2", "the second one", "the Scheduler one": the whole answer names one offered option.
OPTION_PICKED = re.compile(r"^\W*(?:(?:ok(?:ay)?|yes|yeah|so|then|hmm+)\W+)*(?:(?:let'?s )?(?:go with|take|do|pick) )?(?:"
                           r"(?:option\s+)?\(?(?P<mark>[a-e]|[1-5](?=\W*$|\s+(?:then|please|pls)))\)?|"
                           r"(?:the )?(?P<nth>first|second|third|former|latter|last)(?: one| option)?|"
                           r"the (?P<name>[\w.-]+(?: [\w.-]+)?) (?:one|option|approach|variant))"
                           r"(?:\W+(?:please|pls|then|it is))?(?:,\s*(?P<extra>[^.!?]{1,60}))?\W*$", re.I)
# How an agent marks the options it offers: "(a) ...", "a) ...", "Option B: ...", "1. ..." at a line's start.
OPTION_MARK = re.compile(r"(?:^|(?<=\s))(?:\((?P<p>[a-e1-5])\)|(?P<b>[a-e])\)|option (?P<o>[a-e1-5])\s*[:.)-]|"
                         r"(?<![^\n])(?P<n>[1-5])[.)])\s+", re.I | re.M)
ORDINAL = {"first": 0, "former": 0, "second": 1, "third": 2, "latter": -1, "last": -1}


def offered_options(text: str) -> list[tuple[str, str]]:
    """The options an agent's turn offers, each with its mark ("a", "2"), when it marks two or more; an either-or
    sentence ("X, or Y") when it marks none."""
    marks = list(OPTION_MARK.finditer(text))
    out = []
    for number, match in enumerate(marks):
        end = marks[number + 1].start() if number + 1 < len(marks) else len(text)
        option = text[match.end():end].split("\n")[0].strip(" ;,")  # a line's option, not the advice after it
        mark = next(g for g in match.groups() if g).lower()
        if option and not cues.is_asking(option):
            out.append((mark, option))
    if len({mark for mark, _ in out}) >= 2:
        return out
    for piece in pieces_of(text):
        options = [o.strip(" .") for o in EITHER_OR.split(piece.text) if o.strip(" .")]
        if len(options) >= 2 and not cues.is_asking(piece.text):
            return [(str(i + 1), o) for i, o in enumerate(options)]
    return []


def picked_option(answer: str, offered: str) -> tuple[str, list[str]]:
    """The option a short answer picks of those the agent's turn offered ("b" after "(a) ...; (b) ..."), and the
    others; ("", []) when the answer picks none or the turn offered none."""
    form = OPTION_PICKED.match(answer.strip())
    options = offered_options(offered) if form else []
    if not options:
        return "", []
    if form.group("mark"):
        chosen = [o for mark, o in options if mark == form.group("mark").lower()]
    elif form.group("nth"):
        at = ORDINAL[form.group("nth").lower()]
        chosen = [options[at][1]] if at < len(options) else []
    else:
        named = _bare(form.group("name"))
        chosen = [o for _, o in options if named & _bare(o)]
    if len(chosen) != 1:
        return "", []
    return chosen[0], [o for _, o in options if o != chosen[0]]


def _bare(text: str) -> set[str]:
    """Informative words with a possessive's "'s" dropped ("Scheduler's" names the Scheduler)."""
    return {w.removesuffix("'s") for w in informative(text)}
