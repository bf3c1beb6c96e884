"""Retrieval profiles after the paper's table: how much to retrieve and how much of it to hand over."""

from __future__ import annotations

from dataclasses import dataclass

# One unit for every budget a person or an agent gives (recall, wake-up, MCP): tokens, counted as UTF-8
# bytes / 4 (rounded up). Close to what LLM tokenizers give for English prose, and needs no tokenizer.
BYTES_PER_TOKEN = 4


def tokens_of(text: str) -> int:
    """Approximate tokens of a text: its UTF-8 bytes / 4, rounded up."""
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


@dataclass(frozen=True)
class Profile:
    """A named retrieval setting."""

    name: str
    mode: str                 # the ranking: lexical or fused (search/query.py MODES)
    k: int                    # memories handed over
    sections: tuple[str, ...] # which parts of each memory go into the context
    include_links: bool       # also hand over the memories the hits link to
    budget: int | None        # default context budget in bytes (None: unlimited); shown in tokens
    trim: bool = True         # hand over only hits close to the best one (the smallest context that answers)
    turns: int = 10           # conversation turns handed over beside the k memories (turns are short)

    @property
    def budget_tokens(self) -> int | None:
        """The default budget in tokens (what the CLI and docs show)."""
        return None if self.budget is None else self.budget // BYTES_PER_TOKEN


PROFILES = {
    # fast, one memory, the facts only: answering under time pressure
    "interview": Profile("interview", "lexical", 1, ("content",), False, 1200),
    # the default: three memories' facts, for looking something up
    "reference": Profile("reference", "fused", 3, ("anchor", "content"), False, 4000),
    # full image and links, for learning the memory rather than the fact
    "study": Profile("study", "fused", 3, ("anchor", "image", "content", "links"), False, 8000, trim=False),
    # everything, plus the linked memories, for explaining a topic
    "teaching": Profile("teaching", "fused", 3, ("anchor", "image", "content", "links"), True, 16000, trim=False),
}
