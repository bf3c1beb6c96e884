"""The `import` command: memory-palace JSON, Markdown folders, BEIR datasets, conversations."""

from __future__ import annotations

import click

from palace_cli.core.wording import plural
from palace_cli.conversations.model import INCLUDABLE
from palace_cli.cli import render
from palace_cli.importers import FORMATS, import_path
from palace_cli.importers.markdown import SPLITS
from palace_cli.cli import pass_ctx


def _run_with_progress(palace, path, **options):
    with render.progress_bar() as progress:
        return import_path(palace, path, progress=progress, **options)


@click.command(name="import")
@click.argument("path", type=click.Path(exists=True))
@click.option("--format", "format_", type=click.Choice(FORMATS), default=None,
              help="Source format (default: guessed from the names, and for conversations from a look inside).")
@click.option("--domain", "-d", default=None,
              help="Domain for every memory (markdown; memory lists without loci). Default: from folders or loci.")
@click.option("--split", type=click.Choice(SPLITS), default="auto", show_default=True,
              help="Markdown: a memory per file, per `##` section, or auto (sections when a file is only sections).")
@click.option("--queries", "queries_path", type=click.Path(dir_okay=False), default=None,
              help="Where to write benchmark queries (BEIR, Red Queen exams). Default: <palace>/queries.jsonl.")
@click.option("--cluster-with", type=click.Choice(["auto", "tfidf", "embedder"]), default="auto", show_default=True,
              help="BEIR: cluster documents into domains with the embedder (auto: when installed) or TF-IDF.")
@click.option("--clusters", type=click.IntRange(1, 1000), default=None,
              help="BEIR: number of domains (default: about sqrt(n/2), at most 64).")
@click.option("--include", "include", type=click.Choice(INCLUDABLE), multiple=True,
              help="Conversations: also import what is left out by default (repeatable).")
@click.option("--keep-secrets", is_flag=True,
              help="Keep what looks like a secret (API keys, tokens, private keys, passwords) and <private> spans "
                   "as they are; by default they are redacted before anything is written.")
@click.option("--dry-run", is_flag=True, help="Validate and report what would change; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def import_(ctx, path, format_, domain, split, queries_path, cluster_with, clusters, include, keep_secrets, dry_run,
            as_json):
    """Import memories (memory-palace JSON, Markdown, BEIR) or conversations (Claude Code, ChatGPT,
    Claude.ai, LoCoMo, chat text) into the palace; safe to rerun.

    Example: palace import ~/.claude/projects/-home-me-code-palace/
    """
    report = _run_with_progress(ctx.palace, path, format=format_, domain=domain, split=split, queries=queries_path,
                                cluster_with=cluster_with, clusters=clusters, dry_run=dry_run, include=include,
                                keep_secrets=keep_secrets)
    if not hasattr(report, "warnings"):
        _conversations(report, as_json)
        return
    for warning in report.warnings:
        render.warn(warning)
    if as_json:
        render.emit_json(report.as_dict())
    else:
        _print(report)
    if report.conflicts:
        raise SystemExit(1)


def _conversations(report, as_json: bool) -> None:
    """Problems on stderr; counts (or JSON) on stdout; exit 1 when a conflict or the size cap left a session
    alone."""
    for problem in report.problems:
        render.warn(str(problem))
    if as_json:
        render.emit_json(report.as_dict())
    else:
        c = report.counts()
        verb = "Would import" if report.dry_run else "Imported"
        sessions = f"{c['sessions']} session" + ("" if c["sessions"] == 1 else "s")
        render.out.print(f"{verb} {report.source} ({report.format}): {sessions}: {c['added']} added, "
                         f"{c['appended']} appended, {c['updated']} updated, {c['skipped']} skipped (unchanged), "
                         f"{c['conflict']} with conflicts"
                         + (f", {c['refused']} refused (too big)" if c["refused"] else "")
                         + f"; {c['turns_written']} turns written")
        if report.left_out:
            shown = ", ".join(f"{kind} {count}" for kind, count in report.left_out.items())
            render.out.print(f"left out (see --include): {shown}")
        _redacted(report.redacted)
        for conflict in report.conflicts:
            render.out.print(f"[red]conflict: {conflict}[/red]", markup=True)
    if report.refresh is not None and report.refresh.dense != "on" and report.refresh.dense_reason:
        render.note(report.refresh.dense_reason)
    if report.conflicts or report.counts()["refused"]:
        raise SystemExit(1)


def _print(report) -> None:
    verb = "Would import" if report.dry_run else "Imported"
    render.out.print(f"{verb} {report.source} ({report.format}): {len(report.added)} added, "
                     f"{len(report.updated)} updated, {len(report.skipped)} skipped (unchanged), "
                     f"{plural(len(report.conflicts), 'conflict')}")
    if report.domains:
        shown = ", ".join(f"{name} ({count})" for name, count in sorted(report.domains.items())[:12])
        more = f" and {len(report.domains) - 12} more" if len(report.domains) > 12 else ""
        render.out.print(f"domains: {shown}{more}")
    if report.new_domains:
        render.out.print(f"declared {plural(len(report.new_domains), 'new domain')} in palace.toml")
    if report.clustering:
        c = report.clustering
        sizes = sorted(cluster["size"] for cluster in c["clusters"])
        render.out.print(f"clustered with {c['method']} into {c['k']} domains (sizes {sizes[0]}-{sizes[-1]}, "
                         f"median {sizes[len(sizes) // 2]})")
    if report.queries_path:
        render.out.print(f"{report.queries} queries in {report.queries_path}")
    _redacted(report.redacted)
    for conflict in report.conflicts:
        render.out.print(f"[red]conflict: {conflict}[/red]", markup=True)
    refresh = report.refresh
    if refresh is not None and refresh.dense != "on":
        render.note(refresh.dense_reason)



def _redacted(count: int) -> None:
    if count:
        render.out.print(f"{plural(count, 'secret')} redacted before writing, private spans included "
                         "(--keep-secrets keeps them)")


COMMANDS = [import_]
