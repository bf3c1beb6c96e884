"""The bench figures a change must not move by accident: run them into a directory, then compare two directories.

Run on main before a merge and on the branch after it; `compare` prints every quality figure that differs (timings,
which move with the machine's load, are left out). The figures are those docs/benchmarks.md reports: retrieval on the
example palace, the two adopted vaults and the skill corpus, and distill on the labelled agent sessions.

usage: python scripts/baseline.py run OUTDIR [--only NAME,...] [--limit N] [--shared DIR]
       python scripts/baseline.py compare OLD_DIR NEW_DIR
(run from the repository root with the palace's own venv; ../shared/data must be present for the vault rows,
 and the models installed, `palace models install`, or the dense rows are missing.)
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path


def benches(shared: Path) -> dict[str, list[str]]:
    """Each bench's `palace` arguments, the shared data read from `shared`."""
    return {
        "example": ["--palace", "example-palace", "bench", "retrieval"],
        "foam": ["bench", "retrieval", "--corpus", str(shared / "foam-docs"),
                 "--queries", "benchmarks/foam-docs.queries.jsonl"],
        "silverbullet": ["bench", "retrieval", "--corpus", str(shared / "silverbullet-docs"),
                         "--queries", "benchmarks/silverbullet-docs.queries.jsonl"],
        "skill": ["bench", "retrieval", "--corpus", str(shared / "memory-palace-skill"),
                  "--queries", "benchmarks/memory-palace-skill.queries.jsonl"],
        "sessions": ["bench", "distill", "--sessions", "benchmarks/agent-sessions.jsonl", "--no-cross-validate"],
    }

# Keys whose values follow the clock or the load, not the code's quality.
TIMING = re.compile(r"(_ms|_s|seconds|per_s|per_second|latency|turns_s|elapsed|wall|cpu|load)$|^(command|workdir)$")


def palace_command() -> str:
    """The `palace` script beside this interpreter, so the run measures the checkout whose venv runs it."""
    return str(Path(sys.executable).with_name("palace"))


def run(outdir: Path, shared: Path, only: list[str], limit: int | None) -> int:
    outdir.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name, args in benches(shared).items():
        if only and name not in only:
            continue
        command = [palace_command(), *args, "--json"]
        if limit and "retrieval" in args:
            command += ["--limit", str(limit)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            failed += 1
            print(f"{name}: exit {done.returncode}\n{done.stderr.strip()}", file=sys.stderr)
            continue
        (outdir / f"{name}.json").write_text(done.stdout, encoding="utf-8")
        figures = json.loads(done.stdout)
        if isinstance(figures, dict) and figures.get("dense") == "off":
            print(f"{name}: the dense rows are off (no model installed?)", file=sys.stderr)
        print(f"{name}: {outdir / (name + '.json')}")
    return 1 if failed else 0


def flatten(value: object, prefix: str = "") -> dict[str, object]:
    """`{"a": {"b": [1, 2]}}` -> `{"a/b[0]": 1, "a/b[1]": 2}`, leaving out timing keys."""
    if isinstance(value, dict):
        out: dict[str, object] = {}
        for key, inner in value.items():
            if TIMING.search(str(key)):
                continue
            out.update(flatten(inner, f"{prefix}/{key}" if prefix else str(key)))
        return out
    if isinstance(value, list):
        out = {}
        for index, inner in enumerate(value):
            out.update(flatten(inner, f"{prefix}[{index}]"))
        return out
    return {prefix: value}


def compare(old_dir: Path, new_dir: Path) -> int:
    differ = 0
    for old_file in sorted(old_dir.glob("*.json")):
        new_file = new_dir / old_file.name
        if not new_file.exists():
            print(f"{old_file.stem}: missing in {new_dir}")
            differ += 1
            continue
        old = flatten(json.loads(old_file.read_text(encoding="utf-8")))
        new = flatten(json.loads(new_file.read_text(encoding="utf-8")))
        for key in sorted(old.keys() | new.keys()):
            if old.get(key) != new.get(key):
                differ += 1
                print(f"{old_file.stem}: {key}: {old.get(key)!r} -> {new.get(key)!r}")
    print(f"{differ} figures differ")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="run the benches into OUTDIR")
    run_parser.add_argument("outdir", type=Path)
    run_parser.add_argument("--only", default="", help=f"comma-separated names of: {', '.join(benches(Path()))}")
    run_parser.add_argument("--shared", type=Path, default=Path("../shared/data"),
                            help="the shared benchmark data (default ../shared/data; a worktree elsewhere names it)")
    run_parser.add_argument("--limit", type=int, help="only the first N queries of each retrieval bench (a smoke run)")
    compare_parser = commands.add_parser("compare", help="print the quality figures that differ")
    compare_parser.add_argument("old", type=Path)
    compare_parser.add_argument("new", type=Path)
    args = parser.parse_args(argv)
    if args.command == "run":
        return run(args.outdir, args.shared, [name for name in args.only.split(",") if name], args.limit)
    return compare(args.old, args.new)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
