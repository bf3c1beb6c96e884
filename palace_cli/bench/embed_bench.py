"""`palace bench embed`: texts/s of the embedder on short texts, 1.7 KB notes and queries, old path against new;
with `--vault`, units/s of each embedder setting on a synthetic vault's units (`run_units`).

Every configuration is a `LlamaCppEmbedder` over the same GGUF file, loaded once; each round runs all of
them on the same texts in a rotated order, so a machine that gets busier or quieter during the run does not
favour one of them. `old` is the embedder as it was before batching (one text per decode, no flash
attention, texts cut at 512 tokens, one thread); the others add one change at a time up to `new`, today's
default. Wall-clock rates depend on what else runs; CPU seconds per text much less, so both are reported.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path

from palace_cli.progress import Progress
from palace_cli.bench.index_bench import calibration_s
from palace_cli.bench.synth import NoteFactory, VaultFactory

# name -> LlamaCppEmbedder options; each adds one change to the one before
CONFIGS: dict[str, dict] = {
    "old": {"max_tokens": 512, "flash_attn": False, "pack": False, "workers": 1},
    "cut": {"flash_attn": False, "pack": False, "workers": 1},
    "cut+flash": {"pack": False, "workers": 1},
    "cut+flash+pack": {"workers": 1},
    "new": {},
}


def short_texts(count: int | None, seed: int = 0, locomo: Path | None = None) -> list[str]:
    """`count` chat turns (None: every one): LoCoMo's own (speaker: text) when a file is given, else synthetic."""
    if locomo is not None:
        turns = []
        for sample in json.loads(Path(locomo).read_text(encoding="utf-8")):
            conversation = sample["conversation"]
            sessions = sorted((k for k in conversation if k.startswith("session_") and k[8:].isdecimal()),
                              key=lambda k: int(k[8:]))
            for key in sessions:
                for turn in conversation[key]:
                    caption = f" [image: {turn['blip_caption']}]" if turn.get("blip_caption") else ""
                    turns.append(f"{turn['speaker']}: {turn['text']}{caption}")
        return turns[:count] if count is not None else turns
    factory = NoteFactory(seed, 1000)
    return [f"{('Ana', 'Ben')[i % 2]}: {factory.short_text()}" for i in range(count or 0)]


def query_texts(count: int, seed: int = 0, locomo: Path | None = None) -> list[str]:
    """`count` questions: LoCoMo's own when a file is given, else the first eight words of synthetic turns."""
    if locomo is not None:
        questions = [qa["question"] for sample in json.loads(Path(locomo).read_text(encoding="utf-8"))
                     for qa in sample.get("qa", []) if qa.get("question")]
        return questions[:count]
    return [" ".join(text.split()[1:9]) for text in short_texts(count, seed + 1)]


def note_texts(count: int, seed: int = 0) -> list[str]:
    """The embedded text (subject, anchor, keywords, image, content) of `count` synthetic 1.7 KB notes."""
    from palace_cli.core.notefile import parse_note

    factory = NoteFactory(seed, max(count, 1000))
    texts = []
    for index in range(count):
        domain, note_id, text = factory.note(index)
        texts.append(parse_note(text, f"memories/{domain}/{note_id}.md", domain).search_text())
    return texts


def vault_texts(notes: int, seed: int = 0) -> list[str]:
    """The texts a palace embeds for `notes` synthetic vault notes (bench/synth.py): each note's, then its sections'."""
    from palace_cli.core.notefile import parse_note
    from palace_cli.index.sections import section_units, unit_text

    factory = VaultFactory(seed, max(notes, 1))
    texts = []
    for index in range(notes):
        relpath, text = factory.vault_note(index)
        memory = parse_note(text, relpath, relpath.split("/", 1)[0])
        texts.append(memory.search_text())
        texts += [unit_text(memory.subject, unit.heading, unit.text) for unit in section_units(memory)]
    return texts


def run_units(settings: list[str], texts: list[str], rounds: int = 3, progress: Progress | None = None) -> dict:
    """Embed `texts` with each palace.toml embedder setting ("default", "default:128", "static" ...), `BATCH` texts
    a call as a refresh does, in rotated order round after round; JSON-ready units/s, CPU ms a unit, the
    transformer's tokens a unit and the share of units whose vector came from the transformer."""
    from palace_cli.backends import load_model, model_setting
    from palace_cli.errors import ModelError
    from palace_cli.index.vectors import BATCH

    embedders = {}
    for name in settings:
        embedder = load_model(model_setting({"embedder": name}, "embedder"))
        if embedder is None:
            raise ModelError(f"embedder {name!r}: no embedding model installed; run `palace models install`")
        embedder.embed_batch(["warm up the model"])
        embedders[name] = embedder
    results: dict = {
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
                    "load_avg_1m": _load(), "calibration_s": round(calibration_s(), 3)},
        "units": len(texts), "mean_chars": round(statistics.mean(map(len, texts)), 1) if texts else 0,
        "rounds": rounds, "embedders": {name: e.model_id for name, e in embedders.items()},
    }
    walls: dict = {name: [] for name in settings}
    cpus: dict = {name: [] for name in settings}
    usage: dict = {}
    for round_ in range(rounds):
        for name in settings[round_ % len(settings):] + settings[: round_ % len(settings)]:
            embedder = embedders[name]
            before = dict(getattr(embedder, "usage", {}))
            started, cpu = time.perf_counter(), time.process_time()
            for start in range(0, len(texts), BATCH):
                embedder.embed_batch(texts[start : start + BATCH])
            walls[name].append(time.perf_counter() - started)
            cpus[name].append(time.process_time() - cpu)
            after = getattr(embedder, "usage", {})
            usage[name] = {key: after[key] - before.get(key, 0) for key in after}
        if progress:
            progress(f"round {round_ + 1} of {rounds} done, load {_load()}", round_ + 1, rounds)
    rows = {}
    for name in settings:
        used = usage.get(name) or {}
        count = used.get("texts") or len(texts)
        rows[name] = {
            "units_per_s": round(len(texts) / statistics.median(walls[name]), 1),
            "best_units_per_s": round(len(texts) / min(walls[name]), 1),
            "cpu_ms_per_unit": round(statistics.median(cpus[name]) / len(texts) * 1000, 2),
            "model_tokens_per_unit": round(used["model_tokens"] / count, 1) if "model_tokens" in used else None,
            "full_model_share": round(used["model_texts"] / count, 3) if "model_texts" in used else None,
        }
    results["results"] = rows
    results["machine"]["load_avg_1m_after"] = _load()
    return results


def run(model: Path, shorts: list[str], notes: list[str], queries: list[str] | None = None, rounds: int = 3,
        configs: list[str] | None = None, max_tokens: int | None = None, progress: Progress | None = None) -> dict:
    """Measure each configuration on each text set for `rounds` rounds; returns the JSON-ready results.

    Short texts and notes are embedded in one call per set, as an index build does; queries one per call,
    as a search does (their per-call latency is reported too).
    """
    import numpy as np

    from palace_cli.backends.install import default_model_options
    from palace_cli.backends.llamacpp import LlamaCppEmbedder

    names = configs or list(CONFIGS)
    # the new configurations cut where palace would: the default model's own limit, unless told otherwise
    defaults = {"max_tokens": max_tokens} if max_tokens else default_model_options("embedder", Path(model))
    embedders = {name: LlamaCppEmbedder(model, **{**defaults, **CONFIGS[name]}) for name in names}
    sets = {name: texts for name, texts in (("short", shorts), ("notes", notes), ("queries", queries)) if texts}
    # token counts before any cut: a vector can only match the old path's if neither path cut its text
    lengths = {name: np.array([len(embedders[names[0]].tokenize(t, cut=False)) for t in texts])
               for name, texts in sets.items()}
    results: dict = {
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
                    "load_avg_1m": _load(), "calibration_s": round(calibration_s(), 3)},
        "model": str(model), "rounds": rounds, "configs": {n: {**defaults, **CONFIGS[n]} for n in names},
        "sets": {name: {"texts": len(texts), "mean_chars": round(statistics.mean(map(len, texts)), 1),
                        "mean_tokens": round(float(lengths[name].mean()), 1)}
                 for name, texts in sets.items()},
    }
    walls: dict = {}
    cpus: dict = {}
    vectors: dict = {}
    calls: dict = {}  # per-call seconds of the queries
    for round_ in range(rounds):
        order = names[round_ % len(names):] + names[: round_ % len(names)]
        for name in order:
            for set_name, texts in sets.items():
                started, cpu = time.perf_counter(), time.process_time()
                if set_name == "queries":
                    vectors[(name, set_name)] = np.vstack([_timed(embedders[name], q, calls.setdefault(name, []))
                                                           for q in texts])
                else:
                    vectors[(name, set_name)] = embedders[name].embed_batch(texts)
                walls.setdefault((name, set_name), []).append(time.perf_counter() - started)
                cpus.setdefault((name, set_name), []).append(time.process_time() - cpu)
        if progress:
            progress(f"round {round_ + 1} of {rounds} done, load {_load()}", round_ + 1, rounds)
    table = {}
    for set_name, texts in sets.items():
        base = statistics.median(walls[(names[0], set_name)])
        rows = {}
        for name in names:
            wall = statistics.median(walls[(name, set_name)])
            old, now = vectors[(names[0], set_name)], vectors[(name, set_name)]
            kept = lengths[set_name] <= min(embedders[name].max_tokens, embedders[names[0]].max_tokens)
            cosines = np.sum(old * now, axis=1)[kept]
            rows[name] = {
                "texts_per_s": round(len(texts) / wall, 1),
                "best_texts_per_s": round(len(texts) / min(walls[(name, set_name)]), 1),
                "cpu_ms_per_text": round(statistics.median(cpus[(name, set_name)]) / len(texts) * 1000, 2),
                "speedup": round(base / wall, 2),
                "texts_cut": int((lengths[set_name] > embedders[name].max_tokens).sum()),
                # over the texts neither path cut (None when every text was cut)
                "min_cosine_to_old": round(float(cosines.min()), 5) if kept.any() else None,
                "mean_cosine_to_old": round(float(cosines.mean()), 5) if kept.any() else None,
            }
            if set_name == "queries":
                ms = sorted(t * 1000 for t in calls[name])
                rows[name]["p50_ms"] = round(statistics.median(ms), 2)
                rows[name]["p95_ms"] = round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 2)
        table[set_name] = rows
    results["results"] = table
    results["machine"]["load_avg_1m_after"] = _load()
    return results


def _timed(embedder, text: str, into: list[float]):
    started = time.perf_counter()
    vector = embedder.embed_batch([text])
    into.append(time.perf_counter() - started)
    return vector


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:  # pragma: no cover
        return None
