"""Every name a memory answers to, in lookup tables: the one resolver behind `palace show`, links, backlinks and mv;
and the name a link palace writes is written with, the vault's way.

A reference names a memory by its id, its path, its file name, an alias (or an id it had before a
`palace mv`), its subject or its anchor. Names are compared normalised (case, accents, punctuation
and hyphens do not count), so `[[Saga pattern]]`, as Obsidian writes a link to `saga-pattern.md`,
names the memory whose file is `saga-pattern.md`. A name is used only when it is unique within its
rank; two memories answering to it at the same rank make the reference ambiguous, never a guess, with one
exception, Obsidian's rule for shared file names (docs/obsidian.md): when several notes have the file name,
the one in the linking note's own folder wins, else the one with the shortest path (fewest characters), and
the resolution says which others share it; two at the same length are ambiguous.
Paths match without case, whole (`Garden/Watering schedule.md`, with or without `.md`), relative to the
linking note's folder, or by their last folders (`[[Garden/Watering schedule]]` names
`Notes/Garden/Watering schedule.md`), by the same rule when several end so; a path that matches no note
names none, as in Obsidian, even when a note of its file name is elsewhere.
"""

from __future__ import annotations

import posixpath
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from difflib import SequenceMatcher, get_close_matches

from palace_cli.core.notes import Memory
from palace_cli.core.text import STOPWORDS, normalize, root, words
from palace_cli.errors import Ambiguous, NotFound


# Ranks, strongest first: a name at an earlier rank wins over the same name at a later one.
RANKS = ("file", "alias", "subject", "anchor")
LINK_RANKS = 3  # links resolve by id, path, file name, alias or subject; anchors are hooks, not names


@dataclass(frozen=True)
class Resolved:
    """The memory a reference named, and how: id, path, file, alias, previous (a former id), subject, anchor;
    `shared`: the paths of other notes with the same file name, when the shortest path decided."""

    memory: Memory
    how: str
    shared: tuple[str, ...] = ()


def _shortest(matches: list[Memory], source: str = "") -> tuple[Memory, tuple[str, ...]] | None:
    """Obsidian's pick among notes that share a name: the one in the folder of `source` (the linking note's
    path), else the one with the shortest path (characters); with the others' paths. None on a tie."""
    folder = posixpath.dirname(source) if source else None
    here = [m for m in matches if posixpath.dirname(m.path) == folder]
    if len(here) == 1:
        return here[0], tuple(sorted(m.path for m in matches if m is not here[0]))
    ranked = sorted(matches, key=lambda m: (len(m.path), m.path))
    if len(ranked[0].path) == len(ranked[1].path):
        return None
    return ranked[0], tuple(m.path for m in ranked[1:])


class Names:
    """Lookup tables of the names of a set of memories (one per id; build once per index version)."""

    def __init__(self, memories: Iterable[Memory]):
        self.ids: dict[str, Memory] = {}
        self.paths: dict[str, Memory] = {}
        self._ranked: list[dict[str, list[Memory]]] = [defaultdict(list) for _ in RANKS]
        self._previous: dict[str, Memory] = {}
        self._folded: dict[str, list[Memory]] = defaultdict(list)  # lowercase path and its last folders -> notes
        for memory in memories:
            self.ids[memory.id] = memory
            self.paths[memory.path] = memory
        for memory in self.ids.values():
            parts = memory.path.lower().split("/")
            for start in range(len(parts) - 1):
                self._folded["/".join(parts[start:])].append(memory)
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
        self._near: _Near | None = None

    def by_rank(self, ref: str) -> list[tuple[str, list[Memory]]]:
        """For each rank, strongest first, the memories that answer to `ref` (compared normalised)."""
        wanted = normalize(ref)
        return [(rank, table.get(wanted, []) if wanted else []) for rank, table in zip(RANKS, self._ranked)]

    def path(self, ref: str, source: str = "") -> Memory | None:
        """The memory at a path: `memories/d/x.md`, without `.md`, or without `memories/` (as Obsidian writes);
        compared without case, relative to the folder of `source` when no path from the root matches, and by
        its last folders when no whole path does (Obsidian's rule when several end so)."""
        found = self._at_path(ref, source)
        return found[0] if found else None

    def _at_path(self, ref: str, source: str = "") -> tuple[Memory, tuple[str, ...]] | None:
        ref = ref.strip().removeprefix("./").lstrip("/")
        candidates = [ref, ref + ".md", "memories/" + ref, "memories/" + ref + ".md"]
        folder = posixpath.dirname(source) if source else ""
        if folder and not ref.startswith("../"):
            candidates += [f"{folder}/{ref}", f"{folder}/{ref}.md"]
        for candidate in candidates:
            if candidate in self.paths:
                return self.paths[candidate], ()
        for candidate in (candidates[0], candidates[1], *candidates[4:]):
            exact = [m for m in self._folded.get(candidate.lower(), []) if m.path.lower() == candidate.lower()]
            if len(exact) == 1:
                return exact[0], ()
        for candidate in candidates[:2]:
            matches = self._folded.get(candidate.lower(), [])
            if len(matches) == 1:
                return matches[0], ()
            if len(matches) > 1:
                return _shortest(matches, source) or self._ambiguous(ref, matches)
        return None

    @staticmethod
    def _ambiguous(ref: str, matches: list[Memory]):
        ids = sorted(m.id for m in matches)
        raise Ambiguous(f"{ref!r} names several memories: {', '.join(ids[:8])}; use an id or a longer path", ids[:8])

    def resolve(self, target: str, ranks: int = LINK_RANKS, source: str = "") -> Resolved | None:
        """What a link target (or a reference) names, written in the note at `source` (which decides between
        notes sharing a name): None when nothing does (a target with a folder names a note in that folder or
        none); Ambiguous when several do."""
        target = target.strip()
        if target in self.ids:
            found = self.ids[target]
            sharing = self._ranked[0].get(normalize(target), [])
            if not (found.derived_id and len(sharing) > 1):  # an id from a path is a file name: Obsidian's rule
                return Resolved(found, "id", tuple(m.path for m in sharing if m is not found) if found in sharing
                                else ())
        if target.startswith("./") and "/" not in target[2:]:  # a path link written with no folder
            folder = posixpath.dirname(source) if source else ""
            found = self._at_path(f"{folder}/{target[2:]}" if folder else target[2:])
            if found is not None:
                return Resolved(found[0], "path", found[1])
            target = target[2:-3] if target.lower().endswith(".md") else target[2:]  # else by its name, anywhere
        elif "/" in target or target.lower().endswith(".md"):
            found = self._at_path(target, source)
            if found is not None:
                return Resolved(found[0], "path", found[1])
            if "/" in target:
                return None  # a folder says where the note is: as in Obsidian, a same-named note elsewhere is not it
            target = target[:-3]  # `[[Plan.md]]`: a file name, found anywhere as `[[Plan]]` is
        for rank, matches in self.by_rank(target)[:ranks]:
            if len(matches) == 1:
                how = "previous" if rank == "alias" and normalize(target) in self._previous \
                    and self._previous[normalize(target)] is matches[0] else rank
                return Resolved(matches[0], how)
            if len(matches) > 1:
                chosen = _shortest(matches, source) if rank == "file" else None  # Obsidian's rule for a shared name
                if chosen is not None:
                    return Resolved(chosen[0], rank, chosen[1])
                ids = sorted(m.id for m in matches)
                raise Ambiguous(f"{target!r} names several memories: {', '.join(ids[:8])}; use an id", ids[:8])
        return None

    def link(self, target: str, source: str = "") -> Memory | None:
        """The memory a `[[link]]` or a `links:` entry in the note at `source` names (id, path, file name, alias
        or subject), or None."""
        found = self.resolve(target, source=source)
        return found.memory if found else None

    def link_ids(self, memory: Memory) -> list[str]:
        """The ids a memory's links resolve to, in order, each once; links that name nothing are left out."""
        return self.linked_ids(memory.all_links, memory.path)

    def near(self, ref: str, limit: int = 5) -> list[Memory]:
        """The memories a reference that names none most likely meant (what `not_found_message` suggests), at
        most limit; the tables behind the suggestion are built on first use, once per Names."""
        if self._near is None:
            self._near = _Near(self.ids.values())
        return [self.ids[i] for i in self._near.ids(ref)[:limit] if i in self.ids]

    def linked_ids(self, targets: Iterable[str], source: str = "") -> list[str]:
        """The ids link targets (written in the note at `source`) resolve to, in order, each once; ambiguous targets
        and those naming nothing left out."""
        ids = []
        for target in targets:
            try:
                found = self.link(target, source)
            except Ambiguous:
                continue
            if found is not None and found.id not in ids:
                ids.append(found.id)
        return ids

    def link_name(self, memory: Memory, style: str = "name", source: str = "") -> str:
        """The target a link to `memory` from the note at `source` is written with in a vault of `style`
        (`link_style`): its id (`id`), its path without `.md` (`path`), or its file name, with the shortest path
        that names it alone where other notes share the name (`name`: Obsidian's "shortest path when possible")."""
        if style == "id":
            return memory.id
        path = memory.path[:-3] if memory.path.lower().endswith(".md") else memory.path
        if style == "path":
            return path
        parts = path.split("/")
        rivals = [m.path.lower().removesuffix(".md") for m in self._ranked[0].get(normalize(parts[-1]), [])
                  if m.path != memory.path]
        for size in range(1, len(parts) + 1):
            candidate = "/".join(parts[-size:])
            lowered = candidate.lower()
            if size < len(parts) and any(rival == lowered or rival.endswith("/" + lowered) for rival in rivals):
                continue  # Obsidian writes a path where the name is shared, whichever note it would pick
            try:
                found = self.resolve(candidate, source=source)
            except Ambiguous:
                continue
            if found is not None and found.memory.path == memory.path:
                return candidate
        return memory.path  # a root note the linking note's folder shadows: by its path from the root, `.md` and all


STYLES = ("name", "path", "id")


def link_style(names: Names, written: Iterable[tuple[str, str]]) -> str:
    """How a palace's notes write wikilinks, by the majority of those that name a note (`written`: (the linking
    note's path, the target as written); Markdown links' `.md` paths do not vote): `name` (the file name, a folder
    path only where the name is shared: Obsidian's default), `path` (the path from the root), or `id` (palace
    ids that are not the file's name). No vote, or a tie, is `name`."""
    votes: Counter = Counter()
    for source, target in written:
        target = target.strip()
        if not target or target.lower().endswith(".md"):
            continue
        try:
            found = names.resolve(target, source=source)
        except Ambiguous:
            continue
        if found is not None:
            votes[_style_of(names, target, found.memory)] += 1
    return max(STYLES, key=lambda style: (votes[style], style == "name"))


def _style_of(names: Names, target: str, memory: Memory) -> str:
    stem = memory.path.rsplit("/", 1)[-1].removesuffix(".md")
    if "/" in target:
        shared = len(names.by_rank(stem)[0][1]) > 1
        return "name" if shared else "path"
    if target == memory.id and normalize(memory.id) != normalize(stem):
        return "id"
    return "name"


class Files:
    """The files of a vault that are not notes (attachments), by path and by file name: what `![[photo.jpg]]`,
    `[[manual.pdf]]` or `![alt](img/a.png)` name."""

    def __init__(self, paths: Iterable[str]):
        self.paths = set(paths)
        self._lower = {p.lower(): p for p in sorted(self.paths)}
        self._named: dict[str, list[str]] = defaultdict(list)
        for path in sorted(self.paths):
            self._named[path.rsplit("/", 1)[-1].lower()].append(path)

    def resolve(self, target: str, source: str = "", anywhere: bool = True) -> str | None:
        """The path of the file a link target names: its path from the root, or from the folder of `source`; with
        anywhere (a wikilink, as Obsidian reads one), its name or last folders anywhere in the vault, the linking
        note's folder first, then the shortest path. None when no such file exists."""
        target = target.strip().removeprefix("./").lstrip("/")
        folder = posixpath.dirname(source) if source else ""
        for candidate in (target, posixpath.normpath(f"{folder}/{target}") if folder else target):
            if candidate in self.paths:
                return candidate
            if candidate.lower() in self._lower:
                return self._lower[candidate.lower()]
        if not anywhere:
            return None
        lowered = target.lower()
        found = [p for p in self._named.get(lowered.rsplit("/", 1)[-1], [])
                 if p.lower() == lowered or p.lower().endswith("/" + lowered)]
        here = [p for p in found if posixpath.dirname(p) == folder]
        return (here or sorted(found, key=lambda p: (len(p), p)) or [None])[0]


FIELD_WEIGHTS = (("subject", 1.0), ("id", 1.0), ("aliases", 1.0), ("keywords", 0.6), ("anchor", 0.6))


MATCH, SPELLING, MARGIN = 0.5, 0.6, 0.15  # a match needs half the words (or a close spelling) and a clear lead


def _word_sets(memory: Memory) -> list[tuple[set[str], float]]:
    values = {"subject": memory.subject, "id": memory.id.replace("-", " "), "aliases": " ".join(memory.aliases),
              "keywords": " ".join(memory.keywords), "anchor": memory.anchor}
    return [({root(w) for w in words(values[name])}, weight) for name, weight in FIELD_WEIGHTS]


class _Near:
    """What suggesting a memory for a name that names none needs of a set of memories, computed once: each
    memory's word sets, the vocabulary, exact names, subjects with their letter counts, spelled words' owners."""

    def __init__(self, memories: Iterable[Memory]):
        self.memories = list(memories)
        self.fields = [_word_sets(m) for m in self.memories]
        self.vocabulary = set().union(*(words_ for sets in self.fields for words_, _ in sets))
        self.exact: dict[str, list[Memory]] = defaultdict(list)
        for memory in self.memories:
            for key in {normalize(memory.subject), normalize(memory.anchor), normalize(memory.id),
                        *(normalize(a) for a in memory.aliases)}:
                self.exact[key].append(memory)
        self.subjects = [normalize(m.subject) for m in self.memories]
        self.letters = [Counter(subject) for subject in self.subjects]
        self.owners: dict[str, list[str]] = {}
        for memory in self.memories:
            for word in {*words(memory.id), *words(memory.subject), *(w for a in memory.aliases for w in words(a))}:
                if len(word) >= 3:
                    self.owners.setdefault(word, []).append(memory.id)

    def ids(self, ref: str) -> list[str]:
        """Ids of the memories `ref` most likely meant: one fuzzy match, several close ones, or close spellings."""
        try:
            return [_fuzzy(ref, self).id]
        except Ambiguous as exc:
            return exc.candidates
        except NotFound:
            return _spelled_like(ref, self)


def not_found_message(ref: str, memories: list[Memory]) -> str:
    """`no memory <ref>`, with the nearest memories by a fuzzy match when there are any."""
    near = _Near(memories).ids(ref)
    if not near:
        return f"no memory {ref!r} (try `palace list` or `palace search`)"
    return f"no memory {ref!r}; did you mean: {', '.join(near)}?"


def _spelled_like(ref: str, tables: _Near, limit: int = 5) -> list[str]:
    """Ids of memories with an id, subject word or alias word spelled close to a word of `ref` (`blom`: bloom-filter)."""
    owners = tables.owners
    found: list[str] = []
    for word in words(ref):
        for close in get_close_matches(word, list(owners), n=3, cutoff=0.75):
            found += [i for i in sorted(owners[close]) if i not in found]
    return found[:limit]


def _spelling(wanted: str, subject: str, letters: Counter, counts: Counter) -> float:
    """How close `wanted` is spelled to a subject (0 below SPELLING): difflib's ratio, plus 0.3 when it is inside.
    Upper bounds of the ratio from lengths and letter counts skip the costly exact ratio wherever they fall short."""
    total = len(wanted) + len(subject)
    bonus = 0.3 if wanted in subject else 0.0
    bound = 2.0 * min(len(wanted), len(subject)) / total if total else 1.0  # difflib's real_quick_ratio
    if bound < SPELLING - 0.3 or bound + bonus < SPELLING:
        return 0.0
    shared = sum(min(n, counts[c]) for c, n in letters.items())  # difflib's quick_ratio
    if (2.0 * shared / total if total else 1.0) + bonus < SPELLING:
        return 0.0
    spelling = SequenceMatcher(None, wanted, subject).ratio() + bonus
    return spelling if spelling >= SPELLING else 0.0


def _fuzzy(ref: str, tables: _Near) -> Memory:
    """The one memory a free-text reference most likely means; NotFound or Ambiguous (naming the candidates)."""
    wanted = normalize(ref)
    if not wanted:
        raise NotFound(f"no memory matches {ref!r}")
    exact = tables.exact.get(wanted, [])
    if len(exact) == 1:
        return exact[0]
    if len(exact) > 1:
        names = sorted(m.id for m in exact)[:8]
        raise Ambiguous(f"{ref!r} names several memories: {', '.join(names)}; use an id", names)
    query = [root(w) for w in wanted.split() if w not in STOPWORDS] or [root(w) for w in wanted.split()]
    vocabulary = tables.vocabulary
    near = {w: set(get_close_matches(w, vocabulary, n=8, cutoff=0.85)) - {w} if len(w) >= 5 else set() for w in query}
    known = [w for w in query if w in vocabulary or near[w]]  # words the palace has never seen tell nothing
    letters = Counter(wanted)
    scored = []
    for memory, sets, subject, counts in zip(tables.memories, tables.fields, tables.subjects, tables.letters):
        words_score = 0.0
        for word in known:
            words_score += max((weight if word in vocabulary_ else 0.8 * weight if near[word] & vocabulary_ else 0.0)
                               for vocabulary_, weight in sets)
        words_score = words_score / len(known) if known else 0.0
        scored.append((round(max(_spelling(wanted, subject, letters, counts), words_score), 6), memory.id, memory))
    good = sorted((item for item in scored if item[0] >= MATCH), key=lambda item: (-item[0], item[1]))
    if not good:
        raise NotFound(f"no memory matches {ref!r} (try `palace list` or `palace search`)")
    if len(good) > 1 and good[0][0] - good[1][0] < MARGIN:
        close = [item[1] for item in good if good[0][0] - item[0] < MARGIN]
        raise Ambiguous(f"{ref!r} matches several memories: {', '.join(close[:8])}; use an id", close[:8])
    return good[0][2]
