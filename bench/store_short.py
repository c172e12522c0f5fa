"""Token store builds from many short documents (JSONL records of one line or one paragraph each), side
by side with the bare encode and HF ``datasets.map``: where per-document work, not the encode, is the cost.

    .venv/bin/python bench/store_short.py [--corpus en] [--split lines] [--files 6] [--repeat 3] [--no-publish]

The first ``--files`` files of ``../shared/corpora/<corpus>`` cut into documents (``lines``: every non-blank
line; ``paragraphs``: every non-blank piece between blank lines), written as one JSONL file of ``{"text": ...}``
records. Every variant runs in a fresh child process (``bench/store.py``'s children: the same warm-up), the
variants interleaved, medians of ``--repeat``; MB/s of the JSONL file. GPT-2's ranks with EOS; store builds
of 1 MiB shards with 1 worker, 2 worker threads and 2 worker processes; bare ``encode_batch(as_arrays=True)``
on the records already in memory with 1 and 2 threads; HF ``datasets.map(batched=True, num_proc=2)`` with
the same tokenizer exported to HF ``tokenizers``, writing one uint16 array.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from store import CACHE, CORPORA, median_rate, run_child


def make_jsonl(corpus: str, split: str, n_files: int) -> tuple[Path, int]:
    """The JSONL file of ``corpus``'s first ``n_files`` files cut by ``split`` (cached), and its record count."""
    out = CACHE / f"short-{corpus}-{split}-{n_files}.jsonl"
    files = sorted((CORPORA / corpus).glob("*.txt"))[:n_files]
    sep = "\n" if split == "lines" else "\n\n"
    docs = [d.strip() for f in files for d in f.read_text(encoding="utf-8").split(sep) if d.strip()]
    if not out.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    return out, len(docs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="example: .venv/bin/python bench/store_short.py --split paragraphs --repeat 5")
    ap.add_argument("--corpus", default="en")
    ap.add_argument("--split", default="lines", choices=["lines", "paragraphs"])
    ap.add_argument("--files", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-hf", action="store_true", help="leave HF datasets.map out (its process start-up is slow)")
    ap.add_argument("--no-publish", action="store_true")
    args = ap.parse_args()
    path, n_docs = make_jsonl(args.corpus, args.split, args.files)
    mb = path.stat().st_size / 1e6
    variants = {"w1": ("store", 1, "local"), "w2": ("store", 2, "local"), "p2": ("store", 2, "process"),
                "bare1": ("bare", 1, "local"), "bare2": ("bare", 2, "local")}
    if not args.no_hf:
        variants["hf"] = ("hf", 2, "local")
    res: dict = {k: [] for k in variants}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):  # interleaved, so load changes hit every variant alike
            for k, (op, workers, engine) in variants.items():
                res[k].append(run_child(op, [str(path)], "gpt2", workers=workers, engine=engine, tmp=tmp))
    rate = {k: median_rate(v) for k, v in res.items()}
    row = {"corpus": args.corpus, "split": args.split, "documents": n_docs, "mb": round(mb, 2),
           "mb_per_s": {k: round(v, 2) for k, v in rate.items()},
           "store1_over_bare1": round(rate["w1"] / rate["bare1"], 3),
           "threads2_over_1": round(rate["w2"] / rate["w1"], 3), "processes2_over_1": round(rate["p2"] / rate["w1"], 3),
           "store_over_hf": round(max(rate["w1"], rate["w2"]) / rate["hf"], 2) if "hf" in rate else None,
           "seconds_median": {k: round(statistics.median(r["seconds"] for r in v), 4) for k, v in res.items()}}
    hf = f"{rate['hf']:.2f}" if "hf" in rate else "-"
    over_hf = f"**{row['store_over_hf']:.1f}x**" if row["store_over_hf"] else "-"
    md = [f"Store builds from many short documents: {n_docs:,d} JSONL records ({args.split} of the first "
          f"{args.files} {args.corpus} files, {mb / n_docs * 1e6:.0f} bytes a record on average), GPT-2's ranks, "
          f"MB/s of the JSONL file (median of {args.repeat}, each run a fresh process, variants interleaved).", "",
          "| records | MB | store 1 worker | store 2 workers (threads) | store 2 processes | bare `encode_batch` 1 thread | "
          "bare 2 threads | HF `datasets.map` num_proc=2 | store 1 worker / bare 1 thread | 2 threads / 1 worker | "
          "2 processes / 1 worker | store (faster of 1 and 2 workers) / HF |",
          "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
          f"| {n_docs:,d} | {mb:.1f} | {rate['w1']:.1f} | {rate['w2']:.1f} | {rate['p2']:.1f} | {rate['bare1']:.1f} | "
          f"{rate['bare2']:.1f} | {hf} | **{row['store1_over_bare1']:.2f}x** | **{row['threads2_over_1']:.2f}x** | "
          f"**{row['processes2_over_1']:.2f}x** | {over_hf} |"]
    print("\n".join(md))
    if not args.no_publish:
        from _results import publish

        publish("store-short", {"rows": [row], "runs": res}, "\n".join(md), argv=sys.argv)


if __name__ == "__main__":
    main()
