"""Compiled gather for :meth:`WindowPlan.gather`; private to tokenmill.windows.

Copying many short slices is a loop with per-iteration work too small for Python (about 1 us of
interpreter overhead per window would cap W=512 uint16 windows near 1 GB/s); numpy fancy indexing
would build an int64 index per token (4x the bytes of uint16 ids). A numba loop of slice copies runs
at memory bandwidth. ``gather_rows_py`` is its readable twin; tests check they agree.
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError, InputError


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
        from .._jit import njit

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
    """Fill ``out`` (B, W) with the windows; compiled on first use, ``gather_rows_py`` semantics.

    The kernel's boundary: every window must lie inside ``tokens``, ``out`` must have a row per
    window and room for the longest one, and its dtype must hold every token id and ``pad_id``
    exactly (numba would truncate in silence).
    """
    from .._validate import check_array, check_int, check_out, check_spans

    tok = np.asarray(tokens)  # a memmap becomes a plain ndarray view (no copy), which numba types
    if tok.ndim != 1 or (tok.size and tok.dtype.kind not in "iu"):
        raise InputError(f"tokens has shape {tok.shape} and dtype {tok.dtype}; pass a flat 1-D integer array")
    src_start = check_array(src_start, "src_start")
    lengths = check_array(lengths, "lengths", shape=src_start.shape)
    check_spans(src_start, lengths, tok.size, "windows")
    width = int(lengths.max()) if lengths.size else 0
    out = check_out(out, "out", shape=(src_start.size, width))
    if tok.size and not np.can_cast(tok.dtype, out.dtype, "safe"):
        raise ConfigError(f"out has dtype {out.dtype}, which cannot hold every {tok.dtype} token id; "
                          f"pass out with dtype {tok.dtype} (or wider)")
    info = np.iinfo(out.dtype)
    pad = check_int(pad_id, "pad_id", min=int(info.min), max=int(info.max))
    if src_start.size == 0:
        return
    if out.shape[0] > src_start.size:  # only the first rows are written
        out = out[: src_start.size]
    if tok.size == 0:
        tok = np.zeros(1, out.dtype)  # every window is empty; the kernel reads nothing
    kernel = _kernel()
    if _python_first(kernel, out.size):
        gather_rows_py(tok, src_start, lengths, out, pad)
        return
    kernel(tok, src_start, lengths, out, out.dtype.type(pad))


# A first run (the gather not compiled yet) fills up to this many positions in all with the Python
# twin (one slice copy per window) instead of compiling (~1 s per dtype pair).
FIRST_RUN_PYTHON_POSITIONS = 1 << 22


def _python_first(kernel, positions: int) -> bool:
    from .._jit import python_first

    return python_first("windows gather", kernel, positions, FIRST_RUN_PYTHON_POSITIONS)


# -- the whole plan in two compiled passes ---------------------------------------------------------
#
# The numpy path (sliding._place_numpy) makes ~30 whole-array passes over the documents and rows;
# at 10M documents / 39M windows on a loaded 2-core machine that measured 10-20 s, dominated by
# allocating and page-faulting fresh temporaries. Two passes over the documents (count, then
# write the four row columns while summing the statistics) measured ~1-2 s. Same semantics; tests
# check the two paths are equal on random inputs.

ALIGN, DROP, PAD = 0, 1, 2
# acc layout: the statistics summed by the fill pass
ACC = ("covered", "unique", "head", "tail_unc", "full", "tail", "short", "window_tokens", "target_tokens",
       "capped", "empty", "short_docs", "short_dropped", "unc_short", "first_covered")

def _plan_kernels():
    from . import _plan_kernels as K  # lazily: importing tokenmill.windows loads no numba

    return K.count, K.fill


def _args(L, offset, tail):
    from .._validate import check_array

    L = check_array(L, "doc_lengths", min=0)
    offs = check_array(np.atleast_1d(np.asarray(offset)), "start offsets", min=0)
    if offs.shape[0] not in (1, L.shape[0]):
        raise ConfigError(f"start offsets: {offs.shape[0]:,d} values for {L.shape[0]:,d} documents; "
                          "pass one or one per document")
    return L, offs, {"align": ALIGN, "drop": DROP, "pad": PAD}[tail]


def count_rows(L, offset, C, S, tail: str, keep_short: bool, k: int) -> int:
    """Number of windows a plan will have (the first compiled pass alone)."""
    count, _ = _plan_kernels()
    L, offs, code = _args(L, offset, tail)
    return int(count(L, offs, int(C), int(S), code, bool(keep_short), int(k), np.empty(L.shape[0], np.int64)))


def plan_rows(L, offset, C, S, tail: str, keep_short: bool, k: int, lead: int, score_new: bool, out=None):
    """Compiled twin of ``sliding._place_numpy``: row columns and the ``ACC`` statistics.

    ``out``: preallocated int64 columns ``doc, start, length, target_start`` of exactly the right
    length (see :func:`count_rows`), e.g. slices of one multi-scale plan; else they are allocated.
    """
    _, fill = _plan_kernels()
    if out is None:
        from .._validate import check_rows

        M = check_rows(count_rows(L, offset, C, S, tail, keep_short, k), "the window plan",
                       "raise the window size or stride, or pass max_windows_per_doc")
        out = {name: np.empty(M, np.int64) for name in ("doc", "start", "length", "target_start")}
    L, offs, code = _args(L, offset, tail)
    cols = [out[name] for name in ("doc", "start", "length", "target_start")]
    if any(not isinstance(c, np.ndarray) or c.dtype != np.int64 or c.ndim != 1 or not c.flags.writeable
           or c.shape != cols[0].shape for c in cols):
        raise ConfigError("out columns must be writeable 1-D int64 arrays of one length")
    acc = np.zeros(len(ACC), np.int64)
    ok = fill(L, offs, int(C), int(S), code, bool(keep_short), int(k), int(lead), bool(score_new), *cols, acc)
    if not ok:
        raise ConfigError(f"out columns hold {cols[0].size:,d} rows, fewer than the plan's windows; "
                          "size them with count_rows")
    return out, dict(zip(ACC, (int(a) for a in acc)))
