"""`palace bench lsp`: request latency of `palace lsp` on a synthetic palace, measured from a real client.

A pygls client starts `palace lsp` in a subprocess over stdio, as an editor does, waits for the first
refresh (the first diagnostics), warms up, then times each request from send to answer: completion
after `[[` with prefixes of real names, typos and abbreviations, hover and definition on links to
random memories, references, document and workspace symbols, and how long diagnostics take after the
debounce. The typing itself (didChange) is sent before each timed request and is not timed. Then the cost
that is in no request: after a save that changed one note on disk, the server's CPU time (from /proc) and
the wall time until it has refreshed, rebuilt its tables and sent the open buffer's diagnostics again.
Then big buffers of links: how long until their diagnostics, and hovers in them and elsewhere meanwhile.
Everything is measured from the client: the bench imports nothing of the server.
"""

from __future__ import annotations

import asyncio
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from palace_cli.progress import Progress
from palace_cli.bench.index_bench import calibration_s
from palace_cli.bench.synth import generate_palace

ENTRY = "from palace_cli.cli import main; main()"
# Buffers of links opened at the end: linted (up to the note size limit), and one far over it.
BUFFER_SIZES = (100_000, 250_000, 500_000, 990_000, 20_000_000)


def _stats(times: list[float]) -> dict:
    ordered = sorted(times)
    return {"n": len(ordered), "p50_ms": round(statistics.median(ordered) * 1000, 2),
            "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)] * 1000, 2),
            "max_ms": round(ordered[-1] * 1000, 2)}


def _peak_rss_mb(pid: int) -> float | None:
    """The server process's peak resident memory (Linux /proc; None elsewhere)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    line = next((x for x in status.splitlines() if x.startswith("VmHWM:")), None)
    return round(int(line.split()[1]) / 1024, 1) if line else None


def _prefixes(memories: list, rng: random.Random, count: int) -> list[str]:
    """What people type after `[[`: starts of ids and subjects (1-12 letters), a word of a subject,
    an abbreviation, a typo."""
    out = []
    for i in range(count):
        memory = rng.choice(memories)
        kind = i % 5
        if kind == 0:
            out.append(memory.id[: rng.randint(1, 12)])
        elif kind == 1:
            out.append(memory.subject[: rng.randint(2, 14)])
        elif kind == 2:
            out.append(rng.choice(memory.subject.split()).lower()[:6])
        elif kind == 3:
            out.append("".join(w[0] for w in memory.id.split("-")[:4]))
        else:
            word = memory.id[:8]
            cut = rng.randrange(len(word))
            out.append(word[:cut] + word[cut + 1 :] + "q")
    return out


class _Editor:
    """The client side of the session: one open buffer, changed whole, and the time of each diagnostics publish."""

    def __init__(self, client, uri: str, base: str, published: dict[str, float]):
        from lsprotocol import types as lsp

        self.client, self.uri, self.base, self.published = client, uri, base, published
        self.doc = lsp.TextDocumentIdentifier(uri)
        self.base_lines = base.count("\n")
        self.version = 1

    def change(self, text: str) -> None:
        """Send the buffer's new text (not timed)."""
        from lsprotocol import types as lsp

        self.version += 1
        self.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(self.version, self.uri), [lsp.TextDocumentContentChangeWholeDocument(text)]))

    @staticmethod
    async def timed(request) -> float:
        begun = time.perf_counter()
        await request
        return time.perf_counter() - begun


async def _session(root: Path, requests: int, seed: int, say) -> dict:
    from lsprotocol import types as lsp
    from pygls.lsp.client import LanguageClient

    from palace_cli.palace import Palace

    rng = random.Random(seed)
    memories = sorted(Palace(root).index.scan(light=True).memories.values(), key=lambda m: m.id)
    client = LanguageClient("palace-bench", "1")
    published: dict[str, float] = {}

    @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params):
        published[params.uri] = time.perf_counter()

    started = time.perf_counter()
    await client.start_io(sys.executable, "-c", ENTRY, "lsp", cwd=str(root))
    await client.initialize_async(lsp.InitializeParams(capabilities=lsp.ClientCapabilities(), root_uri=root.as_uri()))
    client.initialized(lsp.InitializedParams())
    note = root / memories[len(memories) // 2].path
    editor = _Editor(client, note.as_uri(), note.read_text(encoding="utf-8"), published)
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(editor.uri, "markdown", 1,
                                                                                      editor.base)))
    while editor.uri not in published:
        await asyncio.sleep(0.02)
    ready = time.perf_counter() - started
    say(f"server ready after {ready:.2f} s; timing {requests} requests of each kind")
    results: dict = {"ready_s": round(ready, 2)}
    results.update(await _at_cursor(editor, memories, rng, requests))
    results.update(await _over_notes(editor, memories, rng, requests))
    results["server_peak_rss_mb"] = _peak_rss_mb(client._server.pid)
    say("saving one-note edits on disk")
    results["after_save"] = await _after_saves(client._server.pid, root, note, published, editor.uri)
    say("opening big buffers of links")
    results["big_buffers"] = [await _big_buffer(client, root, memories, size, published, editor.doc,
                                                lsp.Position(editor.base_lines, 0)) for size in BUFFER_SIZES]
    results["server_peak_rss_mb_with_big_buffers"] = _peak_rss_mb(client._server.pid)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return results


async def _at_cursor(editor: _Editor, memories: list, rng: random.Random, requests: int) -> dict:
    """Completion after `[[`, hover and definition on links: 20 warm-up requests of each, then `requests` timed."""
    from lsprotocol import types as lsp

    client, doc, base, base_lines, timed = editor.client, editor.doc, editor.base, editor.base_lines, editor.timed
    for phase in ("warm-up", "measured"):
        count = 20 if phase == "warm-up" else requests
        completion, hover, definition = [], [], []
        for typed in _prefixes(memories, rng, count):
            editor.change(base + f"\nSee [[{typed}")
            completion.append(await timed(client.text_document_completion_async(lsp.CompletionParams(
                doc, lsp.Position(base_lines + 1, len(f"See [[{typed}"))))))
        targets = [rng.choice(memories) for _ in range(count)]
        editor.change(base + "\n" + "\n".join(f"- [[{m.id}]]" for m in targets) + "\n")
        for i in range(count):
            position = lsp.Position(base_lines + 1 + i, 5)
            hover.append(await timed(client.text_document_hover_async(lsp.HoverParams(doc, position))))
            definition.append(await timed(client.text_document_definition_async(lsp.DefinitionParams(doc, position))))
    return {"completion": _stats(completion), "hover": _stats(hover), "definition": _stats(definition)}


async def _over_notes(editor: _Editor, memories: list, rng: random.Random, requests: int) -> dict:
    """References, document and workspace symbols, and the time from a change to its diagnostics."""
    from lsprotocol import types as lsp

    client, doc, timed, published = editor.client, editor.doc, editor.timed, editor.published
    references, symbols, workspace, lint = [], [], [], []
    for i in range(max(requests // 10, 5)):
        position = lsp.Position(editor.base_lines + 1 + i, 5)
        references.append(await timed(client.text_document_references_async(lsp.ReferenceParams(
            context=lsp.ReferenceContext(include_declaration=False), text_document=doc, position=position))))
        symbols.append(await timed(client.text_document_document_symbol_async(lsp.DocumentSymbolParams(doc))))
        query = " ".join(rng.choice(memories).subject.split()[:2])
        workspace.append(await timed(client.workspace_symbol_async(lsp.WorkspaceSymbolParams(query))))
        published.pop(editor.uri, None)
        sent = time.perf_counter()
        editor.change(editor.base + f"\n[[no-such-memory-{i}]]\n")
        while editor.uri not in published:
            await asyncio.sleep(0.002)
        lint.append(published[editor.uri] - sent)
    return {"references": _stats(references), "document_symbols": _stats(symbols),
            "workspace_symbols": _stats(workspace), "diagnostics_after_change": _stats(lint)}


async def _big_buffer(client, root: Path, memories: list, size: int, published: dict, other, other_position,
                      deadline_s: float = 600.0) -> dict:
    """Open a buffer of `size` bytes of `[[links]]` lines (half to memories, half broken; not saved): seconds to
    its diagnostics, and the latency of a hover in it and of one in another document sent right after it opened
    (answered while the big one is linted)."""
    from lsprotocol import types as lsp

    head = f"---\nid: big-buffer-{size}\nsubject: Big buffer\n---\n# Big buffer\n\n"
    lines, total = [], len(head)
    while total < size:
        lines.append(f"- [[{memories[len(lines) % len(memories)].id}]] and [[no-such-memory-{len(lines)}]]")
        total += len(lines[-1]) + 1
    text = head + "\n".join(lines) + "\n"
    uri = (root / "memories" / memories[0].domain / f"big-buffer-{size}.md").as_uri()
    published.pop(uri, None)
    sent = time.perf_counter()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri, "markdown", 1, text)))
    begun = time.perf_counter()
    await client.text_document_hover_async(lsp.HoverParams(other, other_position))
    elsewhere = time.perf_counter() - begun
    begun = time.perf_counter()
    position = lsp.Position(head.count("\n") + len(lines) // 2, 5)
    await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri), position))
    inside = time.perf_counter() - begun
    while uri not in published and time.perf_counter() - sent < deadline_s:
        await asyncio.sleep(0.005)
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri)))
    return {"bytes": len(text.encode()), "links": 2 * len(lines),
            "diagnostics_s": round(published[uri] - sent, 3) if uri in published else None,
            "hover_elsewhere_ms": round(elsewhere * 1000, 1), "hover_in_it_ms": round(inside * 1000, 1)}


def run(size: int = 10_000, requests: int = 200, seed: int = 0, workdir: Path | None = None,
        progress: Progress | None = None) -> dict:
    """Generate (or reuse, under workdir) a synthetic palace, index it, and time `palace lsp` on it."""
    def say(message: str) -> None:
        if progress:
            progress(message, 0, 0)

    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="palace-bench-lsp-"))
    try:
        return _run(base / f"palace-{size}", size, requests, seed, say)
    finally:
        if workdir is None:
            shutil.rmtree(base, ignore_errors=True)


def _run(root: Path, size: int, requests: int, seed: int, say) -> dict:
    from palace_cli.palace import Palace

    if not (root / "palace.toml").exists():
        root.parent.mkdir(parents=True, exist_ok=True)
        say(f"generating {size:,} synthetic notes in {root}")
        generate_palace(root, size, seed=seed, embedder="none")
    say(f"indexing {root}")
    Palace(root).refresh(embedder=None)
    results = {"machine": {"python": platform.python_version(), "platform": platform.platform(),
                           "cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2),
                           "calibration_s": round(calibration_s(), 3)},
               "notes": size, "requests": requests, "seed": seed, "palace": str(root)}
    results.update(asyncio.run(_session(root, requests, seed, say)))
    results["machine"]["load_avg_1m_after"] = round(os.getloadavg()[0], 2)
    return results


def _server_cpu_s(pid: int) -> float | None:
    """CPU seconds the server process has used, all its threads, those ended too (Linux /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime and stime, in clock ticks


async def _after_saves(pid: int, root: Path, opened: Path, published: dict, uri: str, edits: int = 5,
                       deadline_s: float = 120.0) -> dict:
    """Save `edits` one-note edits on disk (as another editor or `git checkout` would, the note restored after
    each): the server's CPU ms and the wall ms from the save until the open buffer's diagnostics come again (the
    watcher's debounce, the refresh, the new tables and the buffer's lint; requests are answered meanwhile)."""
    notes = sorted((root / "memories").rglob("*.md"))
    note = next(p for p in notes[len(list((root / "memories").iterdir())):] + notes if p != opened)
    original = note.read_text(encoding="utf-8")
    cpu, wall = [], []
    try:
        for n in range(edits):
            for text in (original.replace("## Content\n", f"## Content\nEdit {n}.\n", 1), original):
                published.pop(uri, None)
                cpu_before, sent = _server_cpu_s(pid), time.perf_counter()
                note.write_text(text, encoding="utf-8")
                while uri not in published and time.perf_counter() - sent < deadline_s:
                    await asyncio.sleep(0.005)
                if text is not original:
                    wall.append(published[uri] - sent if uri in published else None)
                    cpu.append(None if cpu_before is None else _server_cpu_s(pid) - cpu_before)
                await asyncio.sleep(1.0)  # past the watcher's longest wait: the next save starts from a quiet server
    finally:
        note.write_text(original, encoding="utf-8")

    def ms(values: list, pick) -> float | None:
        return None if None in values else round(pick(values) * 1000, 1)

    return {"edits": edits, "cpu_p50_ms": ms(cpu, statistics.median), "cpu_max_ms": ms(cpu, max),
            "p50_ms": ms(wall, statistics.median), "max_ms": ms(wall, max)}
