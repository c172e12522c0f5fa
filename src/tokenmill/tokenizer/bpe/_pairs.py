"""The merge tables the BPE and SentencePiece kernels share: an open-addressing table of pairs
``(left << 32 | right) -> value`` (``pair_table``; the value ``rank << 32 | merged id``) and a blocked
Bloom filter over int64 keys (``key_filter``: two bits in one 64-bit word per key, 8 to 16 bits a key),
both hashed by ``pair_hash`` (Fibonacci hashing, one multiply: its high half picks the table slot and
the filter word, bits 52-63 the filter's two bits). The lookups stay in each kernel, written for how it
holds the tables (``_encode_kernels._rank_at`` on flat pointers, ``_sp_kernels._pair`` on the arrays)."""

from __future__ import annotations

import numpy as np

from ..._jit import njit

_FIB = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, nogil=True, inline="always")
def pair_hash(key):
    """Fibonacci hashing of an int64 key (murmur's finalizer was a fifth of the merge loop's time)."""
    return np.uint64(key) * _FIB


@njit(cache=True, nogil=True)
def pair_table(lefts, rights, values):
    """One ``(left << 32 | right, value)`` row per slot, ``-1`` keys empty, a power of two rows, load at
    most 2/3 (Llama 3's 280k merges: 8 MB instead of 16 MB; the merge loop of Chinese text is bound by
    these reads); a pair given twice keeps its last value."""
    cap = 16
    while 2 * cap < 3 * lefts.size + 2:
        cap *= 2
    table = np.full((cap, 2), -1, np.int64)
    mask = cap - 1
    for k in range(lefts.size):
        key = (lefts[k] << 32) | rights[k]
        i = np.int64((pair_hash(key) >> np.uint64(32)) & np.uint64(mask))
        while table[i, 0] != -1 and table[i, 0] != key:
            i = (i + 1) & mask
        table[i, 0] = key
        table[i, 1] = values[k]
    return table


@njit(cache=True, nogil=True)
def key_filter(keys):
    """A blocked Bloom filter over the int64 ``keys``: a power of two words (at least 64), 8 to 16 bits a
    key; no key in it is ever answered "absent"."""
    words = 64
    while words * 8 < keys.size:
        words *= 2
    filt = np.zeros(words, np.uint64)
    wmask = np.uint64(words - 1)
    for k in range(keys.size):
        h = pair_hash(keys[k])
        filt[np.int64((h >> np.uint64(32)) & wmask)] |= (np.uint64(1) << (h >> np.uint64(58))) | (
            np.uint64(1) << ((h >> np.uint64(52)) & np.uint64(63)))
    return filt


@njit(cache=True, nogil=True)
def table_filter(table):
    """``key_filter`` over the keys a ``pair_table`` holds."""
    return key_filter(table[:, 0][table[:, 0] != -1])
