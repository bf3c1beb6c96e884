"""Distill on a labelled agent-session file with the shipped weights, scored two ways: the set's own rule (the
labelled turn, and half of the label's content words; also with its content words as they were before
contractions and possessives were read whole) and the turn alone (a memory citing a labelled turn,
whatever its words). The gap between them is wording; the turn-only figure is whether distill finds what to keep.
Used for the held-out sessions (docs/benchmarks.md, "The held-out sessions: the figure that counts").

usage: python scripts/distill_turns.py benchmarks/agent-sessions-heldout.jsonl [more files]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from palace_cli.bench import worksessions
from palace_cli.editing.initplan import init_palace
from palace_cli.importers import import_path
from palace_cli.memory.distill import distill
from palace_cli.palace import Palace


def produced_for(sessions: list, work: Path) -> list:
    """Each session imported into a palace of its own (named for its user) and distilled, as the bench's palace run."""
    transcripts = worksessions.write_transcripts(sessions, work / "transcripts")
    out = []
    for session in sessions:
        root = init_palace(work / session.name, "distill turns")
        with (root / "palace.toml").open("a", encoding="utf-8") as handle:
            handle.write(f"\n[identity]\nname = {json.dumps(session.user)}\n")
        palace = Palace(root)
        import_path(palace, transcripts[session.name])
        palace.refresh(embedder=None)
        distill(palace, llm=False)
        for memory in palace.index.scan().memories.values():
            if memory.meta.get("turn"):
                out.append(worksessions.Produced(session.name, str(memory.meta["turn"]),
                                                 str(memory.meta.get("kind") or memory.type), memory.content))
    return out


def report(path: Path) -> None:
    sessions = worksessions.load_set(path)
    with tempfile.TemporaryDirectory() as work:
        produced = produced_for(sessions, Path(work))
    result = worksessions.score(produced, sessions)
    labels = [label for session in sessions for label in session.labels]
    labelled = {(label.session, label.turn) for label in labels}
    cited = {(memory.session, memory.turn) for memory in produced}
    turn_recall = sum((label.session, label.turn) in cited for label in labels) / max(1, len(labels))
    turn_precision = sum((m.session, m.turn) in labelled for m in produced) / max(1, len(produced))
    print(f"{path.name}: {len(labels)} labels, {len(produced)} memories")
    print(f"  the set's rule: recall {result['recall']:.3f} {result['recall_ci']}, "
          f"precision {result['precision']:.3f} {result['precision_ci']}")
    before = worksessions.score(produced, sessions, content=worksessions.content_before_possessives)
    print(f"  the set's rule, contractions and possessives cut at the apostrophe (before): "
          f"recall {before['recall']:.3f}, precision {before['precision']:.3f}")
    print(f"  the turn alone: recall {turn_recall:.3f}, precision {turn_precision:.3f}")
    for kind, figures in result["by_kind"].items():
        print(f"  {kind}: {figures['labels']} labels, {figures['produced']} memories, "
              f"recall {figures['recall']:.3f}, precision {figures['precision']:.3f}")


if __name__ == "__main__":
    for name in sys.argv[1:] or ["benchmarks/agent-sessions-heldout.jsonl"]:
        report(Path(name))
