"""The language features: each turns a buffer and a cursor into an LSP answer, using the core and a Snapshot.

No pygls here (only lsprotocol's types): the server wires these to requests. Columns are code points
inside; `Context.to_client` and `Context.range` convert them to the client's units (UTF-16 by default).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Callable
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp

from palace_cli.core.layout import Problem
from palace_cli.core.notefile import parse_note
from palace_cli.core.notes import ID_PATTERN, TYPES, Memory
from palace_cli.core.text import slugify
from palace_cli.core.tokens import PhraseIndex, fingerprint, propose_token
from palace_cli.errors import PalaceError
from palace_cli.lsp import buffer
from palace_cli.lsp.buffer import LINK_FIELDS, Link, Span
from palace_cli.lsp.names import Match, Resolved, Snapshot
from palace_cli.palace import Palace

SOURCE = "palace"
EXCERPT_CHARS = 400
TOKEN_CODES = {"token-missing", "token-not-in-image", "token-guessable", "token-duplicate", "token-overlap",
               "token-length"}
HINT_CODES = {"smashin-weak"}  # advice about the Image, not a fault


def path_of(uri: str) -> Path | None:
    """The file a `file:` URI names."""
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
    """The `file:` URI of a path."""
    return Path(path).absolute().as_uri()


@dataclass
class Document:
    """An editor buffer (or a file read from disk) and where it sits in the palace."""

    uri: str
    text: str
    version: int | None = None
    relpath: str | None = None  # relative to the palace root; None outside it

    @property
    def lines(self) -> list[str]:
        return buffer.lines_of(self.text)

    @property
    def domain(self) -> str:
        parts = (self.relpath or "").split("/")
        return parts[1] if self.is_note else ""

    @property
    def is_note(self) -> bool:
        parts = (self.relpath or "").split("/")
        return len(parts) >= 3 and parts[0] == "memories" and parts[-1].endswith(".md")

    def memory(self) -> Memory | None:
        """The buffer parsed as a note (None when it is not a readable note)."""
        if not self.is_note:
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
    open_text: Callable[[str], str | None] = lambda uri: None
    can_create_files: bool = False

    def document(self, relpath: str) -> Document:
        """A palace file as the editor holds it when open, else as it is on disk."""
        uri = uri_of(self.palace.root / relpath)
        text = self.open_text(uri)
        if text is None:
            try:
                text = (self.palace.root / relpath).read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
        return Document(uri, text, relpath=relpath)

    def range(self, lines: list[str], span: Span) -> lsp.Range:
        return lsp.Range(self.to_client(lines, span.line, span.start), self.to_client(lines, span.line, span.end))

    def location(self, memory: Memory) -> lsp.Location:
        """Where a memory is: its note at its `# title` line."""
        start = lsp.Position(max(memory.line - 1, 0), 0)
        return lsp.Location(uri_of(self.palace.root / memory.path), lsp.Range(start, start))


# ---- completion ----------------------------------------------------------------------------------


def completion(ctx: Context, doc: Document, line: int, column: int) -> lsp.CompletionList | None:
    """Memories after `[[` and in frontmatter link fields; `type:` values; frontmatter field names."""
    what = buffer.completing(doc.text, line, column)
    if what is None:
        return None
    lines = doc.lines
    edit_range = ctx.range(lines, what.span)
    items: list[lsp.CompletionItem] = []
    if what.kind == "link" or (what.kind == "value" and what.field in LINK_FIELDS):
        own = ctx.snapshot.by_path.get(doc.relpath or "")
        for index, match in enumerate(ctx.snapshot.match(what.typed, near_domain=doc.domain)):
            if what.kind == "value" and own is not None and match.memory.id == own.id:
                continue
            items.append(_memory_item(match, what, edit_range, index))
    elif what.kind == "value" and what.field == "type":
        items = [_word_item(t, what.typed, edit_range, lsp.CompletionItemKind.EnumMember, i)
                 for i, t in enumerate(TYPES) if t.startswith(what.typed.lower())]
    elif what.kind == "key":
        items = [_word_item(f, what.typed, edit_range, lsp.CompletionItemKind.Field, i, suffix=": ")
                 for i, f in enumerate(buffer.FIELDS) if f.startswith(what.typed.lower())]
    return lsp.CompletionList(is_incomplete=what.kind != "key", items=items)


def _memory_item(match: Match, what: buffer.Completing, edit_range: lsp.Range, index: int) -> lsp.CompletionItem:
    memory = match.memory
    text = memory.id
    if what.kind == "link" and match.field != "id":
        text = f"{memory.id}|{match.name}"  # typed by subject or alias: keep that name as the label
    if what.close:
        text += "]]"
    return lsp.CompletionItem(
        label=memory.id, kind=lsp.CompletionItemKind.Reference,
        label_details=lsp.CompletionItemLabelDetails(detail=f"  {memory.subject}", description=memory.domain),
        detail=f"{memory.subject} ({memory.domain})",
        # The server has filtered already: the typed text as filter text keeps clients from filtering again.
        filter_text=what.typed, sort_text=f"{index:04d}",
        text_edit=lsp.TextEdit(edit_range, text), data={"id": memory.id})


def _word_item(word: str, typed: str, edit_range: lsp.Range, kind: lsp.CompletionItemKind, index: int,
               suffix: str = "") -> lsp.CompletionItem:
    return lsp.CompletionItem(label=word, kind=kind, sort_text=f"{index:04d}", filter_text=word,
                              text_edit=lsp.TextEdit(edit_range, word + suffix))


def resolve_item(ctx: Context, item: lsp.CompletionItem) -> lsp.CompletionItem:
    """The completion item with the memory's description as documentation."""
    note_id = (item.data or {}).get("id") if isinstance(item.data, dict) else None
    memory = ctx.snapshot.memories.get(note_id or "")
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


def _target(ctx: Context, doc: Document, line: int, column: int) -> tuple[Link | None, Resolved]:
    link = buffer.link_at(doc.text, line, column)
    if link is None:
        return None, Resolved()
    return link, ctx.snapshot.resolve(link.target)


def hover(ctx: Context, doc: Document, line: int, column: int) -> lsp.Hover | None:
    """What a link (or an `id:`, or the note's own `verify:` line) refers to."""
    link, found = _target(ctx, doc, line, column)
    lines = doc.lines
    if link is None:
        return _verify_hover(ctx, doc, line)
    if found.memory is not None:
        text = describe(ctx, found.memory)
    elif found.candidates:
        text = f"`{link.target}` names several memories: " + ", ".join(f"`{c}`" for c in found.candidates[:8])
    elif found.broken:
        text = f"`{found.broken}` cannot be read: {found.problem}"
    else:
        near = ctx.snapshot.closest(link.target)
        text = f"no memory `{link.target}`" + (
            "; did you mean " + ", ".join(f"`{m.id}`" for m in near) + "?" if near else "")
    return lsp.Hover(lsp.MarkupContent(lsp.MarkupKind.Markdown, text), ctx.range(lines, link.whole))


def _verify_hover(ctx: Context, doc: Document, line: int) -> lsp.Hover | None:
    block = buffer.frontmatter(doc.lines)
    if not block or not block[0] <= line <= block[1]:
        return None
    owner = buffer.field_at(doc.lines, line, block)
    memory = doc.memory()
    if owner is None or owner[0] != "verify" or memory is None or not memory.verify:
        return None
    text = (f"verify token `{fingerprint(memory.verify)}`: the generated index files and results show this "
            "fingerprint, never the phrase; `palace verify` finds the phrase in an answer")
    return lsp.Hover(lsp.MarkupContent(lsp.MarkupKind.Markdown, text))


def definition(ctx: Context, doc: Document, line: int, column: int) -> list[lsp.Location] | None:
    """The note a link names, at its title line (every candidate when the name is ambiguous)."""
    link, found = _target(ctx, doc, line, column)
    if found.memory is not None:
        return [ctx.location(found.memory)]
    if found.candidates:
        return [ctx.location(ctx.snapshot.memories[c]) for c in found.candidates]
    if found.broken:
        start = lsp.Position(max((ctx.snapshot.broken[found.broken][1] or 1) - 1, 0), 0)
        return [lsp.Location(uri_of(ctx.palace.root / found.broken), lsp.Range(start, start))]
    return None


def _subject_of(ctx: Context, doc: Document, line: int, column: int) -> Memory | None:
    """The memory a references request is about: the link under the cursor, else the note itself."""
    link, found = _target(ctx, doc, line, column)
    if link is not None:
        return found.memory
    own = doc.memory()
    if own is not None:
        return ctx.snapshot.memories.get(own.id) or own
    return None


def references(ctx: Context, doc: Document, line: int, column: int, include_declaration: bool,
               open_uris: list[str] = ()) -> list[lsp.Location]:
    """Backlinks: every link to the memory, in saved notes and in open buffers."""
    target = _subject_of(ctx, doc, line, column)
    if target is None:
        return []
    root = ctx.palace.root
    relpaths = set(ctx.snapshot.backlinks(target.id))
    for uri in open_uris:
        relpath = relpath_in(ctx.palace, path_of(uri))
        if relpath is not None:
            relpaths.add(relpath)
    out = [ctx.location(target)] if include_declaration else []
    for relpath in sorted(relpaths):
        source = ctx.document(relpath)
        lines = source.lines
        for link in buffer.links(source.text):
            resolved = ctx.snapshot.resolve(link.target).memory
            if link.field != "mention" and resolved is not None and resolved.id == target.id:
                out.append(lsp.Location(uri_of(root / relpath), ctx.range(lines, link.whole)))
    return out


# ---- symbols ------------------------------------------------------------------------------------


def document_symbols(ctx: Context, doc: Document) -> list[lsp.DocumentSymbol]:
    """The note's outline: `#` title, `##` sections (Image, Content, Links, ...), deeper headings nested."""
    lines = doc.lines
    found = buffer.headings(doc.text)
    roots: list[lsp.DocumentSymbol] = []
    stack: list[tuple[int, lsp.DocumentSymbol]] = []
    for i, (level, title, number) in enumerate(found):
        end_line = next((n for lv, _, n in found[i + 1 :] if lv <= level), len(lines)) - 1
        end = ctx.to_client(lines, end_line, len(lines[end_line]))
        head = ctx.range(lines, Span(number, 0, len(lines[number].rstrip("\r"))))
        symbol = lsp.DocumentSymbol(name=title, kind=lsp.SymbolKind.Module if level == 1 else lsp.SymbolKind.String,
                                    range=lsp.Range(head.start, end), selection_range=head, children=[])
        while stack and stack[-1][0] >= level:
            stack.pop()
        (stack[-1][1].children if stack else roots).append(symbol)
        stack.append((level, symbol))
    return roots


def workspace_symbols(ctx: Context, query: str, limit: int = 50) -> list[lsp.SymbolInformation]:
    """Memories for a query, ranked as `palace search` ranks them (names as typed when the query is empty)."""
    if not query.strip():
        memories = [m.memory for m in ctx.snapshot.match("", limit)]
    else:
        from palace_cli.search.retrieve import search

        result = search(ctx.palace, query, k=limit, do_refresh=False)
        memories = [ctx.snapshot.by_path.get(hit.path) or hit.memory for hit in result.hits]
    return [lsp.SymbolInformation(name=m.subject or m.id, kind=lsp.SymbolKind.File, location=ctx.location(m),
                                  container_name=f"{m.domain} · {m.id}") for m in memories if m is not None]


# ---- diagnostics --------------------------------------------------------------------------------


def diagnostics(ctx: Context, doc: Document) -> list[lsp.Diagnostic]:
    """Lint's problems for the buffer's unsaved text (notes under memories/ only)."""
    if not doc.is_note:
        return []
    from palace_cli.editing.lint import lint_note_text

    problems = lint_note_text(ctx.palace, doc.relpath, doc.text, ctx.snapshot.checker)
    lines = doc.lines
    named = [link for link in buffer.links(doc.text) if link.field != "mention"]
    return [_diagnostic(ctx, lines, problem, named) for problem in problems]


def _diagnostic(ctx: Context, lines: list[str], problem: Problem, named: list[Link]) -> lsp.Diagnostic:
    number = min(max((problem.line or 1) - 1, 0), len(lines) - 1)
    text = lines[number].rstrip("\r")
    span = Span(number, len(text) - len(text.lstrip()), len(text))
    data = None
    if problem.code == "broken-link":
        for link in named:
            if repr(link.target) in problem.message and (link.span.line == number or link.field != "body"):
                span, data = link.span, {"target": link.target, "line": link.span.line, "start": link.span.start,
                                         "end": link.span.end, "field": link.field}
                break
    severity = (lsp.DiagnosticSeverity.Hint if problem.code in HINT_CODES else
                lsp.DiagnosticSeverity.Error if problem.severity == "error" else lsp.DiagnosticSeverity.Warning)
    return lsp.Diagnostic(ctx.range(lines, span), problem.message, severity=severity, code=problem.code,
                          source=SOURCE, data=data)


# ---- code actions -------------------------------------------------------------------------------


def code_actions(ctx: Context, doc: Document, diagnostics_: list[lsp.Diagnostic]) -> list[lsp.CodeAction]:
    """Quick fixes for the palace's diagnostics: propose a verify token, fix a broken link to the closest
    memory, create the missing memory from the note template."""
    actions: list[lsp.CodeAction] = []
    ours = [d for d in diagnostics_ if d.source == SOURCE]
    token_fix = [d for d in ours if d.code in TOKEN_CODES]
    if token_fix:
        action = propose_token_action(ctx, doc, token_fix)
        if action is not None:
            actions.append(action)
    for diagnostic in ours:
        if diagnostic.code == "broken-link" and isinstance(diagnostic.data, dict):
            actions += _link_fixes(ctx, doc, diagnostic)
    return actions


def propose_token_action(ctx: Context, doc: Document, fixes: list[lsp.Diagnostic]) -> lsp.CodeAction | None:
    """Set `verify:` to a phrase proposed from the Image (unguessable, unused elsewhere in the palace)."""
    from palace_cli.core.noteedit import edit_frontmatter

    memory = doc.memory()
    if memory is None or not memory.image:
        return None
    taken = {token for note_id, token in ctx.snapshot.tokens.items() if note_id != memory.id}
    token = propose_token(memory.image, memory.subject, memory.keywords, memory.content, taken, anchor=memory.anchor)
    if not token or token == memory.verify:
        return None
    try:
        new_text = edit_frontmatter(doc.text, {"verify": token}, doc.relpath or "note")
    except PalaceError:
        return None
    title = f"Propose a verify token from the Image: {token!r}"
    return lsp.CodeAction(title, kind=lsp.CodeActionKind.QuickFix, diagnostics=fixes, is_preferred=True,
                          edit=_whole_edit(ctx, doc, new_text))


def _link_fixes(ctx: Context, doc: Document, diagnostic: lsp.Diagnostic) -> list[lsp.CodeAction]:
    data = diagnostic.data
    target = data["target"]
    lines = doc.lines
    span = Span(data["line"], data["start"], data["end"])
    if span.line >= len(lines) or lines[span.line][span.start : span.end] != target:
        return []  # the buffer changed under the diagnostic; a fresh one follows
    where = ctx.range(lines, span)
    actions = []
    for memory in ctx.snapshot.closest(target):
        edit = lsp.WorkspaceEdit(changes={doc.uri: [lsp.TextEdit(where, memory.id)]})
        actions.append(lsp.CodeAction(f"Link to {memory.id} ({memory.subject})", kind=lsp.CodeActionKind.QuickFix,
                                      diagnostics=[diagnostic], is_preferred=not actions, edit=edit))
    create = _create_action(ctx, doc, target, where, diagnostic)
    if create is not None:
        actions.append(create)
    return actions


def new_memory_text(ctx: Context, note_id: str, subject: str, domain: str, linked_from: str | None) -> str:
    """A new note from the palace's template (as `palace add` writes it), linking back to the note it came from."""
    from palace_cli.editing.authoring import memory_template, render_memory

    template, where = memory_template(ctx.palace)
    fields = {"id": note_id, "subject": subject, "anchor": "", "keywords": [], "verify": "",
              "links": [linked_from] if linked_from else [], "created": date.today()}
    sections = {"Links": f"- [[{linked_from}]]"} if linked_from else {}
    return render_memory(template, fields, domain, sections, where)


def _create_action(ctx: Context, doc: Document, target: str, where: lsp.Range,
                   diagnostic: lsp.Diagnostic) -> lsp.CodeAction | None:
    if not ctx.can_create_files or not doc.is_note:
        return None
    note_id = target if ID_PATTERN.match(target) else slugify(target)
    subject = target if not ID_PATTERN.match(target) else target.replace("-", " ").capitalize()
    relpath = f"memories/{doc.domain}/{note_id}.md"
    if note_id in ctx.snapshot.memories or (ctx.palace.root / relpath).exists():
        return None
    own = doc.memory()
    try:
        text = new_memory_text(ctx, note_id, subject, doc.domain, own.id if own else None)
    except PalaceError:
        return None
    uri = uri_of(ctx.palace.root / relpath)
    changes: list = [lsp.CreateFile(uri=uri, options=lsp.CreateFileOptions(overwrite=False, ignore_if_exists=True)),
                     lsp.TextDocumentEdit(lsp.OptionalVersionedTextDocumentIdentifier(uri, None),
                                          [lsp.TextEdit(lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)), text)])]
    if note_id != target:
        changes.append(lsp.TextDocumentEdit(lsp.OptionalVersionedTextDocumentIdentifier(doc.uri, doc.version),
                                            [lsp.TextEdit(where, note_id)]))
    return lsp.CodeAction(f"Create memory {note_id} in {doc.domain} from the template",
                          kind=lsp.CodeActionKind.QuickFix,
                          diagnostics=[diagnostic], edit=lsp.WorkspaceEdit(document_changes=changes))


def _whole_edit(ctx: Context, doc: Document, new_text: str) -> lsp.WorkspaceEdit:
    """The smallest single edit turning the buffer into new_text."""
    old = doc.text
    head = len(os.path.commonprefix([old, new_text]))
    tail = 0
    while tail < min(len(old), len(new_text)) - head and old[-1 - tail] == new_text[-1 - tail]:
        tail += 1
    lines = doc.lines

    def position(offset: int) -> lsp.Position:
        line = old.count("\n", 0, offset)
        return ctx.to_client(lines, line, offset - (old.rfind("\n", 0, offset) + 1))

    edit = lsp.TextEdit(lsp.Range(position(head), position(len(old) - tail)), new_text[head : len(new_text) - tail])
    return lsp.WorkspaceEdit(changes={doc.uri: [edit]})
