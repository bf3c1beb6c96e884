"""Commands that answer questions from the palace: search, recall, wake-up."""

from __future__ import annotations

import click

from palace_cli.search.profiles import BYTES_PER_TOKEN, PROFILES, tokens_of
from palace_cli.search.query import MODE_ALIASES, MODES
from palace_cli.search.retrieve import recall as run_recall, search as run_search
from palace_cli.core.wording import plural
from palace_cli.cli import pass_ctx, render
from palace_cli.cli.index_cmd import report_problems_once


class Budget(click.ParamType):
    """A budget in tokens (`1000`), or in bytes with a B suffix (`4000B`, the unit of older versions);
    the value passed on is bytes."""

    name = "TOKENS"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        text = str(value).strip().lower().replace(" ", "")
        try:
            if text.endswith(("bytes", "b")):
                number = int(text.removesuffix("bytes").removesuffix("b"))
            else:
                number = int(text.removesuffix("tokens").removesuffix("t")) * BYTES_PER_TOKEN
        except ValueError:
            self.fail(f"{value!r} is not a number of tokens (e.g. 1000) or bytes (e.g. 4000B)", param, ctx)
        if number < 0:
            self.fail("a budget cannot be negative", param, ctx)
        return number


class Mode(click.Choice):
    """A ranking mode; an older name (`hybrid`) is read as today's (`fused`), so scripts keep working."""

    def __init__(self):
        super().__init__(MODES)

    def convert(self, value, param, ctx):
        return super().convert(MODE_ALIASES.get(value, value), param, ctx)


def _notices(palace, result) -> None:
    """Stderr lines on what the ranking lacked: meaning (no vectors) and notes that could not be read, which are
    not searched (DESIGN: reported on every refresh, never silently dropped)."""
    if result.dense != "on" and result.dense_reason:
        render.note(result.dense_reason)
    report_problems_once(palace.index.problems)


def _print_hits(hits, as_of: str = "") -> None:
    """Two lines a hit: rank, subject, id, domain and how relevant it is (words and meaning, docs/retrieval.md);
    then path:line (clickable in terminals), and what the memory replaced or was replaced by."""
    from rich.markup import escape

    from palace_cli.search.relevance import describe

    for rank, hit in enumerate(hits, 1):
        where = f"{hit.time.replace('T', ' ') or 'no date'}" if hit.kind == "turn" else hit.domain
        render.out.print(f"{rank:>2}. [bold]{escape(hit.subject)}[/bold]  {escape(hit.id)} · {escape(where)} · "
                         f"{describe(hit)}", markup=True)
        render.out.print(f"    {hit.path}:{hit.line}", markup=False)
        if hit.superseded_by:
            state = "" if hit.valid else f"not valid {'on ' + as_of if as_of else 'now'}; "
            render.out.print(f"    ({state}superseded by {', '.join(hit.superseded_by)})", markup=False)
        if hit.replaces:
            render.out.print(f"    (replaces {', '.join(hit.replaces)})", markup=False)


def time_options(command):
    """--as-of and --include-superseded, shared by search and recall."""
    command = click.option("--include-superseded", is_flag=True,
                           help="Rank every memory, superseded and expired ones too (marked).")(command)
    return click.option("--as-of", default=None, metavar="DATE",
                        help="Memories valid at DATE (YYYY-MM-DD, UTC) instead of now.")(command)


def filters(command):
    """The options that choose which units may answer: --kind, --since, --until."""
    command = click.option("--until", default=None, metavar="DATE",
                           help="Only units from this date or time on or before (2023-05-08, 2023-05, 2023-05-08T13:56).")(command)
    command = click.option("--since", default=None, metavar="DATE",
                           help="Only units from this date or time or after; a unit with no date is left out.")(command)
    return click.option("--kind", type=click.Choice(["memory", "turn"]), default=None,
                        help="Only memories, or only conversation turns (default: both).")(command)


@click.command()
@click.argument("query")
@click.option("--mode", type=Mode(), default="fused", show_default=True,
              help="Ranking: BM25F and embeddings fused (lexical without a model), BM25F alone, or embeddings "
                   "alone. `hybrid`, the old name of fused, still works.")
@click.option("-k", default=10, show_default=True, help="Number of hits.")
@click.option("--domain", "-d", default=None, help="Only this domain's memories.")
@time_options
@filters
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def search(ctx, query, mode, k, domain, as_of, include_superseded, kind, since, until, as_json):
    """Flat search over every memory valid now and every conversation turn.

    Example: palace search "coordinator crashed while participants held locks" --mode lexical
    """
    result = run_search(ctx.palace, query, mode=mode, k=k, domain=domain, as_of=as_of,
                        include_superseded=include_superseded, kind=kind, since=since, until=until)
    if as_json:  # with how much meaning the ranking had: vectors are embedded in the background
        render.emit_json({**result.as_dict(), "vectors": ctx.palace.vector_counts().as_dict()})
    elif not result.hits:
        render.out.print(f"no results: {result.why}", markup=False)
    else:
        render.out.print(f"{result.mode} search" + (f" as of {result.as_of}" if result.as_of else ""), markup=False)
        _print_hits(result.hits, result.as_of)
    _notices(ctx.palace, result)
    if not result.hits:
        click.get_current_context().exit(1)


@click.command()
@click.argument("query")
@click.option("-k", type=click.IntRange(min=1), default=None, help="Memories to hand over, at most (default: the profile's).")
@click.option("--turns", type=click.IntRange(min=0), default=None,
              help="Conversation turns to hand over, at most (default: the profile's, 10).")
@click.option("--domain", "-d", default=None, help="Skip routing: rank inside this domain.")
@click.option("--budget", type=Budget(), default=None,
              help="Context budget in tokens, about 4 bytes each (default: the profile's); `4000B` is bytes.")
@click.option("--profile", "-p", type=click.Choice(list(PROFILES)), default="reference", show_default=True,
              help="How much to retrieve and hand over; see docs/retrieval.md.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "prompt"]), default="table", show_default=True,
              help="table for people, json for programs, prompt for an LLM's context.")
@time_options
@filters
@click.option("--json", "as_json", is_flag=True, help="JSON output (the same as --format json).")
@pass_ctx
def recall(ctx, query, k, turns, domain, budget, profile, fmt, as_of, include_superseded, kind, since, until,
           as_json):
    """Rank every memory and conversation turn (BM25 and embeddings fused), hand over the smallest context that
    is relevant (at most -k memories and --turns turns), and name the domains it came from.

    Only memories valid now are handed over (--as-of DATE: valid then). Example:
    palace recall "why do retries need jitter?" --format prompt
    """
    result = run_recall(ctx.palace, query, k=k, turns=turns, domain=domain, budget=budget, profile=profile,
                        as_of=as_of, include_superseded=include_superseded, kind=kind, since=since, until=until)
    if fmt == "json" or as_json:
        render.emit_json({**result.as_dict(), "vectors": ctx.palace.vector_counts().as_dict()})
    elif fmt == "prompt":
        render.plain(result.context or f"(nothing in this palace is relevant: {result.why or 'nothing fits the budget'})")
    elif not result.relevant:
        render.out.print(f"nothing relevant: {result.why}", markup=False)
    else:
        route = ", ".join(f"{r.domain} ({r.confidence:.2f})" for r in result.route) or "(none)"
        when = f"; as of {result.as_of}" if result.as_of else ""
        render.out.print(f"route: {route}; mode: {result.mode}; {result.reason}{when}")
        _print_hits(result.hits, result.as_of)
        left = len(result.omitted)
        omitted = f"{plural(left, 'ranked unit')} left out (--json says why); " if left else ""
        render.out.print(f"context: {plural(tokens_of(result.context), 'token')} ({result.profile} profile); "
                         f"{omitted}confidence {result.confidence:.2f}; {result.elapsed_ms:.0f} ms")
    _notices(ctx.palace, result)


@click.command(name="wake-up")
@click.option("--budget", type=Budget(), default=None,
              help="Budget in tokens, about 4 bytes each (default 2000); `8000B` is bytes.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def wake_up(ctx, budget, as_json):
    """Identity plus the most important memories, within a token budget: a session's opening context.

    Example: palace wake-up --budget 800
    """
    from palace_cli.search.wakeup import DEFAULT_BUDGET, wake_up as run_wake_up

    result = run_wake_up(ctx.palace, budget_tokens=DEFAULT_BUDGET if budget is None else budget // BYTES_PER_TOKEN)
    if as_json:
        render.emit_json(result.as_dict())
    else:
        render.plain(result.text)


@click.command()
@click.argument("ref", required=False)
@click.option("--text", default=None, help="Compare this text instead of a memory (a note you are about to add).")
@click.option("-k", default=5, show_default=True, help="Number of neighbours.")
@click.option("--method", type=click.Choice(["lexical", "dense"]), default="lexical", show_default=True,
              help="Score by shared words (tf-idf cosine) or by embeddings; see docs/benchmarks.md for which warns better.")
@click.option("--include-superseded", is_flag=True, help="Compare with superseded memories too.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def similar(ctx, ref, text, k, method, include_superseded, as_json):
    """The memories nearest to a memory (REF) or to a text, with a score and the words they share.

    Those at or above the warning threshold are marked close: candidates for `palace supersede` or a
    link; nothing is ever merged. Example: palace similar write-through-cache
    """
    from palace_cli.search.similar import similar as run_similar

    result = run_similar(ctx.palace, ref=ref, text=text, k=k, include_superseded=include_superseded, method=method)
    if as_json:
        render.emit_json(result.as_dict())
        return
    render.out.print(f"{result.method} similarity; close at {result.threshold:g} or more", markup=False)
    if not result.neighbours:
        render.out.print("(no other memory)", markup=False)
    for rank, neighbour in enumerate(result.neighbours, 1):
        mark = "close" if neighbour.close else "     "
        extra = " (superseded)" if neighbour.superseded else ""
        render.out.print(f"{rank:>2}. {mark} {neighbour.id}: {neighbour.subject}{extra}", markup=False)
        render.out.print(f"    {neighbour.why}", markup=False)
        render.out.print(f"    {neighbour.path}:{neighbour.line}", markup=False)


COMMANDS = [search, recall, wake_up, similar]
