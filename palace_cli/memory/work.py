"""Memories of work with a coding agent: decisions, conventions, facts, solutions and milestones from a session
between a user and an assistant. Pure: a Session in, units out (no palace, no model).

Who says what decides what can be a memory:

- the user's own sentences: a standing rule (convention), a settled choice (decision), something that holds
  about the project or the people (fact), a report that something shipped (milestone), a note that a fix is
  worth keeping (solution); never a question, a one-off instruction, a hypothetical or a pleasantry;
- the user taking what the agent proposed ("yes do that"): a decision, whose words are the proposal's;
- the agent's report, after a fix was checked, of what was wrong and what fixed it (solution), and of what it
  saw shipped (milestone); never its narration, its reading of code, a thinking block or a tool's output.

Each unit carries the signals scorer.py weighs; distill keeps those scored at or above the threshold.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePath

from palace_cli.conversations.model import Session, Turn
from palace_cli.core.dates import WEEKDAYS, resolve_relative
from palace_cli.memory import cues
from palace_cli.memory.markup import answers_in, stated
from palace_cli.memory.patterns import rewrite
from palace_cli.memory.proposals import (LEAD_IN, OPTION_PICKED, Piece, accepted_text, accepts, chosen_option,
                                         cleaned_proposal, empty, enumerated, informative, opens_accepting,
                                         picked_option, pieces_of, proposal_before, proposal_signals, refers_back,
                                         takes_a_choice)
from palace_cli.memory.userkinds import announced_apart, facts_apart, groups_of, kind_of, rule_apart
from palace_cli.memory.worksignals import KINDS, SIGNALS, signals_of

__all__ = ["KINDS", "SIGNALS", "TYPE_OF", "Unit", "work_units", "project_of", "pieces_of", "clear_caches"]

# The note format's type for each kind (core/notes.py TYPES); the kind itself is written as `kind`.
TYPE_OF = {"decision": "decision", "convention": "preference", "fact": "fact", "solution": "procedure",
           "milestone": "event"}
MAX_WORDS = 90  # a memory is a few sentences: an assembled solution is cut here
WINDOW = 10  # how many turns back a solution's cause and fix are looked for
IGNORE = re.compile(r"^\W*(?:ignore|disregard|never mind|skip over)\b", re.I)
YES_OR_NO = re.compile(r"^\W*(?:yes|yeah|yep|yup|no|nope)\b", re.I)
CONFIRMS = re.compile(r"^\W*(?:(?:yes|yeah|yep)\W+)?(?:that'?s (?:right|correct)|correct|exactly)\b", re.I)
CONDITION = re.compile(r"^\W*(?:but|only|except|as long as|provided)\b", re.I)


@dataclass
class Unit:
    """A candidate memory of a work session: its kind, the turn it cites, what it says, and its signals."""

    kind: str
    turn: Turn
    about: str
    text: str
    said: str  # the sentences as said that the signals read
    signals: dict[str, float] = field(default_factory=dict)
    dates: list = field(default_factory=list)


# Folder names that say what part of a project a folder is, not which project: its parent names the project.
PART_OF_A_PROJECT = frozenset("platform app apps backend frontend api server client service services web site "
                              "infra infrastructure repo monorepo core main".split())
NO_PROJECT = frozenset(("~", ".", "src", "code", "work", "home", "dev", "repos", "projects", "users"))


def project_of(session: Session) -> str:
    """The project a session worked on: the last folder of its `cwd`, when the source records one; its parent when
    the last names a part of a project ("parcelpoint/platform"), unless the parent is someone's home folder."""
    cwd = str(session.meta.get("cwd") or "").rstrip("/\\")
    parts = PurePath(cwd.replace("\\", "/")).parts if cwd else ()
    name = parts[-1] if parts else ""
    if name.lower() in PART_OF_A_PROJECT and len(parts) >= 3 and parts[-2].lower() not in NO_PROJECT \
            and parts[-3].lower() not in ("home", "users"):
        name = parts[-2]
    return name if name and name.lower() not in NO_PROJECT else ""


def work_units(session: Session, user: str = "") -> list[Unit]:
    """Every candidate memory of a user-assistant session (see the module); `user` names the user."""
    name = user or "the user"
    project = project_of(session)
    turns = [t for t in session.turns if t.role in ("user", "assistant")]
    units: list[Unit] = []
    last_solution = -1
    first_user = next((i for i, t in enumerate(turns) if t.role == "user"), -1)
    for index, turn in enumerate(turns):
        said = session.time_of(turn)
        if turn.role == "user":
            proposal = proposal_before(turns, index)
            recent = [cues.said_text(t.text) for t in turns[max(0, index - 6):index] if t.role == "assistant"]
            asked = index > 0 and turns[index - 1].role == "assistant" and any(
                cues.is_asking(p.text) for p in pieces_of(turns[index - 1].text)[-2:])
            offered = cues.said_text(turns[index - 1].text) if index and turns[index - 1].role == "assistant" else ""
            found = _user_units(turn, proposal, recent, name, project, said, index == first_user, asked,
                                _question_before(turns, index, name), offered)
        else:
            earlier = next((t.text for t in reversed(turns[max(0, index - 3):index]) if t.role == "assistant"), "")
            found = _agent_units(turn, name, project, said, earlier)
        for unit in found:
            if unit.kind == "solution":
                unit.text = _solution_text(turns, index, unit, max(last_solution + 1, index - WINDOW), project)
                last_solution = index
        units += [u for u in found if u.text]
    return units


# ---- the user's turns ----------------------------------------------------------------------------------


def _user_units(turn: Turn, proposal: str, recent: list[str], name: str, project: str, said: str | None,
                first: bool, asked: bool = False, question: str = "", offered: str = "") -> list[Unit]:
    pieces = [p for p in pieces_of(turn.text) if not cues.has_secret(p.text)]
    if not pieces:
        return []
    context = {"item": 0.0, "first_turn": float(first), "after_proposal": float(bool(proposal)), "accepted": 0.0,
               "answers": 1.0}
    answers, rest = answers_in(cues.said_text(turn.text), turn.text, offered)
    marked = _marked_units(turn, answers, name, project, said, context)
    if answers:  # "1 yes. 2 no, in place only. 3 yes but weekly": each in the words of the item it answers
        pieces = [p for p in pieces_of(rest) if not cues.has_secret(p.text)]
        proposal = ""  # taken item by item
        if not pieces:
            return marked
    picked = _picked_unit(turn, pieces, offered, name, project, said, context) if offered and not answers else []
    if picked:  # "b", "the Scheduler one, same hours. Add it.": the option taken; a bare "add it" says no more
        pieces = [p for p in pieces[1:] if not (accepts(p.text) or cues.AT_HAND.match(cues.opened(p.text))
                                                 and len(p.text.split()) <= 4)]
        if not pieces:
            return picked
    own, used = _own_answers(turn, pieces, name, project, said, context)
    own = marked + picked + own
    pieces = [p for i, p in enumerate(pieces) if i not in used]
    announced = [part for piece in pieces for part in announced_apart(piece)]
    bodies = {p.text for p in announced if p not in pieces}
    pieces = [part for piece in announced for split in rule_apart(piece) for part in facts_apart(split)]
    if not pieces:
        return own
    return own + _said_units(turn, pieces, proposal, recent, name, project, said, first, asked, question,
                             frozenset(bodies))


def _said_units(turn: Turn, pieces, proposal: str, recent: list[str], name: str, project: str, said: str | None,
                first: bool, asked: bool, question: str, bodies: frozenset = frozenset()) -> list[Unit]:
    kinds = _label_lists([kind_of(p.text) for p in pieces], pieces)
    kinds = [("convention" if cues.RULE.search(p.text) else "decision") if p.text in bodies and k in ("", "fact")
             else k for p, k in zip(pieces, kinds)]  # "two things we settled, write them down: X"
    if question:  # "Keep the old order, or match the new UI?" - "match the UI": the option picked is a choice
        kinds = ["decision" if not k and not cues.is_asking(p.text) and _picks(cues.opened(p.text), question) else k
                 for p, k in zip(pieces, kinds)]
    if any(cues.ASKS_WHY.match(cues.opened(p.text)) for p in pieces):  # a symptom reported to be looked into
        kinds = ["" if k == "fact" else k for k in kinds]
    answer = _list_answer(turn, pieces, proposal, question, name, project, said, first)
    if answer:
        return answer
    accepting = bool(proposal) and opens_accepting(pieces)
    if accepting:  # "ok, do like this. but the backfill only at night": a condition on what was taken
        kinds = ["decision" if k == "fact" and (CONDITION.match(p.text) or len(
            informative(p.text) & informative(proposal)) >= 2) else k for p, k in zip(pieces, kinds)]
    context = {"item": 0.0, "first_turn": float(first), "after_proposal": float(bool(proposal)), "accepted": 0.0,
               "answers": float(asked)}
    groups = [("decision" if kind == "convention" and any(cues.SETTLED.search(p.text) for p in members[1:]) else kind,
               members) for kind, members in groups_of(pieces, kinds)]  # "... we only upgrade every year. 5.2 it is."
    units = []
    others = [k for p, k in zip(pieces[1:], kinds[1:]) if not empty(cues.opened(p.text))]
    if proposal and (accepts(pieces[0].text) or accepting) and not any(p.item for p in pieces) and (
            not any(cues.is_asking(p.text) for p in pieces)
            or any(cues.TAKE.search(p.text) and not cues.is_asking(p.text) for p in pieces)) and not any(
            k in ("milestone", "fact", "solution") for k in others) and takes_a_choice(pieces, proposal):
        units += _accepted_units(turn, pieces, groups, proposal, name, project, said, context, recent)
        groups = [g for g in groups if g[0] not in ("decision", "convention", "")]
    for kind, members in groups:
        unit = _group_unit(kind, members, turn, proposal, recent, name, project, said, context, accepting,
                           question) if kind else None
        if unit is not None:
            units.append(unit)
    if recent and CONFIRMS.match(pieces[0].text) and not any(u.kind == "fact" for u in units):
        units += _confirmed_unit(turn, pieces[1:], kinds[1:], recent[-1], name, project, context)
    return units


def _picked_unit(turn: Turn, pieces, offered: str, name: str, project: str, said: str | None,
                 context: dict) -> list[Unit]:
    """A short answer that picks one of the options the agent's turn just offered ("b" after "(a) put the scaler
    back; (b) switch to bf16", "the second one", "the Scheduler one, same hours"): a decision in the option's words,
    and the one it was chosen over when there were two."""
    chosen, others = picked_option(pieces[0].text, offered)
    if not chosen or cues.has_secret(chosen):
        return []
    extra = OPTION_PICKED.match(pieces[0].text.strip()).group("extra")
    text = f"{name} chose: {cleaned_proposal(chosen).rstrip('.')}"
    if extra:
        text += f", {extra.strip(' .')}"
    if len(others) == 1:
        text += f" (over: {cleaned_proposal(others[0]).rstrip('.')})"
    resolved, dates = resolve_relative(text, said) if said else (text, [])
    unit = _unit("decision", turn, project or name, _with_project(resolved, project, "decision", said),
                 f"{pieces[0].text} {chosen}", {**context, **proposal_signals(chosen), "accepted": 1.0})
    unit.dates = dates
    return [unit]


def _marked_units(turn: Turn, answers, name: str, project: str, said: str | None, context: dict) -> list[Unit]:
    """The user's answers to the agent's listed items (memory/markup.py), each a decision in the item's words, a
    convention when a rule word is in what the user said."""
    units = []
    for answer in answers:
        text = stated(answer, name)
        if not text or cues.has_secret(text) or cues.ONE_OFF.search(answer.said):
            continue
        resolved, dates = resolve_relative(rewrite(text, name), said) if said else (rewrite(text, name), [])
        kind = "convention" if cues.RULE.search(answer.said) or answer.verdict == "yes" and cues.RULE.search(
            answer.item) else "decision"  # a rule taken is a rule
        unit = _unit(kind, turn, project or name, _with_project(resolved, project, kind, said),
                     f"{answer.said} {answer.item}", {**context, **proposal_signals(answer.item), "accepted": 0.0,
                                                       "item": 1.0})  # an item answered, not a "yes, do that"
        unit.dates = dates
        units.append(unit)
    return units


# "can we just X?", "shall we X?", "X, right?": a question the user puts as a proposal, then answers.
OWN_PROPOSAL = re.compile(r"^\W*(?:(?:and|so|then|ok|okay|also)\W+)*(?:(?:can|could|shall|should) we(?: just| also)?|"
                          r"why not|why don'?t we|how about|what about|should(?= (?:the|this|that|these|those|our)\b))\s+"
                          r"(?P<what>.+?)(?:\s+then)?\s*\?\s*$|"
                          r"^\W*(?:(?:and|so|then|also)\W+)*(?P<claim>.+?),? right\s*\?\s*$", re.I)
# The yes that settles it, and what a yes says beyond taking the question ("let's do that" says nothing more).
ANSWER_YES = re.compile(r"^\W*(?:yes|yeah|yep|yup)\b[\s,.:;!—–-]*", re.I)
ANSWER_NO = re.compile(r"^\W*(?:no|nope|nah)\b[\s,.:;!—–-]*", re.I)
INLINE_YES = re.compile(r"\s+[—–-]+\s*(?:yes|yeah|yep)\b[\s,.:;!]*(?P<rest>.*)$", re.I)
NOW = re.compile(r"\bnow\b", re.I)
JUST_TAKES = re.compile(r"^\W*(?:let'?s do (?:that|it|this)|that'?s what we'?ll do|we'?ll do (?:that|it)|do (?:that|it)|"
                        r"go ahead|sounds good)\W*$", re.I)


def _own_answers(turn: Turn, pieces, name: str, project: str, said: str | None, context: dict) -> tuple[list, set]:
    """A question the user puts as a proposal and answers in the same breath ("Can we just X? Yes, let's do that",
    "Shall we buy one? A one-year plan - yes, that's what we'll do", "Should X run in CI? No, too slow. Y on every
    PR"): a decision (a convention when a rule word is in it), kept as said outright; the pieces it used."""
    units, used = [], set()
    for i, asked in enumerate(pieces[:-1]):
        form = OWN_PROPOSAL.match(asked.text)
        answer = pieces[i + 1]
        if not form or i in used or answer.paragraph != asked.paragraph or cues.is_asking(answer.text) or \
                NOW.search(asked.text) or cues.WANTED.search(answer.text):
            continue  # "Could we run it now? Yes please": a go-ahead for the task at hand
        yes, no, inline = ANSWER_YES.match(answer.text), ANSWER_NO.match(answer.text), INLINE_YES.search(answer.text)
        if not (yes or no or inline):
            continue
        rest = answer.text[(yes or no).end():].strip() if yes or no else answer.text[:inline.start()].strip()
        if inline and JUST_TAKES.match(inline.group("rest") or "") is None and inline.group("rest").strip(" ."):
            rest = f"{rest}; {inline.group('rest').strip()}"
        rest = "" if JUST_TAKES.match(rest) else rest
        taken = [i, i + 1]
        follow = pieces[i + 2] if i + 2 < len(pieces) else None
        if follow is not None and follow.paragraph == answer.paragraph and not cues.is_asking(follow.text) and not (
                cues.REQUEST.match(cues.opened(follow.text)) or cues.HYPOTHETICAL.search(follow.text)
                or cues.FIRST_SINGULAR.match(follow.text) or empty(cues.opened(follow.text))
                or OWN_PROPOSAL.match(follow.text)) and (no or not rest or CONDITION.match(follow.text)):
            rest = f"{rest} {follow.text}".strip()  # "No, too slow later on. -count=3 with -race, on every PR."
            taken.append(i + 2)
        what = (form.group("what") or form.group("claim")).strip(" ,")
        if no:
            if not rest or len(informative(rest)) < 2:
                continue  # a question turned down and nothing put in its place: no memory
            core = f'{rest} (asked by {name}: "{cues.opened(asked.text)}")'
        else:
            core = f"{what}: {rest}" if rest else what
        text_said = f"{asked.text} {' '.join(pieces[j].text for j in taken[1:])}"
        judged = text_said
        if no:  # "No, too slow later on. -count=3 on every PR": the no's reason, then what is done instead
            reason, _, instead = rest.partition(". ")
            judged = f"{asked.text} {instead}" if instead else text_said
        if cues.ONE_OFF.search(judged) or cues.HEDGE.search(judged) or cues.HYPOTHETICAL.search(judged):
            continue
        kind = "convention" if cues.RULE.search(core) else "decision"
        resolved, dates = resolve_relative(core, said) if said else (core, [])
        text = rewrite(resolved, name) if name != "the user" else resolved
        unit = _unit(kind, turn, project or name, _with_project(text, project, kind, said), text_said,
                     {**context, "strong": 1.0})
        unit.dates = dates
        units.append(unit)
        used.update(taken)
    return units, used


def _list_answer(turn: Turn, pieces, proposal: str, question: str, name: str, project: str, said: str | None,
                 first: bool) -> list[Unit]:
    """A bare list the user answers the agent with ("- yes to X for server state - Y for the client bits - one
    slice at a time / let's go with that"): one answer, so one memory of the whole list (a convention when it
    says how things are done from now on); a list under its own heading ("make it a rule:") is items apart."""
    items = [p for p in pieces if p.item]
    if len(items) < 2 or not (proposal or question) or any(cues.is_asking(p.text) for p in pieces) or any(
            len(informative(p.text)) >= 3 or p.text.rstrip().endswith(":") and not empty(cues.opened(p.text))
            for p in pieces if not p.item):
        return []
    said_items = [cues.opened(p.text).rstrip(" .;") for p in items]
    kind = "convention" if any(cues.RULE.search(t) for t in said_items) else "decision"
    text = "; ".join(said_items) + (f" ({question})" if question else "")
    resolved = resolve_relative(text, said)[0] if said else text
    context = {"item": 1.0, "first_turn": float(first), "after_proposal": float(bool(proposal)), "accepted": 0.0,
               "answers": float(bool(question))}
    return [_unit(kind, turn, project or name, _with_project(resolved, project, kind, said), " ".join(said_items),
                  context)]


def _confirmed_unit(turn: Turn, pieces, kinds, before: str, name: str, project: str, context: dict) -> list[Unit]:
    """The agent's reading the user confirms and adds to ("Yes, that's right ... 600 requests per minute per
    token, burst 100"): a fact, in the agent's sentence with the user's words; nothing for a bare "correct"."""
    added = [cues.opened(p.text) for p, k in zip(pieces, kinds) if k in ("", "fact") and not cues.is_asking(p.text)
             and not cues.REQUEST.match(cues.opened(p.text)) and len(informative(p.text)) >= 2]
    read = _related(" ".join(added), [before], least=1) if added else ""
    if not read:
        return []
    text = _with_project(f"{' '.join(added)} ({read})", project, "fact", None)
    return [_unit("fact", turn, project or name, text, " ".join(added), {**context, "answers": 1.0})]


def _label_lists(kinds: list[str], pieces) -> list[str]:
    """The kinds of a list's items from the line before it ("make it a rule:", "Facts you need:")."""
    for i, piece in enumerate(pieces):
        if piece.text.rstrip().endswith(":") and not piece.item:
            ahead = "convention" if kinds[i] == "convention" or cues.RULES_AHEAD.search(piece.text) else \
                "fact" if cues.FACTS_AHEAD.search(piece.text) else ""
            for j in range(i + 1, len(pieces)) if ahead else ():
                if not pieces[j].item:
                    break
                if kinds[j] in ("", "decision", "fact") and not (ahead == "fact" and kinds[j]) and not (
                        ahead == "fact" and cues.WANTED.search(pieces[j].text)):  # "i want a plan": the task
                    kinds[j] = ahead
            kinds[i] = ""
    return kinds


def _accepted_units(turn: Turn, pieces, groups, proposal: str, name: str, project: str, said: str | None,
                    context: dict, recent: list[str] = ()) -> list[Unit]:
    """An accepted proposal: the decision (or rule) in the proposal's own words, one per enumerated item, with
    what the user added (and the earlier option it names: "and the composite index")."""
    taken = [p for kind, members in groups if kind in ("decision", "convention", "") for p in members
             if not cues.is_asking(p.text) and not empty(cues.opened(p.text))
             and not (kind == "" and cues.REQUEST.match(cues.opened(p.text)))]
    extra = [cues.opened(p.text) for p in taken if not accepts(p.text) and not cues.HYPOTHETICAL.search(p.text)
             and cues.OPENERS.sub("", p.text).strip(" .!,;")]  # "Anyway.": nothing added
    named = _related(" ".join(extra), list(recent)) if extra and recent else ""
    if named and named not in proposal:
        extra.append(f"({named})")
    kind = "convention" if cues.RULE.search(" ".join(extra)) else "decision"
    items = enumerated(proposal) if cues.EACH.search(turn.text) else []
    units = []
    for number, part in enumerate(items or [proposal]):
        text = accepted_text(name, part, extra if number == 0 else [], said)
        units.append(_unit(kind, turn, project or name, _with_project(text, project, kind, said),
                           " ".join([*(p.text for p in pieces), part]), {**context, **proposal_signals(part)}))
    return units


def _group_unit(kind: str, members, turn: Turn, proposal: str, recent: list[str], name: str, project: str,
                said: str | None, context: dict, accepting: bool = False, question: str = "") -> Unit | None:
    """One group of pieces of a kind as a memory (None for a choice made only for the task at hand); in a turn
    that opens by taking the agent's proposal, a choice reads with the proposal it takes."""
    words = " ".join(p.text for p in members)
    core = " ".join(cues.opened(p.text) for p in members)
    if kind in ("decision", "convention") and (not (_standing(core, proposal) or _picks(core, question)) or any(
            cues.SAID_AGAIN.search(p.text) for p in members) or cues.NAMES_A_RULE.search(question)):
        return None  # for the task at hand, or a rule said again ("... Same rule as I said."): made when first said
    backing = ""
    if kind in ("decision", "convention") and (proposal or recent):
        backing = _related(core, recent)
        if proposal and refers_back(core):  # the proposal it takes, and the earlier option it names
            taken = cleaned_proposal(proposal)
            backing = f"{taken} {backing}" if backing and backing not in proposal else taken
        if not backing and accepting and kind == "decision":
            backing = cleaned_proposal(proposal)  # "yep go with the protocol": the protocol as proposed
    if kind in ("decision", "convention") and not backing and cues.AT_HAND.match(core):
        before = _said_before(turn, members[0])  # "there's a cache node. turn it on for CI": what "it" is
        if before and (cues.HYPOTHETICAL.search(before) or cues.HEDGE.search(before)):
            return None  # "if we ever go multi-region we'd need X. put that under consequences": about a maybe
        core = f"{before} {core}" if before else core
    backing = chosen_option(backing, core) if backing else ""
    core = f"{core} ({backing})" if backing else core
    about = name if kind in ("decision", "convention") and cues.FIRST_SINGULAR.search(words) \
        and not cues.FIRST_PLURAL.search(words) else project or name
    resolved, dates = resolve_relative(core, said) if said else (core, [])
    text = rewrite(resolved, name) if name != "the user" else resolved
    if question and (YES_OR_NO.match(turn.text) or _picks(core, question) or core == " ".join(
            cues.opened(p.text) for p in members) and len(
            informative(core) & informative(question.partition(": ")[2])) < 2):
        text = f"{text.rstrip()} ({question})"  # "keep it on", "yes, all of them" say what only with what was asked
    unit = _unit(kind, turn, about, _with_project(text, project if about != name else "", kind, said), words,
                 {**context, "item": float(members[0].item), "backed": float(core != " ".join(
                     cues.opened(p.text) for p in members))})
    unit.dates = dates
    return unit


def _said_before(turn: Turn, first: Piece) -> str:
    """The sentence of the same paragraph just before `first`, which a pronoun in it points back to; "" when
    there is none or it asks."""
    pieces = pieces_of(turn.text)
    at = next((i for i, p in enumerate(pieces) if first.text in p.text), 0)
    before = pieces[at - 1] if at else None
    if before is None or before.paragraph != pieces[at].paragraph or cues.is_asking(before.text) \
            or empty(cues.opened(before.text)) or cues.has_secret(before.text):
        return ""
    return cues.opened(before.text)


def _standing(core: str, proposal: str) -> bool:
    """Whether a user's choice or rule outlives the task at hand: never when said for now or for this once, or
    hedged; an instruction ("fix the template", "tag it and push") only with a scope, a reason, a settled choice,
    or the proposal it takes."""
    if proposal and (refers_back(core) or _related(core, [proposal])):
        return not cues.ONE_OFF.search(core)
    strong = cues.STRONG.search(core)
    if not strong and (cues.ONE_OFF.search(core) or cues.HEDGE.search(core)
                       or len(core.split()) < 4 and not cues.SETTLED.search(core)):
        return False
    first = cues.opened(core)
    if IGNORE.match(first):  # "ignore Marek's line, he was tired": about what is in front of the agent now
        return bool(cues.RULE.search(core))
    if cues.imperative(first) or cues.REQUEST.match(first):
        reason = cues.REASON.search(cues.PURPOSE.pattern.sub(" ", core.lower()))  # a purpose is this time's
        return bool(cues.SCOPE.search(core) or reason or cues.CHOICE.search(core)
                    or cues.SETTLED.search(core) or cues.RULE.search(core))
    return True


def _picks(core: str, question: str) -> bool:
    """Whether a short answer picks one of the options the agent's either-or question offered ("Keep the old column
    order, or match the new UI?" - "match the UI"): a choice, unless said for now."""
    asked = question.partition(": ")[2]
    return question.startswith("asked by the assistant") and bool(re.search(r"\bor\b", asked)) and bool(
        informative(core) & informative(asked)) and not cues.ONE_OFF.search(core) and not cues.HEDGE.search(core)


def _question_before(turns: list[Turn], index: int, name: str) -> str:
    """The question a user's turn answers, quoted with who asked it: the agent's, when its turn just before ends
    with one (not an offer to act: "Want me to ...?"); else the user's own, two turns back, that the agent answered
    without asking back ("should we turn X off?" ... "keep it on then"); "" when there is none."""
    if not index or turns[index - 1].role != "assistant":
        return ""
    last = [p.text for p in pieces_of(turns[index - 1].text)[-2:] if cues.is_asking(p.text)]
    if last:
        asked = last[-1]
        return "" if cues.OFFER_TO_ACT.search(asked) or cues.ASKS_TO_ACT.match(asked) or cues.has_secret(asked) \
            else f'asked by the assistant: "{asked}"'
    if index < 2 or turns[index - 2].role != "user":
        return ""
    own = [p.text for p in pieces_of(turns[index - 2].text) if (cues.is_asking(p.text) or cues.QUESTION_LEAD.match(
        cues.opened(p.text).rstrip("."))) and not cues.ASKS_TO_ACT.match(p.text) and not cues.has_secret(p.text)
        and len(informative(p.text)) >= 2]  # asked without a question mark: "when does it start again."
    return f'asked by {name}: "{cues.opened(own[-1])}"' if own else ""


def _related(sentence: str, recent: list[str], least: int = 2) -> str:
    """The sentence of the agent's recent turns that a short choice or rule builds on (the one sharing most of
    its words, `least` at least): "same-transaction then" names the option it takes."""
    words = informative(sentence)
    best, shared = "", least - 1
    for text in recent:
        for piece in pieces_of(text):
            overlap = len(words & informative(piece.text))
            if overlap <= shared or cues.is_asking(piece.text) or cues.NARRATION.match(piece.text) \
                    or cues.has_secret(piece.text):
                continue
            best, shared = piece.text, overlap
    return LEAD_IN.sub("", best, count=1)


DAY = r"(mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?"
DAY_RANGE = re.compile(rf"\b{DAY}\s*(?:-|–|to|through)\s*{DAY}(?![\w-])", re.I)
PROD = re.compile(r"(?<![\w-])prod(?![\w-])", re.I)


def _spelled_out(text: str) -> str:
    """Shorthand a note writes out: a range of days ("mon-thu": "Monday to Thursday"), "prod" ("production")."""
    def days(match: re.Match) -> str:
        first, last = (next(d for d in WEEKDAYS if d.startswith(g.lower())) for g in match.groups())
        return f"{first.title()} to {last.title()}"
    return PROD.sub("production", DAY_RANGE.sub(days, text))


def _with_project(text: str, project: str, kind: str, said: str | None) -> str:
    """The memory's text, naming the project it is about when the sentence does not, and dated for a milestone."""
    text = _spelled_out(text.strip())
    if text and text[0].islower():
        text = text[0].upper() + text[1:]
    if text and text[-1] not in ".!?)":
        text += "."
    if project and project.lower() not in text.lower():
        text = f"{project}: {text}"
    if kind == "milestone" and said:
        text = f"{text[:-1] if text.endswith('.') else text} ({said[:10]})."
    return text


def _unit(kind: str, turn: Turn, about: str, text: str, words: str, extra: dict) -> Unit:
    unit = Unit(kind, turn, about, text, words)
    unit.signals = signals_of(unit, extra)
    return unit


# ---- the agent's turns ---------------------------------------------------------------------------------


def _agent_units(turn: Turn, name: str, project: str, said: str | None, earlier: str = "") -> list[Unit]:
    """The agent's report of what shipped (milestone) and of a fix it checked (solution): the fix said in this turn,
    or in its turn just before when this one opens with the check ("Build and image jobs pass on the ARC
    runners")."""
    pieces = [p for p in pieces_of(turn.text) if not cues.has_secret(p.text)]
    if not pieces:
        return []
    context = {"item": 0.0, "first_turn": 0.0, "after_proposal": 0.0, "accepted": 0.0}
    units = []
    at = next((i for i, p in enumerate(pieces) if cues.SHIPPED.search(cues.main_clause(p.text))
               and not cues.is_asking(p.text) and not cues.PROPOSAL.search(p.text)), -1)
    if at >= 0:  # the report, and the check that shows it ("The dashboard shows p99 at 231 ms"), said right after
        shown = [p.text for p in pieces[at + 1:at + 2] if p.paragraph == pieces[at].paragraph and (
            cues.CHECKED.search(p.text) or re.search(r"\d", p.text)) and not cues.is_asking(p.text)
            and not cues.NARRATION.match(p.text) and not cues.PROPOSAL.search(p.text)]
        report = " ".join([pieces[at].text, *shown])
        units.append(_unit("milestone", turn, project or name, _with_project(report, project, "milestone", said),
                           report, context))
    told = " ".join(p.text for p in pieces)
    checked = bool(cues.CHECKED.search(pieces[0].text)) and not cues.is_asking(pieces[0].text)
    fixed = cues.FIXED.search(told) or checked and any(
        (cues.FIXED.search(p.text) or cues.APPLIED.match(p.text)) and not cues.is_asking(p.text)
        for p in pieces_of(cues.said_text(earlier))) or cues.APPLIED.match(pieces[0].text) and bool(
        cues.CAUSE.search(told) or cues.PROBLEM.search(told))  # "Switched X to Y ... The NaN came from ..."
    if fixed and (cues.VERIFIED.search(told) or checked) and not cues.is_asking(pieces[-1].text) \
            and (not cues.PROPOSAL.search(told) or cues.SUMMARY.search(told) or checked):
        units.append(_unit("solution", turn, project or name, told, told, context))
    return units


def _solution_text(turns: list[Turn], index: int, unit: Unit, start: int, project: str) -> str:
    """A solution as one note: what went wrong and why, found in the turns before (the agent's findings, the
    user's report of the failure), and what fixed it; at most MAX_WORDS, the weakest findings left out first."""
    found = []
    for turn in turns[start:index]:
        for piece in pieces_of(turn.text):
            text = piece.text
            if cues.is_asking(text) or cues.has_secret(text) or len(informative(text)) < 4 \
                    or (turn.role == "assistant" and cues.NARRATION.match(text)):
                continue
            weight = (2 * bool(cues.CAUSE.search(text)) + 2 * bool(cues.FIX.search(text))
                      if turn.role == "assistant" else 0) + 2 * bool(cues.PROBLEM.search(text)) - \
                3 * bool(cues.PROPOSAL.search(text) and not cues.FIX.search(text))
            if weight >= 2:
                found.append((weight + len(informative(text)) / 20, len(found), text))
    now = [p.text for p in pieces_of(unit.turn.text) if not cues.is_asking(p.text) and not cues.has_secret(p.text)]
    if unit.turn.role == "user":
        now = [cues.opened(t) for t in now if kind_of(t) == "solution" or cues.RECAP.search(t)]
    else:
        now = [t for t in now if not cues.NARRATION.match(t)][:3]
    budget = MAX_WORDS - len(" ".join(now).split())
    chosen = []
    for weight, order, text in sorted(found, reverse=True):
        if len(text.split()) <= budget and text not in now:
            chosen.append((order, text))
            budget -= len(text.split())
    text = " ".join([t for _, t in sorted(chosen)] + now)
    return _with_project(text, project, "solution", None) if text else ""


def clear_caches() -> None:
    """Empty the caches of sentences read (what a speed measurement starts from)."""
    for cached in (pieces_of, informative, kind_of, cues.has_secret, cues.is_asking, cues.said_text, cues._lower):
        cached.cache_clear()
