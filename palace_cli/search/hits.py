"""What a search returns: hits (memories, turns), the route they imply, and the result of search and recall."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from palace_cli.core.notes import Memory
from palace_cli.index.sections import section_title
from palace_cli.search.profiles import tokens_of
from palace_cli.search.relevance import Omitted
from palace_cli.search.sessions import ROUTE_SHOWN, SessionRoute


@dataclass
class Turn:
    """A turn of a conversation as a hit carries it: who said what, when, in which session."""

    session: str
    turn: str
    speaker: str
    text: str
    time: str
    title: str
    started: str = ""
    conversation: str = ""  # the source's grouping of sessions (LoCoMo's sample id), when it has one


@dataclass
class Hit:
    """One ranked unit, a memory, a section of one or a turn, with where it is and the parts its score came from.

    For a turn, `id` is its key `<session id>/<turn id>`, `subject` a one-line preview, `domain` "",
    `path:line` its header line, and `turn` the rest. For a section, `id` is its key `<note id>#<line>`,
    `note` its note's id, `heading` the headings above it and its own, `path:line` its heading, and
    `memory` its note seen through the section (subject `Note › Heading`, the section's text as Content,
    the note's verify token).
    """

    id: str
    subject: str
    domain: str
    path: str
    line: int
    score: float
    parts: dict[str, float] = field(default_factory=dict)
    memory: Memory | None = None
    replaces: list[str] = field(default_factory=list)       # versions this memory superseded
    superseded_by: list[str] = field(default_factory=list)  # versions that superseded it
    valid: bool = True                                       # valid at the question's moment (now, or as of)
    kind: str = "memory"
    time: str = ""
    turn: Turn | None = None
    words: float | None = None    # the share of the question's words it holds (search/relevance.py)
    meaning: float | None = None  # its cosine to the question, when an embedder is installed
    every_word: bool = False      # it holds every word of the question (search/relevance.py)
    note: str = ""                                           # a section's note id
    heading: tuple[str, ...] = ()                            # a section's heading path

    @property
    def memory_id(self) -> str:
        """The id of the memory this hit is (a section: its note's); "" for a turn."""
        return "" if self.kind == "turn" else self.note or self.id

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}"

    def as_dict(self) -> dict:
        """The JSON contract: kind, id, subject, domain, path, line, time, score (the ranking's own, whose order
        alone means something), relevance (words and meaning, which read the same in every list), parts (and
        version links when there are any); text (a memory's Content, a section's own text, a turn's words) once
        the hit is read; for a turn also session, turn, speaker."""
        data = {"kind": self.kind, "id": self.id, "subject": self.subject, "domain": self.domain, "path": self.path,
                "line": self.line, "time": self.time or None, "score": round(self.score, 6),
                "relevance": {"words": None if self.words is None else round(self.words, 4),
                              "meaning": None if self.meaning is None else round(self.meaning, 4),
                              "every_word": self.every_word},
                "parts": {k: round(v, 6) for k, v in self.parts.items()}}
        if self.turn is not None:
            data.update(session=self.turn.session, turn=self.turn.turn, speaker=self.turn.speaker, text=self.turn.text)
        if self.kind == "section":
            data.update(note=self.note, section=list(self.heading))
        if self.turn is None and self.memory is not None:
            # An agent reading --json needs the words it would cite, as a turn hit already gives them.
            data["text"] = self.memory.content
        if self.replaces:
            data["replaces"] = self.replaces
        if self.superseded_by:
            data["superseded_by"] = self.superseded_by
        if not self.valid:
            data["valid"] = False
        return data


@dataclass
class DomainRoute:
    """A domain of the hits handed over, with its share of their scores."""

    domain: str
    confidence: float
    parts: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"domain": self.domain, "confidence": round(self.confidence, 4),
                "parts": {k: round(v, 4) for k, v in self.parts.items()}}


@dataclass
class SearchResult:
    """A ranked list of hits and how it was made."""

    query: str
    mode: str
    hits: list[Hit]
    dense: str = "on"
    dense_reason: str = ""
    elapsed_ms: float = 0.0
    as_of: str = ""               # the moment asked about ("" = now)
    include_superseded: bool = False
    left_out: int = 0             # memories not valid at that moment, left out of the ranking
    relevant: bool = True         # False: no unit is about the query (search/relevance.py); `why` says so
    why: str = ""
    ranked: list[Hit] = field(default_factory=list)  # the ranking before relevance and caps (benchmarks, tests)

    def as_dict(self) -> dict:
        return {"query": self.query, "mode": self.mode, "hits": [h.as_dict() for h in self.hits],
                "relevant": self.relevant, "why": self.why or None,
                "dense": self.dense, "elapsed_ms": round(self.elapsed_ms, 2), "as_of": self.as_of or None,
                "include_superseded": self.include_superseded, "left_out": self.left_out}


@dataclass
class Recall(SearchResult):
    """Recall: the hits, the domains they sit in (the route), and the context they make within the budget."""

    profile: str = "reference"
    hops: int = 1                 # kept in the JSON for older callers: one flat ranking, always 1
    route: list[DomainRoute] = field(default_factory=list)
    fallback: bool = False        # kept in the JSON for older callers: never true now
    reason: str = ""
    context: str = ""
    context_bytes: int = 0
    confidence: float = 0.0
    linked: list[Hit] = field(default_factory=list)
    handed: list[Hit] = field(default_factory=list)  # the hits whose memory (turn) is in the context
    sessions: list[SessionRoute] = field(default_factory=list)  # hop 1 for turns: sessions, best first
    omitted: list[Omitted] = field(default_factory=list)  # ranked units not handed over, and why
    caps: dict[str, int] = field(default_factory=dict)    # memory: -k, turn: --turns

    def as_dict(self) -> dict:
        data = super().as_dict()
        data.update({
            "profile": self.profile, "hops": self.hops, "route": [r.as_dict() for r in self.route],
            "fallback": self.fallback, "reason": self.reason, "context_bytes": self.context_bytes,
            "context_tokens": tokens_of(self.context),
            "confidence": round(self.confidence, 4),
            "memories": [context_entry(h.memory) for h in self.handed if h.memory],
            "turns": [h.id for h in self.handed if h.turn is not None],
            "caps": self.caps, "omitted": [o.as_dict() for o in self.omitted],
        })
        if self.sessions:
            data["sessions"] = [r.as_dict() for r in self.sessions[:ROUTE_SHOWN]]
        if self.linked:
            data["linked"] = [h.as_dict() for h in self.linked]
        return data


def one_per_note(hits: list[Hit], note_of: dict[str, str]) -> list[Hit]:
    """The hits with at most one per note, in rank order: a note's first hit keeps its place. When that is the
    whole note and one of its sections ranks later, it is handed as that section (the part that answers,
    `path:line` of its heading), keeping the note's score; later hits of the same note are left out."""
    out: list[Hit] = []
    first: dict[str, Hit] = {}
    for hit in hits:
        if hit.kind == "turn":
            out.append(hit)
            continue
        note = note_of.get(hit.id, hit.id) if hit.kind == "section" else hit.id
        kept = first.get(note)
        if kept is None:
            first[note] = hit
            out.append(hit)
        elif kept.kind == "memory" and hit.kind == "section":
            kept.kind, kept.id, kept.note = "section", hit.id, note
            kept.parts = {**kept.parts, "section_rank": hit.parts.get("lexical_rank", hit.parts.get("dense_rank", 0))}
    for hit in out:
        if hit.kind == "section" and not hit.note:
            hit.note = note_of.get(hit.id, "")
    return out


def attach_section(hit: Hit, memory: Memory | None, row: dict | None) -> None:
    """Fill a section hit from its note and its stored row: `memory` becomes the note seen through the section
    (subject `Note › Heading`, the section's text as its Content, its heading's line), so the context, the
    extractive answer and verify use the section with the note's id and verify token."""
    if memory is None or row is None:
        return
    subject = section_title(memory.subject, row["heading"])
    hit.memory = replace(memory, subject=subject, content=row["text"], content_line=row["line"], line=row["line"],
                         image="", image_line=0)
    hit.note, hit.heading, hit.subject, hit.line = memory.id, tuple(row["heading"]), subject, row["line"]


def context_entry(memory: Memory) -> dict:
    """A handed-over memory as `verify --context` needs it (id, verify token) and as a reader finds it: `path` and
    `line` of the part handed (a section's heading line; a note's first line)."""
    return {"id": memory.id, "subject": memory.subject, "verify": memory.verify, "path": memory.path,
            "line": memory.line or 1}
