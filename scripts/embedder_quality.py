"""The three quality figures of issue 31 for one palace.toml embedder setting, with palace's own bench commands.

    .venv/bin/python scripts/embedder_quality.py default:128 --out /tmp/quality [--data ../shared/data]

For the setting, a PALACE_HOME of its own under --out (the installed models linked in, so nothing is copied or
converted) holds the benchmark palaces, each with `[models] embedder = "<setting>"` written into its palace.toml
(a palace the import already embedded is rebuilt with `palace index --rebuild`); then, as the issue gives them:

    palace bench retrieval --corpus DATA/foam-docs --queries benchmarks/foam-docs.queries.jsonl --json
    palace bench retrieval --corpus DATA/memory-palace-skill --queries benchmarks/memory-palace-skill.queries.jsonl --json
    palace --palace LOCOMO bench retrieval --locomo DATA/locomo/locomo-dev5.json --json

Each JSON goes to OUT/<setting>/{foam,skill,locomo}.json and one line per figure is printed: 2hop recall@3 on Foam,
2hop recall@1 on the skill corpus, 2hop recall@10 on LoCoMo (whole palace), each with its bootstrap interval.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PALACE = [str(Path(sys.executable).parent / "palace")]  # the palace command of this Python's environment


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("setting", help='a palace.toml [models] embedder value: "default", "default:128", "static", "off"')
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--only", default="foam,skill,locomo", help="comma-separated: foam, skill, locomo")
    args = parser.parse_args()
    from palace_cli.backends.install import models_dir

    out = args.out / re.sub(r"[^\w.-]", "_", args.setting)
    home = out / "home"
    (home / "models").mkdir(parents=True, exist_ok=True)
    for item in models_dir().iterdir():  # the installed models, linked (a static table built here stays here)
        link = home / "models" / item.name
        if not link.exists() and not item.name.endswith((".static.npy", ".static.json")):
            link.symlink_to(item.resolve())
    env = dict(os.environ, PALACE_HOME=str(home))
    wanted = args.only.split(",")
    figures = {}
    for name, corpus, queries in (("foam", "foam-docs", "foam-docs.queries.jsonl"),
                                  ("skill", "memory-palace-skill", "memory-palace-skill.queries.jsonl")):
        if name not in wanted:
            continue
        prepare = ("import sys; from pathlib import Path; from palace_cli.bench.retrieval import corpus_palace; "
                   "print(corpus_palace(Path(sys.argv[1]))[0].root)")
        root = Path(subprocess.run([sys.executable, "-c", prepare, str(args.data / corpus)], env=env, check=True,
                                   capture_output=True, text=True).stdout.strip())
        if _set_embedder(root, args.setting):
            # the import embedded with the default: the new setting re-embeds every unit; a rebuild does it
            # here, in the foreground, before anything is measured
            subprocess.run(PALACE + ["--palace", str(root), "index", "--rebuild"], env=env, check=True,
                           capture_output=True)
        command = ["bench", "retrieval", "--corpus", str(args.data / corpus), "--queries",
                   str(REPO / "benchmarks" / queries), "--json"]
        figures[name] = _run(command, env, out / f"{name}.json")
    if "locomo" in wanted:
        root = home / "locomo"
        if not (root / "palace.toml").exists():
            subprocess.run(PALACE + ["init", str(root)], env=env, check=True, capture_output=True)
            _set_embedder(root, args.setting)
            subprocess.run(PALACE + ["--palace", str(root), "import", str(args.data / "locomo" / "locomo-dev5.json")],
                           env=env, check=True, capture_output=True)
        command = ["--palace", str(root), "bench", "retrieval", "--locomo",
                   str(args.data / "locomo" / "locomo-dev5.json"), "--json"]
        figures["locomo"] = _run(command, env, out / "locomo.json")
    for name, metric in (("foam", "recall@3"), ("skill", "recall@1"), ("locomo", "recall@10")):
        if name in figures:
            row = figures[name]["modes"]["recall"]
            print(f"{args.setting}\t{name}\trecall {metric}\t{row[metric]:.4f}\t[{row['ci'][metric][0]:.4f}, "
                  f"{row['ci'][metric][1]:.4f}]")


def _set_embedder(root: Path, setting: str) -> bool:
    """Write `embedder = "<setting>"` into the palace's [models] table; True when that changed it."""
    path = root / "palace.toml"
    before = path.read_text(encoding="utf-8")
    text = re.sub(r'^embedder = .*\n', "", before, flags=re.M)
    text = text.replace("[models]\n", f'[models]\nembedder = "{setting}"\n', 1)
    path.write_text(text, encoding="utf-8")
    return text != before


def _run(command: list[str], env: dict, out: Path) -> dict:
    done = subprocess.run(PALACE + command, env=env, check=True, capture_output=True, text=True)
    out.write_text(done.stdout, encoding="utf-8")
    return json.loads(done.stdout)


if __name__ == "__main__":
    main()
