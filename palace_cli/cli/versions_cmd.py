"""Commands for facts that change: supersede, history."""

from __future__ import annotations

import click

from palace_cli.cli import pass_ctx, render


@click.command()
@click.argument("old")
@click.argument("new")
@click.option("--valid-from", default=None, metavar="DATE",
              help="When NEW took over (default: NEW's valid_from, else its created date, else today, UTC).")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def supersede(ctx, old, new, valid_from, as_json):
    """Record that memory NEW replaces memory OLD; both stay, only their frontmatter changes.

    OLD gains superseded_by and valid_until, NEW gains supersedes and valid_from. Recall then hands
    over NEW, and an answer citing OLD's token is stale. Example:
    palace supersede team-standup standup-v3 --valid-from 2026-03-02
    """
    from palace_cli.editing.versions import supersede as run_supersede

    link = run_supersede(ctx.palace, old, new, valid_from=valid_from)
    if as_json:
        render.emit_json(link.as_dict())
        return
    if not link.changed:
        render.out.print(f"{link.new} already supersedes {link.old}; nothing to write", markup=False)
        return
    render.out.print(f"{link.new} supersedes {link.old} from {link.valid_from}", markup=False)
    for path, fields in link.changed.items():
        render.out.print(f"  {path}: {', '.join(fields)}", markup=False)
    if link.kept_until:
        render.note(f"{link.old} keeps its own valid_until {link.kept_until}")


@click.command()
@click.argument("ref")
@click.option("--no-git", is_flag=True, help="Leave out the git log of each note.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def history(ctx, ref, no_git, as_json):
    """The chain of versions a memory belongs to, oldest first, with dates and each note's git log.

    Example: palace history team-standup --json
    """
    from palace_cli.editing.versions import history as run_history

    result = run_history(ctx.palace, ref, with_git=not no_git)
    if as_json:
        render.emit_json(result.as_dict())
        return
    say = render.out.print
    for version in result.versions:
        if version.status == "missing":
            say(f"{version.id}  (no note has this id)", markup=False)
            continue
        span = f"{version.valid_from or '…'} → {version.valid_until or 'now'}"
        say(f"[bold]{render.escape(version.id)}[/bold]  {render.escape(span)}  {version.status}", markup=True)
        say(f"    {version.subject}", markup=False)
        say(f"    {version.path}:{version.line}", markup=False)
        if version.supersedes:
            say(f"    supersedes {', '.join(version.supersedes)}", markup=False)
        if version.superseded_by:
            say(f"    superseded by {', '.join(version.superseded_by)}", markup=False)
        for commit in version.commits or []:
            say(f"    {commit['commit'][:10]} {commit['date'][:10]} {commit['author']}: {commit['subject']}", markup=False)
    if not result.git and not no_git:
        render.note("not a git repository: no file history")


COMMANDS = [supersede, history]
