"""Changing what a memory says in place, and checking links and tokens before a note is written.

`update_memory` sets frontmatter fields and replaces `## sections` of one note through the byte-preserving
editors of notes.py, in one atomic write: every other byte (unknown keys, comments, key order, other
sections) stays as it was. The id and version fields are not changed here (`palace mv`, `supersede`).
"""

from __future__ import annotations

import difflib

from palace_cli.core.markdown import conflict_blocks
from palace_cli.core.noteedit import edit_frontmatter, edit_section
from palace_cli.core.notefile import load_note, parse_note
from palace_cli.core.notes import LIST_FIELDS, TEXT_FIELDS, TYPES, Memory
from palace_cli.core.tokens import contains_phrase, propose_token
from palace_cli.editing.writes import apply, edited, writing
from palace_cli.errors import NotFound, PalaceError, UsageError
from palace_cli.palace import Palace

EDITABLE = (*TEXT_FIELDS, *LIST_FIELDS, "type", "core")


class Refused(PalaceError):
    """A change that would leave a note wrong (an unknown link, a token not in the Image), with what to send."""


def closest_ids(palace: Palace, ref: str, n: int = 3) -> list[str]:
    """The ids most like `ref` (by spelling of id and subject), best first."""
    memories = palace.scan(light=True).memories.values()
    names = {m.id: m.id for m in memories}
    names.update({m.subject.lower(): m.id for m in memories if m.subject})
    near = difflib.get_close_matches(ref.lower(), list(names), n=n * 2, cutoff=0.4)
    return list(dict.fromkeys(names[name] for name in near))[:n]


def link_ids(palace: Palace, refs: list[str]) -> list[str]:
    """The ids that `refs` name (an id, file name, alias or subject of one memory); an unknown one is refused,
    naming the closest ids."""
    out = []
    for ref in refs:
        ref = ref.strip()
        if not ref:
            continue
        try:
            out.append(palace.memory(ref, refresh=False).id)
        except NotFound:
            near = closest_ids(palace, ref)
            hint = f"; closest ids: {', '.join(near)}" if near else ""
            raise Refused(f"unknown link {ref!r}: no memory has that id{hint}. Link existing memories by id "
                          "(recall and search list them), or add the missing memory first") from None
    return list(dict.fromkeys(out))


def token_for(palace: Palace, image: str, verify: str | None, *, subject: str = "", keywords=(), content: str = "",
              anchor: str = "", owner: str = "") -> str:
    """The verify token a new or changed Image gets: `verify` when it is a phrase of the image no other memory
    uses, else one proposed from the image; refused, saying what to send, when there is none."""
    taken = {m.verify for m in palace.scan(light=True).memories.values() if m.verify and m.id != owner}
    if not image.strip():
        raise Refused("a memory needs an image: a vivid scene of two to four sentences (movement, sound, colour, "
                      "something absurd) that makes it memorable. Its verify token is a phrase of the image, so a "
                      "later answer that quotes it proves this note was read. Send image='...'; the token is "
                      "proposed from it (or send verify='a 2-5 word phrase of the image')")
    if verify:
        if not contains_phrase(image, verify):
            raise Refused(f"verify {verify!r} is not a phrase of the image; send a phrase the image contains, "
                          "or leave verify out to have one proposed")
        if verify in taken:
            raise Refused(f"verify {verify!r} is another memory's token; choose another phrase of the image")
        return verify
    proposed = propose_token(image, subject, list(keywords), content, taken, anchor=anchor)
    if not proposed:
        raise Refused("no verify token can be proposed from this image: it needs a phrase of 2-5 words that is not "
                      "in the subject, keywords or content (an odd detail, like 'forty purple sneakers'). Add one "
                      "to the image, or send verify='...' with such a phrase of it")
    return proposed


def _changes(palace: Palace, memory: Memory, fields: dict) -> dict:
    """Frontmatter changes from `fields`, checked: known names, right types, links that exist."""
    changes = {}
    for name, value in fields.items():
        if name not in EDITABLE:
            raise UsageError(f"cannot update {name!r}; the fields are {', '.join(EDITABLE)} (the id changes with "
                             "`palace mv`, versions with add(supersedes=...))")
        if name in TEXT_FIELDS:
            if not isinstance(value, str):
                raise UsageError(f"{name} must be text, not {type(value).__name__}")
            value = " ".join(value.split())
            if name == "subject" and not value:
                raise UsageError("a memory needs a subject")
        elif name in LIST_FIELDS:
            if isinstance(value, str) or not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise UsageError(f"{name} must be a list of texts")
            value = [v.strip() for v in value if v.strip()]
            if name == "links":
                value = link_ids(palace, value)
        elif name == "type":
            if value not in (*TYPES, ""):
                raise UsageError(f"type {value!r} is not one of {', '.join(TYPES)}")
            value = value or None  # "" removes it
        elif not isinstance(value, bool):
            raise UsageError("core must be true or false")
        changes[name] = value
    return changes


def _check_token(palace: Palace, memory: Memory) -> None:
    """A changed token or Image must leave a token that the Image holds and no other memory uses."""
    if not memory.verify:
        raise Refused("the memory would have no verify token; send fields={'verify': 'a 2-5 word phrase of the "
                      "Image'}")
    if not contains_phrase(memory.image, memory.verify):
        raise Refused(f"the Image would not contain the verify token {memory.verify!r}: keep that phrase in the "
                      "Image, or also send fields={'verify': 'a phrase of the new Image'}")
    if any(m.verify == memory.verify for m in palace.scan(light=True).memories.values() if m.id != memory.id):
        raise Refused(f"verify {memory.verify!r} is another memory's token; choose another phrase of the Image")


def update_memory(palace: Palace, ref: str, fields: dict | None = None, sections: dict | None = None) -> Memory:
    """Set `fields` and replace `sections` (name -> text) of one memory in one atomic write; returns it re-read.

    Refused, with nothing written, when the result would be a note with an unknown link, a verify token that
    is not in its Image (or is another memory's), or a note that does not read back."""
    fields, sections = dict(fields or {}), dict(sections or {})
    if not fields and not sections:
        raise UsageError("nothing to update: send fields (frontmatter values) or sections (## heading -> text)")
    with writing(palace):  # its token is checked against every note written before this change
        return _update(palace, ref, fields, sections)


def _update(palace: Palace, ref: str, fields: dict, sections: dict) -> Memory:
    memory = palace.memory(ref)
    changes = _changes(palace, memory, fields)
    for name, body in sections.items():
        if not isinstance(body, str):
            raise UsageError(f"section {name!r} must be text")

    def edit(text: str) -> str:
        new = edit_frontmatter(text, changes, memory.path) if changes else text
        for name, body in sections.items():
            new = edit_section(new, name.strip().lstrip("#").strip(), body, memory.path)
        return new

    change = edited(palace, memory.path, edit)
    if change is None:
        return memory
    text, new = (data.decode("utf-8").lstrip("\ufeff") for data in (change.before, change.after))
    if len(conflict_blocks(new)) > len(conflict_blocks(text)):
        raise Refused("the new text holds git conflict markers (<<<<<<< ======= >>>>>>>): resolve the conflict "
                      "before sending it; the note is unchanged")
    updated = parse_note(new, memory.path, memory.domain)
    if "verify" in changes or "image" in {name.strip().lstrip("#").strip().lower() for name in sections}:
        _check_token(palace, updated)
    apply(palace, [change], f"update {memory.id}")
    return load_note(palace.root, memory.path, memory.domain)
