"""The embedder's weight type: bf16 where llama.cpp has native bf16 dot products, q8_0 elsewhere."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from palace_cli.backends.weights import choose_embedder_type, cpu_flags, embedder_type_here

# llama_print_system_info() of the llama-cpp-python 0.3.36 build on the reference machine (AMD EPYC, native build)
ZEN4_INFO = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX_VNNI = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
             "AVX512 = 1 | AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | LLAMAFILE = 1 | OPENMP = 1 | "
             "REPACK = 1 | ")
# the same line from a build for an AVX-512 CPU without BF16 (Skylake-SP), and an older-format AVX2-only line
SKYLAKE_INFO = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | "
                "LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | ")
OLD_AVX2_INFO = ("AVX = 1 | AVX_VNNI = 0 | AVX2 = 1 | AVX512 = 0 | AVX512_VBMI = 0 | AVX512_VNNI = 0 | "
                 "AVX512_BF16 = 0 | FMA = 1 | NEON = 0 | SVE = 0 | ARM_FMA = 0 | F16C = 1 | FP16_VA = 0 | "
                 "WASM_SIMD = 0 | BLAS = 0 | SSE3 = 1 | SSSE3 = 1 | VSX = 0 | MATMUL_INT8 = 0 | LLAMAFILE = 1 | ")
GRAVITON3_INFO = ("CPU : NEON = 1 | ARM_FMA = 1 | FP16_VA = 1 | MATMUL_INT8 = 1 | SVE = 1 | DOTPROD = 1 | "
                  "SVE_CNT = 32 | OPENMP = 1 | REPACK = 1 | ")


def cpuinfo(flags: str, cpus: int = 2, model: str = "AMD EPYC") -> str:
    """/proc/cpuinfo as Linux writes it on x86: one block a logical CPU, a blank line between."""
    block = ("processor\t: {n}\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
             f"model name\t: {model}\nstepping\t: 1\ncpu MHz\t\t: 2595.124\ncache size\t: 1024 KB\n"
             f"fpu\t\t: yes\nflags\t\t: {flags}\nbugs\t\t: sysret_ss_attrs spectre_v1 spectre_v2\n"
             "bogomips\t: 5190.24\naddress sizes\t: 48 bits physical, 48 bits virtual\npower management:\n")
    return "\n".join(block.format(n=n) for n in range(cpus))


ZEN4_FLAGS = ("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht "
              "syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm rep_good nopl cpuid extd_apicid tsc_known_freq pni "
              "pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor "
              "lahf_lm cmp_legacy cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw topoext bmi1 avx2 smep bmi2 "
              "erms invpcid avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni avx512bw "
              "avx512vl xsaveopt xsavec xgetbv1 xsaves avx_vnni avx512_bf16 clzero xsaveerptr wbnoinvd arat "
              "avx512vbmi umip pku ospke avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg "
              "avx512_vpopcntdq rdpid fsrm")
SKYLAKE_FLAGS = ("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 "
                 "ss ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid pni "
                 "pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand "
                 "hypervisor lahf_lm abm 3dnowprefetch fsgsbase bmi1 hle avx2 smep bmi2 erms invpcid rtm mpx "
                 "avx512f avx512dq rdseed adx smap clflushopt clwb avx512cd avx512bw avx512vl xsaveopt xsavec "
                 "xgetbv1 xsaves arat pku ospke")
ARM_CPUINFO = "\n".join(
    f"processor\t: {n}\nBogoMIPS\t: 2100.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp "
    "asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm "
    "ssbs paca pacg dcpodp svei8mm svebf16 i8mm bf16 dgh rng\nCPU implementer\t: 0x41\nCPU architecture: 8\n"
    "CPU variant\t: 0x1\nCPU part\t: 0xd40\nCPU revision\t: 1\n" for n in range(2))


@pytest.mark.parametrize("info, cpu, expected", [
    (ZEN4_INFO, cpuinfo(ZEN4_FLAGS), "bf16"),
    (ZEN4_INFO, None, "bf16"),  # not Linux: llama.cpp's word alone
    (SKYLAKE_INFO, cpuinfo(SKYLAKE_FLAGS, model="Intel(R) Xeon(R) Platinum 8175M"), "q8_0"),
    (SKYLAKE_INFO, cpuinfo(ZEN4_FLAGS), "q8_0"),  # a generic build does not use the CPU's bf16
    (OLD_AVX2_INFO, cpuinfo(ZEN4_FLAGS), "q8_0"),  # "AVX512_BF16 = 0"
    (ZEN4_INFO, cpuinfo(SKYLAKE_FLAGS), "q8_0"),  # a build for another CPU than this one
    (GRAVITON3_INFO, ARM_CPUINFO, "q8_0"),  # bf16 in the CPU, but no bf16 dot products in llama.cpp's ARM build
    ("", None, "q8_0"),
])
def test_embedder_type_follows_what_llamacpp_uses_on_this_cpu(info, cpu, expected):
    choice = choose_embedder_type(info, cpu)
    assert choice.qtype == expected
    assert choice.reason and ("AVX512" in choice.reason or "avx512" in choice.reason)


def test_cpu_flags_reads_every_cpu_and_nothing_on_arm():
    assert "avx512_bf16" in cpu_flags(cpuinfo(ZEN4_FLAGS)) and "avx512f" in cpu_flags(cpuinfo(SKYLAKE_FLAGS))
    assert "avx512_bf16" not in cpu_flags(cpuinfo(SKYLAKE_FLAGS))
    assert cpu_flags(ARM_CPUINFO) is None


def test_this_machine_gets_what_its_llamacpp_and_cpu_both_offer():
    from palace_cli.backends.llamacpp import system_info

    info = system_info()
    assert "AVX" in info or "NEON" in info  # the real line has the shape parsed above
    cpu = Path("/proc/cpuinfo").read_text() if sys.platform.startswith("linux") else None
    both = "AVX512_BF16 = 1" in info and (cpu is None or "avx512_bf16" in cpu.split())
    assert embedder_type_here().qtype == ("bf16" if both else "q8_0")
