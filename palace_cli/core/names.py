"""Every name a memory answers to, in lookup tables: the one resolver behind `palace show`, links, backlinks and mv.

A reference names a memory by its id, its path, its file name, an alias (or an id it had before a
`palace mv`), its subject or its anchor. Names are compared normalised (case, accents, punctuation
and hyphens do not count), so `[[Saga pattern]]`, as Obsidian writes a link to `saga-pattern.md`,
names the memory whose file is `saga-pattern.md`. A name is used only when it is unique within its
rank; two memories answering to it at the same rank make the reference ambiguous, never a guess.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from palace_cli.errors import Ambiguous
from palace_cli.core.notes import Memory
from palace_cli.core.tokens import normalize

# Ranks, strongest first: a name at an earlier rank wins over the same name at a later one.
RANKS = ("file", "alias", "subject", "anchor")
LINK_RANKS = 3  # links resolve by id, path, file name, alias or subject; anchors are hooks, not names


@dataclass(frozen=True)
class Resolved:
    """The memory a reference named, and how: id, path, file, alias, previous (a former id), subject, anchor."""

    memory: Memory
    how: str


class Names:
    """Lookup tables of the names of a set of memories (one per id; build once per index version)."""

    def __init__(self, memories: Iterable[Memory]):
        self.ids: dict[str, Memory] = {}
        self.paths: dict[str, Memory] = {}
        self._ranked: list[dict[str, list[Memory]]] = [defaultdict(list) for _ in RANKS]
        self._previous: dict[str, Memory] = {}
        for memory in memories:
            self.ids[memory.id] = memory
            self.paths[memory.path] = memory
        for memory in self.ids.values():
            stem = memory.path.rsplit("/", 1)[-1].removesuffix(".md")
            names = [{normalize(memory.id), normalize(stem)}, {normalize(a) for a in memory.aliases},
                     {normalize(memory.subject)}, {normalize(memory.anchor)}]
            for previous in memory.previous_ids:
                if previous not in self.ids:  # a former id now held by another memory is that memory's
                    names[1].add(normalize(previous))
                    self._previous[normalize(previous)] = memory
            for table, keys in zip(self._ranked, names):
                for key in keys - {""}:
                    table[key].append(memory)

    def by_rank(self, ref: str) -> list[tuple[str, list[Memory]]]:
        """For each rank, strongest first, the memories that answer to `ref` (compared normalised)."""
        wanted = normalize(ref)
        return [(rank, table.get(wanted, []) if wanted else []) for rank, table in zip(RANKS, self._ranked)]

    def path(self, ref: str) -> Memory | None:
        """The memory at a path: `memories/d/x.md`, without `.md`, or without `memories/` (as Obsidian writes)."""
        ref = ref.strip().removeprefix("./")
        for candidate in (ref, ref + ".md", "memories/" + ref, "memories/" + ref + ".md"):
            if candidate in self.paths:
                return self.paths[candidate]
        return None

    def resolve(self, target: str, ranks: int = LINK_RANKS) -> Resolved | None:
        """What a link target (or a reference) names: None when nothing does; Ambiguous when several do."""
        target = target.strip()
        if target in self.ids:
            return Resolved(self.ids[target], "id")
        if "/" in target or target.endswith(".md"):
            found = self.path(target)
            if found is not None:
                return Resolved(found, "path")
            target = target.rsplit("/", 1)[-1].removesuffix(".md")  # a path to a moved file: try its name
        for rank, matches in self.by_rank(target)[:ranks]:
            if len(matches) == 1:
                how = "previous" if rank == "alias" and normalize(target) in self._previous \
                    and self._previous[normalize(target)] is matches[0] else rank
                return Resolved(matches[0], how)
            if len(matches) > 1:
                ids = sorted(m.id for m in matches)
                raise Ambiguous(f"{target!r} names several memories: {', '.join(ids[:8])}; use an id", ids[:8])
        return None

    def link(self, target: str) -> Memory | None:
        """The memory a `[[link]]` or a `links:` entry names (id, path, file name, alias or subject), or None."""
        found = self.resolve(target)
        return found.memory if found else None

    def link_ids(self, memory: Memory) -> list[str]:
        """The ids a memory's links resolve to, in order, each once; links that name nothing are left out."""
        ids = []
        for target in memory.all_links:
            try:
                found = self.link(target)
            except Ambiguous:
                continue
            if found is not None and found.id not in ids:
                ids.append(found.id)
        return ids
