"""Grounded answers: retrieve, then answer only when the evidence holds the question's key terms, else abstain.

The evidence is what an extractive answer would quote from everything recall handed over (memories, turns,
sections; extract.py), weighed by abstention.py. When it answers, the answer is a capable generator's if it
cites and verifies (backends.unfit_reason: configured, and under `use_generator = "auto"` big enough to
follow the citation instruction), else the extractive one: the quoted sentences, each cited and checked
word for word. So `ask` never presents a suspected hallucination of its own as the answer.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from palace_cli.answers.abstention import Evidence, needs_of, thresholds, weigh
from palace_cli.answers.checking import (handed_memories, superseded_among, unit_lookup, verify_answer,  # noqa: F401
                                         with_texts)
from palace_cli.answers.extract import Source, compose, extract, sentence_line, sources_of
from palace_cli.answers.verify import CITATION, LOCATION_CITATION, UNIT_CITATION, Verdict, verify_response
from palace_cli.backends.cache import cached
from palace_cli.core.text import STOPWORDS, words
from palace_cli.core.tokens import contains_phrase
from palace_cli.errors import ModelError, UsageError
from palace_cli.palace import Palace
from palace_cli.search.hits import Recall
from palace_cli.search.context import MIXED_CITE, PLAIN_CITE
from palace_cli.search.retrieve import recall

MAX_TOKENS = 160
ANSWER_INSTRUCTION = ("Answer the question in two or three sentences using only the memories and turns above. "
                      "End with the verify token of each memory you used, written as [verify: token]; quote the "
                      "words of each turn you used in double quotes, followed by [turn ID].")
# For a context with notes that have no verify token (search.context says so in its header): cite them by place.
PLAIN_INSTRUCTION = ("Answer the question in two or three sentences using only the notes and turns above. "
                     "End with where each note you used is, as shown after its title, like [notes/Name.md:12] (or its "
                     "verify token, like [verify: token], when it has one); quote the words of each turn you used in "
                     "double quotes, followed by [turn ID].")
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
    status: str                  # answered | abstained | ungrounded (an answer that failed verification)
    confidence: float
    threshold: float
    signal: str                  # dense | lexical
    reason: str = ""
    verdict: Verdict | None = None
    memories: list[dict] = field(default_factory=list)   # handed memories: id, subject, verify, cited
    turns: list[dict] = field(default_factory=list)      # handed turns: id, path, line, cited
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
    sentences: list[dict] = field(default_factory=list)  # extractive: id, kind, text, path, line of each quote
    generated: dict | None = None                        # a generated answer that failed verification

    @property
    def exit_code(self) -> int:
        """0 for an answer; 1 when abstaining or when the answer failed verification."""
        return 0 if self.status == "answered" else 1

    def as_dict(self) -> dict:
        """The JSON contract of `palace ask --json`."""
        data = {
            "question": self.question, "status": self.status, "mode": self.mode, "answer": self.text,
            "reason": self.reason, "note": self.note,
            "confidence": round(self.confidence, 4), "threshold": self.threshold, "signal": self.signal,
            "evidence": self.evidence.as_dict() if self.evidence else None,
            "memories": self.memories, "turns": self.turns, "route": self.route, "needs": self.needs,
            "suggestion": self.suggestion,
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
    plain = PLAIN_CITE in context or MIXED_CITE in context
    return f"{context.rstrip()}\n\nQuestion: {question}\n\n{PLAIN_INSTRUCTION if plain else ANSWER_INSTRUCTION}"


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


def suggested_domain(domains: list[str], question: str) -> str:
    """The domain to name in the `palace add` suggestion: the one domain whose name the question says in its
    own words; else the placeholder DOMAIN. (ask abstained, so where recall looked is no evidence of where
    the missing memory belongs: recall ranks every domain flat.)"""
    said = set(words(question))
    named = [d for d in domains if set(words(d.replace("-", " ").replace("_", " "))) <= said]
    return named[0] if len(named) == 1 else "DOMAIN"


def _abstain(answer: Answer, question: str, result: Recall, evidence: Evidence, domains: list[str], analyze) -> Answer:
    """Say `not in this palace`, why (the nearest evidence and what it lacks), and what a note would need."""
    answer.text = "not in this palace"
    if not result.relevant:
        answer.reason = f"nothing in this palace is about the question ({result.why})"
    elif not result.handed:
        nearest = ", ".join(h.id for h in result.hits[:3]) or "none"
        answer.reason = f"nothing fits in the context budget; nearest: {nearest}"
    elif evidence.missing:
        answer.reason = (f"the nearest evidence, {evidence.nearest}, does not mention "
                         f"{', '.join(evidence.missing)}; {evidence.describe()}")
    else:
        answer.reason = f"the nearest evidence, {evidence.nearest}, covers too little: {evidence.describe()}"
    answer.needs = needs_of(question, evidence, analyze)
    topic = " ".join(answer.needs[:4]) or question
    answer.suggestion = f'palace add "{topic}" --domain {suggested_domain(domains, question)}'
    return answer


def not_an_answer(text: str, terms: list[str], analyze) -> tuple[str, str] | None:
    """(status, reason) when a generated text that cites its memories still answers nothing, else None: it
    pastes its prompt back, loops on one sentence until the token limit, or (outside its citations) holds none
    of the question's terms, or nothing but them. SmolLM2-135M passes verification in each of these ways (docs/benchmarks.md)."""
    from palace_cli.core.text import repetitive

    if ECHO.search(text):
        return "echo", "it pastes its context back instead of answering"
    if repetitive(text):
        return "loops", "it repeats itself until the token limit"
    pairs = analyze(LOCATION_CITATION.sub(" ", UNIT_CITATION.sub(" ", CITATION.sub(" ", text))))
    said = {term for term, _ in pairs}
    if terms and not said.intersection(terms):
        return "off-topic", "it cites a memory but says nothing about the question"
    new = {term for term, word in pairs if word.lower() not in STOPWORDS} - set(terms)
    if terms and not new - {term for term, _ in analyze(ANSWER_TALK)}:
        return "restates", "it restates the question without answering it"
    return None


def _generated(answer: Answer, generator, prompt: str, handed: list[dict], tokens: dict[str, str], *,
               use_cache: bool, max_tokens: int, rule: str, superseded: dict, terms: list[str], analyze,
               lookup=None) -> bool:
    """Ask the generator; True when its answer verifies (citations and quotes, and is an answer: not_an_answer)
    and is now `answer`'s, else False with the reason in `answer.note` and the failed answer in
    `answer.generated`."""
    model = cached(generator, use_cache)
    try:
        text = model.complete(prompt, max_tokens=max_tokens, temperature=0.0)
    except ModelError as exc:  # an endpoint that is down must not cost the answer
        answer.note = f"the generator failed ({exc})"
        return False
    verdict = verify_response(text, handed, tokens, rule=rule, superseded=superseded, lookup=lookup)
    shown = drop_repeats(text)
    answer.model, answer.cached = model.model_id, model.last_cached
    failed = (verdict.status, verdict.reason) if not verdict.grounded else not_an_answer(text, terms, analyze)
    if failed is None:
        answer.mode, answer.status, answer.text, answer.verdict = "generated", "answered", shown, verdict
        answer.raw = text if shown != text.strip() else ""
        answer.reason = verdict.reason
        _mark_cited(answer, verdict)
        return True
    status, reason = failed
    answer.generated = {"answer": shown, "status": status, "reason": reason, "model": model.model_id}
    answer.note = f"the model's answer was not used ({status}: {reason})"
    return False


def _mark_cited(answer: Answer, verdict: Verdict) -> None:
    cited = set(verdict.cited_ids)
    answer.memories = [{**m, "cited": m["id"] in cited} for m in answer.memories]
    answer.turns = [{**t, "cited": t["id"] in cited} for t in answer.turns]


def extractive(palace: Palace, question: str, sources: list[Source], handed: list[dict], tokens: dict[str, str],
               rule: str = "any", superseded: dict | None = None, lookup=None) -> tuple[str, Verdict, list]:
    """The extractive answer from `sources` (ranked), its verdict and the sentences quoted; a sentence that
    carries another memory's token is left out (the answer must cite only what it was given)."""
    left_out: set[str] = set()
    while True:
        chosen = extract(palace.index.text, question, sources, every=rule == "all", leave_out=frozenset(left_out))
        text = compose(chosen)
        verdict = verify_response(text, handed, tokens, rule=rule, superseded=superseded, lookup=lookup)
        foreign = [c.token for c in verdict.foreign if c.token]
        carrying = {s.text for s in chosen if any(contains_phrase(s.text, token) for token in foreign)}
        if not carrying:
            return text, verdict, chosen
        left_out |= carrying


def handed_entries(sources: list[Source]) -> list[dict]:
    """What verify is handed for the sources: memories with their token, turns and sections by id; each with the
    text its quotes are checked against, and where it is (path, first line) for [path:line] citations."""
    from palace_cli.answers.checking import memory_text

    out = []
    for source in sources:
        if source.kind == "turn":
            out.append({"id": source.id, "kind": "turn", "text": f"{source.speaker}: {source.text}",
                        "path": source.path, "line": source.line})
        else:
            memory = source.memory
            entry = {"id": source.id, "subject": memory.subject if memory is not None else source.frame,
                     "verify": source.token, "text": memory_text(memory) if memory is not None else source.text,
                     "path": source.path, "line": source.line}
            if source.kind == "section":
                entry["kind"] = "section"
            out.append(entry)
    return out


def ask(palace: Palace, question: str, *, k: int | None = None, profile: str = "reference", generator=None,
        use_cache: bool = True, max_tokens: int = MAX_TOKENS, threshold: float | None = None,
        rule: str = "any", generate: str | None = None) -> Answer:
    """Retrieve, then abstain (the evidence does not hold the question's key terms) or answer: the generator's
    answer when it verifies, else the extractive one. `generate` (auto, always, never) overrides palace.toml
    [models] use_generator; `generator` overrides the configured model."""
    from palace_cli.backends import USE_GENERATOR, use_generator

    if generate is not None and generate not in USE_GENERATOR:
        raise UsageError(f"unknown generate setting {generate!r}; choose from {', '.join(USE_GENERATOR)}")
    started = time.perf_counter()
    result = recall(palace, question, k=k, profile=profile)
    sources = sources_of(result.handed)  # only units whose blocks fit the budget were handed over
    handed = handed_entries(sources)
    quoted = extract(palace.index.text, question, sources, every=rule == "all")
    evidence = weigh(palace, question, result, quoted, threshold)
    answer = Answer(question, "", "abstained", evidence.confidence, evidence.threshold, evidence.signal,
                    route=[r.domain for r in result.route], evidence=evidence,
                    memories=[{"id": e["id"], "subject": e.get("subject", ""), "verify": e.get("verify", ""),
                               "cited": False} for e in handed if e.get("kind", "memory") != "turn"],
                    turns=[{"id": s.id, "path": s.path, "line": s.line, "cited": False}
                           for s in sources if s.kind == "turn"])
    if not result.relevant or not quoted or not evidence.sure:
        return _finish(_abstain(answer, question, result, evidence, palace.domains(), palace.index.text.words),
                       started)
    tokens = palace.index.store.tokens()
    superseded = superseded_among(palace, [s.id for s in sources if s.kind == "memory"])
    lookup = unit_lookup(palace)
    if _try_generator(palace, answer, generator, generate or use_generator(palace.config.models), result, handed,
                      tokens, use_cache=use_cache, max_tokens=max_tokens, rule=rule, superseded=superseded,
                      terms=evidence.terms, lookup=lookup):
        return _finish(answer, started)
    text, verdict, chosen = extractive(palace, question, sources, handed, tokens, rule, superseded, lookup)
    answer.mode, answer.text, answer.verdict = "extractive", text, verdict
    answer.status = "answered" if verdict.grounded else "ungrounded"
    answer.reason = verdict.reason
    answer.sentences = [{"id": s.source.id, "kind": s.source.kind, "text": s.text, "path": s.source.path,
                         "line": sentence_line(s.source, s.text)} for s in chosen]
    _mark_cited(answer, verdict)
    return _finish(answer, started)


def _try_generator(palace: Palace, answer: Answer, generator, use: str, result: Recall, handed: list[dict],
                   tokens: dict[str, str], **checks) -> bool:
    """The generated answer, when the generator is worth asking and its answer verifies (see _generated)."""
    from palace_cli.backends import generator_from_config, unfit_reason

    if use == "never":  # "never" asks for the extractive answer: nothing to explain
        return False
    if generator is None:
        generator = generator_from_config(palace.config.models, palace.root)
    answer.note = unfit_reason(generator, palace.config.models, use, task="cite its sources")
    if answer.note:
        return False
    return _generated(answer, generator, build_prompt(result.context, answer.question), handed, tokens,
                      analyze=palace.index.text.words, **checks)


def _finish(answer: Answer, started: float) -> Answer:
    answer.elapsed_ms = (time.perf_counter() - started) * 1000
    return answer
