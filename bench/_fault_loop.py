"""A fresh process that encodes the same batch in a loop, arrays out, dropping each result (what a user's
loop over batches does): ms and page faults a pass, with the encoders' heap threshold raised
(``_scratch.heap_for_large_blocks``, the default) and left where glibc has it (``off``).

    .venv/bin/python bench/_fault_loop.py [--tokenizer gpt2] [--corpus en] [--passes 40] [--runs 2]

A developer's tool, not a published benchmark (its numbers are quoted in docs/benchmarks.md with the
commit they were taken at). Each run is a new process (the threshold depends on what a process freed
before); gigatoken's ``encode`` per document runs in the same loop, pass for pass, as a yardstick.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _child(tokenizer: str, corpus: str, passes: int, mode: str) -> dict:
    import resource

    sys.path.insert(0, str(ROOT / "bench"))
    from _gap import _tools
    from tokenizer_speed import load_docs

    from tokenmill.tokenizer import _scratch

    if mode == "off":
        _scratch._HEAP_RAISED = True  # the threshold left where glibc has it
    docs = load_docs(str(ROOT.parent / "shared" / "corpora" / corpus), 2)
    tok, giga = _tools(tokenizer)
    g = giga()
    steps = {"tokenmill": lambda: tok.encode_batch(docs, num_threads=1, as_arrays=True),
             "gigatoken": lambda: [g.encode(x) for x in docs]}
    res: dict = {k: {"s": [], "faults": []} for k in steps}
    for f in steps.values():
        f()
    for _ in range(passes):
        for k, f in steps.items():
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t = time.perf_counter()
            out = f()
            res[k]["s"].append(time.perf_counter() - t)
            res[k]["faults"].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
            del out
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="example: .venv/bin/python bench/_fault_loop.py --tokenizer cl100k --runs 3")
    ap.add_argument("--tokenizer", default="gpt2", choices=["gpt2", "cl100k", "o200k"])
    ap.add_argument("--corpus", default="en", help="a folder of ../shared/corpora (en, zh, code)")
    ap.add_argument("--passes", type=int, default=40)
    ap.add_argument("--runs", type=int, default=2, help="fresh processes per mode, alternating")
    ap.add_argument("--_child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a._child:
        print(json.dumps(_child(a.tokenizer, a.corpus, a.passes, a._child)))
        return
    for _ in range(a.runs):
        for mode in ("on", "off"):
            got = subprocess.run([sys.executable, __file__, "--tokenizer", a.tokenizer, "--corpus", a.corpus,
                                  "--passes", str(a.passes), "--_child", mode],
                                 capture_output=True, text=True, check=True)
            res = json.loads(got.stdout.strip().splitlines()[-1])
            parts = [f"{k} {statistics.median(r['s']) * 1e3:.2f} ms, {statistics.median(r['faults']):.0f} faults"
                     for k, r in res.items()]
            print(f"{a.tokenizer} {a.corpus}, threshold {'raised' if mode == 'on' else 'as glibc has it'}: "
                  f"{'; '.join(parts)} (median of {a.passes} passes)", flush=True)


if __name__ == "__main__":
    main()
