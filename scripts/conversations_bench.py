"""Conversation import and session-file parse times on a LoCoMo file (docs/conversations.md, "Speed").

    python scripts/conversations_bench.py ../shared/data/locomo/locomo-dev5.json [runs]

Each run: a fresh palace in a temp dir; `palace import` wall time (a subprocess, so Python start-up
is in it) and the same import again (idempotent: nothing written); then the same two in-process in a
second fresh palace; then in-process: read the source, parse every session file (texts in memory),
read and parse every session file. Prints the median and range of the runs.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from palace_cli.editing.authoring import init_palace
from palace_cli.conversations import parse_session, read_conversations, session_files
from palace_cli.importers import import_path
from palace_cli.palace import Palace


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def one_run(source: Path) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = init_palace(Path(tmp) / "p", name="bench")
        palace = [str(Path(sys.executable).parent / "palace")]
        command = palace + ["--palace", str(root), "import", str(source), "--json"]
        first = timed(lambda: subprocess.run(command, check=True, capture_output=True))
        again = timed(lambda: subprocess.run(command, check=True, capture_output=True))
        files = session_files(root)
        texts = [(rel, (root / rel).read_text(encoding="utf-8")) for rel, _, _ in files]
        parse = timed(lambda: [parse_session(text, rel) for rel, text in texts])
        read_and_parse = timed(lambda: [parse_session((root / rel).read_text(encoding="utf-8"), rel)
                                        for rel, _, _ in files])
        turns = sum(len(parse_session(text, rel).turns) for rel, text in texts)
        read_source = timed(lambda: read_conversations(source, "locomo"))
        second = Palace(init_palace(Path(tmp) / "q", name="bench"))
        inside = timed(lambda: import_path(second, source))
        inside_again = timed(lambda: import_path(second, source))
    return {"import_s": first, "reimport_s": again, "import_in_process_s": inside,
            "reimport_in_process_s": inside_again, "read_source_s": read_source, "parse_s": parse,
            "read_and_parse_s": read_and_parse, "sessions": len(files), "turns": turns}


def main() -> None:
    source = Path(sys.argv[1])
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    results = [one_run(source) for _ in range(runs)]
    print(f"{source.name}: {results[0]['sessions']} sessions, {results[0]['turns']} turns, {runs} runs")
    for key in ("import_s", "reimport_s", "import_in_process_s", "reimport_in_process_s", "read_source_s", "parse_s",
                "read_and_parse_s"):
        values = sorted(r[key] for r in results)
        print(f"{key:22} median {statistics.median(values) * 1000:8.1f} ms   "
              f"(min {values[0] * 1000:.1f}, max {values[-1] * 1000:.1f})")


if __name__ == "__main__":
    main()
