"""How fast a lean one-table loop finds chunks already seen, against the encode kernel on the same chunks.

    .venv/bin/python bench/_lean_probe.py [--tokenizer cl100k] [--corpus en] [--repeat 15]

A developer's tool, not a published benchmark (nothing goes to docs/benchmarks.md): the target of a
rewrite of ``encode_chunks``' main loop. The lean loop holds every chunk of 1-15 bytes in one table
(rows ``[k0, k1, ids, 0]``: the chunk's bytes as two words, the length in the top byte of ``k1``, up to
three 20-bit ids and their count), computes each chunk's key once, 16 chunks ahead, where it prefetches
the row, and writes three ids unconditionally. The table is filled from the kernel's own output on the
text (every chunk of at most three ids) plus the vocabulary tables, so both loops answer the same
chunks; a chunk the table lacks (over 15 bytes, or more than three ids) goes to "the slow path", here
a copy of the kernel's ids for it (the cheapest slow path there can be). The ids are compared with the
kernel's before timing. Where most chunks are not cached by design (Chinese: Han runs are merged every
time), the comparison means nothing: the slow path here is a copy.

Measured (2 MB samples, warm, fastest of 15): en cl100k 7.24 -> 4.76 ms (1.52x), GPT-2 7.47 -> 4.66
(1.60x), o200k 7.25 -> 4.86 (1.49x); code cl100k 5.63 -> 4.55 (1.24x). With a miss writing one 0
instead of the copy, the same loop ran 3.4 ms on en. The same one-table probe put inside
``encode_chunks`` (its slow paths inline in the same loop, the old prefetch block dropped) read
0.75-0.90x of the kernel before it: the gain needs the hot loop this small, the slow paths out of it.
Since the kernel's word tables (f29ceed: per thread, one probe per chunk of up to 15 bytes, three ids
written unconditionally, in ``_hot``, a loop of its own) the kernel is the faster one: GPT-2 English,
warm, kernel 6.95 ms, this loop 7.77 ms (0.90x).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

_FIB = np.uint64(0x9E3779B97F4A7C15)
_FIB2 = np.uint64(0xC2B2AE3D27D4EB4F)


def kernels():
    from tokenmill._jit import njit
    from tokenmill.tokenizer._wide import load_u64, prefetch

    @njit(nogil=True, inline="always")
    def key(data, a, n):
        m0 = np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(8 * (8 - min(n, 8)))
        m1 = (np.uint64(1) << np.uint64(8 * max(n - 8, 0))) - np.uint64(1)
        return load_u64(data, a) & m0, (load_u64(data, a + 8) & m1) | (np.uint64(n) << np.uint64(56))

    @njit(nogil=True, inline="always")
    def slot(k0, k1, mask):
        return np.int64((((k0 ^ (k1 * _FIB2)) * _FIB) >> np.uint64(40)) & mask)

    @njit(nogil=True, inline="always")
    def put(tab, k0, k1, w):
        mask = np.uint64(tab.size // 4 - 1)
        i = slot(k0, k1, mask)
        while tab[4 * i + 1] != 0 and not (tab[4 * i] == k0 and tab[4 * i + 1] == k1):
            i = (i + 1) & np.int64(mask)
        tab[4 * i] = k0
        tab[4 * i + 1] = k1
        tab[4 * i + 2] = w

    @njit(nogil=True)
    def fill(tab, data, offs, ids, starts, vtab, vtab2):
        for k in range(offs.size - 1):
            a, n, c = offs[k], offs[k + 1] - offs[k], starts[k + 1] - starts[k]
            if n <= 15 and c <= 3:
                k0, k1 = key(data, a, n)
                w = np.uint64(c) << np.uint64(60)
                for t in range(c):
                    w |= np.uint64(ids[starts[k] + t]) << np.uint64(20 * t)
                put(tab, k0, k1, w)
        low = (np.uint64(1) << np.uint64(56)) - np.uint64(1)
        for r in range(vtab.size // 2):  # the seeds' values: one id above a count of 1
            if vtab[2 * r] != 0:
                put(tab, vtab[2 * r] & low, vtab[2 * r] & ~low, (np.uint64(1) << np.uint64(60)) | (vtab[2 * r + 1] >> np.uint64(2)))
        for r in range(vtab2.size // 4):
            if vtab2[4 * r + 1] != 0:
                put(tab, vtab2[4 * r], vtab2[4 * r + 1], (np.uint64(1) << np.uint64(60)) | (vtab2[4 * r + 2] >> np.uint64(2)))

    @njit(nogil=True)
    def lean(data, offs, tab, ids, starts, out):
        mask = np.uint64(tab.size // 4 - 1)
        rk0, rk1, rs = np.zeros(32, np.uint64), np.zeros(32, np.uint64), np.full(32, -1, np.int64)
        nch, nout, slow = offs.size - 1, 0, 0
        for j in range(-16, nch):
            q = j + 16  # the chunk whose key is computed (and row prefetched) now
            if q < nch:
                a, n = offs[q], offs[q + 1] - offs[q]
                s = np.int64(-1)
                if n <= 15:
                    k0, k1 = key(data, a, n)
                    rk0[q & 31], rk1[q & 31] = k0, k1
                    s = slot(k0, k1, mask)
                    prefetch(tab, 4 * s)
                rs[q & 31] = s
            if j < 0:
                continue
            i = rs[j & 31]
            hit = False
            if i >= 0:
                k0, k1 = rk0[j & 31], rk1[j & 31]
                while tab[4 * i + 1] != 0:
                    if tab[4 * i + 1] == k1 and tab[4 * i] == k0:
                        hit = True
                        break
                    i = (i + 1) & np.int64(mask)
            if hit:
                w = tab[4 * i + 2]
                out[nout] = np.int64(w & np.uint64(0xFFFFF))
                out[nout + 1] = np.int64((w >> np.uint64(20)) & np.uint64(0xFFFFF))
                out[nout + 2] = np.int64((w >> np.uint64(40)) & np.uint64(0xFFFFF))
                nout += np.int64(w >> np.uint64(60))
            else:  # the slow path, here a copy of the kernel's ids for this chunk
                slow += 1
                for t in range(starts[j], starts[j + 1]):
                    out[nout] = ids[t]
                    nout += 1
        return nout, slow

    return fill, lean


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="example: .venv/bin/python "
                                 "bench/_lean_probe.py --tokenizer gpt2 --corpus code")
    ap.add_argument("--tokenizer", default="cl100k", choices=["gpt2", "cl100k", "o200k", "llama3"])
    ap.add_argument("--corpus", default="en", help="a folder of ../shared/corpora (en, zh, code, multi)")
    ap.add_argument("--max-mb", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=15)
    a = ap.parse_args()
    from encode_profile import CORPORA, joined, load_docs, make

    docs = load_docs(CORPORA / a.corpus, a.max_mb)
    enc = make(a.tokenizer)._compiled()
    data, _, offs, _ = joined(docs, enc.pattern)
    padded = data + bytes(16)  # 16 readable bytes past every chunk start
    arr = np.frombuffer(padded, np.uint8)
    none = np.zeros(0, np.int64)
    every = np.arange(offs.size - 1, dtype=np.int64)  # every chunk marked: where each one's ids start
    starts = np.empty(offs.size - 1, np.int64)
    out = enc._run(padded, offs, every, starts)
    n = out.size
    ids = out[:n].copy()
    starts_all = np.append(starts, n)
    fill, lean = kernels()
    lens = np.diff(offs)
    distinct = len({data[x:y] for x, y, n in zip(offs[:-1].tolist(), offs[1:].tolist(), lens.tolist()) if n <= 15})
    entries = distinct + int((enc.vtab[0::2] != 0).sum()) + int((enc.vtab2[1::4] != 0).sum())
    rows = 1
    while rows < 2 * entries:  # at most half full, as the kernel's vocabulary tables
        rows *= 2
    tab = np.zeros(4 * rows, np.uint64)
    fill(tab, arr, offs, ids, starts_all, enc.vtab, enc.vtab2)
    got = np.empty(len(data) + 16, np.int64)
    m, slow = lean(arr, offs, tab, ids, starts_all, got)
    if not np.array_equal(got[:m], ids):
        raise SystemExit("the lean loop's ids differ from the kernel's")
    best = {"kernel": float("inf"), "lean": float("inf")}
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        enc._run(padded, offs, none, none)
        t1 = time.perf_counter()
        lean(arr, offs, tab, ids, starts_all, got)
        t2 = time.perf_counter()
        best["kernel"], best["lean"] = min(best["kernel"], t1 - t0), min(best["lean"], t2 - t1)
    print(f"{a.tokenizer} {a.corpus}: {offs.size - 1:,} chunks, {int((tab[1::4] != 0).sum()):,} table rows "
          f"({tab.nbytes / 1e6:.0f} MB); kernel on a warm cache {best['kernel'] * 1e3:.2f} ms, lean loop "
          f"{best['lean'] * 1e3:.2f} ms ({best['kernel'] / best['lean']:.2f}x); chunks the table lacks: {slow:,}; "
          "ids equal")


if __name__ == "__main__":
    main()
