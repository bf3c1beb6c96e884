"""Where the words go missing: for each labelled memory that distill found the turn of but not the words (a memory
citing the labelled turn that fails the set's half-the-words rule), where the label's missing content words are:
(a) in the labelled turn itself, left out by distill; (b) in the agent's turn just before (the proposal a "yes" takes,
the question answered); (c) elsewhere in the session (another turn, a tool's output, the folder, the user's name);
(d) nowhere (the label's own paraphrase). Also the labels with no memory on their turn, by kind and speaker.
Used for the seventh step of issue 33 (docs/benchmarks.md).

usage: python scripts/distill_wording.py benchmarks/agent-sessions.jsonl [more files] [--show]
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from distill_turns import produced_for  # noqa: E402

from palace_cli.bench import worksessions  # noqa: E402

PLACES = ("a: same turn", "b: agent's turn before", "c: elsewhere in the session", "d: nowhere")


def places_of(label, session) -> dict[str, set[str]]:
    """The label's content words by where in the session they are first found."""
    turns = session.turns
    here = worksessions.content(turns[label.position]["text"])
    before = set()
    for turn in reversed(turns[:label.position]):
        if turn["speaker"] == "assistant" and turn.get("text"):
            before = worksessions.content(turn["text"])
            break
    elsewhere = worksessions.content(" ".join([session.user, session.cwd.replace("/", " "), *(
        f"{t.get('text') or ''} {t.get('tool') or ''} {t.get('tool_output') or ''}" for t in turns)]))
    return {"here": here, "before": before, "elsewhere": elsewhere}


def classify(files: list[Path], show: bool = False) -> None:
    words_missing, memories_by, fixes, no_candidate = Counter(), Counter(), Counter(), Counter()
    taken = 0
    examples = []
    for path in files:
        sessions = worksessions.load_set(path)
        with tempfile.TemporaryDirectory() as work:
            produced = produced_for(sessions, Path(work))
        result = worksessions.score(produced, sessions)
        matched = set(result["matched"])
        by_name = {s.name: s for s in sessions}
        for session in sessions:
            for label in session.labels:
                if label.id in matched:
                    continue
                on_turn = [p for p in produced if p.session == label.session and p.turn == label.turn]
                speaker = session.turns[label.position]["speaker"]
                if not on_turn:
                    no_candidate[(label.kind, speaker)] += 1
                    continue
                wanted = worksessions.content(label.text)
                best = max(on_turn, key=lambda p: len(wanted & worksessions.content(p.text)))
                found = worksessions.content(best.text)
                if 2 * len(wanted & found) >= len(wanted):
                    taken += 1  # its memory went to another label of the turn (one to one)
                    continue
                places = places_of(label, by_name[label.session])
                missing = wanted - found
                where = {}
                for word in missing:
                    where[word] = (PLACES[0] if word in places["here"] else PLACES[1] if word in places["before"]
                                   else PLACES[2] if word in places["elsewhere"] else PLACES[3])
                    words_missing[where[word]] += 1
                counts = Counter(where.values())
                memories_by[counts.most_common(1)[0][0]] += 1
                need = (len(wanted) + 1) // 2 - len(wanted & found)
                gained = 0
                for place in PLACES:
                    gained += counts[place]
                    if gained >= need:
                        fixes[place] += 1
                        break
                examples.append((path.name, label, best, where))
    total = sum(memories_by.values())
    print(f"labels on a found turn failing the word rule: {total} (+{taken} whose memory matched another label)")
    print("missing words by place:", dict(words_missing))
    print("memories by the place most of their missing words are:", dict(memories_by))
    print("memories by the furthest place needed to pass (a, then a+b, ...):", dict(fixes))
    print("labels with no memory on their turn (kind, speaker):", dict(sorted(no_candidate.items())))
    if show:
        for name, label, best, where in examples:
            print(f"\n[{name} {label.turn} {label.kind}] LABEL: {label.text}\n  MEMORY: {best.text}")
            for place in PLACES:
                words = sorted(w for w, p in where.items() if p == place)
                if words:
                    print(f"  {place[:1]}: {' '.join(words)}")


if __name__ == "__main__":
    show = "--show" in sys.argv
    classify([Path(a) for a in sys.argv[1:] if a != "--show"] or [Path("benchmarks/agent-sessions.jsonl")], show)
