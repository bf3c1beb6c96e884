"""What the review log says about a learner: what is due, retention, lapses, the weakest memories."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from palace_cli.palace import Palace
from palace_cli.core.layout import Problem
from palace_cli.editing.reviewlog import ReviewLog, learner_name
from palace_cli.study.scheduler import Schedule, replay
from palace_cli.study.session import current_memories, study_settings

CHART_DAYS = 14


@dataclass
class DueItem:
    """A reviewed memory and when it is next due."""

    id: str
    subject: str
    domain: str
    path: str
    due: datetime
    retrievability: float
    state: str
    reviews: int
    lapses: int

    def as_dict(self) -> dict:
        return {"id": self.id, "subject": self.subject, "domain": self.domain, "path": self.path,
                "due": self.due.isoformat(), "retrievability": round(self.retrievability, 3), "state": self.state,
                "reviews": self.reviews, "lapses": self.lapses}


@dataclass
class StudyStats:
    """Counts, retention and charts for one learner at one moment."""

    learner: str
    now: datetime
    memories: int
    reviewed: int
    new: int
    due_now: int
    due_today: int
    due_week: int
    reviews: int
    reviews_30d: int
    retention: float | None  # share of reviews of review-state cards not rated Again (true retention)
    retention_30d: float | None
    mean_retrievability: float | None
    lapses: int
    by_state: dict[str, int]
    weakest: list[DueItem]
    per_day: list[tuple[str, int]]  # reviews in each of the last CHART_DAYS days
    forecast: list[tuple[str, int]]  # reviewed memories coming due in each of the next CHART_DAYS days
    learners: list[str] = field(default_factory=list)
    orphans: int = 0  # reviews of memory ids no note has any more
    retired: int = 0  # memories left out of study because they are not valid now (superseded, expired)
    problems: list[Problem] = field(default_factory=list)

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {"learner": self.learner, "now": self.now.isoformat(), "memories": self.memories,
                "reviewed": self.reviewed, "new": self.new, "due_now": self.due_now, "due_today": self.due_today,
                "due_week": self.due_week, "reviews": self.reviews, "reviews_30d": self.reviews_30d,
                "retention": _round(self.retention), "retention_30d": _round(self.retention_30d),
                "mean_retrievability": _round(self.mean_retrievability), "lapses": self.lapses,
                "by_state": self.by_state, "weakest": [w.as_dict() for w in self.weakest],
                "per_day": [{"day": d, "reviews": c} for d, c in self.per_day],
                "forecast": [{"day": d, "due": c} for d, c in self.forecast], "learners": self.learners,
                "orphan_reviews": self.orphans, "retired": self.retired, "log_problems": [p.as_dict() for p in self.problems]}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def load_schedule(palace: Palace, learner: str | None = None, now: datetime | None = None):
    """(schedule, log read) for a learner (default: the person at this machine)."""
    read = ReviewLog(palace).read()
    schedule = replay(read.reviews, learner or learner_name(), now or datetime.now(timezone.utc), study_settings(palace))
    return schedule, read


def _item(schedule: Schedule, memory) -> DueItem:
    state = schedule.states[memory.id]
    return DueItem(memory.id, memory.subject, memory.domain, memory.path, state.due,
                   schedule.retrievability(memory.id), state.state, state.reviews, state.lapses)


def due_items(palace: Palace, learner: str | None = None, now: datetime | None = None, domain: str | None = None,
              within: timedelta | None = None) -> tuple[list[DueItem], int, Schedule, list[Problem]]:
    """Reviewed memories due by now (+within), most urgent first; also the count of never-reviewed memories
    and the review log lines that could not be read."""
    schedule, read = load_schedule(palace, learner, now)
    domain = palace.resolve_domain(domain) if domain else None
    memories = {i: m for i, m in current_memories(palace).items() if domain in (None, m.domain)}
    horizon = schedule.now + (within or timedelta(0))
    items = [_item(schedule, memories[i]) for i in schedule.due_ids(set(memories), horizon)]
    return items, len(schedule.new_ids(set(memories))), schedule, read.problems


def study_stats(palace: Palace, learner: str | None = None, now: datetime | None = None,
                weakest: int = 5) -> StudyStats:
    """Retention, due counts, lapses, the weakest memories and two small day charts."""
    schedule, read = load_schedule(palace, learner, now)
    now = schedule.now
    memories = current_memories(palace)
    known = set(memories)
    retired = set(palace.index.scan(light=True).memories) - known
    reviewed = [i for i in schedule.states if i in known]
    due = lambda delta: sum(1 for i in reviewed if schedule.states[i].due <= now + delta)  # noqa: E731
    recent = now - timedelta(days=30)
    graded = [(r, before) for r, before in zip(schedule.reviews, schedule.states_before) if before == "review"]
    values = [schedule.retrievability(i) for i in reviewed]
    today = now.date()
    per_day_counts = Counter(r.at.date() for r in schedule.reviews)
    forecast_counts = Counter(max(schedule.states[i].due.date(), today) for i in reviewed)
    weak = sorted(reviewed, key=lambda i: (schedule.retrievability(i), -schedule.states[i].lapses, i))[:weakest]
    return StudyStats(
        learner=schedule.learner, now=now, memories=len(known), reviewed=len(reviewed),
        new=len(known) - len(reviewed), due_now=due(timedelta(0)), due_today=due(timedelta(days=1)),
        due_week=due(timedelta(days=7)), reviews=len(schedule.reviews),
        reviews_30d=sum(1 for r in schedule.reviews if r.at >= recent),
        retention=_retention(graded), retention_30d=_retention([(r, b) for r, b in graded if r.at >= recent]),
        mean_retrievability=sum(values) / len(values) if values else None,
        lapses=sum(schedule.states[i].lapses for i in reviewed),
        by_state=dict(Counter(schedule.states[i].state for i in reviewed)),
        weakest=[_item(schedule, memories[i]) for i in weak],
        per_day=[((today - timedelta(days=d)).isoformat(), per_day_counts.get(today - timedelta(days=d), 0))
                 for d in range(CHART_DAYS - 1, -1, -1)],
        forecast=[((today + timedelta(days=d)).isoformat(), forecast_counts.get(today + timedelta(days=d), 0))
                  for d in range(CHART_DAYS)],
        learners=read.learners(), orphans=sum(1 for r in schedule.reviews if r.id not in known | retired),
        retired=len(retired),
        problems=read.problems,
    )


def _retention(graded) -> float | None:
    if not graded:
        return None
    return sum(1 for review, _ in graded if review.rating > 1) / len(graded)
