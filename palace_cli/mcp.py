"""MCP server: a few thin tools over the core calls, confined to one palace, speaking only protocol on stdout.

`PalaceTools` holds the tool bodies as plain functions that return compact text within a token budget
(no MCP imports, so they are testable alone); `build_server` wraps them for the official `mcp` SDK and
runs every call on one worker thread, in order, because the note cache's SQLite connection belongs to
the thread that opened it.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import posixpath
import re
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Literal

from palace_cli import __version__
from palace_cli.core.layout import CACHE_DIR, MEMORIES, REVIEWS, confined, refuse_path_tricks
from palace_cli.core.notes import TYPES, Memory
from palace_cli.errors import NotAMemory, NotFound, OutsidePalace, PalaceError, UsageError
from palace_cli.palace import Palace
from palace_cli.search.profiles import PROFILES
from palace_cli.search.context import agent_instructions
from palace_cli.search.relevance import describe
from palace_cli.search.retrieve import recall as core_recall
from palace_cli.search.retrieve import search as core_search
from palace_cli.search.wakeup import BYTES_PER_TOKEN
from palace_cli.study.strategies import STRATEGIES

LEARNER = "agent:mcp"
ProfileName = Literal[tuple(PROFILES)]  # type: ignore[valid-type]  # enums in the tool schemas
Strategy = Literal[STRATEGIES]  # type: ignore[valid-type]
MemoryType = Literal[TYPES]  # type: ignore[valid-type]
Kind = Literal["memory", "turn"]
MIN_TOKENS, MAX_TOKENS = 50, 20000
MAX_REFERENCE = 4096  # characters of a memory id or path: PATH_MAX on Linux
DISTILL_TOKENS = 800  # distill's answer: counts, then a line per memory written, cut there
LINE_REF = re.compile(r":\d+$")
# ---- confinement --------------------------------------------------------------------------------


def check_layout(palace: Palace) -> None:
    """Refuse to work when a folder the server writes to (notes, reviews, index files, cache) leads out of the palace."""
    for name in (MEMORIES, REVIEWS, palace.index_dir, palace.root_index, CACHE_DIR):
        try:
            confined(palace.root, name, name, under=".")
        except OutsidePalace:
            raise OutsidePalace(f"{name} in {palace.root} resolves outside the palace (a symlink?); "
                                "the server refuses to read or write until it is a plain folder or file") from None


def _plain_name(value: str, what: str) -> str:
    """A domain or id: one name, never a path."""
    refuse_path_tricks(value, what)
    if "/" in value or "\\" in value:
        raise OutsidePalace(f"{what} {value!r} must be a single name, not a path")
    return value


def _reference(ref: str) -> str:
    """A memory id or path as given, stripped; UsageError for an empty one or one longer than any path can be."""
    ref = ref.strip()
    if not ref:
        raise UsageError("give a memory id")
    if len(ref) > MAX_REFERENCE:
        raise UsageError(f"a memory id or path is at most {MAX_REFERENCE:,} characters; this one has {len(ref):,}")
    return ref


# ---- budgets ------------------------------------------------------------------------------------


def _budget(max_tokens: int) -> int:
    if not MIN_TOKENS <= max_tokens <= MAX_TOKENS:
        raise UsageError(f"max_tokens must be between {MIN_TOKENS} and {MAX_TOKENS}, not {max_tokens}")
    return max_tokens * BYTES_PER_TOKEN


def fit(text: str, max_tokens: int) -> str:
    """`text` cut at a line boundary to about max_tokens (4 bytes each), saying so when it was cut."""
    limit = _budget(max_tokens)
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    note = f"\n… cut at max_tokens={max_tokens}"
    head = data[: limit - len(note.encode("utf-8")) - len(" …".encode("utf-8"))].decode("utf-8", "ignore")
    # End on a whole line when that keeps most of the budget, else on a word (a long Content is one line).
    line_end, word_end = head.rfind("\n"), head.rfind(" ")
    if line_end > len(head) * 0.7:
        head = head[:line_end]
    elif word_end > 0:
        head = head[:word_end] + " …"
    return head + note


# ---- the tools ----------------------------------------------------------------------------------


class PalaceTools:
    """The MCP tools as plain functions over one palace; each returns compact text."""

    def __init__(self, palace: Palace):
        self.palace = palace

    def _fresh(self):
        """Bring the caches up to date with the disk: another process may have written since the last call."""
        check_layout(self.palace)
        return self.palace.refresh()

    def _handed(self, ids: list[str]) -> list[Memory]:
        return [self._memory(i) for i in dict.fromkeys(ids)]

    def _memory(self, ref: str) -> Memory:
        """A memory by id, or by its path under memories/ (optionally `:line`); refresh first."""
        ref = _reference(ref)
        if "/" in ref or "\\" in ref or ref.endswith(".md") or ref.startswith(("~", ".")):
            relpath = LINE_REF.sub("", ref)
            refuse_path_tricks(relpath, "memory path")
            relpath = posixpath.normpath(relpath.replace("\\", "/"))
            try:
                self.palace.memory_target(self.palace.root / relpath)  # the same rule as the note walk
            except NotAMemory as exc:
                raise OutsidePalace(f"memory path {ref!r}: {exc.reason}") from None
            return self.palace.memory(relpath, refresh=False)
        refuse_path_tricks(ref, "memory id")
        return self.palace.memory(ref, refresh=False)

    def recall(self, query: str, k: int | None = None, domain: str | None = None,
               profile: ProfileName = "reference", max_tokens: int = 1000, as_of: str | None = None,
               kind: Kind | None = None, since: str | None = None, until: str | None = None,
               turns: int | None = None) -> str:
        """Recall: a route line (the domains handed), then the context: each memory with its verify token, each
        turn under its session's date. Only what is relevant is handed: at most k memories and `turns` turns,
        nothing when nothing is; only memories valid now, or on `as_of`."""
        budget = _budget(max_tokens)
        if domain is not None:
            _plain_name(domain, "domain")
        if k is not None and not 1 <= k <= 50:
            raise UsageError(f"k must be between 1 and 50, not {k}")
        if turns is not None and not 0 <= turns <= 50:
            raise UsageError(f"turns must be between 0 and 50, not {turns}")
        check_layout(self.palace)
        result = core_recall(self.palace, query, k=k, domain=domain, budget=max(budget - 300, 200), profile=profile,
                             as_of=as_of, kind=kind, since=since, until=until, turns=turns)
        if not result.relevant:
            return fit(f"Nothing in this palace is relevant; say you do not know. ({result.why})", max_tokens)
        route = ", ".join(f"{r.domain} {r.confidence:.2f}" for r in result.route) or "none"
        memories = list(dict.fromkeys(h.memory_id for h in result.handed if h.kind != "turn"))
        turns_handed = [h.id for h in result.handed if h.kind == "turn"]
        lines = [f"handed: {', '.join(memories) or 'none'}"]  # the ids verify takes
        if turns_handed:
            lines.append(f"turns (cite as [turn ID]): {', '.join(turns_handed)}")
        if result.hits and not result.handed:
            lines.append(f"No memory fits in max_tokens={max_tokens}; raise it, or get one by id.")
        cut = [o.id for o in result.omitted if o.reason.startswith("did not fit")]
        if cut:
            lines.append(f"cut for max_tokens: {', '.join(cut)}")
        left = len(result.omitted) - len(cut)
        if left:
            lines.append(f"left out as not relevant enough or over the caps: {left} ranked unit(s)")
        lines.append(f"route: {route} ({result.reason}); confidence {result.confidence:.2f}; mode {result.mode}")
        return fit("\n".join(lines) + "\n" + result.context, max_tokens)

    def search(self, query: str, k: int = 10, domain: str | None = None,
               mode: Literal["fused", "lexical", "dense", "hybrid"] = "fused", max_tokens: int = 500,
               kind: Kind | None = None, since: str | None = None, until: str | None = None) -> str:
        """Flat search: one line per hit, `id | subject | domain or time | path:line | words, meaning` (share of
        the query's words held, cosine); `no results` when nothing is about the query."""
        _budget(max_tokens)
        if domain is not None:
            _plain_name(domain, "domain")
        if not 1 <= k <= 100:
            raise UsageError(f"k must be between 1 and 100, not {k}")
        check_layout(self.palace)
        result = core_search(self.palace, query, mode=mode, k=k, domain=domain, kind=kind, since=since, until=until)
        lines = [f"{h.id} | {h.subject} | {h.domain if h.kind != 'turn' else h.time or 'no date'} | "
                 f"{h.path}:{h.line} | {describe(h)}" for h in result.hits]
        head = f"{len(lines)} hit(s), {result.mode}" + (f" ({result.dense_reason})" if result.dense != "on" else "")
        # Meaning fills in behind the answers: how much of it this ranking had (the rest ranked by words).
        head += f"; vectors {json.dumps(self.palace.vector_counts().as_dict())}"
        if not result.hits:
            head = f"no results: {result.why}"
        return fit("\n".join([head] + lines), max_tokens)

    def get(self, id: str, max_tokens: int = 1500) -> str:
        """One memory in full: fields, verify token (or where to cite it), Image and Content."""
        _budget(max_tokens)
        _reference(id)  # checked before anything is read
        self._fresh()
        memory = self._memory(id)
        lines = [f"# {memory.subject} ({memory.id})", f"domain: {memory.domain}; at {memory.location}"]
        if memory.anchor:
            lines.append(f"anchor: {memory.anchor}")
        # A note without a token is cited by where it is (verify takes [path:line]); never ask for a token it lacks.
        lines.append(f"verify: {memory.verify}" if memory.verify else f"cite as: [{memory.location}]")
        if memory.keywords:
            lines.append("keywords: " + ", ".join(memory.keywords))
        if memory.all_links:
            lines.append("links: " + ", ".join(memory.all_links))
        versions = self.palace.index.versions()
        if versions.successors.get(memory.id) or versions.predecessors.get(memory.id):
            lines.append(f"versions: {versions.status(memory.id)}"
                         + "".join(f"; {label} {', '.join(ids)}" for label, ids in
                                   (("superseded by", versions.successors.get(memory.id)),
                                    ("replaces", versions.predecessors.get(memory.id))) if ids))
        lines += (["## Image", memory.image] if memory.image else []) + ["## Content", memory.content]
        return fit("\n".join(lines), max_tokens)

    def add(self, subject: str, domain: str | None = None, anchor: str | None = None, image: str | None = None,
            content: str | None = None, keywords: list[str] | None = None, links: list[str] | None = None,
            verify: str | None = None, id: str | None = None, supersedes: list[str] | None = None,
            valid_from: str | None = None, type: MemoryType | None = None) -> str:
        """Write a new memory (never overwrites), refresh, and say where it is and its verify token.

        Text alone (`subject`, no image) is written at once as a plain note, in the inbox domain when no domain
        is given: searched and recalled now, and cited by where it is ([path:line]) since it has no verify token
        (an image would give it one). With an image, a SMASHIN memory: refused, nothing written, with a token the image cannot give or a
        link to no memory. `supersedes` corrects memories: they stay, marked superseded by this one from
        `valid_from` (default today)."""
        from palace_cli.editing.authoring import add_note, review_added

        self._fresh()
        memory = add_note(self.palace, subject, domain, anchor=anchor or "", image=image or "", content=content or "",
                          keywords=keywords, links=links, verify=verify, note_id=id, supersedes=supersedes,
                          valid_from=valid_from, type=type or "", strict=True)
        self._fresh()
        lines = [f"added {memory.id} at {memory.location}",
                 f"verify: {memory.verify}" if memory.verify else f"cite as: [{memory.location}]"]
        if not memory.verify:
            lines.append("a plain note: recalled now and cited by where it is (no image, so no verify token; "
                         "update it with an image to give it one)")
        if memory.supersedes:
            lines.append(f"supersedes {', '.join(memory.supersedes)} from {memory.valid_from}")
        review = review_added(self.palace, memory)
        lines += review.advice
        if review.compare_error:  # the memory is written; say why it was not compared, do not fail the call
            lines.append(f"warning: could not compare with other memories: {review.compare_error}")
        lines += [f"warning: {message}" for message in review.token_problems if memory.verify]
        return "\n".join(lines)

    def update(self, id: str, fields: dict[str, Any] | None = None, sections: dict[str, str] | None = None) -> str:
        """Change a memory in place: frontmatter `fields` and `## sections`, every other byte kept."""
        from palace_cli.editing.authoring import token_warnings
        from palace_cli.editing.changes import update_memory

        self._fresh()
        memory = update_memory(self.palace, self._memory(id).id, fields, sections)
        self._fresh()
        changed = [*(fields or {}), *(f"## {name.strip().lstrip('#').strip()}" for name in sections or {})]
        lines = [f"updated {memory.id} at {memory.location}: {', '.join(changed)}", f"verify: {memory.verify}"]
        lines += [f"warning: {message}" for message in token_warnings(self.palace, memory)]
        return "\n".join(lines)

    def verify(self, response: str, ids: list[str], rule: Literal["any", "all"] = "any") -> str:
        """Check an answer against the units it was handed (the memory ids and turn ids recall listed): cited,
        uncited, foreign tokens or turns, and every quote word for word in what it cites."""
        from palace_cli.answers.ask import verify_answer
        from palace_cli.answers.checking import memory_text, turn_texts
        from palace_cli.search.hits import context_entry

        if not ids:
            raise UsageError("give the ids of the units handed to the model (recall lists them on its first lines)")
        self._fresh()
        turns = turn_texts(self.palace, [i for i in ids if "/" in i and not i.endswith(".md")])
        handed = [{"id": i, "kind": "turn", "text": turns[i]} for i in dict.fromkeys(ids) if i in turns]
        handed += [{**context_entry(m), "text": memory_text(m)} for m in self._handed([i for i in ids if i not in turns])]
        verdict = verify_answer(response, handed, self.palace, rule=rule)
        lines = [f"{'grounded' if verdict.grounded else 'NOT grounded'} ({verdict.status}): {verdict.reason}"]
        if verdict.cited:
            lines.append("cited: " + ", ".join(f"{c.id}{'' if c.exact else ' (variant)'}" for c in verdict.cited))
        misquoted = [q for q in verdict.quotes if not q["found"]]
        if verdict.quotes:
            lines.append(f"quotes checked: {len(verdict.quotes)}, not word for word in their source: {len(misquoted)}")
        for quote in misquoted:
            lines.append(f"misquoted {quote['id']}: \u201c{quote['quote']}\u201d")
        if verdict.uncited:
            lines.append("uncited: " + ", ".join(verdict.uncited))
        if verdict.foreign:
            lines.append("foreign: " + ", ".join(f"{c.id} ({c.token})" for c in verdict.foreign))
        if verdict.stale:
            lines.append("stale: " + ", ".join(f"{s['id']} (superseded by {', '.join(s['superseded_by']) or '-'})"
                                               for s in verdict.stale))
        if verdict.partial:
            lines.append("partial: " + ", ".join(f"{p['id']} {p['words_matched']}/{p['of']} words" for p in verdict.partial))
        if verdict.unknown_citations:
            lines.append("unknown citations: " + "; ".join(verdict.unknown_citations))
        return "\n".join(lines)

    def _study(self, strategy: str = "due", domain: str | None = None):
        from palace_cli.editing.reviewlog import ReviewLog
        from palace_cli.study.session import StudySession

        if domain is not None:
            _plain_name(domain, "domain")
        self._fresh()
        log = ReviewLog(self.palace)
        confined(self.palace.root, self.palace.rel(log.path), "review log", under=REVIEWS)
        return StudySession(self.palace, strategy=strategy, n=1, domain=domain, learner=LEARNER, generator=None,
                            log=log)

    def quiz_next(self, domain: str | None = None, strategy: Strategy = "due") -> str:
        """The next question for the agent-learner: a handle for quiz_grade, then what to answer."""
        session = self._study(strategy, domain)
        question = next(iter(session), None)
        if question is None:
            return "nothing to study" + (f" in {domain}" if domain else "")
        variant = session.kind_history[question.memory_id][question.kind]
        reason = next((p.reason for p in session.picks if p.memory_id == question.memory_id), "")
        handle = f"{question.memory_id}:{question.kind}:{variant}:{strategy}"
        return (f"question: {handle}\n({reason}) answer from memory, without recall or get, then call quiz_grade\n"
                f"{question.shown}")

    def quiz_grade(self, question: str, answer: str) -> str:
        """Grade an answer to a quiz_next question, append the review (learner agent:mcp), say what comes next."""
        from palace_cli.study.examiner import KINDS
        from palace_cli.editing.reviewlog import RATING_NAMES

        parts = question.strip().split(":")
        if len(parts) != 4 or parts[1] not in KINDS or not parts[2].isdigit():
            raise UsageError(f"{question!r} is not a question handle from quiz_next (memory:kind:variant:strategy)")
        memory_id, kind, variant, strategy = parts[0], parts[1], int(parts[2]), parts[3]
        _plain_name(memory_id, "memory id")
        session = self._study(strategy)
        memory = session.memories.get(memory_id)
        if memory is None:
            successors = self.palace.index.versions().successors.get(memory_id)
            if successors:
                raise PalaceError(f"{memory_id} was superseded by {', '.join(successors)} and is no longer studied; "
                                  "call quiz_next")
            raise NotFound(f"no memory with id {memory_id!r}")
        asked = session.examiner.ask(memory, kind, variant)
        if asked is None:
            raise PalaceError(f"the memory {memory_id} changed and that question can no longer be asked; call quiz_next")
        result = session.grade(asked, answer)
        state = session.record(asked, result.suggested, answer, result)
        lines = [f"{result.verdict} (score {result.score:.2f}), rated {RATING_NAMES[result.suggested]}",
                 f"expected: {asked.answer}"]
        if result.missing and result.verdict == "partial":
            lines.append("missing: " + ", ".join(result.missing))
        if result.confused_with:
            lines.append(f"that names {result.confused_with} instead")
        lines.append(f"next due {state.due:%Y-%m-%d %H:%M} UTC; logged to {session.summary.log_path} as {LEARNER}")
        return "\n".join(lines)

    def wake_up(self, max_tokens: int = 800) -> str:
        """Identity and the most important memories, one line each."""
        from palace_cli.search.wakeup import wake_up

        _budget(max_tokens)
        check_layout(self.palace)
        return fit(wake_up(self.palace, budget_tokens=max_tokens).text, max_tokens)

    def distill(self) -> str:
        """Form memories from imported conversation turns (palace distill): one line per memory written."""
        from palace_cli.memory.distill import distill

        check_layout(self.palace)
        report = distill(self.palace)
        lines = [f"wrote {len(report.written)} memories from {report.turns} turns; {len(report.known)} already "
                 f"known, {len(report.superseded)} superseding"]
        lines += [f"skipped {skipped}" for skipped in report.skipped]
        lines += [f"- {m['id']} [{m['type']}] {m['subject']} ({m['source']})" for m in report.written]
        return fit("\n".join(lines), DISTILL_TOKENS)

    def status(self, max_tokens: int = 400) -> str:
        """Counts by domain, dense ranking on or off, and what `palace lint` finds (the same call)."""
        from palace_cli.editing.lint import lint

        _budget(max_tokens)
        report = self._fresh()
        scan = self.palace.index.scan(light=True)
        grouped = scan.by_domain()
        domains = ", ".join(f"{d} {len(ms)}" for d, ms in sorted(grouped.items())) or "none"
        problems = lint(self.palace)
        lines = [f"palace: {self.palace.config.name} ({self.palace.root})",
                 f"memories: {len(scan.memories)} in {len(grouped)} domain(s): {domains}",
                 f"dense ranking: {report.dense}" + (f" ({report.dense_reason})" if report.dense_reason else ""),
                 f"problems: {len(problems.problems)} ({problems.errors} errors, {problems.warnings} warnings)"]
        lines += [f"- {problem}" for problem in problems.problems]
        return fit("\n".join(lines), max_tokens)


# ---- the MCP server -----------------------------------------------------------------------------

# name: (description, read_only, destructive, idempotent). Descriptions are short on purpose: the whole
# tool list is paid for in every agent's context (tests/test_mcp.py measures it).
TOOLS = {
    "recall": ("The smallest context that answers query: memories and chat turns, each with how to cite it.",
               True, False, True),
    "search": ("Flat ranked search over memories and turns.", True, False, True),
    "get": ("A memory in full.", True, False, True),
    "add": ("Write a memory; returns its verify token. To correct one, add the new version with supersedes.",
            False, False, False),
    "update": ("Change a memory's fields or sections in place.", False, False, True),
    "verify": ("Check an answer's citations and quotes against the ids it was given.", True, False, True),
    "wake_up": ("Session opener: the palace's identity and key memories.", True, False, True),
    "status": ("Memory counts, dense ranking on/off, lint's problems.", True, False, True),
    "distill": ("Turn imported conversations into memories.", False, False, True),
    "quiz_next": ("Study: your next question, to answer from memory.", True, False, False),
    "quiz_grade": ("Grade your answer to a quiz_next question and log the review.", False, False, False),
}
# Every argument's description, by name (tool:name where one tool means something else by it). A tool
# argument missing here stops the server from starting: the schema an agent reads must explain each field.
ARGUMENTS = {
    "query": "question or keywords", "k": "how many", "domain": "only this domain",
    "profile": "how much context", "max_tokens": "token budget", "as_of": "YYYY-MM-DD: valid then",
    "mode": "ranking", "kind": "which units", "since": "ISO date, from",
    "until": "ISO date, to", "turns": "how many chat turns, at most", "id": "memory id", "get:id": "memory id or path",
    "subject": "title", "add:domain": "folder; a new name makes a domain", "anchor": "short hook",
    "image": "vivid scene; holds the token", "content": "the facts", "keywords": "search terms",
    "links": "ids of related memories", "verify": "phrase of the image (default: proposed)",
    "add:id": "default: from subject", "supersedes": "ids this corrects", "valid_from": "YYYY-MM-DD",
    "type": "kind of memory", "fields": "frontmatter fields to set", "sections": "## heading -> new text", "response": "answer to check",
    "ids": "memory and turn ids recall handed", "rule": "cite any or all", "strategy": "which memory next",
    "question": "handle from quiz_next", "answer": "your answer",
}


def _tidy_schema(schema):
    """Drop what costs an agent's context and says nothing: pydantic titles, `anyOf [X, null]` wrappers, and
    `default: null` (a property missing from `required` is already optional)."""
    if isinstance(schema, list):
        return [_tidy_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    tidy = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str) or key == "default" and value is None:
            continue
        if key == "properties":
            tidy[key] = {name: _tidy_schema(prop) for name, prop in value.items()}
            continue
        tidy[key] = _tidy_schema(value)
    options = tidy.get("anyOf")
    if isinstance(options, list):
        kept = [o for o in options if o != {"type": "null"}]
        if len(kept) == 1 and len(kept) < len(options):
            del tidy["anyOf"]
            tidy = {**kept[0], **tidy}
    return tidy


def _describe(schema: dict, tool: str) -> dict:
    """The input schema with each property's description from ARGUMENTS."""
    for name, prop in schema.get("properties", {}).items():
        description = ARGUMENTS.get(f"{tool}:{name}") or ARGUMENTS.get(name)
        if description is None:
            raise RuntimeError(f"tool {tool}: argument {name!r} has no description in ARGUMENTS")
        prop["description"] = description
    return schema


def build_server(palace: Palace):
    """An MCPServer whose tools are the PalaceTools methods, run in order on one worker thread."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.server.mcpserver.tools import Tool
    from mcp.types import ToolAnnotations

    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="palace")
    tools = PalaceTools(palace)

    def as_tool(method):
        async def tool(**arguments) -> str:
            try:
                return await asyncio.get_running_loop().run_in_executor(worker, partial(method, **arguments))
            except PalaceError as exc:  # a message for the agent to read
                raise ToolError(str(exc)[:2000]) from exc
            except Exception as exc:  # a crash: logged whole on stderr, and its reason told to the agent
                logging.getLogger("palace.mcp").exception("tool %s failed", method.__name__)
                raise ToolError(f"{method.__name__} failed: {type(exc).__name__}: {str(exc)[:500]}") from exc

        tool.__signature__ = inspect.signature(method, eval_str=True)  # the SDK builds the schema from it
        return tool

    registered = []
    for name, (description, read_only, destructive, idempotent) in TOOLS.items():
        # Only hints that differ from the specification's defaults (read-only false, destructive true,
        # idempotent false, open world true); destructive and idempotent mean nothing for a read-only tool.
        hints = ({"read_only_hint": True} if read_only else
                 {"destructive_hint": destructive, **({"idempotent_hint": True} if idempotent else {})})
        tool = Tool.from_function(as_tool(getattr(tools, name)), name=name, description=description,
                                  structured_output=False, annotations=ToolAnnotations(**hints, open_world_hint=False))
        tool.parameters = _describe(_tidy_schema(tool.parameters), name)
        registered.append(tool)
    return MCPServer("palace", version=__version__, instructions=agent_instructions(palace), tools=registered, log_level="WARNING")


def serve(palace: Palace) -> None:
    """Run the stdio MCP server until the client closes stdin."""
    import anyio

    anyio.run(_serve_stdio, build_server(palace))


async def _serve_stdio(server) -> None:
    """The SDK's stdio transport, with one addition: a line it cannot read (bad JSON, a lone surrogate escape,
    nesting past its parser's limit, a message that is not JSON-RPC) gets a JSON-RPC error with the request's
    id, where the SDK would drop it and leave the client waiting for a reply that never comes."""
    import io
    import sys

    import anyio
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    lowlevel = server._lowlevel_server  # as the SDK's own run_stdio_async does
    lines = _Lines(anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")))
    async with stdio_server(stdin=lines) as (read_stream, write_stream):
        readable_in, readable_out = anyio.create_memory_object_stream(0)

        async def relay():
            async with readable_in:
                async for item in read_stream:
                    if isinstance(item, Exception):  # the line just read: the reader waits until this is taken
                        await write_stream.send(SessionMessage(_unreadable(item, lines.last)))
                    else:
                        await readable_in.send(item)

        async with anyio.create_task_group() as group:
            group.start_soon(relay)
            await lowlevel.run(readable_out, write_stream, lowlevel.create_initialization_options())
            group.cancel_scope.cancel()


class _Lines:
    """stdin's lines for the SDK's reader, remembering the last one (to answer it when it cannot be read)."""

    def __init__(self, file):
        self.file, self.last = file, ""

    def __aiter__(self):
        return self

    async def __anext__(self) -> str:
        line = await self.file.readline()
        if not line:
            raise StopAsyncIteration
        self.last = line
        return line


REQUEST_ID = re.compile(r'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')


def _unreadable(exc: Exception, raw: str):
    """The JSON-RPC error for a line the SDK could not read: a parse error (-32700) when it is no JSON, else an
    invalid request (-32600); the id read from the line when it has one (else null, as JSON-RPC says)."""
    import json

    from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError

    errors = exc.errors() if hasattr(exc, "errors") else []
    unparsed = not errors or any(e.get("type") == "json_invalid" for e in errors)
    found = REQUEST_ID.search(raw[:4096])  # the id comes first in every client we know; never scan megabytes
    try:
        request_id = json.loads(found.group(1)) if found else None
    except ValueError:
        request_id = None
    reason = errors[0].get("msg", "unreadable") if errors else str(exc)
    code, what = (PARSE_ERROR, "cannot be read") if unparsed else (INVALID_REQUEST, "is not a JSON-RPC request")
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=f"the request {what}: {reason}"))
