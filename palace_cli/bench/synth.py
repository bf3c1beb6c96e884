"""Synthetic but realistic SMASHIN notes for benchmarks: deterministic for a seed, any size."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

from palace_cli.core.disk import atomic_write

TOPIC_WORDS = (
    "cache eviction latency throughput replica leader follower quorum consensus partition shard hash ring "
    "index btree lsm compaction memtable sstable bloom filter wal checkpoint snapshot isolation mvcc lock "
    "deadlock timeout retry backoff jitter circuit breaker bulkhead rate limiter token bucket queue topic "
    "consumer producer offset commit idempotent exactly once delivery saga compensation coordinator prepare "
    "vote abort gossip heartbeat lease fencing clock vector lamport timestamp skew drift epoch term election "
    "raft paxos log entry append truncate merkle tree anti entropy hinted handoff read repair sloppy "
    "consistency linearizable serializable causal eventual monotonic session affinity sticky load balancer "
    "proxy gateway edge cdn origin ttl invalidation stampede warmup cold hot key skew tenant quota budget "
    "slo sli error availability durability replication lag failover split brain fsync page buffer pool "
    "cursor scan seek range predicate pushdown join hash sort merge spill schema migration backfill "
    "canary rollout rollback feature flag blue green deploy chaos fault injection observability trace span "
    "metric histogram percentile tail sampling alert pager runbook incident postmortem capacity headroom "
    "autoscaling pod container scheduler bin packing admission control backpressure flow window stream "
    "batch watermark late event window aggregate materialized view projection event sourcing cqrs outbox "
    "inbox dedup sequence vacuum tombstone garbage collection arena allocator page cache prefetch "
    "compression dictionary encoding columnar row store vectorized pipeline operator planner optimizer "
    "statistics histogram cardinality estimate cost model plan cache prepared statement connection pool"
).split()

SCENE_WORDS = (
    "giant tiny golden crimson frozen burning singing whispering dancing marching sneezing glowing rusty "
    "velvet glass granite rubber paper wooden silver neon elephant octopus librarian juggler astronaut "
    "chef pirate monk grandmother robot penguin giraffe dragon wizard clown sailor firefighter surgeon "
    "tailor baker drummer ballerina courier lighthouse cathedral submarine carousel volcano glacier "
    "harbour bazaar attic cellar rooftop stadium tunnel bridge orchard vineyard swamp desert circus "
    "castle theatre kitchen laboratory greenhouse railway station airport museum aquarium bakery market "
    "trumpet bell whistle drum thunder perfume smoke cinnamon lemon garlic vinegar honey pepper mint "
    "umbrella ladder bucket anchor compass lantern kettle hammer scissors feather balloon rope mirror "
    "clock hourglass teapot suitcase envelope stamp coin key ticket crown helmet scarf boot glove "
    "shouts sprints tumbles juggles stamps whispers sniffs licks hugs smashes bounces spins flips "
    "melts shatters swallows paints stacks counts weighs"
).split()

FILLER = ("the a of and to in on with while as each every then until when her his their its one two three "
          "seven forty hundred").split()
VOCABULARIES = ("small", "zipf")
SYLLABLES = "ka lo mi ra ten vor shu bel dan qui sel mar tor zen pa ri os un el ga fi no ze lu".split()


def _pseudo_words(rng: random.Random, count: int) -> list[str]:
    """A long tail of rare invented terms (product names, jargon) so the vocabulary grows with the palace."""
    words = set()
    while len(words) < count:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


class NoteFactory:
    """Makes SMASHIN notes whose sizes, vocabulary and link density resemble hand-written ones."""

    def __init__(self, seed: int = 0, size: int = 1000, vocabulary: str = "small"):
        if vocabulary not in VOCABULARIES:
            raise ValueError(f"unknown vocabulary {vocabulary!r}; choose from {', '.join(VOCABULARIES)}")
        self.rng = random.Random(seed)
        self.size = size
        tail = _pseudo_words(random.Random(seed + 1), max(500, size // 4))
        self.topic = TOPIC_WORDS + tail
        # Zipf-like weights: a few very common terms, a long tail of rare ones.
        self.topic_cumulative = list(itertools.accumulate(1.0 / (rank + 8) for rank in range(len(self.topic))))
        self.scene_pool = self._pool(0.35, 0.40)
        self.content_pool = self._pool(0.35, 0.10)
        if vocabulary == "zipf":
            self.scene_pool = self.content_pool = self._zipf(seed, size)
        self.domains = [f"domain-{i:02d}-" + "-".join(random.Random(seed + i).sample(TOPIC_WORDS, 2))
                        for i in range(max(3, min(40, int(size ** 0.5 / 3))))]
        self.ids: list[str] = []
        self.used_tokens: set[str] = set()

    def _pool(self, filler: float, scene: float) -> tuple[list[str], list[float]]:
        """Every word with a weight: the three word classes in the given shares, Zipf-like inside topics."""
        topic_total = self.topic_cumulative[-1]
        weights = [filler / len(FILLER)] * len(FILLER) + [scene / len(SCENE_WORDS)] * len(SCENE_WORDS)
        weights += [(1.0 - filler - scene) / (rank + 8) / topic_total for rank in range(len(self.topic))]
        return FILLER + SCENE_WORDS + self.topic, list(itertools.accumulate(weights))

    def _zipf(self, seed: int, size: int) -> tuple[list[str], list[float]]:
        """One Zipfian (s = 1) over every word, filler first, then topics, scenes and a tail growing with the
        palace: as in written text, a few words are in every note and most in very few."""
        tail = _pseudo_words(random.Random(seed + 2), max(5000, size // 2))
        words = list(dict.fromkeys(FILLER + TOPIC_WORDS + SCENE_WORDS + tail))
        return words, list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(words))))

    def _topic(self, k: int) -> list[str]:
        return self.rng.choices(self.topic, cum_weights=self.topic_cumulative, k=k)

    def _sentence(self, scene: bool) -> str:
        pool, cumulative = self.scene_pool if scene else self.content_pool
        words = self.rng.choices(pool, cum_weights=cumulative, k=self.rng.randint(9, 18))
        return " ".join(words).capitalize() + "."

    def _paragraph(self, sentences: int, scene: bool) -> str:
        return " ".join(self._sentence(scene) for _ in range(sentences))

    def note(self, index: int) -> tuple[str, str, str]:
        """(domain, note id, note text) for the index-th note."""
        rng = self.rng
        domain = self.domains[index % len(self.domains)]
        head = self._topic(rng.randint(2, 4))
        subject = " ".join(w.capitalize() for w in head)
        note_id = "-".join(head) + f"-{index}"
        anchor = " ".join(rng.sample(SCENE_WORDS, 3))
        keywords = sorted(set(self._topic(rng.randint(3, 7))))
        image = self._paragraph(rng.randint(5, 9), scene=True)
        while True:
            token = " ".join(rng.sample(SCENE_WORDS, 3)) + f" {index}"
            if token not in self.used_tokens:
                break
        self.used_tokens.add(token)
        image += f" Remember the {token}."
        content = self._paragraph(rng.randint(5, 10), scene=False)
        earlier = self.ids
        links = sorted({earlier[rng.randrange(len(earlier))] for _ in range(rng.randint(0, 4))}) if earlier else []
        self.ids.append(note_id)
        frontmatter = [
            "---", f"id: {note_id}", f"subject: {subject}", f"anchor: {anchor}",
            f"keywords: [{', '.join(keywords)}]", f"verify: {token}",
            f"links: [{', '.join(links)}]", f"created: 2026-{1 + index % 12:02d}-{1 + index % 28:02d}", "---",
        ]
        link_lines = "\n".join(f"- [[{link}]]" for link in links) or "- (none yet)"
        body = f"# {subject}\n\n## Image\n{image}\n\n## Content\n{content}\n\n## Links\n{link_lines}\n"
        return domain, note_id, "\n".join(frontmatter) + "\n" + body

    def short_text(self) -> str:
        """One or two sentences: about the length of a chat turn (150 characters, 35 tokens)."""
        return " ".join(self._sentence(scene=self.rng.random() < 0.5) for _ in range(self.rng.randint(1, 2)))

    def edit(self, text: str, generation: int) -> str:
        """The same note with one sentence of its Content rewritten (what a person's edit looks like)."""
        marker = "\n## Content\n"
        start = text.index(marker) + len(marker)
        return text[:start] + f"Revision {generation}: " + self._sentence(False) + " " + text[start:]


PALACE_TOML = """[palace]
name = "Synthetic Palace"
identity = "A generated palace for benchmarks."

[models]
embedder = "{embedder}"
"""


def generate_palace(root: Path, size: int, seed: int = 0, embedder: str = "default", vocabulary: str = "small") -> Path:
    """Write a palace of `size` synthetic notes under root (which must not exist yet); returns root.

    vocabulary "small": a few hundred common words fill most of every note (most queries match most notes,
    a worst case for search); "zipf": one Zipfian over a vocabulary growing with the palace."""
    root = Path(root)
    root.mkdir(parents=True)
    (root / "palace.toml").write_text(PALACE_TOML.format(embedder=embedder), encoding="utf-8")
    (root / ".gitignore").write_text(".palace/\n", encoding="utf-8")
    factory = NoteFactory(seed, size, vocabulary)
    made = set()
    for index in range(size):
        domain, note_id, text = factory.note(index)
        folder = root / "memories" / domain
        if domain not in made:
            folder.mkdir(parents=True)
            made.add(domain)
        (folder / f"{note_id}.md").write_text(text, encoding="utf-8")
    return root


def edit_note(path: Path, generation: int, seed: int = 0) -> None:
    """Rewrite one sentence of a note's Content, atomically, as an editor would save it."""
    factory = NoteFactory(seed + generation, 10)
    atomic_write(path, factory.edit(path.read_text(encoding="utf-8"), generation))


VAULT_TOML = """[palace]
name = "Synthetic Vault"

[models]
embedder = "{embedder}"

[notes]
include = ["**/*.md"]
exclude = ["templates/**"]
index_folder = "_palace"
"""


class VaultFactory(NoteFactory):
    """Makes the notes of an Obsidian-like vault: titled files with spaces in folders, a `# Title`, an opening
    paragraph and `## ` sections of prose (a `### ` one now and then), wikilinks to other notes, inline #tags,
    frontmatter (tags, aliases) on half of them; a note is about `note_bytes` long in `sections` sections."""

    def __init__(self, seed: int = 0, size: int = 1000, sections: int = 8, note_bytes: int = 4600):
        super().__init__(seed, size, "zipf")
        self.sections, self.note_bytes = sections, note_bytes
        rng = random.Random(seed + 3)
        self.folders = sorted({" ".join(w.capitalize() for w in rng.sample(TOPIC_WORDS, 2))
                               for _ in range(max(3, int(size ** 0.5 / 3)))})
        self.titles: list[str] = []

    def _prose(self, size: int) -> str:
        out, length = [], 0
        while length < size:
            sentence = self._sentence(scene=False)
            if self.titles and self.rng.random() < 0.08:
                sentence = sentence[:-1] + f", see [[{self.titles[self.rng.randrange(len(self.titles))]}]]."
            if self.rng.random() < 0.03:
                sentence += f" #{self._topic(1)[0]}"
            out.append(sentence)
            length += len(sentence) + 1
        return " ".join(out)

    def vault_note(self, index: int) -> tuple[str, str]:
        """(path from the root, text) of the index-th note."""
        rng = self.rng
        folder = self.folders[index % len(self.folders)]
        title = " ".join(w.capitalize() for w in self._topic(rng.randint(2, 4))) + f" {index}"
        if index % 5 == 0:
            folder += "/" + " ".join(w.capitalize() for w in self._topic(1)) + " archive"
        part = (self.note_bytes - 300) // self.sections
        lines = []
        if index % 2 == 0:
            tags = ", ".join(sorted(set(self._topic(rng.randint(1, 3)))))
            lines += ["---", f"tags: [{tags}]", f"aliases: [{title.lower()}]", "---"]
        lines += [f"# {title}", "", self._prose(250), ""]
        for number in range(self.sections):
            level = "###" if number and rng.random() < 0.2 else "##"
            heading = " ".join(w.capitalize() for w in self._topic(rng.randint(1, 3)))
            lines += [f"{level} {heading}", "", self._prose(part), ""]
        self.titles.append(title)
        return f"{folder}/{title}.md", "\n".join(lines)


def generate_vault(root: Path, size: int, seed: int = 0, embedder: str = "none", sections: int = 8,
                   note_bytes: int = 4600) -> Path:
    """Write an adopted vault of `size` synthetic notes under root (which must not exist yet): palace.toml with
    [notes] include, notes of about `note_bytes` in `sections` sections each; returns root."""
    root = Path(root)
    root.mkdir(parents=True)
    (root / "palace.toml").write_text(VAULT_TOML.format(embedder=embedder), encoding="utf-8")
    factory = VaultFactory(seed, size, sections, note_bytes)
    for index in range(size):
        relpath, text = factory.vault_note(index)
        path = root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
