"""The gather kernels (compiled slice copies); ``_gather`` is their validating boundary and imports
this module on first use, so importing tokenmill loads no numba. numba checks no bounds here."""

from __future__ import annotations

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
