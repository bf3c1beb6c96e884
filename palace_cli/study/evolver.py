"""The Evolver: names a weak Image's missing SMASHIN factors and proposes a stronger Image as a diff."""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass, field

from palace_cli.core.disk import atomic_write
from palace_cli.core.noteedit import check_note_size, dump_frontmatter, edit_frontmatter, edit_section, replace_section
from palace_cli.core.notefile import load_note, parse_note
from palace_cli.core.text import split_sentences
from palace_cli.core.tokens import contains_phrase, propose_token
from palace_cli.editing.lint import OPT_IN
from palace_cli.errors import ModelError, PalaceError
from palace_cli.index.locks import write_lock
from palace_cli.palace import Palace
from palace_cli.study.llm import NEEDS_MODEL, propose_image
from palace_cli.core.smashin import FACTORS, SmashinScore, detect, factor, score_memory

PROPOSALS = "proposals"


@dataclass
class Evolution:
    """What evolve found for one memory: its score, the missing factors with tips, and maybe a proposed Image."""

    memory_id: str
    path: str
    score: SmashinScore
    tips: dict[str, str]
    proposal: str | None = None
    proposal_score: int | None = None
    proposal_missing: list[str] = field(default_factory=list)
    diff: str = ""
    problem: str = ""
    accepted: bool = False
    from_cache: bool = False
    lacks: list[str] = field(default_factory=list)  # a plain note's missing parts: image, anchor, verify
    anchor: str = ""   # proposed with the image, for a note that has none
    verify: str = ""   # proposed from the image, for a note that has none
    opted_in: bool = True  # the note follows palace's template: --accept may write it (NoteRules.templated)

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {"id": self.memory_id, "path": self.path, "score": self.score.score, "missing": self.score.missing,
                "tips": self.tips, "proposal": self.proposal, "proposal_score": self.proposal_score,
                "proposal_missing": self.proposal_missing, "diff": self.diff, "problem": self.problem,
                "accepted": self.accepted, "lacks": self.lacks, "anchor": self.anchor, "verify": self.verify,
                "opted_in": self.opted_in}


def _note_hash(palace: Palace, relpath: str) -> str:
    return hashlib.sha256((palace.root / relpath).read_bytes()).hexdigest()[:16]


def _proposal_path(palace: Palace, memory_id: str):
    return palace.cache_dir / PROPOSALS / f"{memory_id}.json"


def image_diff(path: str, old: str, new: str) -> str:
    """A unified diff of the Image section, one sentence per line so a change reads as a change."""
    before = [s + "\n" for s in split_sentences(old)]
    after = [s + "\n" for s in split_sentences(new)]
    return "".join(difflib.unified_diff(before, after, f"a/{path} (Image)", f"b/{path} (Image)"))


def evolve(palace: Palace, ref: str, generator=None, accept: bool = False, why_not: str = "") -> Evolution:
    """Score a memory, propose a stronger Image with the generator, and with accept write it to the note.

    Without a generator, `why_not` says why (else: none installed)."""
    memory = palace.memory(ref)
    current = score_memory(memory)
    tips = {key: factor(key).technique for key in current.missing}
    result = Evolution(memory.id, memory.path, current, tips)
    result.lacks = [name for name in ("image", "anchor", "verify") if not getattr(memory, name)]
    result.opted_in = palace.site.rules.templated(memory)
    if generator is None:
        result.problem = why_not or NEEDS_MODEL
        if accept:
            raise ModelError(f"evolve --accept: {result.problem}")
        return result
    base = _note_hash(palace, memory.path)
    cached = _load_proposal(palace, memory.id, base)
    if cached is not None:
        (image, result.anchor, result.verify), result.from_cache = cached, True
    else:
        image, problem = propose_image(generator, memory, current.missing, {f.key: f.technique for f in FACTORS})
        if image is None:
            result.problem = problem
            if accept:
                raise PalaceError(f"{memory.id}: no usable proposal ({problem}); the note is unchanged")
            return result
    if cached is None and not memory.verify:  # a note growing into a memory: its hook and token, from the image
        taken = {m.verify for m in palace.scan(light=True).memories.values() if m.verify}
        result.verify = propose_token(image, memory.subject, memory.keywords, memory.content, taken) or ""
        result.anchor = memory.anchor or propose_token(image, memory.subject, memory.keywords, memory.content,
                                                       taken | {result.verify}, anchor="") or ""
        if not result.verify:
            result.problem = "no verify token can be proposed from this image (no odd 2-5 word phrase of its own)"
    new_factors = detect(image)
    result.proposal = image
    result.proposal_score = sum(f.present for f in new_factors)
    result.proposal_missing = [f.key for f in new_factors if not f.present]
    result.diff = image_diff(memory.path, memory.image, image)
    if result.proposal_score <= current.score and not result.problem:
        result.problem = (f"the proposal scores {result.proposal_score}/12, not above the current "
                          f"{current.score}/12; not worth accepting")
    _save_proposal(palace, memory.id, base, image, result.anchor, result.verify)
    if accept:
        _accept(palace, memory, result, image, base)
    return result


def _accept(palace: Palace, memory, result: Evolution, image: str, base: str) -> None:
    """Write the proposal into the note: only a good one, only into a note that opted into palace's template."""
    if result.problem:
        raise PalaceError(f"{memory.id}: {result.problem}; the note is unchanged")
    if not palace.site.rules.templated(memory):
        raise PalaceError(f"{memory.path} has not opted into palace's template, so palace writes nothing into "
                          f"it: {OPT_IN}, then accept again; the note is unchanged")
    if memory.image:
        accept_image(palace, memory.id, image, base)
    else:
        grow_memory(palace, memory.id, image, result.anchor, result.verify, base)
    result.accepted = True


def grow_memory(palace: Palace, memory_id: str, image: str, anchor: str, verify: str, base_hash: str) -> None:
    """Give a plain note what makes it a memory: an `## Image` section at its end and `anchor` and `verify` in
    its frontmatter (a frontmatter block is added when it has none); every other byte stays as it was."""
    memory = palace.memory(memory_id)
    path = palace.root / memory.path
    if _note_hash(palace, memory.path) != base_hash:
        raise PalaceError(f"{memory.path} changed since the proposal was made; run `palace evolve {memory_id}` again")
    raw = path.read_bytes()
    bom = b"\xef\xbb\xbf" if raw.startswith(b"\xef\xbb\xbf") else b""
    text = raw[len(bom):].decode("utf-8")
    fields = {name: value for name, value in (("anchor", anchor), ("verify", verify)) if value and not
              getattr(memory, name)}
    if memory.has_frontmatter:
        text = edit_frontmatter(text, fields, memory.path)
    else:
        newline = "\r\n" if "\r\n" in text else "\n"
        text = "---" + newline + dump_frontmatter(fields).replace("\n", newline) + "---" + newline + text
    text = edit_section(text, "Image", image, memory.path, create=True)
    check = parse_note(text.replace("\r\n", "\n"), memory.path, memory.domain)
    if check.id != memory.id or check.content != memory.content or not contains_phrase(check.image, verify or "\0"):
        raise PalaceError(f"{memory.path}: the grown note would not read back as the same note with its token; "
                          "the note is unchanged")
    check_note_size(text, memory.path)
    atomic_write(path, bom + text.encode("utf-8"))
    _proposal_path(palace, memory_id).unlink(missing_ok=True)


def accept_image(palace: Palace, memory_id: str, image: str, base_hash: str) -> None:
    """Replace the Image section atomically; refuse when the note changed since the proposal or the token would go."""
    with write_lock(palace.site):  # the note checked is the note rewritten
        _accept_image(palace, memory_id, image, base_hash)


def _accept_image(palace: Palace, memory_id: str, image: str, base_hash: str) -> None:
    memory = palace.memory(memory_id)
    if _note_hash(palace, memory.path) != base_hash:
        raise PalaceError(f"{memory.path} changed since the proposal was made; run `palace evolve {memory_id}` again")
    if memory.verify and not contains_phrase(image, memory.verify):
        raise PalaceError(f"{memory.path}: the proposed Image lacks the verify token; the note is unchanged")
    replace_section(palace.root / memory.path, "Image", image, memory.path)
    check = load_note(palace.root, memory.path, memory.domain)
    if check.id != memory.id or (memory.verify and not contains_phrase(check.image, memory.verify)):
        raise PalaceError(f"{memory.path}: the rewritten note did not read back as expected")  # pragma: no cover
    _proposal_path(palace, memory_id).unlink(missing_ok=True)


def _load_proposal(palace: Palace, memory_id: str, base_hash: str) -> tuple[str, str, str] | None:
    """The proposal shown last time (image, anchor, verify), if it was made for the note as it is now."""
    try:
        data = json.loads(_proposal_path(palace, memory_id).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("base") != base_hash or not isinstance(data.get("image"), str):
        return None
    return data["image"], str(data.get("anchor") or ""), str(data.get("verify") or "")


def _save_proposal(palace: Palace, memory_id: str, base_hash: str, image: str, anchor: str = "",
                   verify: str = "") -> None:
    """Keep the proposal so `--accept` writes exactly what was shown."""
    atomic_write(_proposal_path(palace, memory_id), json.dumps({"base": base_hash, "image": image, "anchor": anchor,
                                                                "verify": verify}, indent=1))
