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
    _kernel()(tok, src_start, lengths, out, out.dtype.type(pad))


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

_plan = None


def _plan_kernels():
    global _plan
    if _plan is None:
        from .._jit import njit

        @njit(cache=True, nogil=True)
        def doc_windows(n, off, C, S, tail):
            """(first start, full windows, tail start or -1) of one document of n >= C tokens."""
            f = min(off, n - C)
            nf = (n - C - f) // S + 1
            ts = -1
            if f + (nf - 1) * S + C < n:
                if tail == 0:
                    ts = n - C
                elif tail == 2 and f + nf * S < n:
                    ts = f + nf * S
            return f, nf, ts

        @njit(cache=True, nogil=True)
        def count(L, offs, C, S, tail, keep_short, k, kept):
            per_doc = offs.shape[0] > 1
            total = 0
            for d in range(L.shape[0]):
                n = L[d]
                m = 0
                if n >= C:
                    f, nf, ts = doc_windows(n, offs[d if per_doc else 0], C, S, tail)
                    m = nf + (ts >= 0)
                elif n > 0 and keep_short:
                    m = 1
                if k > 0 and m > k:
                    m = k
                kept[d] = m
                total += m
            return total

        @njit(cache=True, nogil=True)
        def fill(L, offs, C, S, tail, keep_short, k, lead, score_new, doc, start, length, tstart, acc):
            per_doc = offs.shape[0] > 1
            r = 0
            for d in range(L.shape[0]):
                n = L[d]
                if n == 0:
                    acc[10] += 1
                    continue
                if n < C:
                    acc[11] += 1
                    if not keep_short:
                        acc[12] += 1
                        acc[13] += n
                        continue
                    if r >= doc.shape[0]:
                        return False  # the columns are too short for this plan: nothing written past them
                    doc[r] = d
                    start[r] = 0
                    length[r] = n
                    acc[14] += 1
                    t0 = min(lead, n)
                    tstart[r] = t0
                    acc[0] += n
                    acc[1] += n - t0
                    acc[6] += 1
                    acc[7] += n
                    acc[8] += n - t0
                    r += 1
                    continue
                f, nf, ts = doc_windows(n, offs[d if per_doc else 0], C, S, tail)
                m = nf + (ts >= 0)
                kd = m
                if k > 0 and m > k:
                    kd = k
                    acc[9] += m - k
                if r + kd > doc.shape[0]:
                    return False
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
                    if j < nf:
                        s = f + j * S
                        ln = C
                        acc[4] += 1
                    else:
                        s = ts
                        ln = n - ts
                        acc[5] += 1
                    e = s + ln
                    t = s + lead
                    if score_new and t < prev:
                        t = prev
                    if t > e:
                        t = e
                    doc[r] = d
                    start[r] = s
                    length[r] = ln
                    tstart[r] = t
                    lo = s if s > prev else prev
                    if e > lo:
                        acc[0] += e - lo
                    lo = t if t > prev else prev
                    if e > lo:
                        acc[1] += e - lo
                    if i == 0:
                        acc[2] += s
                        if s == 0:
                            acc[14] += 1
                    acc[7] += ln
                    acc[8] += e - t
                    prev = e
                    r += 1
                acc[3] += n - prev
            return True

        _plan = (count, fill)
    return _plan


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
        M = count_rows(L, offset, C, S, tail, keep_short, k)
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
