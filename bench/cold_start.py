"""First-run cost: seconds spent compiling numba kernels, per kernel family and per command.

    .venv/bin/python bench/cold_start.py [--runs 3] [--demo-runs 1] [--no-publish]

Each measurement runs in a fresh child process. "cold" points ``NUMBA_CACHE_DIR`` and
``TOKENMILL_CACHE_DIR`` at empty folders (what a new user's first run sees); "warm" reruns with the
caches the cold run filled. Per family, the child imports tokenmill, then times the first call of
that family's public path on a tiny input (compile or cache load + run), so cold - warm is the
compile time (``TOKENMILL_PYTHON_FIRST=0``: the kernels compile even for these tiny inputs). Commands
are timed as whole processes (interpreter start included), as a user sees them: cold, then again with
the caches that run filled ("second run": on a small input the first run used the pure-Python twins
and compiled only what had none, so the second run does the same), then after ``tokenmill warmup``
compiled every kernel (warm). Medians of ``--runs``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

# family -> code run in the child after `import tokenmill` (timed)
FAMILIES = {
    "split (gpt4 preset)": "from tokenmill.tokenizer.pretokenize.presets import split_text; split_text('Hello world 123', 'gpt4')",
    "train (count + merge loop)": "tokenmill.train_bpe(['hello world, hello there'] * 3, 300, pattern='gpt4')",
    "encode (gpt2 ranks file)": "T.encode('Hello world, this is a test.')",
    "windows (plan + gather)": ("import numpy as np; p = tokenmill.SlidingWindows(8, 4).plan(np.array([20, 5])); "
                                "p.gather(np.arange(25), np.array([0, 20, 25]))"),
    "packing (best fit + batches)": ("import numpy as np; docs=[list(range(1, 9)), [1, 2, 3], [4, 5]]; "
                                     "p = tokenmill.pack([8, 3, 2], 8); next(iter(p.batches(docs, batch_size=2, pad_id=0)))"),
}
SETUP = {
    "encode (gpt2 ranks file)": "T = tokenmill.Tokenizer.from_tiktoken(RANKS, pattern='gpt2')",
}


def child(code: str, setup: str, env: dict) -> float:
    prog = (f"import time, tokenmill\nRANKS={str(env.get('TOKENMILL_GPT2_RANKS', ''))!r}\n{setup}\n"
            f"t0 = time.perf_counter()\n{code}\nprint(time.perf_counter() - t0)")
    out = subprocess.run([PY, "-c", prog], env=env, capture_output=True, text=True, cwd=ROOT)
    if out.returncode:
        raise SystemExit(f"child failed: {code}\n{out.stderr}")
    return float(out.stdout.strip().splitlines()[-1])


def command(args: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    out = subprocess.run(args, env=env, capture_output=True, text=True, cwd=ROOT)
    dt = time.perf_counter() - t0
    if out.returncode:
        raise SystemExit(f"command failed: {args}\n{out.stderr}")
    return dt


def fresh_env(tmp: Path, tag: str) -> dict:
    env = dict(os.environ)
    for name in ("numba", "tokenmill"):
        d = tmp / f"{tag}-{name}"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    env["NUMBA_CACHE_DIR"] = str(tmp / f"{tag}-numba")
    env["TOKENMILL_CACHE_DIR"] = str(tmp / f"{tag}-tokenmill")
    return env


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ranks", default=os.environ.get("TOKENMILL_GPT2_RANKS", str(ROOT / ".cache/gpt2.tiktoken")))
    ap.add_argument("--commands", default="encode,demo",
                    help="whole commands to time cold and warm (comma list of: encode, demo)")
    ap.add_argument("--demo-runs", type=int, default=1,
                    help="runs of the demo (each: cold, second run, warm-up, warm; about 5 minutes)")
    ap.add_argument("--no-publish", action="store_true", help="print only; do not write results and docs")
    a = ap.parse_args(argv)
    os.environ["TOKENMILL_GPT2_RANKS"] = a.ranks
    tm = str(Path(PY).parent / "tokenmill")
    rows, results = [], {"families": {}, "commands": {}}
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        tok_env = fresh_env(tmp, "tok")
        tok_file = tmp / "tok.json"
        subprocess.run([PY, "-c", "import tokenmill; tokenmill.Tokenizer.from_tiktoken("
                        f"{a.ranks!r}, pattern='gpt2', special_tokens={{'<|endoftext|>': 50256}}).save({str(tok_file)!r})"],
                       env=tok_env, check=True, cwd=ROOT)
        for fam, code in FAMILIES.items():
            cold, warm = [], []
            for r in range(a.runs):
                env = dict(fresh_env(tmp, f"f{r}"), TOKENMILL_PYTHON_FIRST="0")
                cold.append(child(code, SETUP.get(fam, ""), env))
                warm.append(child(code, SETUP.get(fam, ""), env))
            c, w = statistics.median(cold), statistics.median(warm)
            results["families"][fam] = {"cold_s": cold, "warm_s": warm}
            rows.append(f"| {fam} | {c:.2f} | {w:.3f} | {c - w:.2f} |")
            print(rows[-1], file=sys.stderr)
        cmds = {
            "encode": [tm, "encode", "--tokenizer", str(tok_file), "Hello world"],
            "demo": [tm, "demo", "--quiet", "--out", str(tmp / "demo-out")],
        }
        crow = []
        for name in [c for c in a.commands.split(",") if c]:
            cold, second, warm = [], [], []
            for r in range(a.runs if name != "demo" else a.demo_runs):
                env = fresh_env(tmp, f"c{r}")
                cold.append(command(cmds[name], env))
                second.append(command(cmds[name], env))
                subprocess.run([tm, "warmup", "--quiet"], env=env, check=True, cwd=ROOT, capture_output=True)
                warm.append(command(cmds[name], env))
            c, s2, w = statistics.median(cold), statistics.median(second), statistics.median(warm)
            results["commands"][name] = {"argv": cmds[name][1:], "cold_s": cold, "second_s": second, "warm_s": warm}
            crow.append(f"| `tokenmill {' '.join(cmds[name][1:2])}` | {c:.1f} | {s2:.1f} | {w:.1f} | {c - w:.1f} |")
            print(crow[-1], file=sys.stderr)
    md = ("### Cold start: compile time per kernel family\n\n"
          "First call in a fresh process with empty numba and tokenmill caches (cold) and again with the caches "
          "that run filled (warm), with `TOKENMILL_PYTHON_FIRST=0` so that the kernels compile; seconds, medians.\n\n"
          "| kernel family (first call) | cold (s) | warm (s) | compile (s) |\n|---|---:|---:|---:|\n"
          + "\n".join(rows)
          + f"\n\nWhole commands, process start to exit (medians of {a.runs} runs, the demo {a.demo_runs}): cold (empty caches), a second run "
          "(the caches the first filled), warm (after `tokenmill warmup`):\n\n"
          "| command | cold (s) | second run (s) | warm (s) | cold - warm (s) |\n|---|---:|---:|---:|---:|\n"
          + "\n".join(crow))
    print(md)
    if not a.no_publish:
        sys.path.insert(0, str(Path(__file__).parent))
        from _results import publish

        publish("cold-start", results, md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
