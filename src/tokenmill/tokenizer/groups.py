"""How ``encode_batch`` spreads texts over kernel calls and threads, for every encoder: groups of
about ``GROUP_BYTES`` characters (at most ``GROUP_TEXTS`` texts), one kernel call each, so a small
document does not pay the kernels' per-call cost, and enough groups to keep every thread busy."""

from __future__ import annotations

GROUP_BYTES = 1 << 20  # characters of text per kernel call, at most
GROUP_TEXTS = 1024  # and texts per kernel call


def in_groups(texts, threads: int, group) -> list:
    """``group(lo, hi)`` (the results of ``texts[lo:hi]``, in order) over consecutive groups of
    ``texts``, on up to ``threads`` threads; the results of all texts, in order."""
    total = sum(len(t) if isinstance(t, str) else 0 for t in texts)
    per = GROUP_BYTES if threads == 1 else min(GROUP_BYTES, max(1 << 14, total // (4 * threads)))
    bounds, size = [0], 0
    for i, t in enumerate(texts):
        size += len(t) if isinstance(t, str) else 0
        if size >= per or i + 1 - bounds[-1] >= GROUP_TEXTS:
            bounds.append(i + 1)
            size = 0
    if bounds[-1] != len(texts):
        bounds.append(len(texts))
    spans = list(zip(bounds[:-1], bounds[1:]))
    if threads == 1 or len(spans) < 2:
        return [x for lo, hi in spans for x in group(lo, hi)]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(threads, len(spans))) as ex:
        return [x for part in ex.map(lambda s: group(*s), spans) for x in part]
