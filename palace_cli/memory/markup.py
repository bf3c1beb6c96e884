"""A user's item-by-item answer to what the agent listed: "1 yes. 2 no, in place only. 3 yes but weekly" after a
numbered plan, or "Brownouts yes, but Andrés picks the days. Extensions: nobody gets one" after a draft whose items
open with those words. Each answer reads with the item it answers: a "yes" says nothing without it, and "weekly, not
daily" says what only beside "Add a daily CI job that runs pluto ...". The list may also be one the user pasted in
the same turn (meeting notes, then "1, 3 and 4 stand as written"). Text in, text out; work.py builds the units."""

from __future__ import annotations

import re
from dataclasses import dataclass

from palace_cli.core.text import root, split_sentences, words
from palace_cli.memory import cues
from palace_cli.memory.proposals import informative

# An item of the agent's list: "1. ...", "2) ...", "(3) ...", "a. ..." at a line's start; its lines run on until the
# next.
LISTED = re.compile(r"^[ \t]*\(?(?P<mark>\d{1,2}|[a-h])[.):][ \t]+(?P<text>\S.*)$", re.M)
# The status meeting notes put after an item ("... named `id`. AGREED"): the user's answer says it again.
STATUS = re.compile(r"[\s.]+(?:AGREED|OPEN|PARKED|DONE|TODO|DECIDED|APPROVED|REJECTED|DROPPED)\W*$")
# The user's answer to item n, or to items n, m and k together: "1 yes", "2: moka", "3. Pass through, yes", "(4)
# later", "1, 3 and 4 stand as written", at the start of the turn, of a line or after a sentence's end.
MARKED = re.compile(r"(?:^|(?<=\n)|(?<=[.!;]\s))[ \t]*\(?(?:(?P<marks>\d{1,2}(?:\s*(?:,\s*(?:and\s+)?|\s+and\s+|\s*&\s*)"
                    r"\d{1,2})*)(?:[.:)]|(?=\s+[a-z]))|(?P<letter>[a-h])[.:)])[ \t]*(?=\S)")  # "b: yes", not "a yes"
# The answer keyed by the item's own first word: "Brownouts yes, but ...", "Headers: I don't care ...".
# After a lead-in that opens comments on a draft ("Comments: sunset on 30 September, not 1 September") the first word is
# the key whatever follows it.
KEYED = re.compile(r"^\W*(?:(?:comments?|feedback|notes?|remarks?):\s*(?P<led>[a-z][\w-]*)\s+(?=\S)|(?P<key>[a-z][\w-]*)(?::\s*|"
                   r"\s+(?=(?:yes|yeah|yep|ok|okay|fine|agreed|no)\b)))(?P<rest>\S.*)$", re.I)
YES = re.compile(r"^\W*(?:yes|yeah|yep|yup|ok|okay|fine|agreed|good|sure|\+1|lgtm|approved|stands?(?: as (?:written|is))?|"
                 r"(?:is|are) (?:fine|ok|okay|good|agreed|approved))\b[\s,.:;!—–-]*", re.I)
YES_AFTER = re.compile(r",?\s*(?:yes|yeah|yep|agreed|fine|ok|okay)\W*$", re.I)  # "Pass through, yes."
NO = re.compile(r"^\W*(?:no|nope|nah|(?:drop|skip)(?: it)?(?=\W*$|[,.;])|(?:is|are) (?:dead|out|dropped|rejected|gone)|dead|out)\b"
                r"[\s,.:;!—–-]*", re.I)
LATER = re.compile(r"^\W*(?:later|not yet|not now|parked|park it|separate (?:change|pr|ticket))\b|\b(?:still open|is open|"
                   r"are open|never finished|come back to|not decided|undecided|tbd)\b", re.I)
FILLER = re.compile(r"^\W*(?:obv(?:iously)?|of course|sure|please|pls|thanks|good|great|perfect)?\W*$", re.I)


@dataclass(frozen=True)
class Answer:
    """The user's answer to one listed item: the item's words, how it was answered ("yes", "no", "other"), what the
    user said beyond the verdict, and where in the user's text the answer stood."""

    item: str
    verdict: str
    said: str
    span: tuple[int, int]


def listed_items(offered: str) -> dict[str, str]:
    """The items of a numbered list in the agent's turn, by number (two or more, numbered from 1 in order)."""
    matches = list(LISTED.finditer(offered))
    items = {}
    for number, match in enumerate(matches):
        end = matches[number + 1].start() if number + 1 < len(matches) else len(offered)
        lines = offered[match.start("text"):end].split("\n")
        kept = [lines[0]] + [line for line in lines[1:] if line.startswith((" ", "\t")) and line.strip()]
        items[match.group("mark")] = STATUS.sub("", " ".join(" ".join(kept).split())).rstrip(" ;,")
    marks = list(items)
    first = "1" if marks and marks[0].isdigit() else "a"
    expected = [str(n) for n in range(1, len(marks) + 1)] if first == "1" else [chr(97 + n) for n in range(len(marks))]
    return items if len(items) >= 2 and marks == expected else {}


def marked_answers(answer: str, offered: str) -> list[Answer]:
    """The user's answers to the agent's listed items, by number or by the item's first word (see the module); []
    when fewer than two items are answered, so that one number in a sentence is never read as an answer."""
    items = listed_items(offered)
    if not items:
        return []
    out = _numbered(answer, items) or _keyed(answer, items)
    return out if len(out) >= 2 else []


def _numbered(answer: str, items: dict[str, str]) -> list[Answer]:
    marks = [(m, re.findall(r"\d+", m.group("marks")) if m.group("marks") else [m.group("letter")])
             for m in MARKED.finditer(answer)]
    marks = [(m, numbers) for m, numbers in marks if all(n in items for n in numbers)]
    numbers = [int(n) if n.isdigit() else ord(n) for _, found in marks for n in found]
    grouped = any(len(found) > 1 for _, found in marks)  # "1, 3 and 4 stand": an answer, in whatever order
    if len(numbers) < 2 or len(set(numbers)) < len(numbers) or not grouped and numbers != sorted(numbers):
        return []
    out = []
    for number, (match, found) in enumerate(marks):
        end = marks[number + 1][0].start() if number + 1 < len(marks) else _sentence_end(answer, match.end())
        said = answer[match.end():end].strip()
        out += [_answer(items[n], said, (match.start(), end)) for n in found]
    return out


def answers_in(said: str, written: str, offered: str) -> tuple[list[Answer], str]:
    """The answers a user's turn gives to the agent's list, or else to a numbered list the user pasted in the same
    turn (meeting notes, then "1, 3 and 4 stand as written"), read only after the list; with what the turn says
    beside them ("" when there are no answers). `said` is what the turn said in words, `written` the turn as written
    (a pasted list may be in a code block)."""
    answers = marked_answers(said, offered) if offered else []
    if answers:
        return answers, unmarked(said, answers)
    own = list(LISTED.finditer(written))
    if len(own) < 2:
        return [], ""
    tail = cues.said_text(written[written.find("\n", own[-1].end()) + 1 if "\n" in written[own[-1].end():] else
                                  len(written):].lstrip("`\n"))
    answers = marked_answers(tail, written[:own[-1].end()])
    if not answers:
        return [], ""
    head = cues.said_text(written[:own[0].start()])
    return answers, " ".join(f"{head} {unmarked(tail, answers)}".split())


def _keyed(answer: str, items: dict[str, str]) -> list[Answer]:
    heads, named = {}, {}
    for item in items.values():
        first = root(re.split(r"[\s:,]+", item.strip("`*"), maxsplit=1)[0].lower())
        heads[first] = None if first in heads else item  # a first word two items share names neither
        for word in {root(w) for w in words(item)[:8] if len(w) >= 4 and w[0].isalpha()}:
            named[word] = None if word in named else item
    out, at = [], 0
    for sentence in split_sentences(answer):
        start = answer.find(sentence, at)
        at = start + len(sentence) if start >= 0 else at
        form = KEYED.match(sentence)
        key = root((form.group("key") or form.group("led")).lower()) if form else ""
        item = heads.get(key) or (named.get(key) if key not in heads else None)  # "Headers:", for "... header"
        if item and start >= 0:
            rest = sentence[form.start("led"):] if form.group("led") else form.group("rest")
            out.append(_answer(item, rest.strip(), (start, start + len(sentence))))
    return out


def _answer(item: str, said: str, span: tuple[int, int]) -> Answer:
    if LATER.search(said):
        return Answer(item, "later", said, span)
    yes, no = YES.match(said), NO.match(said)
    if yes or YES_AFTER.search(said) and len(informative(YES_AFTER.sub("", said)) - informative(item)) < 2:
        rest = said[yes.end():] if yes else ""
        return Answer(item, "yes", "" if FILLER.match(rest) else rest.strip(" ."), span)
    if no:
        return Answer(item, "no", said[no.end():].strip(" ."), span)
    return Answer(item, "other", said.strip(" ."), span)


def _sentence_end(text: str, start: int) -> int:
    """Where the sentence that begins at `start` ends (after its stop), or the end of the text."""
    match = re.search(r"[.!?](?=\s|$)", text[start:])
    return start + match.end() if match else len(text)


def unmarked(answer: str, answers: list[Answer]) -> str:
    """What the user said beside the answers to the items (a rule said after them stays to be read)."""
    kept, at = [], 0
    for found in sorted(answers, key=lambda a: a.span):
        kept.append(answer[at:found.span[0]])
        at = found.span[1]
    kept.append(answer[at:])
    return " ".join(" ".join(kept).split())


def stated(answer: Answer, name: str) -> str:
    """An answer as a memory's sentence: a yes in the item's words (and what the user added), a no or another answer
    in the user's words beside the item it answers; "" for an item put off ("4 later") or turned down with nothing
    in its place."""
    item = answer.item.rstrip(" .")
    if answer.verdict == "yes":
        added = f" {answer.said[0].upper()}{answer.said[1:]}" if answer.said else ""
        return f"{name} agreed: {item}.{added}"
    least = 3 if answer.verdict == "no" else 2  # "5 is dead, Bram dropped it": who dropped it is no memory
    if answer.verdict == "later" or cues.is_asking(answer.said) or len(informative(answer.said)) < least \
            or cues.HEDGE.search(answer.said):
        return ""
    said = f"{answer.said[0].upper()}{answer.said[1:]}"
    how = "instead of" if answer.verdict == "no" else "on"
    return f"{said} ({how}: {item})"
