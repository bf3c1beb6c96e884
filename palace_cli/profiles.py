"""Retrieval profiles after the paper's table: how much to retrieve and how much of it to hand over."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    """A named retrieval setting."""

    name: str
    mode: str                 # hop-2 ranking: lexical or hybrid
    k: int                    # memories handed over
    sections: tuple[str, ...] # which parts of each memory go into the context
    include_links: bool       # also hand over the memories the hits link to
    budget: int | None        # default context budget in bytes (None: unlimited)
    trim: bool = True         # hand over only hits close to the best one (the smallest context that answers)


PROFILES = {
    # fast, one memory, the facts only: answering under time pressure
    "interview": Profile("interview", "lexical", 1, ("content",), False, 1200),
    # the default: three memories' facts, for looking something up
    "reference": Profile("reference", "hybrid", 3, ("anchor", "content"), False, 4000),
    # full image and links, for learning the memory rather than the fact
    "study": Profile("study", "hybrid", 3, ("anchor", "image", "content", "links"), False, 8000, trim=False),
    # everything, plus the linked memories, for explaining a topic
    "teaching": Profile("teaching", "hybrid", 3, ("anchor", "image", "content", "links"), True, 16000, trim=False),
}
