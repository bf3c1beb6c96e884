"""`palace distill`: memories formed from imported turns, written as plain notes that point at their turn.

The order of work, per session, oldest first: candidates from the heuristics (extract.py), more from an LLM for
the turns the heuristics were unsure of (llmstage.py, only with `[models] endpoint`), then for each candidate:

- a turn already distilled (a memory names it in `turn`/`session`, or lists it in `confirmed_by`) is skipped:
  a second run changes nothing;
- a fact the palace already holds about the same person (`search.similar`'s lexical score, at or above
  `[distill] known`; known.py keeps the vectors for the run) is not written again: the memory it repeats gains
  the turn in `confirmed_by` and the date in `confirmed` (consolidation reads them);
- a newer value of a one-at-a-time attribute (a job, a home, a favourite) supersedes the memory that held
  the old value (`editing.versions` rules: frontmatter only, nothing deleted);
- the rest is written by `editing.authoring.PlainMemories` into memories/<[distill] domain>/, a session's memories
  together (their fsyncs at once, not one per note; each note whole, so a killed run leaves whole notes and a rerun
  writes the rest).

A memory written is known at once to the checks of the turns after it, so a fact told twice in one run is
written once; the search index takes them all in one refresh at the end. Embeddings wait for the next refresh.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import date

from palace_cli.conversations.sessionfile import load_session
from palace_cli.core.dates import said_on
from palace_cli.core.links import inert_links
from palace_cli.editing.authoring import PlainMemories
from palace_cli.editing.writes import set_fields
from palace_cli.errors import UsageError
from palace_cli.index.locks import WriteSlices
from palace_cli.index.scope import make_scope
from palace_cli.memory.extract import Candidate, extract_session
from palace_cli.memory.known import Known
from palace_cli.memory.scorer import FITTED, THRESHOLD, WORK_FITTED, WORK_THRESHOLD
from palace_cli.palace import Palace
from palace_cli.progress import Progress

DOMAIN = "distilled"
KNOWN = 0.6  # tf-idf cosine (search.similar's lexical score) at which a fact counts as already known
UNCERTAIN = 0.1  # turns scored from here up and not kept go to the LLM stage, when there is one


@dataclass
class Settings:
    """palace.toml's [distill] table, checked."""

    domain: str = DOMAIN
    threshold: float = THRESHOLD
    work_threshold: float = WORK_THRESHOLD
    known: float = KNOWN
    uncertain: float = UNCERTAIN
    user: str = ""
    llm: str = "auto"  # auto (when [models] endpoint is set), always, never

    @classmethod
    def of(cls, palace: Palace) -> "Settings":
        """The palace's settings; UsageError naming the key for a value of the wrong kind."""
        raw = palace.config.raw.get("distill", {})
        if not isinstance(raw, dict):
            raise UsageError("palace.toml: `distill` must be a table ([distill])")
        settings = cls()
        for name, kind in (("domain", str), ("threshold", float), ("work_threshold", float), ("known", float),
                           ("uncertain", float), ("user", str), ("llm", str)):
            if name in raw:
                value = raw[name]
                if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
                    value = float(value)
                if not isinstance(value, kind):
                    raise UsageError(f"palace.toml [distill] {name}: {value!r} is not a {kind.__name__}")
                setattr(settings, name, value)
        if settings.llm not in ("auto", "always", "never"):
            raise UsageError(f"palace.toml [distill] llm must be auto, always or never, not {settings.llm!r}")
        identity = palace.config.raw.get("identity")
        if not settings.user and isinstance(identity, dict) and isinstance(identity.get("name"), str):
            settings.user = identity["name"].strip()  # [identity] name: who "I" is in the palace's sessions
        return settings


@dataclass
class DistillReport:
    """What a distill run found and did."""

    dry_run: bool = False
    sessions: int = 0                    # sessions with turns not distilled before
    turns: int = 0
    already: int = 0                     # turns skipped: distilled by an earlier run
    candidates: int = 0
    written: list[dict] = field(default_factory=list)
    known: list[dict] = field(default_factory=list)       # {"turn", "memory", "score"}: facts the palace had
    superseded: list[dict] = field(default_factory=list)  # {"old", "new", "attribute"}
    llm: dict = field(default_factory=dict)               # {"model", "asked", "cached", "memories", "errors"}
    seconds: dict = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)      # "<session path>: why": sessions that could not be distilled

    def as_dict(self) -> dict:
        """JSON-ready form (`palace distill --json`)."""
        return {"dry_run": self.dry_run, "sessions": self.sessions, "turns": self.turns,
                "already_distilled": self.already, "candidates": self.candidates,
                "counts": {"written": len(self.written), "known": len(self.known),
                           "superseded": len(self.superseded)},
                "written": self.written, "known": self.known, "superseded": self.superseded, "llm": self.llm,
                "skipped": self.skipped, "seconds": self.seconds}


def chosen_sessions(palace: Palace, source: str | None = None, session: str | None = None) -> list[str]:
    """The session files to distill (relative paths), oldest session first: all, one source's, or one session
    (by id or path)."""
    rows = palace.index.store.sessions()
    if session is not None:
        rows = [r for r in rows if session in (r[1], r[0], r[0].removesuffix(".md"))]
        if not rows:
            raise UsageError(f"no imported session {session!r} (see index/conversations.md)")
    if source is not None:
        rows = [r for r in rows if r[2].get("source") == source]
    return [path for path, _, _, _ in sorted(rows, key=lambda r: (str(r[2].get("started") or ""), r[0]))]


def done_turns(memories) -> set[str]:
    """`<session>/<turn>` (and `#<part>` for a turn's later memories) of every memory distilled or confirmed."""
    done = set()
    for memory in memories:
        meta = memory.meta
        if meta.get("session") and meta.get("turn"):
            part = meta.get("part")
            done.add(f"{meta['session']}/{meta['turn']}" + (f"#{part}" if isinstance(part, int) and part > 1 else ""))
        confirmed = meta.get("confirmed_by")
        if isinstance(confirmed, list):
            done.update(str(item) for item in confirmed)
    return done


def distill(palace: Palace, *, since: str | None = None, until: str | None = None, source: str | None = None,
            session: str | None = None, dry_run: bool = False, llm: bool | None = None,
            progress: Progress | None = None) -> DistillReport:
    """Form memories from the palace's imported turns (see the module's docstring); returns what it did.

    The write lock is held one session's writes at a time (`WriteSlices`): a writer that comes meanwhile (a quick
    capture, a hook) waits for one slice, and what it wrote is read before the next. A session that cannot be
    distilled (a date no calendar holds) is skipped and said in `report.skipped`; the others are distilled."""
    settings = Settings.of(palace)
    window = make_scope("turn", since, until)
    report = DistillReport(dry_run=dry_run)
    started = time.perf_counter()
    palace.refresh(embedder=None)
    paths = chosen_sessions(palace, source, session)
    generator = _generator(palace, settings, llm)
    spent = {"extract": 0.0, "llm": 0.0, "write": 0.0}
    slices = WriteSlices(palace.site, "palace distill")
    view = _View.read(palace, refresh=False)  # whole memories: `about`, `turn`, `confirmed_by` are in their frontmatter
    for number, relpath in enumerate(paths, 1):
        try:
            candidates = _candidates(palace, relpath, settings, window, generator, view.done, report, spent)
        except ValueError as exc:
            report.skipped.append(f"{relpath}: {exc}; session skipped")
            continue
        clock = time.perf_counter()
        with slices.slice() if not dry_run else nullcontext(False) as others_wrote:
            if others_wrote and not dry_run:
                view = _View.read(palace, view.done)
            _keep(palace, settings, view.scan, view.known, candidates, report, view.done)
        spent["write"] += time.perf_counter() - clock
        if progress:
            progress("distilling sessions", number, len(paths))
    if not dry_run and (report.written or report.known):
        palace.refresh(embedder=None)
    report.seconds = {name: round(value, 3) for name, value in spent.items()}
    report.seconds["total"] = round(time.perf_counter() - started, 3)
    return report


@dataclass
class _View:
    """What distill reads of the palace: whole memories, the turns distilled, the facts known."""

    scan: object
    done: set[str]
    known: Known

    @classmethod
    def read(cls, palace: Palace, done: set[str] | None = None, refresh: bool = True) -> "_View":
        """The palace as it is now (refreshed: another writer went between two slices); `done` kept."""
        if refresh:
            palace.refresh(embedder=None)
        scan = palace.index.scan()
        return cls(scan, done_turns(scan.memories.values()) | (done or set()), Known(palace, scan.memories.values()))


def _candidates(palace: Palace, relpath: str, settings: Settings, window, generator, done: set[str],
                report: DistillReport, spent: dict) -> list[Candidate]:
    """One session's candidates not distilled before (heuristics, then the LLM for the uncertain turns);
    ValueError when the session cannot be read into candidates."""
    loaded = load_session(palace.root, relpath)
    picked = {t.id for t in loaded.turns if window.within(loaded.time_of(t) or "")}
    already = {t for t in picked if f"{loaded.id}/{t}" in done}
    clock = time.perf_counter()
    try:
        candidates, uncertain = extract_session(loaded, FITTED, settings.threshold, {"user": settings.user},
                                                settings.uncertain if generator is not None else None,
                                                (WORK_FITTED, settings.work_threshold))
    except OverflowError as exc:
        raise ValueError(str(exc)) from None
    report.turns += len(picked)
    report.already += len(already)
    candidates = [c for c in candidates if c.turn in picked and c.key not in done]
    spent["extract"] += time.perf_counter() - clock
    if generator is not None and uncertain:
        clock = time.perf_counter()
        from palace_cli.memory.llmstage import ask_llm

        fresh = [u for u in uncertain if u.turn.id in picked and f"{loaded.id}/{u.turn.id}" not in done]
        candidates += ask_llm(generator, fresh, report.llm)
        spent["llm"] += time.perf_counter() - clock
    if candidates or len(already) < len(picked):
        report.sessions += 1
    report.candidates += len(candidates)
    return candidates


def _keep(palace: Palace, settings: Settings, scan, known: Known, candidates: list[Candidate],
          report: DistillReport, done: set[str]) -> None:
    """Write, confirm or supersede each candidate of one session."""
    batch = PlainMemories(palace, scan)
    for candidate in candidates:
        key = candidate.key
        if key in done:
            continue  # two candidates of one turn (heuristics and the LLM): the first wins
        neighbour = known.nearest(candidate.about, candidate.content)
        if neighbour is not None and neighbour[1] >= settings.known:
            report.known.append({"turn": key, "source": candidate.source, "memory": neighbour[0],
                                 "score": round(neighbour[1], 3)})
            if not report.dry_run and neighbour[0] in scan.memories:
                batch.flush()  # the memory confirmed may be one of this session's, still to be written
                _confirm(palace, scan.memories[neighbour[0]], key, candidate.said)
            done.add(key)
            continue
        old = _current_holder(scan, candidate)
        fields = {"about": candidate.about}
        if candidate.kind:
            fields["kind"] = candidate.kind
        fields.update({"source": candidate.source, "session": candidate.session, "turn": candidate.turn})
        if candidate.part > 1:
            fields["part"] = candidate.part
        fields["confidence"] = candidate.confidence
        if candidate.attribute:
            fields["attribute"] = candidate.attribute
        if candidate.by != "heuristic":
            fields["extracted_by"] = candidate.by
        entry = {"about": candidate.about, "type": candidate.type, "kind": candidate.kind or None,
                 "subject": candidate.subject, "content": candidate.content, "source": candidate.source, "turn": key,
                 "valid_from": candidate.valid_from.isoformat() if candidate.valid_from else None,
                 "confidence": candidate.confidence, "supersedes": old.id if old else None}
        done.add(key)
        if report.dry_run:
            report.written.append(entry)
            known.add(key, candidate.about, candidate.content)
            continue
        # What was said in a chat is quoted, not linked: `[[Home]]` there must not become a live link here.
        memory = batch.write(inert_links(candidate.subject), settings.domain, inert_links(candidate.content),
                             type=candidate.type, fields=fields, valid_from=candidate.valid_from,
                             supersedes=[old.id] if old else None)
        entry.update(id=memory.id, path=memory.path)
        report.written.append(entry)
        known.add(memory.id, candidate.about, candidate.content)
        if old is not None:
            report.superseded.append({"old": old.id, "new": memory.id, "attribute": candidate.attribute})
            old.superseded_by = [*old.superseded_by, memory.id]
            known.drop(old.id)
    batch.flush()


def _current_holder(scan, candidate: Candidate):
    """The memory that holds the same person's value of the candidate's attribute now (not superseded and not
    newer than the candidate), or None."""
    if not candidate.attribute or candidate.valid_from is None:
        return None
    holders = [m for m in scan.memories.values()
               if m.meta.get("about") == candidate.about and m.meta.get("attribute") == candidate.attribute
               and not m.superseded_by and (said_on(m.valid_from) or date.min) <= candidate.valid_from]
    return max(holders, key=lambda m: (m.valid_from, m.id)) if holders else None


def _confirm(palace: Palace, memory, key: str, said: str | None) -> None:
    """Record on a memory that another turn said it again: `confirmed_by` gains the turn, `confirmed` the date."""
    listed = memory.meta.get("confirmed_by")
    listed = [str(item) for item in listed] if isinstance(listed, list) else []
    changes = {"confirmed_by": [*listed, key]}
    day = said_on(said) if said else None
    previous = said_on(memory.meta.get("confirmed")) if memory.meta.get("confirmed") else None
    if day is not None and (previous is None or day > previous):
        changes["confirmed"] = day
    set_fields(palace, memory.path, changes, f"confirm {memory.id}")
    memory.meta.update(changes)


def _generator(palace: Palace, settings: Settings, asked: bool | None):
    """The LLM for the uncertain turns: the [models] endpoint (cached); the local generator only when asked for
    (`--llm`, `[distill] llm = "always"`: the default 135M one does not help, docs/benchmarks.md); or None."""
    if asked is False or (asked is None and settings.llm == "never"):
        return None
    from palace_cli.backends import model_setting

    setting = model_setting(palace.config.models, "generator", palace.root)
    insisted = bool(asked) or settings.llm == "always"
    if setting.kind != "endpoint" and not (insisted and setting.kind in ("default", "path") and setting.path):
        if insisted:
            raise UsageError("the LLM stage needs a generator: set [models] endpoint and endpoint_model in "
                             "palace.toml, or install one (`palace models install`; docs/models.md)")
        return None
    from palace_cli.backends import generator_from_config
    from palace_cli.backends.cache import cached

    return cached(generator_from_config(palace.config.models, palace.root))
