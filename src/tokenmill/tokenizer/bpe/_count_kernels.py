"""numba kernels for counting distinct chunks: a byte-keyed open-addressing hash table.

State (owned by ``train.ChunkCounter``): ``arena`` holds each distinct chunk's bytes once, entry ``e``
at ``arena[start[e]:start[e] + length[e]]`` with a 64-bit ``count[e]`` and its FNV-1a ``hash[e]``;
``table`` maps hash slots to entries (-1 empty), load factor <= 1/2.
"""

from __future__ import annotations

import numpy as np

from ..._jit import njit
from ._hashing import fnv1a, reindex


@njit(cache=True, nogil=True)
def _same(arena, start, data, a, n):
    for i in range(n):
        if arena[start + i] != data[a + i]:
            return False
    return True


@njit(cache=True, nogil=True)
def _rehash(table, hashes, nent, new_cap):
    t = np.empty(new_cap, np.int64)
    reindex(t, hashes, nent)
    return t


@njit(cache=True, nogil=True)
def _grow(a, need):
    b = np.empty(max(2 * a.size, need), a.dtype)
    b[: a.size] = a
    return b


@njit(cache=True, nogil=True)
def count_into(data, offs, weight, arena, starts, lens, counts, hashes, table, sizes):
    """Add chunks ``data[offs[k]:offs[k+1]]`` (each with ``weight``) into the table.

    ``sizes``: int64[2] = (entries, arena bytes), updated in place. Returns the (possibly grown)
    arrays ``arena, starts, lens, counts, hashes, table``.
    """
    nent = sizes[0]
    narena = sizes[1]
    for k in range(offs.size - 1):
        a = offs[k]
        b = offs[k + 1]
        n = b - a
        h = fnv1a(data, a, b)
        mask = table.size - 1
        i = np.int64(h & np.uint64(mask))
        while True:
            e = table[i]
            if e == -1:
                break
            if hashes[e] == h and lens[e] == n and _same(arena, starts[e], data, a, n):
                break
            i = (i + 1) & mask
        if e != -1:
            counts[e] += weight
            continue
        # new entry
        if nent == starts.size:
            starts = _grow(starts, nent + 1)
            lens = _grow(lens, nent + 1)
            counts = _grow(counts, nent + 1)
            hashes = _grow(hashes, nent + 1)
        if narena + n > arena.size:
            arena = _grow(arena, narena + n)
        arena[narena : narena + n] = data[a:b]
        starts[nent] = narena
        lens[nent] = n
        counts[nent] = weight
        hashes[nent] = h
        table[i] = nent
        nent += 1
        narena += n
        if 2 * nent > table.size:
            table = _rehash(table, hashes, nent, 2 * table.size)
    sizes[0] = nent
    sizes[1] = narena
    return arena, starts, lens, counts, hashes, table


@njit(cache=True, nogil=True)
def merge_into(arena, starts, lens, counts, hashes, table, sizes, o_arena, o_starts, o_lens, o_counts, o_n):
    """Add another table's ``o_n`` entries (with their counts) into this one."""
    offs = np.empty(2, np.int64)
    for e in range(o_n):
        offs[0] = o_starts[e]
        offs[1] = o_starts[e] + o_lens[e]
        arena, starts, lens, counts, hashes, table = count_into(
            o_arena, offs, o_counts[e], arena, starts, lens, counts, hashes, table, sizes)
    return arena, starts, lens, counts, hashes, table
