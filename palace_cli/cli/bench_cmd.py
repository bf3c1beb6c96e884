"""`palace bench`: measurements on a palace; each benchmark is a subcommand."""

from __future__ import annotations

import click

from palace_cli.cli.verify_cmd import bench_verify


@click.group()
def bench():
    """Benchmarks with confidence intervals, on the palace's own questions.

    Example: palace --palace example-palace bench verify
    """


@click.command(name="index")
@click.option("--sizes", default="1000,10000,100000", show_default=True, help="Comma-separated palace sizes (notes).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the synthetic notes.")
@click.option("--embed-max", type=int, default=10_000, show_default=True,
              help="Embed (with the installed embedder) only palaces up to this size.")
@click.option("--workdir", type=click.Path(file_okay=False), default=None, help="Where to generate (default: a temp dir).")
@click.option("--keep", is_flag=True, help="Keep the generated palaces.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
def bench_index(sizes, seed, embed_max, workdir, keep, as_json):
    """Time full builds, no-op and one-edit refreshes, index size and peak memory on synthetic palaces.

    Example: palace bench index --sizes 1000,10000 --json
    """
    from palace_cli.cli import render
    from palace_cli.bench.index_bench import run

    try:
        wanted = [int(part) for part in sizes.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter("sizes are whole numbers, e.g. 1000,10000", param_hint="--sizes") from None
    results = run(wanted, seed=seed, embed_max=embed_max, workdir=workdir, keep=keep, progress=render.progress_lines())
    if as_json:
        render.emit_json(results)
        return
    rows = []
    for r in results["sizes"]:
        rows.append([f"{r['notes']:,}", r["full_build_s"], r["lexical_notes_per_s"], r.get("embed_notes_per_s", "-"),
                     f"{r['noop_refresh_s'] * 1000:.0f}", f"{r['one_edit_refresh_s'] * 1000:.0f}", r["cli_noop_s"],
                     sum(r["disk_mb"].values()), r["peak_rss_mb"]])
    render.table(["notes", "build s", "lexical notes/s", "embed notes/s", "no-op ms", "one edit ms", "CLI no-op s",
                  "disk MB", "peak MB"], rows)
    machine = results["machine"]
    render.note(f"{machine['cpus']} CPUs, load {machine['load_avg_1m']}, calibration loop {machine['calibration_s']} s")


@click.command(name="embed")
@click.option("--model", type=click.Path(dir_okay=False, exists=True), default=None,
              help="A GGUF embedding model (default: the installed default embedder).")
@click.option("--short", "n_short", type=int, default=None,
              help="Short texts (chat turns)  [default: 400, or every turn with --locomo]")
@click.option("--notes", "n_notes", type=int, default=64, show_default=True, help="Synthetic 1.7 KB notes.")
@click.option("--queries", "n_queries", type=int, default=100, show_default=True,
              help="Questions embedded one per call, as a search does.")
@click.option("--locomo", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Take the short texts and questions from a LoCoMo JSON file instead of generating them.")
@click.option("--max-tokens", type=int, default=None,
              help="Where the new configurations cut a text (default: the model's own limit, 256 for the default).")
@click.option("--rounds", type=int, default=3, show_default=True, help="Rounds; the median round is reported.")
@click.option("--configs", default=None, help="Comma-separated configurations; the first is the baseline (default: all, old first).")
@click.option("--vault", "vault_notes", type=int, default=None,
              help="Instead: embed the units (notes and sections) of a synthetic vault of this many notes with each "
                   "of --embedders.")
@click.option("--embedders", default="default,default:128,default:64,static", show_default=True,
              help="With --vault: comma-separated palace.toml embedder settings to compare.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
def bench_embed(model, n_short, n_notes, n_queries, locomo, max_tokens, rounds, configs, vault_notes, embedders,
                as_json):
    """Texts/s of the embedder on short texts, 1.7 KB notes and queries: the old path against each change since;
    with --vault, units/s, CPU ms a unit, tokens a unit and the share of full-model vectors of each embedder.

    Example: palace bench embed --vault 250 --embedders default,default:128,static --json
    """
    from pathlib import Path

    from palace_cli.cli import render
    from palace_cli.bench.embed_bench import CONFIGS, note_texts, query_texts, run, short_texts
    from palace_cli.errors import ModelError
    from palace_cli.backends.install import default_model_path

    if vault_notes is not None:
        _bench_embed_vault(vault_notes, [e.strip() for e in embedders.split(",") if e.strip()], rounds, as_json)
        return

    path = Path(model) if model else default_model_path("embedder")
    if path is None:
        raise ModelError("no embedding model installed; run `palace models install` or pass --model")
    names = [c.strip() for c in configs.split(",") if c.strip()] if configs else None
    unknown = sorted(set(names or []) - set(CONFIGS))
    if unknown:
        raise click.BadParameter(f"unknown {', '.join(unknown)}; choose from {', '.join(CONFIGS)}",
                                 param_hint="--configs")
    source = Path(locomo) if locomo else None
    if n_short == 0:
        shorts = []
    else:
        shorts = short_texts(n_short, locomo=source) if source else short_texts(n_short or 400)
    queries = query_texts(n_queries, locomo=source) if n_queries else []
    results = run(path, shorts, note_texts(n_notes), queries, rounds=rounds, configs=names, max_tokens=max_tokens,
                  progress=render.progress_lines())
    if as_json:
        render.emit_json(results)
        return
    for set_name, rows in results["results"].items():
        info = results["sets"][set_name]
        render.table(["configuration", "texts/s", "best texts/s", "CPU ms/text", "x old", "cut", "min cos to old",
                      "p50 ms"],
                     [[name, r["texts_per_s"], r["best_texts_per_s"], r["cpu_ms_per_text"], r["speedup"],
                       r["texts_cut"], r["min_cosine_to_old"] if r["min_cosine_to_old"] is not None else "-",
                       r.get("p50_ms", "-")]
                      for name, r in rows.items()],
                     title=f"{set_name}: {info['texts']} texts, {info['mean_chars']} chars and "
                           f"{info['mean_tokens']} tokens on average")
    machine = results["machine"]
    render.note(f"{machine['cpus']} CPUs, load {machine['load_avg_1m']} before and {machine['load_avg_1m_after']} "
                f"after, calibration loop {machine['calibration_s']} s")


def _bench_embed_vault(notes: int, settings: list[str], rounds: int, as_json: bool) -> None:
    from palace_cli.cli import render
    from palace_cli.bench.embed_bench import run_units, vault_texts

    texts = vault_texts(notes)
    results = run_units(settings, texts, rounds=rounds, progress=render.progress_lines())
    if as_json:
        render.emit_json(results)
        return
    render.table(["embedder", "units/s", "best units/s", "CPU ms/unit", "model tokens/unit", "full-model share"],
                 [[name, r["units_per_s"], r["best_units_per_s"], r["cpu_ms_per_unit"], r["model_tokens_per_unit"],
                   r["full_model_share"]] for name, r in results["results"].items()],
                 title=f"{results['units']:,} units of {notes:,} synthetic vault notes, {results['mean_chars']} chars on average")
    machine = results["machine"]
    render.note(f"{machine['cpus']} CPUs, load {machine['load_avg_1m']} before and {machine['load_avg_1m_after']} "
                f"after, calibration loop {machine['calibration_s']} s")


@click.command(name="retrieval")
@click.option("--queries", "queries_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="JSON-lines queries (default: queries.jsonl at the palace root); a `kind` per query gives "
                   "a per-kind breakdown.")
@click.option("--corpus", "corpus_dir", type=click.Path(exists=True), default=None,
              help="Benchmark this corpus instead of the current palace: a palace directory, or anything "
                   "`palace import` reads (imported once into a cached palace).")
@click.option("--beir", "beir_dir", type=click.Path(file_okay=False, exists=True), default=None,
              help="A BEIR directory: imported once into a cached palace, then benchmarked on its test queries.")
@click.option("--locomo", "locomo_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="A LoCoMo file whose conversations this palace holds (`palace import FILE` first): evidence "
                   "recall of turns per question category.")
@click.option("--scope", "scopes", type=click.Choice(["both", "palace", "conversation"]), default="both",
              show_default=True, help="With --locomo: search the whole palace, each question's own conversation, or both.")
@click.option("--modes", default="recall,lexical,dense,fused", show_default=True,
              help="Comma-separated rows: recall (`palace recall`), and the flat rankings lexical, dense, fused "
                   "(2hop and hybrid, their old names, still work). The flat baselines follow them (not with --locomo): whole-notes, "
                   "sections-bm25, sections-dense, sections-fused.")
@click.option("--profile", default="reference", show_default=True, help="Profile whose k and budget set the context.")
@click.option("--limit", type=int, default=None, help="Only the first N queries (a smoke run).")
@click.option("--include-superseded", is_flag=True,
              help="Rank every version of a changed fact (what the validity filter prevents).")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@click.pass_obj
def bench_retrieval(obj, queries_file, corpus_dir, beir_dir, locomo_file, scopes, modes, profile, limit, include_superseded, as_json):
    """`palace recall` against flat lexical, dense and fused rankings: recall@k, MRR, nDCG@10, context bytes,
    latency, 95% CIs; current@1 and stale handed on questions about facts that changed; evidence recall of turns
    with --locomo.

    Example: palace bench retrieval --corpus ../shared/data/memory-palace-skill --queries skill.queries.jsonl --json
    """
    from pathlib import Path

    from palace_cli.cli import render
    from palace_cli.bench.retrieval import load_queries, markdown_table, run_retrieval_bench
    from palace_cli.cli.index_cmd import refresh_with_progress

    rows = [m.strip() for m in modes.split(",") if m.strip()]
    if locomo_file:
        _bench_locomo(obj.palace, locomo_file, rows, scopes, limit, as_json)
        return
    palace, default_queries, dataset = _bench_corpus(obj, beir_dir, corpus_dir)
    path = Path(queries_file) if queries_file else default_queries
    if not path.is_file():
        raise click.UsageError(f"no query file at {path}; pass --queries FILE")
    queries = load_queries(path)[:limit] if limit else load_queries(path)
    refresh_with_progress(palace)
    summary = run_retrieval_bench(palace, queries, modes=rows, profile=profile, dataset=dataset,
                                  include_superseded=include_superseded)
    summary["command"] = ("palace bench retrieval" + (f" --beir {beir_dir}" if beir_dir else "")
                          + (f" --corpus {corpus_dir}" if corpus_dir else "")
                          + (f" --queries {queries_file}" if queries_file else "")
                          + (" --include-superseded" if include_superseded else ""))
    if as_json:
        render.emit_json(summary)
    else:
        render.plain(markdown_table(summary))


def _bench_locomo(palace, locomo_file: str, rows: list[str], scopes: str, limit, as_json: bool) -> None:
    """`bench retrieval --locomo`: evidence recall of turns on a LoCoMo file this palace holds."""
    from pathlib import Path

    from palace_cli.bench.locomo import markdown, run_locomo_bench
    from palace_cli.cli import render
    from palace_cli.cli.index_cmd import refresh_with_progress

    refresh_with_progress(palace)
    summary = run_locomo_bench(palace, Path(locomo_file), modes=rows,
                               scopes=("palace", "conversation") if scopes == "both" else (scopes,), limit=limit,
                               progress=render.progress_lines())
    summary["command"] = f"palace bench retrieval --locomo {locomo_file}"
    if as_json:
        render.emit_json(summary)
    else:
        render.plain(markdown(summary))


def _bench_corpus(obj, beir_dir, corpus_dir):
    """The palace `bench retrieval` measures, its default query file and the dataset's name: a BEIR directory or
    another corpus imported once into a cached palace, else the current palace."""
    from pathlib import Path

    from palace_cli.bench.retrieval import beir_palace, corpus_palace

    if beir_dir and corpus_dir:
        raise click.UsageError("--beir and --corpus both name the corpus: give one")
    if beir_dir:
        palace, default_queries = beir_palace(Path(beir_dir), progress=lambda stage, done, total: None)
        return palace, default_queries, Path(beir_dir).name
    if corpus_dir:
        palace, default_queries = corpus_palace(Path(corpus_dir), progress=lambda stage, done, total: None)
        return palace, default_queries, Path(corpus_dir).resolve().name
    return obj.palace, obj.palace.root / "queries.jsonl", obj.palace.config.name


@click.command(name="ask")
@click.option("--set", "sets", nargs=3, multiple=True, metavar="PALACE QUERIES ANSWERS",
              help="A palace, its questions (JSON lines; FILE#corpus keeps the lines of one `corpus`, as in "
                   "near-miss.queries.jsonl) and its answer phrases (JSON lines, or - for none); repeat to pool.")
@click.option("--locomo", "locomo", nargs=2, multiple=True, metavar="PALACE FILE",
              help="A palace holding a LoCoMo file's conversations, and the file: category 5 counts as absent.")
@click.option("--limit", type=int, default=None, help="Only the first N LoCoMo questions (a smoke run).")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@click.pass_obj
def bench_ask(obj, sets, locomo, limit, as_json):
    """When ask answers and when it abstains, per corpus: abstention precision and recall, wrong citations,
    answered with a right citation, quotes holding the answer; every rule fitted with each corpus left out.

    Example:

    \b
    palace bench ask --set example-palace example-palace/queries.jsonl benchmarks/example-palace.answers.jsonl
                     --set example-palace benchmarks/near-miss.queries.jsonl#example-palace -
    """
    from pathlib import Path

    from palace_cli.cli import render
    from palace_cli.bench.ask import markdown_report, run_ask_bench

    chosen = [(Path(root), Path(queries), None if answers == "-" else Path(answers)) for root, queries, answers in sets]
    if not chosen and not locomo:
        chosen = [(obj.palace.root, obj.palace.root / "queries.jsonl", None)]
    for root, queries, answers in chosen:
        for path in (Path(str(queries).partition("#")[0]), answers):
            if path is not None and not path.is_file():
                raise click.UsageError(f"no such file: {path}")
    for root, path in [(Path(r), Path(f)) for r, f in locomo] + [(r, None) for r, _, _ in chosen]:
        if not (root / "palace.toml").is_file():
            raise click.UsageError(f"{root} is not a palace (no palace.toml)")
        if path is not None and not path.is_file():
            raise click.UsageError(f"no such file: {path}")
    with render.err.status("asking") as status:
        summary = run_ask_bench(chosen, [(Path(r), Path(f)) for r, f in locomo], limit=limit,
                                progress=lambda name, i, n: status.update(f"{name} {i}/{n}"))
    if as_json:
        render.emit_json(summary)
    else:
        render.plain(markdown_report(summary), end="")


@click.command(name="lsp")
@click.option("--size", type=int, default=10_000, show_default=True, help="Notes in the synthetic palace.")
@click.option("--requests", type=int, default=200, show_default=True, help="Timed requests of each kind.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the notes and of what is typed.")
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="Keep the generated palace here and reuse it next time (default: a temp dir, removed).")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
def bench_lsp(size, requests, seed, workdir, as_json):
    """Latency of `palace lsp` requests (completion, hover, ...) from a real client on a synthetic palace.

    Example: palace bench lsp --size 10000 --workdir /tmp/palace-bench
    """
    from palace_cli.cli import render
    from palace_cli.bench.lsp_bench import run

    results = run(size, requests, seed, workdir, progress=render.progress_lines())
    if as_json:
        render.emit_json(results)
        return
    kinds = ("completion", "hover", "definition", "references", "document_symbols", "workspace_symbols",
             "diagnostics_after_change")
    render.table(["request", "n", "p50 ms", "p95 ms", "max ms"],
                 [[k, results[k]["n"], results[k]["p50_ms"], results[k]["p95_ms"], results[k]["max_ms"]] for k in kinds])
    for big in results["big_buffers"]:
        render.note(f"a buffer of {big['bytes']:,} bytes ({big['links']:,} links): diagnostics after "
                    f"{big['diagnostics_s']} s; a hover in it {big['hover_in_it_ms']} ms, in another document "
                    f"meanwhile {big['hover_elsewhere_ms']} ms")
    rebuild = results["table_rebuild_after_edit"]
    render.note(f"tables rebuilt after a one-note save: {rebuild['cpu_p50_ms']} ms CPU ({rebuild['p50_ms']} ms wall) "
                f"at the median of {rebuild['edits']}; the process's first build {rebuild['first_cpu_ms']} ms CPU")
    machine = results["machine"]
    render.note(f"{results['notes']:,} notes; server ready in {results['ready_s']} s, peak memory "
                f"{results['server_peak_rss_mb']} MB; {machine['cpus']} CPUs, "
                f"load {machine['load_avg_1m']}, calibration loop {machine['calibration_s']} s")


@click.command(name="vault")
@click.option("--sizes", default="10000", show_default=True, help="Comma-separated vault sizes (notes).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the synthetic notes.")
@click.option("--embed-notes", type=int, default=250, show_default=True,
              help="Notes of the vault whose units are embedded with the installed embedder (0: none).")
@click.option("--stand-in-vectors", "stand_in", is_flag=True,
              help="Also time hybrid recall over random unit vectors (latency only, never quality).")
@click.option("--workdir", type=click.Path(file_okay=False), default=None, help="Where to generate (default: a temp dir).")
@click.option("--keep", is_flag=True, help="Keep the generated vaults.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
def bench_vault(sizes, seed, embed_notes, stand_in, workdir, keep, as_json):
    """An adopted vault of long notes (~5 KB, 8 sections each): adopt and index, no-op and one-edit refresh,
    warm recall, and section units embedded per second.

    Example: palace bench vault --sizes 10000 --json
    """
    from palace_cli.cli import render
    from palace_cli.bench.vault_bench import run

    try:
        wanted = [int(part) for part in sizes.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter("sizes are whole numbers, e.g. 1000,10000", param_hint="--sizes") from None
    results = run(wanted, seed=seed, embed_notes=embed_notes, stand_in=stand_in, workdir=workdir, keep=keep,
                  progress=render.progress_lines())
    if as_json:
        render.emit_json(results)
        return
    rows = [[f"{r['notes']:,}", f"{r['section_units']:,}", r["adopt_and_lexical_index_s"],
             f"{r['noop_refresh_s'] * 1000:.0f}", f"{r['one_edit_refresh_s'] * 1000:.0f}",
             " / ".join(f"{x['mode']} {x['warm']['p50_ms']}" for x in r["recall"])] for r in results["sizes"]]
    render.table(["notes", "sections", "adopt + lexical s", "no-op ms", "one edit ms", "warm recall p50 ms"], rows)
    embedding = results.get("embedding") or {}
    if embedding.get("units_per_s"):
        render.note(f"embedded {embedding['embedded']:,} units ({embedding['section_units']:,} sections) at "
                    f"{embedding['units_per_s']}/s with {embedding['model']}")
    machine = results["machine"]
    render.note(f"{machine['cpus']} CPUs, load {machine['load_avg_1m']}, calibration loop {machine['calibration_s']} s")


@click.command(name="recall")
@click.option("--size", type=int, default=1000, show_default=True, help="Notes in the synthetic palace.")
@click.option("--words", default="5,10,20", show_default=True, help="Comma-separated query lengths (words).")
@click.option("--modes", default="lexical", show_default=True,
              help="Comma-separated: lexical, fused, dense (hybrid: the old name of fused).")
@click.option("--queries", "count", type=int, default=25, show_default=True, help="Timed queries per length and mode.")
@click.option("--warmup", type=int, default=10, show_default=True, help="Untimed queries first.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the notes and the queries.")
@click.option("--vocabulary", type=click.Choice(["small", "zipf"]), default="small", show_default=True,
              help="small: a few hundred words fill every note (most queries match most notes); zipf: one "
                   "Zipfian over a vocabulary growing with the palace.")
@click.option("--stand-in-vectors", "stand_in", is_flag=True,
              help="Fill the vector store with random unit vectors (latency only, never quality) when the palace "
                   "has none; the query embedding stays real.")
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="Keep the generated palace here and reuse it next time (default: a temp dir, removed).")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
def bench_recall(size, words, modes, count, warmup, seed, vocabulary, stand_in, workdir, as_json):
    """Warm `recall` latency (p50/p95 wall, CPU) on a synthetic palace, per query length and mode.

    Example: palace bench recall --size 100000 --modes lexical,fused --stand-in-vectors --workdir /tmp/b
    """
    from palace_cli.cli import render
    from palace_cli.bench.recall_bench import run

    try:
        lengths = [int(part) for part in words.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter("query lengths are whole numbers, e.g. 5,10,20", param_hint="--words") from None
    from palace_cli.search.query import MODE_ALIASES, MODES

    wanted = list(dict.fromkeys(MODE_ALIASES.get(p.strip(), p.strip()) for p in modes.split(",") if p.strip()))
    unknown = sorted(set(wanted) - set(MODES))
    if unknown:
        raise click.BadParameter(f"unknown mode {', '.join(unknown)}; choose {', '.join(MODES)}", param_hint="--modes")
    results = run(size, lengths, wanted, count, warmup, seed, workdir, stand_in, progress=render.progress_lines(),
                  vocabulary=vocabulary)
    if as_json:
        render.emit_json(results)
        return
    render.table(["mode", "words", "p50 ms", "p95 ms", "CPU p50 ms", "first sight p50 ms", "load"],
                 [[r["mode"], r["words"], r["warm"]["p50_ms"], r["warm"]["p95_ms"], r["warm"]["cpu_p50_ms"],
                   r["first_sight"]["p50_ms"], r["load_avg_1m"]] for r in results["rows"]])
    machine = results["machine"]
    note = (f"{results['notes']:,} notes ({results['vocabulary']} vocabulary); {machine['cpus']} CPUs, "
            f"load {machine['load_avg_1m']}-{machine['load_avg_1m_after']}, calibration loop {machine['calibration_s']} s")
    if results.get("stand_in_vectors"):
        note += "; vectors are random stand-ins (latency only)"
    render.note(note)


@click.command(name="similar")
@click.option("--duplicates", "duplicates_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="JSON-lines rewrites of existing memories (default: duplicates.jsonl at the palace root).")
@click.option("--methods", default="dense,lexical", show_default=True, help="Comma-separated: dense, lexical.")
@click.option("--json", "as_json", is_flag=True, help="JSON output (with every score).")
@click.pass_obj
def bench_similar(obj, duplicates_file, methods, as_json):
    """How well the similar-note warning of `add` tells rewrites of a memory from its neighbours, per threshold.

    Example: palace --palace example-palace bench similar
    """
    from pathlib import Path

    from palace_cli.cli import render
    from palace_cli.bench.similar import load_duplicates, markdown_report, run_similar_bench

    palace = obj.palace
    path = Path(duplicates_file) if duplicates_file else palace.root / "duplicates.jsonl"
    if not path.is_file():
        raise click.UsageError(f"no duplicates file at {path}; pass --duplicates FILE")
    with render.err.status("scoring") as status:
        summary = run_similar_bench(palace, load_duplicates(path),
                                    methods=[m.strip() for m in methods.split(",") if m.strip()],
                                    progress=lambda stage, i, n: status.update(f"{stage} {i}/{n}"))
    summary["command"] = "palace bench similar" + (f" --duplicates {duplicates_file}" if duplicates_file else "")
    if as_json:
        render.emit_json(summary)
    else:
        render.plain(markdown_report(summary), end="")


@click.command(name="distill")
@click.option("--locomo", "locomo_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="A LoCoMo JSON file with `observation` annotations.")
@click.option("--sessions", "sessions_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="A labelled set of coding-agent sessions (benchmarks/agent-sessions.md describes the format).")
@click.option("--modes", default="recall", show_default=True,
              help="Retrieval modes for evidence recall, comma-separated (recall, lexical, dense, fused).")
@click.option("--limit", type=int, default=None, help="Ask only the first N questions (quick runs).")
@click.option("--no-cross-validate", "no_cross", is_flag=True, help="Skip the leave-one-out figures.")
@click.option("--fit", "fit_only", is_flag=True, help="Only print the fitted scorer weights and threshold (to ship).")
@click.option("--llm/--no-llm", default=False, show_default=True,
              help="With --sessions: run the LLM stage too ([models] endpoint, or the local generator).")
@click.option("--workdir", type=click.Path(file_okay=False), default=None, help="Build the palaces here and keep them.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
def bench_distill(locomo_file, sessions_file, modes, limit, no_cross, fit_only, llm, workdir, as_json):
    """Distill scored against LoCoMo's observations (and evidence recall with memories beside turns), or against
    a labelled set of coding-agent sessions (recall and precision per kind).

    Example: palace bench distill --sessions benchmarks/agent-sessions.jsonl
    """
    from palace_cli.cli import render

    if (locomo_file is None) == (sessions_file is None):
        raise click.UsageError("give --locomo FILE or --sessions FILE")
    if sessions_file is not None:
        from palace_cli.bench.worksessions import fit_work_scorer, run_sessions_bench

        if fit_only:
            render.emit_json(fit_work_scorer(sessions_file))
            return
        summary = run_sessions_bench(sessions_file, workdir=workdir, keep=workdir is not None, cross=not no_cross,
                                     llm=llm, progress=render.progress_lines())
        summary["command"] = "palace bench distill --sessions " + sessions_file
        if as_json:
            render.emit_json(summary)
        else:
            render.out.print(_sessions_lines(summary), markup=False)
        return
    from palace_cli.bench.distill import fit_scorer, run_distill_bench

    if fit_only:
        render.emit_json(fit_scorer(locomo_file))
        return
    summary = run_distill_bench(locomo_file, modes=[m.strip() for m in modes.split(",") if m.strip()],
                                workdir=workdir, keep=workdir is not None, cross=not no_cross, limit=limit,
                                progress=render.progress_lines())
    summary["command"] = "palace bench distill --locomo " + locomo_file
    if as_json:
        render.emit_json(summary)
        return
    render.out.print(_distill_lines(summary), markup=False)


def _distill_lines(summary: dict) -> str:
    lines = [f"{summary['dataset']}: {summary['observations']} observations; heuristics "
             f"{summary['speed']['turns_per_s']:,} turns/s"]
    for name in ("cross_validated", "palace"):
        part = summary.get(name)
        if part:
            lines.append(f"{name}: recall {part['recall']:.3f}, precision {part['precision']:.3f}")
    if "palace" in summary:
        lines.append(f"palace distill: {summary['palace']['distill']['turns_per_s']:,} turns/s")
    for mode, row in summary.get("evidence_recall@10", {}).items():
        lines.append(f"evidence recall@10 ({mode}): turns {row['turns']:.3f}, memories+turns {row['memories+turns']:.3f}")
    return "\n".join(lines)


def _sessions_lines(summary: dict) -> str:
    """Recall and precision per kind, each way measured, as a Markdown table."""
    lines = [f"{summary['dataset']}: {summary['sessions']} sessions, {summary['turns']} turns, {summary['labels']} "
             f"labelled memories; heuristics {summary['speed']['turns_per_s']:,} turns/s, palace distill "
             f"{summary['palace']['distill']['turns_per_s']:,} turns/s", "",
             "| measured | kind | labels | produced | recall | precision |", "|---|---|---|---|---|---|"]
    for name in ("cross_validated", "palace"):
        part = summary.get(name)
        if not part:
            continue
        for kind, row in [*part["by_kind"].items(), ("all", part)]:
            lines.append(f"| {name} | {kind} | {row['labels']} | {row['produced']} | {row['recall']:.3f} "
                         f"[{row['recall_ci'][0]:.2f}, {row['recall_ci'][1]:.2f}] | {row['precision']:.3f} "
                         f"[{row['precision_ci'][0]:.2f}, {row['precision_ci'][1]:.2f}] |")
    palace = summary["palace"]
    lines += ["", f"kinds agree on {palace['kind_agreement']:.0%} of matches; {palace['restatements']} restatements "
              f"(neutral); {palace['secrets']} memories hold a secret"]
    return "\n".join(lines)


@click.command(name="hook")
@click.option("--exchanges", type=int, default=200, show_default=True, help="Exchanges in the session before it grows.")
@click.option("--grow", type=int, default=10, show_default=True, help="Exchanges added before each timed PreCompact.")
@click.option("--rounds", type=int, default=5, show_default=True, help="Timed runs of each event.")
@click.option("--copy-of", type=click.Path(file_okay=False, exists=True), default=None,
              help="Time on a copy of this palace (with its cache) instead of a copy of the example palace.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
def bench_hook(exchanges, grow, rounds, copy_of, as_json):
    """Seconds of `palace hook claude-code` as Claude Code runs it: SessionStart, and PreCompact of a grown session.

    Example: palace bench hook --copy-of ~/kb --json
    """
    from palace_cli.bench.distill import run_hook_bench
    from palace_cli.cli import render

    result = run_hook_bench(copy_of, exchanges=exchanges, grow=grow, rounds=rounds)
    if as_json:
        render.emit_json(result)
        return
    render.out.print(f"SessionStart: first {result['session_start_first_s']} s, then median "
                     f"{result['session_start_s']['median']} s; PreCompact of {grow} new exchanges: median "
                     f"{result['pre_compact_grown_s']['median']} s", markup=False)


bench.add_command(bench_distill)
bench.add_command(bench_hook)
bench.add_command(bench_retrieval)
bench.add_command(bench_recall)
bench.add_command(bench_lsp)
bench.add_command(bench_similar)
bench.add_command(bench_verify)
bench.add_command(bench_ask)
bench.add_command(bench_index)
bench.add_command(bench_vault)
bench.add_command(bench_embed)

COMMANDS = [bench]
