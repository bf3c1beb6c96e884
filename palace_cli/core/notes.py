"""The note model: a Memory and its fields, whatever file it was read from (notefile.py reads one, noteedit.py writes one)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
# The frontmatter fields palace reads (docs/note-format.md), by kind; every other key is kept as it is.
TEXT_FIELDS = ("subject", "anchor", "verify")
LIST_FIELDS = ("keywords", "links", "aliases")
DATE_FIELDS = ("valid_from", "valid_until")
VERSION_FIELDS = ("supersedes", "superseded_by")  # lists of memory ids: the versions of a fact
FIELDS = ("id", "subject", "title", "anchor", "keywords", "verify", "links", "aliases", "tags", "previous_ids", "created",
          "importance", "type", *DATE_FIELDS, *VERSION_FIELDS, "core")
TYPES = ("fact", "preference", "decision", "event", "procedure", "concept", "plan", "relationship", "opinion")


@dataclass
class Warning_:
    """Something odd about a note that did not stop it from being read."""

    line: int
    code: str
    message: str


@dataclass
class Memory:
    """A parsed memory note. `path` is relative to the palace root, with forward slashes."""

    id: str
    subject: str
    anchor: str
    verify: str
    domain: str
    path: str
    keywords: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    previous_ids: list[str] = field(default_factory=list)  # ids it had before `palace mv`: links and reviews follow
    created: str = ""
    valid_from: str = ""
    valid_until: str = ""
    supersedes: list[str] = field(default_factory=list)
    superseded_by: list[str] = field(default_factory=list)
    type: str = ""
    core: bool = False
    plain: bool = False  # no anchor, verify token or Image: a note of its own shape, not (yet) a SMASHIN memory
    derived_id: bool = False  # no usable `id:`: the id comes from the path (layout.path_id)
    structured: bool = False  # the body has `## Image` or `## Content` sections (else its whole text is content)
    image: str = ""
    content: str = ""
    body: str = ""
    line: int = 1
    image_line: int = 0
    content_line: int = 0
    body_links: list[str] = field(default_factory=list)
    property_links: list[str] = field(default_factory=list)  # wikilinks in frontmatter properties (`up: "[[P]]"`)
    link_ids: list[str] = field(default_factory=list)  # the ids all_links resolve to: filled by a scan, not by parsing
    meta: dict = field(default_factory=dict)
    warnings: list[Warning_] = field(default_factory=list)
    body_line: int = 0
    field_lines: dict[str, int] = field(default_factory=dict)

    @property
    def has_frontmatter(self) -> bool:
        """True when the note starts with a `---` frontmatter block (its body starts after it)."""
        return self.body_line > 1

    @property
    def location(self) -> str:
        """`path:line`, clickable in editors and terminals."""
        return f"{self.path}:{self.line}"

    @property
    def all_links(self) -> list[str]:
        """Frontmatter links, then body [[links]] and property links not already listed."""
        seen = list(self.links)
        for link in self.body_links + self.property_links:
            if link not in seen:
                seen.append(link)
        return seen

    def field_line(self, name: str) -> int:
        """The file line of a frontmatter field (line 2, the first field line, when it is absent)."""
        return self.field_lines.get(name, 2)

    def search_text(self) -> str:
        """The text embedded: subject, anchor, keywords, content, image.

        The Content comes before the Image because the embedder reads only the first 256 tokens: most
        example-palace notes are longer, and their facts matter more than their scene (dense MRR 0.880 ->
        0.908 there, no loss on shorter notes; docs/ranking-experiments.md)."""
        return "\n".join(
            part for part in (self.subject, self.anchor, ", ".join(self.keywords), self.content, self.image) if part
        )


# ---- reading ---------------------------------------------------------------------------------


# ---- writing ---------------------------------------------------------------------------------


