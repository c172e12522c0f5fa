"""numba kernels for encoding: BPE by rank per chunk, with a compiled whole-chunk cache.

* pair table: open addressing from ``left << 32 | right`` to the merge's priority (-1 empty). For
  tiktoken rank files and trained tokenizers the priority is the merged id (rank == id) and ``res``
  is empty; for imported merge lists (tokenizer.json) the priority is the merge's index in the list
  and ``res[priority]`` is the id it produces (ids anywhere in the model's id space);
* per chunk: tiktoken's scheme for short chunks (a rank per adjacent pair, rescanned for the min,
  neighbours updated after each merge) and, for long chunks, a heap over pair positions with linked
  neighbours, so a 10 MB run of one letter is O(n log n) instead of O(n^2);
* cache: chunk bytes -> token ids in a byte-keyed table. Rank-file tokenizers pin every vocabulary
  token in it first, which is exactly tiktoken's "a chunk that is a token maps to it" shortcut.
"""

from __future__ import annotations

import numpy as np
from .._jit import njit

from ._hashing import fnv1a, mix64, reindex

_CACHE_MAX_BYTES = 256  # longer chunks are encoded every time, never cached
_SMALL = 7  # chunks up to this many bytes go through the direct-mapped small-chunk table
_SHORT = 48  # chunks up to this many bytes use the rescanning loop; longer ones the heap
_BIG = np.int64(1) << 62


@njit(cache=True, nogil=True)
def build_pair_table(lefts, rights, merged):
    """Open-addressing table, one ``(key, merged id)`` row per slot: a lookup is one cache miss."""
    cap = 16
    while cap < 2 * lefts.size + 2:
        cap *= 2
    table = np.full((cap, 2), -1, np.int64)
    mask = cap - 1
    for k in range(lefts.size):
        key = (lefts[k] << 32) | rights[k]
        i = np.int64(mix64(key) & np.uint64(mask))
        while table[i, 0] != -1 and table[i, 0] != key:
            i = (i + 1) & mask
        table[i, 0] = key
        table[i, 1] = merged[k]
    return table


@njit(cache=True, nogil=True, inline="always")
def _rank(table, left, right):
    key = (np.int64(left) << 32) | np.int64(right)
    mask = table.shape[0] - 1
    i = np.int64(mix64(key) & np.uint64(mask))
    while True:
        k = table[i, 0]
        if k == key:
            return table[i, 1]
        if k == -1:
            return _BIG
        i = (i + 1) & mask


@njit(cache=True, nogil=True)
def _bpe_short(ids, n, table, ranks, byte_pairs, data, a, res):
    """Merge ``ids[:n]`` (the base ids of ``data[a:a+n]``) in place by rank, leftmost first on ties;
    returns the new length. The first ranks come from ``byte_pairs``, a dense 256 x 256 table of
    byte-pair ranks (256 KB, cache-resident): on text whose chunks are mostly new (Chinese under
    GPT-2's split) those first lookups were most of the time as hash-table cache misses."""
    for i in range(n - 1):
        ranks[i] = byte_pairs[(np.int64(data[a + i]) << 8) | np.int64(data[a + i + 1])]
    while n > 1:
        best = _BIG
        at = -1
        for i in range(n - 1):
            if ranks[i] < best:
                best = ranks[i]
                at = i
        if at < 0:
            break
        ids[at] = res[best] if res.size else best
        for i in range(at + 1, n - 1):
            ids[i] = ids[i + 1]
            ranks[i] = ranks[i + 1]
        n -= 1
        if at > 0:
            ranks[at - 1] = _rank(table, ids[at - 1], ids[at])
        if at < n - 1:
            ranks[at] = _rank(table, ids[at], ids[at + 1])
    return n


@njit(cache=True, nogil=True)
def _heap_push(h, n, v):
    i = n
    while i > 0:
        p = (i - 1) >> 1
        if h[p] <= v:
            break
        h[i] = h[p]
        i = p
    h[i] = v


@njit(cache=True, nogil=True)
def _heap_pop(h, n):
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


@njit(cache=True, nogil=True)
def _bpe_long(ids, n, table, res):
    """Heap-based merge of ``ids[:n]`` in place; entries ``rank << 32 | position``, checked on pop."""
    nxt = np.arange(1, n + 1)
    prv = np.arange(-1, n - 1)
    nxt[n - 1] = -1
    heap = np.empty(3 * n, np.int64)
    hn = 0
    for i in range(n - 1):
        r = _rank(table, ids[i], ids[i + 1])
        if r != _BIG:
            _heap_push(heap, hn, (r << 32) | i)
            hn += 1
    while hn > 0:
        top = heap[0]
        _heap_pop(heap, hn)
        hn -= 1
        r = top >> 32
        i = top & 0xFFFFFFFF
        j = nxt[i]
        if ids[i] < 0 or j < 0 or _rank(table, ids[i], ids[j]) != r:
            continue  # stale: a neighbour changed since this entry was queued
        nid = res[r] if res.size else r
        ids[i] = nid
        ids[j] = -1
        k = nxt[j]
        nxt[i] = k
        if k >= 0:
            prv[k] = i
            rk = _rank(table, nid, ids[k])
            if rk != _BIG:
                if hn == heap.size:
                    heap = np.concatenate((heap, np.empty(heap.size, np.int64)))
                _heap_push(heap, hn, (rk << 32) | i)
                hn += 1
        h = prv[i]
        if h >= 0:
            rh = _rank(table, ids[h], nid)
            if rh != _BIG:
                if hn == heap.size:
                    heap = np.concatenate((heap, np.empty(heap.size, np.int64)))
                _heap_push(heap, hn, (rh << 32) | h)
                hn += 1
    m = 0
    for i in range(n):
        if ids[i] >= 0:
            ids[m] = ids[i]
            m += 1
    return m


# ------------------------------------------------------------------------------ the chunk cache
@njit(cache=True, nogil=True)
def _find(ctab, c_start, c_len, c_hash, c_bytes, data, a, b, h):
    """Table slot holding chunk data[a:b], or the empty slot where it would go."""
    mask = ctab.size - 1
    i = np.int64(h & np.uint64(mask))
    n = b - a
    while True:
        e = ctab[i]
        if e == -1:
            return i
        if c_hash[e] == h and c_len[e] == n:
            s = c_start[e]
            same = True
            for t in range(n):
                if c_bytes[s + t] != data[a + t]:
                    same = False
                    break
            if same:
                return i
        i = (i + 1) & mask


@njit(cache=True, nogil=True)
def encode_chunks(data, offs, byte_ids, byte_pairs, table, res, state, limit, out):
    """Encode chunks ``data[offs[k]:offs[k+1]]`` into ``out`` (big enough: len(data) ids).

    ``state`` = (ctab, c_start, c_len, c_hash, c_bytes, c_ids_start, c_ids_len, c_ids, sizes, skeys,
    sids, seen) is the cache; ``skeys``/``sids``: the small-chunk table (key 0 = empty); ``seen``: hashes
    of chunks seen once (the admission filter); ``sizes`` = [entries, bytes used, ids used, pinned entries, pinned bytes, pinned ids].
    When the cache would exceed ``limit`` entries it is reset to its pinned part.
    Returns (number of ids written, state).
    """
    ctab, c_start, c_len, c_hash, c_bytes, c_ids_start, c_ids_len, c_ids, sizes, skeys, sids, seen = state
    nout = 0
    work = np.empty(_SHORT + 1, np.int64)
    ranks = np.empty(_SHORT + 1, np.int64)
    smask = skeys.size - 1
    for k in range(offs.size - 1):
        a = offs[k]
        b = offs[k + 1]
        n = b - a
        if n == 1:
            out[nout] = byte_ids[data[a]]
            nout += 1
            continue
        if n <= _SMALL:
            # Most chunks are short (zh: half are one 3-byte character; en: most words fit in 7
            # bytes). Their bytes and length pack into one 64-bit key for a small direct-mapped
            # table that stays in cache: one probe instead of the byte-keyed table's ~6 misses.
            key = np.uint64(n) << np.uint64(56)
            for t in range(n):
                key |= np.uint64(data[a + t]) << np.uint64(8 * t)
            slot = np.int64(mix64(np.int64(key & np.uint64(0x7FFFFFFFFFFFFFFF)) ^ np.int64(n)) & np.uint64(smask))
            if skeys[slot] == key:
                m = sids[slot, 0]
                for t in range(m):
                    out[nout + t] = sids[slot, 1 + t]
                nout += m
                continue
            h = fnv1a(data, a, b)
            e = ctab[_find(ctab, c_start, c_len, c_hash, c_bytes, data, a, b, h)]
            if e != -1:  # pinned vocabulary token (tiktoken's whole-chunk rule) or cached
                m = c_ids_len[e]
                s0 = c_ids_start[e]
                for t in range(m):
                    work[t] = c_ids[s0 + t]
            else:
                for t in range(n):
                    work[t] = byte_ids[data[a + t]]
                m = _bpe_short(work, n, table, ranks, byte_pairs, data, a, res)
            skeys[slot] = key
            sids[slot, 0] = m
            for t in range(m):
                sids[slot, 1 + t] = work[t]
                out[nout + t] = work[t]
            nout += m
            continue
        h = fnv1a(data, a, b)
        slot = _find(ctab, c_start, c_len, c_hash, c_bytes, data, a, b, h)
        e = ctab[slot]
        if e != -1:
            s = c_ids_start[e]
            for t in range(c_ids_len[e]):
                out[nout + t] = c_ids[s + t]
            nout += c_ids_len[e]
            continue
        # miss: run BPE
        if n <= _SHORT:
            for t in range(n):
                work[t] = byte_ids[data[a + t]]
            m = _bpe_short(work, n, table, ranks, byte_pairs, data, a, res)
            for t in range(m):
                out[nout + t] = work[t]
        else:
            big = np.empty(n, np.int64)
            for t in range(n):
                big[t] = byte_ids[data[a + t]]
            m = _bpe_long(big, n, table, res)
            for t in range(m):
                out[nout + t] = big[t]
        if n > _CACHE_MAX_BYTES:
            nout += m  # long chunks are rare and would bloat the cache
            continue
        # Admit a chunk on its second sighting only: where most chunks are new (Chinese under GPT-2's
        # split: 1.3 M distinct of 5.5 M) inserting each one cost more than the cache saved
        # (zh kernel 1.67 s with, 0.99 s without); repeated words (English) still get cached.
        fp = seen.size - 1
        fslot = np.int64(h & np.uint64(fp))
        if seen[fslot] != h:
            seen[fslot] = h
            nout += m
            continue
        # insert into the cache (reset to its pinned part when it holds ``limit`` entries)
        if sizes[0] + 1 > limit:
            _reset(ctab, c_hash, sizes)
        if (2 * (sizes[0] + 1) > ctab.size or sizes[0] + 1 > c_start.size
                or sizes[1] + n > c_bytes.size or sizes[2] + m > c_ids.size):
            ctab, c_start, c_len, c_hash, c_bytes, c_ids_start, c_ids_len, c_ids = _grow_cache(
                ctab, c_start, c_len, c_hash, c_bytes, c_ids_start, c_ids_len, c_ids, sizes, n, m)
        slot = _find(ctab, c_start, c_len, c_hash, c_bytes, data, a, b, h)
        e = sizes[0]
        ctab[slot] = e
        c_start[e] = sizes[1]
        c_len[e] = n
        c_hash[e] = h
        c_bytes[sizes[1] : sizes[1] + n] = data[a:b]
        c_ids_start[e] = sizes[2]
        c_ids_len[e] = m
        c_ids[sizes[2] : sizes[2] + m] = out[nout : nout + m]
        sizes[0] += 1
        sizes[1] += n
        sizes[2] += m
        nout += m
    return nout, (ctab, c_start, c_len, c_hash, c_bytes, c_ids_start, c_ids_len, c_ids, sizes, skeys, sids, seen)


@njit(cache=True, nogil=True)
def _reset(ctab, c_hash, sizes):
    """Drop every unpinned entry: rebuild the table from the pinned entries only."""
    reindex(ctab, c_hash, sizes[3])
    sizes[0] = sizes[3]
    sizes[1] = sizes[4]
    sizes[2] = sizes[5]


@njit(cache=True, nogil=True)
def _grow_cache(ctab, c_start, c_len, c_hash, c_bytes, c_ids_start, c_ids_len, c_ids, sizes, n, m):
    ne = sizes[0] + 1
    if ne > c_start.size:
        cap = 2 * c_start.size
        c_start = _grow1(c_start, cap)
        c_len = _grow1(c_len, cap)
        c_hash = _grow1(c_hash, cap)
        c_ids_start = _grow1(c_ids_start, cap)
        c_ids_len = _grow1(c_ids_len, cap)
    if sizes[1] + n > c_bytes.size:
        c_bytes = _grow1(c_bytes, max(2 * c_bytes.size, sizes[1] + n))
    if sizes[2] + m > c_ids.size:
        c_ids = _grow1(c_ids, max(2 * c_ids.size, sizes[2] + m))
    if 2 * ne > ctab.size:
        ctab = np.empty(2 * ctab.size, np.int64)
        reindex(ctab, c_hash, sizes[0])
    return ctab, c_start, c_len, c_hash, c_bytes, c_ids_start, c_ids_len, c_ids


@njit(cache=True, nogil=True)
def _grow1(a, cap):
    b = np.empty(cap, a.dtype)
    b[: a.size] = a
    return b


@njit(cache=True, nogil=True)
def pin_tokens(c_bytes, c_start, c_len, ctab, c_hash):
    """Fill hashes and the table for the pinned tokens laid out in ``c_bytes``."""
    for e in range(c_start.size):
        c_hash[e] = fnv1a(c_bytes, c_start[e], c_start[e] + c_len[e])
    reindex(ctab, c_hash, c_start.size)


@njit(cache=True, nogil=True)
def build_byte_pairs(byte_ids, table):
    """Rank of every pair of raw bytes (``_BIG`` where the two byte tokens do not merge)."""
    out = np.empty(65536, np.int64)
    for x in range(256):
        for y in range(256):
            out[(x << 8) | y] = _rank(table, byte_ids[x], byte_ids[y])
    return out
