"""Similar-note warnings: `palace similar`, and `add` naming close memories in the CLI and over MCP (never merging)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import anyio
import pytest
from click.testing import CliRunner

from palace_cli.cli import cli
from palace_cli.palace import Palace
from palace_cli.search.similar import similar

# A rewrite of the example palace's write-ahead-log note, as someone who forgot it was there might write it.
WAL_AGAIN = {
    "subject": "Redo Journal",
    "anchor": "ship captain's logbook",
    "image": "A ship's captain in a storm writes every order into a salt-stained logbook before shouting it; when "
             "lightning knocks him out, the first mate reads the logbook and finishes nine half-done manoeuvres.",
    "content": "A database appends each change to a sequential log on stable storage before it changes the data "
               "pages, and a commit counts only once its log record is flushed. After a crash, recovery replays "
               "the log from the last checkpoint to redo committed work and undo transactions that never "
               "committed. Group commit shares one fsync among many transactions; PostgreSQL's WAL and InnoDB's "
               "redo log work this way.",
    "keywords": "redo log, crash recovery, checkpoint",
}
UNRELATED = {
    "subject": "Sourdough Starter Feeding",
    "anchor": "bubbling jar pet",
    "image": "A glass jar on the windowsill burps like a tiny dragon; you feed it flour and water at eight sharp.",
    "content": "Feed a sourdough starter equal weights of flour and water daily; it is ready when it doubles.",
    "keywords": "baking, fermentation",
}


def add_args(fields: dict, *extra: str) -> list[str]:
    return ["add", fields["subject"], "-d", "storage-engines", "--anchor", fields["anchor"], "--image",
            fields["image"], "--content", fields["content"], "--keywords", fields["keywords"], "--no-edit", *extra]


def test_similar_names_the_rewritten_note_first(readonly_example):
    text = " ".join(WAL_AGAIN[k] for k in ("subject", "anchor", "keywords", "image", "content"))
    result = similar(Palace(readonly_example), text=text, k=3)
    assert result.method == "lexical"
    top = result.neighbours[0]
    assert top.id == "write-ahead-log" and top.close and top.score >= result.threshold
    assert not any(n.close for n in result.neighbours[1:])
    assert {"log", "redo", "crash"} & set(top.shared)
    assert top.why.startswith(f"{top.score:.2f}; both mention ")


def test_similar_of_a_memory_leaves_itself_out(readonly_example):
    result = similar(Palace(readonly_example), "write-through-cache", k=3)
    assert "write-through-cache" not in [n.id for n in result.neighbours]
    assert result.neighbours[0].id in {"write-behind-cache", "cache-aside"}
    cli_result = CliRunner().invoke(cli, ["--palace", str(readonly_example), "similar", "write-through-cache",
                                          "--json"])
    data = json.loads(cli_result.stdout)
    assert cli_result.exit_code == 0 and data["source"] == "write-through-cache" and len(data["neighbours"]) == 5
    assert set(data["neighbours"][0]) >= {"id", "subject", "score", "close", "why", "shared"}
    usage = CliRunner().invoke(cli, ["--palace", str(readonly_example), "similar"])
    assert usage.exit_code == 2 and "give a memory or a text" in usage.stderr


def test_add_warns_about_a_close_memory_and_merges_nothing(example_palace):
    before = (example_palace / "memories/storage-engines/write-ahead-log.md").read_bytes()
    result = CliRunner().invoke(cli, ["--palace", str(example_palace), *add_args(WAL_AGAIN)])
    assert result.exit_code == 0, result.output
    assert "similar: write-ahead-log (Write-Ahead Log (WAL))" in result.stderr
    assert "`palace supersede write-ahead-log redo-journal`" in result.stderr
    assert (example_palace / "memories/storage-engines/write-ahead-log.md").read_bytes() == before
    assert (example_palace / "memories/storage-engines/redo-journal.md").exists()
    quiet = CliRunner().invoke(cli, ["--palace", str(example_palace), *add_args(UNRELATED, "--json")])
    assert quiet.exit_code == 0 and "similar:" not in quiet.stderr
    assert json.loads(quiet.stdout)["similar"] == []


def test_add_does_not_warn_about_what_it_supersedes(example_palace):
    result = CliRunner().invoke(cli, ["--palace", str(example_palace),
                                      *add_args(WAL_AGAIN, "--supersedes", "write-ahead-log", "--json")])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["similar"] == [] and "similar:" not in result.stderr
    assert Palace(example_palace).memory("write-ahead-log").superseded_by == ["redo-journal"]


@pytest.mark.slow
def test_dense_similarity_with_the_real_embedder(example_palace, with_models):
    text = " ".join(WAL_AGAIN[k] for k in ("subject", "anchor", "keywords", "image", "content"))
    assert similar(Palace(example_palace), text=text, k=3).method == "lexical"  # the default, even with a model
    result = similar(Palace(example_palace), text=text, k=3, method="dense")
    assert result.method == "dense" and result.neighbours[0].id == "write-ahead-log"
    by_memory = similar(Palace(example_palace), "write-through-cache", k=2, method="dense")
    assert by_memory.neighbours[0].id in {"write-behind-cache", "cache-aside"}


def test_dense_without_a_model_says_how_to_get_one(readonly_example):
    from palace_cli.errors import UsageError

    with pytest.raises(UsageError, match="palace models install"):
        similar(Palace(readonly_example), text="a write-ahead log", method="dense")


@pytest.mark.slow
def test_mcp_add_warns_and_corrects_with_supersedes(example_palace):
    from test_mcp import call, handed, session

    async def scenario():
        async with session(example_palace) as client:
            duplicate = await call(client, "add", subject=WAL_AGAIN["subject"], domain="storage-engines",
                                   anchor=WAL_AGAIN["anchor"], image=WAL_AGAIN["image"], content=WAL_AGAIN["content"])
            correction = await call(client, "add", subject="Write-Ahead Log, corrected", domain="storage-engines",
                                    anchor="surgeon's second notebook", id="wal-v2",
                                    image="The surgeon now dictates each step to eleven parrots before cutting.",
                                    content="A write-ahead log records each change before the data pages change; "
                                            "a commit counts once its record is flushed.",
                                    supersedes=["write-ahead-log"], type="concept")
            recalled = await call(client, "recall", query="write-ahead log crash recovery redo")
            got = await call(client, "get", id="write-ahead-log")
            bad = await call(client, "add", subject="x", domain="storage-engines", supersedes=["../etc"])
            return duplicate, correction, recalled, got, bad

    duplicate, correction, recalled, got, bad = anyio.run(scenario)
    assert not duplicate[0] and "similar: write-ahead-log (Write-Ahead Log (WAL))" in duplicate[1]
    assert "palace supersede write-ahead-log redo-journal" in duplicate[1]
    today = datetime.now(timezone.utc).date().isoformat()
    assert not correction[0] and f"supersedes write-ahead-log from {today}" in correction[1]
    assert "similar: write-ahead-log" not in correction[1]
    assert not recalled[0] and "write-ahead-log" not in handed(recalled[1])
    assert "versions: superseded; superseded by wal-v2" in got[1]
    assert bad[0] and "climbs out" in bad[1]
    wal = Palace(example_palace).memory("write-ahead-log")
    assert wal.superseded_by == ["wal-v2"] and wal.valid_until == today


def test_empty_text_two_sources_and_unknown_methods_are_usage_errors(readonly_example):
    palace = Palace(readonly_example)
    from palace_cli.errors import UsageError

    for kwargs in ({"text": "   "}, {"ref": "paxos", "text": "x"}, {"text": "x", "method": "fuzzy"}):
        with pytest.raises(UsageError):
            similar(palace, **kwargs)
