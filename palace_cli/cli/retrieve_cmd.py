"""Commands that answer questions from the palace: search, recall, wake-up."""

from __future__ import annotations

import click

from . import render
from ..profiles import PROFILES
from ..retrieve import MODES, recall as run_recall, search as run_search
from . import pass_ctx


def _dense_notice(result) -> None:
    if result.dense != "on" and result.dense_reason:
        render.note(result.dense_reason)


def _print_hits(hits) -> None:
    """Two lines a hit: rank, subject, id, domain and score; then path:line (clickable in terminals)."""
    from rich.markup import escape

    if not hits:
        render.out.print("(no memory matches)")
    for rank, hit in enumerate(hits, 1):
        render.out.print(f"{rank:>2}. [bold]{escape(hit.subject)}[/bold]  {hit.id} · {hit.domain} · {hit.score:.3f}",
                         markup=True)
        render.out.print(f"    {hit.path}:{hit.line}", markup=False)


@click.command()
@click.argument("query")
@click.option("--mode", type=click.Choice(MODES), default="hybrid", show_default=True,
              help="Ranking: BM25F, embeddings, or both fused (hybrid falls back to lexical without a model).")
@click.option("-k", default=10, show_default=True, help="Number of hits.")
@click.option("--domain", "-d", default=None, help="Only this domain.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def search(ctx, query, mode, k, domain, as_json):
    """Flat search over every memory.

    Example: palace search "coordinator crashed while participants held locks" --mode lexical
    """
    result = run_search(ctx.palace, query, mode=mode, k=k, domain=domain)
    if as_json:
        render.emit_json(result.as_dict())
    else:
        render.out.print(f"{result.mode} search", markup=False)
        _print_hits(result.hits)
    _dense_notice(result)


@click.command()
@click.argument("query")
@click.option("-k", type=int, default=None, help="Memories to hand over (default: the profile's).")
@click.option("--domain", "-d", default=None, help="Skip routing: rank inside this domain.")
@click.option("--budget", type=int, default=None, help="Context budget in bytes (default: the profile's).")
@click.option("--profile", "-p", type=click.Choice(list(PROFILES)), default="reference", show_default=True,
              help="How much to retrieve and hand over; see docs/retrieval.md.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "prompt"]), default="table", show_default=True,
              help="table for people, json for programs, prompt for an LLM's context.")
@pass_ctx
def recall(ctx, query, k, domain, budget, profile, fmt):
    """Two-hop retrieval: route to a domain, rank its memories, hand over the smallest context.

    Example: palace recall "why do retries need jitter?" --format prompt
    """
    result = run_recall(ctx.palace, query, k=k, domain=domain, budget=budget, profile=profile)
    if fmt == "json":
        render.emit_json(result.as_dict())
    elif fmt == "prompt":
        click.echo(result.context or "(no memory in this palace matches the question)")
    else:
        route = ", ".join(f"{r.domain} ({r.confidence:.2f})" for r in result.route) or "(none)"
        render.out.print(f"route: {route}; hops: {result.hops}; {result.reason}")
        _print_hits(result.hits)
        render.out.print(f"context: {result.context_bytes} bytes ({result.profile} profile); "
                         f"confidence {result.confidence:.2f}; {result.elapsed_ms:.0f} ms")
    _dense_notice(result)


@click.command(name="wake-up")
@click.option("--budget", type=int, default=2000, show_default=True, help="Budget in tokens (about 4 bytes each).")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def wake_up(ctx, budget, as_json):
    """Identity plus the most important memories, within a token budget: a session's opening context.

    Example: palace wake-up --budget 800
    """
    from ..wakeup import wake_up as run_wake_up

    result = run_wake_up(ctx.palace, budget_tokens=budget)
    if as_json:
        render.emit_json(result.as_dict())
    else:
        click.echo(result.text)


COMMANDS = [search, recall, wake_up]
