"""The context handed to an LLM: each unit's text and verify token, grouped, in rank order, within a budget."""

from __future__ import annotations


from palace_cli.palace import Palace
from palace_cli.search.hits import Hit
from palace_cli.search.profiles import Profile


def build_context(hits: list[Hit], spec: Profile, budget: int | None, as_of: str = "") -> str:
    """The context block for an LLM: each memory's sections and verify token, within a byte budget."""
    return assemble_context(hits, spec, budget, as_of)[0]


def _version_line(hit: Hit) -> str:
    """`replaces: a` / `superseded by: b` for a memory with versions; "" for one without."""
    parts = []
    if hit.superseded_by:
        parts.append(f"superseded by: {', '.join(hit.superseded_by)}"
                     + ("" if hit.valid else " (not valid at the time asked about)"))
    if hit.replaces:
        parts.append(f"replaces: {', '.join(hit.replaces)}")
    return "; ".join(parts)


MEMORY_HEADER = ("Answer from these memories only. Each memory has a verify token: when you use a memory, "
                 "quote its token exactly, like [verify: the token]. If they do not answer the question, say so.\n")
TURN_HEADER = ("Answer from these conversation turns only; each session shows its date (and each turn its time "
               "when known), so say when things were said. When you use a turn, quote its words in double quotes "
               "and cite it as it is marked, like [turn ID]. If they do not answer the question, say so.\n")
BOTH_HEADER = ("Answer from these memories and conversation turns only. Each memory has a verify token: when you "
               "use a memory, quote its token exactly, like [verify: the token]. When you use a turn, quote its "
               "words in double quotes and cite it as it is marked, like [turn ID]; each session shows its date. "
               "If they do not answer the question, say so.\n")


# The sentence that says how to cite a memory, for a context whose notes have no verify token (an adopted vault,
# distilled memories) or some have one and some not; a context of memories that all have one says it as above.
PLAIN_CITE = ("Each note shows where it is after its title: when you use one, cite it there, like "
              "[notes/Name.md:12].")
MIXED_CITE = ("When you use a memory, quote its verify token exactly, like [verify: the token], or, for a note "
              "without one, cite where it is (shown after its title), like [notes/Name.md:12].")
TOKEN_CITE = ("Each memory has a verify token: when you use a memory, quote its token exactly, like "
              "[verify: the token].")


def _header(hits: list[Hit]) -> str:
    """What the context asks of the model: the sentence on citing memories fits the memories handed."""
    kinds = {"turn" if h.turn is not None else "memory" for h in hits if h.memory is not None or h.turn is not None}
    header = MEMORY_HEADER if kinds <= {"memory"} else TURN_HEADER if kinds == {"turn"} else BOTH_HEADER
    tokens = {bool(h.memory.verify) for h in hits if h.memory is not None}
    if False in tokens:
        header = header.replace(TOKEN_CITE, PLAIN_CITE if tokens == {False} else MIXED_CITE)
    return header


def assemble_context(hits: list[Hit], spec: Profile, budget: int | None, as_of: str = "") -> tuple[str, list[Hit]]:
    """The context block and the hits that made it in; a unit dropped for the budget is not handed over.

    Memories come as blocks in rank order; turns are grouped under their session (a line with its
    title, date and path, once), the sessions in the order of their best turn, the turns in the order
    they were said."""
    header = _header(hits)
    if as_of:
        header += f"The question asks about {as_of}; answer as things stood then.\n"
    blocks: list[str] = []
    handed: list[Hit] = []
    used = len(header.encode("utf-8"))
    for hit in _grouped(hits):
        if hit.memory is not None:
            block = _memory_block(hit, spec)
        elif hit.turn is not None:
            block = _turn_block(hit, handed)
        else:
            continue
        follows = hit.turn is not None and bool(handed) and handed[-1].path == hit.path  # same session: no gap
        separator = 1 if blocks and not follows else 0  # the newline joining blocks
        size = len(block.encode("utf-8")) + separator
        if budget is not None and used + size > budget:
            room = budget - used - separator
            if room < 160 or blocks and room < size // 3:
                break  # a stub of a memory helps no one; stop at whole units
            block = _truncate(block, room)
            size = budget - used
        if follows:
            blocks[-1] += block
        else:
            blocks.append(block)
        handed.append(hit)
        used += size
        if budget is not None and used >= budget:
            break
    return (header + "\n".join(blocks), handed) if blocks else ("", [])


def _grouped(hits: list[Hit]) -> list[Hit]:
    """Hits in context order: memories and sessions by rank, a session's turns together in file order."""
    sessions: dict[str, list[Hit]] = {}
    order: list[Hit | str] = []
    for hit in hits:
        if hit.turn is None:
            order.append(hit)
            continue
        if hit.path not in sessions:
            sessions[hit.path] = []
            order.append(hit.path)
        sessions[hit.path].append(hit)
    out: list[Hit] = []
    for item in order:
        out += sorted(sessions[item], key=lambda h: h.line) if isinstance(item, str) else [item]
    return out


def _memory_block(hit: Hit, spec: Profile) -> str:
    memory = hit.memory
    lines = [f"## {memory.subject} ({memory.id}) {memory.location}"]
    if memory.verify:  # a note without a token is cited by its place, on the line above
        lines.append(f"verify: {memory.verify}")
    versions = _version_line(hit)
    if versions:
        lines.append(versions)
    if "anchor" in spec.sections and memory.anchor:
        lines.append(f"anchor: {memory.anchor}")
    if "image" in spec.sections and memory.image:
        lines.append(f"Image: {memory.image}")
    if "content" in spec.sections and memory.content:
        lines.append(f"Content: {memory.content}")
    if "links" in spec.sections and memory.all_links:
        lines.append("links: " + ", ".join(memory.all_links))
    return "\n".join(lines) + "\n"


def _turn_block(hit: Hit, handed: list[Hit]) -> str:
    """A turn's line, after its session's heading (title, id, date, path) when the turn handed before it
    was of another session; the turn's own time is shown when it differs from the session's start."""
    turn = hit.turn
    lines = []
    if not handed or handed[-1].path != hit.path:
        title = f"{turn.title} " if turn.title else ""
        lines.append(f"## Conversation {title}({turn.session}), {_when(turn.started) or 'date unknown'}, {hit.path}")
    own = f", {_when(turn.time)}" if turn.time and turn.time != turn.started else ""
    lines.append(f"[turn {hit.id}] (line {hit.line}{own}) {turn.speaker}: {turn.text}")
    return "\n".join(lines) + "\n"


def _when(time: str) -> str:
    """An ISO time as a reader says it: `2023-05-08 13:56`."""
    return time.replace("T", " ") if time else ""


def _truncate(block: str, room: int) -> str:
    """Cut a block to `room` bytes at a word boundary, keeping its header and verify line."""
    data = block.encode("utf-8")[: max(room - 4, 0)].decode("utf-8", "ignore")
    cut = data.rsplit(" ", 1)[0] if " " in data else data
    return cut + " …\n"


AGENT_TURNS = " and quote each used conversation turn in double quotes followed by [turn ID]"


def agent_instructions(palace: Palace) -> str:
    """What an agent is told when it connects (the MCP server's instructions), fitted to this palace: verify tokens only where its
    notes have them (a note without one is cited by path:line), conversation turns only when it holds some."""
    memories = palace.index.scan(light=True).memories.values()
    tokens = sum(1 for m in memories if m.verify)
    turns = (palace.root / "conversations").is_dir()
    also = ", and imported conversations" if turns else ""
    if tokens and tokens == len(memories):
        what, cite = f"Markdown memories, each with a verify token{also}", "cite each used memory's token as [verify: token]"
    elif tokens:
        what = f"Markdown notes, some with a verify token{also}"
        cite = ("cite each used note by its verify token as [verify: token], or, when it has none, by where it is "
                "(recall shows it after the title) as [path:line]")
    else:
        what = f"Markdown notes{also}"
        cite = "cite each used note by where it is (recall shows it after the title) as [path:line]"
    return (f"A memory palace: {what}. Call recall before answering from memory, {cite}{AGENT_TURNS if turns else ''}, "
            "then call verify on your answer with the ids recall handed.")
