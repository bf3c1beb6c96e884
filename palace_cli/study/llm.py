"""Everything that asks a generator model: generated questions, blind recall from anchors, stronger images.

A small model says many wrong things; every answer is parsed strictly and validated before use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from palace_cli.core.notes import Memory
from palace_cli.core.text import content_stems, repetitive, split_sentences, words
from palace_cli.core.tokens import contains_phrase
from palace_cli.errors import ModelError
from palace_cli.study.evaluator import Element
from palace_cli.study.examiner import Question, leaks, validate

NEEDS_MODEL = "needs a generator model: run `palace models install`"
MAX_ANSWER_WORDS = 6
LETTERS = "ABCDEF"

QUESTION_PROMPT = """Write a quiz question whose answer is a word or short phrase copied from the text.

Text: The Seine flows through Paris before it reaches the English Channel.
Question: Which river flows through Paris?
Answer: The Seine

Text: {sentence}
Question:"""

ANCHOR_PROMPT = """You are recalling a memory palace about {topic}.
The memory whose anchor image is "{anchor}" stands for one concept from {domain}.
Which concept is it? Reply with the concept's name only."""

ROUTE_PROMPT = """You are recalling a memory palace about {topic}.
A fact: "{fact}"
Which of these memory anchors holds that fact?
{choices}
Reply with one letter."""

EVOLVE_PROMPT = """Rewrite this memory-palace image so it is more vivid and memorable.
Concept: {subject}. {gist}
Current image: {image}
Keep the exact phrase "{verify}". Add: {missing}.
Write one paragraph of 4 to 7 sentences in the second person ("you"), no headings.
New image:"""


def model_name(generator) -> str:
    """The learner name for a generator's reviews: `llm:<model id>`."""
    return f"llm:{getattr(generator, 'model_id', 'model')}"


def _complete(generator, prompt: str, max_tokens: int, stop: list[str] | None = None) -> str:
    try:
        return generator.complete(prompt, max_tokens=max_tokens, temperature=0.0, stop=stop)
    except ModelError as exc:
        return f"\x00error: {exc}"


def parse_generated(text: str) -> tuple[str, str] | None:
    """(question, answer) from `<question>\\nAnswer: <answer>`, or None when the reply does not have that shape."""
    match = re.search(r"^\s*(?:Question:\s*)?(.+?\?)\s*(?:\n|\s)+Answer:\s*(.+?)\s*$", text, re.DOTALL | re.IGNORECASE)
    if not match:
        return None
    question = " ".join(match.group(1).split())
    answer = match.group(2).strip().splitlines()[0].strip().rstrip(".").strip("\"'“”")
    return (question, answer) if question and answer else None


def generate_question(generator, memory: Memory, memories: dict[str, Memory]) -> tuple[Question | None, str]:
    """A generated question about one content sentence, validated; (None, why) when it is unusable."""
    candidates = [s for s in split_sentences(memory.content) if 8 <= len(s.split()) <= 45]
    if not candidates:
        return None, "no sentence to ask about"
    sentence = max(candidates, key=lambda s: (sum(k.lower() in s.lower() for k in memory.keywords), -len(s)))
    reply = _complete(generator, QUESTION_PROMPT.format(sentence=sentence), 64, stop=["Text:", "\n\n\n"])
    if reply.startswith("\x00"):
        return None, reply[1:]
    parsed = parse_generated(reply)
    if parsed is None:
        return None, "the model's reply has no `Answer:` line"
    text, answer = parsed
    if len(words(answer)) > MAX_ANSWER_WORDS:
        return None, f"the answer is longer than {MAX_ANSWER_WORDS} words"
    if not 3 <= len(words(text)) <= 40:
        return None, "the question is too short or too long"
    source = content_stems(sentence)
    if not (contains_phrase(sentence, answer) or (content_stems(answer) and content_stems(answer) <= source)):
        return None, "the answer is not in the sentence the question was made from"
    if len((content_stems(text) - content_stems(answer)) & source) < 2:
        return None, "the question is not about its sentence"
    question = Question(memory.id, "generated", f"Question · {memory.subject}", text,
                        [Element(answer, [answer], partial=len(words(answer)) >= 3)], answer,
                        source=model_name(generator))
    problems = validate(question, memory, memories)
    if problems:
        return None, problems[0]
    return question, ""


# ---- the LLM learner: blind recall from anchors only ---------------------------------------


@dataclass
class Recall:
    """One blind-recall attempt: what the model was asked, what it said, and what was expected."""

    kind: str  # anchor (anchor -> subject) or route (fact -> which anchor)
    prompt: str
    reply: str
    expected: list[Element]
    answer: str
    chance: float | None = None  # the score of a blind guess, for a multiple choice


def recall_anchor(generator, memory: Memory, topic: str, domain_text: str) -> Recall:
    """Ask the model which concept an anchor stands for; it sees the anchor and the domain, nothing else."""
    from palace_cli.study.examiner import subject_forms

    prompt = ANCHOR_PROMPT.format(topic=topic, anchor=memory.anchor, domain=domain_text)
    reply = _complete(generator, prompt, 24, stop=["\n"])
    return Recall("anchor", prompt, "" if reply.startswith("\x00") else reply,
                  [Element(memory.subject, subject_forms(memory))], memory.subject)


def recall_route(generator, memory: Memory, fact: str, others: list[Memory], topic: str, order: list[int]) -> Recall:
    """Ask the model which of several anchors holds a fact (the fact has its answer blanked)."""
    options = [memory] + others[: len(LETTERS) - 1]
    shuffled = [options[i] for i in order if i < len(options)]
    choices = "\n".join(f"{LETTERS[i]}) {m.anchor}" for i, m in enumerate(shuffled))
    letter = LETTERS[shuffled.index(memory)]
    prompt = ROUTE_PROMPT.format(topic=topic, fact=fact, choices=choices)
    reply = _complete(generator, prompt, 8, stop=["\n"])
    return Recall("route", prompt, "" if reply.startswith("\x00") else reply,
                  [Element(f"{letter}) {memory.anchor}", [memory.anchor])], f"{letter}) {memory.anchor}",
                  1 / len(shuffled))


def route_choice(reply: str, prompt: str) -> str:
    """The anchor a multiple-choice reply chose: by its letter, or by the anchor text when there is no letter.

    A reply whose letter and text name different anchors chose nothing (it is graded wrong).
    """
    from palace_cli.study.evaluator import Element, element_matched

    choices = dict(re.findall(r"^([A-F])\) (.+)$", prompt, re.MULTILINE))
    match = re.match(r"^\s*\(?([A-F])\b[).:]?\s*(.*)$", reply, re.DOTALL)
    if not match or match.group(1) not in choices:
        return reply
    chosen, text = choices[match.group(1)], match.group(2).strip()
    named = [a for a in choices.values() if text and element_matched(Element(a, [a]), text)]
    if named and chosen not in named:
        return ""
    return chosen


# ---- the Evolver: a stronger image --------------------------------------------------------


def propose_image(generator, memory: Memory, missing: list[str], hints: dict[str, str]) -> tuple[str | None, str]:
    """A candidate new Image from the model, cleaned up; (None, why) when the reply is unusable."""
    gist = split_sentences(memory.content)[0] if memory.content else ""
    wanted = "; ".join(f"{name} ({hints[name]})" for name in missing[:5]) or "more sensory detail and emotion"
    prompt = EVOLVE_PROMPT.format(subject=memory.subject, gist=gist, image=memory.image, verify=memory.verify,
                                  missing=wanted)
    reply = _complete(generator, prompt, 320, stop=["\n\n\n", "Concept:", "Current image:"])
    if reply.startswith("\x00"):
        return None, reply[1:]
    text = clean_image(reply)
    if len(text) < 120:
        return None, "the model's image is too short"
    if repetitive(text):
        return None, "the model repeated itself"
    if memory.verify and not contains_phrase(text, memory.verify):
        text = keep_token(text, memory.image, memory.verify)
    if leaks(text, [memory.subject]):
        return None, "the new image names the subject"
    return text, ""


def clean_image(text: str) -> str:
    """One paragraph: no headings, list markers, labels or stray quotes, whitespace collapsed."""
    lines = [re.sub(r"^\s*(?:[-*>]+|\d+[.)])\s*", "", line) for line in text.splitlines()]
    lines = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    text = " ".join(" ".join(lines).split())
    text = re.sub(r"^(?:new image|image)\s*:\s*", "", text, flags=re.IGNORECASE)
    text = text.strip().strip("\"“”")
    end = max(text.rfind(". "), text.rfind("! "), text.rfind("? "))
    if text and text[-1] not in ".!?\"”" and end > 0:
        text = text[: end + 1]  # cut at max_tokens: drop the unfinished last sentence
    return text


def keep_token(text: str, old_image: str, verify: str) -> str:
    """Append the old image's sentence that carries the verify token, so the token stays in the Image."""
    for sentence in split_sentences(old_image):
        if contains_phrase(sentence, verify):
            return f"{text.rstrip()} {sentence}"
    return f"{text.rstrip()} ({verify})"
