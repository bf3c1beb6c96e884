"""Readable text: what a quote shows of Markdown (callouts, links, block ids, tables), line for line."""

from __future__ import annotations

import pytest

from palace_cli.core.readable import readable


@pytest.mark.parametrize("text, shown", [
    ("> [!note] Remember the outbox\n> It is read every second.", "# Remember the outbox\nIt is read every second."),
    ("> [!warning]-\n> > nested quote", "\nnested quote"),
    ("See [[alpha|the alpha note]] first.", "See the alpha note first."),
    ("See [[alpha]] and [[Folder/beta.md]].", "See alpha and Folder/beta.md."),
    ("See [[gamma#Setup]], [[#Local]] and [[delta#^blk-1]].", "See gamma > Setup, Local and delta."),
    ("Read [the guide](https://example.com/a_b \"Guide\") or [x](<a b.md>).", "Read the guide or x."),
    ("A diagram ![flow](flow.png) and ![[photo.jpg|100]] here.", "A diagram flow and  here."),
    ("Named by [text][ref] too.", "Named by text too."),
    ("The retry budget is three. ^retry-budget", "The retry budget is three."),
    ("^lonely-id", ""),
    ("x^2 stays, and 2^10 too", "x^2 stays, and 2^10 too"),
    ("Keep `[[code|as is]]` and `> [!x]`.", "Keep `[[code|as is]]` and `> [!x]`."),
    ("| Tool | Kind \\| role |\n|:---|---:|\n| Foam | [[vscode\\|VS Code]] |\n| zk |  |\n\nAfter.",
     "\n\n- Tool: Foam; Kind | role: VS Code\n- Tool: zk\n\nAfter."),
    ("| a | b |\n| --- | --- |\n| 1 | 2 |", "\n\n- a: 1; b: 2"),
    ("a | b\n--- | ---\n1 | 2", "\n\n- a: 1; b: 2"),
    ("Not a table | just a pipe\n---", "Not a table | just a pipe\n---"),
    ("```\n> [!note] in code\n| a | b |\n|---|---|\n[[x|y]] ^id\n```", "```\n> [!note] in code\n| a | b |\n|---|---|\n[[x|y]] ^id\n```"),
])
def test_readable(text, shown):
    assert readable(text) == shown
    assert readable(text).count("\n") == text.count("\n")  # line for line: a line found in it is the source's


def test_plain_prose_is_returned_as_it_is():
    text = "Nothing to clean here, only words.\nTwo lines."
    assert readable(text) is text
