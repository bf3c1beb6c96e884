"""The LLM stage of distill: the turns the heuristics were unsure of, read by a model behind `[models] endpoint`.

One prompt per turn (the turn, the one before it, who speaks, the session's date); the answer is one JSON
object per fact, or NONE. In a work session (a user and an agent) the prompt asks for the kinds a work memory
has (decision, convention, fact, solution, milestone) and the unit the heuristics were unsure of is the turn. Answers are cached by prompt hash (backends/cache.py), so a second run asks
nothing. The stage is never required: without an endpoint it does not run, and an endpoint that fails is
reported once and left alone for the rest of the run.
"""

from __future__ import annotations

import json
import re

from palace_cli.core.dates import said_on
from palace_cli.core.text import one_line
from palace_cli.errors import ModelError
from palace_cli.memory.extract import Candidate, Uncertain, addressee, subject_of
from palace_cli.memory.patterns import MEMORY_TYPES
from palace_cli.memory.work import KINDS, TYPE_OF, project_of

CONFIDENCE = 0.5  # an LLM's fact has no fitted score; it ranks below every heuristic memory kept
MAX_TOKENS = 300
OBJECT = re.compile(r"\{[^{}]*\}")
PROMPT = """You turn one turn of a conversation into memories: facts worth remembering about the speaker.

Date of the conversation: {date}
Speaker: {speaker}{other}
{before}Turn ({speaker}): {text}

Write each fact about {speaker} as one JSON object on its own line, for example
{{"type": "event", "fact": "{speaker} went to a pottery class on 7 May 2023."}}
type is one of: {types}.
Use {speaker}'s name, never "I"; write relative dates as dates. Greetings, thanks, reactions and questions
are not facts. If the turn holds nothing worth remembering, answer NONE."""


WORK_PROMPT = """You read one turn of a session between a user and a coding agent, and say whether it holds something
worth keeping once the session is over: a decision (and its reason), a convention (a standing rule of how work is
done), a fact (about the project, a system or a person), a solution (a problem and the fix shown to work) or a
milestone (something shipped or finished). A one-off instruction for the task at hand, a question, a pleasantry,
a hypothetical, the agent's narration or a plan is not.

Project: {project}. The user is {user}. Date: {date}.
{before}Turn ({speaker}): {text}

If the turn holds one, answer with one JSON object on one line, for example
{{"kind": "decision", "memory": "{example}"}}
kind is one of: {kinds}. Write the memory as one sentence a person would file, in the third person, naming the
project or the person. Otherwise answer NONE."""


def prompt_for(item: Uncertain) -> str:
    """The prompt for one turn."""
    turn, session, previous = item.turn, item.session, item.previous
    if turn.role in ("user", "assistant"):
        project = project_of(session) or "unknown"
        before = f"Turn before ({previous.speaker}): {one_line(previous.text, 1500)}\n" if previous is not None else ""
        return WORK_PROMPT.format(project=project, user=item.user or "the user", date=session.time_of(turn) or
                                  "unknown", before=before, speaker=turn.speaker, text=one_line(turn.text, 1500),
                                  example=f"{project} keeps audit events for 13 months.", kinds=", ".join(KINDS))
    other = addressee(session, turn.speaker)
    before = f"Turn before ({previous.speaker}): {one_line(previous.text)}\n" if previous is not None else ""
    return PROMPT.format(date=session.time_of(turn) or "unknown", speaker=turn.speaker,
                         other=f"\nTalking with: {other}" if other else "", before=before,
                         text=one_line(turn.text), types=", ".join(MEMORY_TYPES))


def parse_facts(answer: str, kind_key: str = "type", text_key: str = "fact", kinds=MEMORY_TYPES
                ) -> list[tuple[str, str]]:
    """(type, fact) pairs of an answer: every JSON object with a known type and a fact; NONE gives none."""
    facts = []
    for match in OBJECT.finditer(answer):
        try:
            data = json.loads(match.group())
        except ValueError:
            continue
        kind, fact = data.get(kind_key), data.get(text_key)
        if kind in kinds and isinstance(fact, str) and fact.strip():
            facts.append((kind, " ".join(fact.split())))
    return facts


def ask_llm(generator, items: list[Uncertain], stats: dict) -> list[Candidate]:
    """Candidates from the model for each uncertain turn; `stats` gains asked, cached, memories and errors."""
    stats.setdefault("model", generator.model_id)
    for key in ("asked", "cached", "memories"):
        stats.setdefault(key, 0)
    errors = stats.setdefault("errors", [])
    out = []
    for item in items:
        if errors:
            break  # an endpoint that failed once is not asked again in this run
        try:
            answer = generator.complete(prompt_for(item), max_tokens=MAX_TOKENS, temperature=0.0)
        except ModelError as exc:
            errors.append(str(exc))
            break
        stats["asked"] += 1
        stats["cached"] += int(getattr(generator, "last_cached", False))
        turn, session = item.turn, item.session
        said = session.time_of(turn)
        if turn.role in ("user", "assistant"):
            for kind, memory in parse_facts(answer, "kind", "memory", KINDS):
                candidate = Candidate(about=project_of(session) or item.user or "the user", type=TYPE_OF[kind],
                                      subject=subject_of(memory), content=memory, session=session.id,
                                      path=session.path, line=turn.line, turn=turn.id, said=said,
                                      valid_from=said_on(said) if said else None, confidence=CONFIDENCE,
                                      by=f"llm:{generator.model_id}", kind=kind)
                out.append(candidate)
                stats["memories"] += 1
            continue
        for kind, fact in parse_facts(answer):
            out.append(Candidate(about=turn.speaker, type=kind, subject=subject_of(fact), content=fact,
                                 session=session.id, path=session.path, line=turn.line, turn=turn.id, said=said,
                                 valid_from=said_on(said) if said else None, confidence=CONFIDENCE,
                                 by=f"llm:{generator.model_id}"))
            stats["memories"] += 1
    return out
