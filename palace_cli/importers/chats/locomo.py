"""LoCoMo (Maharana et al., ACL 2024): very long conversations between two people, in sessions.

A file is a list of samples `{sample_id, conversation, qa, ...}`; `conversation` holds
`speaker_a`, `speaker_b`, and for each N a turn list `session_N` (`speaker`, `dia_id`, `text`,
optional `blip_caption` of a shared image) with its date `session_N_date_time` ("1:56 pm on 8 May,
2023"). Each LoCoMo session becomes one palace session; turn ids are LoCoMo's own (`D3:12`), which
the benchmark's evidence lists refer to. `qa`, summaries and observations are annotations, not
conversation, and are not imported.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from palace_cli.importers.chats.jsonstream import json_records
from palace_cli.conversations.model import ReadProblem, ReadResult, Session, Turn, clean_text, participants_of, text_id
from palace_cli.core.text import one_line, slug
from palace_cli.importers.chats.reading import RecordGuard, shown, text_value

FORMAT = SOURCE = "locomo"
SUFFIXES = (".json",)
KEYS = re.compile(r'"(?:speaker_a|session_1_date_time)"\s*:')
SESSION_KEY = re.compile(r"session_(\d+)")
DATE_KEY = re.compile(r"session_(\d+)_date_time")
DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y")


def locomo_time(text: str) -> str | None:
    """ISO time (to the minute) of a LoCoMo session date like "1:56 pm on 8 May, 2023"; None if unreadable."""
    for pattern in DATE_FORMATS:
        try:
            return datetime.strptime(" ".join(str(text).split()), pattern).strftime("%Y-%m-%dT%H:%M")
        except ValueError:
            continue
    return None


def read(path: Path, include: frozenset[str]) -> ReadResult:
    """Every session of every sample in a LoCoMo file (or in every .json file of a directory)."""
    result = ReadResult(FORMAT)
    files = [path] if path.is_file() else sorted(p for p in path.glob("*.json") if p.is_file())
    for file in files:
        where = shown(file)
        for number, line, sample in json_records(file, where, result.problems, "sample"):
            with RecordGuard(result.problems, where, line, f"sample {number}"):
                _sample(sample, where, line, number, result)
    return result


def sniff(head: str) -> bool:
    """True when a JSON file's first megabyte has the keys of LoCoMo samples."""
    return KEYS.search(head) is not None


def _sample(sample, where: str, line: int, number: int, result: ReadResult) -> None:
    def problem(message: str) -> None:
        result.problems.append(ReadProblem(where, line, message))

    if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
        problem(f"sample {number}: no `conversation` object; left out")
        return
    sample_id = text_value(sample.get("sample_id"), "sample_id") or f"sample-{number}"
    conversation = sample["conversation"]
    people = [str(conversation[k]) for k in ("speaker_a", "speaker_b") if conversation.get(k)]
    for n, (key, date_key) in sorted(_sessions(conversation, sample_id, problem).items()):
        entries = conversation[key]
        if not isinstance(entries, list):
            problem(f"{sample_id} {key}: not a list of turns; left out")
            continue
        raw_date = conversation.get(date_key) if date_key else None
        started = locomo_time(raw_date) if raw_date else None
        if raw_date and started is None:
            problem(f"{sample_id} {date_key}: cannot read the date {one_line(repr(raw_date), 80)}; "
                    "the session has none")
        turns = []
        for index, entry in enumerate(entries):
            label, turn, read = f"{sample_id} {key}[{index}]", None, False
            with RecordGuard(result.problems, where, line, label):
                turn, read = _turn(entry, label, problem), True
            if turn is not None:
                turns.append(turn)
            elif read and isinstance(entry, dict) and not problem_worthy(entry):
                result.left_out["empty"] += 1
        if not turns:
            continue
        session = Session(id=f"{SOURCE}-{slug(sample_id)}-s{n:02d}", source=SOURCE,
                          source_id=f"{sample_id}/session_{n}",
                          title=f"{sample_id}, session {n}", started=started,
                          participants=people + [p for p in participants_of(turns) if p not in people],
                          turns=turns, meta={"conversation": sample_id})
        session.stem = f"{slug(sample_id)}-s{n:02d}"
        result.add(session, where, line)


def _sessions(conversation: dict, sample_id: str, problem) -> dict[int, tuple[str, str | None]]:
    """Session number -> (its turn list's key, its date's key), by number whatever the spelling (`session_01`);
    a number spelled twice is reported and its second spelling left out."""
    dates = {}
    for key in conversation:
        if (match := DATE_KEY.fullmatch(key)):
            dates.setdefault(int(match.group(1)), key)
    sessions: dict[int, tuple[str, str | None]] = {}
    for key in conversation:
        if (match := SESSION_KEY.fullmatch(key)):
            n = int(match.group(1))
            if n in sessions:
                problem(f"{sample_id} {key}: session {n} again (it is `{sessions[n][0]}` too); left out")
                continue
            spelled = f"{key}_date_time"
            sessions[n] = (key, spelled if spelled in conversation else dates.get(n))
    return sessions


def problem_worthy(entry: dict) -> bool:
    """True when an entry lacks what every turn needs (a speaker and a dia_id): a malformed record."""
    return not entry.get("speaker") or not entry.get("dia_id")


def _turn(entry, where: str, problem) -> Turn | None:
    """A turn from one LoCoMo entry; a shared image's caption is kept as `[shares a photo: ...]`."""
    if not isinstance(entry, dict):
        problem(f"{where}: not a JSON object; left out")
        return None
    if problem_worthy(entry):
        missing = [k for k in ("speaker", "dia_id") if not entry.get(k)]
        problem(f"{where}: no {' or '.join(missing)}; left out")
        return None
    dia_id, speaker = text_value(entry["dia_id"], "dia_id"), text_value(entry["speaker"], "speaker")
    parts = [clean_text(str(entry.get("text") or ""))]
    if entry.get("blip_caption"):
        parts.append(f"[shares a photo: {' '.join(str(entry['blip_caption']).split())}]")
    text = clean_text("\n".join(p for p in parts if p.strip()))
    if not text:
        return None
    return Turn(text_id(dia_id), speaker, text)
