"""numba's inliner with one memo per function copy (tokenmill's default) against numba as it is: the
same machine code, and the compile seconds of each `tokenmill warmup` job.

    .venv/bin/python bench/inline_copies.py [--jobs "encode,windows"] [--rounds 3] [--no-publish]

Each job of ``tokenmill._jit.JOBS`` runs in a fresh child process with an empty numba cache
(``NUMBA_CACHE_DIR``) and ``TOKENMILL_PYTHON_FIRST=0``, once as tokenmill runs it and once with
``TOKENMILL_NUMBA_INLINE_COPY=numba`` (numba's inliner untouched), the two alternating. The child then
prints, for every signature of every tokenmill kernel it compiled, the sha256 of its assembly
(``inspect_asm``; ``PYTHONHASHSEED=0``, as numba names constant byte strings after their hash, and
addresses in names read as ``0x?``), and the seconds it spent compiling (``_jit.compile_seconds``). The script fails
unless every kernel's assembly is the same both ways (and then publishes nothing): run it after a numba
upgrade. With every job and ``--rounds 3`` it is the table in docs/benchmarks.md (~25 minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import hashlib, json, re, sys
exec(sys.argv[1])
from tokenmill import _jit
asm = {}
for name, mod in list(sys.modules.items()):
    if not name.startswith("tokenmill"):
        continue
    for attr, obj in list(vars(mod).items()):
        if hasattr(obj, "overloads") and hasattr(obj, "py_func") and obj.py_func.__module__ == name:
            for sig in obj.signatures:
                # (numba names the function of an array expression after its object's address: 0x...)
                text = re.sub(r"0x[0-9a-f]{6,}", "0x?", obj.inspect_asm(sig))
                asm[f"{name}.{attr}{sig}"] = hashlib.sha256(text.encode()).hexdigest()
print(json.dumps({"compile_s": _jit.compile_seconds(), "asm": asm}))
"""


def run(code: str, numba_as_is: bool) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        # PYTHONHASHSEED fixed: numba names a constant byte string after its Python hash (`.bytes.<hash>`)
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, TOKENMILL_PYTHON_FIRST="0", TOKENMILL_QUIET="1", PYTHONHASHSEED="0")
        env.pop("TOKENMILL_NUMBA_INLINE_COPY", None)
        if numba_as_is:
            env["TOKENMILL_NUMBA_INLINE_COPY"] = "numba"
        out = subprocess.run([sys.executable, "-c", CHILD, code], env=env, cwd=ROOT, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    sys.path.insert(0, os.path.join(ROOT, "src"))
    from tokenmill._jit import JOBS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", default="", help="comma-separated words each picked job's name contains (default: all)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each way per job (compile seconds: median)")
    ap.add_argument("--no-publish", action="store_true", help="print only; do not write results and docs")
    args = ap.parse_args()
    words = [w.strip() for w in args.jobs.split(",") if w.strip()]
    names = [n for n in JOBS if not words or any(w in n for w in words)]
    differ, kernels, total, results = [], 0, {"one memo": 0.0, "numba as is": 0.0}, {}
    rows = ["| warm-up job | kernels | compile s, numba as is | compile s, one memo | ratio |", "|---|---:|---:|---:|---:|"]
    print("\n".join(rows))
    for name in names:
        secs = {"one memo": [], "numba as is": []}
        asm = {}
        for _ in range(args.rounds):
            for way in ("numba as is", "one memo"):
                r = run(JOBS[name], way == "numba as is")
                secs[way].append(r["compile_s"])
                if way in asm and asm[way] != r["asm"]:
                    differ.append(f"{name}: two runs of {way} differ")
                asm[way] = r["asm"]
        a, b = asm["numba as is"], asm["one memo"]
        if a != b:
            keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            differ.append(f"{name}: {len(keys)} kernel(s) differ, e.g. {keys[:3]}")
        kernels += len(a)
        med = {w: statistics.median(v) for w, v in secs.items()}
        for w in total:
            total[w] += med[w]
        results[name] = {"kernels": len(a), "numba_as_is_s": secs["numba as is"], "one_memo_s": secs["one memo"]}
        rows.append(f"| {name.split(' (')[0]} | {len(a)} | {med['numba as is']:.1f} | {med['one memo']:.1f} | "
                    f"{med['numba as is'] / max(med['one memo'], 1e-9):.2f}x |")
        print(rows[-1], flush=True)
    rows.append(f"| all | {kernels} | {total['numba as is']:.1f} | {total['one memo']:.1f} | "
                f"{total['numba as is'] / max(total['one memo'], 1e-9):.2f}x |")
    print(rows[-1])
    if differ:
        print("\nASSEMBLY DIFFERS:\n" + "\n".join(differ))
        return 1
    verdict = f"Every one of the {kernels} kernels' assembly is byte-identical both ways."
    print("\n" + verdict)
    md = (f"Compile seconds of each warm-up job in a fresh process, empty cache, medians of {args.rounds} "
          "alternating runs:\n\n" + "\n".join(rows) + "\n\n" + verdict)
    if not args.no_publish:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from _results import publish

        publish("inline-copies", {"jobs": results, "identical": True}, md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
