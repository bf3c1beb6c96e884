"""Wake-up: the palace's identity plus its core and most important memories, within a token budget."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from palace_cli.core.notes import Memory
from palace_cli.palace import Palace
from palace_cli.core.layout import Scan
from palace_cli.search.profiles import BYTES_PER_TOKEN, tokens_of
from palace_cli.core.validity import Versions

DEFAULT_BUDGET = 2000  # tokens


@dataclass
class WakeUp:
    """The wake-up text and the memories it names, core first, then most important first."""

    identity: str
    memories: list[dict] = field(default_factory=list)
    text: str = ""
    tokens: int = 0
    budget_tokens: int = 0
    left_out_core: list[str] = field(default_factory=list)  # core memories the budget had no room for

    def as_dict(self) -> dict:
        return {"identity": self.identity, "memories": self.memories, "text": self.text,
                "tokens": self.tokens, "budget_tokens": self.budget_tokens, "left_out_core": self.left_out_core}


def importance(palace: Palace, scan: Scan | None = None) -> dict[str, float]:
    """Importance of each memory: explicit `importance:` (0-10) counts most, then how many memories
    link to it (a hub is a concept others depend on), then how many keywords it carries."""
    scan = scan or palace.index.scan()
    inbound = Counter(link for m in scan.memories.values() for link in set(m.link_ids or m.all_links) if link in scan.memories)
    scores = {}
    for memory in scan.memories.values():
        try:
            explicit = float(memory.meta.get("importance", 0) or 0)
        except (TypeError, ValueError):
            explicit = 0.0
        scores[memory.id] = explicit * 10 + inbound[memory.id] * 2 + min(len(memory.keywords), 5) * 0.1
    return scores


def _head(palace: Palace, scan: Scan) -> str:
    identity = palace.config.identity or f"{palace.config.name}: a memory palace."
    domains = sorted(scan.by_domain())
    return f"# {palace.config.name}\n{identity}\nDomains: {', '.join(domains)}.\nMost important memories:\n"


def _line(memory: Memory) -> str:
    anchor = f" ({memory.anchor})" if memory.anchor else ""  # a plain note (no frontmatter) has none
    return f"- {memory.subject} [{memory.domain}]{anchor} id:{memory.id}\n"


def _ordered(palace: Palace, scan: Scan) -> tuple[list[str], dict[str, float]]:
    """Ids valid now, core first, then by importance (ties by id): superseded memories never wake up."""
    scores = importance(palace, scan)
    hidden = Versions.of(scan.memories.values()).hidden()
    ids = [i for i in scores if i not in hidden]
    return sorted(ids, key=lambda i: (not scan.memories[i].core, -scores[i], i)), scores


def wake_up(palace: Palace, budget_tokens: int = DEFAULT_BUDGET) -> WakeUp:
    """Identity, then one line per memory (core ones first, then by importance) until the budget is used."""
    scan = palace.scan()
    order, scores = _ordered(palace, scan)
    identity = palace.config.identity or f"{palace.config.name}: a memory palace."
    head = _head(palace, scan)
    budget_bytes = budget_tokens * BYTES_PER_TOKEN
    lines, chosen, left_out = [], [], []
    used = len(head.encode("utf-8"))
    for note_id in order:
        memory = scan.memories[note_id]
        line = _line(memory)
        size = len(line.encode("utf-8"))
        if used + size > budget_bytes:
            left_out = [i for i in order[len(chosen):] if scan.memories[i].core]
            break
        lines.append(line)
        used += size
        chosen.append({"id": memory.id, "subject": memory.subject, "domain": memory.domain, "core": memory.core,
                       "importance": round(scores[note_id], 3), "path": memory.path, "line": memory.line})
    text = head + "".join(lines)
    return WakeUp(identity, chosen, text, tokens_of(text), budget_tokens, left_out)


def core_overflow(palace: Palace, scan: Scan, budget_tokens: int = DEFAULT_BUDGET) -> tuple[list[Memory], int]:
    """The core memories that do not fit in wake-up's budget on their own, and the tokens all core lines need."""
    core = [i for i in _ordered(palace, scan)[0] if scan.memories[i].core]
    used = len(_head(palace, scan).encode("utf-8"))
    budget_bytes = budget_tokens * BYTES_PER_TOKEN
    left = []
    for note_id in core:
        used += len(_line(scan.memories[note_id]).encode("utf-8"))
        if used > budget_bytes:
            left.append(scan.memories[note_id])
    return left, -(-used // BYTES_PER_TOKEN)
