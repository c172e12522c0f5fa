"""Two versions of tokenmill's encoder side by side, pass for pass: the measurement that resolves a 5-20%
change on a shared machine, where a benchmark run an hour later moves by more.

    .venv/bin/python bench/ab_encode.py --baseline e873fb9 [--tokenizers cl100k,gpt2] [--corpora en,code]
        [--repeat 15] [--max-mb 2] [--no-publish]

``--baseline REV`` (a git revision; its ``src/`` is extracted once to ``.cache/ab/<sha>/``) or
``--baseline-src DIR`` (a copy of ``src/``) against this checkout's ``src/``. Each version runs in its own
child process (any two trees, whatever their kernels' signatures), both loaded and warm; the parent
asks them in turn for one timed pass of each step, ``--repeat`` rounds, so a change of the machine's
speed during the run hits both sides alike. Reported per step: both versions' fastest pass, and the
median over pairs of rounds of the baseline / current ratio (> 1: the current code is faster), each pair's
ratio the geometric mean of its two rounds' (who goes first alternates from round to round: a pass run
right after the other side's reads ~15% slower by that order alone, "again" 1.15-1.24x in the rounds
where the baseline went first and 0.83-0.89x in the others on an unchanged tree, so a median over single
rounds read 0.90x or 1.18x by how many of each it had; over pairs 1.00x). The ids of both versions are
compared (a hash of every document's ids) before timing, and each step is run once untimed on each side.

Steps, one thread unless named, on a deterministic ``--max-mb`` sample of each corpus:

* **frontier 1t / 2t**: a fresh encoder warmed untimed on 1 MB of other documents of the corpus, then
  ``encode_batch(docs, as_arrays=True)`` timed (the protocol of ``tokenizer_speed.py --phases frontier``);
* **lists 1t / 2t**: the frontier pass with Python lists out (``encode_batch(docs)``; the tokenizer's
  Python ints made before, untimed, and the lists freed after the timing, as the frontier phase does);
* **again 1t / 2t**: the same documents encoded once more by that encoder (text it has seen);
* **split**: the compiled splitter alone over the joined documents;
* **kernel**: the BPE kernel alone over those chunks, on the cache the passes before left.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np
from encode_profile import NAMES, joined
from encode_profile import make as _make

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT.parent / "shared" / "corpora"
STEPS = ("frontier 1t", "frontier 2t", "lists 1t", "lists 2t", "again 1t", "again 2t", "split", "kernel")


# ------------------------------------------------------------------------------------------ child
def _docs(folder: Path, max_mb: float, skip: int = 0) -> list[str]:
    """Every 7th file of the corpus from ``skip``, in name order, up to ``max_mb`` MB (``skip`` 4: other files
    than those of ``skip`` 1, for the warm-up)."""
    out, total = [], 0
    for f in sorted(folder.glob("*.txt"))[skip::7]:
        if total >= max_mb * 1e6:
            break
        out.append(f.read_bytes().decode("utf-8"))
        total += len(out[-1].encode())
    return out


def child(name: str, corpus: str, max_mb: float) -> None:
    """Serve timed passes: read a step per line on stdin, answer its seconds (or the ids' hash) on stdout."""
    os.environ.setdefault("TOKENMILL_PYTHON_FIRST", "0")
    from tokenmill.tokenizer.pretokenize.splitter import compiled_offsets

    docs, warm = _docs(CORPORA / corpus, max_mb, 1), _docs(CORPORA / corpus, 1.0, 4)
    state = {1: _make(name)}  # thread count -> the encoder its last frontier pass made

    def fresh(threads):
        state[threads] = tok = _make(name)
        tok.encode_batch(warm, num_threads=threads, as_arrays=True, disallowed_special=())
        return tok

    def timed(fn):
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    pattern = state[1]._compiled().pattern
    data, dof, offs, marks = joined(docs, pattern)
    pos = np.empty(len(docs), np.int64)
    print(json.dumps({"ready": True, "bytes": len(data), "documents": len(docs), "chunks": int(offs.size - 1)}),
          flush=True)
    for line in sys.stdin:
        step = line.strip()
        if step == "ids":
            h = hashlib.sha256()
            for ids in state[1].encode_batch(docs, num_threads=1, as_arrays=True, disallowed_special=()):
                h.update(np.asarray(ids, np.int64).tobytes() + b"|")
            out = h.hexdigest()
        elif step.startswith("frontier"):
            threads = int(step[-2])
            tok = fresh(threads)
            out = timed(lambda: tok.encode_batch(docs, num_threads=threads, as_arrays=True, disallowed_special=()))
        elif step.startswith("lists"):  # the frontier pass with Python lists out (freed after the timing)
            threads = int(step[-2])
            tok = fresh(threads)
            tok.encode_batch(warm[:2], num_threads=threads, disallowed_special=())  # its Python ints made untimed
            t0 = time.perf_counter()
            got = tok.encode_batch(docs, num_threads=threads, disallowed_special=())
            out = time.perf_counter() - t0
            del got
        elif step.startswith("again"):
            threads = int(step[-2])
            tok = state.get(threads) or fresh(threads)
            out = timed(lambda: tok.encode_batch(docs, num_threads=threads, as_arrays=True, disallowed_special=()))
        elif step == "split":
            out = timed(lambda: compiled_offsets(data, pattern, doc_offsets=dof))
        elif step == "kernel":
            enc = state[1]._compiled()
            out = timed(lambda: enc._run(data, offs, marks, pos))
        else:
            raise SystemExit(f"unknown step {step!r}")
        print(json.dumps({"out": out}), flush=True)


# ------------------------------------------------------------------------------------------ parent
class Side:
    def __init__(self, src: Path, name: str, corpus: str, max_mb: float):
        env = dict(os.environ, PYTHONPATH=str(src))
        self.p = subprocess.Popen([sys.executable, __file__, "--child", name, corpus, str(max_mb)], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=str(ROOT))
        line = self.p.stdout.readline()
        if not line:
            raise SystemExit(f"the child for {src} ended before it was ready (see its error above)")
        self.info = json.loads(line)

    def ask(self, step: str):
        self.p.stdin.write(step + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise SystemExit(f"a child ended during step {step!r} (see its error above)")
        return json.loads(line)["out"]

    def close(self):
        self.p.stdin.close()
        self.p.wait(60)


def baseline_tree(rev: str) -> Path:
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=ROOT, capture_output=True,
                         text=True)
    if sha.returncode:
        raise SystemExit(f"--baseline {rev!r}: not a commit of this repository ({sha.stderr.strip()})")
    sha = sha.stdout.strip()
    dest = ROOT / ".cache" / "ab" / sha[:12]
    if not (dest / "src" / "tokenmill").is_dir():  # extracted beside, then renamed: never half a tree
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", sha, "src"], cwd=ROOT, capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
    return dest / "src"


def cell(name: str, corpus: str, base: Path, a) -> dict:
    sides = [Side(base, name, corpus, a.max_mb), Side(ROOT / "src", name, corpus, a.max_mb)]
    try:
        same = sides[0].ask("ids") == sides[1].ask("ids")
        r: dict = {"ids_equal": same, **{k: sides[1].info[k] for k in ("bytes", "documents", "chunks")}, "steps": {}}
        if not same:
            return r
        times = {s: ([], []) for s in a.steps}
        for s in a.steps:  # one untimed round: a side's first pass of a step read up to 1.6x slower
            for side in sides:
                side.ask(s)
        for k in range(a.repeat):
            for s in a.steps:
                order = (0, 1) if k % 2 == 0 else (1, 0)  # who goes first alternates
                for i in order:
                    times[s][i].append(sides[i].ask(s))
        for s, (tb, tc) in times.items():
            tb, tc = np.array(tb), np.array(tc)
            r["steps"][s] = {"baseline_s": tb.tolist(), "current_s": tc.tolist(), "baseline_min": float(tb.min()),
                             "current_min": float(tc.min()), "paired": paired_ratio(tb, tc),
                             "min_ratio": float(tb.min() / tc.min())}
        return r
    finally:
        for side in sides:
            side.close()


def paired_ratio(tb: np.ndarray, tc: np.ndarray) -> float:
    """The median over pairs of rounds (0 and 1, 2 and 3, ...: the two orders) of the geometric mean of their
    baseline / current ratios; one round alone where there is one."""
    r = tb / tc
    k = r.size // 2 * 2
    return float(np.median(np.sqrt(r[0:k:2] * r[1:k:2]))) if k else float(r[0])


def markdown(res: dict, a) -> str:
    lines = [f"Baseline: {res['baseline']}; current: {res['current']}. Median over {a.repeat // 2 or 1} pairs of "
             "rounds (the two orders) of the baseline / current ratio, each pair's the geometric mean of its two "
             "rounds' (> 1: the current code is faster), then "
             "each version's fastest pass in ms; one child process per version, passes in turn.", "",
             "| tokenizer | text | " + " | ".join(a.steps) + " |", "|---|---|" + "---:|" * len(a.steps)]
    for key, r in res["cells"].items():
        name, corpus = key.split("/")
        if not r["ids_equal"]:
            lines.append(f"| {NAMES[name]} | {corpus} | " + " | ".join(["ids differ"] * len(a.steps)) + " |")
            continue
        cells = [f"**{r['steps'][s]['paired']:.2f}x** ({r['steps'][s]['baseline_min'] * 1e3:.1f} -> "
                 f"{r['steps'][s]['current_min'] * 1e3:.1f})" for s in a.steps]
        lines.append(f"| {NAMES[name]} | {corpus} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], float(sys.argv[4]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="example: .venv/bin/python "
                                 "bench/ab_encode.py --baseline HEAD~1 --tokenizers cl100k --corpora en --no-publish",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--baseline", help="a git revision to compare this checkout with")
    g.add_argument("--baseline-src", help="a copy of src/ to compare this checkout with")
    ap.add_argument("--tokenizers", default="gpt2,cl100k,o200k,llama3")
    ap.add_argument("--corpora", default="en,zh,code")
    ap.add_argument("--steps", default=",".join(STEPS), help=f"a subset of {', '.join(STEPS)}")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--max-mb", type=float, default=2.0)
    ap.add_argument("--note", default="", help="a sentence shown with the published table")
    ap.add_argument("--no-publish", action="store_true", help="print only; leave docs/benchmarks.md as it is")
    a = ap.parse_args()
    a.steps = [s.strip() for s in a.steps.split(",") if s.strip()]
    bad = [s for s in a.steps if s not in STEPS]
    names = a.tokenizers.split(",")
    if bad or any(n not in NAMES for n in names) or a.repeat < 1:
        ap.error(f"steps from {STEPS}, tokenizers from {tuple(NAMES)}, --repeat >= 1")
    if not CORPORA.is_dir():
        raise SystemExit(f"no corpora at {CORPORA}: this benchmark reads ../shared/corpora beside the checkout")
    base = baseline_tree(a.baseline) if a.baseline else Path(a.baseline_src).resolve()
    if not (base / "tokenmill" / "__init__.py").is_file():
        raise SystemExit(f"{base}: not a copy of src/ (no tokenmill/__init__.py)")
    from _results import commit

    res: dict = {"baseline": a.baseline or str(base), "current": commit() + " (this checkout)", "cells": {}}
    t0 = time.time()
    for corpus in a.corpora.split(","):
        for name in names:
            r = res["cells"][f"{name}/{corpus}"] = cell(name, corpus, base, a)
            shown = ", ".join(f"{s} {v['paired']:.3f}x" for s, v in r["steps"].items()) or "ids differ: not timed"
            print(f"  {name} {corpus}: {shown}", file=sys.stderr, flush=True)
    print(f"(total {time.time() - t0:.0f} s)", file=sys.stderr)
    md = markdown(res, a)
    print(md)
    if not a.no_publish:
        from _results import publish

        publish("encode-ab", res, md, argv=sys.argv, note=a.note)


if __name__ == "__main__":
    main()
