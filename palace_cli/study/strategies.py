"""Which memories a session asks about: due, weak-spots, depth-first, adversarial, random."""

from __future__ import annotations

import math
import random
from collections import defaultdict
from dataclasses import dataclass

from palace_cli.core.notes import Memory
from palace_cli.core.text import content_stems
from palace_cli.study.scheduler import Schedule

STRATEGIES = ("due", "weak-spots", "depth-first", "adversarial", "random")


@dataclass
class Pick:
    """A memory chosen for a session, and why."""

    memory_id: str
    reason: str
    partner: str | None = None  # adversarial: the memory it is easily confused with


@dataclass
class Neighbour:
    """A memory easily confused with another: how similar, and by what measure."""

    memory_id: str
    score: float
    why: str


def _weakness(schedule: Schedule, memory_id: str) -> tuple:
    """Sort key, weakest first: lowest retrievability, then most lapses, then most overdue."""
    state = schedule.states[memory_id]
    return (schedule.retrievability(memory_id), -state.lapses, state.card.due, memory_id)


def _fmt_r(value: float | None) -> str:
    return "new" if value is None else f"R={value:.2f}"


def _new_order(memory_ids: list[str], prior: dict[str, float] | None, rng: random.Random) -> list[str]:
    """Never-reviewed memories: those with a weak prior (Red Queen failures, weak images) first, then shuffled."""
    shuffled = list(memory_ids)
    rng.shuffle(shuffled)
    if not prior:
        return shuffled
    return sorted(shuffled, key=lambda i: prior.get(i, 1.0))


def select(strategy: str, memories: dict[str, Memory], schedule: Schedule, n: int, rng: random.Random,
           domain: str | None = None, prior: dict[str, float] | None = None, neighbours=None) -> list[Pick]:
    """Up to n picks, in the order to ask them, from the memories of `domain` (all when None).

    `prior` (0 weak .. 1 strong) orders never-reviewed memories; `neighbours(memories, ids)` returns
    {id: [Neighbour]} for the adversarial strategy (default: keyword overlap).
    """
    pool = {i: m for i, m in memories.items() if domain is None or m.domain == domain}
    known = set(pool)
    reviewed = [i for i in schedule.states if i in known]
    new = _new_order(schedule.new_ids(known), prior, rng)
    if strategy == "random":
        chosen = rng.sample(sorted(known), min(n, len(known)))
        return [Pick(i, _fmt_r(schedule.retrievability(i))) for i in chosen]
    if strategy == "due":
        due = schedule.due_ids(known)
        picks = [Pick(i, f"due, {_fmt_r(schedule.retrievability(i))}") for i in due[:n]]
        return picks + [Pick(i, "new") for i in new[: n - len(picks)]]
    if strategy == "weak-spots":
        weak = sorted(reviewed, key=lambda i: _weakness(schedule, i))
        picks = [Pick(i, _weak_reason(schedule, i)) for i in weak[:n]]
        return picks + [Pick(i, "new" + (f", prior {prior[i]:.2f}" if prior and i in prior else ""))
                        for i in new[: n - len(picks)]]
    if strategy == "depth-first":
        return _depth_first(pool, memories, schedule, n)
    if strategy == "adversarial":
        return _adversarial(pool, schedule, n, new, neighbours or keyword_neighbours)
    raise ValueError(f"unknown strategy {strategy!r}")


def _weak_reason(schedule: Schedule, memory_id: str) -> str:
    state = schedule.states[memory_id]
    lapses = f", {state.lapses} lapse{'s' if state.lapses != 1 else ''}" if state.lapses else ""
    return f"weak, {_fmt_r(schedule.retrievability(memory_id))}{lapses}"


def _strength(schedule: Schedule, memory_id: str) -> float:
    value = schedule.retrievability(memory_id)
    return -1.0 if value is None else value  # unknown counts as weakest


def _depth_first(pool: dict[str, Memory], memories: dict[str, Memory], schedule: Schedule, n: int) -> list[Pick]:
    """Start at the weakest memory of the weakest domain in the pool and follow links depth-first, own domain first."""
    by_domain: dict[str, list[str]] = defaultdict(list)
    for memory in pool.values():
        by_domain[memory.domain].append(memory.id)
    if not by_domain:
        return []

    def domain_weakness(name: str) -> tuple:
        values = [_strength(schedule, i) for i in by_domain[name]]
        return (sum(values) / len(values), name)

    domain = min(by_domain, key=domain_weakness)
    order = sorted(by_domain[domain], key=lambda i: (_strength(schedule, i), i))
    picks: list[Pick] = []
    seen: set[str] = set()
    for start in order:
        stack = [(start, None)]
        while stack and len(picks) < n:
            memory_id, via = stack.pop()
            if memory_id in seen or memory_id not in memories:
                continue
            seen.add(memory_id)
            reason = f"{domain}, {_fmt_r(schedule.retrievability(memory_id))}" + (f", linked from {via}" if via else "")
            picks.append(Pick(memory_id, reason))
            memory = memories[memory_id]
            links = [link for link in memory.link_ids or memory.all_links if link in memories and link not in seen]
            # the stack pops from the end: same-domain links last in the list, weakest of them at the very end
            links.sort(key=lambda link: (memories[link].domain == domain, -_strength(schedule, link), link))
            stack.extend((link, memory_id) for link in links)
        if len(picks) >= n:
            break
    return picks


def _adversarial(memories: dict[str, Memory], schedule: Schedule, n: int, new: list[str], neighbours) -> list[Pick]:
    """Pairs of easily confused memories, asked back to back, weakest first."""
    reviewed = sorted((i for i in schedule.states if i in memories), key=lambda i: _weakness(schedule, i))
    seeds = (reviewed + new)[: max(n, 1) * 2]
    near = neighbours(memories, seeds)
    picks: list[Pick] = []
    used: set[str] = set()
    for seed in seeds:
        if len(picks) >= n:
            break
        if seed in used:
            continue
        partner = next((nb for nb in near.get(seed, []) if nb.memory_id not in used), None)
        picks.append(Pick(seed, _fmt_r(schedule.retrievability(seed)), partner.memory_id if partner else None))
        used.add(seed)
        if partner and len(picks) < n:
            picks.append(Pick(partner.memory_id, f"confusable with {seed} ({partner.why})", seed))
            used.add(partner.memory_id)
    return picks


def keyword_neighbours(memories: dict[str, Memory], seeds: list[str], k: int = 3) -> dict[str, list[Neighbour]]:
    """Nearest memories by shared subject, anchor and keyword words: cosine of idf-weighted word sets."""
    postings: dict[str, set[str]] = defaultdict(set)
    bags: dict[str, set[str]] = {}
    for memory in memories.values():
        bag = content_stems(" ".join([memory.subject, memory.anchor, *memory.keywords]))
        bags[memory.id] = bag
        for term in bag:
            postings[term].add(memory.id)
    total = len(memories)
    idf = {t: math.log((total + 1) / (len(ids) + 0.5)) for t, ids in postings.items()}
    norm = {i: math.sqrt(sum(idf[t] ** 2 for t in bag)) or 1.0 for i, bag in bags.items()}
    out = {}
    for seed in seeds:
        scores: dict[str, float] = defaultdict(float)
        shared: dict[str, list[str]] = defaultdict(list)
        for term in bags.get(seed, ()):
            if len(postings[term]) > max(50, total // 10):
                continue  # a term that many notes share says nothing about confusion
            for other in postings[term]:
                if other != seed:
                    scores[other] += idf[term] ** 2
                    shared[other].append(term)
        cosine = {o: v / (norm[seed] * norm[o]) for o, v in scores.items()}
        best = sorted(cosine, key=lambda o: (-cosine[o], o))[:k]
        out[seed] = [Neighbour(o, round(cosine[o], 3), "shared: " + ", ".join(sorted(shared[o])[:4])) for o in best]
    return out


def vector_neighbours(memories: dict[str, Memory], seeds: list[str], keys: list[str], matrix, hash_of,
                      k: int = 3) -> dict[str, list[Neighbour]]:
    """Nearest memories by cosine of stored embeddings (rows keyed by text hash); seeds without a vector get none."""
    import numpy as np

    row_of = {key: i for i, key in enumerate(keys)}
    owners: dict[int, list[str]] = defaultdict(list)
    for memory_id in sorted(memories):
        row = row_of.get(hash_of(memories[memory_id]))
        if row is not None:
            owners[row].append(memory_id)
    out = {}
    for seed in seeds:
        row = row_of.get(hash_of(memories[seed])) if seed in memories else None
        if row is None:
            continue
        sims = np.asarray(matrix @ np.asarray(matrix[row], dtype=np.float32))
        found: list[Neighbour] = []
        for candidate in np.argsort(-sims)[: 4 * k + 8]:
            for other in owners.get(int(candidate), []):
                if other != seed and len(found) < k:
                    found.append(Neighbour(other, round(float(sims[candidate]), 3), f"cosine {float(sims[candidate]):.2f}"))
        out[seed] = found
    return out
