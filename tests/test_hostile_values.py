"""Hostile input, round 2 (issue 25): one value in one note, or in one argument, never takes the palace down.

Row 1: a validity date that overflows once moved to UTC (`0001-01-01T00:00:00+01:00` lies in year 0 in UTC,
`9999-12-31T23:59:59-01:00` in year 10000). The note is one lint error naming file and line; every command
still runs; options given such a value are usage errors; the MCP server still answers.
"""

from __future__ import annotations

import asyncio
import re

import pytest
from click.testing import CliRunner

from palace_cli.cli import cli
from palace_cli.core.dates import parse_moment
from test_mcp import call, session

OVERFLOWING = ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"]
NOTE = "memories/caching-performance/cache-aside.md"


@pytest.mark.parametrize("value", OVERFLOWING)
def test_an_overflowing_moment_is_a_value_error(value):
    with pytest.raises(ValueError, match="outside the years 0001-9999"):
        parse_moment(value)


def _with_date(root, field: str, value: str) -> int:
    """Put `field: value` into one note's frontmatter; return its line."""
    path = root / NOTE
    lines = path.read_text(encoding="utf-8").split("\n")
    lines.insert(1, f"{field}: {value}")
    path.write_text("\n".join(lines), encoding="utf-8")
    return 2


def run(root, *args):
    return CliRunner().invoke(cli, ["--palace", str(root), *args], catch_exceptions=False)


@pytest.mark.parametrize("field, value", [("valid_from", OVERFLOWING[0]), ("valid_until", OVERFLOWING[1])])
def test_every_command_survives_one_overflowing_date(example_palace, field, value):
    line = _with_date(example_palace, field, value)
    lint = run(example_palace, "lint")
    assert lint.exit_code == 1
    assert re.search(rf"{re.escape(NOTE)}:{line}: error: `{field}`: .* outside the years 0001-9999.*\[bad-date\]",
                     lint.output), lint.output
    for args in (["index"], ["list"], ["search", "cache aside"], ["recall", "lazy loading cache"],
                 ["show", "cache-aside"], ["history", "cache-aside", "--no-git"], ["index", "--check"]):
        result = run(example_palace, *args)
        assert result.exit_code == 0, (args, result.output)
    assert "cache-aside" in run(example_palace, "recall", "lazy loading cache aside").output


@pytest.mark.parametrize("args", [
    ["recall", "caches", "--as-of", OVERFLOWING[1]],
    ["supersede", "cache-aside", "write-through-cache", "--valid-from", OVERFLOWING[0]],
    ["add", "Overflow", "-d", "caching-performance", "--image", "A blue kettle sings nine songs to a moth.",
     "--content", "Nothing.", "--valid-from", OVERFLOWING[0], "--no-edit"],
])
def test_an_overflowing_option_is_a_usage_error(example_palace, args):
    result = run(example_palace, *args)
    assert result.exit_code == 2, result.output
    assert "outside the years 0001-9999" in result.output


@pytest.mark.slow
def test_the_mcp_server_answers_beside_an_overflowing_date(example_palace):
    _with_date(example_palace, "valid_from", OVERFLOWING[0])

    async def scenario():
        async with session(example_palace) as client:
            error, text = await call(client, "recall", query="lazy loading cache aside")
            assert not error, text
            assert "cache-aside" in text
            error, text = await call(client, "get", id="cache-aside")
            assert not error, text

    asyncio.run(scenario())


def test_a_proposed_anchor_is_never_another_notes_token(small_palace):
    """Row 16: two notes with near-identical images; the second's proposed anchor must not be the first's token."""
    from palace_cli.editing.authoring import add_memory
    from palace_cli.editing.lint import lint
    from palace_cli.palace import Palace

    palace = Palace(small_palace)
    image = "A violet walrus polishes eleven silver trumpets beside a sleeping lighthouse keeper."
    first = add_memory(palace, "Walrus one", "storage", image=image, content="The first walrus note.")
    second = add_memory(palace, "Walrus two", "storage", image=image + " A gull watches.",
                        content="The second walrus note.")
    assert first.verify and second.anchor
    assert second.anchor != first.verify and first.verify not in second.anchor
    assert not [p for p in lint(palace).problems if p.code == "token-exposed"]


def test_update_refuses_conflict_markers(palace):
    """Row 17: an update whose text holds conflict markers is refused, the note unchanged."""
    from palace_cli.editing.changes import Refused, update_memory

    path = palace.root / NOTE
    before = path.read_bytes()
    with pytest.raises(Refused, match="conflict markers"):
        update_memory(palace, "cache-aside", sections={"Content": "<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> b\n"})
    assert path.read_bytes() == before


def _raw_mcp_exchange(root, lines: list[str], wanted: set, timeout: float = 180) -> dict:
    """Send raw JSON-RPC lines to `palace mcp` over stdio; the replies by id, once every wanted id has one."""
    import json
    import select
    import subprocess
    import time

    from test_mcp import palace_command

    process = subprocess.Popen(palace_command(root, "mcp"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
    try:
        process.stdin.write(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
        process.stdin.flush()
        replies, deadline = {}, time.monotonic() + timeout
        while not wanted <= set(replies) and time.monotonic() < deadline:
            ready, _, _ = select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break  # no reply in time: the assertions below say which ids are missing
            line = process.stdout.readline()
            if not line:
                break
            reply = json.loads(line)
            replies[reply.get("id")] = reply
        return replies
    finally:
        process.stdin.close()
        process.wait(timeout=60)


@pytest.mark.slow
def test_the_mcp_server_answers_requests_it_cannot_read(readonly_example):
    """Row 15: a lone surrogate escape or nesting 5,000 levels deep gets a parse error with its id; the
    server keeps answering."""
    import json

    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    call_ = '{"jsonrpc": "2.0", "id": %s, "method": "tools/call", "params": {"name": "search", "arguments": %s}}'
    lines = [json.dumps(init), json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
             call_ % (2, '{"query": "a\\ud800b"}'),
             call_ % (3, '{"query": "x", "k": ' + "[" * 5000 + "]" * 5000 + "}"),
             call_ % ('"four"', "{" * 3000),
             call_ % (5, '{"query": "lazy loading cache"}')]
    replies = _raw_mcp_exchange(readonly_example, lines, wanted={1, 2, 3, "four", 5})
    for request_id in (2, 3, "four"):
        assert replies[request_id]["error"]["code"] == -32700, replies
        assert "cannot be read" in replies[request_id]["error"]["message"]
    assert "cache-aside" in replies[5]["result"]["content"][0]["text"]
