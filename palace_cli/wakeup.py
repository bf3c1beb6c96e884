"""Wake-up: the palace's identity plus its most important memories, within a token budget."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .palace import Palace

BYTES_PER_TOKEN = 4


@dataclass
class WakeUp:
    """The wake-up text and the memories it names, most important first."""

    identity: str
    memories: list[dict] = field(default_factory=list)
    text: str = ""
    tokens: int = 0
    budget_tokens: int = 0

    def as_dict(self) -> dict:
        return {"identity": self.identity, "memories": self.memories, "text": self.text,
                "tokens": self.tokens, "budget_tokens": self.budget_tokens}


def importance(palace: Palace) -> dict[str, float]:
    """Importance of each memory: explicit `importance:` (0-10) counts most, then how many memories
    link to it (a hub is a concept others depend on), then how many keywords it carries."""
    scan = palace.index.scan()
    inbound = Counter(link for m in scan.memories.values() for link in set(m.all_links) if link in scan.memories)
    scores = {}
    for memory in scan.memories.values():
        try:
            explicit = float(memory.meta.get("importance", 0) or 0)
        except (TypeError, ValueError):
            explicit = 0.0
        scores[memory.id] = explicit * 10 + inbound[memory.id] * 2 + min(len(memory.keywords), 5) * 0.1
    return scores


def wake_up(palace: Palace, budget_tokens: int = 2000) -> WakeUp:
    """Identity, then one line per memory by importance (ties by id), until the budget is used."""
    scan = palace.scan()
    scores = importance(palace)
    identity = palace.config.identity or f"{palace.config.name}: a memory palace."
    domains = sorted(scan.by_domain())
    head = f"# {palace.config.name}\n{identity}\nDomains: {', '.join(domains)}.\nMost important memories:\n"
    budget_bytes = budget_tokens * BYTES_PER_TOKEN
    lines, chosen = [], []
    used = len(head.encode("utf-8"))
    for note_id in sorted(scores, key=lambda i: (-scores[i], i)):
        memory = scan.memories[note_id]
        line = f"- {memory.subject} [{memory.domain}] ({memory.anchor}) id:{memory.id}\n"
        size = len(line.encode("utf-8"))
        if used + size > budget_bytes:
            break
        lines.append(line)
        used += size
        chosen.append({"id": memory.id, "subject": memory.subject, "domain": memory.domain,
                       "importance": round(scores[note_id], 3), "path": memory.path, "line": memory.line})
    text = head + "".join(lines)
    return WakeUp(identity, chosen, text, -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN), budget_tokens)
