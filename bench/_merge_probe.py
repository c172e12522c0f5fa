"""Variants of the encoder's merges and seeds against the kernel's own, on the chunks they would see.

    .venv/bin/python bench/_merge_probe.py [--tokenizer gpt2] [--corpus en] [--lengths 1 15] [--rounds 21]
    .venv/bin/python bench/_merge_probe.py --seeds [--tokenizer cl100k] [--corpus code]
    .venv/bin/python bench/_merge_probe.py --long [--tokenizer gpt2]

A developer's tool, not a published benchmark (docs/benchmarks.md quotes its numbers with the commit,
"Tried at 42bfd3a and left out"). One process; the frontier protocol's sample and warm-up text (those of
``bench/tokenizer_speed.py --phases frontier --max-mb 2``); every variant's ids checked equal to the
kernel's before it is timed; the passes of the variants alternate, fastest and median reported.

* **merges** (the default): the sample's first sightings (chunks of ``--lengths`` bytes that are neither
  vocabulary tokens nor in the warm-up text), merged one by one by the kernel's ``_bpe_short`` against
  (a) a loop with fixed positions (no shifts: links to the live neighbours; rank and position packed in
  one word, so one min over all slots picks the merge, leftmost on ties), (b) the kernel's loop with the
  pair lookup's filter branch replaced by a select marked unpredictable (a real cmov: the home row's
  value, a probe only where the filter lets the pair through and the home row holds another key), on
  the pair table as built and at 2 and 4 times its rows. ns a merge.
* **--seeds**: the vocabulary seeds (``vtab``, ``vtab2``) rebuilt at half, twice and four times their rows:
  a fresh encoder warmed on the warm-up text, then the sample (the frontier pass), the sample again, and
  the kernel alone on it, ms.
* **--long**: unique runs of 100 to 10,000 random digits, letters or Han characters after a space (one
  chunk each under GPT-2's split), ns a byte, tokenmill against gigatoken.

Measured at 42bfd3a (Intel Xeon, 2 cores; docs/benchmarks.md has the story): merges of GPT-2 English's
13,823 first sightings of 1-15 bytes 37.4 ns a merge, fixed positions 46.7, the cmov lookup 39.2 and, in
the larger tables, 51.8 and 61.8; GPT-2 code's 1,420 of 16-48 bytes 50.9, fixed positions 46.3. Seeds
(GPT-2 English, frontier / kernel): x0.5 0.95x / 0.87x, x2 1.03x / 1.03x, x4 1.03x / 1.04x (in
``bench/ab_encode.py``, fresh encoders in their own processes, x2 read 0.96-1.02x). Long runs: digits
133-156 ns a byte against gigatoken's 57-81, letters 89-119 against 47-59, Han 15-24 against 25-28.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))


def _alternating(fns: dict, rounds: int) -> dict:
    """Each function timed ``rounds`` times, the functions in turn: name -> (fastest, median) seconds."""
    T: dict = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            t = time.perf_counter()
            f()
            T[k].append(time.perf_counter() - t)
    return {k: (min(v), statistics.median(v)) for k, v in T.items()}


def merge_kernels():
    """``(run, rebuild)``: ``run(data, offs, byte_ids, table, filt, byte_pairs, out, which)`` merges every chunk
    ``data[offs[k]:offs[k + 1]]`` (at most 63 bytes) with the kernel's loop (which 0), the fixed-position loop
    (1) or the branch-free lookup (2), its ids at ``out``: (merges, ids); ``rebuild(table, rows)``: the pair
    table with ``rows`` rows."""
    from numba import types
    from numba.extending import intrinsic

    from tokenmill._jit import njit
    from tokenmill.tokenizer._wide import raw
    from tokenmill.tokenizer.bpe import _encode_kernels as EK
    from tokenmill.tokenizer.bpe._pairs import pair_hash

    BIG, ID, NONE = EK._BIG, EK._ID, np.int64(0x7FFFFFFFFFFFFFFF)

    @intrinsic
    def unpredictable(typingctx, cond, a, b):
        """``a if cond else b`` as one select marked ``!unpredictable`` (without the mark, LLVM's x86 back end
        turns a select between loaded values into a branch)."""
        def codegen(context, builder, signature, args):
            ins = builder.select(*args)
            ins.set_metadata("unpredictable", builder.module.add_metadata([]))
            return ins
        return a(types.boolean, a, a), codegen

    @njit(inline="always")
    def packed(v, i):
        """A pair's value ``prio << 32 | id`` with its position between: the min of these is the next merge."""
        return NONE if v == BIG else ((v >> 32) << 38) | (np.int64(i) << 32) | (v & ID)

    @njit(nogil=True)
    def fixed(ids, n, tf, tmask, ff, fmask, keys, nxt, prv, byte_pairs, data, a):
        for i in range(n - 1):
            keys[i] = packed(byte_pairs[(np.int64(data[a + i]) << 8) | np.int64(data[a + i + 1])], i)
            nxt[i] = i + 1
            prv[i] = i - 1
        keys[n - 1] = NONE
        nxt[n - 1] = n
        prv[n - 1] = n - 2
        while True:
            best = NONE
            for i in range(n - 1):
                x = keys[i]
                best = x if x < best else best
            if best == NONE:
                break
            at = (best >> 32) & 63
            ids[at] = best & ID
            j = nxt[at]
            keys[j] = NONE
            k = nxt[j]
            nxt[at] = k
            keys[at] = NONE
            if k < n:
                prv[k] = at
                keys[at] = packed(EK._rank_at(tf, tmask, ff, fmask, ids[at], ids[k]), at)
            p = prv[at]
            if p >= 0:
                keys[p] = packed(EK._rank_at(tf, tmask, ff, fmask, ids[p], ids[at]), p)
        i = c = 0
        while i < n:
            ids[c] = ids[i]
            c += 1
            i = nxt[i]
        return c

    @njit(inline="always")
    def rank_cmov(tf, tmask, ff, fmask, left, right):
        key = (np.int64(left) << 32) | np.int64(right)
        h = pair_hash(key)
        hi = h >> np.uint64(32)
        i = hi & tmask
        k = tf[np.uint64(2) * i]
        v = tf[np.uint64(2) * i + np.uint64(1)]
        w = ff[hi & fmask]
        passed = ((w >> (h >> np.uint64(58))) & (w >> ((h >> np.uint64(52)) & np.uint64(63))) & np.uint64(1)) != 0
        if passed and k != key and k != -1:
            while True:
                i = (i + np.uint64(1)) & tmask
                k = tf[np.uint64(2) * i]
                if k == key:
                    return tf[np.uint64(2) * i + np.uint64(1)]
                if k == -1:
                    return BIG
        return unpredictable(k == key, v, BIG)

    @njit(nogil=True)
    def cmov_loop(ids, n, tf, tmask, ff, fmask, ranks, byte_pairs, data, a):
        for i in range(n - 1):
            ranks[i] = byte_pairs[(np.int64(data[a + i]) << 8) | np.int64(data[a + i + 1])]
        while n > 1:
            best, at = BIG, -1
            for i in range(n - 1):
                if ranks[i] < best:
                    best, at = ranks[i], i
            if at < 0:
                break
            ids[at] = best & ID
            for i in range(at + 1, n - 1):
                ids[i] = ids[i + 1]
                ranks[i] = ranks[i + 1]
            n -= 1
            if at > 0:
                ranks[at - 1] = rank_cmov(tf, tmask, ff, fmask, ids[at - 1], ids[at])
            if at < n - 1:
                ranks[at] = rank_cmov(tf, tmask, ff, fmask, ids[at], ids[at + 1])
        return n

    @njit(nogil=True)
    def run(data, offs, byte_ids, table, filt, byte_pairs, out, which):
        scratch = np.empty(256, np.int64)  # ids, ranks (or packed keys), next, previous: 64 slots each
        wp, rp, np_, pp = raw(scratch), raw(scratch[64:]), raw(scratch[128:]), raw(scratch[192:])
        tf, tmask, ff, fmask = EK._flat_pairs(table, filt)
        tp, fp, bp, dp = raw(tf), raw(ff), raw(byte_pairs), raw(data)
        merges = nout = 0
        for k in range(offs.size - 1):
            a, n = offs[k], offs[k + 1] - offs[k]
            for t in range(n):
                scratch[t] = byte_ids[data[a + t]]
            if which == 0:
                m = EK._bpe_short(wp, n, tp, tmask, fp, fmask, rp, bp, dp, a)
            elif which == 1:
                m = fixed(wp, n, tp, tmask, fp, fmask, rp, np_, pp, bp, dp, a)
            else:
                m = cmov_loop(wp, n, tp, tmask, fp, fmask, rp, bp, dp, a)
            out[nout : nout + m] = scratch[:m]
            nout += m
            merges += n - m
        return merges, nout

    @njit
    def rebuild(table, rows):
        out = np.full((rows, 2), -1, np.int64)
        for r in range(table.shape[0]):
            if table[r, 0] != -1:
                i = np.int64((pair_hash(table[r, 0]) >> np.uint64(32)) & np.uint64(rows - 1))
                while out[i, 0] != -1:
                    i = (i + 1) & (rows - 1)
                out[i] = table[r]
        return out

    return run, rebuild


def merges(a, tok, docs, warm) -> None:
    from _gap import _first_sightings, _laid_out

    firsts = _first_sightings(tok, docs, warm, *a.lengths)
    if not firsts or max(map(len, firsts)) > 63:
        raise SystemExit("--lengths: chunks of 1 to 63 bytes, and the sample must hold some")
    enc = tok._compiled()
    run, rebuild = merge_kernels()
    data, offs = _laid_out(firsts)
    rows = enc.pairs.shape[0]
    variants = {"kernel's loop": (enc.pairs, 0), "fixed positions": (enc.pairs, 1), "cmov lookup": (enc.pairs, 2),
                "cmov lookup, table x2": (rebuild(enc.pairs, 2 * rows), 2),
                "cmov lookup, table x4": (rebuild(enc.pairs, 4 * rows), 2)}
    want = np.zeros(data.size, np.int64)
    nm, n = run(data, offs, enc.byte_ids, enc.pairs, enc.filt, enc.byte_pairs, want, 0)
    outs = {}
    for name, (table, which) in variants.items():
        outs[name] = np.zeros(data.size, np.int64)
        got = run(data, offs, enc.byte_ids, table, enc.filt, enc.byte_pairs, outs[name], which)
        if got != (nm, n) or not np.array_equal(outs[name], want):
            raise SystemExit(f"{name}: ids differ from the kernel's")
    T = _alternating({name: (lambda t=t, w=w, o=outs[name]: run(data, offs, enc.byte_ids, t, enc.filt, enc.byte_pairs,
                                                                    o, w)) for name, (t, w) in variants.items()},
                     a.rounds)
    print(f"{a.tokenizer} {a.corpus}: {len(firsts):,d} first sightings of {a.lengths[0]}-{a.lengths[1]} bytes "
          f"(mean {np.mean([len(c) for c in firsts]):.1f}), {nm:,d} merges; pair table {enc.pairs.nbytes >> 20} MB")
    for name, (fast, med) in T.items():
        print(f"  {name}: {fast * 1e3:.3f} / {med * 1e3:.3f} ms (fastest / median), {med / nm * 1e9:.1f} ns a merge")


def seeds(a, tok, docs, warm) -> None:
    from tokenmill._jit import njit
    from tokenmill.tokenizer._cpython import utf8_joined
    from tokenmill.tokenizer.bpe import _encode_kernels as EK
    from tokenmill.tokenizer.bpe.encoder import _line_aligned_copy
    from tokenmill.tokenizer.pretokenize.splitter import compiled_offsets

    @njit
    def rebuild(vt, width, keyw, rows):
        out = np.zeros(width * rows, np.uint64)
        mask = np.uint64(rows - 1)
        for r in range(vt.size // width):
            if vt[width * r + keyw] != 0:
                i = EK._vslot(vt[2 * r], mask) if width == 2 else EK._vslot2(vt[4 * r], vt[4 * r + 1], mask)
                while out[width * i + keyw] != 0:
                    i = (i + 1) & np.int64(mask)
                out[width * i : width * i + width] = vt[width * r : width * r + width]
        return out

    enc = tok._compiled()
    v1, v2 = enc.vtab, enc.vtab2
    r1, r2 = v1.size // 2, v2.size // 4
    variants = {f"x{f}": (_line_aligned_copy(rebuild(v1, 2, 0, int(r1 * f))), _line_aligned_copy(rebuild(v2, 4, 1, int(r2 * f))))
                for f in (0.5, 2, 4)}
    variants = {"as built": (v1, v2), **variants}
    data, dd = utf8_joined(docs)
    offs = compiled_offsets(data, enc.pattern, doc_offsets=dd)
    marks = np.searchsorted(offs, dd[:-1]).astype(np.int64)
    pos = np.empty(len(docs), np.int64)
    R: dict = {k: {"frontier": [], "again": [], "kernel": []} for k in variants}
    want = None
    order = list(variants)
    for r in range(a.rounds):
        random.Random(r).shuffle(order)  # no variant always after the same one (its tables' lines evicted)
        for name in order:
            enc.vtab, enc.vtab2 = t1, t2 = variants[name]
            enc._local.state = None  # a fresh cache, as a fresh encoder's
            tok.encode_batch(warm, num_threads=1, as_arrays=True)
            t = time.perf_counter()
            got = tok.encode_batch(docs, num_threads=1, as_arrays=True)
            R[name]["frontier"].append(time.perf_counter() - t)
            t = time.perf_counter()
            tok.encode_batch(docs, num_threads=1, as_arrays=True)
            R[name]["again"].append(time.perf_counter() - t)
            t = time.perf_counter()
            enc._run(data, offs, marks, pos, True)
            R[name]["kernel"].append(time.perf_counter() - t)
            flat = np.concatenate(got)
            want = flat if want is None else want
            if not np.array_equal(flat, want):
                raise SystemExit(f"seeds {name}: ids differ")
    enc.vtab, enc.vtab2 = v1, v2
    print(f"{a.tokenizer} {a.corpus}: seeds of {v1.nbytes >> 20} + {v2.nbytes >> 20} MB as built, ms fastest / median")
    for name, r in R.items():
        print(f"  {name}: " + ", ".join(f"{s} {min(v) * 1e3:.2f} / {statistics.median(v) * 1e3:.2f}" for s, v in r.items()))


def long_runs(a, tok, giga) -> None:
    g = giga()
    g.encode("warm up")
    tok.encode_batch(["warm up"], num_threads=1, as_arrays=True)
    rng = random.Random(0)
    print(f"{a.tokenizer}: unique runs, ns a byte (fastest of 3 rounds of 40 texts), tokenmill / gigatoken")
    for n in (100, 300, 1000, 10000):
        cells = []
        for label, alphabet in (("digits", "0123456789"), ("letters", "abcdefghijklmnopqrstuvwxyz"),
                                ("Han", "的一是不了人我在有他这为之大来以个中上们")):
            tm = gg = float("inf")
            for _ in range(3):  # new runs each round: unseen by either cache
                texts = [" " + "".join(rng.choice(alphabet) for _ in range(n)) for _ in range(40)]
                nb = sum(len(t.encode()) for t in texts)
                t0 = time.perf_counter()
                tok.encode_batch(texts, num_threads=1, as_arrays=True)
                t1 = time.perf_counter()
                for t in texts:
                    g.encode(t)
                t2 = time.perf_counter()
                tm, gg = min(tm, (t1 - t0) / nb), min(gg, (t2 - t1) / nb)
            cells.append(f"{label} {tm * 1e9:.0f} / {gg * 1e9:.0f}")
        print(f"  {n:,d}: " + ", ".join(cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="example: .venv/bin/python bench/_merge_probe.py --tokenizer gpt2 --corpus code "
                                        "--lengths 16 48")
    ap.add_argument("--tokenizer", default="gpt2", choices=["gpt2", "cl100k", "o200k"])
    ap.add_argument("--corpus", default="en", help="a folder of ../shared/corpora (en, zh, code)")
    ap.add_argument("--lengths", type=int, nargs=2, default=[1, 15], metavar=("LO", "HI"),
                    help="the first sightings' lengths in bytes (1-63)")
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--seeds", action="store_true", help="the seeds at other sizes instead of the merges")
    ap.add_argument("--long", action="store_true", help="long unique chunks against gigatoken instead")
    a = ap.parse_args()
    from _gap import _tools
    from tokenizer_speed import load_docs, warmup_docs

    tok, giga = _tools(a.tokenizer)
    if a.long:
        long_runs(a, tok, giga)
        return
    folder = str(ROOT.parent / "shared" / "corpora" / a.corpus)
    docs, warm = load_docs(folder, 2), warmup_docs(folder, 2, 1.0)
    (seeds if a.seeds else merges)(a, tok, docs, warm)


if __name__ == "__main__":
    main()
