"""What verify needs from a palace: the handed units' tokens and texts, whether a cited unit exists, which
memories are not valid at the moment asked about. `verify.py` stays pure; this module reads the palace."""

from __future__ import annotations

from datetime import datetime

from palace_cli.answers.verify import Verdict, verify_response
from palace_cli.core.dates import format_moment, parse_moment
from palace_cli.errors import NotFound, UsageError
from palace_cli.palace import Palace
from palace_cli.search.hits import context_entry


def memory_text(memory) -> str:
    """What a quote of a memory may come from: its subject, anchor, Image, Content and the rest of its body."""
    return "\n".join(part for part in (memory.subject, memory.anchor, memory.image, memory.content, memory.body)
                     if part)


def turn_units(palace: Palace, keys: list[str]) -> dict[str, dict]:
    """key -> what verify needs of a turn the palace holds: {id, kind: "turn", text (`Speaker: text`, what a
    quote of it may come from), path, line}."""
    rows = palace.index.store.turns(list(dict.fromkeys(keys))) if keys else {}
    return {key: {"id": key, "kind": "turn", "text": f"{row['speaker']}: {row['text']}", "path": row["path"],
                  "line": row["line"]} for key, row in rows.items()}


def turn_texts(palace: Palace, keys: list[str]) -> dict[str, str]:
    """key -> what a quote of the turn may come from: `Speaker: text`, for the turns the palace holds."""
    return {key: unit["text"] for key, unit in turn_units(palace, keys).items()}


def memory_unit(memory) -> dict:
    """What verify needs of a memory: {id, subject, verify, text, path, line}."""
    return {**context_entry(memory), "text": memory_text(memory), "path": memory.path, "line": memory.line}


def handed_units(palace: Palace, refs: list[str]) -> list[dict]:
    """What verify needs of the units handed to a model, each named exactly: a memory (memory_unit) by id or
    path, a turn (turn_units) by its key `session/turn`."""
    out = []
    turns = turn_units(palace, [r for r in refs if "/" in r and not r.endswith(".md")])
    for ref in dict.fromkeys(refs):
        if ref in turns:
            out.append(turns[ref])
            continue
        try:
            memory = palace.memory(ref)
        except NotFound:
            if "/" in ref:
                raise NotFound(f"no memory or conversation turn {ref!r} in this palace") from None
            raise
        out.append(memory_unit(memory))
    return out


def handed_memories(palace: Palace, refs: list[str]) -> list[dict]:
    """What verify needs of the memories (and turns) handed to a model; kept for older callers."""
    return handed_units(palace, refs)


def superseded_among(palace: Palace, ids, when: datetime | None = None) -> dict[str, dict]:
    """The memories among `ids` not valid at `when` (None: now): id -> {status, superseded_by, valid_from,
    valid_until}; status is superseded, expired or future (not yet valid)."""
    versions = palace.index.versions()
    out = {}
    for memory_id in ids:
        if versions.known(memory_id) and not versions.valid_at(memory_id, when):
            out[memory_id] = {"status": versions.status(memory_id, when),
                              "superseded_by": list(versions.successors.get(memory_id, [])),
                              "valid_from": format_moment(versions.start(memory_id)),
                              "valid_until": format_moment(versions.end(memory_id))}
    return out


def with_texts(palace: Palace, handed: list[dict]) -> list[dict]:
    """The handed entries with the text of each unit (quotes are checked against it) and where it is (path, line:
    [path:line] citations name it) filled in where the palace knows them."""
    def lacking(entry: dict) -> bool:
        return entry.get("text") is None or entry.get("path") is None

    turns = turn_units(palace, [e["id"] for e in handed if lacking(e) and e.get("kind") == "turn"])
    out = []
    for entry in handed:
        if lacking(entry):
            if entry.get("kind") == "turn":
                known = turns.get(entry["id"], {})
            else:
                try:
                    known = memory_unit(palace.memory(entry["id"], refresh=False))
                except NotFound:
                    known = {}
            entry = {**entry, **{name: known[name] for name in ("text", "path", "line")
                                 if entry.get(name) is None and name in known}}
        out.append(dict(entry))
    return out


def unit_lookup(palace: Palace):
    """A function: a cited id -> "turn" or "memory" when the palace holds such a unit, else None."""
    def lookup(unit_id: str):
        if "/" in unit_id and turn_texts(palace, [unit_id]):
            return "turn"
        try:
            palace.memory(unit_id, refresh=False)
        except (NotFound, UsageError):
            return None
        return "memory"
    return lookup


def verify_answer(response: str, handed: list[dict], palace: Palace | None = None, rule: str = "any",
                  as_of=None) -> Verdict:
    """Check an answer against the units handed over; with a palace, also against every other token and unit in
    it (a token or [turn ID] of a unit that was not handed over means the answer did not come from the
    context), every quote against its unit's words, and whether a cited memory was superseded by the moment
    asked about (now, or `as_of`): a stale answer."""
    all_tokens, superseded, when, lookup = None, None, None, None
    if palace is not None:
        try:
            when = parse_moment(as_of)
        except ValueError as exc:
            raise UsageError(f"--as-of: {exc}") from None
        palace.refresh(embedder=None)
        all_tokens = palace.index.store.tokens()
        handed = with_texts(palace, handed)
        superseded = superseded_among(palace, [str(e["id"]) for e in handed if e.get("kind", "memory") == "memory"],
                                      when)
        lookup = unit_lookup(palace)
    return verify_response(response, handed, all_tokens, rule=rule, superseded=superseded,
                           as_of=format_moment(when), lookup=lookup)
