"""The compiled planner passes of :class:`SlidingWindows`; private to tokenmill.windows. (The
gather of windows' ids is shared with the token store: :mod:`tokenmill._gather`.)"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError

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

def _args(L, offset, tail):
    from .._arrays import readonly
    from .._validate import check_array

    # (read-only views: one argument type for the kernels whatever the caller's flags; see document_lengths)
    L, = readonly(check_array(L, "doc_lengths", min=0))
    offs, = readonly(check_array(np.atleast_1d(np.asarray(offset)), "start offsets", min=0))
    if offs.shape[0] not in (1, L.shape[0]):
        raise ConfigError(f"start offsets: {offs.shape[0]:,d} values for {L.shape[0]:,d} documents; "
                          "pass one or one per document")
    return L, offs, {"align": ALIGN, "drop": DROP, "pad": PAD}[tail]


def count_rows(L, offset, C, S, tail: str, keep_short: bool, k: int) -> int:
    """Number of windows a plan will have (the first compiled pass alone)."""
    from . import _plan_kernels as K  # imported here: importing tokenmill.windows loads no numba

    L, offs, code = _args(L, offset, tail)
    return int(K.count(L, offs, int(C), int(S), code, bool(keep_short), int(k), np.empty(L.shape[0], np.int64)))


def plan_rows(L, offset, C, S, tail: str, keep_short: bool, k: int, lead: int, score_new: bool, out=None):
    """Compiled twin of ``sliding._place_numpy``: row columns and the ``ACC`` statistics.

    ``out``: preallocated int64 columns ``doc, start, length, target_start`` of exactly the right
    length (see :func:`count_rows`), e.g. slices of one multi-scale plan; else they are allocated.
    """
    from . import _plan_kernels as K
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
    ok = K.fill(L, offs, int(C), int(S), code, bool(keep_short), int(k), int(lead), bool(score_new), *cols, acc)
    stats = dict(zip(ACC, (int(a) for a in acc)))
    placed = stats["full"] + stats["tail"] + stats["short"]  # every window is one of these
    if not ok or placed != cols[0].size:  # (rows past the plan's would be whatever ``out`` held)
        raise ConfigError(f"out columns hold {cols[0].size:,d} rows, " + ("fewer than the plan's windows" if not ok
                          else f"the plan has {placed:,d} windows") + "; size them with count_windows")
    return out, stats
