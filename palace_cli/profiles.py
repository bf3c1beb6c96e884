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
    purpose: str
    trim: bool = True         # hand over only hits close to the best one (the smallest context that answers)


PROFILES = {
    "interview": Profile("interview", "lexical", 1, ("content",), False, 1200,
                         "fast, one memory, the facts only: answering under time pressure"),
    "reference": Profile("reference", "hybrid", 3, ("anchor", "content"), False, 4000,
                         "the default: three memories' facts, for looking something up"),
    "study": Profile("study", "hybrid", 3, ("anchor", "image", "content", "links"), False, 8000,
                     "full image and links, for learning the memory rather than the fact", trim=False),
    "teaching": Profile("teaching", "hybrid", 3, ("anchor", "image", "content", "links"), True, 16000,
                        "everything, plus the linked memories, for explaining a topic", trim=False),
}
