"""Packing speed and quality: best fit vs first fit, greedy (torchtune-style) and concatenation.

    .venv/bin/python bench/packing.py [--docs 1000000] [--block-size 2048] [--runs 5]
                                      [--corpora ../shared/corpora] [--materialize-docs 200000]

1. Plans for ``--docs`` documents with log-normal lengths (mu 5.5, sigma 1.0: median ~245 tokens,
   mean ~400, a long tail past the block size), and for lengths resampled from the files of
   ``--corpora`` (UTF-8 bytes / 4 as a token-count proxy). Per method: time (median of ``--runs``),
   blocks, fill, documents that fit a block but were cut anyway, targets lost at cuts. The greedy
   packer also runs as a plain Python loop, the way torchtune's PackedDataset packs.
2. Materialization: a plan over ``--materialize-docs`` documents whose uint32 ids sit in a
   memory-mapped file (page cache warm); GB/s of token ids (4 bytes each) for full Batches (ids,
   labels, positions, mask, cu_seqlens; doc ids and offsets derived when read, and a row that reads
   them from every batch), one and two threads, int64 and ``index_dtype=np.int32`` (round robin,
   median of ``--runs`` passes). "GB/s per CPU second"
   divides by this process's CPU time (all its threads): on a loaded machine it shows what the code
   does with the CPU it gets. Beside them, the machine's own memory speed in the same run (a numpy
   copy, one and two threads) and what it allows a pass that moves a batch's bytes per position.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

from tokenmill.batching import pack
from tokenmill.batching import reference as _reference

METHODS = ["best_fit", "first_fit_decreasing", "greedy", "concat"]


def lognormal_lengths(n: int, seed: int = 0) -> np.ndarray:
    return np.maximum(np.random.default_rng(seed).lognormal(5.5, 1.0, n).astype(np.int64), 1)


def corpus_lengths(folder: Path, n: int, seed: int = 0) -> np.ndarray | None:
    files = sorted(folder.glob("*/*.txt"))
    if not files:
        return None
    sizes = np.array([f.stat().st_size // 4 for f in files], np.int64)
    return np.maximum(np.random.default_rng(seed).choice(sizes, n), 1)


def median_time(fn, runs: int) -> tuple[float, object]:
    out, times = None, []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def cut_fitting_docs(plan, lengths: np.ndarray) -> int:
    """Documents no longer than a block that still ended up in more than one segment."""
    pieces = np.bincount(plan.doc, minlength=lengths.size)
    return int(((pieces > 1) & (lengths <= plan.block_size)).sum())


def bench_plans(name: str, lengths: np.ndarray, T: int, runs: int) -> list[str]:
    pack(lengths[:1000], T)  # load the compiled kernels (cached on disk after the first run)
    rows = []
    for m in METHODS:
        dt, plan = median_time(lambda: pack(lengths, T, method=m), runs)
        rows.append(f"| {name} | `{m}` | {dt:.2f} | {plan.num_blocks:,d} | {plan.fill:.2%} | "
                    f"{cut_fitting_docs(plan, lengths):,d} | {plan.boundary_targets:,d} |")
    # torchtune-style: the same greedy rule as a Python loop over documents (split pieces as items).
    items = np.minimum(lengths, T).tolist()
    dt, (assign, nblocks) = median_time(lambda: _reference.greedy(items, T), max(1, runs // 2))
    fill = sum(items) / (nblocks * T)
    rows.append(f"| {name} | greedy as a Python loop (torchtune's rule; plan only, long documents truncated) | {dt:.2f} | "
                f"{nblocks:,d} | {fill:.2%} | 0 | - |")
    return rows


class MemmapSource:
    """The token-store layout: all ids in one memory-mapped array plus document offsets."""

    def __init__(self, path: Path, lengths: np.ndarray):
        self.lengths = lengths
        self.doc_offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self.token_array = np.memmap(path, dtype=np.uint32, mode="r")

    def __len__(self):
        return self.lengths.size

    def get(self, i):
        return np.asarray(self.token_array[self.doc_offsets[i] : self.doc_offsets[i + 1]])


def bench_materialize(n_docs: int, T: int, runs: int, batch_size: int = 64) -> tuple[list[str], dict]:
    """Full batches, default layout and ``index_dtype=np.int32``, one and two threads; the variants
    take turns within every run (round robin), so a change of machine load hits them alike."""
    lengths = lognormal_lengths(n_docs, seed=1)
    variants = {"default": {}, "2 threads": {"num_threads": 2}, "int32": {"index_dtype": np.int32},
                "int32, 2 threads": {"index_dtype": np.int32, "num_threads": 2}, "dropped": {"drop": True},
                "read": {"read": True}}
    wall: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tokens.u32"
        np.random.default_rng(2).integers(0, 2**17, int(lengths.sum()), dtype=np.uint32).tofile(path)
        src = MemmapSource(path, lengths)
        plan = pack(lengths, T)
        gb = plan.tokens * 4 / 1e9

        def full_batches(drop: bool = False, read: bool = False, **kw):
            if drop:  # the consumer lets each batch go before it asks for the next
                for b in plan.batches(src, batch_size=batch_size, pad_id=0, **kw):
                    del b
                return
            if read:  # the consumer reads where every position comes from (derived on first read)
                for b in plan.batches(src, batch_size=batch_size, pad_id=0, **kw):
                    _ = (b.doc_ids, b.token_offsets)
                return
            for _ in plan.batches(src, batch_size=batch_size, pad_id=0, **kw):  # holds one while the next is made
                pass

        for kw in variants.values():
            full_batches(**kw)  # warm the page cache and the kernels
        for _ in range(runs):
            for name, kw in variants.items():
                t0, c0 = time.perf_counter(), time.process_time()
                full_batches(**kw)
                wall[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
    med = {k: statistics.median(v) for k, v in wall.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    label = {"default": f"full `Batch`es via `plan.batches(source, batch_size={batch_size})`",
             "2 threads": "full `Batch`es, `num_threads=2`",
             "int32": "full `Batch`es, `index_dtype=np.int32`",
             "int32, 2 threads": "full `Batch`es, `index_dtype=np.int32, num_threads=2`",
             "dropped": "full `Batch`es, default, each dropped before the next is asked for",
             "read": "full `Batch`es, default, `doc_ids` and `token_offsets` of each read too"}
    rows = [f"| {label[k]} | {plan.tokens:,d} | {med[k]:.2f} | {gb / med[k]:.2f} | {gb / med_cpu[k]:.2f} |"
            for k in variants]
    ratios = {"two_threads_over_one": med["default"] / med["2 threads"],
              "int32_two_threads_over_one": med["int32"] / med["int32, 2 threads"]}
    rows.append(f"\nTwo threads / one thread (wall-clock, same run): {ratios['two_threads_over_one']:.2f}x "
                f"(int32: {ratios['int32_two_threads_over_one']:.2f}x).")
    # bytes read + written per position: ids in; ids, labels, positions (8 or 4 bytes), mask out; reading
    # doc_ids and token_offsets writes 16 more
    moved = {"default": 4 + 25, "int32": 4 + 21, "read": 4 + 41}
    rows.append(f"\nA loop `for b in plan.batches(...)` still holds batch i while batch i+1 is made, so two buffers "
                f"take turns and each is written again two batches (~{(moved['default'] - 4) * batch_size * T / 1e6:.0f} MB "
                f"each) after its last use; a consumer that drops each batch before asking for the next gets the "
                f"same buffer back while it is still in cache: {gb / med['dropped']:.2f} GB/s of ids "
                f"({med['default'] / med['dropped']:.2f}x the default loop).")
    ceiling = copy_ceiling(runs)
    rows.append(f"\nReading `doc_ids` and `token_offsets` of every batch (derived then from the batch's segment table): "
                f"{gb / med['read']:.2f} GB/s of ids, {med['read'] / med['default']:.2f}x the time of a loop that does not read them.")
    rows.append(f"\nThis machine's memory in the same run: a numpy `copyto` of 256 MB moves {ceiling['one']:.1f} GB/s "
                f"(read + write) on one thread, {ceiling['two']:.1f} GB/s on two ({ceiling['two'] / ceiling['one']:.2f}x). "
                f"A batch moves {moved['default']} bytes per position ({moved['int32']} with int32 indices, "
                f"{moved['read']} when doc ids and offsets are read), so at "
                f"that copy speed full batches could reach {ceiling['one'] * 4 / moved['default']:.2f} GB/s of ids "
                f"({ceiling['one'] * 4 / moved['int32']:.2f} int32) on one thread, and two threads at most "
                f"{ceiling['two'] / ceiling['one']:.2f}x one.")
    return rows, {"gb_per_s": {k: gb / v for k, v in med.items()},
                  "gb_per_cpu_s": {k: gb / v for k, v in med_cpu.items()}, **ratios,
                  "copy_gb_per_s": ceiling, "bytes_moved_per_position": moved}


def copy_ceiling(runs: int, n: int = 32 * 2**20) -> dict:
    """GB/s (read + write) of a plain numpy copy of ``n`` int64, one thread and split over two
    (numpy releases the GIL while it copies): what memory-bound work can get on this machine."""
    import threading

    src, dst = np.ones(n, np.int64), np.zeros(n, np.int64)
    half = n // 2

    def two():
        ts = [threading.Thread(target=np.copyto, args=(dst[i * half:(i + 1) * half], src[i * half:(i + 1) * half]))
              for i in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    one_s, two_s = [], []
    for _ in range(runs):
        for fn, out in ((lambda: np.copyto(dst, src), one_s), (two, two_s)):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    gb = 2 * n * 8 / 1e9
    return {"one": gb / statistics.median(one_s), "two": gb / statistics.median(two_s)}


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} cores visible (shared), Python {platform.python_version()}, "
            f"numpy {np.__version__}, numba {numba.__version__}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-publish", action="store_true", help="print only; do not write bench/results and docs")
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--block-size", type=int, default=2048)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--corpora", type=Path, default=Path("../shared/corpora"))
    ap.add_argument("--materialize-docs", type=int, default=200_000)
    args = ap.parse_args()
    T = args.block_size

    out = []

    def emit(line: str) -> None:
        print(line, flush=True)
        out.append(line)

    print(f"machine: {machine()}\n")
    emit(f"### Plans: {args.docs:,d} documents, block_size {T:,d} (median of {args.runs} runs)\n")
    emit("| lengths | method | seconds | blocks | fill | fitting docs cut | targets lost at cuts |")
    emit("|---|---|---:|---:|---:|---:|---:|")
    ln = lognormal_lengths(args.docs)
    for row in bench_plans(f"log-normal (mean {ln.mean():.0f})", ln, T, args.runs):
        emit(row)
    cl = corpus_lengths(args.corpora, args.docs)
    if cl is not None:
        for row in bench_plans(f"corpora bytes/4 (mean {cl.mean():,.0f})", cl, T, args.runs):
            emit(row)
    emit(f"\n### Materializing blocks from a memory-mapped uint32 token file ({args.materialize_docs:,d} "
          f"log-normal documents, median of {args.runs})\n")
    emit("| what | tokens | seconds | GB/s of token ids | GB/s per CPU second |")
    emit("|---|---:|---:|---:|---:|")
    rows, mat = bench_materialize(args.materialize_docs, T, args.runs)
    for row in rows:
        emit(row)
    if not args.no_publish:
        from _results import publish, tables

        md = "\n".join(out)
        publish("packing", {"tables": tables(md), "materialize": mat}, md)


if __name__ == "__main__":
    main()
