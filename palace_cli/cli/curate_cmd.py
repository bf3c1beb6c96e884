"""Everyday verbs on notes, with the conventions of zk and nb: edit, rm, mv, backlinks, tags, open."""

from __future__ import annotations

import re
import subprocess

import click

from palace_cli.editing.curate import backlinks as find_backlinks, move_memory, remove_memory, tags as all_tags
from palace_cli.editing.editor import editor_command
from palace_cli.errors import NoteError, PalaceError
from palace_cli.editing.lint import lint_note_text
from palace_cli.core.notefile import load_note
from palace_cli.core.wording import plural
from palace_cli.cli import pass_ctx, render


def run_editor(path, line: int | None = None) -> None:
    """Open the person's editor on a file at a line and wait for it; PalaceError when it cannot start."""
    command = editor_command(path, line)
    try:
        status = subprocess.call(command)
    except OSError as exc:
        raise PalaceError(f"cannot start the editor {command[0]!r}: {exc.strerror}; set $VISUAL or $EDITOR") from None
    if status != 0:
        render.warn(f"the editor {command[0]!r} exited with status {status}")


@click.command()
@click.argument("ref")
@click.option("--json", "as_json", is_flag=True, help="Print the note as it is after editing, as JSON.")
@pass_ctx
def edit(ctx, ref, as_json):
    """Open a memory in $VISUAL or $EDITOR at its line (`path:line` opens at that line), then refresh.

    Example: palace edit two-phase-commit
    """
    palace = ctx.palace
    memory = palace.memory(ref)
    given = re.search(r":(\d+)$", ref.strip())
    run_editor(palace.root / memory.path, int(given.group(1)) if given else memory.line)
    report = palace.refresh()
    try:
        edited = load_note(palace.root, memory.path, memory.domain)
    except NoteError as exc:
        raise PalaceError(f"the note was saved but cannot be read: {exc}; fix it with `palace edit {memory.path}`") \
            from None
    except FileNotFoundError:
        raise PalaceError(f"{memory.path} is gone (renamed or deleted in the editor?)") from None
    problems = lint_note_text(palace, edited.path, (palace.root / edited.path).read_text(encoding="utf-8-sig"))
    if as_json:
        render.emit_json({"id": edited.id, "path": edited.path, "line": edited.line, "changed": bool(report.changed),
                          "problems": [p.as_dict() for p in problems]})
        return
    render.out.print(f"{'Saved' if report.changed else 'Unchanged'}: {edited.location}", markup=False)
    for problem in problems:
        render.warn(str(problem))


@click.command()
@click.argument("ref")
@click.option("--force", is_flag=True, help="Remove it even when other memories link to it (their links break).")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def rm(ctx, ref, force, as_json):
    """Remove a memory's note; refuses while other memories link to it. Its review history stays in reviews/.

    Example: palace rm old-idea
    """
    palace = ctx.palace
    removal = remove_memory(palace, ref, force=force)
    palace.refresh()
    if as_json:
        render.emit_json(removal.as_dict())
        return
    render.out.print(f"Removed {removal.memory.id} ({removal.memory.path})", markup=False)
    if removal.reviews:
        render.note(f"its {plural(removal.reviews, 'review')} stay in reviews/ (the log is history; "
                    "restoring the note brings them back)")
    for link in removal.broken:
        render.warn(f"{link.where}: the link to {link.target!r} is broken now ({link.field})")


@click.command()
@click.argument("ref")
@click.argument("new_id", required=False)
@click.option("--domain", "-d", default=None, help="Move it to this domain (a name, alias or prefix).")
@click.option("--new-domain", is_flag=True, help="Create the domain even when its name is close to an existing one.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def mv(ctx, ref, new_id, domain, new_domain, as_json):
    """Rename a memory or move it to another domain; links to it follow, in the form they were written in.

    Under memories/, NEW_ID is the new id (and file name), and its reviews follow it. In an adopted vault,
    NEW_ID is the note's new name, or a path from the root: "Irrigation plan" renames "Garden/Watering
    schedule.md" to "Garden/Irrigation plan.md"; no other byte of any file changes. A link never changes the note
    it names: onto a name another note has, links get the folder where a bare name could name the other note.

    Example: palace mv "Garden/Watering schedule.md" "Irrigation plan"
    """
    if not new_id and not domain:
        raise click.UsageError("give a NEW_ID (a new name), a --domain, or both")
    palace = ctx.palace
    move = move_memory(palace, ref, new_id=new_id, domain=domain, new_domain=new_domain)
    palace.refresh()
    if as_json:
        render.emit_json(move.as_dict())
        return
    what = move.new_id if move.new_id == move.old_id else f"{move.old_id} → {move.new_id}"
    render.out.print(f"Moved {what}: {move.old_path} → {move.new_path}", markup=False)
    if move.rewritten:
        render.out.print(f"links renamed in {plural(len(move.rewritten), 'note')}: {', '.join(move.rewritten)}",
                         markup=False)
    if move.shared:
        render.note(f"{move.new_path} shares its file name with {', '.join(move.shared)}: the links to it are "
                    "written with its folder where a bare name could read as the other note")
    if move.kept:
        render.note(f"links to other notes that {move.new_path} would have taken (Obsidian's rule) are written "
                    f"with their path, so they name what they named, in: {', '.join(move.kept)}")


@click.command()
@click.argument("ref")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def backlinks(ctx, ref, as_json):
    """List the memories that link to a memory (by id, file name, alias or subject), with path:line:column.

    Example: palace backlinks two-phase-commit
    """
    memory, links = find_backlinks(ctx.palace, ref)
    if as_json:
        render.emit_json({"id": memory.id, "path": memory.path, "backlinks": [b.as_dict() for b in links]})
        return
    if not links:
        render.note(f"no memory links to {memory.id}")
        return
    render.table(["id", "field", "where"], [[b.id, b.field, b.where] for b in links])


@click.command()
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def tags(ctx, as_json):
    """List tags (keywords, and Obsidian `tags:`) with how many memories carry each; `palace list --tag T` lists them.

    Example: palace tags --json
    """
    found = all_tags(ctx.palace)
    if as_json:
        render.emit_json({"tags": [t.as_dict() for t in found]})
        return
    render.table(["tag", "memories"], [[t.name, len(t.ids)] for t in found], whole=("tag",))


@click.command(name="open")
@click.argument("ref")
@click.option("--locate", is_flag=True, help="Show the note in the file manager instead of opening it.")
@click.option("--json", "as_json", is_flag=True, help="Print the note's path as JSON, opening nothing.")
@pass_ctx
def open_(ctx, ref, locate, as_json):
    """Open a memory's note with the application the system uses for Markdown files (Obsidian, a viewer...).

    Example: palace open two-phase-commit
    """
    palace = ctx.palace
    memory = palace.memory(ref)
    path = palace.root / memory.path
    if as_json:
        render.emit_json({"id": memory.id, "path": memory.path, "file": str(path), "line": memory.line})
        return
    status = click.launch(str(path), wait=True, locate=locate)
    if status != 0:
        raise PalaceError(f"could not open {memory.path} (the system opener exited with {status}); "
                          f"try `palace edit {memory.id}`")


COMMANDS = [edit, rm, mv, backlinks, tags, open_]
