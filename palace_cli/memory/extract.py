"""From a session's turns to candidate memories: offline, pure, fast (no palace, no model).

Two readers of a turn, by who speaks:

- People by name (LoCoMo, chat text): each turn is scored (scorer.py); a turn at or above the threshold becomes
  one memory holding what the speaker stated there (greetings, filler and questions to the other left out),
  first person written as the speaker's name, second person as the one person spoken to, relative dates
  resolved against the session's date. One turn, one memory: what someone shares in a turn is one thing told
  in a few sentences, and split sentence by sentence the facts lose what makes them findable (measured in
  docs/benchmarks.md, "distill").
- A user and an assistant (Claude Code, ChatGPT, Claude.ai): work.py finds the decisions, conventions, facts,
  solutions and milestones of the session (units), scored by the work scorer (scorer.py); each unit at or
  above its threshold becomes one memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date

from palace_cli.core.text import informative_words, split_sentences, straight_apostrophes
from palace_cli.conversations.model import Session, Turn
from palace_cli.core.dates import RelativeDate, resolve_relative, said_on
from palace_cli.memory.patterns import (attribute, first_person, is_filler, is_question, memory_type, rewrite,
                                        with_subject)
from palace_cli.memory.scorer import (FITTED, PHOTO, THRESHOLD, WORK_FITTED, WORK_THRESHOLD, TurnView, Weights,
                                      session_words, signals)
from palace_cli.memory.work import TYPE_OF, work_units

SUBJECT_WORDS = 10
GRATITUDE = re.compile(r"\W*(thanks|thank you|thx|sorry|congrats|congratulations|wow|whoa|woah|glad|appreciate)\b",
                       re.IGNORECASE)
YOU = re.compile(r"\b(you|your|you're|you've|yours)\b", re.IGNORECASE)
CHOSEN = {"decision", "preference"}  # memory types that hold from the day they were chosen
# A reason clause open before a date in its sentence: its cue, then at least a word, and no sentence end between.
REASON_BEFORE = re.compile(r"\b(?:because|cause|since|as|given that|after)\s+\w[^.;!?]*$", re.IGNORECASE)


@dataclass
class Candidate:
    """A memory distill proposes: what it says, who it is about, and the turn it comes from."""

    about: str
    type: str
    subject: str
    content: str
    session: str              # the session's id
    path: str                 # the session file, relative to the palace root
    line: int                 # the turn's header line in it
    turn: str                 # the turn's id
    said: str | None          # when the turn was said (its time, else its session's start)
    valid_from: date | None   # when it became true: a past date it names, else the day it was said
    confidence: float
    attribute: str = ""       # a one-at-a-time attribute it sets ("job", "favorite color"), if any
    by: str = "heuristic"     # or "llm:<model>"
    dates: list[str] = field(default_factory=list)  # relative dates resolved, as "last week -> 2023-05-01"
    kind: str = ""            # in a work session: decision, convention, fact, solution or milestone
    part: int = 1             # the candidate's number among its turn's (a turn can hold several)

    @property
    def source(self) -> str:
        """`path:line` of the turn."""
        return f"{self.path}:{self.line}"

    @property
    def key(self) -> str:
        """`<session>/<turn>`, and `#<part>` after it for a turn's second memory and on: what marks it done."""
        return f"{self.session}/{self.turn}" + (f"#{self.part}" if self.part > 1 else "")

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {"about": self.about, "type": self.type, "subject": self.subject, "content": self.content,
                "session": self.session, "source": self.source, "turn": self.turn, "said": self.said,
                "valid_from": self.valid_from.isoformat() if self.valid_from else None,
                "confidence": self.confidence, "attribute": self.attribute or None, "by": self.by,
                "dates": self.dates, "kind": self.kind or None}


@dataclass
class Uncertain:
    """A turn the heuristics scored below the threshold but not far below: the LLM stage's work, when there is one."""

    turn: Turn
    session: Session
    previous: Turn | None
    probability: float
    user: str = ""  # in a work session: the user's name


def addressee(session: Session, speaker: str) -> str | None:
    """The one other person in a two-person session (who "you" is), else None."""
    others = [p for p in session.participants if p != speaker]
    return others[0] if len(others) == 1 else None


def has_roles(session: Session) -> bool:
    """True for a session between a user and an assistant (roles, not people's names)."""
    return any(turn.role in ("user", "assistant") for turn in session.turns)


def turn_memory(turn: Turn, session: Session, about: str, to: str | None, previous: Turn | None = None
                ) -> tuple[str, str, list[RelativeDate]]:
    """(content, the sentences kept as said, dates resolved) of one turn: its statements about the speaker,
    rewritten; filler and questions to the other left out. When the turn answers questions put to the speaker
    in the turn before, they follow, quoted: "5 years already!" alone remembers nothing."""
    said = session.time_of(turn)
    kept, original, dates = [], [], []
    # LoCoMo's caption of a shared photo: what the speaker showed, kept as a sentence of its own.
    text = PHOTO.sub(lambda m: f" I shared {m.group(1).rstrip('.')}. ", straight_apostrophes(turn.text))
    for sentence in split_sentences(text):
        if is_filler(sentence, session.participants) or (is_question(sentence) and not first_person(sentence)):
            continue
        resolved, found = _dated(sentence, said)
        kept.append(rewrite(with_subject(resolved), about, to))
        original.append(sentence)
        dates += found
    content = " ".join(kept)
    if content and about and not re.search(rf"(?<!\w){re.escape(about)}(?!\w)", content, re.IGNORECASE):
        content = f"{about}: {content}"  # who it is about, when no sentence names them ("The game was called ...")
    asked = _questions_to(previous, turn.speaker) if previous is not None and content else ""
    if asked:  # quoted as asked: "you" in a question put to the speaker is plain enough
        content += f' (asked by {previous.speaker}: "{asked}")'
    return content, " ".join(original), dates


def _dated(sentence: str, said: str | None) -> tuple[str, list[RelativeDate]]:
    """A sentence with each relative date kept as said and the date it names after it ("last week (the week of 1
    May 2023)"): the words people use stay findable, the day is exact."""
    found = resolve_relative(sentence, said)[1] if said else []
    for day in reversed(found):
        sentence = f"{sentence[:day.end]} ({day.written}){sentence[day.end:]}"
    return sentence, found


def _questions_to(previous: Turn, speaker: str) -> str:
    """The questions of the turn before that ask the speaker about themselves ("How long have you been
    married?"), joined; "" when there are none."""
    if previous.speaker == speaker:
        return ""
    return " ".join(s for s in split_sentences(straight_apostrophes(previous.text)) if is_question(s))


def subject_of(content: str) -> str:
    """A short title: the first words of the first sentence that says something (not thanks or a reaction)."""
    sentences = split_sentences(content) if content else [""]
    telling = [s for s in sentences if len(informative_words(s)) >= 2 and not GRATITUDE.match(s)]
    words = (telling or sentences)[0].split()
    text = " ".join(words[:SUBJECT_WORDS]).rstrip(".,;:!?-–—")
    return text + ("…" if len(words) > SUBJECT_WORDS else "")


def _valid_from(kind: str, dates: list[RelativeDate], said: str | None, text: str = "") -> date | None:
    """A past event's date when the turn names one (the earliest), else the day it was said. A choice, a rule or a
    fix holds from the day it was made: a date in its reason ("go with Vault, because we got burned by that last
    year") dates the reason, not the choice; a fix holds from the day it was said whatever its story names."""
    if kind == "procedure":
        return said_on(said) if said else None
    past = [d.day for d in dates if d.past and not (kind in CHOSEN and _in_reason(text, d.phrase))]
    if past and kind != "plan":
        return min(past)
    return said_on(said) if said else None


def _in_reason(text: str, phrase: str) -> bool:
    """Whether a date phrase stands in a reason clause of its sentence ("..., because we got burned last year"),
    not right after "since" ("squash-merged since last year" dates the rule)."""
    at = text.find(phrase)
    return at >= 0 and bool(REASON_BEFORE.search(text[:at]))


def _candidate(turn: Turn, session: Session, about: str, content: str, original: str, dates: list[RelativeDate],
               confidence: float, kind: str = "") -> Candidate:
    kind = kind or memory_type(original)
    found = attribute(original)
    said = session.time_of(turn)
    return Candidate(about=about, type=kind, subject=subject_of(content), content=content, session=session.id,
                     path=session.path, line=turn.line, turn=turn.id, said=said,
                     valid_from=_valid_from(kind, dates, said, f"{original} {content}"), confidence=round(confidence, 2),
                     attribute=found[0] if found else "",
                     dates=[f"{d.phrase} -> {d.day.isoformat()}" for d in dates])


def extract_session(session: Session, weights: Weights = FITTED, threshold: float = THRESHOLD,
                    names: dict[str, str] | None = None, uncertain_from: float | None = None,
                    work: tuple[Weights, float] | None = None) -> tuple[list[Candidate], list[Uncertain]]:
    """The candidate memories of one session, and the turns scored from `uncertain_from` up but not kept, for an LLM.

    `names` maps a role to the name memories use for it ({"user": "Ada"}; default "the user"); `work` the
    scorer and threshold of a user-assistant session (default: the fitted ones)."""
    if has_roles(session):
        return work_session(session, (names or {}).get("user", ""), *(work or (WORK_FITTED, WORK_THRESHOLD)),
                            uncertain_from)
    candidates, uncertain = [], []
    spoken = [t for t in session.turns if t.role not in ("tool", "system")]
    mean_words = session_words([t.text for t in spoken])
    scored, previous = [], None
    for position, turn in enumerate(spoken):
        view = TurnView(turn.text, turn.speaker, tuple(session.participants), previous.text if previous else "",
                        position, mean_words)
        scored.append((turn, previous, weights.probability(signals(view))))
        previous = turn
    # People chatting take turns telling and answering: at most half a session's turns are kept, the likeliest.
    ranked = sorted(range(len(scored)), key=lambda i: -scored[i][2])
    telling = set(ranked[: (len(scored) + 1) // 2])
    for number, (turn, previous, probability) in enumerate(scored):
        if probability >= threshold and number in telling:
            to = addressee(session, turn.speaker)
            content, original, dates = turn_memory(turn, session, turn.speaker, to, previous)
            if content:
                candidates.append(_candidate(turn, session, turn.speaker, content, original, dates, probability))
        elif uncertain_from is not None and probability >= uncertain_from:
            uncertain.append(Uncertain(turn, session, previous, probability))
    return candidates, uncertain


def work_session(session: Session, user: str, weights: Weights, threshold: float,
                 uncertain_from: float | None = None) -> tuple[list[Candidate], list[Uncertain]]:
    """The memories of a user-assistant session: its units (work.py) scored at or above the threshold, a text
    said twice in the session kept once; the units scored from `uncertain_from` up, for an LLM."""
    candidates, uncertain, seen, parts = [], [], set(), {}
    spoken = [t for t in session.turns if t.role in ("user", "assistant")]
    before = {t.id: spoken[i - 1] if i else None for i, t in enumerate(spoken)}
    for unit in work_units(session, user):
        probability = weights.probability(unit.signals)
        if unit.signals.get("strong"):
            probability = max(probability, threshold)  # said outright: kept (work.strong)
        key = " ".join(unit.text.lower().split())
        if probability < threshold or key in seen:
            if uncertain_from is not None and uncertain_from <= probability < threshold and key not in seen \
                    and all(u.turn.id != unit.turn.id for u in uncertain):
                uncertain.append(Uncertain(unit.turn, session, before.get(unit.turn.id), probability, user))
            continue
        seen.add(key)
        parts[unit.turn.id] = parts.get(unit.turn.id, 0) + 1
        candidate = _candidate(unit.turn, session, unit.about, unit.text, unit.said, unit.dates, probability,
                               TYPE_OF[unit.kind])
        candidate.kind, candidate.part = unit.kind, parts[unit.turn.id]
        candidate.attribute = ""
        candidates.append(candidate)
    return candidates, uncertain
