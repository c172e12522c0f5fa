"""Compiled gather for :meth:`WindowPlan.gather`; private to tokenmill.windows.

Copying many short slices is a loop with per-iteration work too small for Python (about 1 us of
interpreter overhead per window would cap W=512 uint16 windows near 1 GB/s); numpy fancy indexing
would build an int64 index per token (4x the bytes of uint16 ids). A numba loop of slice copies runs
at memory bandwidth. ``gather_rows_py`` is its readable twin; tests check they agree.
"""

from __future__ import annotations

import numpy as np


def gather_rows_py(tokens, src_start, lengths, out, pad_id) -> None:
    """Reference: ``out[i, :n] = tokens[s:s+n]``, the rest of the row ``pad_id``."""
    for i in range(src_start.shape[0]):
        s, n = int(src_start[i]), int(lengths[i])
        out[i, :n] = tokens[s:s + n]
        out[i, n:] = pad_id


_compiled = None


def _kernel():
    global _compiled
    if _compiled is None:
        from numba import njit

        @njit(cache=True, nogil=True)
        def gather(tokens, src_start, lengths, out, pad_id):
            width = out.shape[1]
            for i in range(src_start.shape[0]):
                s = src_start[i]
                n = lengths[i]
                row = out[i]
                row[:n] = tokens[s:s + n]
                for k in range(n, width):
                    row[k] = pad_id

        _compiled = gather
    return _compiled


def gather_rows(tokens, src_start, lengths, out, pad_id: int) -> None:
    """Fill ``out`` (B, W) with the windows; compiled on first use, ``gather_rows_py`` semantics."""
    if out.shape[0] == 0:
        return
    if out.shape[1] < (int(lengths.max()) if lengths.size else 0):
        raise ValueError("out is narrower than the longest window")
    tok = np.asarray(tokens)  # a memmap becomes a plain ndarray view (no copy), which numba types
    _kernel()(tok, np.ascontiguousarray(src_start, np.int64), np.ascontiguousarray(lengths, np.int64),
              out, out.dtype.type(pad_id))


# -- fused row fill for SlidingWindows.plan -----------------------------------------------------------
#
# The numpy path (sliding._fill_rows_numpy) makes ~12 whole-array passes and allocations over the
# rows; at 10M documents / 74M windows on a 2-core machine that measured 10-20 s, dominated by page
# faults on fresh 600 MB temporaries. One pass that writes the four columns and accumulates the
# coverage counts measured ~1-2 s. Same semantics, tested equal on random inputs.

_fill = None


def _fill_kernel():
    global _fill
    if _fill is None:
        from numba import njit

        @njit(cache=True, nogil=True)
        def fill(L, first, nfull, tail_start, keep_short, count, kept, row0, C, S, k, lead, score_new,
                 doc, start, length, tstart, acc):
            covered = 0
            unique = 0
            head = 0
            tail_unc = 0
            full = 0
            for d in range(L.shape[0]):
                kd = kept[d]
                if kd == 0:
                    continue
                r = row0[d]
                m = count[d]
                nf = nfull[d]
                prev = 0
                for i in range(kd):
                    j = i
                    if m > kd:
                        if k == 1:
                            j = 0
                        else:
                            num = i * (m - 1)
                            q = num // (k - 1)
                            rem = num - q * (k - 1)
                            if 2 * rem > k - 1 or (2 * rem == k - 1 and q % 2 == 1):
                                q += 1
                            j = q
                    if keep_short[d]:
                        s = 0
                        ln = L[d]
                    elif j < nf:
                        s = first[d] + j * S
                        ln = C
                        full += 1
                    else:
                        s = tail_start[d]
                        ln = L[d] - s
                    e = s + ln
                    ts = s + lead
                    if score_new and ts < prev:
                        ts = prev
                    if ts > e:
                        ts = e
                    doc[r + i] = d
                    start[r + i] = s
                    length[r + i] = ln
                    tstart[r + i] = ts
                    lo = s if s > prev else prev
                    if e > lo:
                        covered += e - lo
                    lo = ts if ts > prev else prev
                    if e > lo:
                        unique += e - lo
                    if i == 0:
                        head += s
                    prev = e
                tail_unc += L[d] - prev
            acc[0] = covered
            acc[1] = unique
            acc[2] = head
            acc[3] = tail_unc
            acc[4] = full

        _fill = fill
    return _fill


def fill_rows(L, first, nfull, tail_start, keep_short, count, kept, row0, C, S, k, lead, score_new):
    """Compiled twin of ``sliding._fill_rows_numpy``: the row columns and the coverage sums."""
    M = int(kept.sum())
    doc = np.empty(M, np.int64)
    start = np.empty(M, np.int64)
    length = np.empty(M, np.int64)
    tstart = np.empty(M, np.int64)
    acc = np.zeros(5, np.int64)
    i64 = lambda a: np.ascontiguousarray(a, np.int64)  # noqa: E731
    _fill_kernel()(i64(L), i64(first), i64(nfull), i64(tail_start), np.ascontiguousarray(keep_short, np.bool_),
                   i64(count), i64(kept), i64(row0), int(C), int(S), int(k), int(lead), bool(score_new),
                   doc, start, length, tstart, acc)
    return doc, start, length, tstart, acc
