"""Verify checks: did an answer cite the units it was handed, and only those, and is every quote verbatim?

A memory is cited by its verify token (`[verify: token]`), a turn by `[turn ID]`, a note without a token or a
section by `[note ID]` / `[section ID]`, and any handed unit by where it is, `[path:line]` (the unit of that file
whose first line is the last at or before `line`: a note, its section, a session's turn). A quote is text in
double quotes before a citation, or, before a citation other than a token with no quotes, the text since the
previous citation on its line: it must be in the cited unit word for word (case, punctuation and spacing aside), as the unit is
written or as it reads (core/readable.py: links as their labels, no callout markers or block ids, a table
row as `Header: cell; Header: cell`), which is how `ask` quotes it. Pure functions."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from palace_cli.errors import PalaceError, UsageError
from palace_cli.core.readable import readable
from palace_cli.core.tokens import contains_phrase, find_phrases
from palace_cli.core.text import fold, normalize, words

RULES = ("any", "all")
# How a model is told to cite (see retrieve.build_context): "[verify: the token]".
CITATION = re.compile(r"\[\s*verify\s*:\s*([^\]\n]{0,200}?)\s*\]", re.IGNORECASE)
UNIT_CITATION = re.compile(r"\[\s*(turn|note|section)\s+([^\]\s]{1,300})\s*\]", re.IGNORECASE)
# Where a unit is, as search and recall show it: `[notes/Weekly review.md:12]` (a Markdown file and a line).
LOCATION_CITATION = re.compile(r"\[\s*`?([^\[\]\n`]{1,300}?\.md):(\d{1,9})`?\s*\]", re.IGNORECASE)
QUOTE = re.compile(r'"([^"\n]+)"|\u201c([^\u201d\n]+)\u201d')


@dataclass
class Citation:
    """A token found in the answer: whose it is, the token, and whether it was spelled exactly."""

    id: str
    token: str
    exact: bool
    words: tuple[int, int] = (0, 0)  # [first, end) word offsets in the normalised answer
    kind: str = "memory"              # memory (by its token) | turn | note | section (by [kind ID])

    def as_dict(self) -> dict:
        data = {"id": self.id, "token": self.token, "match": "exact" if self.exact else "variant"}
        if self.kind != "memory":
            data["kind"] = self.kind
        return data


@dataclass
class Verdict:
    """The outcome of checking one answer against the memories handed to the model."""

    grounded: bool
    status: str  # grounded | uncited | incomplete | foreign | stale | empty | unverifiable
    reason: str
    rule: str = "any"
    handed: list[str] = field(default_factory=list)
    cited: list[Citation] = field(default_factory=list)
    uncited: list[str] = field(default_factory=list)
    foreign: list[Citation] = field(default_factory=list)
    partial: list[dict] = field(default_factory=list)
    unknown_citations: list[str] = field(default_factory=list)
    untokened: list[str] = field(default_factory=list)
    foreign_checked: bool = True
    stale: list[dict] = field(default_factory=list)  # cited memories not valid at the moment asked about
    as_of: str = ""
    quotes: list[dict] = field(default_factory=list)  # {id, kind, quote, found}: each quote checked word for word

    @property
    def exit_code(self) -> int:
        """0 when grounded, 1 when a hallucination is suspected (like `git diff --exit-code`)."""
        return 0 if self.grounded else 1

    @property
    def cited_ids(self) -> list[str]:
        """Ids of the handed memories whose token the answer cites, in order of first citation."""
        return [c.id for c in self.cited]

    def as_dict(self) -> dict:
        """The JSON contract of `palace verify --json`."""
        return {
            "grounded": self.grounded, "status": self.status, "reason": self.reason, "rule": self.rule,
            "handed": self.handed, "cited": [c.as_dict() for c in self.cited], "uncited": self.uncited,
            "foreign": [c.as_dict() for c in self.foreign], "partial": self.partial,
            "unknown_citations": self.unknown_citations, "untokened": self.untokened,
            "foreign_checked": self.foreign_checked, "stale": self.stale, "as_of": self.as_of or None,
            "quotes": self.quotes,
        }


def verify_response(response: str, handed: list[dict], all_tokens: dict[str, str] | None = None,
                    rule: str = "any", superseded: dict[str, dict] | None = None, as_of: str = "",
                    lookup=None) -> Verdict:
    """Check `response` against the handed units and every token of the palace.

    `handed` holds one entry per unit: {id, verify} for a memory, {id, kind: "turn"|"note"|"section"} for the
    others, each with its quotable "text" when quotes are to be checked, and its "path" and first "line" when
    [path:line] citations are to name it. `lookup(id)` tells whether a unit
    that was not handed exists (a [turn ID] citation of one is foreign). Grounded means: no token or
    citation of a unit outside the context, no cited memory in `superseded` (id -> {superseded_by,
    valid_until}: not valid at the moment asked about), every quote word for word in its unit, and at least
    one (rule "any") or every (rule "all") handed memory that has a token cited (for "any", a turn, note or
    section citation counts). Tokens match ignoring case, accents, punctuation, hyphens, whitespace, how a
    compound is spaced and plural endings.
    """
    if rule not in RULES:
        raise UsageError(f"unknown rule {rule!r}; choose from {', '.join(RULES)}")
    order, units, handed_tokens, untokened = _handed(handed)
    others = {i: t for i, t in (all_tokens or {}).items() if i not in handed_tokens and i not in untokened and words(t)}
    verdict = Verdict(False, "", "", rule=rule, handed=order, untokened=untokened,
                      foreign_checked=all_tokens is not None, as_of=as_of)
    seen = _token_citations(verdict, response, handed_tokens, others)
    _unit_citations(verdict, response, units, seen, lookup)
    verdict.uncited = [i for i in order if i in handed_tokens and i not in seen]
    verdict.stale = [{"id": c.id, **(superseded or {})[c.id]} for c in verdict.cited if c.id in (superseded or {})]
    citations = [c for c in CITATION.findall(response)]
    verdict.partial = _partials(response, citations, {i: handed_tokens[i] for i in verdict.uncited})
    known = list(handed_tokens.values()) + [c.token for c in verdict.foreign]
    partial_tokens = [p["token"] for p in verdict.partial]
    verdict.unknown_citations += [c for c in citations if not any(_overlaps(c, t) for t in known + partial_tokens)]
    verdict.quotes = check_quotes(response, units, handed_tokens)

    _decide(verdict, response, handed_tokens, units)
    return verdict


def _handed(handed: list[dict]) -> tuple[list[str], dict[str, dict], dict[str, str], list[str]]:
    """The handed units once each, in order: (their ids, id -> entry, id -> verify token of those that have one,
    the memories handed without a token)."""
    handed_tokens: dict[str, str] = {}
    untokened: list[str] = []
    order: list[str] = []
    units: dict[str, dict] = {}
    for entry in handed:
        memory_id, token = str(entry["id"]), str(entry.get("verify") or "")
        if memory_id in order:
            continue
        order.append(memory_id)
        units[memory_id] = entry
        if words(token):
            handed_tokens[memory_id] = token
        elif entry.get("kind", "memory") == "memory":
            untokened.append(memory_id)
    return order, units, handed_tokens, untokened


def _token_citations(verdict: Verdict, response: str, handed_tokens: dict[str, str], others: dict[str, str]) -> set[str]:
    """Record each verify token the response holds, once per memory: cited when handed, foreign otherwise; returns
    the ids found."""
    matches = _maximal(find_phrases(response, {**others, **handed_tokens}), set(handed_tokens))
    seen: set[str] = set()
    for memory_id, start, end, exact in matches:
        if memory_id in seen:
            continue
        seen.add(memory_id)
        token = handed_tokens.get(memory_id) or others[memory_id]
        citation = Citation(memory_id, token, exact, (start, end))
        (verdict.cited if memory_id in handed_tokens else verdict.foreign).append(citation)
    return seen


def _unit_mentions(response: str, units: dict[str, dict]) -> list[tuple[int, int, str, str]]:
    """(start, end, kind, id) of each [turn|note|section ID] and [path:line] citation; a location names the
    handed unit it falls in (see `located`), else the path as written."""
    found = [(m.start(), m.end(), m.group(1).lower(), m.group(2)) for m in UNIT_CITATION.finditer(response)]
    for match in LOCATION_CITATION.finditer(response):
        path = match.group(1).strip()
        unit_id = located(units, path, int(match.group(2)))
        kind = units[unit_id].get("kind", "note") if unit_id else "note"
        found.append((match.start(), match.end(), "note" if kind == "memory" else kind, unit_id or path))
    return sorted(found)


def located(units: dict[str, dict], path: str, line: int) -> str | None:
    """The id of the handed unit of file `path` that line `line` falls in: the one whose first line is the last at
    or before it (the file's first unit when the line is before all of them); None when no unit is of that file."""
    of_file = sorted(((int(e.get("line") or 0), unit_id) for unit_id, e in units.items() if e.get("path") == path),
                     key=lambda pair: pair[0])
    if not of_file:
        return None
    before = [unit_id for first, unit_id in of_file if first <= line]
    return before[-1] if before else of_file[0][1]


def _unit_citations(verdict: Verdict, response: str, units: dict[str, dict], seen: set[str], lookup) -> None:
    """[turn ID], [note ID], [section ID], [path:line]: cited when the unit was handed, foreign when it exists but
    was not, unknown otherwise."""
    for _, _, kind, unit_id in _unit_mentions(response, units):
        if unit_id in units:
            if unit_id not in seen:
                seen.add(unit_id)
                verdict.cited.append(Citation(unit_id, "", True, kind=kind))
        elif lookup is not None and lookup(unit_id) is not None:
            if all(c.id != unit_id for c in verdict.foreign):
                verdict.foreign.append(Citation(unit_id, "", True, kind=kind))
        else:
            verdict.unknown_citations.append(f"{kind} {unit_id}")


def check_quotes(response: str, units: dict[str, dict], handed_tokens: dict[str, str]) -> list[dict]:
    """Every quote of the answer and whether its cited unit holds it word for word: text in double quotes before
    a citation, or, before a [turn|note|section ...] or [path:line] citation without quotes, the text since the
    previous citation on its line. Quotes of a unit whose text is not known are not checked (and not listed)."""
    marks = sorted([(m.start(), m.end(), "token", m.group(1)) for m in CITATION.finditer(response)]
                   + _unit_mentions(response, units))
    out: list[dict] = []
    previous = 0
    for start, end, kind, name in marks:
        span = response[previous:start]
        span = span[span.rfind("\n") + 1:]
        previous = end
        unit_id = name if kind != "token" else next(
            (i for i, _, _, _ in find_phrases(name, handed_tokens)), None)
        entry = units.get(unit_id) if unit_id else None
        if entry is None or entry.get("text") is None:
            continue
        quotes = [a or b for a, b in QUOTE.findall(span)]
        if not quotes and kind != "token":
            quotes = [span.strip(" \t-*:>\u2013\u2014")]
        for quote in (q.strip() for q in quotes):
            if words(quote):
                out.append({"id": unit_id, "kind": entry.get("kind", "memory"), "quote": quote,
                            "found": quoted_from(entry["text"], quote)})
    return out


def quoted_from(text: str, quote: str) -> bool:
    """Whether `quote` is in `text` word for word: as written, or as it reads (core/readable.py)."""
    return contains_phrase(text, quote) or contains_phrase(readable(text), quote)


def _decide(verdict: Verdict, response: str, handed_tokens: dict[str, str], units: dict[str, dict]) -> None:
    misquoted = [q for q in verdict.quotes if not q["found"]]
    if not normalize(response):
        verdict.status, verdict.reason = "empty", "the answer is empty"
    elif verdict.foreign:
        names = ", ".join(c.id for c in verdict.foreign)
        verdict.status = "foreign"
        verdict.reason = f"the answer cites {names}, which was not in its context"
    elif verdict.stale:
        verdict.status = "stale"
        when = f"on {verdict.as_of}" if verdict.as_of else "now"
        verdict.reason = "the answer cites " + "; ".join(_stale_reason(s, when) for s in verdict.stale)
    elif misquoted:
        verdict.status = "misquoted"
        verdict.reason = "; ".join(f"\u201c{q['quote']}\u201d is not in {q['id']}" for q in misquoted)
    elif not handed_tokens and not any(c.kind != "memory" for c in verdict.cited) and \
            not any(e.get("kind", "memory") != "memory" for e in units.values()):
        verdict.status = "unverifiable"
        verdict.reason = "no memory in the context has a verify token, so nothing can be checked"
    elif not verdict.cited:
        verdict.status = "uncited"
        verdict.reason = "the answer cites nothing of its context (no verify token, no [turn ID])"
        if verdict.partial:
            verdict.reason += f" (part of {', '.join(p['id'] for p in verdict.partial)}'s token appears)"
    elif verdict.rule == "all" and verdict.uncited:
        verdict.status = "incomplete"
        verdict.reason = f"rule 'all': {', '.join(verdict.uncited)} not cited"
    else:
        verdict.grounded, verdict.status = True, "grounded"
        verdict.reason = f"cites {', '.join(verdict.cited_ids)}"


def _stale_reason(stale: dict, when: str) -> str:
    if stale.get("status") == "future":
        return f"{stale['id']}, which was not yet valid {when} (valid from {stale.get('valid_from')})"
    if stale.get("superseded_by"):
        return f"{stale['id']}, which is not valid {when} (superseded by {', '.join(stale['superseded_by'])})"
    return f"{stale['id']}, which is not valid {when} (valid until {stale.get('valid_until')})"


def _maximal(matches: list[tuple[str, int, int, bool]], handed: set[str]) -> list[tuple[str, int, int, bool]]:
    """Drop matches lying inside a longer match (a short token inside a longer one is not cited);
    for the same span, a handed memory wins over a foreign one with the same token."""
    kept = []
    for match in matches:
        _, start, end, _ = match
        if any(s <= start and end <= e and (e - s) > (end - start) for _, s, e, _ in matches):
            continue
        same = [m for m in matches if m[1] == start and m[2] == end]
        if match[0] not in handed and any(m[0] in handed for m in same):
            continue
        kept.append(match)
    return sorted(kept, key=lambda m: (m[1], m[0]))


def _run(haystack: list[str], needle: list[str]) -> int:
    """Length of the longest run of consecutive needle words found consecutively in the haystack."""
    best = 0
    for i in range(len(haystack)):
        for j in range(len(needle)):
            n = 0
            while i + n < len(haystack) and j + n < len(needle) and haystack[i + n] == needle[j + n]:
                n += 1
            best = max(best, n)
    return best


def _overlaps(citation: str, token: str) -> bool:
    """True when at least half of the token's words appear in the citation text (folded)."""
    cited = {fold(w) for w in words(citation)}
    token_words = [fold(w) for w in words(token)]
    return bool(token_words) and 2 * sum(w in cited for w in token_words) >= len(token_words)


def _partials(response: str, citations: list[str], uncited: dict[str, str]) -> list[dict]:
    """Uncited handed tokens of which part appears: two or more consecutive words, or half the
    words inside a [verify: ...] citation. Reported to explain a miss, never counted as a citation."""
    if not uncited:
        return []
    text = [fold(w) for w in words(response)]
    out = []
    for memory_id, token in uncited.items():
        token_words = [fold(w) for w in words(token)]
        run = _run(text, token_words)
        if (run >= 2 and run < len(token_words)) or any(_overlaps(c, token) for c in citations):
            out.append({"id": memory_id, "token": token, "words_matched": run, "of": len(token_words)})
    return out


def parse_context(text: str, source: str = "context") -> list[dict]:
    """The handed units from `recall --format json` output (its memories, {id, subject, verify}, then its turns,
    {id, kind: "turn"}), or a JSON list of memories."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested thousands of levels deep
        raise PalaceError(f"{source}: not JSON ({exc}); write it with `palace recall QUERY --format json`") from None
    entries = data.get("memories") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise PalaceError(f"{source}: no \"memories\" list; write it with `palace recall QUERY --format json`")
    handed = []
    for position, entry in enumerate(entries):
        if not isinstance(entry, dict) or "id" not in entry:
            raise PalaceError(f"{source}: memories[{position}] has no id")
        handed.append({"id": str(entry["id"]), "subject": str(entry.get("subject", "")),
                       "verify": str(entry.get("verify") or "")})
    turns = data.get("turns") if isinstance(data, dict) else None
    for position, turn in enumerate(turns if isinstance(turns, list) else []):
        if not isinstance(turn, str) or not turn.strip():
            raise PalaceError(f"{source}: turns[{position}] is not a turn id")
        handed.append({"id": turn, "kind": "turn"})
    return handed
