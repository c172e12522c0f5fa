"""Hashing shared by the tokenizer's numba kernels (pair tables and byte-keyed chunk tables)."""

from __future__ import annotations

import numpy as np

from ..._jit import njit
from .._wide import load_u64


@njit(cache=True, nogil=True, inline="always")
def mix64(key):
    """Scramble a 64-bit key (murmur3's finalizer) so that structured keys spread over the table."""
    x = np.uint64(key)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xFF51AFD7ED558CCD)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xC4CEB9FE1A85EC53)
    x ^= x >> np.uint64(33)
    return x


@njit(cache=True, nogil=True, inline="always")
def fnv1a(data, a, b):
    """64-bit FNV-1a of the bytes ``data[a:b]``, then scrambled by ``mix64``.

    Tables index by the low bits. FNV-1a's low bits are weak: multiplying by its prime
    (2**40 + 0x1B3) carries only upward, so bit k of the hash depends on bits 0..k of the state alone,
    and short chunks of similar bytes (3-byte CJK characters) crowded into the same stretches of the
    table: linear probing then walked long chains (Chinese under Llama 3: about 1 us per chunk
    looked up). The final scramble spreads every input bit over the low bits."""
    h = np.uint64(0xCBF29CE484222325)
    for i in range(a, b):
        h ^= np.uint64(data[i])
        h *= np.uint64(0x100000001B3)
    return mix64(h)


_WORD_MUL = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, nogil=True, inline="always")
def words_hash(data, a, b):
    """A hash of the bytes ``data[a:b]`` (a contiguous uint8 array) read 8 at a time, then scrambled by
    ``mix64``: the byte-keyed chunk cache's key. Byte-at-a-time FNV-1a is a multiply that waits on the
    one before for every byte (~4 cycles a byte): a 40-byte run of indentation took longer to hash than
    a short chunk takes to look up. Here one multiply per 8 bytes; a chunk of 8 bytes or more reads
    its last word as the 8 bytes ending at ``b`` (shifted down past the bytes already read), so no
    load leaves ``[a, b)``; shorter chunks are gathered byte by byte. The length seeds the state."""
    n = b - a
    h = np.uint64(n) * _WORD_MUL
    if n >= 8:
        i = a
        while i + 8 <= b:
            h = (h ^ load_u64(data, i)) * _WORD_MUL
            i += 8
        if i < b:
            h = (h ^ (load_u64(data, b - 8) >> np.uint64(8 * (8 - (b - i))))) * _WORD_MUL
    else:
        w = np.uint64(0)
        for t in range(n):
            w |= np.uint64(data[a + t]) << np.uint64(8 * t)
        h = (h ^ w) * _WORD_MUL
    return mix64(h)


@njit(cache=True, nogil=True)
def reindex(table, hashes, count):
    """Fill ``table`` (power-of-two size) with entries ``0..count-1`` by ``hashes``, linear probing."""
    table[:] = -1
    mask = table.size - 1
    for e in range(count):
        i = np.int64(hashes[e] & np.uint64(mask))
        while table[i] != -1:
            i = (i + 1) & mask
        table[i] = e


@njit(cache=True, nogil=True)
def reindex_tagged(table, hashes, count):
    """``reindex`` whose slots hold ``tag << 32 | entry``, the tag being bits 32-62 of the entry's hash:
    a probe rejects a different key from the table alone, without reading the entry's hash."""
    reindex(table, hashes, count)
    for i in range(table.size):
        e = table[i]
        if e != -1:
            table[i] = (np.int64((hashes[e] >> np.uint64(32)) & np.uint64(0x7FFFFFFF)) << 32) | e
