"""Memory-palace JSON: the paper's memory schema and the public memory-palace skill's palace layout.

Accepted shapes, one per file:
- a palace `{name, theme, loci: [{id, name, anchor, description, parent, children, memories: [...]}]}`;
  each locus with memories becomes a domain (its id, slugified);
- a list of memories, or `{memories: [...]}`, or one memory object (the paper's schema:
  id, subject, image, content, anchor, verify_token, created, linked_to, ...);
- a Red Queen examination `{questions: [{id, question, recall_anchors: ["<memory id>: ..."]}]}`,
  which becomes benchmark queries rather than memories.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from palace_cli.errors import ImportFailed
from palace_cli.core.text import slugify
from palace_cli.importers.records import Batch, Record, check_unique, json_line_error, map_ids, safe_id

FORMAT = "memory-palace-json"
# memory key -> Record attribute; several spellings of one field (paper: snake_case, skill: camelCase)
KNOWN = {
    "id": "id", "subject": "subject", "image": "image", "content": "content", "anchor": "anchor",
    "verify_token": "verify", "verifyToken": "verify", "verify": "verify", "created": "created",
    "linked_to": "links", "linkedTo": "links", "links": "links", "keywords": "keywords", "tags": "keywords",
    "domain": "domain",
}
CONNECTORS = {"a", "an", "the", "of", "with", "and", "in", "on", "at", "to", "for"}


def read_memory_palace_json(path: Path, options: dict) -> Batch:
    """Read one JSON file or every *.json file of a directory (not recursive)."""
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() == ".json") if path.is_dir() else [path]
    if not files:
        raise ImportFailed(f"{path}: no .json files to import")
    batch = Batch(FORMAT, [])
    exams = []
    for file in files:
        data = _load(file)
        if isinstance(data, dict) and "loci" in data:
            _read_palace(file, data, batch)
        elif isinstance(data, dict) and isinstance(data.get("questions"), list):
            exams.append((file, data))
        elif isinstance(data, list) or (isinstance(data, dict) and ("memories" in data or "subject" in data)):
            items = data if isinstance(data, list) else data.get("memories", [data])
            where = "" if isinstance(data, list) else ("memories" if "memories" in data else "")
            if not isinstance(items, list):
                raise ImportFailed(f"{file.name}: `memories` must be a list")
            fallback = slugify(options.get("domain") or file.stem)
            for i, item in enumerate(items):
                origin = f"{file.name}: {where}[{i}]" if isinstance(data, list) or where else f"{file.name}: memory"
                batch.records.append(_record(file, origin, item, fallback, {}))
        else:
            raise ImportFailed(f"{file.name}: not a memory-palace file (expected a palace with `loci`, "
                               "a list of memories, a memory, or an examination with `questions`)")
    check_unique(batch.records)
    _map_ids(batch.records)
    for file, data in exams:
        batch.queries += _read_exam(file, data, {r.fields.get("source_id", r.id): r.id for r in batch.records})
    return batch


def _load(file: Path):
    raw = file.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportFailed(f"{file.name}: not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise json_line_error(file.name, exc) from None
    except RecursionError:
        raise ImportFailed(f"{file.name}: JSON nested too deeply to read") from None


def _read_palace(file: Path, data: dict, batch: Batch) -> None:
    loci = data["loci"]
    if not isinstance(loci, list):
        raise ImportFailed(f"{file.name}: `loci` must be a list")
    palace_name = str(data.get("name") or file.stem)
    for li, locus in enumerate(loci):
        where = f"{file.name}: loci[{li}]"
        if not isinstance(locus, dict):
            raise ImportFailed(f"{where}: a locus must be an object")
        if not str(locus.get("id") or "").strip():
            raise ImportFailed(f'{where}: missing "id"')
        memories = locus.get("memories") or []
        if not isinstance(memories, list):
            raise ImportFailed(f'{where}: "memories" must be a list')
        domain = slugify(str(locus["id"]))
        if memories:
            name = str(locus.get("name") or "").strip()
            description = str(locus.get("description") or "").strip()
            batch.domain_specs.setdefault(domain, {
                "description": f"{name}: {description}" if name and description else (name or description),
                "aliases": [name] if name and slugify(name) != domain else [],
                "anchor": str(locus.get("anchor") or "").strip(),
                "parent": slugify(str(locus["parent"])) if locus.get("parent") else "",
                "source": f"{FORMAT}:{file.name}",
            })
        for mi, item in enumerate(memories):
            batch.records.append(_record(file, f"{where}.memories[{mi}]", item, domain, {"palace": palace_name}))


def _record(file: Path, origin: str, item, domain: str, context: dict) -> Record:
    if not isinstance(item, dict):
        raise ImportFailed(f"{origin}: a memory must be an object")
    values, unknown = {}, {}
    for key, value in item.items():
        if key in KNOWN:
            values[KNOWN[key]] = value
        else:
            unknown[key] = value
    for name in ("id", "subject"):
        if values.get(name) is None or not str(values[name]).strip():
            raise ImportFailed(f'{origin}: missing "{name}"')
    label = f'{origin} (id "{values["id"]}")'
    for name in ("subject", "image", "content", "anchor", "verify", "created", "domain"):
        if values.get(name) is not None and not isinstance(values[name], (str, int, float)):
            raise ImportFailed(f'{label}: "{name}" must be a string')
    for name in ("links", "keywords"):
        value = values.get(name)
        if value is not None and not (isinstance(value, list) and all(isinstance(v, (str, int)) for v in value)):
            raise ImportFailed(f'{label}: "{name}" must be a list of strings')
    image = str(values.get("image") or "").strip()
    anchor = str(values.get("anchor") or "").strip()
    verify = values.get("verify")
    source = {**context, **unknown}
    return Record(
        id=str(values["id"]).strip(), subject=str(values["subject"]).strip(), origin=origin,
        source=f"{FORMAT}:{file.name}", domain=slugify(str(values.get("domain") or domain)),
        anchor=anchor or derive_anchor(image), anchor_derived=not anchor, image=image,
        content=str(values.get("content") or "").strip(),
        keywords=[str(k).strip() for k in values.get("keywords") or [] if str(k).strip()],
        links=[str(k).strip() for k in values.get("links") or [] if str(k).strip()],
        verify=str(verify).strip() if verify is not None and str(verify).strip() else None,
        created=str(values.get("created") or "").strip(),
        fields={"source": source} if source else {},
    )


def _map_ids(records: list[Record]) -> None:
    """Source ids become note ids; an id that had to change keeps the original in `source_id`, links follow."""
    mapping = map_ids([r.id for r in records])
    for record in records:
        note_id = mapping[record.id]
        if note_id != record.id:
            record.fields = {"source_id": record.id, **record.fields}
            record.id = note_id
        record.links = [mapping.get(link, link) for link in record.links]


def derive_anchor(image: str) -> str:
    """The scene's hook from a skill-style image: the first run of 2+ CAPITALISED words (else of one) in it."""
    runs = []
    for sentence in re.split(r"(?<=[.!?])\s+", image):
        run, pending = [], []
        for raw in sentence.split() + [""]:
            word = raw.strip(".,!?;:'\"()[]")
            if len(word) > 1 and word.upper() == word and any(c.isalpha() for c in word):
                run += pending + [word]
                pending = []
            elif run and word.lower() in CONNECTORS and not pending:
                pending = [word]
            else:
                if run:
                    runs.append(run)
                run, pending = [], []
            if raw[-1:] in ".,!?;:)" and run:  # punctuation ends a run
                runs.append(run)
                run, pending = [], []
    best = next((r for r in runs if len(r) > 1), runs[0] if runs else [])
    if len(best) > 5:  # "PARKING LOT with PERMANENT PAINTED LINES": keep the words before the connector
        cut = next((i for i, w in enumerate(best) if w.lower() in CONNECTORS), 5)
        best = best[: min(cut, 5)]
    return " ".join(best).lower()


def _read_exam(file: Path, data: dict, ids: dict[str, str]) -> list[dict]:
    """Questions become {qid, query, expected, kind} queries; expected = the memory ids their recall anchors name."""
    queries = []
    for i, question in enumerate(data["questions"]):
        where = f"{file.name}: questions[{i}]"
        if not isinstance(question, dict) or not str(question.get("question") or "").strip():
            raise ImportFailed(f'{where}: missing "question"')
        anchors = question.get("recall_anchors") or []
        if not isinstance(anchors, list):
            raise ImportFailed(f'{where}: "recall_anchors" must be a list')
        named = [m.group(1) for a in anchors if (m := re.match(r"\s*([\w.-]+)\s*:", str(a)))]
        queries.append({"qid": f"{slugify(file.stem)}-{question.get('id', i + 1)}",
                        "query": str(question["question"]).strip(),
                        "expected": [ids.get(n) or safe_id(n) for n in named], "kind": "red-queen",
                        "origin": where})
    return queries
