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
