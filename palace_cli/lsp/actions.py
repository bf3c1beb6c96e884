"""Quick fixes for the palace's diagnostics: propose a verify token, point a broken link at the memory it
most likely meant (the core resolver's suggestion), create the missing memory from the note template."""

from __future__ import annotations

from datetime import date

from lsprotocol import types as lsp

from palace_cli.core.notes import ID_PATTERN
from palace_cli.core.text import slugify
from palace_cli.core.tokens import propose_token
from palace_cli.errors import PalaceError
from palace_cli.lsp.buffer import LINK_FIELDS, PATH_FORMS, Span
from palace_cli.lsp.features import SOURCE, Context, Document, uri_of

TOKEN_CODES = {"token-missing", "token-not-in-image", "token-guessable", "token-duplicate", "token-overlap",
               "token-length"}


def code_actions(ctx: Context, doc: Document, diagnostics: list[lsp.Diagnostic]) -> list[lsp.CodeAction]:
    """Quick fixes for the palace's diagnostics among those the editor sends."""
    actions: list[lsp.CodeAction] = []
    ours = [d for d in diagnostics if d.source == SOURCE]
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
    try:
        target, span = data["target"], Span(int(data["line"]), int(data["start"]), int(data["end"]))
    except (KeyError, TypeError, ValueError):
        return []  # not data this server wrote
    if data.get("field") in PATH_FORMS:
        return []  # a path names a file: an id or a new memory's name in its place would be no path
    lines = doc.lines
    if not isinstance(target, str) or not 0 <= span.line < len(lines) or lines[span.line][span.start : span.end] != target:
        return []  # the buffer changed under the diagnostic; a fresh one follows
    where = ctx.range(lines, span)
    actions = []
    ids = data.get("field") in LINK_FIELDS and not data.get("wiki")  # palace's own fields hold ids
    for memory in ctx.snapshot.near(target):
        text = memory.id if ids else ctx.snapshot.link_name(memory, doc.relpath)  # written as the vault links
        edit = lsp.WorkspaceEdit(changes={doc.uri: [lsp.TextEdit(where, text)]})
        actions.append(lsp.CodeAction(f"Link to {text} ({memory.subject})", kind=lsp.CodeActionKind.QuickFix,
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


# What a file name in a vault may not hold (Obsidian refuses these in a note's name, and `/` is a folder).
UNNAMEABLE = set('/\\:*?"<>|#^[]')


def _create_action(ctx: Context, doc: Document, target: str, where: lsp.Range,
                   diagnostic: lsp.Diagnostic) -> lsp.CodeAction | None:
    if not ctx.can_create_files or not doc.domain:
        return None
    if ctx.palace.adopted:
        return _create_vault_note(ctx, doc, target, diagnostic)
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


def _create_vault_note(ctx: Context, doc: Document, target: str, diagnostic: lsp.Diagnostic) -> lsp.CodeAction | None:
    """In an adopted vault, the note a link names as the vault names notes: `<target>.md` in the linking note's
    domain folder (Palace.new_note_path), holding its title; the link is left as it was written (it resolves)."""
    name = target.strip()
    if not name or name.startswith(".") or UNNAMEABLE.intersection(name):
        return None
    relpath = ctx.palace.new_note_path(doc.domain, name)
    if (ctx.palace.root / relpath).exists():
        return None
    uri = uri_of(ctx.palace.root / relpath)
    changes: list = [lsp.CreateFile(uri=uri, options=lsp.CreateFileOptions(overwrite=False, ignore_if_exists=True)),
                     lsp.TextDocumentEdit(lsp.OptionalVersionedTextDocumentIdentifier(uri, None),
                                          [lsp.TextEdit(lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)),
                                                        f"# {name}\n")])]
    return lsp.CodeAction(f"Create note {relpath}", kind=lsp.CodeActionKind.QuickFix, diagnostics=[diagnostic],
                          edit=lsp.WorkspaceEdit(document_changes=changes))


def _whole_edit(ctx: Context, doc: Document, new_text: str) -> lsp.WorkspaceEdit:
    """The smallest single edit turning the buffer into new_text."""
    old = doc.text
    head = _common(min(len(old), len(new_text)), lambda n: (old[:n], new_text[:n]))
    tail = _common(min(len(old), len(new_text)) - head,
                   lambda n: (old[len(old) - n :], new_text[len(new_text) - n :]))
    lines = doc.lines

    def position(offset: int) -> lsp.Position:
        line = old.count("\n", 0, offset)
        return ctx.to_client(lines, line, offset - (old.rfind("\n", 0, offset) + 1))

    edit = lsp.TextEdit(lsp.Range(position(head), position(len(old) - tail)), new_text[head : len(new_text) - tail])
    return lsp.WorkspaceEdit(changes={doc.uri: [edit]})


def _common(most: int, parts) -> int:
    """How many characters two texts share at one end, at most `most` (`parts(n)` cuts both to their first n, or to
    their last n): a bisection over slice comparisons, at C speed even for a megabyte buffer."""
    low, high = 0, max(most, 0)
    while low < high:
        middle = (low + high + 1) // 2
        first, second = parts(middle)
        if first == second:
            low = middle
        else:
            high = middle - 1
    return low
