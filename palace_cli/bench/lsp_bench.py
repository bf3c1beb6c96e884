"""`palace bench lsp`: request latency of `palace lsp` on a synthetic palace, measured from a real client.

A pygls client starts `palace lsp` in a subprocess over stdio, as an editor does, waits for the first
refresh (the first diagnostics), warms up, then times each request from send to answer: completion
after `[[` with prefixes of real names, typos and abbreviations, hover and definition on links to
random memories, references, document and workspace symbols, and how long diagnostics take after the
debounce. The typing itself (didChange) is sent before each timed request and is not timed. Then big buffers
of links: how long until their diagnostics, and hovers in them and elsewhere meanwhile. Then, in
this process, the cost that is in no request: rebuilding the server's tables after a save changed one
note (CPU and wall time of `Snapshot.load` in a long-lived process, as the server does it).
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
    uri = note.as_uri()
    base = note.read_text(encoding="utf-8")
    version = 1
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri, "markdown", version, base)))
    while uri not in published:
        await asyncio.sleep(0.02)
    ready = time.perf_counter() - started
    say(f"server ready after {ready:.2f} s; timing {requests} requests of each kind")
    doc = lsp.TextDocumentIdentifier(uri)
    base_lines = base.count("\n")

    def change(text: str) -> None:
        nonlocal version
        version += 1
        client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(version, uri), [lsp.TextDocumentContentChangeWholeDocument(text)]))

    async def timed(request) -> float:
        begun = time.perf_counter()
        await request
        return time.perf_counter() - begun

    results: dict = {"ready_s": round(ready, 2)}
    for phase in ("warm-up", "measured"):
        count = 20 if phase == "warm-up" else requests
        completion, hover, definition = [], [], []
        for typed in _prefixes(memories, rng, count):
            change(base + f"\nSee [[{typed}")
            completion.append(await timed(client.text_document_completion_async(lsp.CompletionParams(
                doc, lsp.Position(base_lines + 1, len(f"See [[{typed}"))))))
        targets = [rng.choice(memories) for _ in range(count)]
        change(base + "\n" + "\n".join(f"- [[{m.id}]]" for m in targets) + "\n")
        for i in range(count):
            position = lsp.Position(base_lines + 1 + i, 5)
            hover.append(await timed(client.text_document_hover_async(lsp.HoverParams(doc, position))))
            definition.append(await timed(client.text_document_definition_async(lsp.DefinitionParams(doc, position))))
    results.update(completion=_stats(completion), hover=_stats(hover), definition=_stats(definition))
    references, symbols, workspace, lint = [], [], [], []
    for i in range(max(requests // 10, 5)):
        position = lsp.Position(base_lines + 1 + i, 5)
        references.append(await timed(client.text_document_references_async(lsp.ReferenceParams(
            context=lsp.ReferenceContext(include_declaration=False), text_document=doc, position=position))))
        symbols.append(await timed(client.text_document_document_symbol_async(lsp.DocumentSymbolParams(doc))))
        query = " ".join(rng.choice(memories).subject.split()[:2])
        workspace.append(await timed(client.workspace_symbol_async(lsp.WorkspaceSymbolParams(query))))
        published.pop(uri, None)
        sent = time.perf_counter()
        change(base + f"\n[[no-such-memory-{i}]]\n")
        while uri not in published:
            await asyncio.sleep(0.002)
        lint.append(published[uri] - sent)
    results.update(references=_stats(references), document_symbols=_stats(symbols),
                   workspace_symbols=_stats(workspace), diagnostics_after_change=_stats(lint))
    results["server_peak_rss_mb"] = _peak_rss_mb(client._server.pid)
    say("opening big buffers of links")
    results["big_buffers"] = [await _big_buffer(client, root, memories, size, published, doc, lsp.Position(base_lines, 0))
                              for size in BUFFER_SIZES]
    results["server_peak_rss_mb_with_big_buffers"] = _peak_rss_mb(client._server.pid)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return results


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
    say("rebuilding the tables after one-note edits")
    results["table_rebuild_after_edit"] = _table_rebuilds(root)
    results["machine"]["load_avg_1m_after"] = round(os.getloadavg()[0], 2)
    return results


def _table_rebuilds(root: Path, edits: int = 5) -> dict:
    """CPU and wall ms of rebuilding the server's tables after each of `edits` saves of one note (the note
    restored afterwards); the first build of the process is reported apart, as nothing is reused in it."""
    from palace_cli.lsp.snapshot import Snapshot
    from palace_cli.palace import Palace

    palace = Palace(root)
    palace.refresh(embedder=None)
    first_cpu, first = time.process_time(), time.perf_counter()
    Snapshot.load(palace).backlinks("")
    first_cpu, first = time.process_time() - first_cpu, time.perf_counter() - first
    note = sorted((root / "memories").rglob("*.md"))[len(list((root / "memories").iterdir()))]
    original = note.read_text(encoding="utf-8")
    cpu, wall = [], []
    try:
        for n in range(edits):
            note.write_text(original.replace("## Content\n", f"## Content\nEdit {n}.\n", 1), encoding="utf-8")
            palace.refresh(embedder=None)
            started_cpu, started = time.process_time(), time.perf_counter()
            Snapshot.load(palace).backlinks("")  # what the server's _build does after a refresh
            cpu.append(time.process_time() - started_cpu)
            wall.append(time.perf_counter() - started)
    finally:
        note.write_text(original, encoding="utf-8")
        palace.refresh(embedder=None)
    return {"first_cpu_ms": round(first_cpu * 1000, 1), "first_ms": round(first * 1000, 1), "edits": edits,
            "cpu_p50_ms": round(statistics.median(cpu) * 1000, 1), "p50_ms": round(statistics.median(wall) * 1000, 1),
            "cpu_max_ms": round(max(cpu) * 1000, 1)}
