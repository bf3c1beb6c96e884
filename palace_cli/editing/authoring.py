"""Creating memories: `palace add`, quick capture, the plain-note writer (`palace init` is initplan.py)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from palace_cli.core.dates import today, yaml_moment
from palace_cli.core.layout import MEMORIES, Scan, path_id, refuse_path_tricks
from palace_cli.core.markdown import code_ranges, conflict_blocks, outside_code
from palace_cli.core.noteedit import check_note_size, dump_frontmatter, edit_frontmatter, edit_section, inline_yaml
from palace_cli.core.notefile import load_note, note_text, parse_note, split_frontmatter
from palace_cli.core.notes import ID_PATTERN, TYPES, Memory
from palace_cli.core.secrets import without_secrets
from palace_cli.core.text import slug, slugify, title_name, words
from palace_cli.core.tokens import propose_token, token_problems
from palace_cli.core.validity import Versions
from palace_cli.editing.initplan import init, init_palace, template_text  # init's old home: imported from here too
from palace_cli.editing.versions import check_link, moment_option, old_note_changes, planned_edit
from palace_cli.editing.writes import Change, apply, creating, note_target, replacing, set_fields, writing
from palace_cli.errors import NoteError, OutsidePalace, PalaceError, UsageError
from palace_cli.palace import Palace
from palace_cli.search.similar import similar, warning_lines

TEMPLATES = "templates"
# `key: {field}` lines of a template's frontmatter; the placeholder becomes the field's YAML value.
FIELD_PLACEHOLDER = re.compile(r"^([ \t]*[\w-]+:[ \t]*)\{(\w+)\}([ \t]*(?:#.*)?)$", re.MULTILINE)
BODY_PLACEHOLDERS = ("id", "subject", "domain", "anchor", "created")


def memory_template(palace: Palace) -> tuple[str, str]:
    """(text, where) of the note template: the palace's templates/memory.md, else the built-in one."""
    own = palace.root / TEMPLATES / "memory.md"
    if own.is_file():
        return own.read_text(encoding="utf-8"), palace.rel(own)
    return template_text("memory.md"), "built-in template"


def render_memory(template: str, fields: dict, domain: str, sections: dict[str, str], where: str = "template") -> str:
    """A new note from a template: `key: {field}` lines get YAML values, fields it lacks are added,
    {subject}-style placeholders in the body get text, and given sections replace the template's hints."""
    try:
        yaml_text, body, _ = split_frontmatter(template, where)
    except NoteError as exc:
        raise PalaceError(f"{where}: the note template is broken: {exc.reason}") from None
    used = set()

    def fill(match):
        name = match.group(2)
        if name not in fields:
            return match.group(0)
        used.add(name)
        return f"{match.group(1)}{inline_yaml(fields[name])}{match.group(3)}"

    yaml_text = FIELD_PLACEHOLDER.sub(fill, yaml_text)
    values = dict(fields, domain=domain)
    for name in BODY_PLACEHOLDERS:
        body = body.replace("{" + name + "}", str(values.get(name) or ""))
    text = "---\n" + yaml_text + "---\n" + body
    try:
        text = edit_frontmatter(text, {k: v for k, v in fields.items() if k not in used}, where)
    except NoteError as exc:
        raise PalaceError(f"{where}: the note template is broken: {exc.reason}") from None
    for name, section_text in sections.items():
        if section_text.strip():
            text = edit_section(text, name, section_text, where, create=True)
    return text


@dataclass
class Draft:
    """A new note, rendered and checked but not written yet: `palace add` may hand its text to an editor first."""

    palace: Palace
    id: str
    domain: str
    relpath: str
    text: str
    edits: list = field(default_factory=list)  # writes.Change: frontmatter edits of superseded notes
    overwrite: bool = False

    @property
    def path(self) -> Path:
        return self.palace.root / self.relpath

    def unfinished(self, text: str | None = None) -> bool:
        """True when the Image or the Content is still empty or the template's hint: nothing to save yet."""
        try:
            memory = parse_note(self.text if text is None else text, self.relpath, self.domain)
        except NoteError:
            return False
        return not (memory.image and memory.content)

    def save(self, text: str | None = None) -> Memory:
        """Write the note (the draft's text, or an edited one) and the superseded notes' edits; return the memory.

        Refuses to overwrite a file (unless the draft says so). An edited text that does not parse is still
        written, alone (a person's words are never thrown away), and its NoteError raised after.
        """
        text = self.text if text is None else text
        check_note_size(text, self.relpath)
        try:
            parse_note(text, self.relpath, self.domain)
            readable = True
        except NoteError:
            if text == self.text:
                raise
            readable = False  # written anyway, alone: an unreadable note supersedes nothing
        with writing(self.palace):
            note = replacing(self.palace, self.relpath, text) if self.overwrite else creating(self.relpath, text)
            new_folder = not self.path.parent.exists()
            edits = [edit for edit in self.edits if edit is not None] if readable else []
            apply(self.palace, [note, *edits], f"palace add {self.relpath}")
            try:
                memory = load_note(self.palace.root, self.relpath, self.domain) if readable else None
            except BaseException:
                self._undo(text, new_folder)
                raise
        return memory or load_note(self.palace.root, self.relpath, self.domain)  # unreadable: raises its NoteError

    def _undo(self, text: str, new_folder: bool) -> None:
        """A failed add leaves nothing behind: not the note it wrote, not the domain folder it made."""
        if self.overwrite:
            return
        apply(self.palace, [Change(self.relpath, text.encode("utf-8"), None)], f"undo add {self.relpath}",
              strict=False)
        if new_folder:
            try:
                self.path.parent.rmdir()
            except OSError:
                pass  # not empty (someone else wrote there meanwhile) or already gone


def draft_memory(palace: Palace, subject: str, domain: str, *, anchor: str = "", image: str = "", content: str = "",
                 keywords: list[str] | None = None, links: list[str] | None = None, verify: str | None = None,
                 note_id: str | None = None, extra: dict | None = None, overwrite: bool = False,
                 new_domain: bool = False, supersedes: list[str] | None = None, valid_from=None, type: str = "",
                 core: bool = False) -> Draft:
    """A new SMASHIN note from the template, checked as `add_memory` checks it, not yet written."""
    subject = " ".join(subject.split())
    if not subject:
        raise UsageError("a memory needs a subject")
    domain = palace.resolve_domain(domain, allow_new=True, insist=new_domain)
    note_id = note_id or slugify(subject)
    if not ID_PATTERN.match(note_id):
        raise UsageError(f"id {note_id!r} must be lowercase letters, digits, '.', '_' or '-'")
    relpath = palace.new_note_path(domain, note_id)  # in a vault, the domain's own folder
    path = palace.root / relpath
    # A 10 MB Image is refused before any work on it (token proposal reads every phrase); the note is checked again.
    check_note_size("".join([subject, anchor, image, content, verify or "", *(keywords or []), *(links or [])]),
                    relpath)
    scan = palace.scan(light=True)
    existing = scan.memories.get(note_id)
    if (existing and existing.path != relpath or path.exists()) and not overwrite:
        where = existing.path if existing else relpath
        raise PalaceError(f"memory {note_id!r} already exists at {where}; choose another --id")
    keywords = [k.strip() for k in (keywords or []) if k.strip()]
    links = [link.strip() for link in (links or []) if link.strip()]
    if type and type not in TYPES:
        raise UsageError(f"type {type!r} is not one of {', '.join(TYPES)}")
    when = moment_option(valid_from, "--valid-from")
    olds = [palace.memory(ref, refresh=False) for ref in dict.fromkeys(r.strip() for r in supersedes or [] if r.strip())]
    if olds and when is None:
        when = today()
    versions = Versions.of(scan.memories.values())
    for old in olds:
        check_link(versions, old, note_id, when)
    verify, anchor = _proposed_hooks(scan, note_id, subject, image, content, keywords, verify, anchor)
    fields = {"id": note_id, "subject": subject, "anchor": anchor.strip(), "keywords": keywords,
              "verify": (verify or "").strip(), "links": links, "created": date.today()}
    if type:
        fields["type"] = type
    fields.update(version_fields(when, olds, core))
    fields.update(extra or {})
    template, where = memory_template(palace)
    sections = {"Image": image, "Content": content, "Links": links_section(palace, links, relpath)}
    text = render_memory(template, fields, domain, sections, where)
    # Validate before writing: a note over the size limit or a template that yields an unreadable note fails here.
    check_note_size(text, relpath)
    parse_note(text, relpath, domain)
    # The old notes' edits are computed first too: one that cannot be edited exactly stops the add.
    edits = [planned_edit(palace, old, old_note_changes(old, note_id, when)) for old in olds]
    return Draft(palace, note_id, domain, relpath, text, edits, overwrite)


def _proposed_hooks(scan: Scan, note_id: str, subject: str, image: str, content: str, keywords: list[str],
                    verify: str | None, anchor: str) -> tuple[str | None, str]:
    """The verify token and anchor of a new note: as given, else proposed from its Image (when it has one)."""
    others = [m for m in scan.memories.values() if m.id != note_id]
    taken = {m.verify for m in others if m.verify}
    if verify is None and image.strip():
        # Another note's anchor is printed in the index files: the token must be no run of one that shares its words.
        image_words = set(words(image))
        shown = [m.anchor for m in others if m.anchor and not image_words.isdisjoint(words(m.anchor))]
        verify = propose_token(image, subject, keywords, content, taken, anchor=anchor, shown=shown) or ""
    if not anchor.strip() and image.strip():
        # The domain index lists every memory by its anchor: without one, another odd phrase of the image that
        # is no run of any verify token (its own or another note's: tokens are never printed in the index files).
        anchor = propose_token(image, subject, keywords, content, taken | ({verify} if verify else set())) or ""
    return verify, anchor


def add_memory(palace: Palace, subject: str, domain: str, **fields) -> Memory:
    """Write a new SMASHIN note under memories/<domain>/ from the template and return it; refuses to overwrite.

    Takes what `draft_memory` takes (anchor, image, content, keywords, links, verify, note_id, new_domain,
    supersedes, valid_from, type, core, ...). With `supersedes`, the new memory replaces those (from
    `valid_from`, default today in UTC): their frontmatter gains `superseded_by` and `valid_until`, their
    bodies stay as they are."""
    with writing(palace):  # the scan that proposes its token sees every note written before it
        return draft_memory(palace, subject, domain, **fields).save()


def plain_memory_text(fields: dict, subject: str, content: str) -> str:
    """The text of a plain memory note: the frontmatter fields in order, `# subject`, then `## Content`."""
    return "---\n" + dump_frontmatter(fields) + "---\n" + f"# {subject}\n\n## Content\n{content.strip()}\n"


def version_fields(when, olds: list[Memory], core: bool) -> dict:
    """The frontmatter a new memory's place among versions gives it, each only when set: `valid_from`,
    `supersedes` (the ids of the memories it replaces) and `core`."""
    fields: dict = {}
    if when is not None:
        fields["valid_from"] = yaml_moment(when)
    if olds:
        fields["supersedes"] = [old.id for old in olds]
    if core:
        fields["core"] = True
    return fields


def write_plain_memory(palace: Palace, subject: str, domain: str, content: str, *, note_id: str | None = None,
                       type: str = "", fields: dict | None = None, supersedes: list[str] | None = None,
                       valid_from=None, core: bool = False, new_domain: bool = False, scan: Scan | None = None
                       ) -> Memory:
    """Write a plain memory (frontmatter and a `## Content` section, no Image or verify token) to
    memories/<domain>/<id>.md (in an adopted vault, the domain's folder: Palace.new_note_path) and return it;
    never overwrites a file.

    The frontmatter is `id`, `subject`, `type`, the given `fields` in their order, then `valid_from`,
    `supersedes`, `core` and `created`. Without `note_id` the id is the subject's slug, made unique with
    `-2`, `-3` ...; a given id that is taken is refused. With `supersedes`, those memories gain
    `superseded_by` and `valid_until` (frontmatter only), as `palace add --supersedes` does. `scan` (a
    light scan of the palace) saves a scan per note when many are written; it gains the new memory."""
    with writing(palace):
        scan = scan if scan is not None else palace.scan(light=True)
        draft, _ = _plain_draft(palace, subject, domain, content, note_id, type, fields, supersedes, valid_from,
                                core, scan, lambda name: palace.resolve_domain(name, allow_new=True, insist=new_domain))
        memory = draft.save()
        scan.memories[memory.id] = memory
        return memory


class PlainMemories:
    """Plain memories written as a batch (distill's, a session's at a time, under the write lock): each planned and
    checked as write_plain_memory does and known to `scan` at once (ids stay unique), then all written by `flush`
    (editing.writes.apply: their fsyncs wait together, not one after the other). A memory that supersedes others
    is written at once, after the ones before it (the old notes' edits are planned from their bytes on disk)."""

    def __init__(self, palace: Palace, scan: Scan):
        self.palace, self.scan = palace, scan
        self.drafts: list[Draft] = []
        self.domains: dict[str, str] = {}  # name -> the domain it resolves to; nothing on disk moves until a flush

    def write(self, subject: str, domain: str, content: str, *, type: str = "", fields: dict | None = None,
              supersedes: list[str] | None = None, valid_from=None) -> Memory:
        """The memory as it will be written (write_plain_memory's arguments); written now when it supersedes."""
        if supersedes:
            self.flush()
            return write_plain_memory(self.palace, subject, domain, content, type=type, fields=fields,
                                      supersedes=supersedes, valid_from=valid_from, scan=self.scan)
        with writing(self.palace):
            draft, memory = _plain_draft(self.palace, subject, domain, content, None, type, fields, None, valid_from,
                                         False, self.scan, self._domain)
        self.drafts.append(draft)
        self.scan.memories[memory.id] = memory
        return memory

    def _domain(self, name: str) -> str:
        if name not in self.domains:
            self.domains[name] = self.palace.resolve_domain(name, allow_new=True)
        return self.domains[name]

    def flush(self) -> None:
        """Write the memories planned since the last flush (a file made meanwhile by someone else: Unchanged)."""
        drafts, self.drafts = self.drafts, []
        self.domains.clear()
        if drafts:
            apply(self.palace, [creating(d.relpath, d.text) for d in drafts], f"write {len(drafts)} memories",
                  journal=False)  # each note stands alone: a killed batch leaves whole notes, and a rerun the rest


def _plain_draft(palace: Palace, subject: str, domain: str, content: str, note_id: str | None, type: str,
                 fields: dict | None, supersedes: list[str] | None, valid_from, core: bool, scan: Scan,
                 resolve) -> tuple[Draft, Memory]:
    """A plain memory planned and checked under the write lock (write_plain_memory's rules), its domain named by
    `resolve` (name -> domain), and the memory its text parses to."""
    subject = " ".join(subject.split())
    if not subject:
        raise UsageError("a memory needs a subject")
    if not content.strip():
        raise UsageError("a plain memory needs its content")
    if type and type not in TYPES:
        raise UsageError(f"type {type!r} is not one of {', '.join(TYPES)}")
    domain = resolve(domain)
    note_id = _free_id(palace, scan, domain, note_id, subject)
    relpath = palace.new_note_path(domain, note_id)
    when = moment_option(valid_from, "valid_from")
    olds = [scan.memories.get(ref) or palace.memory(ref, refresh=False)
            for ref in dict.fromkeys(r.strip() for r in supersedes or [] if r.strip())]
    if olds and when is None:
        when = today()
    if olds:
        versions = Versions.of(scan.memories.values())
        for old in olds:
            check_link(versions, old, note_id, when)
    front = {"id": note_id, "subject": subject}
    if type:
        front["type"] = type
    front.update(fields or {})
    front.update(version_fields(when, olds, core))
    front.setdefault("created", date.today())
    text = plain_memory_text(front, subject, content)
    check_note_size(text, relpath)
    memory = parse_note(text, relpath, domain)  # the check: a text palace cannot read is never written
    read, warnings = note_text(text.encode("utf-8"), relpath)
    if read != text or warnings:
        memory = parse_note(read, relpath, domain, warnings)  # the memory as the file will read
    edits = [planned_edit(palace, old, old_note_changes(old, note_id, when)) for old in olds]
    return Draft(palace, note_id, domain, relpath, text, edits), memory


SUBJECT_CHARS = 60  # a captured thought's subject: its first line, cut at a word near this many characters


def capture_subject(text: str) -> str:
    """A subject for a thought given as text alone: its first line (a heading's `#` dropped), cut at a word
    boundary near SUBJECT_CHARS characters."""
    first = next((line.strip().lstrip("#").strip() for line in text.splitlines() if line.strip()), "")
    if len(first) <= SUBJECT_CHARS:
        return first
    cut = first[:SUBJECT_CHARS].rsplit(" ", 1)[0].rstrip(",;:-")
    return (cut or first[:SUBJECT_CHARS]) + "…"


def add_note(palace: Palace, text: str, domain: str | None = None, *, subject: str = "", image: str = "",
             content: str = "", strict: bool = False, **fields) -> Memory:
    """The one "add a memory" workflow of every face (CLI `add`, MCP `add`): with an Image, a SMASHIN memory
    (`add_memory`: anchor and verify token proposed from the Image); without one, a plain note written at once
    (quick capture: no template, no editor, no token), into the inbox domain ([notes] inbox) when no domain is
    given. `text` is the subject when `content` is given, else the thought itself (its subject from its first
    line). `strict` is an agent's add (MCP): links must name memories, and a memory given an image, anchor or
    token gets a token its image holds, or nothing is written. `review_added` is the step after, for every face."""
    # Refused before any work on the text (proposing a token reads every phrase); the note is checked again.
    check_note_size("".join([text or "", subject, image, content, *(str(v) for v in fields.values() if v),
                             *(fields.get("keywords") or []), *(fields.get("links") or [])]),
                    palace.new_note_path(slugify(domain or palace.config.notes.inbox) or "inbox",
                                         fields.get("note_id") or slugify(subject or capture_subject(text or ""))))
    text, image, content = (_captured(value, what) for value, what in ((text, "text"), (image, "image"),
                                                                        (content, "content")))
    text, content = without_secrets(text.strip()), without_secrets(content)  # core/secrets.py: before any write
    _plain_names(domain, fields.get("note_id"), fields.get("supersedes") if strict else None)
    folder = palace.new_note_path(domain or palace.config.notes.inbox, "x").rpartition("/")[0]
    if folder:  # a domain linked out of the palace is refused before any work on the text (an agent's token)
        note_target(palace, folder)
    with writing(palace):  # the token and the links are checked against every note written before this one
        if strict:
            fields = _checked_fields(palace, subject or text, image, content, fields)
        if image.strip():
            return add_memory(palace, subject or text, domain or palace.config.notes.inbox, image=image,
                              content=content, **fields)
        return _capture(palace, text, domain, subject, content, fields)


def _capture(palace: Palace, text: str, domain: str | None, subject: str, content: str, fields: dict) -> Memory:
    """A plain note: the thought itself (or the content), in the inbox when no domain is given."""
    body = content.strip() or text
    if not body:
        raise UsageError("a memory needs a subject, or a thought to capture (`palace add -` reads it from stdin)")
    target = domain or palace.config.notes.inbox
    if not (content.strip() or subject or any(fields.values())) and _writes_as_the_vault(palace, target):
        return capture_in_vault(palace, text, target, new_domain=domain is None)
    subject = subject or (text if content.strip() else capture_subject(text)) or capture_subject(body)
    inbox = domain is None
    extra = {name: value for name in ("keywords", "links") if (value := [v for v in fields.get(name) or [] if v])}
    if palace.adopted and extra.get("links"):  # a vault's links are property links, written as its notes write them
        where = palace.new_note_path(domain or palace.config.notes.inbox, "new")
        extra["links"] = [f"[[{written_link(palace, link, where)}]]" for link in extra["links"]]
    if (fields.get("anchor") or "").strip():
        extra["anchor"] = fields["anchor"].strip()
    # A thought captured into the inbox takes the next free id; a note named in a domain is refused when taken.
    note_id = fields.get("note_id") or (None if inbox else slugify(subject))
    return write_plain_memory(palace, subject, domain or palace.config.notes.inbox, body,
                              note_id=note_id, type=fields.get("type") or "", fields=extra,
                              supersedes=fields.get("supersedes"), valid_from=fields.get("valid_from"),
                              core=bool(fields.get("core")), new_domain=inbox or bool(fields.get("new_domain")))


# A heading palace reads as a note's own section: in captured text it would make the thought a template note.
OWN_SECTION = re.compile(r"^#{1,2}[ \t]+(image|content)[ \t]*#*[ \t]*$", re.IGNORECASE | re.MULTILINE)


def _captured(value: str, what: str) -> str:
    """Text given to `add`, checked: line ends made `\n` (a bare CR is a line end no editor agrees on), and
    refused when it holds git conflict markers or a `## Image` / `## Content` heading of its own."""
    value = (value or "").replace("\r\n", "\n").replace("\r", "\n")
    if conflict_blocks(value):
        raise UsageError(f"the {what} holds git conflict markers (<<<<<<< ======= >>>>>>>): resolve the conflict "
                         "first; nothing was written")
    fences = code_ranges(value)
    heading = next((m for m in OWN_SECTION.finditer(value) if outside_code(m.start(), fences)), None)
    if heading is not None:
        raise UsageError(f"the {what} holds a `{heading.group(0).strip()}` heading, which palace reads as a section "
                         "of the note: give the image with --image (MCP: image=...), or make it a `###` heading; "
                         "nothing was written")
    return value


def _plain_names(domain: str | None, note_id: str | None, supersedes) -> None:
    """A domain or an id is one name, never a path (nor are superseded ids, from an agent)."""
    for value, what in ((domain, "domain"), (note_id, "id"), *((old, "superseded id") for old in supersedes or [])):
        if value is None:
            continue
        refuse_path_tricks(value, what)
        if "/" in value or "\\" in value:
            raise OutsidePalace(f"{what} {value!r} must be a single name, not a path")


def _checked_fields(palace: Palace, subject: str, image: str, content: str, fields: dict) -> dict:
    """An agent's fields, checked: links named by id, file name, alias or subject of existing memories (an unknown
    one refused), and with an image, anchor or token, the token the image gives (refused when there is none)."""
    from palace_cli.editing.changes import link_ids, token_for

    fields = dict(fields, links=link_ids(palace, fields.get("links") or []))
    if image or fields.get("verify") or fields.get("anchor"):
        fields["verify"] = token_for(palace, image, fields.get("verify"), subject=subject,
                                     keywords=fields.get("keywords") or [], content=content,
                                     anchor=fields.get("anchor") or "")
    return fields


def links_section(palace: Palace, refs: list[str], source: str) -> str:
    """A note's `## Links` list: `- [[target]]` for each memory the refs name, written as the palace writes links."""
    return "\n".join(f"- [[{written_link(palace, ref, source)}]]" for ref in refs)


def written_link(palace: Palace, ref: str, source: str) -> str:
    """The target of a link to the memory `ref` names, from the note at `source`, written as the palace's notes
    write links (`Palace.link_text`: a vault's file name, palace's ids); `ref` as given when it names none."""
    try:
        return palace.link_text(palace.memory(ref, refresh=False), source)
    except PalaceError:
        return ref


def _writes_as_the_vault(palace: Palace, domain: str) -> bool:
    """True when a new note in this domain lands in an adopted vault's own folders (not palace's memories/)."""
    return palace.adopted and not palace.new_note_path(domain, "x").startswith(MEMORIES + "/")


def _spaced_names(scan: Scan) -> bool:
    """True when a vault names its notes with spaces (`Watering schedule.md`) at least as often as with - or _."""
    names = [m.path.rsplit("/", 1)[-1].removesuffix(".md") for m in scan.memories.values()]
    return sum(" " in n for n in names) >= sum(" " not in n and ("-" in n or "_" in n) for n in names)


def capture_in_vault(palace: Palace, text: str, domain: str, new_domain: bool = False) -> Memory:
    """A thought written as the vault writes notes: a file named from its first words (spaces kept when the vault's
    names have them, else its slug), holding the text once, no frontmatter or template headings; `-2`/` 2` when the
    name is taken. Its id comes from its path."""
    domain = palace.resolve_domain(domain, allow_new=True, insist=new_domain)
    with writing(palace):
        scan = palace.scan(light=True)
        spaced = _spaced_names(scan)
        title = title_name(text)
        base = (title if spaced else slug(title)) or title or "Untitled"
        taken = {m.path.lower() for m in scan.memories.values()}
        candidate, n = base, 2
        while os.path.lexists(palace.root / palace.new_note_path(domain, candidate)) or \
                palace.new_note_path(domain, candidate).lower() in taken:
            candidate, n = f"{base}{' ' if spaced else '-'}{n}", n + 1
        relpath = palace.new_note_path(domain, candidate)
        note = text.strip() + "\n"
        check_note_size(note, relpath)
        parse_note(note, relpath, domain)
        return Draft(palace, path_id(relpath), domain, relpath, note).save()


def _free_id(palace: Palace, scan: Scan, domain: str, wanted: str | None, subject: str) -> str:
    """`wanted` when no memory or file has it (refused otherwise); without it, the first free one of the
    subject's slug, then `-2`, `-3` ..."""
    def taken(candidate: str) -> bool:
        return candidate in scan.memories or os.path.lexists(palace.root / palace.new_note_path(domain, candidate))

    if wanted is not None:
        if not ID_PATTERN.match(wanted):
            raise UsageError(f"id {wanted!r} must be lowercase letters, digits, '.', '_' or '-'")
        if taken(wanted):
            where = scan.memories[wanted].path if wanted in scan.memories else palace.new_note_path(domain, wanted)
            raise PalaceError(f"memory {wanted!r} already exists at {where}; choose another id")
        return wanted
    base = slugify(subject)
    candidate, n = base, 2
    while taken(candidate):
        candidate, n = f"{base}-{n}", n + 1
    return candidate


def propose_missing_token(palace: Palace, memory: Memory, taken: set[str]) -> Memory:
    """The memory with a verify token proposed from its Image and written to its frontmatter, when it has an
    Image but no token; unchanged otherwise. `taken` (the palace's tokens) gains the new one."""
    if memory.verify or not memory.image or not memory.has_frontmatter:
        return memory  # a note without frontmatter keeps its shape: palace does not give it one
    token = propose_token(memory.image, memory.subject, memory.keywords, memory.content, taken, anchor=memory.anchor)
    if not token:
        return memory
    set_fields(palace, memory.path, {"verify": token}, f"propose a verify token for {memory.id}")
    taken.add(token)
    return load_note(palace.root, memory.path, memory.domain)


def token_warnings(palace: Palace, memory: Memory) -> list[str]:
    """What is wrong with a memory's verify token (missing, guessable, shared with another memory)."""
    others = {m.id: m.verify for m in palace.scan(light=True).memories.values() if m.id != memory.id and m.verify}
    return [message for _code, message in token_problems(memory.verify, memory.image, memory.subject,
                                                         memory.keywords, memory.content, others)]


@dataclass
class AddReview:
    """What every face says after an add: the close neighbours (named, never merged) and token problems."""

    neighbours: list = field(default_factory=list)  # search.similar.Neighbour, closest first
    advice: list[str] = field(default_factory=list)  # `similar: ...` lines and what to do about them
    token_problems: list[str] = field(default_factory=list)
    compare_error: str = ""  # why the new memory could not be compared (the memory is written all the same)


def review_added(palace: Palace, memory: Memory) -> AddReview:
    """Compare a just-written memory with the others (not those it supersedes or links) and check its token."""
    review = AddReview(token_problems=token_warnings(palace, memory))
    try:
        near = similar(palace, ref=memory.id, k=3, exclude=[*memory.supersedes, *memory.all_links])
    except PalaceError as exc:  # the note is written; a broken index must not turn that into a failure
        review.compare_error = str(exc)
        return review
    review.neighbours, review.advice = list(near.close), warning_lines(near, memory.id)
    return review

