"""Study commands: quiz (the keyboard-only terminal session), due, stats, score, evolve, redqueen."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta
from pathlib import Path

import click
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from palace_cli.cli import render
from palace_cli.editing.lint import OPT_IN
from palace_cli.errors import UsageError
from palace_cli.study.strategies import STRATEGIES
from palace_cli.core.wording import plural
from palace_cli.core.smashin import FACTORS, agreement, factor, level, score_memory, threshold
from palace_cli.cli import pass_ctx

RATING_KEYS = {"1": 1, "2": 2, "3": 3, "4": 4}
RATING_STYLE = {1: ("again", "red"), 2: ("hard", "yellow"), 3: ("good", "green"), 4: ("easy", "cyan")}
VERDICT_STYLE = {"correct": ("✓ correct", "green"), "partial": ("~ partly", "yellow"), "wrong": ("✗ not it", "red"),
                 "empty": ("— no answer", "red")}
BARS = " ▁▂▃▄▅▆▇█"
# In a terminal a wrapping console (panels hold long images); piped, lines are never wrapped.
out, err = Console(highlight=False, soft_wrap=not render.out.is_terminal), render.err


def read_key() -> str:
    """One keypress without Enter on a terminal (Ctrl-C still interrupts); a line's first character otherwise."""
    if not sys.stdin.isatty():
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n")[:1] or "\r"
    import termios
    import tty

    fd = sys.stdin.fileno()
    old = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        key = sys.stdin.read(1)
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, old)
    if key in ("\x04", ""):
        raise EOFError
    return key


def _until(moment: datetime, now: datetime) -> str:
    seconds = (moment - now).total_seconds()
    if seconds <= 0:
        return "now"
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= size:
            count = round(seconds / size)
            return f"in {count} {unit}{'s' if count != 1 else ''}"
    return "in under a minute"


def _panel(body: Text, title: str, subtitle: str) -> None:
    """A boxed panel in a terminal; piped, the title line, the text and the subtitle, never cut or boxed."""
    if render.out.is_terminal:
        out.print(Panel(body, title=title, title_align="left", subtitle=subtitle, subtitle_align="right"))
        return
    out.print(Text(f"— {title}" + (f" · {subtitle}" if subtitle else ""), style="bold"))
    out.print(body)


def _show_question(question, number: int, pick_reason: str, domain: str) -> None:
    body = Text()
    body.append(question.title + "\n", style="bold")
    body.append(question.prompt)
    if question.note:
        body.append(f"\n\n{question.note}", style="dim")
    source = "" if question.source == "notes" else f" · {question.source}"
    _panel(body, f"{number} · {question.kind} · {domain}{source}", pick_reason)


def _show_grade(result, question, session) -> None:
    label, style = VERDICT_STYLE[result.verdict]
    line = Text(label, style=f"bold {style}")
    if result.verdict == "partial":
        line.append(f"  found: {', '.join(result.matched)}; missing: {', '.join(result.missing)}")
    out.print(line)
    out.print(Text("answer: ", style="dim") + Text(question.answer, style="bold"))
    if result.confused_with:
        other = session.memories[result.confused_with]
        out.print(Text(f"that is {other.subject}: easily confused with this one", style="magenta"))


def _show_memory(memory, show: str) -> None:
    body = Text()
    body.append(f"anchor: {memory.anchor}\n", style="italic")
    if show == "full" and memory.image:
        body.append("\n" + memory.image + "\n")
    if memory.content:
        body.append("\n" + memory.content, style="dim" if show == "full" else "")
    _panel(body, f"{memory.subject} ({memory.id})", memory.location)


def interval(seconds: float) -> str:
    """A short interval as rating keys show it: <1m, 10m, 5h, 3d, 2.1mo, 1.3y."""
    if seconds < 60:
        return "<1m"
    for size, unit, places in ((31_557_600, "y", 1), (2_629_800, "mo", 1), (86400, "d", 0), (3600, "h", 0),
                               (60, "m", 0)):
        if seconds >= size:
            value = round(seconds / size, places)
            return f"{value:g}{unit}" if places else f"{int(value)}{unit}"
    return "<1m"


def _ask_rating(suggested: int, intervals: dict[int, timedelta]) -> int | None:
    name, style = RATING_STYLE[suggested]
    keys = "  ".join(f"[{RATING_STYLE[v][1]}]{k}[/] {RATING_STYLE[v][0]} [dim]{interval(intervals[v].total_seconds())}[/]"
                     for k, v in RATING_KEYS.items())
    out.print(f"{keys}   [dim]Enter = {name} · q = stop[/dim]", markup=True)
    while True:
        key = read_key()
        if key in RATING_KEYS:
            return RATING_KEYS[key]
        if key in ("\r", "\n", " "):
            return suggested
        if key.lower() == "q":
            return None


def _summary(session, interrupted: bool = False) -> None:
    summary = session.summary
    if not summary.outcomes:
        out.print("No reviews recorded." + (" (interrupted)" if interrupted else ""))
        return
    counts = summary.ratings
    parts = [f"[{RATING_STYLE[v][1]}]{counts.get(v, 0)} {RATING_STYLE[v][0]}[/]" for v in (1, 2, 3, 4)]
    head = "Stopped" if interrupted else "Session done"
    out.print(f"\n{head}: {plural(len(summary.outcomes), 'review')} kept in {summary.log_path} · " + " · ".join(parts),
              markup=True)
    if summary.generated_offered:
        out.print(f"generated questions: {summary.generated_used} used, "
                  f"{len(summary.generated_rejected)} rejected by validation", style="dim")


@click.command()
@click.option("--domain", "-d", default=None, help="Only this domain (name or alias).")
@click.option("--strategy", "-s", type=click.Choice(STRATEGIES), default="due", show_default=True,
              help="Which memories to ask: due first, weakest, one domain and its links, confusable pairs, random.")
@click.option("-n", "count", type=click.IntRange(1, 500), default=10, show_default=True, help="Questions to ask.")
@click.option("--profile", "-p", default="study", show_default=True,
              help="Session preset: study, interview, teaching, or one from palace.toml [study.profiles].")
@click.option("--llm/--no-llm", "use_llm", default=True, help="Offer some questions to the generator model, if installed.")
@click.option("--seed", type=int, default=None, help="Seed the choice of questions (repeatable sessions).")
@pass_ctx
def quiz(ctx, domain, strategy, count, profile, use_llm, seed):
    """Study in the terminal: answer, see the memory, rate Again/Hard/Good/Easy (1-4).

    Example: palace quiz --strategy weak-spots -n 5
    """
    from palace_cli.study.session import StudySession, resolve_generator

    palace = ctx.palace
    generator = resolve_generator(palace) if use_llm else None
    session = StudySession(palace, strategy=strategy, n=count, domain=domain, profile=profile,
                           generator=generator, seed=seed)
    _warn_log(session.log_problems)
    if not session.picks:
        out.print("Nothing to study" + (f" in {session.domain}" if session.domain else "") + ".")
        return
    reasons = {p.memory_id: p.reason for p in session.picks}
    out.print(f"[bold]{palace.config.name}[/bold] · {strategy} · {plural(len(session.picks), 'question')} · "
              f"learner {session.learner} · Ctrl-C stops and keeps your reviews", markup=True)
    stopped = False
    try:
        for number, question in enumerate(session, start=1):
            memory = session.memory(question)
            reason = "again" if question.memory_id in session.requeued else reasons.get(question.memory_id, "")
            _show_question(question, number, reason, memory.domain)
            try:
                answer = out.input("[bold]answer ›[/bold] ")
            except EOFError:
                stopped = True
                break
            result = session.grade(question, answer)
            _show_grade(result, question, session)
            _show_memory(memory, session.profile.show)
            rating = _ask_rating(result.suggested, session.preview(question))
            if rating is None:
                stopped = True
                break
            state = session.record(question, rating, answer, result)
            name, style = RATING_STYLE[rating]
            out.print(f"[{style}]{name}[/] · next review {_until(state.due, session.clock())}\n", markup=True)
    except KeyboardInterrupt:
        _summary(session, interrupted=True)
        raise SystemExit(130)
    except EOFError:  # end of input at the rating key: a stop, like q
        stopped = True
    _summary(session, interrupted=stopped)


@click.command()
@click.option("--domain", "-d", default=None, help="Only this domain.")
@click.option("--learner", default=None, help="Whose schedule (default $PALACE_LEARNER or `person`).")
@click.option("--limit", type=int, default=50, show_default=True, help="Show at most this many.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def due(ctx, domain, learner, limit, as_json):
    """List memories due for review, most urgent first.

    Example: palace due --json
    """
    from palace_cli.study.stats import due_items

    items, new, schedule, log_problems = due_items(ctx.palace, learner, domain=domain)
    _warn_log(log_problems)
    if as_json:
        render.emit_json({"learner": schedule.learner, "now": schedule.now.isoformat(), "due": len(items),
                          "new": new, "items": [i.as_dict() for i in items[:limit]]})
        return
    if not items:
        out.print(f"Nothing due. {plural(new, 'memory')} never studied: `palace quiz` starts them.")
        return
    render.table(["id", "due", "R", "state", "lapses", "where"],
                 [[i.id, _ago(i.due, schedule.now), f"{i.retrievability:.2f}", i.state, i.lapses, i.path]
                  for i in items[:limit]], title=f"{len(items)} due · {new} new")


def _warn_log(problems) -> None:
    """One warning line per review log line that was skipped (`palace lint` lists them too)."""
    for problem in problems:
        render.warn(f"{problem.path}:{problem.line}: {problem.message}" if problem.line else
                    f"{problem.path}: {problem.message}")


def _ago(moment: datetime, now: datetime) -> str:
    seconds = (now - moment).total_seconds()
    if seconds < 3600:
        return "now"
    if seconds < 86400:
        return f"{int(seconds // 3600)}h overdue"
    return f"{int(seconds // 86400)}d overdue"


def _bars(values: list[int]) -> str:
    top = max(values) if values and max(values) > 0 else 1
    return "".join(BARS[min(8, round(v / top * 8))] if v else "·" for v in values)


@click.command()
@click.option("--learner", default=None, help="Whose schedule (default $PALACE_LEARNER or `person`).")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def stats(ctx, learner, as_json):
    """Retention, due counts, lapses and the weakest memories, with two small charts.

    Example: palace stats
    """
    from palace_cli.study.stats import study_stats

    data = study_stats(ctx.palace, learner)
    if as_json:
        render.emit_json(data.as_dict())
        return
    pct = lambda v: "–" if v is None else f"{v:.0%}"  # noqa: E731
    days = [c for _, c in data.per_day]
    ahead = [c for _, c in data.forecast]
    others = [x for x in data.learners if x != data.learner]
    rows = [
        ("learner", data.learner + (f"   (others: {', '.join(others)})" if others else "")),
        ("memories", f"{data.memories} · {data.reviewed} studied · {data.new} new"
                     + (f" · {data.retired} superseded (not studied)" if data.retired else "")),
        ("due", f"{data.due_now} now · {data.due_today} within a day · {data.due_week} within a week"),
        ("reviews", f"{data.reviews} · {data.reviews_30d} in the last 30 days"),
        ("retention", f"{pct(data.retention_30d)} last 30 days · {pct(data.retention)} all time "
                      "(reviews of learnt memories not rated Again)"),
        ("recall now", f"{pct(data.mean_retrievability)} mean predicted (FSRS)"),
        ("lapses", str(data.lapses)),
        ("states", ", ".join(f"{k} {v}" for k, v in sorted(data.by_state.items())) or "–"),
        ("reviews/day", f"{_bars(days)}  last {len(days)} days (max {max(days) if days else 0})"),
        ("coming due", f"{_bars(ahead)}  next {len(ahead)} days (max {max(ahead) if ahead else 0})"),
    ]
    if render.out.is_terminal:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="dim")
        grid.add_column()
        for label, value in rows:
            grid.add_row(label, value)
        out.print(Panel(grid, title=f"{ctx.palace.config.name} · study", title_align="left"))
    else:  # piped: `label: value` lines, no box
        for label, value in rows:
            out.print(f"{label}: {value}", markup=False)
    if data.weakest:
        render.table(["weakest", "subject", "R", "lapses", "reviews"],
                     [[w.id, w.subject, f"{w.retrievability:.2f}", w.lapses, w.reviews] for w in data.weakest],
                     whole=("weakest",))
    _warn_log(data.problems)


@click.command()
@click.argument("ref", required=False)
@click.option("--all", "all_", is_flag=True, help="Score every memory.")
@click.option("--against", type=click.Path(exists=True, dir_okay=False),
              help="A JSONL file of hand labels: report the scorer's agreement with them.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def score(ctx, ref, all_, against, as_json):
    """SMASHIN SCOPE factors of a memory's Image, each with where it was found.

    Example: palace score two-phase-commit
    """
    palace = ctx.palace
    if bool(ref) == bool(all_) and not against:
        raise UsageError("give a memory id or --all")
    memories = palace.scan().memories
    if against:
        labels = _read_labels(Path(against))
        result = agreement(labels, {i: score_memory(memories[i]) for i in labels if i in memories})
        return render.emit_json(result) if as_json else _show_agreement(result)
    if all_:
        scores = sorted((score_memory(m) for m in memories.values()), key=lambda s: (s.score, s.memory_id))
        if as_json:
            return render.emit_json({"threshold": threshold(palace.config.raw.get("study")),
                                     "memories": [s.as_dict() for s in scores]})
        letters = lambda s: "".join(f.letter if f.key in s.present else "·" for f in FACTORS)  # noqa: E731
        render.table(["id", "score", "level", "SMASHINSCOPE", "missing"],
                     [[s.memory_id, f"{s.score}/12", level(s.score), letters(s), ", ".join(s.missing)] for s in scores])
        return
    result = score_memory(palace.memory(ref))
    if as_json:
        return render.emit_json(result.as_dict())
    rows = []
    for f in result.factors:
        where = "; ".join(f"{e.text!r} {e.line}:{e.column}" for e in f.evidence[:4])
        rows.append([f.name, ("✓", "green") if f.present else ("✗", "red"),
                     where if f.present else (factor(f.key).technique, "dim")])
    render.table(["factor", "", "found at (line:col), or how to add it"], rows,
                 title=f"{result.memory_id} · {result.score}/12 ({level(result.score)}) · {result.path}")


def _read_labels(path: Path) -> dict[str, dict[str, int]]:
    labels = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            labels[row["id"]] = {f.key: int(row["factors"][f.key]) for f in FACTORS}
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            raise UsageError(f"{path}:{number}: not a label line ({exc})") from None
    return labels


def _show_agreement(result: dict) -> None:
    fmt = lambda v: "–" if v is None else f"{v:.2f}"  # noqa: E731
    render.table(["factor", "accuracy", "kappa", "precision", "recall", "labelled", "detected"],
                 [[key, fmt(row["accuracy"]), fmt(row["kappa"]), fmt(row["precision"]), fmt(row["recall"]),
                   row["labelled_present"], row["detected_present"]]
                  for key, row in list(result["factors"].items()) + [("overall", result["overall"])]],
                 title=f"SMASHIN scorer vs hand labels ({result['memories']} memories)")
    total = result["total_score"]
    out.print(f"total score: mean absolute error {total['mean_abs_error']}, Pearson r {total['pearson']}, "
              f"mean {total['mean_label']} (labels) vs {total['mean_scorer']} (scorer)")


@click.command()
@click.argument("ref")
@click.option("--accept", is_flag=True, help="Write the proposed Image into the note (atomically).")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def evolve(ctx, ref, accept, as_json):
    """Show a memory's missing SMASHIN factors and, with a generator model, propose a stronger Image.

    Example: palace evolve two-phase-commit --accept
    """
    from palace_cli.study.evolver import evolve as run_evolve
    from palace_cli.study.session import usable_generator

    palace = ctx.palace
    generator, why_not = usable_generator(palace, "propose a better image")
    if generator is not None and not as_json:
        err.print("asking the generator for a stronger image…", style="dim")
    result = run_evolve(palace, ref, generator, accept=accept, why_not=why_not)
    if as_json:
        return render.emit_json(result.as_dict())
    out.print(f"[bold]{result.memory_id}[/bold] · {result.score.score}/12 ({level(result.score.score)}) · {result.path}",
              markup=True)
    if result.lacks:
        out.print(f"lacks {', '.join(result.lacks)} to be cited and studied" + (
            "; proposed below" if result.proposal else ""), markup=False)
    if result.verify or result.anchor:
        out.print(f"proposed anchor: {result.anchor or '(kept)'} · verify token: {result.verify or '(none)'}",
                  markup=False)
    for key, tip in result.tips.items():
        out.print(f"  [red]✗[/] {factor(key).name}: {tip}", markup=True)
    if result.diff:
        out.print(Text(result.diff, style="cyan"))
        out.print(f"proposal: {result.proposal_score}/12, still missing: {', '.join(result.proposal_missing) or 'none'}")
    if result.problem:
        render.warn(result.problem)
    if not result.opted_in:
        out.print(f"palace writes nothing into {result.path}: {OPT_IN}", markup=False)
    if result.accepted:
        out.print(f"[green]written[/green] {result.path} (Image only; verify token kept)", markup=True)
    elif result.proposal and not result.problem and result.opted_in:
        out.print(f"accept with: palace evolve {result.memory_id} --accept"
                  + (" (adds the ## Image and the anchor and verify fields; nothing else changes)"
                     if result.lacks else ""))


@click.command()
@click.option("--rounds", type=click.IntRange(1, 20), default=3, show_default=True, help="Rounds of recall.")
@click.option("--strategy", "-s", type=click.Choice(STRATEGIES), default="weak-spots", show_default=True)
@click.option("-n", "count", type=click.IntRange(1, 1000), default=10, show_default=True, help="Memories per round.")
@click.option("--domain", "-d", default=None, help="Only this domain.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@pass_ctx
def redqueen(ctx, rounds, strategy, count, domain, seed, as_json):
    """Pre-learning rounds: the generator recalls memories from anchors alone; list the weak ones to evolve.

    Example: palace redqueen --rounds 3 -n 10
    """
    from palace_cli.errors import ModelError
    from palace_cli.study.redqueen import run_red_queen
    from palace_cli.study.session import usable_generator

    palace = ctx.palace
    generator, why_not = usable_generator(palace, "recall memories from their anchors")
    if generator is None:
        raise ModelError(why_not)
    with render.err.status("Red Queen") as status:
        report = run_red_queen(palace, generator, rounds, strategy, count, domain, seed,
                               progress=lambda done, total, mid: status.update(f"Red Queen {done}/{total}: {mid}"))
    if as_json:
        return render.emit_json(report.as_dict())
    accuracy = " · ".join(f"round {i}: {a:.0%}" for i, a in enumerate(report.round_accuracy(), start=1))
    accuracy += " · " + " · ".join(f"{kind}: {a:.0%}" + (f" (chance {c:.0%})" if c is not None else "")
                                   for kind, (a, c) in report.kind_accuracy().items())
    out.print(f"[bold]{report.learner}[/bold] recalled from anchors only ({strategy}) · {accuracy}", markup=True)
    out.print(f"[dim]{len(report.attempts)} attempts logged under learner {report.learner}, "
              "apart from your own schedule[/dim]", markup=True)
    if not report.weak:
        out.print("No weak memories in this run.")
        return
    render.table(["weak memory", "mean score", "tries", "SMASHIN", "missing", "next"],
                 [[w.memory_id, f"{w.mean_score:.2f}", w.attempts, f"{w.smashin}/12", ", ".join(w.missing),
                   f"palace evolve {w.memory_id}"] for w in report.weak], whole=("weak memory", "next"))


COMMANDS = [quiz, due, stats, score, evolve, redqueen]

