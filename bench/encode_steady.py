"""Encoding in the steady state of a long run on new text: one encoder over a whole corpus.

    .venv/bin/python bench/encode_steady.py [--corpus ../shared/corpora/en] [--mb 24] [--encoding cl100k] [--runs 5]

One tokenmill encoder and one gigatoken encoder (one thread, arrays out) each read the corpus in order,
in batches of about 1 MB, the two taking turns batch by batch (so a slow moment of the machine falls on
both); MB/s per quarter of the run, then the last quarter's batches again (text each encoder has seen),
medians over ``--runs`` runs, each with fresh encoders (one run's quarters moved by up to 2x here).
The first quarter against the later ones shows what first sightings (chunks an encoder has not seen)
cost while its caches fill, the later quarters against the last one again what they cost after;
`bench/tokenizer_speed.py --phases frontier` times fresh encoders warmed on 1 MB of other text, the
first of these states. Ids are checked
equal between the two on the first batch. Needs the OpenAI rank files (``make .cache/openai``) and
gigatoken (the ``bench`` extra). Results: docs/benchmarks.md, "Where one thread's encode time goes".
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
_RANKS = {"cl100k": "cl100k_base.tiktoken", "o200k": "o200k_base.tiktoken"}


def batches_of(corpus: Path, mb: float, size: int = 1_000_000) -> list[list[str]]:
    """The corpus's documents in name order, cut into pieces of 200k characters, grouped ~``size`` bytes."""
    out, cur, n, total = [], [], 0, 0
    for p in sorted(corpus.glob("*.txt")):
        text = p.read_bytes().decode("utf-8")
        for i in range(0, len(text), 200_000):
            piece = text[i : i + 200_000]
            cur.append(piece)
            n += len(piece.encode())
            if n >= size:
                out.append(cur)
                total += n
                cur, n = [], 0
                if total >= mb * 1e6:
                    return out
    return out + ([cur] if cur else [])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=str(ROOT / ".." / "shared" / "corpora" / "en"))
    ap.add_argument("--mb", type=float, default=24.0, help="MB of the corpus to read (default 24)")
    ap.add_argument("--encoding", choices=sorted(_RANKS), default="cl100k")
    ap.add_argument("--runs", type=int, default=5, help="runs over the corpus, fresh encoders each (default 5)")
    ap.add_argument("--no-publish", action="store_true", help="print only; do not write bench/results and docs")
    args = ap.parse_args()

    import gigatoken

    from tokenmill import Tokenizer

    path = ROOT / ".cache" / "openai" / _RANKS[args.encoding]
    tm = Tokenizer.from_tiktoken(str(path), pattern=args.encoding)
    gg = gigatoken.Tokenizer.from_tiktoken(str(path))
    batches = batches_of(Path(args.corpus), args.mb)
    sizes = [sum(len(d.encode()) for d in b) for b in batches]
    run_tm = lambda b: tm.encode_batch(b, num_threads=1, as_arrays=True, disallowed_special=())  # noqa: E731
    run_gg = lambda b: [gg.encode(x) for x in b]  # noqa: E731
    first_tm, first_gg = run_tm(batches[0][:3]), run_gg(batches[0][:3])  # also loads the kernels
    for i, (a, b) in enumerate(zip(first_tm, first_gg)):
        if not np.array_equal(a, np.asarray(b, np.int64)):
            raise SystemExit(f"ids differ between tokenmill and gigatoken on document {i} of the first batch")
    q = max(1, len(batches) // 4)
    spans = [(k * q, (k + 1) * q if k < 3 else len(batches)) for k in range(4)]
    # per run: seconds of each quarter and of the last quarter again, (tokenmill, gigatoken)
    runs: list[list[tuple[float, float]]] = []
    for _ in range(args.runs):
        tm = Tokenizer.from_tiktoken(str(path), pattern=args.encoding)  # fresh encoders for each run
        tm.encode_ordinary("warm up")
        gg = gigatoken.Tokenizer.from_tiktoken(str(path))
        gg.encode("warm up")
        t_tm, t_gg = np.zeros(len(batches)), np.zeros(len(batches))
        for j, b in enumerate(batches):
            t = time.perf_counter()
            run_tm(b)
            t_tm[j] = time.perf_counter() - t
            t = time.perf_counter()
            run_gg(b)
            t_gg[j] = time.perf_counter() - t
        again_tm, again_gg = 0.0, 0.0
        for b in batches[spans[3][0] : spans[3][1]]:
            t = time.perf_counter()
            run_tm(b)
            again_tm += time.perf_counter() - t
            t = time.perf_counter()
            run_gg(b)
            again_gg += time.perf_counter() - t
        runs.append([(t_tm[lo:hi].sum(), t_gg[lo:hi].sum()) for lo, hi in spans] + [(again_tm, again_gg)])

    mb = sum(sizes) / 1e6
    md = [f"One encoder each over {mb:.1f} MB of `{Path(args.corpus).name}` in order ({len(batches)} batches of "
          f"~1 MB), {args.encoding}, one thread, arrays out (tokenmill `encode_batch(as_arrays=True)`, "
          "gigatoken `encode` per document), taking turns batch by batch; MB/s per quarter of the run, then "
          f"the last quarter again; medians of {args.runs} runs (fresh encoders each; the ratio the median of each run's):", "",
          "| part of the run | MB | tokenmill MB/s | gigatoken MB/s | tokenmill / gigatoken |",
          "|---|---:|---:|---:|---:|"]
    names = [f"quarter {k + 1} (batches {lo + 1}-{hi})" for k, (lo, hi) in enumerate(spans)]
    for k, name in enumerate(names + ["quarter 4 again (seen before)"]):
        lo, hi = spans[min(k, 3)]
        m = sum(sizes[lo:hi]) / 1e6
        a = m / float(np.median([r[k][0] for r in runs]))
        g = m / float(np.median([r[k][1] for r in runs]))
        ratio = float(np.median([r[k][1] / r[k][0] for r in runs]))
        md.append(f"| {name} | {m:.1f} | {a:.1f} | {g:.1f} | {ratio:.2f}x |")
    text = "\n".join(md)
    print(text, flush=True)
    if not args.no_publish:
        from _results import publish, tables

        publish("encode-steady", {"tables": tables(text)}, text)


if __name__ == "__main__":
    main()
