"""One table for every chunk of 1-15 bytes against the kernel's tables, on text seen before.

    .venv/bin/python bench/_table_probe.py [--tokenizer gpt2] [--corpus en] [--rounds 15]

A developer's tool, not a published benchmark (its numbers are quoted in docs/benchmarks.md with the
commit they were taken at). The kernel keeps chunks of 1-7 bytes and of 8-15 bytes in tables of their
own (one-word and two-word keys), a seed of the vocabulary's tokens and a merged table of the rest
each: a branch on the length and one on seed or merged per chunk. The loops here take every chunk's
two key words without a branch (its first 8 bytes and the rest, masked by its length, the length in
the top byte), probe rows of 4 words (the two keys, a value of up to 3 ids, a spare word) prefetched 16
chunks ahead, and store 3 ids unconditionally: **one table** (tokens and merged chunks together: what
a table per thread would be) and **seed + merged** (the two probed in turn, as the kernel's are). Over
the sample's chunks of 1-15 bytes in order (the kernel over the same chunks, on its cache after one
pass); ids are not checked (chunks of more than 3 ids keep 3), this times the lookups' shape alone.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

_ONE = np.uint64(1)
_FIB = np.uint64(0x9E3779B97F4A7C15)
_FIB2 = np.uint64(0xC2B2AE3D27D4EB4F)
_M20 = np.uint64((1 << 20) - 1)


def _kernels():
    from tokenmill._intrinsics import prefetch
    from tokenmill._jit import njit
    from tokenmill.tokenizer._wide import load_u64

    @njit(inline="always")
    def keys(dp, a, n):
        m = min(n, 8)
        mask0 = (((_ONE << np.uint64(8 * m - 1)) - _ONE) << _ONE) | _ONE
        mask1 = (_ONE << np.uint64(8 * max(n - 8, 0))) - _ONE
        return load_u64(dp, a) & mask0, (load_u64(dp, a + 8) & mask1) | (np.uint64(n) << np.uint64(56))

    @njit(inline="always")
    def row(k0, k1):
        return ((k0 * _FIB) ^ (k1 * _FIB2)) >> np.uint64(32)

    @njit
    def build(k0, k1, vals):
        cap = 1024
        while cap < 4 * k0.size:
            cap *= 2
        t = np.zeros(4 * cap, np.uint64)
        mask = np.uint64(cap - 1)
        for k in range(k0.size):
            i = row(k0[k], k1[k]) & mask
            while t[4 * i + 1] != 0:
                i = (i + _ONE) & mask
            t[4 * i], t[4 * i + 1], t[4 * i + 2] = k0[k], k1[k], vals[k]
        return t, mask

    @njit
    def one_table(dp, op, t, mask, out):
        nout = 0
        nch = op.size - 1
        for k in range(nch):
            if k + 16 < nch:
                q0, q1 = keys(dp, op[k + 16], op[k + 17] - op[k + 16])
                prefetch(t, np.uint64(4) * (row(q0, q1) & mask))
            k0, k1 = keys(dp, op[k], op[k + 1] - op[k])
            i = row(k0, k1) & mask
            while t[4 * i + 1] != k1 or t[4 * i] != k0:
                if t[4 * i + 1] == 0:
                    return -1
                i = (i + _ONE) & mask
            v = t[4 * i + 2]
            out[nout] = np.int64((v >> np.uint64(2)) & _M20)
            out[nout + 1] = np.int64((v >> np.uint64(22)) & _M20)
            out[nout + 2] = np.int64(v >> np.uint64(42))
            nout += np.int64(v & np.uint64(3))
        return nout

    @njit
    def seed_merged(dp, op, t, mask, t2, mask2, out):
        nout = 0
        nch = op.size - 1
        for k in range(nch):
            if k + 16 < nch:
                q0, q1 = keys(dp, op[k + 16], op[k + 17] - op[k + 16])
                h = row(q0, q1)
                prefetch(t, np.uint64(4) * (h & mask))
                prefetch(t2, np.uint64(4) * (h & mask2))
            k0, k1 = keys(dp, op[k], op[k + 1] - op[k])
            h = row(k0, k1)
            i = h & mask
            while t[4 * i + 1] != 0 and (t[4 * i + 1] != k1 or t[4 * i] != k0):
                i = (i + _ONE) & mask
            if t[4 * i + 1] != 0:
                out[nout] = np.int64((t[4 * i + 2] >> np.uint64(2)) & _M20)
                nout += 1
                continue
            i = h & mask2
            while t2[4 * i + 1] != k1 or t2[4 * i] != k0:
                if t2[4 * i + 1] == 0:
                    return -1
                i = (i + _ONE) & mask2
            v = t2[4 * i + 2]
            out[nout] = np.int64((v >> np.uint64(2)) & _M20)
            out[nout + 1] = np.int64((v >> np.uint64(22)) & _M20)
            out[nout + 2] = np.int64(v >> np.uint64(42))
            nout += np.int64(v & np.uint64(3))
        return nout

    return build, one_table, seed_merged


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="example: .venv/bin/python bench/_table_probe.py --tokenizer cl100k --corpus code")
    ap.add_argument("--tokenizer", default="gpt2", choices=["gpt2", "cl100k", "o200k"])
    ap.add_argument("--corpus", default="en", help="a folder of ../shared/corpora (en, zh, code)")
    ap.add_argument("--rounds", type=int, default=15)
    a = ap.parse_args()
    from _gap import _laid_out, _tools
    from tokenizer_speed import load_docs

    from tokenmill.tokenizer._cpython import utf8_joined
    from tokenmill.tokenizer.pretokenize.splitter import compiled_offsets

    build, one_table, seed_merged = _kernels()
    docs = load_docs(str(ROOT.parent / "shared" / "corpora" / a.corpus), 2)
    tok, _ = _tools(a.tokenizer)
    enc = tok._compiled()
    data, dd = utf8_joined(docs)
    offs = compiled_offsets(data, enc.pattern, doc_offsets=dd)
    b = bytes(data)
    parts = [b[offs[i]:offs[i + 1]] for i in range(offs.size - 1) if offs[i + 1] - offs[i] <= 15]
    none = np.zeros(0, np.int64)

    def key(c: bytes) -> tuple[int, int]:
        return (int.from_bytes(c[:8], "little"), int.from_bytes(c[8:], "little") | (len(c) << 56))

    vocab = {tok.token_bytes(i): i for i in range(tok.vocab_size)}
    seed = [(key(c), 1 | (i << 2)) for c, i in vocab.items() if 1 <= len(c) <= 15]
    merged = []
    for c in sorted(set(parts) - set(vocab)):
        ids = enc._run(c + b" " * 16, np.array([0, len(c)], np.int64), none, np.empty(0, np.int64))[:3]
        merged.append((key(c), len(ids) | sum(int(x) << (2 + 20 * t) for t, x in enumerate(ids))))

    def table(rows):
        return build(np.array([r[0][0] for r in rows], np.uint64), np.array([r[0][1] for r in rows], np.uint64),
                     np.array([r[1] for r in rows], np.uint64))

    (ts, ms), (tm, mm), (tu, mu) = table(seed), table(merged), table(seed + merged)
    d, o = _laid_out(parts, pad=16)
    db, out = d.tobytes(), np.empty(d.size + 16, np.int64)
    assert one_table(d, o, tu, mu, out) > 0 and seed_merged(d, o, ts, ms, tm, mm, out) > 0
    enc._run(db, o, none, np.empty(0, np.int64))
    R: dict = {"kernel": [], "one table": [], "seed + merged": []}
    for _ in range(a.rounds):
        t = time.perf_counter()
        enc._run(db, o, none, np.empty(0, np.int64))
        R["kernel"].append(time.perf_counter() - t)
        t = time.perf_counter()
        one_table(d, o, tu, mu, out)
        R["one table"].append(time.perf_counter() - t)
        t = time.perf_counter()
        seed_merged(d, o, ts, ms, tm, mm, out)
        R["seed + merged"].append(time.perf_counter() - t)
    print(f"{a.tokenizer} {a.corpus}: {len(parts):,d} chunks of 1-15 bytes; tables: seed {ts.nbytes / 1e6:.0f} MB, "
          f"merged {tm.nbytes / 1e6:.1f} MB, one {tu.nbytes / 1e6:.0f} MB; median of {a.rounds}:")
    print("  " + ", ".join(f"{k} {statistics.median(v) * 1e3:.2f} ms ({statistics.median(v) / len(parts) * 1e9:.1f} ns "
                           "a chunk)" for k, v in R.items()))


if __name__ == "__main__":
    main()
