"""Grounded answers: retrieve (two hops), abstain, or answer (generated when a capable model's answer verifies,
else extractive: the handed memories' own sentences, each cited), then verify.

Abstention weighs recall's top hit before any generation (abstention.py). A generated answer is tried only
when the generator is worth asking (backends.unfit_reason: configured, and under `use_generator = "auto"`
big enough to follow the citation instruction); when it fails verification the extractive answer replaces it,
so `ask` never presents a suspected hallucination of its own as the answer.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import datetime

from palace_cli.answers.abstention import Evidence, thresholds, weigh
from palace_cli.errors import ModelError, UsageError
from palace_cli.answers.extract import compose, extract, sentence_line
from palace_cli.backends.cache import cached
from palace_cli.palace import Palace
from palace_cli.search.retrieve import recall
from palace_cli.search.hits import Recall, context_entry
from palace_cli.core.tokens import contains_phrase
from palace_cli.core.text import STOPWORDS, words
from palace_cli.core.dates import format_moment, parse_moment
from palace_cli.answers.verify import CITATION, Verdict, verify_response

MAX_TOKENS = 160
ANSWER_INSTRUCTION = ("Answer the question in two or three sentences using only the memories above. "
                      "End with the verify token of each memory you used, written as [verify: token].")
NO_CONTEXT_INSTRUCTION = ("Answer the question in two or three sentences. "
                          "End with the verify token of each memory you used, written as [verify: token].")
# A small model often pastes its prompt back (headings, verify lines, the question): that cites the token
# without answering anything (docs/benchmarks.md, "echoes context"), so it does not count as an answer.
ECHO = re.compile(r"(?im)^\s*(##\s|verify:|question:|content:|anchor:)")
# Words an answer uses to talk about answering: "The answer to the question about X is:" says nothing new.
ANSWER_TALK = "about answer answers question questions asked ask context memory memories note notes cite cited below above"


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
    mode: str | None = None      # generated | extractive (None when abstaining)
    note: str = ""               # why the answer is extractive: the model was not asked, or failed verification
    evidence: Evidence | None = None
    sentences: list[dict] = field(default_factory=list)  # extractive: id, text, path, line of each sentence
    generated: dict | None = None                        # a generated answer that failed verification

    @property
    def exit_code(self) -> int:
        """0 for a grounded answer; 1 when abstaining or when the answer failed verification."""
        return 0 if self.status == "grounded" else 1

    def as_dict(self) -> dict:
        """The JSON contract of `palace ask --json`."""
        data = {
            "question": self.question, "status": self.status, "mode": self.mode, "answer": self.text,
            "reason": self.reason, "note": self.note,
            "confidence": round(self.confidence, 4), "threshold": self.threshold, "signal": self.signal,
            "evidence": self.evidence.as_dict() if self.evidence else None,
            "memories": self.memories, "route": self.route, "needs": self.needs, "suggestion": self.suggestion,
            "verdict": self.verdict.as_dict() if self.verdict else None, "model": self.model,
            "cached": self.cached, "elapsed_ms": round(self.elapsed_ms, 1),
        }
        if self.sentences:
            data["sentences"] = self.sentences
        if self.generated:
            data["generated"] = self.generated
        if self.raw:
            data["raw_answer"] = self.raw
        return data


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


def abstain_threshold(palace: Palace, signal: str) -> float:
    """The confidence threshold for `signal` (palace.toml [retrieval] abstain_below, else the default)."""
    return thresholds(palace, signal)[0]


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


def suggested_domain(domains: list[str], question: str) -> str:
    """The domain to name in the `palace add` suggestion: the one domain whose name the question says in its
    own words; else the placeholder DOMAIN. (ask abstained, so where recall looked is no evidence of where
    the missing memory belongs: recall ranks every domain flat.)"""
    said = set(words(question))
    named = [d for d in domains if set(words(d.replace("-", " ").replace("_", " "))) <= said]
    return named[0] if len(named) == 1 else "DOMAIN"


def _abstain(answer: Answer, question: str, result: Recall, evidence: Evidence, domains: list[str]) -> Answer:
    answer.text = "not in this palace"
    nearest = ", ".join(h.id for h in result.hits[:3]) or "none"
    if not result.hits:
        answer.reason = "no memory matches the question"
    elif not result.context:
        answer.reason = f"no memory fits in the context budget; nearest memories: {nearest}"
    else:
        answer.reason = f"{evidence.describe()}; nearest memories: {nearest}"
    answer.needs = needs_for(question, result)
    topic = " ".join(answer.needs[:4]) or question
    answer.suggestion = f'palace add "{topic}" --domain {suggested_domain(domains, question)}'
    return answer


def not_an_answer(text: str, terms: list[str], analyze) -> tuple[str, str] | None:
    """(status, reason) when a generated text that cites its memories still answers nothing, else None: it
    pastes its prompt back, loops on one sentence until the token limit, or (outside its citations) holds none
    of the question's terms, or nothing but them. SmolLM2-135M passes verification in each of these ways (docs/benchmarks.md)."""
    from palace_cli.study.llm import repetitive

    if ECHO.search(text):
        return "echo", "it pastes its context back instead of answering"
    if repetitive(text):
        return "loops", "it repeats itself until the token limit"
    pairs = analyze(CITATION.sub(" ", text))
    said = {term for term, _ in pairs}
    if terms and not said.intersection(terms):
        return "off-topic", "it cites a memory but says nothing about the question"
    new = {term for term, word in pairs if word.lower() not in STOPWORDS} - set(terms)
    if terms and not new - {term for term, _ in analyze(ANSWER_TALK)}:
        return "restates", "it restates the question without answering it"
    return None


def _generated(answer: Answer, generator, prompt: str, handed: list[dict], tokens: dict[str, str], *,
               use_cache: bool, max_tokens: int, rule: str, superseded: dict, terms: list[str], analyze) -> bool:
    """Ask the generator; True when its answer verifies (and is an answer: not_an_answer) and is now
    `answer`'s, else False with the reason in `answer.note` and the failed answer in `answer.generated`."""
    model = cached(generator, use_cache)
    try:
        text = model.complete(prompt, max_tokens=max_tokens, temperature=0.0)
    except ModelError as exc:  # an endpoint that is down must not cost the answer
        answer.note = f"the generator failed ({exc})"
        return False
    verdict = verify_response(text, handed, tokens, rule=rule, superseded=superseded)
    shown = drop_repeats(text)
    answer.model, answer.cached = model.model_id, model.last_cached
    failed = (verdict.status, verdict.reason) if not verdict.grounded else not_an_answer(text, terms, analyze)
    if failed is None:
        answer.mode, answer.status, answer.text, answer.verdict = "generated", "grounded", shown, verdict
        answer.raw = text if shown != text.strip() else ""
        answer.reason = verdict.reason
        answer.memories = [{**m, "cited": m["id"] in verdict.cited_ids} for m in handed]
        return True
    status, reason = failed
    answer.generated = {"answer": shown, "status": status, "reason": reason, "model": model.model_id}
    answer.note = f"the model's answer was not used ({status}: {reason})"
    return False


def extractive(palace: Palace, question: str, memories: list, handed: list[dict], tokens: dict[str, str],
               rule: str = "any", superseded: dict | None = None) -> tuple[str, Verdict, list]:
    """The extractive answer from `memories` (ranked), its verdict and the sentences quoted; a sentence that
    carries another memory's token is left out (the answer must cite only what it was given)."""
    left_out: set[str] = set()
    while True:
        chosen = extract(palace.index.text, question, memories, every=rule == "all", leave_out=frozenset(left_out))
        text = compose(chosen, memories)
        verdict = verify_response(text, handed, tokens, rule=rule, superseded=superseded)
        foreign = [c.token for c in verdict.foreign]
        carrying = {s.text for s in chosen if any(contains_phrase(s.text, token) for token in foreign)}
        if not carrying:
            return text, verdict, chosen
        left_out |= carrying


def ask(palace: Palace, question: str, *, k: int | None = None, profile: str = "reference", generator=None,
        use_cache: bool = True, max_tokens: int = MAX_TOKENS, threshold: float | None = None,
        rule: str = "any", generate: str | None = None) -> Answer:
    """Retrieve, then abstain (too little evidence) or answer: the generator's answer when it verifies, else
    the extractive one. `generate` (auto, always, never) overrides palace.toml [models] use_generator;
    `generator` overrides the configured model."""
    from palace_cli.backends import USE_GENERATOR, generator_from_config, unfit_reason, use_generator

    if generate is not None and generate not in USE_GENERATOR:
        raise UsageError(f"unknown generate setting {generate!r}; choose from {', '.join(USE_GENERATOR)}")
    started = time.perf_counter()
    result = recall(palace, question, k=k, profile=profile)
    evidence = weigh(palace, question, result, threshold)
    memories = [h.memory for h in result.handed if h.memory]  # only blocks that fit the budget were handed over
    handed = [context_entry(m) for m in memories]
    answer = Answer(question, "", "abstained", evidence.confidence, evidence.threshold, evidence.signal,
                    route=[r.domain for r in result.route], evidence=evidence,
                    memories=[{**m, "cited": False} for m in handed])
    if not result.hits or not result.context or not evidence.sure:
        return _finish(_abstain(answer, question, result, evidence, palace.domains()), started)
    tokens = palace.index.store.tokens()
    superseded = superseded_among(palace, [m["id"] for m in handed])
    use = generate or use_generator(palace.config.models)
    if use != "never":  # "never" asks for the extractive answer: nothing to explain
        if generator is None:
            generator = generator_from_config(palace.config.models, palace.root)
        answer.note = unfit_reason(generator, palace.config.models, use, task="cite its sources")
        if not answer.note and _generated(answer, generator, build_prompt(result.context, question), handed, tokens,
                                          use_cache=use_cache, max_tokens=max_tokens, rule=rule,
                                          superseded=superseded, terms=evidence.terms,
                                          analyze=palace.index.text.words):
            return _finish(answer, started)
    text, verdict, chosen = extractive(palace, question, memories, handed, tokens, rule, superseded)
    by_id = {m.id: m for m in memories}
    answer.mode, answer.text, answer.verdict = "extractive", text, verdict
    answer.status = "grounded" if verdict.grounded else "ungrounded"
    answer.reason = verdict.reason
    answer.sentences = [{"id": s.memory_id, "text": s.text, "path": by_id[s.memory_id].path,
                         "line": sentence_line(by_id[s.memory_id], s.text)} for s in chosen]
    answer.memories = [{**m, "cited": m["id"] in verdict.cited_ids} for m in handed]
    return _finish(answer, started)


def _finish(answer: Answer, started: float) -> Answer:
    answer.elapsed_ms = (time.perf_counter() - started) * 1000
    return answer
