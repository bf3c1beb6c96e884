"""`palace bench similar`: how well the similar-note warning tells true duplicates from close neighbours.

Three kinds of pair, scored the way `palace add` scores a new memory:

- duplicates: hand-written rewrites of existing memories (a JSON-lines file: `of`, `style`, subject,
  anchor, keywords, image, content), compared as a text with every memory; caught when the memory it
  rewrites is among the three shown and at or above the threshold;
- updates: each newer version of a fact against the version it superseded (what `add --supersedes`
  would have been warned about);
- neighbours: every memory valid now against its nearest other memory, its own versions left out; a
  score at or above the threshold is a warning a genuinely new memory on that topic would have raised.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from palace_cli.errors import PalaceError
from palace_cli.palace import Palace
from palace_cli.search.similar import METHODS, similar, threshold
from palace_cli.bench.retrieval import _auc

SHOWN = 3  # `add` names at most the three nearest memories
GRIDS = {"dense": [round(0.5 + 0.05 * i, 2) for i in range(10)],
         "lexical": [round(0.1 + 0.05 * i, 2) for i in range(11)]}


@dataclass
class Duplicate:
    """A rewrite of memory `of`, as the text a new note with these fields would be compared by."""

    of: str
    style: str
    text: str


def load_duplicates(path: Path) -> list[Duplicate]:
    """Read a JSON-lines file of rewrites; a bad line raises PalaceError naming file and line."""
    out = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            parts = [data.get("subject", ""), data.get("anchor", ""), ", ".join(data.get("keywords") or []),
                     data.get("image", ""), data.get("content", "")]
            out.append(Duplicate(str(data["of"]), str(data.get("style", "")), "\n".join(p for p in parts if p)))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise PalaceError(f"{path}:{number}: not a duplicate line ({exc})") from None
    return out


def _rate(values: list[float], limit: float) -> float | None:
    return round(sum(v >= limit for v in values) / len(values), 4) if values else None


def run_similar_bench(palace: Palace, duplicates: list[Duplicate], methods=METHODS, progress=None) -> dict:
    """Scores of duplicates, updates and nearest neighbours per method, and what each threshold would flag."""
    palace.refresh()
    versions = palace.index.versions()
    memories = palace.index.scan(light=True).memories
    missing = sorted({d.of for d in duplicates} - set(memories))
    if missing:
        raise PalaceError(f"duplicates rewrite memories this palace does not have: {', '.join(missing)}")
    current = [i for i in sorted(memories) if versions.valid_at(i)]
    newer = [i for i in sorted(memories) if versions.predecessors.get(i)]
    dense_ok = palace.index.catalog().matrix is not None and palace.index.dense().embedder is not None
    summary = {"palace": palace.config.name, "memories": len(memories), "duplicates": len(duplicates),
               "updates": sum(len(versions.predecessors[i]) for i in newer), "neighbours": len(current),
               "methods": {}}
    for method in [m for m in methods if m == "lexical" or dense_ok]:
        dups = []
        for done, dup in enumerate(duplicates, 1):
            found = similar(palace, text=dup.text, k=10, method=method).neighbours
            ids = [n.id for n in found]
            rank = ids.index(dup.of) + 1 if dup.of in ids else None
            score = found[rank - 1].score if rank else 0.0
            dups.append({"of": dup.of, "style": dup.style, "rank": rank, "score": round(score, 4),
                         "shown": round(score, 4) if rank and rank <= SHOWN else 0.0,
                         "best_other": round(max((n.score for n in found if n.id != dup.of), default=0.0), 4)})
            if progress:
                progress(f"{method}: duplicates", done, len(duplicates))
        updates = []
        for memory_id in newer:
            found = {n.id: n.score for n in similar(palace, ref=memory_id, k=10, method=method,
                                                    include_superseded=True).neighbours}
            updates += [{"new": memory_id, "old": old, "score": round(found.get(old, 0.0), 4)}
                        for old in versions.predecessors[memory_id]]
        neighbours = []
        for done, memory_id in enumerate(current, 1):
            found = similar(palace, ref=memory_id, k=1, method=method, exclude=versions.chain(memory_id)).neighbours
            if found:
                neighbours.append({"id": memory_id, "nearest": found[0].id, "score": round(found[0].score, 4)})
            if progress and done % 20 == 0:
                progress(f"{method}: neighbours", done, len(current))
        near = [n["score"] for n in neighbours]
        rows = []
        for limit in GRIDS[method]:
            rows.append({"threshold": limit,
                         "rewrites": _rate([d["shown"] for d in dups if d["style"] == "rewrite"], limit),
                         "agent_facts": _rate([d["shown"] for d in dups if d["style"] == "agent"], limit),
                         "updates": _rate([u["score"] for u in updates], limit),
                         "neighbours": _rate(near, limit)})
        summary["methods"][method] = {
            "threshold": threshold(palace, method),
            "ranked_first": round(sum(d["rank"] == 1 for d in dups) / len(dups), 4) if dups else 0.0,
            "auc_duplicate_vs_neighbour": round(_auc([d["score"] for d in dups], near), 4),
            "duplicate_median": round(statistics.median([d["score"] for d in dups]), 4) if dups else 0.0,
            "update_median": round(statistics.median([u["score"] for u in updates]), 4) if updates else None,
            "neighbour_median": round(statistics.median(near), 4) if near else 0.0,
            "neighbour_max": round(max(near), 4) if near else 0.0,
            "grid": rows, "duplicates": dups, "updates": updates,
            "closest_neighbours": sorted(neighbours, key=lambda n: -n["score"])[:5],
        }
    return summary


def markdown_report(summary: dict) -> str:
    """The summary as Markdown: one table per method, the default threshold's row in bold."""
    lines = [f"{summary['palace']}: {summary['memories']} memories; {summary['duplicates']} hand-written duplicates, "
             f"{summary['updates']} superseded versions, {summary['neighbours']} memories valid now", ""]
    for method, data in summary["methods"].items():
        update = "" if data["update_median"] is None else f"update {data['update_median']:.2f}, "
        lines += [f"{method}: default threshold {data['threshold']:g}; the rewritten memory ranked first for "
                  f"{data['ranked_first']:.0%} of duplicates; AUC duplicate vs nearest neighbour "
                  f"{data['auc_duplicate_vs_neighbour']:.3f}; medians: duplicate {data['duplicate_median']:.2f}, "
                  f"{update}nearest neighbour {data['neighbour_median']:.2f} (max {data['neighbour_max']:.2f})", "",
                  "| threshold | rewrites warned | agent facts warned | updates warned | neighbours warned (false) |",
                  "|---|---|---|---|---|"]
        for row in data["grid"]:
            cells = [f"{row['threshold']:.2f}"] + ["-" if row[name] is None else f"{row[name]:.0%}"
                                                   for name in ("rewrites", "agent_facts", "updates", "neighbours")]
            if abs(row["threshold"] - data["threshold"]) < 1e-9:
                cells = [f"**{c}**" for c in cells]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)
