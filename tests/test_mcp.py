"""The MCP server through the SDK's own stdio client: tools, budgets, confinement, concurrent writers."""

from __future__ import annotations

import hashlib
import json
import os
import queue
import re
import subprocess
import sys
import threading
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp.server.mcpserver")

from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from palace_cli import __version__  # noqa: E402
from palace_cli.core.layout import confined
from palace_cli.errors import (
    OutsidePalace,
    PalaceError,  # noqa: E402
)
from palace_cli.mcp import PalaceTools, fit
from palace_cli.palace import Palace  # noqa: E402

PALACE_BIN = Path(sys.executable).parent / "palace"
REQUIRED_TOOLS = {"recall", "search", "get", "add", "update", "verify", "wake_up", "status", "quiz_next", "quiz_grade"}
# What an annotation left out means (the MCP specification's defaults).
HINT_DEFAULTS = {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": False, "open_world_hint": True}
TOKEN_LIMIT = 1500


def palace_command(root: Path, *args: str) -> list[str]:
    """The installed console script when there is one, else the same entry point through this Python."""
    if PALACE_BIN.exists():
        return [str(PALACE_BIN), "--palace", str(root), *args]
    return [sys.executable, "-c", "from palace_cli.cli import main; main()", "--palace", str(root), *args]


@asynccontextmanager
async def session(root: Path):
    """A real client session with `palace --palace root mcp` over stdio."""
    command = palace_command(root, "mcp")
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                yield client


async def call(client: ClientSession, name: str, **arguments) -> tuple[bool, str]:
    """(is_error, text) of one tool call."""
    result = await client.call_tool(name, arguments)
    return result.is_error, "\n".join(c.text for c in result.content if c.type == "text")


def tool_list_json(tools) -> str:
    """The tools/list result as it travels on the wire (compact JSON, camelCase keys)."""
    return json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools],
                      separators=(",", ":"), ensure_ascii=False)


def estimate_tokens(text: str) -> int:
    """Stated method: UTF-8 bytes / 4, rounded up (the same rule as wake-up's budget)."""
    return -(-len(text.encode("utf-8")) // 4)


def handed(text: str) -> list[str]:
    """The ids on recall's `handed:` line."""
    line = next(line for line in text.splitlines() if line.startswith("handed: "))
    return [] if line == "handed: none" else line[len("handed: "):].split(", ")


def cli(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(palace_command(root, *args), capture_output=True, text=True, check=check)


def snapshot(base: Path, palace_root: Path) -> dict[str, str]:
    """Hash of every file under base except where the server may write (notes, reviews, index files, cache, git)."""
    allowed = [palace_root / name for name in ("memories", "reviews", "index", "INDEX.md", ".palace", ".git")]
    found = {}
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if here / d not in allowed]
        for name in filenames:
            path = here / name
            if path in allowed:
                continue
            data = path.read_bytes() if path.is_file() else os.readlink(path).encode()
            found[str(path.relative_to(base))] = hashlib.sha256(data).hexdigest()
    return found


SHADES = ["amber", "cobalt", "crimson", "emerald", "golden", "indigo", "ivory", "scarlet"]


def new_memory(i: int, tag: str) -> dict:
    """An add payload whose invented words make it the only lexical match for its query."""
    word = f"zorbl{tag}{i}"
    return {"subject": f"Quillon {tag} widget {i}", "domain": "reliability-operations",
            "anchor": f"{word} anchor", "keywords": [word],
            "image": f"A copper {word} hums while nine {SHADES[i % len(SHADES)]} {tag} lanterns of {word} spin "
                     f"on a {SHADES[-1 - i % len(SHADES)]} velvet turntable.",
            "content": f"The {word} protocol retries exactly {i} times before it gives up."}


# ---- a whole session --------------------------------------------------------------------------


@pytest.mark.slow
def test_session_lists_measures_recalls_adds_and_verifies(example_palace):
    async def scenario():
        async with session(example_palace) as client:
            tools = (await client.list_tools()).tools
            wire = tool_list_json(tools)
            recalled = await call(client, "recall", query="coordinator crashed while participants held locks")
            added = await call(client, "add", **new_memory(1, "mcp"))
            again = await call(client, "add", **new_memory(1, "mcp"))
            recalled_new = await call(client, "recall", query="zorblmcp1 protocol retries")
            got = await call(client, "get", id="quillon-mcp-widget-1")
            return tools, wire, recalled, added, again, recalled_new, got

    tools, wire, recalled, added, again, recalled_new, got = anyio.run(scenario)
    names = {t.name for t in tools}
    assert REQUIRED_TOOLS <= names, REQUIRED_TOOLS - names
    assert len(tools) <= 11  # ten, and distill (issue 24)
    by_name = {t.name: t for t in tools}
    def hint(name, which):
        value = getattr(by_name[name].annotations, which)
        return HINT_DEFAULTS[which] if value is None else value

    for name in names:
        assert hint(name, "open_world_hint") is False, name
        for prop, schema in by_name[name].input_schema.get("properties", {}).items():
            assert schema.get("description", "").strip(), f"{name}.{prop} has no description"
    for name in ("recall", "search", "get", "verify", "wake_up", "status", "quiz_next"):
        assert hint(name, "read_only_hint") is True, name
    for name, idempotent in (("add", False), ("quiz_grade", False), ("update", True)):
        assert (hint(name, "read_only_hint"), hint(name, "destructive_hint"), hint(name, "idempotent_hint")) == (
            False, False, idempotent), name
    assert estimate_tokens(wire) < TOKEN_LIMIT, f"tool list costs about {estimate_tokens(wire)} tokens"

    error, text = recalled
    assert not error and handed(text)[0] == "two-phase-commit"
    assert "verify: mustard-yellow tuxedo" in text

    error, text = added
    assert not error and text.startswith("added quillon-mcp-widget-1 at memories/reliability-operations/")
    token = next(line for line in text.splitlines() if line.startswith("verify: "))[len("verify: "):]
    assert token != "(none)" and token in new_memory(1, "mcp")["image"]

    error, text = again
    assert error and "already exists" in text
    assert (example_palace / "memories/reliability-operations/quillon-mcp-widget-1.md").read_text().count("zorblmcp1") >= 3

    error, text = recalled_new
    assert not error and handed(text)[0] == "quillon-mcp-widget-1"
    assert f"verify: {token}" in text

    error, text = got
    assert not error and f"verify: {token}" in text and "## Content" in text

    async def verify_answers():
        async with session(example_palace) as client:
            good = await call(client, "verify", response=f"It retries once [verify: {token}].",
                              ids=["quillon-mcp-widget-1"])
            foreign = await call(client, "verify", response="It retries once [verify: mustard-yellow tuxedo].",
                                 ids=["quillon-mcp-widget-1"])
            return good, foreign

    good, foreign = anyio.run(verify_answers)
    assert good == (False, good[1]) and good[1].startswith("grounded (grounded)")
    assert not foreign[0] and foreign[1].startswith("NOT grounded (foreign)") and "two-phase-commit" in foreign[1]


def test_tool_list_fits_under_a_real_tokenizer(readonly_example, installed_models):
    """Bytes/4 is an estimate; count again with a real BPE tokenizer (SmolLM2's, 49k vocab)."""
    path = installed_models["generator"].path
    llama_cpp = pytest.importorskip("llama_cpp")

    async def scenario():
        async with session(readonly_example) as client:
            return tool_list_json((await client.list_tools()).tools)

    wire = anyio.run(scenario)
    vocab = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    count = len(vocab.tokenize(wire.encode("utf-8"), add_bos=False, special=False))
    assert count < TOKEN_LIMIT, f"tool list is {count} SmolLM2 tokens"


@pytest.mark.slow
def test_outputs_stay_within_their_budget(example_palace):
    async def scenario():
        async with session(example_palace) as client:
            out = {}
            for budget in (60, 200, 600):
                out[("recall", budget)] = await call(client, "recall", query="how do replicas agree on a leader",
                                                    profile="teaching", max_tokens=budget)
                out[("wake_up", budget)] = await call(client, "wake_up", max_tokens=budget)
                out[("get", budget)] = await call(client, "get", id="paxos", max_tokens=budget)
                out[("search", budget)] = await call(client, "search", query="replica", k=50, max_tokens=budget)
            return out

    out = anyio.run(scenario)
    for (tool, budget), (error, text) in out.items():
        assert not error, (tool, text)
        assert len(text.encode("utf-8")) <= budget * 4, (tool, budget, len(text.encode("utf-8")))
    assert "cut at max_tokens=60" in out[("get", 60)][1]
    assert "No memory fits in max_tokens=60; raise it" in out[("recall", 60)][1]
    assert "cut at max_tokens" not in out[("get", 600)][1]


# ---- confinement -----------------------------------------------------------------------------


@pytest.fixture
def attacked(example_palace, tmp_path):
    """The example palace with a secret outside it, a note symlinked to the secret, a domain symlinked outside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = tmp_path / "secret.md"
    secret.write_text("---\nid: secret\nsubject: Secret\nanchor: a\nverify: top secret words\n---\n## Image\n"
                      "top secret words\n## Content\nthe password is hunter2\n")
    (example_palace / "memories/consensus-coordination/leak.md").symlink_to(secret)
    (example_palace / "memories/evil").symlink_to(outside, target_is_directory=True)
    # a note inside the palace but outside memories/ (a draft, say): a link to it is not a memory either
    (example_palace / "drafts").mkdir()
    (example_palace / "drafts/inner.md").write_text(secret.read_text().replace("id: secret", "id: inner"))
    (example_palace / "memories/consensus-coordination/inner.md").symlink_to("../../drafts/inner.md")
    from palace_cli.editing.reviewlog import log_name

    (example_palace / "reviews" / log_name()).symlink_to(outside / "stolen.jsonl")  # dangling: O_CREAT would follow
    return example_palace


ATTACKS = [
    ("get", {"id": "../../secret.md"}, "'..'"),
    ("get", {"id": "memories/../../secret.md"}, "'..'"),
    ("get", {"id": "SECRET"}, "absolute path"),
    ("get", {"id": "~/.ssh/id_rsa"}, "absolute path"),
    ("get", {"id": "memories/consensus-coordination/leak.md"}, "outside"),
    ("get", {"id": "memories/evil/x.md"}, "outside"),
    ("get", {"id": "palace.toml"}, "no memory 'palace.toml'"),
    ("get", {"id": "memories/consensus-coordination/inner.md"}, "outside"),
    ("get", {"id": "inner"}, "symlink points outside"),  # named by its file name: its problem, not its text
    ("get", {"id": "memories/consensus-coordination/../../drafts/inner.md"}, "'..'"),
    ("get", {"id": "memories/consensus-coordination/paxos.md\x00.txt"}, "NUL"),
    ("add", {"subject": "Pwned", "domain": "../../outside", "image": "x"}, "'..'"),
    ("add", {"subject": "Pwned", "domain": "OUTSIDE", "image": "x"}, "absolute path"),
    ("add", {"subject": "Pwned", "domain": "evil", "image": "x"}, "outside"),
    ("add", {"subject": "Pwned", "domain": "a/b", "image": "x"}, "single name"),
    ("add", {"subject": "Pwned", "domain": "general", "id": "../../../outside/pwned", "image": "x"}, "'..'"),
    ("recall", {"query": "quorum", "domain": "../outside"}, "'..'"),
    ("search", {"query": "quorum", "domain": "SECRET"}, "absolute path"),
    ("verify", {"response": "top secret words", "ids": ["../../secret.md"]}, "'..'"),
    ("quiz_next", {"domain": "../../outside"}, "'..'"),
    ("quiz_grade", {"question": "paxos:anchor:0:due", "answer": "Paxos"}, "review log"),
    ("quiz_grade", {"question": "../../secret:anchor:0:due", "answer": "x"}, "'..'"),
]


@pytest.mark.slow
def test_confinement_attacks_are_refused_and_nothing_leaks(attacked, tmp_path):
    secret = tmp_path / "secret.md"
    before = snapshot(tmp_path, attacked)

    def resolve(value):
        if isinstance(value, dict):
            return {k: resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [resolve(v) for v in value]
        return {"SECRET": str(secret), "OUTSIDE": str(tmp_path / "outside")}.get(value, value)

    async def scenario():
        async with session(attacked) as client:
            results = [await call(client, name, **resolve(args)) for name, args, _ in ATTACKS]
            leak = await call(client, "recall", query="password hunter2 top secret words")
            status = await call(client, "status")
            return results, leak, status

    results, leak, status = anyio.run(scenario)
    for (name, args, expected), (error, text) in zip(ATTACKS, results):
        assert error, (name, args, text)
        assert expected in text, (name, args, text)
        assert "hunter2" not in text
    assert not leak[0] and "hunter2" not in leak[1] and not {"secret", "inner"} & set(handed(leak[1]))
    assert not status[0] and "symlink points outside the palace" in status[1]
    assert list((tmp_path / "outside").iterdir()) == []
    assert snapshot(tmp_path, attacked) == before
    assert not list(attacked.rglob("pwned*"))


def test_a_symlinked_index_folder_stops_every_call(example_palace, tmp_path):
    outside = tmp_path / "outside-index"
    outside.mkdir()
    index = example_palace / "index"
    for child in index.iterdir():
        child.unlink()
    index.rmdir()
    index.symlink_to(outside, target_is_directory=True)

    async def scenario():
        async with session(example_palace) as client:
            return [await call(client, "status"), await call(client, "recall", query="quorum"),
                    await call(client, "add", **new_memory(1, "idx"))]

    for error, text in anyio.run(scenario):
        assert error and "index in " in text and "resolves outside the palace" in text
    assert list(outside.iterdir()) == []
    assert not (example_palace / "memories/reliability-operations/quillon-idx-widget-1.md").exists()


MALFORMED = [
    ("recall", {"query": 5}),
    ("recall", {}),
    ("recall", {"query": "quorum", "max_tokens": -1}),
    ("recall", {"query": "quorum", "profile": "everything"}),
    ("search", {"query": "quorum", "k": "many"}),
    ("search", {"query": "quorum", "k": 0}),
    ("get", {"id": ""}),
    ("get", {"id": ["paxos"]}),
    ("add", {"subject": "No domain", "anchor": "a hook without its image"}),
    ("add", {"subject": "", "domain": "general"}),
    ("add", {"subject": "Bad id", "domain": "general", "id": "Not An Id!"}),
    ("verify", {"response": "x", "ids": []}),
    ("verify", {"response": "x", "ids": ["no-such-memory"]}),
    ("wake_up", {"max_tokens": 10 ** 9}),
    ("no_such_tool", {}),
]


@pytest.mark.slow
def test_malformed_arguments_get_errors_and_the_server_keeps_serving(example_palace):
    async def scenario():
        async with session(example_palace) as client:
            results = [await call(client, name, **args) for name, args in MALFORMED]
            return results, await call(client, "status")

    results, status = anyio.run(scenario)
    for (name, args), (error, text) in zip(MALFORMED, results):
        assert error and text.strip(), (name, args, text)
    assert not status[0] and "memories: 89 in 6 domain(s)" in status[1]
    assert not list((example_palace / "memories").rglob("no-domain*"))


def test_stdout_carries_only_protocol_messages(readonly_example):
    """Raw JSON-RPC on the server's stdin, including garbage; every stdout line must be a JSON-RPC message."""
    process = subprocess.Popen(palace_command(readonly_example, "mcp"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
    stderr: list[str] = []
    threading.Thread(target=lambda: stderr.extend(process.stderr), daemon=True).start()

    def send(message, reply=True):
        process.stdin.write((message if isinstance(message, str) else json.dumps(message)) + "\n")
        process.stdin.flush()
        if reply:
            return json.loads(lines.get(timeout=120))  # a guard against a hang, not a timing assertion

    try:
        init = send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                     "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "raw", "version": "0"}}})
        send({"jsonrpc": "2.0", "method": "notifications/initialized"}, reply=False)
        unreadable = [send("this line is not JSON"),  # JSON-RPC: an error reply, with a null id when none is read
                      send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": "not an object"})]
        replies = [send({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": name, "arguments": args}})
                   for n, (name, args) in enumerate([("recall", {"query": "quorum"}), ("get", {"id": "/etc/passwd"}),
                                                     ("recall", {"query": ["x"]}), ("status", {})], start=3)]
    finally:
        process.stdin.close()
        process.wait(timeout=120)
    rest = [line for line in iter(lambda: lines.get(timeout=5) if not lines.empty() else None, None)]
    assert init["result"]["serverInfo"] == {"name": "palace", "version": __version__}
    assert [(r["id"], r["error"]["code"]) for r in unreadable] == [(None, -32700), (2, -32600)]
    assert [r["id"] for r in replies] == [3, 4, 5, 6]
    assert not replies[0]["result"].get("isError") and "handed: quorum" in replies[0]["result"]["content"][0]["text"]
    assert replies[1]["result"]["isError"] and replies[2]["result"]["isError"]
    assert "memories: 89" in replies[3]["result"]["content"][0]["text"]
    for line in rest:
        assert json.loads(line)["jsonrpc"] == "2.0"
    assert process.returncode == 0, "".join(stderr)


# ---- concurrent writers ------------------------------------------------------------------------


@pytest.mark.slow
def test_concurrent_cli_and_mcp_writes_are_all_seen(example_palace):
    count = 4

    def cli_add(i):
        memory = new_memory(i, "cli")
        return subprocess.Popen(palace_command(example_palace, "add", memory["subject"], "--domain", memory["domain"],
                                               "--anchor", memory["anchor"], "--image", memory["image"],
                                               "--content", memory["content"], "--keywords", memory["keywords"][0],
                                               "--no-edit"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    async def scenario():
        async with session(example_palace) as client:
            await call(client, "status")  # the server's caches are warm before anyone writes
            writers = [cli_add(i) for i in range(count)]
            mcp_adds = [await call(client, "add", **new_memory(i, "mcp")) for i in range(count)]
            outcomes = [(w.wait(), w.stderr.read()) for w in writers]
            # The server's next calls must see what the CLI wrote meanwhile.
            seen_cli = [await call(client, "recall", query=f"zorblcli{i} protocol") for i in range(count)]
            got_cli = [await call(client, "get", id=f"quillon-cli-widget-{i}") for i in range(count)]
            # A CLI process running while the server is up must see what MCP wrote.
            seen_by_cli = [cli(example_palace, "recall", f"zorblmcp{i} protocol", "--format", "json")
                           for i in range(count)]
            status = await call(client, "status")
            return mcp_adds, outcomes, seen_cli, got_cli, seen_by_cli, status

    mcp_adds, outcomes, seen_cli, got_cli, seen_by_cli, status = anyio.run(scenario)
    for error, text in mcp_adds:
        assert not error, text
    for code, err in outcomes:
        assert code == 0, err
    for i, (error, text) in enumerate(seen_cli):
        assert not error and handed(text)[0] == f"quillon-cli-widget-{i}", text
    for error, text in got_cli:
        assert not error, text
    for i, done in enumerate(seen_by_cli):
        assert json.loads(done.stdout)["hits"][0]["id"] == f"quillon-mcp-widget-{i}"
    assert f"memories: {89 + 2 * count} in 6 domain(s)" in status[1]
    linted = json.loads(cli(example_palace, "lint", "--json", check=False).stdout)   # weak images only
    assert linted["errors"] == 0 and f"problems: {linted['warnings']} (0 errors, {linted['warnings']} warnings)" \
        in status[1]
    lint = cli(example_palace, "index", "--check", check=False)
    assert lint.returncode == 0, lint.stdout + lint.stderr


# ---- study -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_quiz_next_and_grade_append_agent_reviews(example_palace):
    async def scenario():
        async with session(example_palace) as client:
            asked = await call(client, "quiz_next", domain="storage-engines")
            handle = asked[1].splitlines()[0][len("question: "):]
            blank = await call(client, "quiz_grade", question=handle, answer="no idea")
            expected = next(line for line in blank[1].splitlines() if line.startswith("expected: "))[len("expected: "):]
            right = await call(client, "quiz_grade", question=handle, answer=expected)
            again = await call(client, "quiz_next", domain="storage-engines")
            bogus = await call(client, "quiz_grade", question="not-a-handle", answer="x")
            return asked, handle, blank, right, again, bogus

    asked, handle, blank, right, again, bogus = anyio.run(scenario)
    assert not asked[0] and handle.split(":")[1] in ("cloze", "anchor", "image", "facts", "link")
    memory_id = handle.split(":")[0]
    assert (example_palace / f"memories/storage-engines/{memory_id}.md").exists()
    assert not blank[0] and blank[1].startswith("empty (score 0.00), rated again")
    assert not right[0] and right[1].startswith("correct (score 1.00), rated good")
    assert not again[0] and again[1].startswith("question: ")
    assert bogus[0] and "not a question handle" in bogus[1]
    lines = [json.loads(line) for path in (example_palace / "reviews").glob("*.jsonl")
             for line in path.read_text().splitlines() if line.strip()]
    mine = [(r["id"], r["rating"], r["learner"]) for r in lines if r["learner"] == "agent:mcp"]
    assert mine == [(memory_id, "again", "agent:mcp"), (memory_id, "good", "agent:mcp")]


# ---- the pieces, without a transport ------------------------------------------------------------


@pytest.mark.parametrize("ref, ok", [
    ("memories/storage-engines/b-tree.md", True),
    ("memories/storage-engines", True),
    ("memories/../palace.toml", False),
    ("../x", False),
    ("/etc/passwd", False),
    ("~root/x", False),
    ("C:/Windows", False),
    ("memories/a\x00b", False),
    ("palace.toml", False),
])
def test_confined(readonly_palace, ref, ok):
    if ok:
        assert confined(readonly_palace.root, ref).is_relative_to(readonly_palace.root / "memories")
    else:
        with pytest.raises(OutsidePalace):
            confined(readonly_palace.root, ref)


@pytest.mark.parametrize("text, budget", [("short", 50), ("line\n" * 500, 50), ("word " * 2000, 100),
                                          ("é" * 5000, 60), ("one long line " * 300 + "\nand a tail", 200)])
def test_fit_keeps_within_budget_and_says_so(text, budget):
    out = fit(text, budget)
    assert len(out.encode("utf-8")) <= budget * 4
    assert (out == text) == (len(text.encode("utf-8")) <= budget * 4)
    if out != text:
        assert out.endswith(f"cut at max_tokens={budget}") and len(out.encode("utf-8")) > budget * 4 * 0.6


def test_add_over_the_size_limit_leaves_nothing_on_disk(readonly_example):
    tools = PalaceTools(Palace(readonly_example))
    before = sorted(p for p in readonly_example.rglob("*") if ".palace" not in p.parts)
    with pytest.raises(PalaceError, match="over the 1,000,000 byte limit for a note; nothing was written"):
        tools.add(**dict(new_memory(1, "huge"), content="x" * 10_000_000))
    assert sorted(p for p in readonly_example.rglob("*") if ".palace" not in p.parts) == before


def test_tools_without_a_transport_see_a_write_made_behind_their_back(example_palace):
    tools = PalaceTools(Palace(example_palace))
    assert "memories: 89" in tools.status()
    other = PalaceTools(Palace(example_palace))  # a second process, in effect
    other.add(**new_memory(7, "side"))
    assert handed(tools.recall("zorblside7 protocol"))[0] == "quillon-side-widget-7"
    assert "memories: 90" in tools.status()


@pytest.mark.slow
def test_recall_and_search_cover_conversation_turns(example_palace, tmp_path):
    from conversation_fixtures import locomo_samples

    from palace_cli.importers import import_path

    (tmp_path / "locomo.json").write_text(json.dumps(locomo_samples()))
    import_path(Palace(example_palace), tmp_path / "locomo.json")

    async def scenario():
        async with session(example_palace) as client:
            return (await call(client, "recall", query="Did Ana adopt a dog?", kind="turn"),
                    await call(client, "recall", query="Did Ana adopt a dog?", since="2023-06", until="2023-06-30"),
                    await call(client, "search", query="dog shoes", kind="turn", k=3),
                    await call(client, "search", query="dog", since="someday"))

    turns, june, found, bad = anyio.run(scenario)
    assert not turns[0] and handed(turns[1]) == []
    assert "turns (cite as [turn ID]): locomo-conv-1-s01/D1:1" in turns[1]
    assert "## Conversation conv-1, session 1 (locomo-conv-1-s01), 2023-05-08 13:56" in turns[1]
    assert ") Ana: Hi Ben! I adopted a dog." in turns[1]
    assert "locomo-conv-1-s02/D2:1" in june[1] and "locomo-conv-1-s01" not in june[1]
    assert not found[0] and found[1].splitlines()[1].startswith("locomo-conv-1-s02/D2:1 | Ben: How is the dog?")
    assert " | 2023-06-19T10:04 | conversations/locomo/conv-1-s02.md:" in found[1]
    assert bad[0] and "--since 'someday'" in bad[1]


# ---- add refuses what it cannot make right, update changes only what it is asked ------------------


@pytest.mark.slow
def test_add_refusals_say_what_to_send_and_write_nothing(example_palace):
    memory = new_memory(3, "ref")

    async def scenario():
        async with session(example_palace) as client:
            return {
                "no image": await call(client, "add", **{k: v for k, v in memory.items() if k != "image"}),
                "unguessable": await call(client, "add", **dict(memory, image="A quillon widget of zorblref3.")),
                "foreign verify": await call(client, "add", **dict(memory, verify="velvet turntable spins")),
                "unknown link": await call(client, "add", **dict(memory, links=["two-phase-comit", "paxos"])),
            }

    before = sorted(p for p in example_palace.rglob("*") if ".palace" not in p.parts)
    out = anyio.run(scenario)
    assert all(error for error, _ in out.values()), out
    assert "a memory needs an image: a vivid scene" in out["no image"][1] and "Send image='...'" in out["no image"][1]
    assert "no verify token can be proposed from this image" in out["unguessable"][1]
    assert "is not a phrase of the image" in out["foreign verify"][1]
    assert "unknown link 'two-phase-comit'" in out["unknown link"][1]
    assert "closest ids: two-phase-commit" in out["unknown link"][1]
    assert sorted(p for p in example_palace.rglob("*") if ".palace" not in p.parts) == before


@pytest.mark.slow
def test_add_with_text_alone_captures_a_plain_note_in_the_inbox(example_palace):
    async def scenario():
        async with session(example_palace) as client:
            added = await call(client, "add", subject="The staging database is restored from Sunday's snapshot")
            found = await call(client, "recall", query="which snapshot restores the staging database?")
            return added, found

    (error, text), (_, found) = anyio.run(scenario)
    assert not error, text
    assert text.startswith("added the-staging-database-is-restored-from-sunday-s-snapshot at memories/inbox/")
    assert "\ncite as: [memories/inbox/the-staging-database" in text and "verify:" not in text
    assert "cited by where it is" in text
    assert "the-staging-database-is-restored-from-sunday-s-snapshot" in handed(found)


def test_add_links_by_subject_are_stored_as_ids(example_palace):
    tools = PalaceTools(Palace(example_palace))
    text = tools.add(**dict(new_memory(4, "lnk"), links=["Two-Phase Commit (2PC)", "paxos"]))
    assert text.startswith("added quillon-lnk-widget-4")
    memory = Palace(example_palace).memory("quillon-lnk-widget-4")
    assert memory.links == ["two-phase-commit", "paxos"] and memory.verify


@pytest.mark.slow
def test_status_counts_what_lint_counts(example_palace):
    note = example_palace / "memories/storage-engines/b-tree.md"
    note.write_text(note.read_text(encoding="utf-8").replace("links: [", "links: [no-such-note, ", 1), encoding="utf-8")
    (example_palace / "memories/storage-engines/broken.md").write_text("---\nid: [unclosed\n---\n# x\n", encoding="utf-8")
    linted = json.loads(cli(example_palace, "lint", "--json", check=False).stdout)
    status = PalaceTools(Palace(example_palace)).status(max_tokens=2000)
    line = next(line for line in status.splitlines() if line.startswith("problems: "))
    assert line == (f"problems: {len(linted['problems'])} ({linted['errors']} errors, "
                    f"{linted['warnings']} warnings)")
    assert linted["errors"] >= 2 and "no-such-note" in status and "broken.md" in status


def _changed_lines(before: str, after: str) -> list[str]:
    import difflib

    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def test_update_changes_fields_and_sections_and_no_other_byte(example_palace):
    note = example_palace / "memories/reliability-operations/retry-backoff-jitter.md"
    before = note.read_text(encoding="utf-8")
    tools = PalaceTools(Palace(example_palace))
    text = tools.update("retry-backoff-jitter", fields={"anchor": "woodpeckers knocking at random",
                                                        "keywords": ["backoff", "jitter"]})
    assert text.startswith("updated retry-backoff-jitter at memories/reliability-operations/") and "anchor" in text
    after = note.read_text(encoding="utf-8")
    assert _changed_lines(before, after) == [
        "-anchor: woodpecker choir at the door",
        "-keywords: [exponential backoff, full jitter, retry storm, thundering herd, retry budget]",
        "+anchor: woodpeckers knocking at random", "+keywords: [backoff, jitter]"]
    content = "Retry with exponential backoff and full jitter.\n\nCap the attempts."
    tools.update("retry-backoff-jitter", sections={"Content": content})
    final = note.read_text(encoding="utf-8")
    assert final.split("## Content")[0] == after.split("## Content")[0]            # frontmatter and Image untouched
    assert final.split("## Content\n")[1].split("## Links")[0] == content + "\n\n"
    assert final.split("## Links")[1] == after.split("## Links")[1]                # and the Links section
    assert "Cap the attempts." in tools.get("retry-backoff-jitter") and "woodpeckers knocking" in tools.recall(
        "woodpeckers knocking at random")


@pytest.mark.parametrize("fields, sections, message", [
    ({"image": "x"}, None, "cannot update 'image'; the fields are subject, anchor"),
    ({"id": "new-id"}, None, "the id changes with `palace mv`"),
    ({"links": ["no-such-memory"]}, None, "unknown link 'no-such-memory'"),
    ({"keywords": "one, two"}, None, "keywords must be a list of texts"),
    ({"verify": "choir of crows"}, None, "the Image would not contain the verify token 'choir of crows'"),
    ({"verify": "mustard-yellow tuxedo"}, None, "Image would not contain"),
    (None, {"Image": "Woodpeckers knock at random."}, "the Image would not contain the verify token"),
    (None, {"Summary": "x"}, "no `## Summary` section to replace"),
    (None, {"Content": "## Heading\ninside"}, "contains a `#` or `##` heading line"),
    (None, None, "nothing to update"),
])
def test_update_refuses_what_would_leave_the_note_wrong(example_palace, fields, sections, message):
    note = example_palace / "memories/reliability-operations/retry-backoff-jitter.md"
    before = note.read_bytes()
    with pytest.raises(PalaceError, match=re.escape(message)):
        PalaceTools(Palace(example_palace)).update("retry-backoff-jitter", fields=fields, sections=sections)
    assert note.read_bytes() == before


@pytest.mark.slow
def test_update_over_the_sdk_client_with_a_new_image_and_token(example_palace):
    image = "Woodpeckers in saffron capes knock at random moments, each rolling a purple die first."

    async def scenario():
        async with session(example_palace) as client:
            updated = await call(client, "update", id="retry-backoff-jitter",
                                 fields={"verify": "woodpeckers in saffron capes"}, sections={"Image": image})
            got = await call(client, "get", id="retry-backoff-jitter")
            return updated, got

    (error, text), (_, got) = anyio.run(scenario)
    assert not error, text
    assert "verify: woodpeckers in saffron capes" in text and "## Image" in text
    assert image in got and "verify: woodpeckers in saffron capes" in got
