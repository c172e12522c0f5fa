"""A binary min-heap of int64 keys in a caller's buffer, for the merge loops of long chunks (BPE by rank,
``_encode_kernels._bpe_long``; SentencePiece, ``_sp_kernels._merge_long``): ``h[:n]`` holds the heap,
the caller keeps ``n`` and room for one more key before a push. Compiled with ``refcount=False``
(``_jit.njit``): they make no array, and ``h`` may be an array or a ``_wide.raw`` pointer."""

from __future__ import annotations

from ..._jit import njit


@njit(cache=True, nogil=True, refcount=False)
def heap_push(h, n, v):
    """Put ``v`` in the heap ``h[:n]`` (``h[n]`` must exist); the heap is then ``h[:n + 1]``."""
    i = n
    while i > 0:
        p = (i - 1) >> 1
        if h[p] <= v:
            break
        h[i] = h[p]
        i = p
    h[i] = v


@njit(cache=True, nogil=True, refcount=False)
def heap_pop(h, n):
    """Drop the least key ``h[0]`` of the heap ``h[:n]`` (``n >= 1``; the caller reads it first); the heap is
    then ``h[:n - 1]``."""
    n -= 1
    v = h[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and h[c + 1] < h[c]:
            c += 1
        if v <= h[c]:
            break
        h[i] = h[c]
        i = c
    if n > 0:
        h[i] = v
