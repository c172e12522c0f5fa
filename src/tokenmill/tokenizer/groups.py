"""How ``encode_batch`` spreads texts over kernel calls and threads, for every encoder: groups of
about ``GROUP_BYTES`` characters (at most ``GROUP_TEXTS`` texts), one kernel call each, so a small
document does not pay the kernels' per-call cost, and enough groups to keep every thread busy.

The threads are the calling thread and helpers from one process-wide pool kept between calls: an
encoder keeps its chunk cache per thread (several MB, allocated on a thread's first call), so threads
made for one call and dropped after it started every call on an empty cache (cl100k, two threads: a
fresh encoder warmed on 1 MB of other text 1.10-1.19x faster with the pool kept, the same 2 MB encoded
again 1.10-1.54x). The calling thread takes groups too, so a call never waits for a helper that has not
started (a call from inside a helper cannot deadlock). With several threads the groups are smaller
(1/(4 x threads) of the characters at most, a larger text alone) and taken largest first."""

from __future__ import annotations

import functools
import os
import threading

import numpy as np

GROUP_BYTES = 1 << 20  # characters of text per kernel call, at most
GROUP_TEXTS = 1024  # and texts per kernel call

_pool = None  # (process id, executor, helper threads)
_pool_lock = threading.Lock()


def _submit(n: int, fn) -> None:
    """``fn`` submitted ``n`` times to the process-wide executor of at least ``n`` helper threads (made again
    in a forked child, whose copy of the parent's has no threads; a larger one replaces a smaller one, whose
    threads exit when idle). Under the lock that replaces it: a call that had fetched the executor and
    submitted after another call replaced it (and shut it down) failed with "cannot schedule new futures
    after shutdown"; what was submitted before a replacement still runs."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid() or _pool[2] < n:
            from concurrent.futures import ThreadPoolExecutor

            if _pool is not None and _pool[0] == os.getpid():
                _pool[1].shutdown(wait=False)
            _pool = (os.getpid(), ThreadPoolExecutor(n, thread_name_prefix="tokenmill-encode"), n)
        for _ in range(n):
            _pool[1].submit(fn)


def batch_texts(texts, what: str = "encode_batch", items: bool = True) -> list:
    """``texts`` as a list of strs, or a ``ConfigError`` that says what is wrong: one str (which would be
    encoded character by character), something that is not an iterable, or (``items``; else the caller
    checks them, :func:`check_strs`) an item that is not a str, named by its place in the batch."""
    from .._validate import check_texts

    texts = list(check_texts(texts, what))
    if items:
        check_strs(texts, set(map(type, texts)) <= {str}, what)
    return texts


@functools.cache
def _cores() -> int:
    """``os.cpu_count()``, asked once (it reads the system's CPU list: ~18 us a call here, on every batch call)."""
    return max(1, os.cpu_count() or 1)


def batch_threads(num_threads) -> int:
    """``num_threads`` of a batch call: all cores when None, else an int in 1 .. 1,024."""
    from .._validate import check_int

    return _cores() if num_threads is None else check_int(num_threads, "num_threads", min=1, max=1024)


def batch_args(texts, num_threads, as_arrays, what: str = "encode_batch", items: bool = True) -> tuple[list, int, bool]:
    """``(texts, threads, as_arrays)`` of an ``encode_batch`` call, each checked (:func:`batch_texts`,
    :func:`batch_threads`; ``as_arrays`` True or False: "no" is truthy)."""
    from .._validate import check_bool

    return batch_texts(texts, what, items), batch_threads(num_threads), check_bool(as_arrays, "as_arrays")


def check_strs(texts: list, strs: bool, what: str = "encode_batch") -> None:
    """Raise a ``ConfigError`` naming the first of ``texts`` that is not a str, unless ``strs`` (all are)."""
    bad = None if strs else next(((i, t) for i, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        from ..errors import ConfigError

        raise ConfigError(f"text {bad[0]:,d} of the batch is not a str but {type(bad[1]).__name__}; {what} takes "
                          "strs (decode bytes first: data.decode('utf-8'))")


def text_sizes(texts) -> tuple[np.ndarray, bool]:
    """Each text's length in characters (int64; 0 for one that is not a str, which :func:`check_strs` refuses), and
    whether every text is a str; told by C loops where they all are (~1 us a text less than a Python loop:
    most of a batch of short texts' own work)."""
    if set(map(type, texts)) == {str}:
        return np.fromiter(map(len, texts), np.int64, len(texts)), True
    return np.fromiter((len(t) if isinstance(t, str) else 0 for t in texts), np.int64, len(texts)), False


def group_bounds(sizes: np.ndarray, per: int, most: int = GROUP_TEXTS) -> list[int]:
    """Where consecutive groups of texts of ``sizes`` characters start and end: ``[0, ..., len(sizes)]``, each
    group as many texts as fit in ``per`` characters (a longer text alone), up to ``GROUP_TEXTS``. Cut by a
    binary search per group over the running sizes (a loop over the texts was ~0.2 us a text: a tenth of
    a batch of short texts' encode)."""
    cum = np.cumsum(sizes)
    n = cum.size
    bounds = [0]
    while bounds[-1] < n:
        lo = bounds[-1]
        hi = int(np.searchsorted(cum, (int(cum[lo - 1]) if lo else 0) + per, side="right"))
        bounds.append(min(max(hi, lo + 1), lo + most, n))
    return bounds


def in_groups(texts, threads: int, group, sizes: np.ndarray | None = None, most: int = GROUP_TEXTS) -> list:
    """``group(lo, hi)`` (the results of ``texts[lo:hi]``, in order) over consecutive groups of
    ``texts``, on up to ``threads`` threads; the results of all texts, in order. An exception raised by
    a group is raised here: the one of the first failing group in text order, whatever the threads did
    (after a failure, the groups before it in text order still run, those after it are skipped).
    ``sizes``: :func:`text_sizes` of ``texts`` where the caller has them; ``most``: texts a group, at most."""
    if sizes is None:
        sizes = text_sizes(texts)[0]
    total = int(sizes.sum())
    per = GROUP_BYTES if threads == 1 else min(GROUP_BYTES, max(1 << 14, total // (4 * threads)))
    bounds = group_bounds(sizes, per, most)
    spans = list(zip(bounds[:-1], bounds[1:]))
    if threads == 1 or len(spans) < 2:
        return [x for lo, hi in spans for x in group(lo, hi)]
    cum = np.concatenate(([0], np.cumsum(sizes)))
    weight = [int(cum[hi] - cum[lo]) for lo, hi in spans]
    parts = in_parts(weight, threads, lambda k: group(*spans[k]))
    return [x for part in parts for x in part]


def in_parts(weights, threads: int, part) -> list:
    """``[part(k) for k in range(len(weights))]`` on up to ``threads`` threads (the calling one and the
    pool's helpers), the heaviest parts first, so the threads finish together (a large document taken
    last keeps one thread busy while the others wait: ~20% of a two-thread pass over code). Each
    result goes to its own place: the list is in ``k`` order. An exception is raised here: the one of
    the lowest failing ``k``, whatever the threads did (after a part fails, the parts before it still
    run, those after it are skipped)."""
    n = len(weights)
    if threads == 1 or n < 2:
        return [part(k) for k in range(n)]
    order = sorted(range(n), key=lambda k: -weights[k])
    results: list = [None] * n
    failed: list = [None] * n
    done = [threading.Event() for _ in range(n)]
    lock = threading.Lock()
    state = [0, n, False]  # next position in ``order``, first failed part, stop

    def drain():
        while True:
            with lock:
                j = state[0]
                if state[2] or j == n:
                    return
                state[0] = j + 1
                k = order[j]
                skip = k > state[1]  # after a part that failed: not needed
            if skip:
                done[k].set()
                continue
            try:
                results[k] = part(k)
            except BaseException as e:  # noqa: BLE001 (raised again by the caller, lowest k first)
                failed[k] = e
                with lock:
                    state[1] = min(state[1], k)
            finally:
                done[k].set()

    helpers = min(threads, n) - 1
    _submit(helpers, drain)
    try:
        drain()
    finally:
        with lock:  # parts not taken yet stay so; those a helper runs now are waited for
            stop_at = state[0]
            state[2] = True
        for j in range(stop_at):
            done[order[j]].wait()
    for e in failed:
        if e is not None:
            raise e
    return results


def flat_ids(arrays: list) -> tuple[np.ndarray, np.ndarray]:
    """``encode_flat``'s ``(ids, bounds)`` from ``encode_batch(..., as_arrays=True)``'s arrays: every id in one
    int64 array, text ``i``'s at ``ids[bounds[i]:bounds[i + 1]]`` (the tokenizers whose kernels do not write
    one flat array themselves)."""
    bounds = np.zeros(len(arrays) + 1, np.int64)
    np.cumsum(np.fromiter((a.size for a in arrays), np.int64, len(arrays)), out=bounds[1:])
    ids = np.concatenate(arrays).astype(np.int64, copy=False) if arrays else np.zeros(0, np.int64)
    return ids, bounds


def encode_flat_by_batch(self, texts, *, num_threads=None, allowed_special=(),
                         disallowed_special="all") -> tuple[np.ndarray, np.ndarray]:
    """``encode_batch``'s ids in one flat int64 array, with ``bounds`` (``len(texts) + 1``): text ``i``'s ids
    are ``ids[bounds[i]:bounds[i + 1]]``, as ``Tokenizer.encode_flat``: the ``encode_flat`` method of the
    tokenizers whose kernels do not write one flat array themselves (the SentencePiece families)."""
    return flat_ids(self.encode_batch(texts, num_threads=num_threads, as_arrays=True,
                                      allowed_special=allowed_special, disallowed_special=disallowed_special))
