"""--as-of leaves out the conversation turns said after that moment, as it leaves out memories not valid then: at
that moment they were not known yet (search and recall alike)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from answer_fixtures import kyoto_palace
from palace_cli.cli import cli
from palace_cli.search.retrieve import recall, search

OFFSITE = "What is the budget cap for the Kyoto offsite?"  # the chat's turns are dated 2025-03-03, 10:02 to 10:15


def _turns(hits) -> list[str]:
    return [h.time for h in hits if h.kind == "turn"]


def test_turns_said_after_the_moment_asked_about_are_not_ranked(tmp_path):
    palace = kyoto_palace(tmp_path / "team")
    now = recall(palace, OFFSITE)
    assert now.hits[0].kind == "turn" and "1.2 million yen" in now.hits[0].turn.text
    before = recall(palace, OFFSITE, as_of="2025-03-01")
    assert not _turns(before.ranked) and "## Conversation" not in before.context
    assert before.left_out == 3  # the memories not valid then (the three notes were written today), not the turns
    assert not _turns(search(palace, OFFSITE, as_of="2025-03-01").ranked)
    said = recall(palace, "Kyoto offsite ryokan temple tour budget", as_of="2025-03-03T10:06:00Z")
    assert sorted(_turns(said.ranked)) == ["2025-03-03T10:02", "2025-03-03T10:05"]  # said by then, each kept
    assert sorted(_turns(search(palace, "ryokan temple tour budget Kyoto", as_of="2025-03-03T10:06:00Z").ranked)) \
        == ["2025-03-03T10:02", "2025-03-03T10:05"]
    assert _turns(recall(palace, OFFSITE, as_of="2025-03-04", include_superseded=True).ranked)


def test_cli_recall_as_of_before_the_chat_hands_no_turn(tmp_path):
    palace = kyoto_palace(tmp_path / "team")
    out = CliRunner().invoke(cli, ["--palace", str(palace.root), "recall", OFFSITE, "--as-of", "2025-03-01", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["as_of"] == "2025-03-01" and data["turns"] == [] and all(h["kind"] != "turn" for h in data["hits"])
