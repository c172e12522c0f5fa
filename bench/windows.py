"""Sliding windows: planning and materialization speed, against plain Python and `datasets.map`.

    .venv/bin/python -m pip install datasets          # only for the datasets.map comparison
    .venv/bin/python bench/windows.py                 # full run (~4 minutes on 2 cores)
    .venv/bin/python bench/windows.py --docs 1000000 --tokens 20000000 --repeat 3   # quicker

Measures (median of --repeat runs, wall clock):

1. planning: ``SlidingWindows(...).plan(lengths)`` for --docs documents (lengths drawn log-normal,
   median ~660 tokens, never materialized) vs a plain Python loop over the textbook sliding-window
   sampler (tail placement done right, ``tokenmill.windows.reference.reference_windows``) timed
   on a subset and extrapolated per document;
2. materialization: ``plan.gather`` from an ``np.memmap`` of --tokens ids (uint16 and uint32, page
   cache warm) in GB/s of token ids, vs a Python loop that slices the memmap window by window as a
   textbook generator does, and vs ``datasets.map(group_texts, batched=True)`` (the Hugging Face
   run_clm recipe, block_size = window) in tokens/s; plus the general ``plan.materialize`` path
   (one Window with labels, positions and mask per window).

Prints a markdown section for docs/benchmarks.md (## Windows).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from itertools import chain

import numpy as np

from tokenmill.windows import MultiScaleWindows, SlidingWindows
from tokenmill.windows.reference import reference_target_starts, reference_windows


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def doc_lengths(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.minimum(rng.lognormal(6.5, 1.0, n), 200_000).astype(np.int64)


def textbook_sampler(ids, window_size: int, stride: int):
    """The textbook window generator (a right-aligned tail window for leftover tokens): yields (start, window ids)."""
    n = len(ids)
    if n == 0:
        return
    if n < window_size:
        yield 0, ids[:]
        return
    start = 0
    while start + window_size <= n:
        yield start, ids[start:start + window_size]
        start += stride
    if start - stride + window_size < n:
        yield n - window_size, ids[n - window_size:]


def python_plan(lengths: np.ndarray, sw: SlidingWindows, epoch: int = 0) -> None:
    """A plain Python loop over the textbook sampler (``reference_windows``) producing the same columns."""
    jit = sw.jitter_offsets(lengths.size, epoch)
    offs = np.broadcast_to(np.asarray(sw.start_offset + jit), lengths.shape).tolist()
    docs, starts, lens, targets = [], [], [], []
    for d, (n, off) in enumerate(zip(lengths.tolist(), offs)):
        rows = reference_windows(n, sw.capacity, sw.stride, offset=off, tail=sw.tail, short=sw.short,
                                 max_windows=sw.max_windows_per_doc)
        for (start, length), t in zip(rows, reference_target_starts(rows, score=sw.score)):
            docs.append(d)
            starts.append(start)
            lens.append(length)
            targets.append(t)
    np.array(docs), np.array(starts), np.array(lens), np.array(targets)


def bench_planning(args, out):
    lengths = doc_lengths(args.docs)
    out.append(f"Documents: {args.docs:,d}, {int(lengths.sum()):,d} tokens in all (log-normal lengths, median "
               f"{int(np.median(lengths)):,d}, mean {lengths.mean():,.0f}); plans are computed from lengths only.\n")
    out.append("| plan | windows | tokenmill (s) | docs/s | Python loop (s, extrapolated) | ratio |")
    out.append("|---|---:|---:|---:|---:|---:|")
    sub = lengths[: args.python_docs]
    configs = [
        ("SlidingWindows(512, 256)", SlidingWindows(512, 256)),
        ("SlidingWindows(2048, 1024)", SlidingWindows(2048, 1024)),
        ("SlidingWindows(512, 256, jitter='per_doc', score='new')",
         SlidingWindows(512, 256, jitter="per_doc", score="new")),
        ("SlidingWindows(512, 256, max_windows_per_doc=4)", SlidingWindows(512, 256, max_windows_per_doc=4)),
        ("MultiScaleWindows([512, 1024, 2048])", MultiScaleWindows([512, 1024, 2048])),
    ]
    SlidingWindows(8, 4).plan([20])  # load the compiled kernels once (numba cache) before timing
    for name, sw in configs:
        t = median_time(lambda: sw.plan(lengths), args.repeat)
        n_windows = len(sw.plan(lengths))
        scales = sw.scales if isinstance(sw, MultiScaleWindows) else (sw,)
        t0 = time.perf_counter()
        for s in scales:
            python_plan(sub, s)
        py = (time.perf_counter() - t0) / sub.size * args.docs
        out.append(f"| `{name}` | {n_windows:,d} | {t:.2f} | {args.docs / t:,.0f} | {py:,.1f} | {py / t:,.0f}x |")
    out.append(f"\nThe Python loop (the textbook sliding-window sampler with the tail placement done right, "
               f"`tokenmill.windows.reference`, collecting the same doc/start/length/target columns) is timed on "
               f"{sub.size:,d} documents and extrapolated linearly.\n")


def make_memmap(path: str, lengths: np.ndarray, dtype) -> np.memmap:
    total = int(lengths.sum())
    rng = np.random.default_rng(1)
    high = 50_000 if dtype == np.uint16 else 200_000
    mm = np.memmap(path, dtype=dtype, mode="w+", shape=(total,))
    step = 1 << 24
    for a in range(0, total, step):
        mm[a:a + step] = rng.integers(0, high, min(step, total - a), dtype=np.int64).astype(dtype)
    mm.flush()
    del mm
    mm = np.memmap(path, dtype=dtype, mode="r")
    int(mm.sum(dtype=np.int64))  # warm the page cache: the steady state of a training run
    return mm


def bench_gather(args, out, tmpdir):
    lengths = doc_lengths(args.tokens // 600, seed=2)
    lengths = lengths[np.cumsum(lengths) <= args.tokens]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    total = int(offsets[-1])
    out.append(f"Token store: {total:,d} ids in {lengths.size:,d} documents, `np.memmap` of a temporary file, "
               f"page cache warm. Batches of {args.batch:,d} windows gathered into a reused buffer.\n")
    out.append("| ids | windows | tokenmill `plan.gather` | Python loop over the textbook sampler | ratio |")
    out.append("|---|---|---:|---:|---:|")
    for dtype in (np.uint16, np.uint32):
        path = os.path.join(tmpdir, f"tokens.{np.dtype(dtype).name}")
        mm = make_memmap(path, lengths, dtype)
        for W, S in ((512, 256), (2048, 1024)):
            plan = SlidingWindows(W, S).plan(lengths)
            buf = np.empty((args.batch, W), dtype)
            moved = int(plan.length.sum()) * np.dtype(dtype).itemsize

            def run():
                for a in range(0, len(plan), args.batch):
                    rows = np.arange(a, min(a + args.batch, len(plan)))
                    plan.gather(mm, offsets, rows, out=buf[: rows.size])

            run()  # compile / warm
            t = median_time(run, args.repeat)
            gbps = moved / t / 1e9
            # the textbook way: a generator per document, one slice copy per window, batch as a list
            n_docs = min(lengths.size, args.python_docs // 10)
            sub_bytes = 0
            t0 = time.perf_counter()
            batch = []
            for d in range(n_docs):
                for _, win in textbook_sampler(mm[offsets[d]:offsets[d + 1]], W, S):
                    batch.append(np.array(win))
                    sub_bytes += win.nbytes
                    if len(batch) == args.batch:
                        batch = []
            py = sub_bytes / (time.perf_counter() - t0) / 1e9
            out.append(f"| {np.dtype(dtype).name} | {W}/{S} ({len(plan):,d}) | {gbps:.2f} GB/s | {py:.3f} GB/s | "
                       f"{gbps / py:,.0f}x |")
        mm = None  # unmapped before its file is removed
        os.remove(path)
    # the general path: Window objects with labels, positions, mask
    docs = [np.arange(n, dtype=np.int64) for n in lengths[:20_000].tolist()]
    plan = SlidingWindows(512, 256).plan([d.size for d in docs])
    t0 = time.perf_counter()
    n = sum(1 for _ in plan.materialize(docs))
    dt = time.perf_counter() - t0
    out.append(f"\n`plan.materialize` (one `Window` with input_ids, labels, position_ids, attention_mask each): "
               f"{n / dt:,.0f} windows/s ({n * 512 / dt / 1e6:,.1f} M tokens/s at W=512).\n")


def bench_datasets(args, out):
    try:
        import datasets
    except ImportError:
        out.append("`datasets` is not installed: the `datasets.map(group_texts)` comparison was skipped "
                   "(pip install datasets).\n")
        return
    datasets.disable_progress_bars()
    lengths = doc_lengths(args.hf_tokens // 600, seed=3)
    lengths = lengths[np.cumsum(lengths) <= args.hf_tokens]
    rng = np.random.default_rng(4)
    flat = rng.integers(0, 50_000, int(lengths.sum())).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    ds = datasets.Dataset.from_dict({"input_ids": [flat[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])]})
    block = 512

    def group_texts(examples):  # transformers/examples/pytorch/language-modeling/run_clm.py
        concatenated = {k: list(chain(*examples[k])) for k in examples.keys()}
        total_length = (len(concatenated["input_ids"]) // block) * block
        result = {k: [t[i: i + block] for i in range(0, total_length, block)] for k, t in concatenated.items()}
        result["labels"] = result["input_ids"].copy()
        return result

    t_hf = median_time(lambda: ds.map(group_texts, batched=True, keep_in_memory=True), max(1, args.repeat // 2))
    tokens = int(lengths.sum())
    plan = SlidingWindows(block, block, tail="drop").plan(lengths)
    buf = np.empty((args.batch, block), np.int64)

    def ours():
        p = SlidingWindows(block, block, tail="drop").plan(lengths)
        for a in range(0, len(p), args.batch):
            rows = np.arange(a, min(a + args.batch, len(p)))
            p.gather(flat, offsets, rows, out=buf[: rows.size])

    ours()
    t_ours = median_time(ours, args.repeat)
    out.append(f"`datasets.map(group_texts, batched=True)` (datasets {datasets.__version__}, block 512, "
               f"{tokens:,d} tokens in {lengths.size:,d} documents, in memory): {tokens / t_hf / 1e6:,.2f} M tokens/s; "
               f"tokenmill plan + gather of the same non-overlapping 512-token windows ({len(plan):,d}): "
               f"{tokens / t_ours / 1e6:,.1f} M tokens/s, **{t_hf / t_ours:,.0f}x**. (group_texts also joins "
               "documents across boundaries; tokenmill keeps windows inside documents.)\n")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem = float("nan")
    import numba

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM; Python {platform.python_version()}, numpy "
            f"{np.__version__}, numba {numba.__version__}; load average at start {load:.1f} (shared machine)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=10_000_000, help="documents to plan")
    ap.add_argument("--tokens", type=int, default=100_000_000, help="ids in the memory-mapped store")
    ap.add_argument("--hf-tokens", type=int, default=5_000_000, help="ids for the datasets.map comparison")
    ap.add_argument("--python-docs", type=int, default=200_000, help="documents for the Python-loop baselines")
    ap.add_argument("--batch", type=int, default=1024, help="windows per gathered batch")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-publish", action="store_true", help="print only; do not write bench/results and docs")
    args = ap.parse_args(argv)
    print(f"Machine: {machine()}.")
    out = [f"Median of {args.repeat} runs.", "", "### Planning", ""]
    bench_planning(args, out)
    out += ["### Materialization", ""]
    with tempfile.TemporaryDirectory() as tmp:
        bench_gather(args, out, tmp)
    bench_datasets(args, out)
    text = "\n".join(out)
    print(text)
    if not args.no_publish:
        from _results import publish, tables

        publish("windows", {"tables": tables(text)}, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
