"""Several window sizes over the same documents in one plan, with a ``scale`` column.

Small windows see local detail, large ones long-range context::

    tokens      0 ......................................................... N
    scale 512   [---][---][---][---][---][---][---][---] ...   stride 256
    scale 1024  [-------][-------][-------][-------] ...       stride 512
    scale 2048  [---------------][---------------] ...         stride 1024

Each scale is an ordinary :class:`SlidingWindows` with ``stride = max(1, floor(size * stride_ratio))``
and the shared options; rows are sorted by (scale, doc, start): the plans of the scales one after
the other, smallest window first, and ``scale`` holds the row's window size. ``score="new"`` applies within each scale (each scale is its own evaluation). The plan's
``stats`` add the scales up (each token counted once per scale; ``num_docs`` and ``empty_docs`` counted
once; ``short_docs`` summed, and said per scale by ``summary()``);
``scale_stats`` holds one :class:`PlanStats` per scale, and :func:`tokenmill.coverage_report`
gives the union over scales.

>>> plan = MultiScaleWindows([4, 8], stride_ratio=0.5).plan([16])
>>> plan.scale.tolist(), plan.start.tolist()
([4, 4, 4, 4, 4, 4, 4, 8, 8, 8], [0, 2, 4, 6, 8, 10, 12, 0, 4, 8])
"""

from __future__ import annotations

from dataclasses import fields, replace
from fractions import Fraction
from typing import Sequence

import numpy as np

from .._validate import check_float, check_int, check_rows
from ..errors import ConfigError
from .sliding import SlidingWindows, WindowPlan, as_lengths, sealed_columns


class MultiScaleWindows:
    """Sliding windows at several sizes; ``options`` are :class:`SlidingWindows` keywords."""

    def __init__(self, window_sizes: Sequence[int], stride_ratio: float = 0.5, **options):
        if isinstance(window_sizes, (str, bytes)) or not hasattr(window_sizes, "__iter__"):
            raise ConfigError(f"window_sizes={window_sizes!r} must be a list of window sizes, e.g. [512, 1024, 2048]")
        sizes = list(window_sizes)
        for w in sizes:  # exact: 4.5 is refused, not truncated (before the set below: [[4]] is not hashable)
            check_int(w, "window size", min=1, max=2**62)
        if not sizes:
            raise ConfigError("window_sizes is empty; pass at least one size, e.g. [512, 1024, 2048]")
        if len(set(sizes)) != len(sizes):
            raise ConfigError(f"window_sizes={sizes} repeats a size; each scale must be distinct")
        for bad in ("window_size", "stride"):
            if bad in options:
                raise ConfigError(f"{bad} is set per scale; pass window_sizes and stride_ratio instead")
        known = {f.name for f in fields(SlidingWindows)} - {"window_size", "stride"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ConfigError(f"MultiScaleWindows got unknown option(s) {', '.join(unknown)}; the shared options "
                              f"are SlidingWindows' keywords: {', '.join(sorted(known))}")
        self.stride_ratio = check_float(stride_ratio, "stride_ratio", min=1e-9, max=1e9)  # (0.5: half-window stride)
        # the ratio as written (0.7 is 7/10, not the double just below it, whose floor made 10 * 0.7 a stride
        # of 6); its shortest decimal form, which str gives for a Python or a numpy float; and a ratio within
        # 1e-12 of a fraction of denominator up to 1000 is that fraction (2/3 is the double 0.6666666666666666,
        # whose decimal form made 3 * 2/3 a stride of 1 and 300 * 2/3 one of 199)
        ratio = Fraction(str(stride_ratio))
        near = ratio.limit_denominator(1000)
        if abs(near - ratio) <= ratio * Fraction(1, 10**12):
            ratio = near
        strides = {}
        for w in sizes:  # floor(size * ratio) exactly (in floats, sizes past 2**53 came out one less)
            strides[w] = max(1, int(Fraction(int(w)) * ratio))
            if strides[w] > 2**62:
                raise ConfigError(f"stride_ratio={self.stride_ratio:g} makes window size {int(w):,d} step "
                                  f"{strides[w]:,d} tokens, beyond 2**62; use a smaller stride_ratio")
        self.scales = tuple(SlidingWindows(int(w), strides[w], **options) for w in sorted(sizes))

    def __repr__(self) -> str:
        return f"MultiScaleWindows({[s.window_size for s in self.scales]}, stride_ratio={self.stride_ratio})"

    def plan(self, doc_lengths, epoch: int = 0) -> WindowPlan:
        """One plan for all scales: counted first, then each scale fills its slice of the columns
        (no concatenation copy; at 73M windows that copy cost as much as the planning)."""
        lengths = as_lengths(doc_lengths)
        counts = [s.count_windows(lengths, epoch) for s in self.scales]
        check_rows(sum(counts), "the multi-scale plan", "use larger windows or strides")
        cols = {k: np.empty(sum(counts), np.int64) for k in ("doc", "start", "length", "target_start")}
        stats, a = [], 0
        for s, m in zip(self.scales, counts):
            view = {k: v[a:a + m] for k, v in cols.items()}
            got, st = s.place_windows(lengths, epoch, out=view if m else None)
            for k in cols:  # no-op when filled in place
                if got[k] is not view[k]:
                    view[k][...] = got[k]
            stats.append(st)
            a += m
        total = stats[0]
        for st in stats[1:]:
            total = total + st
        # documents counted once: the count and the empty ones (the same at every scale; summed, a plan of 2
        # documents said "3 empty"); those shorter than the window differ by scale: summed, said per scale
        total = replace(total, num_docs=int(lengths.size), empty_docs=stats[0].empty_docs)
        scale = np.repeat(np.array([s.window_size for s in self.scales], np.int64), counts)
        s0 = self.scales[0]
        return WindowPlan(**sealed_columns(cols), scale=scale, stats=total, bos=s0.bos, eos=s0.eos, positions=s0.positions,
                          score=s0.score, epoch=epoch, scale_stats=tuple(stats),
                          scale_sizes=tuple(s.window_size for s in self.scales))
