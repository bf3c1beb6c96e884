"""`palace distill`, `palace consolidate` and `palace hook`: memories from conversations, and capture as it happens."""

from __future__ import annotations

import json
import sys

import click

from palace_cli.cli import pass_ctx


@click.command(name="distill")
@click.option("--since", default=None, help="Only turns from this date or time on (e.g. 2023-05 or 2023-05-08).")
@click.option("--until", default=None, help="Only turns up to this date or time (inclusive).")
@click.option("--source", default=None, help="Only sessions of this source (claude-code, chatgpt, locomo, ...).")
@click.option("--session", default=None, help="Only this session (its id or its file path).")
@click.option("--llm/--no-llm", default=None,
              help="Ask the [models] endpoint about the turns the heuristics are unsure of (default: when one is set).")
@click.option("--dry-run", is_flag=True, help="Show what would be written; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def distill_command(ctx, since, until, source, session, llm, dry_run, as_json):
    """Form memories from imported turns: one fact each, about a named person, pointing at its turn.

    Example: palace distill --source locomo --dry-run
    """
    from palace_cli.cli import render
    from palace_cli.memory.distill import distill

    with render.progress_bar() as progress:
        report = distill(ctx.palace, since=since, until=until, source=source, session=session, dry_run=dry_run,
                         llm=llm, progress=progress)
    for error in report.llm.get("errors", []):
        render.warn(f"LLM stage stopped: {error}")
    for skipped in report.skipped:
        render.warn(skipped)
    if as_json:
        render.emit_json(report.as_dict())
        return
    verb = "Would write" if dry_run else "Wrote"
    rows = [[m.get("id") or "-", m["about"], m.get("kind") or m["type"], m["subject"], m["source"]]
            for m in report.written]
    if rows:
        render.table(["id", "about", "kind", "subject", "source"], rows)
    render.out.print(f"{verb} {len(report.written)} memories from {report.turns} turns of {report.sessions} "
                     f"sessions; {len(report.known)} already known (confirmed), {len(report.superseded)} "
                     f"superseding, {report.already} turns distilled before", markup=False)
    if report.llm.get("asked"):
        render.note(f"LLM stage: {report.llm['asked']} turns asked ({report.llm['cached']} from the cache), "
                    f"{report.llm['memories']} memories")


@click.command(name="consolidate")
@click.option("--as-of", default=None, help="Judge fading as of this date (default: today).")
@click.option("--domain", "-d", default=None, help="Only memories of this domain.")
@click.option("--promote", is_flag=True, help="Write `core: true` into the memories proposed for promotion.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def consolidate_command(ctx, as_of, domain, promote, as_json):
    """Propose merges of near-duplicates, promotions to core, and fading memories; never deletes.

    Example: palace consolidate --domain distilled
    """
    from palace_cli.cli import render
    from palace_cli.memory.consolidate import consolidate

    with render.progress_bar() as progress:
        result = consolidate(ctx.palace, as_of=as_of, domain=domain, promote=promote, progress=progress)
    if as_json:
        render.emit_json(result.as_dict())
        return
    if result.merges:
        render.table(["keep", "supersede", "score", "both mention", "command"],
                     [[m["keep"], m["supersede"], m["score"], ", ".join(m["shared"]), m["command"]]
                      for m in result.merges], title="near-duplicates: merge by superseding one")
    if result.promotions:
        render.table(["id", "sessions", "subject"], [[p["id"], p["sessions"], p["subject"]] for p in result.promotions],
                     title="told again and again: promote to core" + (" (done)" if promote else " (--promote)"))
    if result.fading:
        render.table(["id", "last seen", "days", "subject"],
                     [[f["id"], f["last_seen"], f["days"], f["subject"]] for f in result.fading],
                     title=f"fading as of {result.as_of}: still true?")
    render.out.print(f"{result.memories} memories: {len(result.merges)} merges, {len(result.promotions)} "
                     f"promotions{' written' if promote else ''}, {len(result.fading)} fading; nothing deleted",
                     markup=False)


@click.group(name="hook")
def hook():
    """Capture conversations as they happen: assistant hooks, and their installation.

    Example: palace hook install claude-code --project
    """


@hook.command(name="claude-code")
@click.option("--deadline", type=click.FloatRange(min=0, min_open=True), default=None,
              help="SessionStart: seconds to wait for the wake-up context before starting without it (default 15).")
@click.pass_context
def hook_claude_code(ctx, deadline):
    """Run one Claude Code hook: JSON on stdin; imports the session, or prints SessionStart's context.

    Never fails the session: any problem is one line on stderr and exit status 0.

    Example: echo '{"hook_event_name": "SessionStart", "cwd": "."}' | palace hook claude-code
    """
    from palace_cli.capture.claude_code import MAX_PAYLOAD, SESSION_START_SECONDS, HookError, handle, read_payload
    from palace_cli.cli.inert import inert

    palace_dir = ctx.find_root().obj.palace_dir if ctx.find_root().obj else None
    try:
        raw = sys.stdin.buffer.read(MAX_PAYLOAD + 1)
        if len(raw) > MAX_PAYLOAD:
            raise HookError(f"the hook input is over {MAX_PAYLOAD:,} bytes; not read")
        result = handle(read_payload(raw.decode("utf-8")), palace_dir, deadline or SESSION_START_SECONDS)
    except Exception as exc:  # a hook must never break the session it serves
        click.echo(f"palace hook: {inert(exc)}", err=True)
        sys.exit(0)
    if result.output is not None:  # plain json: a hook's start time is paid on every Claude Code session
        sys.stdout.write(json.dumps(result.output, ensure_ascii=False) + "\n")
    if result.summary:
        click.echo(f"palace hook: {inert(result.summary)}", err=True)


def _assistant_choice(function):
    return click.argument("assistant", type=click.Choice(["claude-code"]))(function)


@hook.command(name="install")
@_assistant_choice
@click.option("--project", "scope", flag_value="project", default=True,
              help="This project's .claude/settings.json (the default).")
@click.option("--user", "scope", flag_value="user", help="Your ~/.claude/settings.json.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@click.pass_context
def hook_install(ctx, assistant, scope, as_json):
    """Add palace's hooks to an assistant's settings, leaving its other hooks as they are.

    The hooks write to the palace this command runs on (--palace, or the one around the current directory);
    with none, to the palace around each session's own directory.

    Example: palace --palace ~/kb hook install claude-code --user
    """
    from palace_cli.capture.settings import hook_command, install, settings_path
    from palace_cli.cli import render
    from palace_cli.core.config import find_root
    from palace_cli.errors import NotAPalace

    palace_dir = ctx.find_root().obj.palace_dir if ctx.find_root().obj else None
    try:
        root = find_root(explicit=palace_dir)
    except NotAPalace:
        if palace_dir:
            raise
        root = None
    change = install(settings_path(scope), hook_command(root))
    if as_json:
        render.emit_json(change.as_dict())
        return
    render.out.print(f"{change.path}: hook `{change.command}` added for {', '.join(change.added) or 'no event'}"
                     + (f"; already there for {', '.join(change.kept)}" if change.kept else ""), markup=False)
    if root is None:
        render.note("no palace here: each session's hooks use the palace around the session's directory")


@hook.command(name="uninstall")
@_assistant_choice
@click.option("--project", "scope", flag_value="project", default=True, help="This project's .claude/settings.json.")
@click.option("--user", "scope", flag_value="user", help="Your ~/.claude/settings.json.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
def hook_uninstall(assistant, scope, as_json):
    """Remove palace's hooks from an assistant's settings, leaving every other hook as it is.

    Example: palace hook uninstall claude-code --user
    """
    from palace_cli.capture.settings import settings_path, uninstall
    from palace_cli.cli import render

    change = uninstall(settings_path(scope))
    if as_json:
        render.emit_json(change.as_dict())
        return
    render.out.print(f"{change.path}: removed from {', '.join(change.removed)}" if change.removed
                     else f"{change.path}: no palace hook to remove", markup=False)


COMMANDS = [distill_command, consolidate_command, hook]
