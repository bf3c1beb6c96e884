"""Grounded answers: retrieve (two hops), abstain or generate, then verify the answer's citations.

Abstention uses the retrieval confidence of the top hit, before any generation (so it costs
nothing): with an embedder installed that is the top hit's dense cosine to the question; without
one (or in a lexical profile) it is the top hit's BM25 score squashed into [0, 1) as
1 - exp(-bm25 / 10). The two live on different scales, so each has its own threshold.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import datetime

from .errors import ConfigError, ModelError, UsageError
from .generation import cached
from .palace import Palace
from .retrieve import Recall, context_entry, recall
from .tokens import STOPWORDS, words
from .validity import format_moment, parse_moment
from .verify import Verdict, verify_response

# Calibrated by `palace bench verify` on the example palace's 24 absent-knowledge questions
# (the threshold that maximises abstention F1; see docs/benchmarks.md). Override in palace.toml:
# [retrieval] abstain_below = 0.4 (either signal) or abstain_below = {dense = 0.4, lexical = 0.5}.
ABSTAIN_BELOW = {"dense": 0.351, "lexical": 0.886}
MAX_TOKENS = 160
ANSWER_INSTRUCTION = ("Answer the question in two or three sentences using only the memories above. "
                      "End with the verify token of each memory you used, written as [verify: token].")
NO_CONTEXT_INSTRUCTION = ("Answer the question in two or three sentences. "
                          "End with the verify token of each memory you used, written as [verify: token].")


@dataclass
class Answer:
    """What `ask` returns: the answer (or an abstention), its verdict, and the memories behind it."""

    question: str
    text: str
    status: str                  # grounded | ungrounded | abstained
    confidence: float
    threshold: float
    signal: str                  # dense | lexical
    reason: str = ""
    verdict: Verdict | None = None
    memories: list[dict] = field(default_factory=list)   # handed: id, subject, verify, cited
    route: list[str] = field(default_factory=list)
    needs: list[str] = field(default_factory=list)       # question words no near memory covers
    suggestion: str = ""
    model: str = ""
    cached: bool = False
    elapsed_ms: float = 0.0
    raw: str = ""                # the generator's text as it came, when `text` dropped repeats from it

    @property
    def exit_code(self) -> int:
        """0 for a grounded answer; 1 when abstaining or when the answer failed verification."""
        return 0 if self.status == "grounded" else 1

    def as_dict(self) -> dict:
        """The JSON contract of `palace ask --json`."""
        return {
            "question": self.question, "status": self.status, "answer": self.text, "reason": self.reason,
            "confidence": round(self.confidence, 4), "threshold": self.threshold, "signal": self.signal,
            "memories": self.memories, "route": self.route, "needs": self.needs, "suggestion": self.suggestion,
            "verdict": self.verdict.as_dict() if self.verdict else None, "model": self.model,
            "cached": self.cached, "elapsed_ms": round(self.elapsed_ms, 1),
            **({"raw_answer": self.raw} if self.raw else {}),
        }


def build_prompt(context: str, question: str) -> str:
    """The prompt for a generator: the recall context (with its verify tokens), the question, the rule."""
    if not context.strip():
        return f"Question: {question}\n\n{NO_CONTEXT_INSTRUCTION}"
    return f"{context.rstrip()}\n\nQuestion: {question}\n\n{ANSWER_INSTRUCTION}"


def drop_repeats(text: str) -> str:
    """The text without paragraphs that repeat an earlier one, or begin one and were cut off by
    max_tokens (small models loop until the limit)."""
    seen: list[str] = []
    kept = []
    for paragraph in re.split(r"\n\s*\n", text.strip()):
        key = " ".join(words(paragraph))
        if key and not any(earlier == key or earlier.startswith(key + " ") for earlier in seen):
            seen.append(key)
            kept.append(paragraph.strip())
    return "\n\n".join(kept)


def signal_of(result: Recall) -> str:
    """Which confidence signal a recall reports: "dense" (cosine) or "lexical" (squashed BM25)."""
    return "dense" if result.hits and "dense" in result.hits[0].parts else "lexical"


def abstain_threshold(palace: Palace, signal: str) -> float:
    """The abstention threshold for `signal` from palace.toml [retrieval] abstain_below, else the default."""
    setting = palace.config.retrieval.get("abstain_below")
    if setting is None:
        return ABSTAIN_BELOW[signal]
    if isinstance(setting, dict):
        value = setting.get(signal, ABSTAIN_BELOW[signal])
    else:
        value = setting
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"palace.toml [retrieval] abstain_below: {value!r} is not a number") from None


def handed_memories(palace: Palace, refs: list[str]) -> list[dict]:
    """What verify needs of the memories handed to a model ({id, subject, verify}), each named exactly."""
    return [context_entry(palace.memory(ref)) for ref in dict.fromkeys(refs)]


def superseded_among(palace: Palace, ids, when: datetime | None = None) -> dict[str, dict]:
    """The memories among `ids` not valid at `when` (None: now): id -> {status, superseded_by, valid_from,
    valid_until}; status is superseded, expired or future (not yet valid)."""
    versions = palace.index.versions()
    out = {}
    for memory_id in ids:
        if versions.known(memory_id) and not versions.valid_at(memory_id, when):
            out[memory_id] = {"status": versions.status(memory_id, when),
                              "superseded_by": list(versions.successors.get(memory_id, [])),
                              "valid_from": format_moment(versions.start(memory_id)),
                              "valid_until": format_moment(versions.end(memory_id))}
    return out


def verify_answer(response: str, handed: list[dict], palace: Palace | None = None, rule: str = "any",
                  as_of=None) -> Verdict:
    """Check an answer against the memories handed over; with a palace, also against every other token in it
    (a token of a memory that was not handed over means the answer did not come from the context), and
    whether a cited memory was superseded by the moment asked about (now, or `as_of`): a stale answer."""
    all_tokens, superseded, when = None, None, None
    if palace is not None:
        try:
            when = parse_moment(as_of)
        except ValueError as exc:
            raise UsageError(f"--as-of: {exc}") from None
        palace.refresh(embedder=None)
        all_tokens = palace.index.store.tokens()
        superseded = superseded_among(palace, [str(entry["id"]) for entry in handed], when)
    return verify_response(response, handed, all_tokens, rule=rule, superseded=superseded,
                           as_of=format_moment(when))


def needs_for(question: str, result: Recall) -> list[str]:
    """Words of the question (not stopwords) that none of the nearest memories mentions."""
    near = set()
    for hit in result.hits:
        if hit.memory:
            near.update(words(hit.memory.search_text()))
        elif hit.turn:
            near.update(words(hit.turn.text))
    seen, out = set(), []
    for word in words(question):
        if len(word) > 2 and word not in STOPWORDS and word not in near and word not in seen:
            seen.add(word)
            out.append(word)
    return out


def ask(palace: Palace, question: str, *, k: int | None = None, profile: str = "reference", generator=None,
        use_cache: bool = True, max_tokens: int = MAX_TOKENS, threshold: float | None = None,
        rule: str = "any") -> Answer:
    """Retrieve, then abstain (confidence below the threshold) or generate and verify the answer."""
    started = time.perf_counter()
    result = recall(palace, question, k=k, profile=profile)
    signal = signal_of(result)
    limit = abstain_threshold(palace, signal) if threshold is None else threshold
    # Only memories whose block made it into the context within the budget were really handed over.
    handed = [context_entry(h.memory) for h in result.handed if h.memory]
    answer = Answer(question, "", "abstained", result.confidence, limit, signal,
                    route=[r.domain for r in result.route])
    if not result.hits or result.confidence < limit or not result.context:
        answer.text = "not in this palace"
        nearest = ", ".join(h.id for h in result.hits[:3]) or "none"
        answer.reason = (f"retrieval confidence {result.confidence:.2f} ({signal}) is below {limit:g}; "
                         f"nearest memories: {nearest}")
        answer.needs = needs_for(question, result)
        # Name a domain only when routing was sure of one; for a question from nowhere it is noise.
        domain = answer.route[0] if len(answer.route) == 1 and not result.fallback else "DOMAIN"
        topic = " ".join(answer.needs[:4]) or question
        answer.suggestion = f'palace add "{topic}" --domain {domain}'
        answer.memories = [{**m, "cited": False} for m in handed]
        answer.elapsed_ms = (time.perf_counter() - started) * 1000
        return answer
    if generator is None:
        from .backends import generator_from_config

        generator = generator_from_config(palace.config.models, palace.root)
        if generator is None:
            raise ModelError("no generator: run `palace models install`, or set [models] endpoint and "
                             "endpoint_model in palace.toml")
    model = cached(generator, use_cache)
    text = model.complete(build_prompt(result.context, question), max_tokens=max_tokens, temperature=0.0)
    verdict = verify_response(text, handed, palace.index.store.tokens(), rule=rule,
                              superseded=superseded_among(palace, [m["id"] for m in handed]))
    cited = set(verdict.cited_ids)
    # The verdict is on the whole text; only what is shown drops the repeats.
    answer.text, answer.verdict = drop_repeats(text), verdict
    answer.raw = text if answer.text != text.strip() else ""
    answer.status = "grounded" if verdict.grounded else "ungrounded"
    answer.reason = verdict.reason
    answer.memories = [{**m, "cited": m["id"] in cited} for m in handed]
    answer.model, answer.cached = model.model_id, model.last_cached
    answer.elapsed_ms = (time.perf_counter() - started) * 1000
    return answer
