"""Red Queen pre-learning: a generator model recalls memories from their anchors alone, round after round.

Its reviews go to the log as learner `llm:<model>`, a schedule apart from the person's; the memories
it cannot recall are the ones whose anchors and images most need strengthening.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

from palace_cli.errors import UsageError
from palace_cli.palace import Palace
from palace_cli.core.smashin import score_memory
from palace_cli.study.evaluator import AGAIN, GOOD, HARD, Grade, grade
from palace_cli.study.examiner import Examiner
from palace_cli.study.llm import model_name, recall_anchor, recall_route, route_choice
from palace_cli.editing.reviewlog import Review, ReviewLog
from palace_cli.study.scheduler import replay
from palace_cli.study.session import current_memories, llm_prior, study_settings
from palace_cli.study.strategies import STRATEGIES, Pick, keyword_neighbours, select

WEAK_BELOW = 0.5
PRIOR_SAMPLE = 2000


@dataclass
class Attempt:
    """One blind-recall attempt by the model and its grade."""

    round: int
    memory_id: str
    kind: str
    reply: str
    expected: str
    grade: Grade
    rating: int
    chance: float | None = None

    def as_dict(self) -> dict:
        return {"round": self.round, "id": self.memory_id, "kind": self.kind, "reply": self.reply,
                "expected": self.expected, "verdict": self.grade.verdict, "score": round(self.grade.score, 3),
                "rating": self.rating, "chance": round(self.chance, 3) if self.chance is not None else None}


@dataclass
class WeakMemory:
    """A memory the model failed to recall, with its image's SMASHIN score and missing factors."""

    memory_id: str
    subject: str
    path: str
    mean_score: float
    attempts: int
    smashin: int
    missing: list[str]

    def as_dict(self) -> dict:
        return {"id": self.memory_id, "subject": self.subject, "path": self.path,
                "mean_score": round(self.mean_score, 3), "attempts": self.attempts, "smashin": self.smashin,
                "missing": self.missing, "evolve": f"palace evolve {self.memory_id}"}


@dataclass
class RedQueenReport:
    """Every attempt of every round, per-round accuracy, and the weak memories to evolve."""

    learner: str
    strategy: str
    rounds: int
    attempts: list[Attempt] = field(default_factory=list)
    weak: list[WeakMemory] = field(default_factory=list)

    def round_accuracy(self) -> list[float]:
        """The share of correct recalls in each round."""
        out = []
        for number in range(1, self.rounds + 1):
            mine = [a for a in self.attempts if a.round == number]
            out.append(sum(a.grade.verdict == "correct" for a in mine) / len(mine) if mine else 0.0)
        return out

    def kind_accuracy(self) -> dict[str, tuple[float, float | None]]:
        """(share correct, share a blind guess would get) per kind (anchor: name it; route: pick its anchor)."""
        out = {}
        for kind in sorted({a.kind for a in self.attempts}):
            mine = [a for a in self.attempts if a.kind == kind]
            chances = [a.chance for a in mine if a.chance is not None]
            out[kind] = (sum(a.grade.verdict == "correct" for a in mine) / len(mine),
                         sum(chances) / len(chances) if chances else None)
        return out

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {"learner": self.learner, "strategy": self.strategy, "rounds": self.rounds,
                "round_accuracy": [round(a, 3) for a in self.round_accuracy()],
                "kind_accuracy": {k: {"correct": round(v, 3), "chance": round(c, 3) if c is not None else None}
                                  for k, (v, c) in self.kind_accuracy().items()},
                "attempts": [a.as_dict() for a in self.attempts], "weak": [w.as_dict() for w in self.weak]}


def rating_for(result: Grade) -> int:
    """The model cannot judge its own recall: correct is Good, partial is Hard, anything else Again."""
    return {"correct": GOOD, "partial": HARD}.get(result.verdict, AGAIN)


def run_red_queen(palace: Palace, generator, rounds: int = 3, strategy: str = "weak-spots", n: int = 10,
                  domain: str | None = None, seed: int = 0, log: ReviewLog | None = None,
                  clock: Callable[[], datetime] | None = None,
                  progress: Callable[[int, int, str], None] | None = None) -> RedQueenReport:
    """Run `rounds` rounds of blind recall by the generator over n memories each; log every attempt."""
    if rounds < 1 or n < 1:
        raise UsageError("--rounds and -n must be at least 1")
    if strategy not in STRATEGIES:
        raise UsageError(f"unknown strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
    clock = clock or (lambda: datetime.now(timezone.utc))
    log = log or ReviewLog(palace)
    learner = model_name(generator)
    memories = current_memories(palace)
    domain = palace.resolve_domain(domain) if domain else None
    topic = palace.config.name
    examiner = Examiner(memories, seed=seed)
    rng = random.Random(seed)
    read = log.read()
    schedule = replay(read.reviews, learner, clock(), study_settings(palace))
    prior = _prior(memories, domain, seed, read)
    report = RedQueenReport(learner, strategy, rounds)
    tested: set[str] = set()
    attempts_of: Counter[str] = Counter()
    total = rounds * min(n, sum(1 for m in memories.values() if domain in (None, m.domain)))
    done = 0
    for number in range(1, rounds + 1):
        if strategy == "weak-spots":
            picks = _weak_round(prior, tested, n)
        else:
            picks = select(strategy, memories, schedule, n, rng, domain, prior)
        for pick in picks:
            memory = memories[pick.memory_id]
            kind = "anchor" if attempts_of[memory.id] % 2 == 0 else "route"  # a retest asks the other way
            review, attempt = _attempt(generator, examiner, memory, memories, kind, topic, palace, rng,
                                       (clock, strategy, learner, number))
            log.append(review)
            schedule.after(review)
            report.attempts.append(attempt)
            prior[memory.id] = attempt.grade.score
            tested.add(memory.id)
            attempts_of[memory.id] += 1
            done += 1
            if progress:
                progress(done, total, memory.id)
    report.weak = weak_memories(palace, report)
    return report


def _prior(memories: dict, domain: str | None, seed: int, read) -> dict[str, float]:
    """memory id -> what is known of how well the model recalls it, before this run: its last score in the log,
    else its image's SMASHIN score (of a sample, in a huge palace)."""
    pool = sorted(i for i, m in memories.items() if domain in (None, m.domain))
    if len(pool) > PRIOR_SAMPLE:  # scoring every image of a huge palace costs minutes; a sample ranks well enough
        pool = random.Random(seed).sample(pool, PRIOR_SAMPLE)
    prior = {i: score_memory(memories[i]).score / 12 for i in pool}
    prior.update(llm_prior(read))
    return prior


def _attempt(generator, examiner: Examiner, memory, memories, kind: str, topic: str, palace: Palace, rng,
             run: tuple) -> tuple[Review, Attempt]:
    """One blind recall of a memory, graded: (the review to log, the attempt to report); `run` is (clock,
    strategy, learner, round number)."""
    clock, strategy, learner, number = run
    started = time.monotonic()
    recall = _recall(generator, examiner, memory, memories, kind, topic, palace, rng)
    answer = route_choice(recall.reply, recall.prompt) if recall.kind == "route" else recall.reply
    result = grade(recall.expected, answer)
    rating = rating_for(result)
    review = Review(memory.id, clock(), rating, recall.kind, strategy, learner,
                    int((time.monotonic() - started) * 1000), result.score)
    return review, Attempt(number, memory.id, recall.kind, recall.reply, recall.answer, result, rating, recall.chance)


def _weak_round(prior: dict[str, float], tested: set[str], n: int) -> list[Pick]:
    """Up to half the round re-tests this run's failures (with the other question kind); the rest is new
    ground, weakest first. Retrievability right after a round is near 1 everywhere, so it cannot rank here:
    the model's own last scores, then the images' SMASHIN scores, do."""
    failed = sorted((i for i in tested if prior[i] < WEAK_BELOW), key=lambda i: (prior[i], i))
    fresh = sorted((i for i in prior if i not in tested), key=lambda i: (prior[i], i))
    retest = failed[: n // 2] if fresh else failed[:n]
    chosen = retest + fresh[: n - len(retest)]
    chosen += [i for i in failed if i not in chosen][: n - len(chosen)]
    return [Pick(i, "retest" if i in tested else f"prior {prior[i]:.2f}") for i in chosen]


def _recall(generator, examiner: Examiner, memory, memories, kind: str, topic: str, palace: Palace, rng):
    spec = palace.config.domains.get(memory.domain)
    domain_text = spec.description if spec and spec.description else memory.domain.replace("-", " ")
    if kind == "route":
        fact = examiner.cloze(memory)
        domain = {i: m for i, m in memories.items() if m.domain == memory.domain}
        near = [nb.memory_id for nb in keyword_neighbours(domain, [memory.id], k=5).get(memory.id, [])]
        rest = sorted(set(domain) - set(near) - {memory.id})
        near += rng.sample(rest, min(len(rest), 5 - len(near)))  # always six choices when the domain has them
        others = [memories[i] for i in near]
        if fact is not None and others:
            order = list(range(len(others) + 1))
            rng.shuffle(order)
            return recall_route(generator, memory, fact.prompt, others, topic, order)
    return recall_anchor(generator, memory, topic, domain_text)


def weak_memories(palace: Palace, report: RedQueenReport) -> list[WeakMemory]:
    """Memories whose mean score over the run is below one half, weakest (then weakest image) first."""
    memories = palace.scan().memories
    scores: dict[str, list[float]] = {}
    for attempt in report.attempts:
        scores.setdefault(attempt.memory_id, []).append(attempt.grade.score)
    weak = []
    for memory_id, values in scores.items():
        mean = sum(values) / len(values)
        if mean < WEAK_BELOW and memory_id in memories:
            memory = memories[memory_id]
            smashin = score_memory(memory)
            weak.append(WeakMemory(memory_id, memory.subject, memory.path, mean, len(values), smashin.score,
                                   smashin.missing))
    weak.sort(key=lambda w: (w.mean_score, w.smashin, w.memory_id))
    return weak
