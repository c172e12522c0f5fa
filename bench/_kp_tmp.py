"""Where the BPE kernel's time goes, instruction by instruction: `perf` samples mapped onto its machine code.

    .venv/bin/python bench/_kernel_perf.py [--tokenizer cl100k] [--corpus en] [--mode warm] [--passes 300]

A developer's tool, not a published benchmark (nothing goes to docs/benchmarks.md). numba's JIT code has
no symbols for `perf`, and ``NUMBA_ENABLE_PROFILING=1`` (which registers them) made the kernel ~7x slower
here, so this runs the kernel in a child under ``perf record -e cpu-clock`` (a software event: it works
in VMs without hardware counters), dumps the kernel's machine code from memory, disassembles it with
``objdump`` and counts the samples that fall on each instruction. It prints the hottest 64-byte blocks
and, around each of the hottest instructions, the code with its sample counts (a sample lands on the
instruction after the one that stalled, as a rule). ``--mode warm``: every pass on the cache the first
one left (chunks already seen); ``cold``: a fresh cache each pass (first sightings merged). Needs
`perf` and `objdump` (Debian: linux-perf, binutils).

``--instructions``: instead of sampling, count the instructions one pass executes, exactly, under
valgrind (``cachegrind``, no cache simulation): the child runs 1 and then 3 passes (after a run that
only loads or compiles the kernels) and the difference
in the instructions of code without symbols (numba's JIT code) is halved. On a shared machine whose
timings move by 10-20% between runs this count does not move (+-0.1%), so it tells a change that
removes work from one that does not before any timing is trusted (it says nothing of cache misses
or of how many instructions run per cycle). valgrind has no AVX-512: the kernels are compiled for
``NUMBA_CPU_NAME=haswell`` in a cache of their own (``.cache/numba-valgrind``; the first run compiles
them under valgrind: minutes). Needs `valgrind` and `cg_annotate` (Debian: valgrind).
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DUMP = 1 << 19  # bytes of machine code dumped from the kernel's entry (its hot loop is near the start)


def child(a) -> None:
    import numpy as np

    sys.path.insert(0, str(ROOT / "bench"))
    from encode_profile import CORPORA, joined, load_docs, make

    docs = load_docs(CORPORA / a.corpus, a.max_mb)
    tok = make(a.tokenizer)
    tok.encode_batch(docs[:2], num_threads=1, as_arrays=True, disallowed_special=())
    enc = tok._compiled()
    data, _, offs, marks = joined(docs, enc.pattern)
    pos = np.empty(len(docs), np.int64)
    enc._run(data, offs, marks, pos)
    t0 = time.perf_counter()
    for _ in range(a.passes):
        if a.mode == "cold":
            enc._local.state = None  # an empty cache: the pinned tokens only
        enc._run(data, offs, marks, pos)
    ms = (time.perf_counter() - t0) / max(a.passes, 1) * 1e3
    K = enc._K
    cres = K.encode_chunks.overloads[K.encode_chunks.signatures[0]]
    addr = cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)
    if not a.count:  # (under valgrind the code's mapping can end within DUMP: reading past it faults)
        Path(a.out, "kernel.bin").write_bytes(ctypes.string_at(addr, DUMP))
    Path(a.out, "kernel.addr").write_text(f"{addr} {ms} {offs.size - 1}")
    from numba.core.runtime.nrt import rtsys
    print("NRT", hex(rtsys._library.get_pointer_to_function("NRT_incref")), hex(rtsys._library.get_pointer_to_function("NRT_decref")), file=sys.stderr)


def instructions(a) -> None:
    """Instructions per pass: the JIT code's count under cachegrind, 3 passes minus 1, halved."""
    import os

    for tool in ("valgrind", "cg_annotate"):
        if not shutil.which(tool):
            raise SystemExit(f"bench/_kernel_perf.py --instructions needs `{tool}` on PATH (Debian: valgrind)")
    env = dict(os.environ, NUMBA_CPU_NAME="haswell", NUMBA_CACHE_DIR=str(ROOT / ".cache" / "numba-valgrind"),
               OPENBLAS_NUM_THREADS="1", PYTHONHASHSEED="0")
    counts = []
    with tempfile.TemporaryDirectory() as tmp:
        for passes in (0, 1, 3):  # the first run only compiles what the valgrind cache lacks (or loads it)
            cmd = [sys.executable, __file__, "--child", "--count", "--out", tmp, "--tokenizer", a.tokenizer, "--corpus",
                   a.corpus, "--mode", a.mode, "--passes", str(passes), "--max-mb", str(a.max_mb)]
            run = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no",
                                  f"--cachegrind-out-file={tmp}/cg", *cmd], env=env, capture_output=True, text=True)
            if run.returncode:
                raise SystemExit(f"the child under valgrind failed ({run.returncode}):\n{run.stderr[-3000:]}")
            report = subprocess.run(["cg_annotate", f"{tmp}/cg"], capture_output=True, text=True, check=True).stdout
            jit = [int(m.group(1).replace(",", "")) for m in re.finditer(r"^\s*([\d,]+) .*\?\?\?:\?\?\?", report, re.M)]
            if not jit:
                raise SystemExit("cg_annotate printed no line for code without symbols (???:???): its format changed?")
            counts.append(jit[0])
        chunks = int(Path(tmp, "kernel.addr").read_text().split()[2])
    per_pass = (counts[2] - counts[1]) / 2
    print(f"{a.tokenizer} {a.corpus}, {a.mode} passes: {per_pass / 1e6:.2f} M instructions per pass over "
          f"{chunks:,} chunks ({per_pass / chunks:.1f} per chunk; JIT code only, counted by valgrind)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="example: .venv/bin/python "
                                 "bench/_kernel_perf.py --tokenizer cl100k --corpus code --mode cold --passes 100")
    ap.add_argument("--tokenizer", default="cl100k", choices=["gpt2", "cl100k", "o200k", "llama3"])
    ap.add_argument("--corpus", default="en", help="a folder of ../shared/corpora (en, zh, code, multi)")
    ap.add_argument("--mode", default="warm", choices=["warm", "cold"])
    ap.add_argument("--passes", type=int, default=300)
    ap.add_argument("--max-mb", type=float, default=2.0)
    ap.add_argument("--top", type=int, default=12, help="hot instructions shown with their code around them")
    ap.add_argument("--instructions", action="store_true",
                    help="count one pass's instructions under valgrind instead of sampling (see above)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--count", action="store_true", help=argparse.SUPPRESS)  # a child under valgrind: no code dump
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a)
        return
    if a.instructions:
        instructions(a)
        return
    for tool in ("perf", "objdump"):
        if not shutil.which(tool):
            raise SystemExit(f"bench/_kernel_perf.py needs `{tool}` on PATH (Debian: linux-perf, binutils)")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, __file__, "--child", "--out", tmp, "--tokenizer", a.tokenizer, "--corpus", a.corpus,
               "--mode", a.mode, "--passes", str(a.passes), "--max-mb", str(a.max_mb)]
        subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "10000", "-o", f"{tmp}/perf.data", *cmd],
                       check=True)
        addr, ms, chunks = Path(tmp, "kernel.addr").read_text().split()
        addr = int(addr)
        ips = subprocess.run(["perf", "script", "-i", f"{tmp}/perf.data", "-F", "ip"], capture_output=True,
                             text=True, check=True).stdout.split()
        rep = subprocess.run(["perf", "report", "-i", f"{tmp}/perf.data", "--stdio", "--sort", "dso,sym"], capture_output=True,
                             text=True).stdout
        tot = collections.Counter(int(x, 16) for x in ips)
        nrt = sum(c for ip, c in tot.items() if (ip & 0xFFF) in (0x059, 0x069, 0x05a, 0x06b))
        print(f"samples {sum(tot.values())}, at NRT_incref/decref returns {nrt}")
        dis = subprocess.run(["objdump", "-D", "-b", "binary", "-m", "i386:x86-64", f"--adjust-vma={addr}",
                              f"{tmp}/kernel.bin"], capture_output=True, text=True, check=True).stdout
    hits = collections.Counter(int(x, 16) for x in ips)
    inside = {ip: c for ip, c in hits.items() if addr <= ip < addr + DUMP}
    total = sum(inside.values())
    print(f"{a.tokenizer} {a.corpus}, {a.mode} passes: {float(ms):.2f} ms per pass over {int(chunks):,} chunks; "
          f"{total:,} of {sum(hits.values()):,} samples in the kernel's first {DUMP >> 10} KB")
    if not total:
        return
    blocks = collections.Counter()
    for ip, c in inside.items():
        blocks[(ip - addr) // 64 * 64] += c
    print("hottest 64-byte blocks (offset from the kernel's entry):")
    for off, c in blocks.most_common(15):
        print(f"  +{off:#07x}  {100 * c / total:5.1f}%")
    # objdump's lines: address, bytes, instruction (tab-separated); a long instruction's further bytes
    # come on lines of their own, without an instruction: left out
    lines = [(int(m.group(1), 16), line) for line in dis.splitlines()
             if (m := re.match(r"\s*([0-9a-f]+):\s", line)) and line.count("\t") >= 2]
    where = {ip: i for i, (ip, _) in enumerate(lines)}
    import os
    for want in [int(x, 16) for x in os.environ.get("SHOW", "").split(",") if x]:
        i = min(range(len(lines)), key=lambda j: abs(lines[j][0] - addr - want))
        print(f"--- around +{want:#x}")
        for j in range(max(0, i - 25), min(len(lines), i + 8)):
            ip2, text = lines[j]
            print(f"{inside.get(ip2, 0):7d}   +{ip2 - addr:#07x} {text.split(chr(9), 2)[-1]}")
    for i, (ip2, text) in enumerate(lines):
        if os.environ.get("SHOW") and "movabs" in text and "call" in lines[min(i + 1, len(lines) - 1)][1] + lines[min(i + 2, len(lines) - 1)][1]:
            print(f"  call site +{ip2 - addr:#07x} ({inside.get(lines[i+2][0], 0) + inside.get(lines[i+3][0], 0)} samples after): {text.split(chr(9), 2)[-1]}")
    for ip, c in sorted(inside.items(), key=lambda x: -x[1])[: a.top]:
        i = where.get(ip)
        if i is None:
            continue
        print(f"\n{100 * c / total:.1f}% at +{ip - addr:#x}:")
        for j in range(max(0, i - 6), min(len(lines), i + 3)):
            ip2, text = lines[j]
            print(f"{inside.get(ip2, 0):7d} {'>' if ip2 == ip else ' '} +{ip2 - addr:#07x} {text.split(chr(9), 2)[-1]}")


if __name__ == "__main__":
    main()
