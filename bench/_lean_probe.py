"""How fast a lean one-table loop finds chunks already seen, against the encode kernel on the same chunks.

    .venv/bin/python bench/_lean_probe.py [--tokenizer cl100k] [--corpus en] [--repeat 15] [--lines 14 16]

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
warm, kernel 6.95 ms, this loop 7.77 ms (0.90x). At e102c4e (an Intel Xeon) this loop read 1.09-1.29x the
kernel on English and 1.24x on GPT-2 code.

Then the block loops (``block_kernels``: gigatoken's two-phase shape, home line of two entries only, no
branch on the length, see its docstring), over ``--lines`` table sizes: with the text's own chunks in
the table and a copy for the slow path, 5.0-5.6 ns a chunk in 1 MB against the kernel's 6.8-7.8
(1.34-1.44x on English under GPT-2, cl100k and o200k and on GPT-2 code); with the table filled from the
kernel's ``_hot``, which is then its slow path too, 0.67-0.69x in 1 MB and 0.79-0.96x in 4 MB: each
chunk the table lacks costs ~150 ns there (the kernel's rows for it were never prefetched).
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
    from tokenmill._intrinsics import prefetch
    from tokenmill._jit import njit
    from tokenmill.tokenizer._wide import load_u64

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


_BLOCK = 64  # chunks whose keys the block loops compute (and whose lines they prefetch) before probing any


def block_kernels():
    """The two-phase shape gigatoken describes, in numba: for a block of 64 chunks, each one's two key words
    and its line (two 32-byte entries, 64 bytes) computed and prefetched; then each chunk probed against
    the two entries of its home line only, the entry picked by its index (no select for LLVM to turn into
    a branch), three ids written unconditionally and the output advanced by the count. The key words'
    masks come from two 16-word tables indexed by the length's low four bits (no branch on the length:
    gcc and LLVM both made ``min(n, 8)`` a branch), and a chunk of 16 bytes or more gets bit 60 of its second
    word set, which no entry has (so it misses). Entries: ``k0, k1, id0 | id1 << 32, id2 | count << 32``."""
    from tokenmill._intrinsics import prefetch
    from tokenmill._jit import njit
    from tokenmill.tokenizer._wide import load_u64, raw

    u = np.uint64
    m0 = np.array([0] + [(1 << (8 * min(n, 8))) - 1 for n in range(1, 16)], np.uint64)
    m1 = np.array([0] * 9 + [(1 << (8 * (n - 8))) - 1 for n in range(9, 16)], np.uint64)

    @njit(nogil=True, inline="always")
    def keys(dp, m0p, m1p, a, n):
        i = u(n) & u(15)
        k0 = load_u64(dp, a) & m0p[i]
        k1 = (load_u64(dp, a + 8) & m1p[i]) | (i << u(56)) | (u(n > 15) << u(60))
        return k0, k1

    @njit(nogil=True, inline="always")
    def line(k0, k1, lmask):
        return (((k0 * _FIB) ^ (k1 * _FIB2)) >> u(32)) & lmask

    @njit(nogil=True)
    def put(tab, data, offs, k, ids, starts):
        """Chunk ``k`` into its home line if it has a free entry (returns whether it went in)."""
        dp, m0p, m1p = raw(data), raw(m0), raw(m1)
        a, n, c = offs[k], offs[k + 1] - offs[k], starts[k + 1] - starts[k]
        k0, k1 = keys(dp, m0p, m1p, a, n)
        r = line(k0, k1, u(tab.size // 8 - 1)) * u(8)
        for e in (u(0), u(4)):
            if tab[r + e + u(1)] == k1 and tab[r + e] == k0:
                return True
            if tab[r + e + u(1)] == 0:
                w = [u(0), u(0), u(0)]
                for t in range(c):
                    w[t] = u(ids[starts[k] + t])
                tab[r + e] = k0
                tab[r + e + u(1)] = k1
                tab[r + e + u(2)] = w[0] | (w[1] << u(32))
                tab[r + e + u(3)] = w[2] | (u(c) << u(32))
                return True
        return False

    from tokenmill.tokenizer.bpe import _encode_kernels as EK

    @njit(nogil=True)
    def _hot_one(dp, op, k, nch, outp, nout, vt, vmask, imask, vt2, vmask2, mt, mmask, mt2, mmask2, sk, si, bmask, bp,
                 lt, lmask, lend):
        """The kernel's loop for text seen before over chunk ``k`` alone: the new output position (``nout``
        where none of its tables holds the chunk)."""
        got, n2 = EK._hot(dp, op, k, k + 1, nch, outp, nout, vt, vmask, imask, vt2, vmask2, mt, mmask, mt2, mmask2,
                          sk, si, bmask, bp, lt, lmask, lend)
        return n2 if got > k else nout

    @njit(nogil=True)
    def blocks(data, offs, tab, ids, starts, out, hot):
        """The ids of every chunk: found in ``tab``, else (the slow path) the kernel's own ids copied, or,
        where ``hot`` holds the kernel's tables, the kernel's ``_hot`` asked for that one chunk (its answer
        put in the line, most recent first)."""
        nch = offs.size - 1
        lmask = u(tab.size // 8 - 1)
        scratch = np.empty(3 * _BLOCK, np.uint64)
        dp, op, tp, sp, outp, m0p, m1p = raw(data), raw(offs), raw(tab), raw(scratch), raw(out), raw(m0), raw(m1)
        vtab, vmask, imask, vtab2, vmask2, mtab, mmask, mtab2, mmask2, skf, sif, bmask, byte_ids, ltab, lmask2 = hot
        vt, vt2, mt, mt2, sk, si, bp, lt = raw(vtab), raw(vtab2), raw(mtab), raw(mtab2), raw(skf), raw(sif), \
            raw(byte_ids), raw(ltab)
        lend = offs[nch] - 32
        nout = 0
        slow = 0
        k = 0
        while k < nch:
            b = k
            e = min(k + _BLOCK, nch)
            for q in range(b, e):
                k0, k1 = keys(dp, m0p, m1p, op[q], op[q + 1] - op[q])
                r = line(k0, k1, lmask)
                j = u(3 * (q - b))
                sp[j] = k0
                sp[j + u(1)] = k1
                sp[j + u(2)] = r
                prefetch(tp, r * u(8))
            while k < e:
                j = u(3 * (k - b))
                k0 = sp[j]
                k1 = sp[j + u(1)]
                r = sp[j + u(2)] * u(8)
                hit0 = (tp[r] == k0) & (tp[r + u(1)] == k1)
                hit1 = (tp[r + u(4)] == k0) & (tp[r + u(5)] == k1)
                if not (hit0 | hit1):
                    slow += 1
                    got = nout
                    if vmask != 0:
                        got = _hot_one(dp, op, k, nch, outp, nout, vt, vmask, imask, vt2, vmask2, mt, mmask, mt2, mmask2,
                                       sk, si, bmask, bp, lt, lmask2, lend)
                    if got == nout:  # not found (or no kernel tables): the kernel's ids
                        for t in range(starts[k], starts[k + 1]):
                            out[nout] = ids[t]
                            nout += 1
                    else:
                        m = got - nout
                        if m <= 3 and k1 < (u(1) << u(60)):  # into the line, first; its first entry moves on
                            for t in range(4):
                                tp[r + u(4 + t)] = tp[r + u(t)]
                            tp[r] = k0
                            tp[r + u(1)] = k1
                            w1 = u(out[nout + 1]) if m > 1 else u(0)
                            w2 = u(out[nout + 2]) if m > 2 else u(0)
                            tp[r + u(2)] = u(out[nout]) | (w1 << u(32))
                            tp[r + u(3)] = w2 | (u(m) << u(32))
                        nout = got
                    k += 1
                    continue
                r += u(hit1) << u(2)
                v01 = tp[r + u(2)]
                v2 = tp[r + u(3)]
                outp[nout] = np.int64(v01 & u(0xFFFFFFFF))
                outp[nout + 1] = np.int64(v01 >> u(32))
                outp[nout + 2] = np.int64(v2 & u(0xFFFFFFFF))
                nout += np.int64(v2 >> u(32))
                k += 1
        return nout, slow


    return put, blocks


def _hot_tables(enc, on: bool = True):
    """The kernel's tables for ``_hot`` (this thread's state), as ``blocks`` takes them (``on`` False: the
    same with a vocabulary mask of 0, which ``blocks`` reads as "copy the kernel's ids")."""
    st = enc._state()
    skeys, sids, mtab, mtab2, ltab = st[9], st[10], st[12], st[13], st[14]
    u = np.uint64
    return (enc.vtab, u(enc.vtab.size // 2 - 1) if on else u(0), enc.imask, enc.vtab2, u(enc.vtab2.size // 4 - 1), mtab,
            u(mtab.size // 2 - 1), mtab2, u(mtab2.size // 4 - 1), skeys.reshape(-1), sids.reshape(-1),
            u(skeys.shape[0] - 1) & ~u(3), enc.byte_ids, ltab, u(ltab.size // 8 - 1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="example: .venv/bin/python "
                                 "bench/_lean_probe.py --tokenizer gpt2 --corpus code")
    ap.add_argument("--tokenizer", default="cl100k", choices=["gpt2", "cl100k", "o200k", "llama3"])
    ap.add_argument("--corpus", default="en", help="a folder of ../shared/corpora (en, zh, code, multi)")
    ap.add_argument("--max-mb", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--lines", type=int, nargs="+", default=[14, 16],
                    help="log2 of the block loops' table lines (64 bytes each): 14 is 1 MB")
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
    _blocks(a, enc, data, arr, offs, ids, starts_all, padded, none)


def _blocks(a, enc, data, arr, offs, ids, starts, padded, none) -> None:
    """The block-shaped loops against the kernel: a table of the text's own chunks (most frequent first,
    home line only) with a copy for a slow path, and an empty table filled from the kernel's ``_hot``,
    which is also its slow path (timed after one pass has filled it)."""
    put, blocks = block_kernels()
    lens = np.diff(offs)
    counts = np.diff(starts)
    by_chunk: dict = {}
    for k in np.flatnonzero((lens <= 15) & (counts <= 3)).tolist():
        by_chunk.setdefault(data[offs[k]:offs[k + 1]], [0, k])[0] += 1
    order = [k for _, k in sorted(by_chunk.values(), key=lambda x: -x[0])]
    got = np.empty(len(data) + 16, np.int64)
    off, on = _hot_tables(enc, False), _hot_tables(enc)

    def timed(tab, hot, label):
        m, slow = blocks(arr, offs, tab, ids, starts, got, hot)
        if not np.array_equal(got[:m], ids):
            raise SystemExit(f"{label}: ids differ from the kernel's")
        best_k = best_b = float("inf")
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            enc._run(padded, offs, none, none)
            t1 = time.perf_counter()
            _, slow = blocks(arr, offs, tab, ids, starts, got, hot)
            t2 = time.perf_counter()
            best_k, best_b = min(best_k, t1 - t0), min(best_b, t2 - t1)
        nch = offs.size - 1
        print(f"  {label}: {best_b * 1e3:.2f} ms ({best_b / nch * 1e9:.2f} ns a chunk) against the kernel's "
              f"{best_k * 1e3:.2f} ms ({best_k / best_b:.2f}x); slow path {slow:,} chunks ({slow / nch:.1%})")

    for lines in a.lines:
        tab = np.zeros(8 << lines, np.uint64)
        for k in order:
            put(tab, arr, offs, k, ids, starts)
        timed(tab, off, f"blocks, the text's chunks in {tab.nbytes >> 20} MB, a copy for the slow path")
    for lines in a.lines:
        tab = np.zeros(8 << lines, np.uint64)
        timed(tab, on, f"blocks, {tab.nbytes >> 20} MB filled by the kernel's _hot, its slow path")


if __name__ == "__main__":
    main()
