"""Which weight type the embedder gets: bf16 where llama.cpp has native bf16 dot products, q8_0 elsewhere.

Measured on the reference machine (AMD EPYC with AVX512-BF16, docs/benchmarks.md, Embedding): bf16
costs 1.45x less CPU a note than q8_0 and is nearer the float64 reference. Without those instructions
llama.cpp widens bf16 to f32 in software, and q8_0's int8 dot products are the better bet.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

EMBEDDER_TYPES = ("q8_0", "bf16", "f16")  # what `palace models install --embedder-type` accepts
_FEATURE = re.compile(r"([A-Z][A-Z0-9_]*) = (\w+)")


@dataclass(frozen=True)
class WeightChoice:
    """The embedder's weight type for this machine and, in words, why."""

    qtype: str
    reason: str


def choose_embedder_type(system_info: str, cpuinfo: str | None = None) -> WeightChoice:
    """bf16 when llama.cpp's CPU backend reports AVX512_BF16 (and /proc/cpuinfo, when given, agrees), else q8_0.

    `system_info` is llama_print_system_info()'s text ("CPU : SSE3 = 1 | ... | AVX512_BF16 = 1 | ..."):
    what the loaded build actually uses, which a CPU flag alone does not say (a generic build ignores it).
    """
    features = dict(_FEATURE.findall(system_info))
    if features.get("AVX512_BF16") != "1":
        return WeightChoice("q8_0", "llama.cpp here has no native bf16 dot products (no AVX512_BF16)")
    flags = cpu_flags(cpuinfo) if cpuinfo is not None else None
    if flags is not None and "avx512_bf16" not in flags:
        return WeightChoice("q8_0", "this CPU has no avx512_bf16 (/proc/cpuinfo), whatever llama.cpp was built for")
    return WeightChoice("bf16", "llama.cpp uses this CPU's AVX512-BF16 dot products")


def cpu_flags(cpuinfo: str) -> set[str] | None:
    """The x86 feature flags in /proc/cpuinfo's text (every CPU's), or None when it lists none (not x86)."""
    flags: set[str] | None = None
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            flags = (flags or set()) | set(value.split())
    return flags


def embedder_type_here() -> WeightChoice:
    """The weight type for this machine: asks the installed llama.cpp, and reads /proc/cpuinfo on Linux."""
    from palace_cli.errors import ModelError
    from palace_cli.backends.llamacpp import system_info

    try:
        info = system_info()
    except ModelError as e:  # llama-cpp-python is not installed: the embedder cannot run here anyway
        return WeightChoice("q8_0", f"could not ask llama.cpp what it supports ({e})")
    cpuinfo = None
    if sys.platform.startswith("linux"):
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo = None
    return choose_embedder_type(info, cpuinfo)
