"""Commands for creating and caring for notes: init, add, list, show, domains, lint."""

from __future__ import annotations

import click

from .. import render
from ..authoring import add_memory, init_palace
from ..lint import lint as run_lint
from ..notes import Memory, load_note
from ..tokens import fingerprint, token_problems
from . import pass_ctx


def memory_summary(memory: Memory) -> dict:
    """The JSON shape of a memory in listings."""
    return {"id": memory.id, "subject": memory.subject, "domain": memory.domain, "anchor": memory.anchor,
            "keywords": memory.keywords, "links": memory.links, "path": memory.path, "line": memory.line,
            "token": fingerprint(memory.verify)}


def _split_list(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


@click.command()
@click.argument("directory", type=click.Path(file_okay=False), default=".")
@click.option("--name", help="Palace name (default: the folder name).")
def init(directory, name):
    """Create a palace: palace.toml, memories/, index/, reviews/, git files.

    Example: palace init ~/kb
    """
    root = init_palace(directory, name)
    render.out.print(f"Created a palace in {root}. Next: cd {root} && palace add \"Your first memory\" --domain general")


@click.command()
@click.argument("subject")
@click.option("--domain", "-d", required=True, help="Domain folder under memories/.")
@click.option("--anchor", default="", help="The memorable hook, 2-5 words.")
@click.option("--image", default="", help="The SMASHIN scene.")
@click.option("--content", default="", help="The facts.")
@click.option("--keywords", default="", help="Comma-separated keywords.")
@click.option("--links", default="", help="Comma-separated ids of related memories.")
@click.option("--verify", default=None, help="Verify token (default: proposed from the image).")
@click.option("--id", "note_id", default=None, help="Note id (default: from the subject).")
@click.option("--edit/--no-edit", default=True, help="Open $EDITOR on the new note (default on).")
@click.option("--json", "as_json", is_flag=True, help="Print the new memory as JSON.")
@pass_ctx
def add(ctx, subject, domain, anchor, image, content, keywords, links, verify, note_id, edit, as_json):
    """Add a memory from the SMASHIN template; opens $EDITOR unless --no-edit.

    Example: palace add "Saga" -d distributed-systems --anchor "relay race of apologies" --no-edit
    """
    palace = ctx.palace
    memory = add_memory(palace, subject, domain, anchor=anchor, image=image, content=content,
                        keywords=_split_list(keywords), links=_split_list(links), verify=verify, note_id=note_id)
    if edit:
        click.edit(filename=str(palace.root / memory.path))
        memory = load_note(palace.root, memory.path, memory.domain)
        if not memory.verify and memory.image:
            from ..notes import update_frontmatter
            from ..tokens import propose_token

            taken = {m.verify for m in palace.scan(force=True).memories.values() if m.verify and m.id != memory.id}
            token = propose_token(memory.image, memory.subject, memory.keywords, memory.content, taken)
            if token:
                update_frontmatter(palace.root / memory.path, {"verify": token}, memory.path)
                memory = load_note(palace.root, memory.path, memory.domain)
    palace.invalidate()
    from ..refresh import refresh

    refresh(palace)
    if as_json:
        render.emit_json(memory_summary(memory) | {"verify": memory.verify})
        return
    render.out.print(f"Added {memory.id} at {memory.location}")
    if memory.verify:
        render.out.print(f"verify token: {memory.verify}")
    for _code, message in token_problems(memory.verify, memory.image, memory.subject, memory.keywords, memory.content):
        render.warn(f"{memory.path}: {message}")


@click.command(name="list")
@click.option("--domain", "-d", default=None, help="Only this domain.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def list_(ctx, domain, as_json):
    """List memories, by domain.

    Example: palace list --domain storage-engines
    """
    palace = ctx.palace
    scan = palace.scan()
    memories = sorted(scan.memories.values(), key=lambda m: (m.domain, m.id))
    if domain:
        memories = [m for m in memories if m.domain == domain]
    if as_json:
        render.emit_json({"memories": [memory_summary(m) for m in memories], "problems": len(scan.problems)})
        return
    render.table(["id", "subject", "anchor", "where"],
                 [[m.id, m.subject, m.anchor, m.location] for m in memories])
    if scan.problems:
        render.warn(f"{len(scan.problems)} note problem(s) hidden from this list; run `palace lint`")


@click.command()
@click.argument("ref")
@click.option("--json", "as_json", is_flag=True, help="JSON output, including image and content.")
@pass_ctx
def show(ctx, ref, as_json):
    """Show a memory by id, path, or a unique fuzzy subject.

    Example: palace show two-phase-commit
    """
    memory = ctx.palace.get(ref)
    if as_json:
        render.emit_json(memory_summary(memory) | {"image": memory.image, "content": memory.content,
                                                   "verify": memory.verify, "created": memory.created})
        return
    render.out.print(f"[bold]{memory.subject}[/bold]  ({memory.id}, {memory.domain})", markup=True)
    render.out.print(memory.location)
    render.out.print(f"anchor: {memory.anchor}")
    if memory.keywords:
        render.out.print("keywords: " + ", ".join(memory.keywords))
    render.out.print("\n[bold]Image[/bold]", markup=True)
    render.out.print(memory.image)
    render.out.print("\n[bold]Content[/bold]", markup=True)
    render.out.print(memory.content)
    if memory.all_links:
        render.out.print("\nlinks: " + ", ".join(memory.all_links))


@click.command()
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def domains(ctx, as_json):
    """List domains with their memory counts and aliases.

    Example: palace domains --json
    """
    palace = ctx.palace
    grouped = palace.scan().by_domain()
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
@click.option("--fix", is_flag=True, help="Regenerate index files and propose missing verify tokens.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def lint(ctx, fix, as_json):
    """Check every note; exit 1 when problems are found.

    Example: palace lint --fix
    """
    report = run_lint(ctx.palace, fix=fix)
    if as_json:
        render.emit_json(report.as_dict())
    else:
        for line in report.fixed:
            render.out.print(f"fixed: {line}")
        render.problems(report.problems)
        summary = f"{report.errors} error(s), {report.warnings} warning(s)"
        render.out.print(summary if report.problems else "No problems found.")
    if report.errors:
        raise SystemExit(1)


COMMANDS = [init, add, list_, show, domains, lint]
