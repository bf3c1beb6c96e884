"""Quotes are readable text: `ask` quotes a note as it reads (no callout markers, links as labels, no block ids,
a table row with its header), verify checks such a quote against its source, and `[path:line]` cites a unit."""

from __future__ import annotations

from pathlib import Path

import pytest

from palace_cli.answers.ask import ask
from palace_cli.answers.checking import verify_answer
from palace_cli.answers.verify import located, verify_response
from palace_cli.editing.authoring import init
from palace_cli.palace import Palace

NOTE = """# Outbox relay

> [!note] How it runs
> The relay reads unsent rows from the [[Outbox table|outbox]] every 200 ms. ^relay-runs

It marks each row sent after the [broker](https://example.com/broker) acknowledges it. ^ack

| Setting | Value |
|---|---|
| poll interval | 200 ms |
| batch size | 500 rows |
"""
UNIT = {"id": "outbox-relay", "kind": "note", "text": NOTE, "path": "ops/Outbox relay.md", "line": 1}


@pytest.mark.parametrize("quote", [
    "The relay reads unsent rows from the outbox every 200 ms.",        # a callout's text, a link as its label
    "It marks each row sent after the broker acknowledges it.",          # a Markdown link as its text, no ^ack
    "Setting: batch size; Value: 500 rows",                              # a table row with its header
    "The relay reads unsent rows from the [[Outbox table|outbox]] every 200 ms.",  # as written still holds
])
def test_a_quote_as_it_reads_or_as_written_is_found(quote):
    verdict = verify_response(f'"{quote}" [note outbox-relay]', [UNIT])
    assert verdict.grounded and [q["found"] for q in verdict.quotes] == [True]


@pytest.mark.parametrize("quote", [
    "The relay reads unsent rows from the outbox every 100 ms.",          # a changed number
    "The relay reads unsent rows from the inbox every 200 ms.",           # a changed label
    "Setting: batch size; Value: 200 ms",                                 # a header with another row's cell
    "It marks each row sent after the broker acknowledges it ack.",       # a block id is no word of the text
])
def test_a_fabricated_quote_still_fails(quote):
    verdict = verify_response(f'"{quote}" [note outbox-relay]', [UNIT])
    assert not verdict.grounded and verdict.status == "misquoted"


def test_path_line_cites_the_unit_that_line_falls_in():
    note = {"id": "guide", "kind": "note", "text": "Intro words here.", "path": "docs/guide.md", "line": 1}
    section = {"id": "guide#setup", "kind": "section", "text": "Run make to build.", "path": "docs/guide.md",
               "line": 12}
    turn = {"id": "s1/t2", "kind": "turn", "text": "ada: we ship on fridays", "path": "conversations/x/s1.md",
            "line": 30}
    units = {u["id"]: u for u in (note, section, turn)}
    assert [located(units, "docs/guide.md", n) for n in (1, 11, 12, 40)] == ["guide", "guide", "guide#setup",
                                                                            "guide#setup"]
    assert located(units, "conversations/x/s1.md", 2) == "s1/t2" and located(units, "other.md", 3) is None
    verdict = verify_response('"Run make to build." [docs/guide.md:13] and "we ship on fridays" '
                              '[conversations/x/s1.md:31]', [note, section, turn])
    assert verdict.grounded and verdict.cited_ids == ["guide#setup", "s1/t2"]
    assert [q["found"] for q in verdict.quotes] == [True, True]
    wrong = verify_response('"Run make to deploy." [docs/guide.md:13]', [note, section, turn])
    assert wrong.status == "misquoted"
    unknown = verify_response('"Intro words here." [docs/other.md:3]', [note])
    assert not unknown.grounded and unknown.unknown_citations == ["note docs/other.md"]


@pytest.fixture
def vault(tmp_path) -> Palace:
    root = tmp_path / "vault"
    (root / "ops").mkdir(parents=True)
    (root / "ops" / "Outbox relay.md").write_text(NOTE)
    (root / "ops" / "Outbox table.md").write_text("# Outbox table\n\nRows written in the same transaction.\n")
    init(root)
    return Palace(root)


def test_ask_quotes_readable_text_that_verifies(vault):
    answer = ask(vault, "How often does the relay read unsent rows from the outbox?", generate="never")
    assert answer.status == "answered", answer.reason
    quoted = [s["text"] for s in answer.sentences]
    assert "The relay reads unsent rows from the outbox every 200 ms." in quoted
    assert not any(mark in answer.text for mark in ("[[", "[!", "^relay", "](", "|"))
    line = next(s["line"] for s in answer.sentences if s["text"].startswith("The relay reads"))
    assert (vault.root / "ops/Outbox relay.md").read_text().splitlines()[line - 1].startswith("> The relay reads")
    again = verify_answer(answer.text, [{"id": m["id"]} for m in answer.memories], vault)
    assert again.grounded and all(q["found"] for q in again.quotes)


def test_ask_quotes_a_table_row_with_its_header(vault):
    answer = ask(vault, "What batch size does the outbox relay use, in rows?", generate="never")
    assert "Setting: batch size; Value: 500 rows" in [s["text"] for s in answer.sentences], answer.text
    row = next(s["line"] for s in answer.sentences if s["text"].startswith("Setting: batch"))
    assert Path(vault.root / "ops/Outbox relay.md").read_text().splitlines()[row - 1] == "| batch size | 500 rows |"
    cited = verify_answer(f'"Setting: batch size; Value: 500 rows" [ops/Outbox relay.md:{row}]',
                          [{"id": m["id"]} for m in answer.memories], vault)
    assert cited.grounded and cited.quotes[0]["found"]
