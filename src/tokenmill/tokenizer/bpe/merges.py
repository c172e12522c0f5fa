"""The incremental BPE merge loop: exact, deterministic, O(occurrences of the merged pair) per merge.

Input: distinct chunks (byte strings) with 64-bit counts. All chunks are laid out in one flat
symbol array with doubly linked ``prev``/``next`` links; a chunk boundary is a missing link, so no
pair ever spans two chunks. A pair -> positions index lists where each pair starts (entries can go
stale; they are re-checked on use), and a heap keyed ``(-count, left, right)`` with lazy
invalidation picks the next merge: the highest count, ties to the smaller pair, exactly as
``reference.train_bpe_naive`` does with ``min(counts, key=lambda p: (-counts[p], p))``.

A merge touches only the positions where the pair occurs and their two neighbours, so the cost of
a merge is proportional to its number of occurrences, not to the length of the chunks holding it.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..._validate import check_array, check_int
from ...errors import ConfigError, InputError


@dataclass(frozen=True)
class MergeResult:
    """Learned merges in rank order: merge ``i`` joins ``pairs[i]`` into id ``256 + i``."""

    pairs: np.ndarray  # (M, 2) int64: left id, right id
    counts: np.ndarray  # (M,) int64: weighted occurrences when merged
    stop_reason: str  # "vocab_size", "no_pairs" or "min_frequency"


def learn_merges(
    chunks: Sequence[bytes],
    counts: Sequence[int],
    num_merges: int,
    **kw,
) -> MergeResult:
    """Learn up to ``num_merges`` merges over weighted distinct chunks (see ``learn_merges_arrays``).

    >>> r = learn_merges([b"abab", b"ab"], [1, 2], 2)
    >>> r.pairs.tolist(), r.counts.tolist()
    ([[97, 98], [256, 256]], [4, 1])
    """
    data = np.frombuffer(b"".join(chunks), dtype=np.uint8)
    lengths = np.fromiter((len(c) for c in chunks), dtype=np.int64, count=len(chunks))
    return learn_merges_arrays(data, lengths, np.asarray(counts, dtype=np.int64), num_merges, **kw)


def learn_merges_arrays(
    data: np.ndarray,
    lengths: np.ndarray,
    counts: np.ndarray,
    num_merges: int,
    *,
    min_frequency: int = 1,
    max_token_bytes: int | None = None,
    on_merge: Callable[[int], None] | None = None,
    backend: str = "numba",
) -> MergeResult:
    """Learn merges over distinct chunks laid end to end in ``data`` (uint8) with ``lengths`` and
    ``counts`` (int64, one per chunk). The order of the chunks does not change the result.

    ``backend="numba"`` runs the compiled kernel (``_train_kernels``); ``"python"`` runs the readable
    twin below. Both give identical results (tested).
    """
    if backend not in ("numba", "python"):
        raise ConfigError(f"backend={backend!r}; use 'numba' or 'python'")
    data, lengths, counts = _checked(data, lengths, counts)
    requested = check_int(num_merges, "num_merges", min=0)
    min_frequency = check_int(min_frequency, "min_frequency", min=1)
    max_token_bytes = check_int(max_token_bytes, "max_token_bytes", min=2, none=True)
    # Each merge removes at least one symbol from a chunk of two or more, so no more than
    # (symbols - non-empty chunks) merges can exist: cap the request there, so that the work and
    # memory (per-merge arrays) are bounded by the input, not by a huge vocab_size.
    num_merges = min(requested, int(lengths.sum()) - int((lengths > 0).sum()))
    if backend == "numba":
        result = _learn_compiled(_rows(data, lengths, counts), num_merges, min_frequency, max_token_bytes, on_merge)
    else:
        result = _learn_python(data, lengths, counts, num_merges, min_frequency, max_token_bytes, on_merge)
    if num_merges < requested and result.stop_reason == "vocab_size":
        result = MergeResult(result.pairs, result.counts, "no_pairs")  # every chunk is one token
    return result


def _learn_python(data, lengths, counts, num_merges, min_frequency, max_token_bytes, on_merge) -> MergeResult:
    """The readable twin of the compiled merge loop."""
    sym, nxt, prv, weight = _layout(data, lengths, counts)
    pair_count: dict[tuple[int, int], int] = defaultdict(int)
    where: dict[tuple[int, int], list[int]] = defaultdict(list)
    for p in np.flatnonzero(nxt >= 0).tolist():
        pair = (int(sym[p]), int(sym[p + 1]))
        pair_count[pair] += int(weight[p])
        where[pair].append(p)
    heap = [(-c, a, b) for (a, b), c in pair_count.items()]
    heapq.heapify(heap)
    token_len = [1] * 256
    pairs: list[tuple[int, int]] = []
    merged_counts: list[int] = []
    sym_l, nxt_l, prv_l, w_l = sym.tolist(), nxt.tolist(), prv.tolist(), weight.tolist()
    stop = "vocab_size"
    while len(pairs) < num_merges:
        best = _pop_best(heap, pair_count, token_len, max_token_bytes)
        if best is None:
            stop = "no_pairs"
            break
        (a, b), c = best
        if c < min_frequency:
            stop = "min_frequency"
            break
        z = 256 + len(pairs)
        _apply_merge(a, b, z, where.pop((a, b)), sym_l, nxt_l, prv_l, w_l, pair_count, where, heap)
        token_len.append(token_len[a] + token_len[b])
        pairs.append((a, b))
        merged_counts.append(c)
        if on_merge is not None:
            on_merge(1)
    return MergeResult(
        np.asarray(pairs, dtype=np.int64).reshape(-1, 2),
        np.asarray(merged_counts, dtype=np.int64),
        stop,
    )


def _checked(data, lengths, counts):
    """The kernel's boundary: uint8 data, lengths >= 0 that add up to ``data.size``, counts >= 0."""
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 1:
        raise ConfigError("data must be a 1-D uint8 array of the chunks' bytes laid end to end")
    lengths = check_array(lengths, "lengths", min=0, error=ConfigError)
    counts = check_array(counts, "counts", min=0, shape=lengths.shape, error=ConfigError)
    total = int(lengths.sum(dtype=np.float64)) if lengths.size else 0
    if total != data.size or (lengths.size and int(lengths.sum()) != data.size):
        raise ConfigError(f"lengths add up to {total:,d} bytes but data holds {data.size:,d}; "
                          "they must describe the same chunks")
    # every pair count is at most the sum of count x (length - 1) over the chunks: past 2**62 the kernel's int64
    # counts could wrap negative (no merges, "min_frequency"), where the Python twin raised an OverflowError
    pairs = float(np.dot(counts.astype(np.float64), np.maximum(lengths - 1, 0).astype(np.float64)))
    if pairs > 2**62:
        raise ConfigError(f"counts x chunk lengths add up to {pairs:.3g} pairs, more than the merge loop counts "
                          f"exactly ({2**62:,d}); pass each chunk's number of occurrences")
    return np.ascontiguousarray(data), lengths, counts


def _layout(data: np.ndarray, lengths: np.ndarray, counts: np.ndarray):
    """Flat symbols with links; -1 marks a chunk end (next) or start (prev)."""
    total = int(lengths.sum())
    sym = data[:total].astype(np.int64)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    idx = np.arange(total, dtype=np.int64)
    nxt, prv = idx + 1, idx - 1
    nonempty = lengths > 0
    nxt[ends[nonempty] - 1] = -1
    prv[starts[nonempty]] = -1
    weight = np.repeat(counts, lengths)
    return sym, nxt, prv, weight


def _pop_best(heap, pair_count, token_len, max_token_bytes):
    """Pop the valid top of the lazy heap: ((a, b), count), or None when no pair is left."""
    while heap:
        neg, a, b = heap[0]
        cur = pair_count.get((a, b), 0)
        if cur == -neg:
            if max_token_bytes is not None and token_len[a] + token_len[b] > max_token_bytes:
                heapq.heappop(heap)
                del pair_count[(a, b)]  # never mergeable: forget it for good
                continue
            heapq.heappop(heap)
            return (a, b), cur
        heapq.heappop(heap)
        if 0 < cur < -neg:  # stale high entry: re-queue at the true count
            heapq.heappush(heap, (-cur, a, b))
        # cur > -neg: a fresher, higher entry is still queued; cur == 0: pair is gone
    return None


def _apply_merge(a, b, z, positions, sym, nxt, prv, w, pair_count, where, heap):
    """Merge every live occurrence of (a, b) left to right, updating neighbour pair counts."""
    grown: set[tuple[int, int]] = set()

    def add(pair, c, pos):
        pair_count[pair] += c
        where[pair].append(pos)
        grown.add(pair)

    def sub(pair, c):
        left = pair_count[pair] - c
        if left:
            pair_count[pair] = left
        else:
            del pair_count[pair]

    for p in sorted(set(positions)):
        q = nxt[p]
        if sym[p] != a or q < 0 or sym[q] != b:
            continue  # stale entry: this occurrence was consumed by an earlier merge
        c, left, right = w[p], prv[p], nxt[q]
        if left >= 0:
            sub((sym[left], a), c)
            add((sym[left], z), c, left)
        if right >= 0:
            sub((b, sym[right]), c)
            add((z, sym[right]), c, p)
        sym[p], sym[q] = z, -1
        nxt[p] = right
        if right >= 0:
            prv[right] = p
    pair_count.pop((a, b), None)  # every occurrence is merged; none can remain
    for pair in grown:
        c = pair_count.get(pair, 0)
        if c:
            heapq.heappush(heap, (-c, pair[0], pair[1]))


_STOP = ("vocab_size", "no_pairs", "min_frequency", "interrupted")


def _rows(data: np.ndarray, lengths: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The kernel's (n, 5) rows (symbol, next, prev, weight, pair slot) built column by column.

    int32 rows (20 bytes per symbol) unless a chunk count needs 64 bits (numba compiles one
    specialization per dtype). Built without int64 temporaries: on zh (25.6 M symbols) the four
    int64 arrays of ``_layout`` were 820 MB on top of the rows and pushed a 1 GB stream to 2.6 GB.
    """
    total = int(lengths.sum())
    if total >= 2**31 - 1:
        raise InputError(f"{total:,d} bytes of distinct chunks exceed the 2 GiB the kernel indexes; sample the corpus")
    small = counts.size == 0 or int(counts.max()) < 2**31 - 1
    dt = np.int32 if small else np.int64
    rec = np.empty((total, 5), dtype=dt)
    ends = np.cumsum(lengths)
    nonempty = lengths > 0
    rec[:, 0] = data[:total]
    rec[:, 1] = np.arange(1, total + 1, dtype=dt)
    rec[ends[nonempty] - 1, 1] = -1
    rec[:, 2] = np.arange(-1, total - 1, dtype=dt)
    rec[(ends - lengths)[nonempty], 2] = -1
    rec[:, 3] = np.repeat(counts.astype(dt), lengths)
    return rec


def _learn_compiled(rec, num_merges, min_frequency, max_token_bytes, on_merge):
    """Run the compiled merge loop on a thread of its own while this thread turns its progress counter into
    bar updates and stays interruptible: Ctrl-C (or any exception here) asks the loop to stop at its next
    merge and is raised once it has. (Run on this thread, the loop had held Ctrl-C until its last merge: on
    a large corpus the rest of the run.)"""
    import threading

    from . import _train_kernels

    progress = np.zeros(2, np.int64)  # merges done, stop asked
    result: list = []
    done = threading.Event()  # (waited on, not Thread.join: Ctrl-C inside join(timeout) marks a thread still
    # running as stopped on CPython 3.10-3.12, and a join after it returned at once, the loop still merging)

    def work():
        try:
            result.append(_train_kernels.learn_merges_kernel(rec, num_merges, min_frequency, max_token_bytes or 0,
                                                             progress))
        except BaseException as e:  # noqa: BLE001  (raised again on the calling thread)
            result.append(e)
        finally:
            done.set()

    threading.Thread(target=work, name="tokenmill-merges", daemon=True).start()
    shown = 0
    try:
        finished = False
        while not finished:
            finished = done.wait(0.2)
            now = int(progress[0])
            if on_merge is not None and now > shown:
                on_merge(now - shown)
                shown = now
    except BaseException:
        progress[1] = 1
        done.wait()
        raise
    if isinstance(result[0], BaseException):
        raise result[0]
    pairs, counts, stop = result[0]
    return MergeResult(pairs, counts, _STOP[stop])
