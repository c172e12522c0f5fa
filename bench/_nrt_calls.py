"""Where tokenmill's kernels pay numba's reference counts: every call of ``NRT_incref`` / ``NRT_decref`` during one
encode, counted by call site.

    .venv/bin/python bench/_nrt_calls.py [--tokenizer gpt2] [--corpus zh] [--mode cold] [--mb 0.3]

A developer's tool, not a published benchmark. numba binds each array an inlined helper takes (or a called
function receives) anew and counts the reference: an atomic increment and decrement (``lock incq`` /
``lock decq``, ~20 cycles each and a drain of the store buffer) that its pruning pass often leaves inside
loops. `perf` shows them as two tiny JIT functions (``bench/_kernel_perf.py`` prints their share); this tool
says who calls them: a child process encodes the sample once untimed (compiling or loading the kernels),
writes the addresses of the two functions and of every compiled tokenmill kernel, and waits; gdb attaches,
breaks on both functions and records each call's return address; the child then runs the encode once. Each
address is reported as the nearest kernel entry below it plus an offset (a callee inlined or linked into
its caller's library shows as its caller: read the offset with ``objdump`` of that kernel's code, as
``_kernel_perf.py`` dumps it). ``--mode``: ``seen`` (the text encoded again: the steady state), ``cold``
(the thread's chunk cache emptied first: every chunk a first sighting), ``fresh`` (a new encoder: its
tables built too), ``lists`` (text seen, Python lists out). A breakpoint costs ~10 us: keep ``--mb`` small.
Needs gdb (Debian: gdb) and a kernel that lets it attach (ptrace).
"""

from __future__ import annotations

import argparse
import bisect
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

GDB_SCRIPT = r"""
import collections, gdb
out = "{out}"
inc, dec = open(out + "/nrt.txt").read().split()
calls = collections.Counter()
class Counting(gdb.Breakpoint):
    def stop(self):
        sp = int(gdb.parse_and_eval("$sp"))
        calls[int(gdb.parse_and_eval("*(unsigned long *) %d" % sp))] += 1
        return False
Counting("*" + inc, internal=True)
Counting("*" + dec, internal=True)
gdb.execute("continue")
with open(out + "/calls.txt", "w") as fh:
    for addr, n in calls.items():
        fh.write("%d %d\n" % (addr, n))
"""


def child(a) -> None:
    import numba
    import numpy as np

    sys.path.insert(0, str(ROOT / "bench"))
    from encode_profile import CORPORA, load_docs, make

    docs = load_docs(CORPORA / a.corpus, a.mb)
    tok = make(a.tokenizer)
    lists = a.mode == "lists"
    tok.encode_batch(docs, num_threads=1, as_arrays=not lists, disallowed_special=())
    numba.njit(lambda: np.empty(1))()  # (numba's runtime is up: its functions have addresses)
    from numba.core.runtime.nrt import rtsys

    lib = rtsys._library
    Path(a.out, "nrt.txt").write_text(f"{lib.get_pointer_to_function('NRT_incref')} "
                                      f"{lib.get_pointer_to_function('NRT_decref')}")
    kernels = set()
    for name, mod in list(sys.modules.items()):
        if name.startswith("tokenmill"):
            for attr in dir(mod):
                f = getattr(mod, attr, None)
                if isinstance(f, numba.core.registry.CPUDispatcher):
                    for cres in f.overloads.values():
                        addr = cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)
                        kernels.add((addr, f"{name.rsplit('.', 1)[-1]}.{attr}"))
    Path(a.out, "kernels.txt").write_text("".join(f"{addr} {name}\n" for addr, name in sorted(kernels)))
    Path(a.out, "ready").write_text(str(os.getpid()))
    while not Path(a.out, "go").exists():
        time.sleep(0.05)
    if a.mode == "cold":
        tok._compiled()._local.state = None
    elif a.mode == "fresh":
        tok._encoder = None
        tok._compiled()
    tok.encode_batch(docs, num_threads=1, as_arrays=not lists, disallowed_special=())
    Path(a.out, "done").write_text(str(sum(len(d.encode()) for d in docs)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="example: .venv/bin/python "
                                 "bench/_nrt_calls.py --tokenizer llama3 --corpus zh --mode cold")
    ap.add_argument("--tokenizer", default="gpt2", choices=["gpt2", "cl100k", "o200k", "llama3"])
    ap.add_argument("--corpus", default="zh", help="a folder of ../shared/corpora (en, zh, code, multi)")
    ap.add_argument("--mode", default="cold", choices=["seen", "cold", "fresh", "lists"])
    ap.add_argument("--mb", type=float, default=0.3, help="MB of the corpus encoded")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a)
        return
    if not shutil.which("gdb"):
        raise SystemExit("bench/_nrt_calls.py needs `gdb` on PATH (Debian: gdb)")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, __file__, "--child", "--out", tmp, "--tokenizer", a.tokenizer, "--corpus", a.corpus,
               "--mode", a.mode, "--mb", str(a.mb)]
        proc = subprocess.Popen(cmd)
        while not Path(tmp, "ready").exists():
            if proc.poll() is not None:
                raise SystemExit(f"the child exited ({proc.returncode}) before it was ready")
            time.sleep(0.1)
        Path(tmp, "count.py").write_text(GDB_SCRIPT.format(out=tmp))
        gdb = subprocess.Popen(["gdb", "-p", str(proc.pid), "-batch", "-x", f"{tmp}/count.py"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(3)  # gdb attached and its breakpoints set
        Path(tmp, "go").write_text("")
        proc.wait()
        _, err = gdb.communicate(timeout=60)
        if not Path(tmp, "calls.txt").exists():
            raise SystemExit(f"gdb recorded nothing (ptrace not allowed?):\n{err[-2000:]}")
        nbytes = int(Path(tmp, "done").read_text())
        kernels = [(int(x), name) for x, name in (line.split() for line in Path(tmp, "kernels.txt").read_text().splitlines())]
        calls = [tuple(map(int, line.split())) for line in Path(tmp, "calls.txt").read_text().splitlines()]
    starts = [addr for addr, _ in kernels]
    sites = collections.Counter()
    for addr, n in calls:
        i = bisect.bisect_right(starts, addr) - 1
        sites[f"{kernels[i][1]}+{addr - kernels[i][0]:#x}" if i >= 0 else f"{addr:#x}"] += n
    total = sum(sites.values())
    print(f"{a.tokenizer} {a.corpus}, {a.mode}: {total:,d} reference-count calls in one encode of {nbytes / 1e6:.2f} MB "
          f"({total / max(nbytes, 1) * 1e6:,.0f} a MB; ~20 cycles each)")
    for site, n in sites.most_common(a.top):
        print(f"  {n:10,d}  {site}")


if __name__ == "__main__":
    main()
