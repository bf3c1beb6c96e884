"""Commands that check answers against the palace: verify, ask."""

from __future__ import annotations

import sys

import click
from rich.markup import escape

from palace_cli.cli import render
from palace_cli.errors import NotAPalace, UsageError
from palace_cli.search.profiles import PROFILES
from palace_cli.answers.verify import RULES, Verdict, parse_context
from palace_cli.cli import pass_ctx


def _read(source: str, what: str) -> str:
    if source == "-":
        return sys.stdin.read()
    try:
        with open(source, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise UsageError(f"cannot read {what} {source}: {exc.strerror}") from None


def _short(text: str, limit: int = 70) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _show_verdict(verdict: Verdict) -> None:
    say = render.out.print
    if verdict.grounded:
        say(f"[green]grounded[/green]: {escape(verdict.reason)}")
    else:
        say(f"[red]hallucination suspected[/red] ({verdict.status}): {escape(verdict.reason)}")
    for c in verdict.cited:
        said = f"[{c.kind} {c.id}]" if c.kind != "memory" else f"{c.id}  \"{c.token}\""
        say(escape(f"  cited      {said}" + ("" if c.exact else "  (variant spelling)")))
    if verdict.uncited:
        say(escape(f"  not cited  {', '.join(verdict.uncited)}"))
    for c in verdict.foreign:
        said = f"[{c.kind} {c.id}]" if c.kind != "memory" else f"{c.id}  \"{c.token}\""
        say("  [red]foreign[/red]    " + escape(f"{said} (not in the context)"))
    for s in verdict.stale:
        if s.get("status") == "future":
            why = f"not yet valid: from {s['valid_from']}"
        else:
            why = f"superseded by {', '.join(s['superseded_by'])}" if s["superseded_by"] else "expired"
            why += f", valid until {s['valid_until']}" if s["valid_until"] else ""
        say("  [red]stale[/red]      " + escape(f"{s['id']}  ({why})"))
    for p in verdict.partial:
        say(escape(f"  partial    {p['id']}: {p['words_matched']} of {p['of']} words of its token"))
    for quote in verdict.quotes:
        mark = "quoted   " if quote["found"] else "[red]misquoted[/red]"
        say(f"  {mark}  " + escape(f"{quote['id']}  \u201c{_short(quote['quote'])}\u201d"
                                    + ("" if quote["found"] else " is not in it word for word")))
    for text in verdict.unknown_citations:
        if text.split(" ", 1)[0] in ("turn", "note", "section"):
            say(escape(f"  unknown    [{text}] names no unit of this palace"))
        else:
            say(escape(f"  unknown    [verify: {text}] matches no memory's token"))
    if verdict.untokened:
        say(escape(f"  no token   {', '.join(verdict.untokened)} (cannot be checked)"))
    if not verdict.foreign_checked:
        say("  (tokens of memories outside the context were not checked)")


@click.command()
@click.option("--response", "response_file", required=True, metavar="FILE|-", help="The answer to check ('-' for stdin).")
@click.option("--memory", "-m", "memory_refs", multiple=True, metavar="ID",
              help="A memory, or a conversation turn (session/turn), that was handed to the model (repeat for several).")
@click.option("--context", "context_file", metavar="FILE",
              help="The context that was handed over: the JSON of `palace recall --format json`.")
@click.option("--rule", type=click.Choice(RULES), default="any", show_default=True,
              help="Grounded when at least one (any) or every (all) handed memory is cited.")
@click.option("--as-of", default=None, metavar="DATE",
              help="The moment the answer is about (default: now); a citation of a memory not valid then is stale.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def verify(ctx, response_file, memory_refs, context_file, rule, as_of, as_json):
    """Check that an answer cites the verify tokens of the memories (and the [turn ID]s of the turns) it was given,
    and no others, and that every quote is word for word in what it cites.

    A cited memory that another has superseded is stale. Exit 0 when grounded, 1 when a hallucination
    is suspected, a quote is not in its source or a citation is stale. Example:
    palace recall "why jitter?" --format json > ctx.json; palace verify --response answer.txt --context ctx.json
    """
    if bool(memory_refs) == bool(context_file):
        raise UsageError("give the handed-over memories with --memory ID ... or --context FILE (one of them)")
    from palace_cli.answers.ask import handed_memories, verify_answer

    response = _read(response_file, "response")
    if memory_refs:
        palace = ctx.palace
        handed = handed_memories(palace, list(memory_refs))
    else:
        handed = parse_context(_read(context_file, "context"), source=context_file)
        try:
            palace = ctx.palace
        except NotAPalace:
            palace = None
            render.warn("not inside a palace: tokens of memories outside the context are not checked")
    if as_of and palace is None:
        render.warn("not inside a palace: --as-of cannot be checked")
    verdict = verify_answer(response, handed, palace, rule=rule, as_of=as_of)
    if as_json:
        render.emit_json(verdict.as_dict())
    else:
        _show_verdict(verdict)
    ctx_click = click.get_current_context()
    ctx_click.exit(verdict.exit_code)


@click.command()
@click.argument("question")
@click.option("-k", type=int, default=None, help="Memories to retrieve (default: the profile's, 3 for reference).")
@click.option("--profile", "-p", type=click.Choice(list(PROFILES)), default="reference", show_default=True,
              help="How much to retrieve and hand over; see docs/retrieval.md.")
@click.option("--threshold", type=float, default=None,
              help="Abstain below this retrieval confidence (default: palace.toml [retrieval] abstain_below).")
@click.option("--generate", type=click.Choice(["auto", "always", "never"]), default=None,
              help="Ask the generator: auto (only one big enough to cite), always, never (extractive only). "
                   "Default: palace.toml [models] use_generator, else auto.")
@click.option("--max-tokens", type=int, default=None, help="Longest generated answer, in model tokens (default 160).")
@click.option("--rule", type=click.Choice(RULES), default="any", show_default=True,
              help="Grounded when at least one (any) or every (all) handed memory is cited.")
@click.option("--no-cache", is_flag=True, help="Ask the model again instead of reusing a cached answer.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def ask(ctx, question, k, profile, threshold, generate, max_tokens, rule, no_cache, as_json):
    """Answer a question from the palace (notes and conversations) with quoted, cited evidence; abstain when the
    evidence does not hold the question's names and numbers or does not stand out.

    The answer is the generator's when it cites what it was given, else sentences quoted word for word,
    each followed by its memory's verify token or its turn's [turn ID]. Exit 0 for an answer, 1 when it
    abstains or the answer fails verification. Example: palace ask "why do retries need jitter?"
    """
    from palace_cli.answers.ask import MAX_TOKENS, ask as run_ask

    answer = run_ask(ctx.palace, question, k=k, profile=profile, threshold=threshold, rule=rule, generate=generate,
                     max_tokens=max_tokens or MAX_TOKENS, use_cache=not no_cache)
    if as_json:
        render.emit_json(answer.as_dict())
    elif answer.status == "abstained":
        render.out.print("[bold]not in this palace[/bold]", markup=True)
        render.out.print(answer.reason, markup=False)
        if answer.needs:
            render.out.print(f"it would need a memory about: {', '.join(answer.needs)}", markup=False)
        render.out.print(f"to add one: {answer.suggestion}", markup=False)
    else:
        if answer.mode == "extractive":
            render.out.print("[bold]extractive answer[/bold] (sentences quoted word for word)", markup=True)
        render.out.print(answer.text, markup=False)
        render.out.print()
        _show_verdict(answer.verdict)
        used = [f"{m['id']}" + (" (cited)" if m["cited"] else "") for m in answer.memories + answer.turns]
        render.out.print(f"handed: {', '.join(used) or 'none'}", markup=False)
        if answer.sentences:
            render.out.print("from: " + ", ".join(dict.fromkeys(f"{s['path']}:{s['line']}" for s in answer.sentences)),
                             markup=False)
        if answer.note:  # why the model's answer is not the one shown (--json has it)
            render.out.print(answer.note, markup=False, style="dim")
        made = f"{answer.model}{' (cached)' if answer.cached else ''}" if answer.mode == "generated" else "extractive"
        render.out.print(f"{answer.evidence.describe()}; {made}; {answer.elapsed_ms:.0f} ms", markup=False)
    click.get_current_context().exit(answer.exit_code)


@click.command(name="verify")
@click.option("--queries", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Query file (default: queries.jsonl at the palace root).")
@click.option("--max-tokens", type=int, default=80, show_default=True, help="Longest generated answer.")
@click.option("--limit", type=int, default=None, help="Only the first N memories (a quick run).")
@click.option("--no-generate", is_flag=True, help="Skip the generator: adversarial answers only.")
@click.option("--no-cache", is_flag=True, help="Generate every answer again instead of reusing cached ones.")
@click.option("--json", "as_json", is_flag=True, help="JSON output (with a few example answers).")
@pass_ctx
def bench_verify(ctx, queries, max_tokens, limit, no_generate, no_cache, as_json):
    """Measure verify on labelled answers (grounded, no context, wrong context, adversarial).

    Example: palace --palace example-palace bench verify
    """
    from palace_cli.backends import generator_from_config
    from palace_cli.bench.verify import markdown_report, run_verify_bench

    palace = ctx.palace
    generator = None if no_generate else generator_from_config(palace.config.models, palace.root)
    if generator is None and not no_generate:
        render.warn("no generator installed (`palace models install`): adversarial answers only")
    with render.err.status("building the labelled set") as status:
        summary = run_verify_bench(palace, generator, queries, max_tokens=max_tokens, use_cache=not no_cache,
                                   limit=limit, progress=lambda stage, i, n: status.update(f"{stage} {i}/{n}"))
    if as_json:
        render.emit_json(summary)
    else:
        render.plain(markdown_report(summary), end="")


COMMANDS = [verify, ask]
