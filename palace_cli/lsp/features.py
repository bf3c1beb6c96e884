"""The language features: each turns a buffer and a cursor into an LSP answer, using the core and a Snapshot.

No pygls here (only lsprotocol's types): the server wires these to requests. Columns are code points
inside; `Context.to_client` and `Context.range` convert them to the client's units (UTF-16 by default).
Code actions are in `actions`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp

from palace_cli.core.layout import NoteRules, Problem
from palace_cli.core.notefile import MAX_NOTE_BYTES, parse_note
from palace_cli.core.notes import FIELDS, TYPES, Memory
from palace_cli.core.text import normalize
from palace_cli.core.tokens import PhraseIndex, fingerprint
from palace_cli.errors import Ambiguous, PalaceError
from palace_cli.lsp.buffer import LINK_FIELDS, PATH_FORMS, Buffer, Completing, Link, Span
from palace_cli.lsp.matcher import Match
from palace_cli.lsp.snapshot import Snapshot
from palace_cli.palace import Palace

SOURCE = "palace"
EXCERPT_CHARS = 400
HINT_CODES = {"smashin-weak"}  # advice about the Image, not a fault
MAX_DIAGNOSTICS = 1000  # per buffer: more helps no one, and tens of thousands take seconds to send
# Problems about one link: the diagnostic marks the link itself (lint names it as `link 'X' ...` or ends with it).
LINK_CODES = {"broken-link", "ambiguous-link", "shared-name", "missing-file"}


def path_of(uri: str) -> Path | None:
    """The file a `file:` URI names (percent-encoding decoded: spaces, Unicode, `#`)."""
    parsed = urlparse(uri)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


def relpath_in(palace: Palace, path: Path | None) -> str | None:
    """The path relative to the palace root (links resolved), or None when it is not inside the palace."""
    if path is None:
        return None
    real = Path(os.path.realpath(path))
    try:
        return real.relative_to(palace.root).as_posix()
    except ValueError:
        return None


def uri_of(path: Path) -> str:
    """The `file:` URI of a path, percent-encoded as editors write it."""
    return Path(path).absolute().as_uri()


def note_domain(snapshot: Snapshot | None, relpath: str | None, rules: NoteRules | None) -> str | None:
    """The domain of the note at relpath, or None when the file is not a note: what the note store says of a
    file it read, else the palace's note rules (a new file the store has not seen yet: `memories/<domain>/`,
    or in an adopted vault any file the [notes] globs take)."""
    if relpath is None or rules is None:
        return None
    known = snapshot.by_path.get(relpath) if snapshot is not None else None
    if known is not None:
        return known.domain
    domain = rules.domain_of(relpath) if relpath.endswith(".md") and rules.wanted(relpath) else ""
    if domain:
        return domain
    return "" if snapshot is not None and relpath in snapshot.broken else None


@dataclass
class Document:
    """An editor buffer (or a file read from disk) and where it sits in the palace."""

    uri: str
    buffer: Buffer
    version: int | None = None
    relpath: str | None = None  # relative to the palace root; None outside it
    domain: str | None = None  # None: not a note

    @property
    def text(self) -> str:
        """The buffer's text."""
        return self.buffer.text

    @property
    def lines(self) -> list[str]:
        """The buffer's lines."""
        return self.buffer.lines

    @property
    def is_note(self) -> bool:
        """Whether the file is a note of the palace."""
        return self.domain is not None

    @property
    def oversized(self) -> bool:
        """Over the size limit of a note: the palace will not read it, so neither does the server."""
        return self.buffer.size > MAX_NOTE_BYTES

    def memory(self) -> Memory | None:
        """The buffer parsed as a note (None when it is not a readable note)."""
        if not self.is_note or self.oversized:
            return None
        try:
            return parse_note(self.text.replace("\r\n", "\n"), self.relpath, self.domain)
        except PalaceError:
            return None


@dataclass
class Context:
    """What every feature needs: the palace, its snapshot, the client's position units, other buffers."""

    palace: Palace
    snapshot: Snapshot
    to_client: Callable[[list[str], int, int], lsp.Position]
    open_document: Callable[[str], Document | None] = lambda relpath: None
    can_create_files: bool = False
    _read: dict[str, Document] = field(default_factory=dict)

    def document(self, relpath: str) -> Document:
        """A palace file as the editor holds it when open, else as it is on disk."""
        found = self.open_document(relpath) or self._read.get(relpath)
        if found is None:
            try:
                text = (self.palace.root / relpath).read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
            found = self._read[relpath] = Document(uri_of(self.palace.root / relpath), Buffer(text), relpath=relpath,
                                                   domain=note_domain(self.snapshot, relpath, self.palace.rules))
        return found

    def range(self, lines: list[str], span: Span) -> lsp.Range:
        """A span as an LSP range in the client's units."""
        return lsp.Range(self.to_client(lines, span.line, span.start), self.to_client(lines, span.line, span.end))

    def location(self, memory: Memory) -> lsp.Location:
        """Where a memory is: its note at its `# title` line."""
        start = lsp.Position(max(memory.line - 1, 0), 0)
        return lsp.Location(uri_of(self.palace.root / memory.path), lsp.Range(start, start))


# ---- completion ----------------------------------------------------------------------------------


def completion(ctx: Context, doc: Document, line: int, column: int) -> lsp.CompletionList | None:
    """Memories after `[[` (in the body or a property) and in frontmatter link fields; `type:` values; frontmatter
    field names."""
    what = doc.buffer.completing(line, column)
    if what is None:
        return None
    edit_range = ctx.range(doc.lines, what.span)
    items: list[lsp.CompletionItem] = []
    if what.kind == "link" or (what.kind == "value" and what.field in LINK_FIELDS):
        own = ctx.snapshot.by_path.get(doc.relpath or "")
        typed, domain = what.typed, ""
        if "/" in typed:  # `domain/name`: one domain's memories (its name, an alias or a unique prefix)
            head, typed = typed.split("/", 1)
            try:
                domain = ctx.palace.resolve_domain(head)
            except PalaceError:
                domain = ""
        for index, match in enumerate(ctx.snapshot.matcher.match(typed, near_domain=doc.domain or "", domain=domain)):
            if what.kind == "value" and own is not None and match.memory.id == own.id:
                continue
            items.append(_memory_item(ctx, doc, match, what, edit_range, index))
    elif what.kind == "value" and what.field == "type":
        items = [_word_item(t, edit_range, lsp.CompletionItemKind.EnumMember, i)
                 for i, t in enumerate(TYPES) if t.startswith(what.typed.lower())]
    elif what.kind == "key":
        items = [_word_item(f, edit_range, lsp.CompletionItemKind.Field, i, suffix=": ")
                 for i, f in enumerate(FIELDS) if f.startswith(what.typed.lower())]
    return lsp.CompletionList(is_incomplete=what.kind != "key", items=items)


def link_text(ctx: Context, doc: Document, match: Match) -> str:
    """What a completed `[[link` holds, the way the vault writes links (`Snapshot.link_name`: the file name, a
    path where the name is shared, a path or an id where the vault's notes link so); typed by an alias or a title
    the name does not say (or by a file name an id does not say), that name follows as the label (`id|Name`)."""
    target = ctx.snapshot.link_name(match.memory, doc.relpath)
    said = normalize(match.name)
    if match.field in ("alias", "subject", "name") and said not in (normalize(target), normalize(target.rsplit("/", 1)[-1])):
        return f"{target}|{match.name}"
    return target


def _memory_item(ctx: Context, doc: Document, match: Match, what: Completing, edit_range: lsp.Range,
                 index: int) -> lsp.CompletionItem:
    memory = match.memory
    text = link_text(ctx, doc, match) if what.kind == "link" else memory.id
    title = memory.subject or memory.path.rsplit("/", 1)[-1].removesuffix(".md")
    return lsp.CompletionItem(
        label=title, kind=lsp.CompletionItemKind.Reference,
        label_details=lsp.CompletionItemLabelDetails(detail=f"  {memory.path}", description=memory.domain),
        detail=f"{memory.path} ({memory.id})",
        # The server has filtered already: the typed text as filter text keeps clients from filtering again.
        filter_text=what.typed, sort_text=f"{index:04d}",
        text_edit=lsp.TextEdit(edit_range, text + ("]]" if what.close else "")), data={"id": memory.id})


def _word_item(word: str, edit_range: lsp.Range, kind: lsp.CompletionItemKind, index: int,
               suffix: str = "") -> lsp.CompletionItem:
    return lsp.CompletionItem(label=word, kind=kind, sort_text=f"{index:04d}", filter_text=word,
                              text_edit=lsp.TextEdit(edit_range, word + suffix))


def resolve_item(ctx: Context, item: lsp.CompletionItem) -> lsp.CompletionItem:
    """The completion item with the memory's description as documentation."""
    note_id = (item.data or {}).get("id") if isinstance(item.data, dict) else None
    memory = ctx.snapshot.memories.get(note_id) if isinstance(note_id, str) else None
    if memory is not None:
        item.documentation = lsp.MarkupContent(lsp.MarkupKind.Markdown, describe(ctx, memory))
    return item


# ---- hover, definition, references --------------------------------------------------------------


def full_memory(ctx: Context, memory: Memory) -> Memory:
    """The memory with its Image, Content and frontmatter (the snapshot holds only what listings show)."""
    found = ctx.palace.index.store.memories([memory.path])
    return found[0] if found else memory


def describe(ctx: Context, light: Memory) -> str:
    """Markdown for a memory: subject, anchor, domain, where, the verify token's fingerprint, the start of
    its Content, and what superseded it. Never a verify phrase: every token in the palace is masked."""
    memory = full_memory(ctx, light)
    own = PhraseIndex({memory.id: memory.verify})  # the note may be newer than the snapshot's token table

    def hide(text: str) -> str:
        return own.redact(ctx.snapshot.secrets.redact(text))

    lines = [f"**{hide(memory.subject or memory.id)}** · `{memory.id}` · {memory.domain}"]
    if memory.anchor:
        lines.append(f"anchor: *{hide(memory.anchor)}*")
    if memory.superseded_by:
        names = ", ".join(f"`{n}`" for n in memory.superseded_by)
        lines.append(f"**superseded** by {names}" + (f" (valid until {memory.valid_until})"
                                                     if memory.valid_until else ""))
    elif memory.valid_until:
        lines.append(f"valid until {memory.valid_until}")
    if memory.supersedes:
        lines.append("replaces " + ", ".join(f"`{n}`" for n in memory.supersedes))
    content = " ".join(memory.content.split())
    if content:
        cut = content[:EXCERPT_CHARS]
        lines.append("")
        lines.append(hide(cut if len(cut) == len(content) else cut.rsplit(" ", 1)[0] + " …"))
    lines.append("")
    lines.append(f"`{memory.location}` · verify `{fingerprint(memory.verify)}`")
    return "\n".join(lines)


@dataclass
class Target:
    """What a link under the cursor names: a memory, several, an unreadable note's path, a file that is not a
    note (`file`), or nothing."""

    memory: Memory | None = None
    candidates: list[str] = field(default_factory=list)
    unreadable: str = ""
    file: str = ""


def target_of(ctx: Context, link: Link, relpath: str | None) -> Target:
    """The core resolver's answer for a link in the note at `relpath`: a note first (`[[v1.2]]` names `v1.2.md`),
    then a file of the vault (`![[photo.jpg]]`, by its name anywhere as Obsidian finds it), then the unreadable
    note it names (a path link climbing out of the palace names nothing)."""
    name = link.name(relpath)
    if name.startswith("../"):
        return Target()
    found = None
    if not link.attachment:
        try:
            found = ctx.snapshot.resolve(name, relpath or "")
        except Ambiguous as exc:
            return Target(candidates=exc.candidates)
    if found is not None:
        return Target(found.memory)
    file = ctx.snapshot.file(name, relpath, link.wiki or link.field not in PATH_FORMS)
    if file or link.attachment:
        return Target(file=file or "")
    return Target(unreadable=ctx.snapshot.unreadable(name) or "")


def hover(ctx: Context, doc: Document, line: int, column: int) -> lsp.Hover | None:
    """What a link (or an `id:`, or the note's own `verify:` line) refers to."""
    link = doc.buffer.link_at(line, column)
    if link is None:
        return _verify_hover(doc, line)
    found = target_of(ctx, link, doc.relpath)
    if found.memory is not None:
        text = describe(ctx, found.memory)
    elif found.file:
        text = f"`{link.target}` is a file of the vault, not a note: `{found.file}`"
    elif link.attachment:
        text = f"`{link.target}`: no such file in the vault"
    elif found.candidates:
        text = f"`{link.target}` names several memories: " + ", ".join(f"`{c}`" for c in found.candidates[:8])
    elif found.unreadable:
        text = f"`{found.unreadable}` cannot be read: {ctx.snapshot.broken[found.unreadable][0]}"
    else:
        near = ctx.snapshot.near(link.target)
        text = f"no memory `{link.target}`" + (
            "; did you mean " + ", ".join(f"`{m.id}`" for m in near) + "?" if near else "")
    return lsp.Hover(lsp.MarkupContent(lsp.MarkupKind.Markdown, text), ctx.range(doc.lines, link.whole))


def _verify_hover(doc: Document, line: int) -> lsp.Hover | None:
    if not doc.buffer.in_frontmatter(line):
        return None
    owner = doc.buffer.field_at(line)
    memory = doc.memory() if owner is not None and owner[0] == "verify" else None
    if memory is None or not memory.verify:
        return None
    text = (f"verify token `{fingerprint(memory.verify)}`: the generated index files and results show this "
            "fingerprint, never the phrase; `palace verify` finds the phrase in an answer")
    return lsp.Hover(lsp.MarkupContent(lsp.MarkupKind.Markdown, text))


def definition(ctx: Context, doc: Document, line: int, column: int) -> list[lsp.Location] | None:
    """The note a link names, at its title line (every candidate when the name is ambiguous); an attachment's file."""
    link = doc.buffer.link_at(line, column)
    if link is None:
        return None
    found = target_of(ctx, link, doc.relpath)
    if found.file:
        start = lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
        return [lsp.Location(uri_of(ctx.palace.root / found.file), start)]
    if found.memory is not None:
        return [ctx.location(found.memory)]
    if found.candidates:
        return [ctx.location(ctx.snapshot.memories[c]) for c in found.candidates if c in ctx.snapshot.memories]
    if found.unreadable:
        start = lsp.Position(max((ctx.snapshot.broken[found.unreadable][1] or 1) - 1, 0), 0)
        return [lsp.Location(uri_of(ctx.palace.root / found.unreadable), lsp.Range(start, start))]
    return None


def _subject_of(ctx: Context, doc: Document, line: int, column: int) -> Memory | None:
    """The memory a references request is about: the link under the cursor, else the note itself."""
    link = doc.buffer.link_at(line, column)
    if link is not None:
        return target_of(ctx, link, doc.relpath).memory
    own = doc.memory()
    if own is not None:
        return ctx.snapshot.memories.get(own.id) or own
    return None


def references(ctx: Context, doc: Document, line: int, column: int, include_declaration: bool,
               open_relpaths: list[str] = ()) -> list[lsp.Location]:
    """Backlinks: every link to the memory, in saved notes and in open buffers."""
    target = _subject_of(ctx, doc, line, column)
    if target is None:
        return []
    relpaths = set(ctx.snapshot.backlinks(target.id)) | set(open_relpaths)
    out = [ctx.location(target)] if include_declaration else []
    named: dict[str, str | None] = {}  # link target -> the id it names, once per target
    for relpath in sorted(relpaths):
        source = ctx.document(relpath)
        if source.oversized:
            continue  # not a note the palace reads (and hundreds of thousands of links to resolve)
        for link in source.buffer.links():
            if link.field == "mention" or link.attachment:
                continue
            name = link.name(relpath)
            if name not in named:
                found = target_of(ctx, link, relpath).memory
                named[name] = found.id if found is not None else None
            if named[name] == target.id:
                out.append(lsp.Location(uri_of(ctx.palace.root / relpath), ctx.range(source.lines, link.whole)))
    return out


# ---- symbols ------------------------------------------------------------------------------------


def document_symbols(ctx: Context, doc: Document) -> list[lsp.DocumentSymbol]:
    """The note's outline: `#` title, `##` sections (Image, Content, Links, ...), deeper headings nested."""
    lines = doc.lines
    found = doc.buffer.headings()
    roots: list[lsp.DocumentSymbol] = []
    stack: list[tuple[int, lsp.DocumentSymbol]] = []
    ends: list[int] = [len(lines)] * len(found)
    open_: list[int] = []  # indexes of headings whose section has not ended yet, levels increasing
    for i, (level, _, number) in enumerate(found):
        while open_ and found[open_[-1]][0] >= level:
            ends[open_.pop()] = number
        open_.append(i)
    for i, (level, title, number) in enumerate(found):
        end_line = ends[i] - 1
        end = ctx.to_client(lines, end_line, len(lines[end_line]))
        head = ctx.range(lines, Span(number, 0, len(lines[number].rstrip("\r"))))
        symbol = lsp.DocumentSymbol(name=title, kind=lsp.SymbolKind.Module if level == 1 else lsp.SymbolKind.String,
                                    range=lsp.Range(head.start, end), selection_range=head, children=[])
        while stack and stack[-1][0] >= level:
            stack.pop()
        (stack[-1][1].children if stack else roots).append(symbol)
        stack.append((level, symbol))
    return roots


def workspace_symbols(ctx: Context, query: str, limit: int = 50, searched: bool = True) -> list[lsp.SymbolInformation]:
    """Memories for a query, ranked as `palace search` ranks them (names as typed when the query is empty, or
    before the first refresh has filled the search index: `searched` False)."""
    if not query.strip() or not searched:
        memories = [m.memory for m in ctx.snapshot.matcher.match(query.strip(), limit)]
    else:
        from palace_cli.search.retrieve import search

        result = search(ctx.palace, query, k=limit, do_refresh=False)
        memories = [ctx.snapshot.by_path.get(hit.path) or hit.memory for hit in result.hits]
    return [lsp.SymbolInformation(name=m.subject or m.id, kind=lsp.SymbolKind.File, location=ctx.location(m),
                                  container_name=f"{m.domain} · {m.id}") for m in memories if m is not None]


# ---- diagnostics --------------------------------------------------------------------------------


def diagnostics(ctx: Context, doc: Document) -> list[lsp.Diagnostic]:
    """Lint's problems for the buffer's unsaved text (notes only): what `palace lint` says once it is saved."""
    if not doc.is_note:
        return []
    from palace_cli.editing.lint import lint_note_text

    if doc.oversized:  # what the refresh will say of the saved file, without parsing megabytes
        problems = [Problem(doc.relpath, 1, "error", "unreadable-note",
                            f"file is {doc.buffer.size:,} bytes, over the {MAX_NOTE_BYTES:,} byte limit for a note")]
    else:
        problems = lint_note_text(ctx.palace, doc.relpath, doc.text, ctx.snapshot.checker)
    fields = {repr(link.target): link for link in reversed(doc.buffer.field_links())}
    found = [_diagnostic(ctx, doc, problem, fields) for problem in problems[:MAX_DIAGNOSTICS]]
    if len(problems) > MAX_DIAGNOSTICS:
        start = lsp.Position(0, 0)
        found.append(lsp.Diagnostic(lsp.Range(start, start), f"{len(problems) - MAX_DIAGNOSTICS:,} more problems not "
                                    f"shown; `palace lint` lists them all once the note is saved",
                                    severity=lsp.DiagnosticSeverity.Information, code="more-problems", source=SOURCE))
    return found


def _named(problem: Problem, doc: Document, number: int, fields: dict[str, Link]) -> Link | None:
    """The link a problem of LINK_CODES is about: lint's message ends with the target's repr, or begins
    `link 'target' `."""
    for link in doc.buffer.links_on(number):
        named = repr(link.name(doc.relpath))
        if link.field != "mention" and (problem.message.endswith(named) or problem.message.startswith(f"link {named} ")):
            return link
    for i, char in enumerate(problem.message):  # a frontmatter item: its repr starts at one of the quotes
        if char in "'\"" and problem.message[i:] in fields:
            return fields[problem.message[i:]]
    return None


def _diagnostic(ctx: Context, doc: Document, problem: Problem, fields: dict[str, Link]) -> lsp.Diagnostic:
    lines = doc.lines
    number = min(max((problem.line or 1) - 1, 0), len(lines) - 1)
    text = lines[number].rstrip("\r")
    span = Span(number, len(text) - len(text.lstrip()), len(text))
    data = None
    link = _named(problem, doc, number, fields) if problem.code in LINK_CODES else None
    if link is not None:
        span, data = link.span, {"target": link.target, "line": link.span.line, "start": link.span.start,
                                 "end": link.span.end, "field": link.field, "wiki": link.wiki}
    severity = (lsp.DiagnosticSeverity.Hint if problem.code in HINT_CODES else
                lsp.DiagnosticSeverity.Error if problem.severity == "error" else lsp.DiagnosticSeverity.Warning)
    return lsp.Diagnostic(ctx.range(lines, span), problem.message, severity=severity, code=problem.code,
                          source=SOURCE, data=data)
