"""The shard assembly kernel (a compiled pass over a job's ids); ``engines.assemble_ids`` is its validating
boundary and imports this module on first use, so importing tokenmill loads no numba. numba checks no
bounds here: the boundary checks every size first."""

from __future__ import annotations

import numpy as np

from .._jit import njit


@njit(cache=True, nogil=True)
def interleave(flat, lengths, bos, eos, vocab_size, out):
    """Copy the documents' ids ``flat`` (``lengths[d]`` ids each, back to back) into ``out`` (the store's dtype),
    each document preceded by ``bos`` and followed by ``eos`` where those are >= 0, checking every id against
    ``0 .. vocab_size - 1`` as it is copied (one unsigned compare, or-ed up: the loop stays one LLVM
    vectorizes): returns the first document holding an id outside that range (``out`` then incomplete), or -1
    (``out`` complete)."""
    limit = np.uint64(vocab_size)
    p = 0
    q = 0
    for d in range(lengths.size):
        if bos >= 0:
            out[q] = bos
            q += 1
        n = lengths[d]
        bad = False
        for i in range(n):
            v = flat[p + i]
            out[q + i] = v
            bad |= np.uint64(v) >= limit  # a negative id is a huge unsigned one
        if bad:
            return d
        p += n
        q += n
        if eos >= 0:
            out[q] = eos
            q += 1
    return -1
