"""A study session: picks memories, asks questions, grades answers, appends every review as it is given.

The session is driven by a face (the rich terminal UI, a test): it never prints and never reads a key.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable, Iterator

from palace_cli.errors import UsageError
from palace_cli.core.notes import Memory
from palace_cli.palace import Palace
from palace_cli.study.evaluator import AGAIN, Grade, grade
from palace_cli.study.examiner import KINDS, Examiner, Question, subject_forms
from palace_cli.editing.reviewlog import LogRead, Review, ReviewLog, learner_name
from palace_cli.study.scheduler import MemoryState, Schedule, replay
from palace_cli.study.strategies import STRATEGIES, Neighbour, Pick, keyword_neighbours, select, vector_neighbours


@dataclass(frozen=True)
class Profile:
    """A session preset: which question kinds, what to show after answering, LLM questions, re-asking failures."""

    name: str
    kinds: tuple[str, ...] = KINDS
    show: str = "full"  # full (image and content) or content
    generated: bool = True
    requeue: bool = True


PROFILES = {
    "study": Profile("study"),
    "interview": Profile("interview", ("anchor", "cloze", "link"), "content", generated=False, requeue=False),
    "teaching": Profile("teaching", ("facts", "link", "cloze", "image"), "full"),
}
GENERATE_EVERY = 3  # with a generator, every third question is offered to it first


def study_settings(palace: Palace) -> dict:
    """palace.toml `[study]` (FSRS settings, thresholds, profiles)."""
    value = palace.config.raw.get("study", {})
    return value if isinstance(value, dict) else {}


def current_memories(palace: Palace) -> dict[str, Memory]:
    """The memories study asks about: those valid now. A superseded memory is retired from study (its
    reviews stay in the log, and count again if it is ever valid again)."""
    memories = palace.scan().memories
    hidden = palace.index.versions().hidden()
    return {i: m for i, m in memories.items() if i not in hidden}


def load_profile(palace: Palace, name: str | None) -> Profile:
    """A built-in profile, or one declared in palace.toml `[study.profiles.<name>]`."""
    name = name or "study"
    custom = (study_settings(palace).get("profiles") or {}).get(name)
    if isinstance(custom, dict):
        kinds = tuple(custom.get("kinds") or KINDS)
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise UsageError(f"profile {name!r}: unknown question kind(s) {', '.join(unknown)}; use {', '.join(KINDS)}")
        return Profile(name, kinds, str(custom.get("show", "full")), bool(custom.get("generated", True)),
                       bool(custom.get("requeue", True)))
    if name not in PROFILES:
        raise UsageError(f"unknown profile {name!r}; built in: {', '.join(PROFILES)} (or declare [study.profiles.{name}])")
    return PROFILES[name]


def resolve_generator(palace: Palace):
    """The generator palace.toml `[models]` asks for (GGUF or endpoint); None when off or not installed."""
    from palace_cli.backends import generator_from_config

    return generator_from_config(palace.config.models, palace.root)


def usable_generator(palace: Palace, task: str):
    """(the configured generator, "") when it is worth asking to `task`, else (None, one line saying why and
    how to configure one): none installed, off, or too small under [models] use_generator = "auto"."""
    from palace_cli.backends import unfit_reason

    generator = resolve_generator(palace)
    reason = unfit_reason(generator, palace.config.models, task=task)
    return (None, reason) if reason else (generator, "")


def llm_prior(read: LogRead) -> dict[str, float]:
    """Mean Evaluator score of every memory in LLM (Red Queen) rounds: a weakness prior for unstudied memories."""
    scores: dict[str, list[float]] = defaultdict(list)
    for review in read.reviews:
        if review.learner.startswith("llm:") and review.score is not None:
            scores[review.id].append(review.score)
    return {i: sum(v) / len(v) for i, v in scores.items()}


def stored_neighbours(palace: Palace):
    """Nearest neighbours by stored vectors, else BM25 over the search index, else keyword overlap."""
    from palace_cli.index.store import text_hash

    idx = palace.index
    model_id, keys, matrix = idx.vectors.load()

    def lexical(memories: dict[str, Memory], seeds: list[str]):
        try:
            usable = idx.text.doc_count() >= len(memories) > 0
        except Exception:  # a missing or broken search index is only a cache: fall back to keywords
            usable = False
        if not usable:
            return keyword_neighbours(memories, seeds)
        out = {}
        for seed in seeds:
            memory = memories[seed]
            hits = idx.text.search(" ".join([memory.subject, *memory.keywords]), limit=8)
            out[seed] = [Neighbour(i, round(s, 3), f"BM25 {s:.1f}") for i, s in hits if i != seed and i in memories][:3]
        return out

    def neighbours(memories: dict[str, Memory], seeds: list[str]):
        found = vector_neighbours(memories, seeds, keys, matrix, text_hash) if model_id and keys else {}
        rest = [s for s in seeds if not found.get(s)]
        return {**(lexical(memories, rest) if rest else {}), **{s: v for s, v in found.items() if v}}

    return neighbours


@dataclass
class Outcome:
    """One answered question: the grade, the rating given and the memory's new state."""

    question: Question
    answer: str
    grade: Grade
    rating: int
    state: MemoryState
    duration_ms: int


@dataclass
class Summary:
    """What a session did."""

    outcomes: list[Outcome] = field(default_factory=list)
    log_path: str = ""
    generated_offered: int = 0
    generated_used: int = 0
    generated_rejected: list[str] = field(default_factory=list)

    @property
    def ratings(self) -> Counter:
        return Counter(o.rating for o in self.outcomes)

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {"reviews": len(self.outcomes), "log": self.log_path,
                "ratings": {name: self.ratings.get(value, 0) for value, name in
                            ((1, "again"), (2, "hard"), (3, "good"), (4, "easy"))},
                "correct": sum(o.grade.verdict == "correct" for o in self.outcomes),
                "generated": {"offered": self.generated_offered, "used": self.generated_used,
                              "rejected": self.generated_rejected},
                "outcomes": [{"id": o.question.memory_id, "kind": o.question.kind, "verdict": o.grade.verdict,
                              "score": round(o.grade.score, 3), "rating": o.rating,
                              "due": o.state.due.isoformat(), "duration_ms": o.duration_ms} for o in self.outcomes]}


class StudySession:
    """A quiz session over one palace for one learner; iterate it for questions, then `grade` and `record`."""

    def __init__(self, palace: Palace, *, strategy: str = "due", n: int = 10, domain: str | None = None,
                 profile: str | None = None, learner: str | None = None, generator=None, seed: int | None = None,
                 clock: Callable[[], datetime] | None = None, log: ReviewLog | None = None):
        if strategy not in STRATEGIES:
            raise UsageError(f"unknown strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
        if n < 1:
            raise UsageError("-n must be at least 1")
        self.palace = palace
        self.strategy = strategy
        self.profile = load_profile(palace, profile)
        self.learner = learner or learner_name()
        self.clock = clock or (lambda: datetime.now(timezone.utc))
        self.rng = random.Random(seed)
        self.domain = palace.resolve_domain(domain) if domain else None
        self.memories = current_memories(palace)
        self.log = log or ReviewLog(palace)
        read = self.log.read()
        self.log_problems = read.problems
        self.schedule: Schedule = replay(read.reviews, self.learner, self.clock(), study_settings(palace))
        self.kind_history: dict[str, Counter] = defaultdict(Counter)
        for review in read.for_learner(self.learner):
            self.kind_history[review.id][review.kind] += 1
        self.examiner = Examiner(self.memories, seed=seed)
        self.generator = generator if self.profile.generated else None
        neighbours = stored_neighbours(palace) if strategy == "adversarial" else None
        self.picks: list[Pick] = select(strategy, self.memories, self.schedule, n, self.rng, self.domain,
                                        llm_prior(read), neighbours)
        self.partner = {p.memory_id: p.partner for p in self.picks if p.partner}
        self.queue: deque[Pick] = deque(self.picks)
        self.requeued: set[str] = set()
        self.summary = Summary(log_path=palace.rel(self.log.path))
        self._asked = 0
        self._shown_at = 0.0
        self._rated_at: datetime | None = None  # the moment `preview` computed the intervals on the keys
        self._pending: tuple | None = None  # (memory id, thread, result box) of a prefetched generated question

    # ---- asking -------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Question]:
        while self.queue:
            pick = self.queue.popleft()
            question = self.question_for(pick)
            if question is None:
                continue
            self._asked += 1
            if self.queue:
                self._prefetch(self.queue[0])  # generate while the person answers this one
            self._shown_at = time.monotonic()
            yield question

    def _generating_turn(self) -> bool:
        return self.generator is not None and (self._asked + 1) % GENERATE_EVERY == 0

    def _prefetch(self, pick: Pick) -> None:
        """Start the generator on the next question in a background thread when it is its turn."""
        if not self._generating_turn() or pick.memory_id not in self.memories:
            return
        from palace_cli.study.llm import generate_question

        box: dict = {}
        memory = self.memories[pick.memory_id]
        thread = threading.Thread(target=lambda: box.update(result=generate_question(self.generator, memory,
                                                                                    self.memories)),
                                  daemon=True, name="palace-generate")  # daemon: Ctrl-C never waits for it
        thread.start()
        self._pending = (pick.memory_id, thread, box)

    def choose_kind(self, memory: Memory, requeued: bool = False) -> list[str]:
        """Kinds to try for a memory, least asked first; a re-asked memory gets a different kind than before."""
        allowed = [k for k in self.examiner.available(memory) if k in self.profile.kinds]
        history = self.kind_history[memory.id]
        paired = memory.id in self.partner and not requeued
        jitter = {k: self.rng.random() for k in allowed}
        # adversarial pairs: kinds that make the learner tell the two memories apart come first
        return sorted(allowed, key=lambda k: (history[k], paired and k not in ("image", "anchor", "cloze"), jitter[k]))

    def question_for(self, pick: Pick) -> Question | None:
        """The question to ask for a pick: maybe a validated generated one, else one made from the note."""
        memory = self.memories.get(pick.memory_id)
        if memory is None:
            return None
        note = ""
        if self._generating_turn():
            from palace_cli.study.llm import generate_question

            self.summary.generated_offered += 1
            pending, self._pending = self._pending, None
            if pending:
                pending[1].join()  # one model, one caller at a time
            if pending and pending[0] == memory.id:
                question, problem = pending[2].get("result", (None, "the generator failed"))
            else:
                question, problem = generate_question(self.generator, memory, self.memories)
            if question is not None:
                self.summary.generated_used += 1
                return question
            self.summary.generated_rejected.append(f"{memory.id}: {problem}")
            note = f"generated question rejected ({problem}); asked one from the note"
        for kind in self.choose_kind(memory, pick.memory_id in self.requeued):
            question = self.examiner.ask(memory, kind, variant=self.kind_history[memory.id][kind])
            if question is not None:
                question.note = note
                return question
        return None

    # ---- answering ----------------------------------------------------------------------------

    def confusers(self, question: Question) -> dict[str, list[str]]:
        """Other memories an answer might name by mistake: the adversarial partner and same-domain memories."""
        if question.kind not in ("anchor", "image", "link"):
            return {}
        memory = self.memories[question.memory_id]
        others = [m for m in self.memories.values() if m.domain == memory.domain and m.id != memory.id][:200]
        partner = self.partner.get(memory.id)
        if partner in self.memories:
            others.insert(0, self.memories[partner])
        expected = {e.label for e in question.expected}
        return {m.id: subject_forms(m) for m in others if m.subject not in expected}

    def grade(self, question: Question, answer: str) -> Grade:
        """Grade a typed answer against the question's expected elements."""
        return grade(question.expected, answer, question.need, self.confusers(question))

    def preview(self, question: Question) -> dict[int, timedelta]:
        """The interval each rating (1-4) would give now; `record` right after uses the same moment, so the
        interval shown on a key is the one the rating gives."""
        self._rated_at = self.clock()
        due = self.schedule.preview(question.memory_id, self._rated_at)
        return {rating: moment - self._rated_at for rating, moment in due.items()}

    def record(self, question: Question, rating: int, answer: str = "", result: Grade | None = None,
               duration_ms: int | None = None) -> MemoryState:
        """Append the review to the log now (so an interrupted session keeps it) and update the schedule."""
        if rating not in (1, 2, 3, 4):
            raise UsageError(f"rating must be 1-4, not {rating!r}")
        if duration_ms is None:
            duration_ms = int((time.monotonic() - self._shown_at) * 1000) if self._shown_at else None
        result = result or self.grade(question, answer)
        at, self._rated_at = self._rated_at or self.clock(), None
        review = Review(question.memory_id, at, rating, question.kind, self.strategy, self.learner,
                        duration_ms, result.score)
        self.log.append(review)
        state = self.schedule.after(review)
        self.kind_history[question.memory_id][question.kind] += 1
        self.summary.outcomes.append(Outcome(question, answer, result, rating, state, duration_ms or 0))
        if rating == AGAIN and self.profile.requeue and question.memory_id not in self.requeued:
            self.requeued.add(question.memory_id)
            self.queue.append(Pick(question.memory_id, "again"))
        return state

    def memory(self, question: Question) -> Memory:
        """The memory a question is about (to show after answering)."""
        return self.memories[question.memory_id]
