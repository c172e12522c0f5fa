"""The gather kernels (compiled slice copies); ``_gather`` is their validating boundary and imports
this module on first use, so importing tokenmill loads no numba. numba checks no bounds here."""

from __future__ import annotations

import numpy as np

from ._jit import njit


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


@njit(cache=True, nogil=True)
def gather_segments(tokens, src, length, dst, out):
    for k in range(src.size):
        s = src[k]
        d = dst[k]
        for j in range(length[k]):
            out[d + j] = tokens[s + j]


@njit(cache=True, nogil=True)
def concat_pieces(blob, starts, missing, ids):
    # (the bytes of pieces ids[0], ids[1], ...; -1), or (nothing; k) where ids[k] names no piece: every id
    # is checked against ``missing``'s size before it indexes anything
    n = missing.size
    total = 0
    for k in range(ids.size):
        i = ids[k]
        if i < 0 or i >= n or missing[i]:
            return np.empty(0, np.uint8), k
        total += starts[i + 1] - starts[i]
    out = np.empty(total, np.uint8)
    d = 0
    for k in range(ids.size):
        i = ids[k]
        s = starts[i]
        e = starts[i + 1]
        for j in range(s, e):
            out[d] = blob[j]
            d += 1
    return out, -1
