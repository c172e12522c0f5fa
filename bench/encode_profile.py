"""Where one thread's encode time goes: splitting, the chunk cache, merging on a miss, Python.

    .venv/bin/python bench/encode_profile.py [--max-mb 2] [--repeat 5] [--rounds 3] [--baseline-src DIR]

``--baseline-src DIR``: a copy of ``src/`` to compare with (e.g. the tree before a change, from
``git worktree``): each cell then runs in child processes, the baseline's and the current code's in
turn, ``--rounds`` times, and every step keeps its fastest run over all of them, so a change of the
machine's load hits both sides alike. Without it, the current code alone.

For GPT-2, cl100k, o200k (rank files) and Llama 3 (its tokenizer.json) on en, zh and code (a
deterministic ``--max-mb`` sample of each corpus), one process, every step timed ``--repeat`` times
and the fastest run kept (the machine is shared: the minimum is what the code costs, the rest is
other jobs), all on one thread:

* **total**: ``encode_batch(docs, num_threads=1, as_arrays=True)`` on a fresh encoder (cold cache),
  as bench/tokenizer_speed.py's frontier phase times it;
* **split**: the compiled splitter over the joined documents (one call, document boundaries kept),
  as ``encode_batch`` calls it;
* **kernel, cold**: the BPE kernel over those chunks on a fresh cache (every first sighting of a
  chunk that is not in the vocabulary table is merged); **kernel, warm**: the same call again on the
  cache the first one left (what remains is probing the tables and writing the ids);
* **merge on miss** = cold - warm; **Python and the rest** = total - split - kernel cold (UTF-8
  encoding of the texts, joining them, the document marks, slicing the output per document).

Counters (from the chunks themselves): chunks per MB, the share of chunks of 1 byte, of 2-7 bytes
found in the vocabulary table (one probe, even on first sight), other 2-7 byte chunks, 8-256 bytes,
longer; and the share of chunks that are a first sighting (distinct / all). The same split is
measured, not estimated, for every row; ratios within a row are robust to the machine's load.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT.parent / "shared" / "corpora"


def load_docs(folder: Path, max_mb: float) -> list[str]:
    files = sorted(folder.glob("*.txt"))
    random.Random(0).shuffle(files)
    out, total = [], 0
    for f in files:
        if total >= max_mb * 1e6:
            break
        out.append(f.read_bytes().decode("utf-8"))
        total += len(out[-1].encode())
    return out


def make(name: str):
    from tokenmill import Tokenizer

    if name == "gpt2":
        return Tokenizer.from_tiktoken(ROOT / ".cache" / "gpt2.tiktoken", pattern="gpt2")
    if name == "llama3":
        return Tokenizer.from_huggingface(ROOT / ".cache" / "llama3")
    return Tokenizer.from_tiktoken(ROOT / ".cache" / "openai" / f"{name}_base.tiktoken", pattern=name)


def joined(docs: list[str], pattern) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray]:
    """What ``encode_batch`` hands the kernel for one group of ``docs``: their UTF-8 joined, the documents'
    byte offsets, the compiled split's chunk offsets (document boundaries kept) and the chunk where each
    document starts (the kernel's ``marks``)."""
    from tokenmill.tokenizer.pretokenize.splitter import compiled_offsets

    datas = [d.encode("utf-8") for d in docs]
    dof = np.zeros(len(datas) + 1, np.int64)
    np.cumsum([len(x) for x in datas], out=dof[1:])
    data = b"".join(datas)
    offs = compiled_offsets(data, pattern, doc_offsets=dof)
    return data, dof, offs, np.searchsorted(offs, dof[:-1]).astype(np.int64)


def fastest(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def counters(enc, data: bytes, offs: np.ndarray) -> dict:
    lens = np.diff(offs)
    n = lens.size
    small = (lens >= 2) & (lens <= 7)
    chunks = [data[a:b] for a, b in zip(offs[:-1].tolist(), offs[1:].tolist())]
    in_vocab = 0
    vtab = getattr(enc, "vtab", None)
    if vtab is not None and vtab.size > 2:
        keys = set(vtab[0::2][vtab[0::2] != 0].tolist())
        for k in np.flatnonzero(small).tolist():
            c = chunks[k]
            if (int.from_bytes(c, "little") | len(c) << 56) in keys:
                in_vocab += 1
    return {"chunks": n, "one_byte": float(np.mean(lens == 1)), "small_vocab": in_vocab / n,
            "small_other": float(np.sum(small)) / n - in_vocab / n, "long": float(np.mean((lens > 7) & (lens <= 256))),
            "huge": float(np.mean(lens > 256)), "first_sight": len(set(chunks)) / n, "has_vtab": vtab is not None}


def profile(name: str, corpus: str, a) -> dict:
    from tokenmill.tokenizer.pretokenize.splitter import compiled_offsets

    docs = load_docs(CORPORA / corpus, a.max_mb)
    tok = make(name)
    tok.encode_batch(docs[:2], num_threads=1, as_arrays=True, disallowed_special=())  # kernels loaded
    enc = tok._compiled()
    data, dof, offs, marks = joined(docs, enc.pattern)

    def fresh():
        tok._encoder = None
        return tok._compiled()

    def total():
        tok.encode_batch(docs, num_threads=1, as_arrays=True, disallowed_special=())

    r: dict = {"bytes": len(data), "documents": len(docs)}
    t_total = float("inf")
    for _ in range(a.repeat):
        fresh()
        t0 = time.perf_counter()
        total()
        t_total = min(t_total, time.perf_counter() - t0)
    t_split = fastest(lambda: compiled_offsets(data, enc.pattern, doc_offsets=dof), a.repeat)
    pos = np.empty(len(docs), np.int64)
    cold, warm = float("inf"), float("inf")
    for _ in range(a.repeat):
        enc = fresh()
        t0 = time.perf_counter()
        enc._run(data, offs, marks, pos)
        t1 = time.perf_counter()
        enc._run(data, offs, marks, pos)
        t2 = time.perf_counter()
        cold, warm = min(cold, t1 - t0), min(warm, t2 - t1)
    r.update(total=t_total, split=t_split, kernel_cold=cold, kernel_warm=warm, merge=max(cold - warm, 0.0),
             python=max(t_total - t_split - cold, 0.0), **counters(enc, data, offs))
    return r


NAMES = {"gpt2": "GPT-2", "cl100k": "cl100k", "o200k": "o200k", "llama3": "Llama 3 (tokenizer.json)"}
STEPS = ("total", "split", "kernel_warm", "merge", "python")


def report(R: dict, a) -> str:
    two = a.baseline_src is not None
    head = (f"One thread, arrays out, {a.max_mb:g} MB of each corpus, fastest of {a.repeat} runs per step"
            + (f" in each of {a.rounds} rounds, baseline and current code in turn" if two else "")
            + "; ms" + (" before -> after" if two else "") + ", and in brackets the share of the total. The kernel "
            "on a warm cache is probing the tables and writing the ids, plus the merges of chunks that are never "
            "cached (runs of Han characters where characters are merged ahead, chunks over 256 bytes): on zh that "
            "is most of it.")
    L = [head, "",
         "| tokenizer | text | total | speed-up | split | kernel on a warm cache | merge on first sightings (cold - warm) | "
         "Python and the rest | MB/s | ns per chunk | chunks: 1 byte / 2-7 in vocab table / 2-7 other / 8-256 / "
         "longer | first sightings |",
         "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for key, cell in R.items():
        name, corpus = key.split("/")
        r, b = cell["current"], cell.get("baseline")
        t = r["total"]

        def ms(step):
            x = r[step]
            now = f"{x * 1e3:.1f} ({x / t:.0%})"
            return f"{b[step] * 1e3:.1f} -> {now}" if b else now
        vt = f"{r['small_vocab']:.0%}" if r["has_vtab"] else "-"
        total = f"{b['total'] * 1e3:.1f} -> {t * 1e3:.1f}" if b else f"{t * 1e3:.1f}"
        speedup = f"**{b['total'] / t:.2f}x**" if b else ""
        L.append(f"| {NAMES[name]} | {corpus} | {total} | {speedup} | "
                 f"{ms('split')} | {ms('kernel_warm')} | {ms('merge')} | {ms('python')} | "
                 f"{r['bytes'] / 1e6 / t:.1f} | {t / r['chunks'] * 1e9:.0f} | "
                 f"{r['one_byte']:.0%} / {vt} / {r['small_other'] + (0 if r['has_vtab'] else r['small_vocab']):.0%} / "
                 f"{r['long']:.0%} / {r['huge']:.1%} | {r['first_sight']:.1%} |")
    return "\n".join(L)


def fastest_of(runs: list[dict]) -> dict:
    """The fastest of each timed step over several runs; merge and Python recomputed from those."""
    out = dict(runs[0])
    for k in ("total", "split", "kernel_cold", "kernel_warm"):
        out[k] = min(r[k] for r in runs)
    out["merge"] = max(out["kernel_cold"] - out["kernel_warm"], 0.0)
    out["python"] = max(out["total"] - out["split"] - out["kernel_cold"], 0.0)
    return out


def run_cell(key: str, a, src: str | None) -> dict:
    import json
    import os
    import subprocess

    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_cell", key, "--max-mb", str(a.max_mb),
           "--repeat", str(a.repeat)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-mb", type=float, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline-src", default=None, help="a copy of src/ to compare with, side by side")
    ap.add_argument("--tokenizers", default="gpt2,cl100k,o200k,llama3")
    ap.add_argument("--corpora", default="en,zh,code")
    ap.add_argument("--name", default="encode-profile", help="the results file and doc section to write")
    ap.add_argument("--note", default="", help="a sentence shown under the section's header")
    ap.add_argument("--no-publish", action="store_true")
    ap.add_argument("--_cell", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a._cell:
        import json

        name, corpus = a._cell.split("/")
        print(json.dumps(profile(name, corpus, a)))
        return
    R = {}
    for name in a.tokenizers.split(","):
        for corpus in a.corpora.split(","):
            key = f"{name}/{corpus}"
            runs: dict = {"current": [], "baseline": []}
            for _ in range(a.rounds if a.baseline_src else 1):
                if a.baseline_src:
                    runs["baseline"].append(run_cell(key, a, a.baseline_src))
                runs["current"].append(run_cell(key, a, None))
            R[key] = cell = {side: fastest_of(v) for side, v in runs.items() if v}
            r = cell["current"]
            print(f"{key}: total {r['total'] * 1e3:.1f} ms, split {r['split'] * 1e3:.1f}, kernel cold "
                  f"{r['kernel_cold'] * 1e3:.1f} warm {r['kernel_warm'] * 1e3:.1f}, python {r['python'] * 1e3:.1f}"
                  + (f"; baseline total {cell['baseline']['total'] * 1e3:.1f}" if "baseline" in cell else ""),
                  flush=True)
    text = report(R, a)
    print(text)
    if not a.no_publish:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _results import publish

        publish(a.name, R, text, note=a.note)


if __name__ == "__main__":
    main()
