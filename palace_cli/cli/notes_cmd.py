"""Commands for creating and caring for notes: init, add, list, show, domains, lint."""

from __future__ import annotations

import sys

import click
from rich.markup import escape

from palace_cli.cli import open_palace, pass_ctx, render
from palace_cli.core.notes import TYPES, Memory
from palace_cli.core.tokens import fingerprint
from palace_cli.core.wording import plural
from palace_cli.editing.authoring import add_note, draft_memory, propose_missing_token, review_added
from palace_cli.editing.initplan import apply_init, plan_init
from palace_cli.editing.curate import has_tag
from palace_cli.editing.lint import OPT_IN, lint as run_lint
from palace_cli.errors import NoteError, UsageError


def memory_summary(memory: Memory) -> dict:
    """The JSON shape of a memory in listings."""
    return {"id": memory.id, "subject": memory.subject, "domain": memory.domain, "anchor": memory.anchor,
            "keywords": memory.keywords, "links": memory.links, "path": memory.path, "line": memory.line,
            "token": fingerprint(memory.verify), "type": memory.type, "core": memory.core,
            "valid_from": memory.valid_from, "valid_until": memory.valid_until, "supersedes": memory.supersedes,
            "superseded_by": memory.superseded_by}


def validity_lines(memory: Memory) -> list[str]:
    """What `show` says about a memory's place in time, one line each (none for a plain memory)."""
    lines = []
    if memory.type or memory.core:
        lines.append("type: " + (memory.type or "-") + (" (core)" if memory.core else ""))
    if memory.valid_from or memory.valid_until:
        lines.append(f"valid: {memory.valid_from or '…'} → {memory.valid_until or 'now'}")
    if memory.supersedes:
        lines.append("supersedes: " + ", ".join(memory.supersedes))
    if memory.superseded_by:
        lines.append("superseded by: " + ", ".join(memory.superseded_by))
    return lines


def _split_list(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


@click.command()
@click.argument("directory", type=click.Path(file_okay=False), default=".")
@click.option("--name", help="Palace name (default: the folder name).")
@click.option("--no-git-setup", is_flag=True,
              help="Leave git alone: no .gitignore or .gitattributes lines, no config, no hooks, no `git init`.")
@click.option("--dry-run", is_flag=True, help="List what init would create or change, and stop.")
def init(directory, name, no_git_setup, dry_run):
    """Create a palace, or adopt the Markdown notes already in a folder where they lie.

    First it lists every file and setting it will create or change, then does it. An empty folder gets
    palace.toml, memories/, index/, reviews/ and git set up. A folder that holds Markdown (an Obsidian vault, a
    Foam workspace, a zk notebook) is adopted: every .md file is a note; palace adds palace.toml, reviews/, its
    generated index in .palace-index/, its cache in .palace/ and, in a git repository, the .gitignore and
    .gitattributes lines, the merge driver and its hook; it changes no note.

    Example: palace init ~/vault --dry-run
    """
    plan = plan_init(directory, name, git_setup=not no_git_setup)
    root = plan.root
    doing = "Adopting the Markdown in" if plan.adopt else "Creating a palace in"
    render.out.print(f"{doing} {root}{' where it lies (no note is changed)' if plan.adopt else ''}; "
                     f"{'palace would write' if dry_run else 'palace writes'}:", markup=False)
    width = max(len(step.path) for step in plan.steps)
    for step in plan.steps:
        mark = "+" if step.new else "~"
        render.out.print(f"  {mark} {step.path.ljust(width)}  {step.what}", markup=False)
    if dry_run:
        render.out.print("Nothing was written (--dry-run).", markup=False)
        return
    done = apply_init(plan)
    if done.adopted:
        render.out.print(f"Adopted {plural(done.notes, 'note')} in {root} where they lie (no note was changed).",
                         markup=False)
        render.out.print(f"Next: cd {root} && palace recall \"a question your notes answer\"", markup=False)
        if not done.git and not no_git_setup:
            render.out.print("Not a git repository: `git init` keeps its history (then `palace git setup`).",
                             markup=False)
        return
    render.out.print(f"Created a palace in {root}. Next: cd {root} && palace add \"Your first memory\" --domain general",
                     markup=False)


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def _utf8_arguments(**values) -> None:
    """UsageError naming the first argument that is not UTF-8 text (a shell in another locale, a pasted byte):
    it could only be written as a note that is no UTF-8, which palace never writes."""
    for name, value in values.items():
        bad = next((c for c in value or "" if "\udc80" <= c <= "\udcff"), None)
        if bad is not None:
            option = name if name.isupper() else f"--{name.replace('_', '-')}"
            raise UsageError(f"{option} is not UTF-8 text (byte 0x{ord(bad) - 0xDC00:02x}); give it in UTF-8")


def _stdin_options(**values: str) -> dict[str, str]:
    """Options given as `-` read standard input (one of them at most)."""
    dashes = [name for name, value in values.items() if value == "-"]
    if len(dashes) > 1:
        raise click.UsageError(f"only one option can read stdin; --{dashes[0]} and --{dashes[1]} both say '-'")
    if dashes:
        values[dashes[0]] = sys.stdin.read().strip("\n")
    return values


def _edit_draft(palace, draft) -> Memory | None:
    """Open $VISUAL/$EDITOR on the new note before it exists in memories/, at its Image; save what comes back.

    Returns the saved memory, None when the saved note does not parse. A template left unchanged, with its
    hints still in place, aborts: nothing is written, exit 1."""
    import tempfile
    from pathlib import Path

    from palace_cli.cli.curate_cmd import run_editor

    with tempfile.TemporaryDirectory(prefix="palace-add-") as folder:
        path = Path(folder) / f"{draft.id}.md"
        path.write_text(draft.text, encoding="utf-8")
        line = next((n for n, text in enumerate(draft.text.splitlines(), 1) if text.strip().lower() == "## image"), 1)
        run_editor(path, line + 1)
        edited = path.read_text(encoding="utf-8")
    if edited == draft.text and draft.unfinished():
        render.err.print("palace: the note was not changed and still holds the template's hints; nothing added",
                         markup=False)
        raise SystemExit(1)
    try:
        memory = draft.save(edited)
    except NoteError as exc:
        render.warn(f"the note was saved but cannot be read: {exc}; fix it, then run `palace lint`")
        return None
    taken = {m.verify for m in palace.scan(light=True).memories.values() if m.verify and m.id != memory.id}
    return propose_missing_token(palace, memory, taken)


@click.command()
@click.argument("subject")
@click.option("--domain", "-d", default=None,
              help="Domain folder (or a domain alias or prefix); default: the inbox ([notes] inbox, `inbox`).")
@click.option("--new-domain", is_flag=True, help="Create the domain even when its name is close to an existing one.")
@click.option("--anchor", default="", help="The memorable hook, 2-5 words.")
@click.option("--image", default="", help="The SMASHIN scene ('-' reads stdin).")
@click.option("--content", default="", help="The facts ('-' reads stdin).")
@click.option("--keywords", default="", help="Comma-separated keywords.")
@click.option("--links", default="", help="Comma-separated ids of related memories.")
@click.option("--verify", default=None, help="Verify token (default: proposed from the image).")
@click.option("--id", "note_id", default=None, help="Note id (default: from the subject).")
@click.option("--supersedes", multiple=True, metavar="ID",
              help="A memory this one replaces (repeat, or comma-separate); it stays, marked superseded.")
@click.option("--valid-from", default=None, metavar="DATE",
              help="When this became true (YYYY-MM-DD, UTC; default with --supersedes: today).")
@click.option("--type", "type_", type=click.Choice(TYPES), default=None, help="What kind of memory it is.")
@click.option("--core", is_flag=True, help="Always in wake-up, first.")
@click.option("--edit/--no-edit", default=None,
              help="Open $EDITOR on a SMASHIN note from the template (default: in a terminal, when a --domain is "
                   "given and no --image).")
@click.option("--json", "as_json", is_flag=True, help="Print the new memory as JSON.")
@pass_ctx
def add(ctx, subject, domain, new_domain, anchor, image, content, keywords, links, verify, note_id, supersedes,
        valid_from, type_, core, edit, as_json):
    """Add a memory: a thought at once, or a SMASHIN note from templates/memory.md.

    Text alone (SUBJECT, or `-` to read it from stdin) is written at once as a plain note in the inbox
    domain, no image, no editor: it is searched and recalled now, cited and studied once it grows an Image
    and a verify token (`palace lint --study`, `palace evolve`). With --image (or in $EDITOR) it is a SMASHIN
    memory with its verify token.

    Example: echo "Rotate the API keys every 90 days" | palace add -
    """
    _utf8_arguments(SUBJECT=subject, domain=domain, anchor=anchor, image=image, content=content, keywords=keywords,
                    links=links, verify=verify, id=note_id, supersedes=" ".join(supersedes), valid_from=valid_from)
    palace = ctx.palace
    if subject == "-":
        if "-" in (image, content):
            raise click.UsageError("only one argument can read stdin; SUBJECT and an option both say '-'")
        subject = sys.stdin.read()
    texts = _stdin_options(image=image, content=content)
    fields = dict(anchor=anchor, keywords=_split_list(keywords), links=_split_list(links), verify=verify,
                  note_id=note_id, new_domain=new_domain, supersedes=[i for s in supersedes for i in _split_list(s)],
                  valid_from=valid_from, type=type_ or "", core=core)
    smashin = bool(texts["image"].strip())
    if edit or (edit is None and domain is not None and not smashin and _interactive()):
        draft = draft_memory(palace, subject, domain or palace.config.notes.inbox, image=texts["image"],
                             content=texts["content"], **fields)
        path, memory = draft.relpath, _edit_draft(palace, draft)
    else:
        memory = add_note(palace, subject, domain, image=texts["image"], content=texts["content"], **fields)
        path = memory.path
    palace.refresh()
    if memory is None:
        raise SystemExit(1)
    _show_added(memory, review_added(palace, memory), path, anchor, as_json, palace.site.rules.templated(memory))


def _show_added(memory, review, path: str, anchor: str, as_json: bool, templated: bool = True) -> None:
    """What `add` says of the memory it wrote: JSON, or where it is, its token, and the review's warnings."""
    if as_json:
        render.emit_json(memory_summary(memory) | {"verify": memory.verify,
                                                   "similar": [n.as_dict() for n in review.neighbours]})
        return
    render.out.print(f"Added {memory.id} at {memory.location}", markup=False)
    if memory.supersedes:
        render.out.print(f"supersedes {', '.join(memory.supersedes)} from {memory.valid_from}", markup=False)
    if not (anchor or "").strip() and memory.anchor:
        render.out.print(f"anchor: {memory.anchor} (proposed from the image; `palace edit {memory.id}` to change it)",
                         markup=False)
    if memory.verify:
        render.out.print(f"verify token: {memory.verify}", markup=False)
    else:
        opt_in = "" if templated else f"{OPT_IN}, then "
        render.out.print("a plain note: searched and recalled now; not citable or studyable until it has an Image "
                         f"and a verify token ({opt_in}`palace evolve {memory.id}` proposes them)", markup=False)
    for message in review.token_problems if memory.verify else []:
        render.warn(f"{path}: {message}")
    if review.compare_error:
        render.warn(f"could not compare {memory.id} with the other memories: {review.compare_error}")
    for line in review.advice:
        render.warn(line)


@click.command(name="list")
@click.option("--domain", "-d", default=None, help="Only this domain.")
@click.option("--tag", "-t", "tag", default=None, help="Only memories with this tag (keyword).")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def list_(ctx, domain, tag, as_json):
    """List memories, by domain.

    Example: palace list --domain storage-engines
    """
    palace = ctx.palace
    scan = palace.scan(light=True)
    memories = sorted(scan.memories.values(), key=lambda m: (m.domain, m.id))
    if domain:
        domain = palace.resolve_domain(domain)
        memories = [m for m in memories if m.domain == domain]
    if tag:
        memories = [m for m in memories if has_tag(m, tag)]
    if as_json:
        render.emit_json({"memories": [memory_summary(m) for m in memories], "problems": len(scan.problems)})
        return
    render.table(["id", "subject", "anchor", "where"], [[m.id, m.subject, m.anchor, m.location] for m in memories])
    if scan.problems:
        render.warn(f"{plural(len(scan.problems), 'note problem')} hidden from this list; run `palace lint`")


@click.command()
@click.argument("ref")
@click.option("--json", "as_json", is_flag=True, help="JSON output, including image and content.")
@pass_ctx
def show(ctx, ref, as_json):
    """Show a memory by id, path, file name, alias or exact subject (a near miss suggests names).

    Example: palace show two-phase-commit
    """
    memory = ctx.palace.memory(ref)
    if as_json:
        render.emit_json(memory_summary(memory) | {"image": memory.image, "content": memory.content,
                                                   "verify": memory.verify, "created": memory.created})
        return
    print_ = render.out.print
    print_(f"[bold]{escape(memory.subject)}[/bold]  ({memory.id}, {escape(memory.domain)})", markup=True)
    print_(memory.location, markup=False)
    if memory.anchor or not memory.plain:
        print_(f"anchor: {memory.anchor}", markup=False)
    else:
        print_("a plain note: not citable or studyable yet (`palace lint --study` says what it lacks)", markup=False)
    for line in validity_lines(memory):
        print_(line, markup=False)
    if memory.keywords:
        print_("keywords: " + ", ".join(memory.keywords), markup=False)
    if memory.image or not memory.plain:
        print_("\n[bold]Image[/bold]", markup=True)
        print_(memory.image, markup=False)
    print_("\n[bold]Content[/bold]", markup=True)
    print_(memory.content, markup=False)
    if memory.all_links:
        print_("\nlinks: " + ", ".join(memory.all_links), markup=False)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def domains(ctx, as_json):
    """List domains with their memory counts and aliases.

    Example: palace domains --json
    """
    palace = ctx.palace
    grouped = palace.scan(light=True).by_domain()
    rows = []
    for name in palace.domains():
        spec = palace.config.domains.get(name)
        rows.append({"domain": name, "memories": len(grouped.get(name, [])),
                     "aliases": spec.aliases if spec else [], "description": spec.description if spec else ""})
    if as_json:
        render.emit_json({"domains": rows})
        return
    render.table(["domain", "memories", "aliases", "description"],
          [[r["domain"], r["memories"], ", ".join(r["aliases"]), r["description"]] for r in rows])


@click.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.option("--fix", is_flag=True, help="Propose missing verify tokens and regenerate index files; nothing else.")
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too, not only on errors.")
@click.option("--study", is_flag=True, help="Also say what each note lacks to be cited and studied (study-gap).")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def lint(ctx, directory, fix, strict, study, as_json):
    """Check every note; exit 1 on errors (with --strict, on warnings too).

    Errors are what is broken (a note that cannot be read, a broken link, a wrong token); a note that merely
    lacks its SMASHIN parts is fine, and --study lists what each lacks to be cited and studied.
    DIRECTORY is the palace to check (default: this one).

    Example: palace lint --study
    """
    palace = open_palace(directory) if directory else ctx.palace
    report = run_lint(palace, fix=fix, study=study)
    if as_json:
        render.emit_json(report.as_dict())
    else:
        for line in report.fixed:
            render.out.print(f"fixed: {line}", markup=False)
        render.problems(report.problems)
        summary = f"{plural(report.errors, 'error')}, {plural(report.warnings, 'warning')}"
        render.out.print(summary if report.problems else "No problems found.", markup=False)
    if report.failed(strict):
        raise SystemExit(1)


COMMANDS = [init, add, list_, show, domains, lint]
