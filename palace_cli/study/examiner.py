"""The Examiner: questions made from the notes themselves, each checked for leaked answers and answerability."""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from dataclasses import dataclass

from palace_cli.core.links import LINK_PATTERN
from palace_cli.core.notes import Memory
from palace_cli.core.text import (
    ALNUM,
    ALNUM_CONTRACTED,
    DULL,
    STOPWORDS,
    content_stems,
    normalize,
    prefix_root,
    prefix_roots,
    split_sentences,
    stem,
    words,
)
from palace_cli.study.evaluator import Element

KINDS = ("cloze", "anchor", "image", "facts", "link")
GENERATED = "generated"
BLANK = "_____"
REDACTED = "▒▒▒"
GENERIC_SUFFIXES = ("pattern", "protocol", "theorem", "algorithm", "model", "principle", "strategy", "technique")
FACTS_PROMPT = "What do you remember about {subject}? Name its key ideas in a few words."
DF_SAMPLE = 3000  # document frequencies from at most this many notes: enough for ranking terms


@dataclass
class Question:
    """One question about one memory: what is shown, what must be answered, and where it came from."""

    memory_id: str
    kind: str
    title: str
    prompt: str
    expected: list[Element]
    answer: str
    need: int = 1
    source: str = "notes"
    note: str = ""  # e.g. why a generated question was replaced

    @property
    def shown(self) -> str:
        """Everything the learner sees before answering."""
        return f"{self.title}\n{self.prompt}"

    def as_dict(self) -> dict:
        """JSON-ready form (includes the answer)."""
        return {"memory": self.memory_id, "kind": self.kind, "title": self.title, "prompt": self.prompt,
                "answer": self.answer, "expected": [e.forms for e in self.expected], "need": self.need,
                "source": self.source, "note": self.note}


def subject_forms(memory: Memory) -> list[str]:
    """Accepted names for a memory: subject, subject without its parenthesis, the parenthesis, aliases, id words."""
    forms = [memory.subject]
    bare = re.sub(r"\s*\([^)]*\)", "", memory.subject).strip()
    forms.append(bare)
    forms += [p.strip() for p in re.findall(r"\(([^)]*)\)", memory.subject)]
    forms += memory.aliases
    forms.append(memory.id.replace("-", " "))
    for form in list(forms):
        parts = form.split()
        if len(parts) > 1 and parts[-1].lower() in GENERIC_SUFFIXES:
            forms.append(" ".join(parts[:-1]))  # "Saga" for "Saga Pattern"
    seen, out = set(), []
    for form in forms:
        key = normalize(form)
        if key and key not in seen:
            seen.add(key)
            out.append(form)
    return out


def link_reasons(memory: Memory) -> dict[str, str]:
    """`[[id]]: reason` lines of the note's Links section, id -> reason."""
    reasons = {}
    for line in memory.body.splitlines():
        match = re.match(r"^\s*[-*]\s*" + LINK_PATTERN.pattern + r"\s*[:—-]\s*(.+)$", line)
        if match:
            reasons[match.group(1).strip()] = match.group(2).strip()
    return reasons


def leaks(shown: str, forms: list[str]) -> list[str]:
    """Accepted answers that the shown text gives away: the phrase itself, or every content word of it."""
    visible = prefix_roots(shown)
    padded = f" {normalize(shown)} "
    out = []
    for form in forms:
        needle = normalize(form)
        content = prefix_roots(form)
        if (needle and f" {needle} " in padded) or (content and content <= visible):
            out.append(form)
    return out


def _token_spans(sentence: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), m.group(0)) for m in ALNUM_CONTRACTED.finditer(sentence)]


class Examiner:
    """Makes questions for memories; term informativeness comes from document frequencies over the palace."""

    def __init__(self, memories: dict[str, Memory], seed: int | None = None):
        self.memories = memories
        self.rng = random.Random(seed)
        sample = sorted(memories)
        if len(sample) > DF_SAMPLE:
            sample = sample[:: math.ceil(len(sample) / DF_SAMPLE)]
        self.docs = max(1, len(sample))
        self.df: Counter[str] = Counter()
        for memory_id in sample:
            memory = memories[memory_id]
            self.df.update(content_stems(memory.subject + " " + memory.content))

    def idf(self, word: str) -> float:
        """Inverse document frequency of a word's stem (rare words score high)."""
        return math.log((self.docs + 1) / (self.df.get(stem(word.lower()), 0) + 0.5))

    def weight(self, word: str, tf: Counter) -> float:
        """tf-idf of a word in one memory: rare in the palace and repeated in this note is what the note is about."""
        return (1 + math.log(max(1, tf.get(stem(word.lower()), 0)))) * self.idf(word)

    @staticmethod
    def term_counts(memory: Memory) -> Counter:
        """Stem counts of a memory's content, anchor and keywords."""
        return Counter(stem(w) for w in words(f"{memory.content} {' '.join(memory.keywords)}") if w not in STOPWORDS)

    # ---- kinds --------------------------------------------------------------------------------

    def available(self, memory: Memory) -> list[str]:
        """The kinds that can be asked about this memory."""
        kinds = []
        if self._cloze_options(memory):
            kinds.append("cloze")
        if memory.anchor:
            kinds.append("anchor")
        if memory.image:
            kinds.append("image")
        if len(self._fact_terms(memory)) >= 2:
            kinds.append("facts")
        if any(link in self.memories for link in memory.link_ids or memory.all_links):
            kinds.append("link")
        return kinds

    def ask(self, memory: Memory, kind: str, variant: int = 0) -> Question | None:
        """A question of the given kind (variant picks among the best options), or None when it cannot be asked."""
        maker = {"cloze": self.cloze, "anchor": self.anchor, "image": self.image, "facts": self.facts,
                 "link": self.link}[kind]
        question = maker(memory, variant)
        if question is not None and validate(question, memory, self.memories):
            return None
        return question

    def _cloze_options(self, memory: Memory) -> list[tuple[float, str, int, int]]:
        """(score, sentence, start, end) of blankable terms in the content, best first."""
        subject = prefix_roots(memory.subject)
        keyword_stems = [tuple(stem(w) for w in words(k)) for k in memory.keywords]
        tf = self.term_counts(memory)
        options = []
        for sentence in split_sentences(memory.content):
            spans = _token_spans(sentence)
            if not 6 <= len(spans) <= 60:
                continue
            for size in (1, 2, 3):
                for i in range(len(spans) - size + 1):
                    chunk = spans[i : i + size]
                    gram = [t[2].lower() for t in chunk]
                    if gram[0] in STOPWORDS or gram[-1] in STOPWORDS or any(w in DULL for w in gram):
                        continue
                    if any(prefix_root(w) in subject for w in gram):
                        continue
                    between = sentence[chunk[0][1] : chunk[-1][0]] if size > 1 else ""
                    if size > 1 and re.search(r"[^\s-]", between.replace(" ", "")):
                        continue  # keep multi-word terms inside one clause ("bit array", not "bits, and")
                    if size == 1 and len(gram[0]) < 4 and not gram[0].isdigit():
                        continue
                    gram_stems = tuple(stem(w) for w in gram)
                    is_keyword = gram_stems in keyword_stems
                    if size > 1 and not is_keyword:
                        continue  # multi-word blanks only for the note's own keywords
                    score = sum(self.weight(w, tf) for w in gram) / size ** 0.5 + (1.5 if is_keyword else 0.0)
                    if any(t[2][:1].isupper() for t in chunk) and i > 0:
                        score += 0.5  # a proper name mid-sentence (RocksDB, Cassandra)
                    options.append((score, sentence, chunk[0][0], chunk[-1][1]))
        options.sort(key=lambda o: (-o[0], o[1], o[2]))
        return options

    def cloze(self, memory: Memory, variant: int = 0) -> Question | None:
        """Blank the most informative term of a content sentence (variant rotates through the top terms)."""
        options = self._cloze_options(memory)
        title = f"Fill the blank · {memory.subject}"
        tried = 0
        for _score, sentence, start, end in options[variant % 3 :] + options[: variant % 3]:
            answer = sentence[start:end]
            pattern = re.compile(r"\b" + r"[\s-]+".join(re.escape(w) for w in re.split(r"[\s-]+", answer)) + r"\w*",
                                 re.IGNORECASE)
            prompt = pattern.sub(BLANK, sentence)
            if not leaks(title + "\n" + prompt, [answer]):
                element = Element(answer, [answer], partial=len(words(answer)) >= 3)
                return Question(memory.id, "cloze", title, prompt, [element], answer)
            tried += 1
            if tried > 12:
                break
        return None

    def anchor(self, memory: Memory, variant: int = 0) -> Question | None:
        """Anchor to subject: which memory does this hook stand for?"""
        forms = subject_forms(memory)
        prompt = f"Which memory does the anchor “{memory.anchor}” stand for? (domain: {memory.domain})"
        return Question(memory.id, "anchor", "Anchor → memory", prompt, [Element(memory.subject, forms)],
                        memory.subject)

    def image(self, memory: Memory, variant: int = 0) -> Question | None:
        """Image to subject: the scene with the subject's own words redacted."""
        forms = subject_forms(memory)
        hidden = set().union(*(prefix_roots(f) for f in forms)) - {prefix_root(w) for w in GENERIC_SUFFIXES}
        scene = ALNUM.sub(lambda m: REDACTED if prefix_root(m.group(0)) in hidden else m.group(0),
                       memory.image)
        prompt = f"{scene}\n\nWhich memory is this scene?"
        return Question(memory.id, "image", "Image → memory", prompt, [Element(memory.subject, forms)],
                        memory.subject)

    def _fact_terms(self, memory: Memory) -> list[str]:
        """Key terms a good answer about the memory would mention: keywords found in the content, then rare words."""
        subject = prefix_roots(FACTS_PROMPT.format(subject=memory.subject) + " Recall")
        content = content_stems(memory.content)
        terms, taken = [], set()
        for keyword in memory.keywords:
            kstems = content_stems(keyword)
            if kstems and kstems <= content and not prefix_roots(keyword) & subject and not kstems & taken:
                terms.append(keyword)
                taken |= kstems
        tf = self.term_counts(memory)
        words_ = {w for w in words(memory.content) if len(w) >= 5 and w not in STOPWORDS and w not in DULL}
        rare = sorted(words_, key=lambda w: (-self.weight(w, tf), w))
        for word in rare:
            if len(terms) >= 4:
                break
            if prefix_root(word) not in subject and stem(word) not in taken:
                terms.append(word)
                taken.add(stem(word))
        return terms[:4]

    def facts(self, memory: Memory, variant: int = 0) -> Question | None:
        """Subject to key facts: name what you remember; credit for two of four key terms."""
        terms = self._fact_terms(memory)
        if len(terms) < 2:
            return None
        prompt = FACTS_PROMPT.format(subject=memory.subject)
        elements = [Element(t, [t], partial=True) for t in terms]
        return Question(memory.id, "facts", f"Recall · {memory.subject}", prompt, elements, ", ".join(terms),
                        need=min(2, len(elements)))

    def link(self, memory: Memory, variant: int = 0) -> Question | None:
        """A linked memory: which memory does this one lead to (by the reason given for the link)?"""
        reasons = link_reasons(memory)
        linked = [m for m in memory.link_ids or memory.all_links if m in self.memories]
        if not linked:
            return None
        target = self.memories[linked[variant % len(linked)]]
        reason = reasons.get(target.id, "")
        if reason:
            prompt = f"{memory.subject} links to another memory: {reason}. Which one?"
            forms = subject_forms(target)
            if not leaks(prompt, forms):
                return Question(memory.id, "link", "Linked memory", prompt, [Element(target.subject, forms)],
                                target.subject)
        # No usable reason: any linked memory is a right answer, except names the question itself shows.
        prompt = f"{memory.subject} links to {len(linked)} other memor{'y' if len(linked) == 1 else 'ies'}. Name one."
        hidden = [m for m in linked if not leaks(prompt, [self.memories[m].subject])]
        if not hidden:
            return None
        target = self.memories[hidden[variant % len(hidden)]]
        forms = [f for other in hidden for f in subject_forms(self.memories[other]) if not leaks(prompt, [f])]
        return Question(memory.id, "link", "Linked memory", prompt, [Element(target.subject, forms)], target.subject)


def validate(question: Question, memory: Memory, memories: dict[str, Memory] | None = None) -> list[str]:
    """Problems with a question: an answer the question gives away, or an answer the memory does not hold."""
    problems = []
    if not question.expected:
        return ["no expected answer"]
    for element in question.expected:
        leaked = leaks(question.shown, element.forms)
        if leaked:
            problems.append(f"the question gives away the answer {leaked[0]!r}")
        if not any(_answer_in_memory(form, question, memory, memories or {}) for form in element.forms):
            problems.append(f"the answer {element.label!r} is not in the memory")
    return problems


def _answer_in_memory(form: str, question: Question, memory: Memory, memories: dict[str, Memory]) -> bool:
    sources = [memory.subject, memory.id.replace("-", " "), " ".join(memory.aliases), memory.content,
               " ".join(memory.keywords)]
    if question.kind == "link":
        sources += [f for link in memory.link_ids or memory.all_links if link in memories for f in subject_forms(memories[link])]
    text = " ".join(sources)
    needle = normalize(form)
    if needle and f" {needle} " in f" {normalize(text)} ":
        return True
    wanted = content_stems(form)
    return bool(wanted) and wanted <= content_stems(text)
