"""FSRS scheduling replayed from the review log: the log is the truth, card state is derived, keyed by memory id."""

from __future__ import annotations

import copy
import hashlib
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from fsrs import Card, Rating, Scheduler, State
from fsrs.scheduler import FUZZ_RANGES

from palace_cli.errors import ConfigError
from palace_cli.editing.reviewlog import Review

DEFAULT_RETENTION = 0.9
DEFAULT_MAX_INTERVAL = 36500


class ReplayScheduler(Scheduler):
    """fsrs.Scheduler whose interval fuzz is seeded per review, so replaying a log always gives the same dates.

    The library draws fuzz from the global `random`; replay must not, or two machines (or two runs)
    reading the same log would disagree on due dates.
    """

    fuzz_seed: int = 0

    def _get_fuzzed_interval(self, *, interval: timedelta) -> timedelta:
        days = interval.days
        if days < 2.5:
            return interval
        delta = 1.0
        for spread in FUZZ_RANGES:
            delta += spread["factor"] * max(min(float(days), spread["end"]) - spread["start"], 0.0)
        low = max(2, round(days - delta))
        high = min(round(days + delta), self.maximum_interval)
        low = min(low, high)
        fuzzed = random.Random(self.fuzz_seed).random() * (high - low + 1) + low
        return timedelta(days=min(round(fuzzed), self.maximum_interval))


@dataclass
class MemoryState:
    """What the log says about one memory for one learner."""

    id: str
    card: Card
    reviews: int = 0
    lapses: int = 0
    last_rating: int | None = None
    last_review: datetime | None = None
    ratings: list[int] = field(default_factory=list)

    @property
    def due(self) -> datetime:
        return self.card.due

    @property
    def state(self) -> str:
        return State(self.card.state).name.lower()


@dataclass
class Schedule:
    """Every memory's FSRS state for one learner, as of `now`."""

    learner: str
    now: datetime
    states: dict[str, MemoryState]
    scheduler: ReplayScheduler
    reviews: list[Review] = field(default_factory=list)
    states_before: list[str] = field(default_factory=list)  # each review's card state before it (for retention)

    def retrievability(self, memory_id: str, at: datetime | None = None) -> float | None:
        """Probability of recall now (or at `at`); None for a memory never reviewed."""
        state = self.states.get(memory_id)
        if state is None:
            return None
        return self.scheduler.get_card_retrievability(state.card, at or self.now)

    def due_ids(self, known: set[str] | None = None, at: datetime | None = None) -> list[str]:
        """Reviewed memories that are due, most overdue first (lowest retrievability)."""
        moment = at or self.now
        ids = [i for i, s in self.states.items() if s.card.due <= moment and (known is None or i in known)]
        return sorted(ids, key=lambda i: (self.retrievability(i, moment), self.states[i].card.due, i))

    def new_ids(self, known: set[str]) -> list[str]:
        """Memories never reviewed by this learner, sorted."""
        return sorted(known - set(self.states))

    def preview(self, memory_id: str, at: datetime) -> dict[int, datetime]:
        """The due date each rating (1-4) would give a memory rated at `at`, exactly as `after` would
        (the same seeded fuzz): what the quiz shows on its rating keys, as Anki does."""
        due = {}
        for rating in (1, 2, 3, 4):
            states = {memory_id: copy.deepcopy(self.states[memory_id])} if memory_id in self.states else {}
            due[rating] = _apply(self.scheduler, states, Review(memory_id, at, rating, learner=self.learner)).due
        return due

    def after(self, review: Review) -> MemoryState:
        """Apply one more review (a session in progress) and return the memory's new state."""
        self.states_before.append(self.states[review.id].state if review.id in self.states else "new")
        state = _apply(self.scheduler, self.states, review)
        self.reviews.append(review)
        return state


def card_id(memory_id: str) -> int:
    """A stable positive int for fsrs.Card from a memory id (Card's default would sleep and use the clock)."""
    return int.from_bytes(hashlib.sha256(memory_id.encode("utf-8")).digest()[:6], "big")


def _fuzz_seed(review: Review) -> int:
    key = f"{review.id}|{review.learner}|{review.at.isoformat()}"
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")


def make_scheduler(settings: dict | None = None) -> ReplayScheduler:
    """The FSRS scheduler from palace.toml `[study]`: desired_retention, maximum_interval, parameters."""
    settings = settings or {}
    try:
        retention = float(settings.get("desired_retention", DEFAULT_RETENTION))
        maximum = int(settings.get("maximum_interval", DEFAULT_MAX_INTERVAL))
        options = {"desired_retention": retention, "maximum_interval": maximum, "enable_fuzzing": True}
        if settings.get("parameters"):
            options["parameters"] = [float(p) for p in settings["parameters"]]
        if not 0.5 <= retention < 1.0:
            raise ValueError("desired_retention must be between 0.5 and 0.99")
        if maximum < 1:
            raise ValueError("maximum_interval must be at least 1 day")
        return ReplayScheduler(**options)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"palace.toml [study]: {exc}") from None


def _apply(scheduler: ReplayScheduler, states: dict[str, MemoryState], review: Review) -> MemoryState:
    state = states.get(review.id)
    if state is None:
        state = MemoryState(review.id, Card(card_id=card_id(review.id), due=review.at))
        states[review.id] = state
    was_review = state.card.state == State.Review
    moment = review.at
    if state.card.last_review is not None and moment < state.card.last_review:
        moment = state.card.last_review  # clock skew between machines: never replay backwards in time
    scheduler.fuzz_seed = _fuzz_seed(review)
    state.card, _ = scheduler.review_card(state.card, Rating(review.rating), moment)
    state.reviews += 1
    state.lapses += int(was_review and review.rating == Rating.Again)
    state.last_rating = review.rating
    state.last_review = review.at
    state.ratings.append(review.rating)
    return state


def replay(reviews: list[Review], learner: str, now: datetime | None = None, settings: dict | None = None) -> Schedule:
    """Replay one learner's reviews (already in log order) into FSRS state per memory id."""
    schedule = Schedule(learner, now or datetime.now(timezone.utc), {}, make_scheduler(settings))
    for review in reviews:
        if review.learner == learner:
            schedule.after(review)
    return schedule
