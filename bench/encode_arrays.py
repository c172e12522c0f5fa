"""Thread scaling of ``encode_batch(..., as_arrays=True)`` (numpy arrays out, no Python lists).

    .venv/bin/python bench/encode_arrays.py [--corpus ../shared/corpora/en ...] [--repeat 3]

GPT-2's real ranks (``make .cache/gpt2.tiktoken``); MB/s of UTF-8 input, median of ``--repeat``
passes, each on a fresh tokenizer. Results: docs/benchmarks.md, "Encoding".
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from tokenmill import Tokenizer

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", nargs="+", default=[str(ROOT / ".." / "shared" / "corpora" / s) for s in ("en", "zh")])
    ap.add_argument("--ranks", default=str(ROOT / ".cache" / "gpt2.tiktoken"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-publish", action="store_true", help="print only; do not write bench/results and docs")
    args = ap.parse_args()
    md = [f"`encode_batch(docs, as_arrays=True)` with GPT-2's ranks (numpy arrays out, no Python lists), MB/s of "
          f"UTF-8, median of {args.repeat}, each pass on a fresh tokenizer:", "",
          "| corpus | MB | 1 thread (MB/s) | 2 threads (MB/s) | 2 threads / 1 thread |", "|---|---:|---:|---:|---:|"]
    for corpus in args.corpus:
        docs = [p.read_bytes().decode("utf-8") for p in sorted(Path(corpus).glob("*.txt"))]  # keeps CRLF
        mb = sum(len(d.encode()) for d in docs) / 1e6
        speed = {}
        for threads in (1, 2):
            times = []
            for _ in range(args.repeat):
                tok = Tokenizer.from_tiktoken(args.ranks, pattern="gpt2")
                tok.encode_ordinary("warm up")  # loads the disk-cached kernels
                t = time.perf_counter()
                tok.encode_batch(docs, num_threads=threads, as_arrays=True)
                times.append(time.perf_counter() - t)
            speed[threads] = mb / statistics.median(times)
        md.append(f"| {Path(corpus).name} | {mb:.1f} | {speed[1]:.1f} | {speed[2]:.1f} | {speed[2] / speed[1]:.2f}x |")
        print(md[-1], flush=True)
    if not args.no_publish:
        from _results import publish, tables

        text = "\n".join(md)
        publish("encode-arrays", {"tables": tables(text)}, text)


if __name__ == "__main__":
    main()
