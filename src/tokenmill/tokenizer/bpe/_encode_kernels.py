"""numba kernels for encoding: BPE by rank per chunk, with a compiled whole-chunk cache.

* pair table: open addressing from ``left << 32 | right`` to ``priority << 32 | merged id`` (-1
  empty), with a blocked Bloom filter in front that answers most non-merges from cache. For tiktoken
  rank files and trained tokenizers the priority is the merged id (rank == id); for imported merge
  lists (tokenizer.json) it is the merge's index in the list and the id is ``res[priority]`` (ids
  anywhere in the model's id space);
* per chunk: tiktoken's scheme for short chunks (a rank per adjacent pair, rescanned for the min,
  neighbours updated after each merge) and, for long chunks, a heap over pair positions with linked
  neighbours, so a 10 MB run of one letter is O(n log n) instead of O(n^2);
* cache: chunk bytes -> token ids in a byte-keyed table. Rank-file tokenizers (and tokenizer.json
  with ignore_merges) pin in it the tokens BPE does not reach from their own bytes: with BPE finding
  the others, that is exactly tiktoken's "a chunk that is a token maps to it" rule.
"""

from __future__ import annotations

import numpy as np

from ..._intrinsics import prefetch
from ..._jit import njit
from .._wide import ix, load_u64, raw
from ._hashing import reindex_tagged, words_hash
from ._heap import heap_pop, heap_push
from ._pairs import pair_hash, pair_table, table_filter

_CACHE_MAX_BYTES = 256  # longer chunks are encoded every time, never cached
_SMALL = 7  # chunks up to this many bytes have a one-word key (vtab, small-chunk table); up to 15 bytes, two
_SHORT = 48  # chunks up to this many bytes use the rescanning loop; longer ones the heap
_BIG = np.int64(1) << 62
# chunks between the prefetch of a chunk's table rows and their use: two rows a chunk (the seed's and
# the merged table's) 16 chunks ahead left the loop stalled at its prefetches (sampled, cl100k code
# warm: 10% of the kernel's samples right after one); 24: the kernel on text seen again 1.02-1.16x on
# English, 0.89-1.14x on code, Chinese unchanged (three paired runs against 16; 10 was 0.89-1.01x)
_AHEAD = 24
_WAYS = 4  # rows per bucket of the small-chunk table (64 bytes of keys: one cache line)
_M20 = np.uint64((1 << 20) - 1)  # an id of a word-table entry of two or three ids: 20 bits each
_IN_CTAB = 8  # a small-table row's id count meaning "more ids than a row holds: in the byte-keyed cache"
# a merged-table value (count 0, bit 2 set, which ``_word_value`` never makes): BPE merged nothing in the
# chunk, each byte is its own byte's id (GPT-2's indentation: "\n" and spaces, 4-15 ids a chunk)
_BYTEWISE = np.uint64(4)


_FIB = np.uint64(0x9E3779B97F4A7C15)
_FIB2 = np.uint64(0xC2B2AE3D27D4EB4F)
_FIB3 = np.uint64(0x165667B19E3779F9)
_FIB4 = np.uint64(0x27D4EB2F165667C5)
# chunks of 16 to _LONG bytes have a four-word key (the long table: code's indentation and identifiers,
# 97% of its chunks over 15 bytes); a row holds up to _LONG_IDS ids, or _LBYTEWISE (each byte its own id)
_LONG = 31
_LONG_IDS = 7
_LBYTEWISE = np.uint64(255)


@njit(cache=True, nogil=True)
def build_pair_table(lefts, rights, prio, res):
    """``_pairs.pair_table`` of the merges ``(lefts[k], rights[k])``, each row's value ``prio << 32 | merged id``
    (``res[prio]``, or ``prio`` itself when ``res`` is empty): a lookup is one cache line and gives both the
    order of the merge and the id it makes, so the merge loop never reads ``res``."""
    values = np.empty(lefts.size, np.int64)
    for k in range(lefts.size):
        values[k] = (prio[k] << 32) | (res[prio[k]] if res.size else prio[k])
    return pair_table(lefts, rights, values)


# the filter in front of the pair table (Llama 3: 512 KB, cache-resident): most pairs the merge loop looks up
# are not merges (63% on Chinese text under Llama 3); the filter answers those without touching the table
build_pair_filter = table_filter


@njit(cache=True, nogil=True, inline="always")
def _rank_at(tf, tmask, ff, fmask, left, right):
    """``prio << 32 | merged id`` of the pair, or ``_BIG`` when it is not a merge: ``tf`` the pair table's rows
    flat (two words a row), ``tmask`` its row count less one, ``ff`` the filter, ``fmask`` its word count less
    one (1-D arrays, or ``raw`` pointers to them: the kernel's merge calls pass pointers, as an array handed
    to a function costs two atomic reference-count updates a call). The table's first row is read before
    the filter says whether to look: both loads leave at once, so a merge waits for one miss of the cache,
    not for the filter's and then the table's (on a first sighting these two reads were a third of the
    kernel's time: the merge loop waits on them)."""
    key = (np.int64(left) << 32) | np.int64(right)
    h = pair_hash(key)
    hi = h >> np.uint64(32)
    i = hi & tmask
    k = tf[ix(np.uint64(2) * i)]
    w = ff[ix(hi & fmask)]
    if ((w >> (h >> np.uint64(58))) & (w >> ((h >> np.uint64(52)) & np.uint64(63))) & np.uint64(1)) == 0:
        return _BIG
    while True:
        if k == key:
            return tf[ix(np.uint64(2) * i + np.uint64(1))]
        if k == -1:
            return _BIG
        i = (i + np.uint64(1)) & tmask
        k = tf[ix(np.uint64(2) * i)]


@njit(cache=True, nogil=True, inline="always")
def _flat_pairs(table, filt):
    """``(tf, tmask, ff, fmask)`` of ``_rank_at`` for the pair table ``table`` (``build_pair_table``'s) and its
    filter."""
    return table.reshape(-1), np.uint64(table.shape[0] - 1), filt, np.uint64(filt.size - 1)


_ID = np.int64(0xFFFFFFFF)


@njit(cache=True, nogil=True, inline="always")
def _merge_loop(ids, n, tf, tmask, ff, fmask, ranks):
    """Merge ``ids[:n]`` in place, ``ranks[:n-1]`` holding ``prio << 32 | id`` of each adjacent pair: the
    minimum is the next merge (leftmost on ties) and its low half the id it makes. Returns the length."""
    while n > 1:
        best = _BIG
        at = -1
        for i in range(n - 1):
            if ranks[ix(i)] < best:
                best = ranks[ix(i)]
                at = i
        if at < 0:
            break
        ids[ix(at)] = best & _ID
        for i in range(at + 1, n - 1):
            ids[ix(i)] = ids[ix(i + 1)]
            ranks[ix(i)] = ranks[ix(i + 1)]
        n -= 1
        if at > 0:
            ranks[ix(at - 1)] = _rank_at(tf, tmask, ff, fmask, ids[ix(at - 1)], ids[ix(at)])
        if at < n - 1:
            ranks[ix(at)] = _rank_at(tf, tmask, ff, fmask, ids[ix(at)], ids[ix(at + 1)])
    return n


@njit(cache=True, nogil=True)
def _bpe_short(ids, n, tf, tmask, ff, fmask, ranks, byte_pairs, data, a):
    """Merge ``ids[:n]`` (the base ids of ``data[a:a+n]``) in place by priority, leftmost first on ties;
    returns the new length. The first pair values come from ``byte_pairs``, a dense 256 x 256 table of
    byte pairs (512 KB, cache-resident). The pair table as ``_rank_at`` takes it; the arrays may be ``raw``
    pointers (the kernel's calls: no reference counts to update a call)."""
    for i in range(n - 1):
        ranks[ix(i)] = byte_pairs[ix((np.int64(data[ix(a + i)]) << 8) | np.int64(data[ix(a + i + 1)]))]
    return _merge_loop(ids, n, tf, tmask, ff, fmask, ranks)


@njit(cache=True, nogil=True)
def _bpe_ids(ids, n, tf, tmask, ff, fmask, ranks):
    """``_bpe_short`` from any ids (characters already merged by ``_premerge``)."""
    for i in range(n - 1):
        ranks[ix(i)] = _rank_at(tf, tmask, ff, fmask, ids[ix(i)], ids[ix(i + 1)])
    return _merge_loop(ids, n, tf, tmask, ff, fmask, ranks)


@njit(cache=True, nogil=True)
def _bpe_long(ids, n, table, filt):
    """Heap-based merge of ``ids[:n]`` in place; entries ``prio << 32 | position``, checked on pop. The pair
    table and the heap reach ``_rank_at`` and the heap functions as ``raw`` pointers (an array handed to a
    function, or bound anew by an inlined one, costs two atomic reference-count updates: per pair here)."""
    tf, tmask, ff, fmask = _flat_pairs(table, filt)
    tp = raw(tf)
    fp = raw(ff)
    nxt = np.arange(1, n + 1)
    prv = np.arange(-1, n - 1)
    nxt[n - 1] = -1
    heap = np.empty(3 * n, np.int64)
    hn = 0
    for i in range(n - 1):
        r = _rank_at(tp, tmask, fp, fmask, ids[i], ids[i + 1])
        if r != _BIG:
            heap_push(raw(heap), hn, (r >> 32 << 32) | i)
            hn += 1
    while hn > 0:
        top = heap[0]
        heap_pop(raw(heap), hn)
        hn -= 1
        p = top >> 32
        i = top & _ID
        j = nxt[i]
        if ids[i] < 0 or j < 0:
            continue
        v = _rank_at(tp, tmask, fp, fmask, ids[i], ids[j])
        if v >> 32 != p:
            continue  # stale: a neighbour changed since this entry was queued
        nid = v & _ID
        ids[i] = nid
        ids[j] = -1
        k = nxt[j]
        nxt[i] = k
        if k >= 0:
            prv[k] = i
            rk = _rank_at(tp, tmask, fp, fmask, nid, ids[k])
            if rk != _BIG:
                if hn == heap.size:
                    heap = np.concatenate((heap, np.empty(heap.size, np.int64)))
                heap_push(raw(heap), hn, (rk >> 32 << 32) | i)
                hn += 1
        h = prv[i]
        if h >= 0:
            rh = _rank_at(tp, tmask, fp, fmask, ids[h], nid)
            if rh != _BIG:
                if hn == heap.size:
                    heap = np.concatenate((heap, np.empty(heap.size, np.int64)))
                heap_push(raw(heap), hn, (rh >> 32 << 32) | h)
                hn += 1
    m = 0
    for i in range(n):
        if ids[i] >= 0:
            ids[m] = ids[i]
            m += 1
    return m


# ------------------------------------------------------------------------------ characters merged ahead
# On CJK text most merges happen inside one character: three bytes become one token (Llama 3 on
# Chinese: 13 merges per 18-byte chunk, 9 of them inside characters). ``_premerge`` puts each 3-byte
# character's own BPE result in place before the merge loop, which then does only the merges between
# characters. That is exact when (checked by the encoder, else the table is empty and nothing is merged
# ahead):
# * merges are monotone: each merge's priority is above those of the merges making its two parts, so
#   the merge loop runs merges in non-decreasing priority (BPE = apply each merge in turn, left to right);
# * no token that crosses the character's edge part-way can form there: a token made of bytes before
#   the character and its first one or two bytes (a "tail" token, e.g. Llama 3's b" \xe5"), or of its
#   last one or two bytes and bytes after it (a "head" token). Those tokens are listed by the partial
#   character at their edge; a character whose surroundings in the chunk spell one of them is left as
#   bytes. Otherwise no merge ever touches the character's bytes together with others' before it is
#   whole, its inner merges go as they go alone, and the merges between characters see the same pieces.
_TAILK = 16 + 16 * 64  # tail keys: a lead byte E0-EF alone, or lead + continuation byte
_HEADK = 64 + 64 * 64  # head keys: one continuation byte, or two


@njit(cache=True, nogil=True)
def char_table(byte_ids, table, filt, first_use):
    """The BPE result of each 3-byte character alone (by code point, U+0800-U+FFFF): one or two ids of 20
    bits (the caller checks every id fits) and their count in bits 60-61; 0 where a character is left as
    bytes: no merge applies inside it, or its one token ``C`` is an operand of a merge ranked before the
    last of the merges making it (``first_use[C]``: the lowest priority of a merge taking ``C`` as a
    part; such a merge could run before ``C`` is whole in the byte-level run)."""
    out = np.zeros(65536, np.int64)
    b = np.empty(3, np.int64)
    tf, tmask, ff, fmask = _flat_pairs(table, filt)
    for cp in range(0x800, 0x10000):
        if 0xD800 <= cp < 0xE000:
            continue  # surrogates are not characters
        b[0] = byte_ids[0xE0 | (cp >> 12)]
        b[1] = byte_ids[0x80 | ((cp >> 6) & 0x3F)]
        b[2] = byte_ids[0x80 | (cp & 0x3F)]
        r01 = _rank_at(tf, tmask, ff, fmask, b[0], b[1])
        r12 = _rank_at(tf, tmask, ff, fmask, b[1], b[2])
        if r01 == _BIG and r12 == _BIG:
            out[cp] = 0
            continue
        first = min(r01, r12)  # the lower-priority pair merges first (two different pairs never tie)
        x, y = (r01 & _ID, b[2]) if r01 <= r12 else (b[0], r12 & _ID)
        r = _rank_at(tf, tmask, ff, fmask, x, y)
        if r == _BIG:
            v = (np.int64(2) << 60) | x | (y << 20)
        else:
            c = r & _ID
            v = (np.int64(1) << 60) | c if first_use[c] > max(first, r) >> 32 else 0
        out[cp] = v
    return out


@njit(cache=True, nogil=True)
def _tail_key(flat, s, n):
    """Key of a token ``flat[s:s+n]`` ending part-way into a 3-byte character (-1 if it does not), and
    the length of that partial character."""
    if n >= 2 and 0xE0 <= flat[s + n - 1] <= 0xEF:
        return np.int64(flat[s + n - 1] - 0xE0), 1
    if n >= 3 and 0xE0 <= flat[s + n - 2] <= 0xEF and 0x80 <= flat[s + n - 1] <= 0xBF:
        return 16 + (np.int64(flat[s + n - 2] - 0xE0) << 6 | np.int64(flat[s + n - 1] & 0x3F)), 2
    return np.int64(-1), 0


@njit(cache=True, nogil=True)
def _head_key(flat, s, n):
    """Key of a token starting part-way into a character (one or two continuation bytes, then more)."""
    if n >= 2 and 0x80 <= flat[s] <= 0xBF and not (0x80 <= flat[s + 1] <= 0xBF):
        return np.int64(flat[s] & 0x3F), 1
    if n >= 3 and 0x80 <= flat[s] <= 0xBF and 0x80 <= flat[s + 1] <= 0xBF and not (0x80 <= flat[s + 2] <= 0xBF):
        return 64 + (np.int64(flat[s] & 0x3F) << 6 | np.int64(flat[s + 1] & 0x3F)), 2
    return np.int64(-1), 0


@njit(cache=True, nogil=True)
def partial_index(flat, starts, lens):
    """Tail and head tokens grouped by key (CSR), and per key a 256-bit mask of the byte next to the
    character (a tail's last byte before it, a head's first byte after it), which rules out most
    characters with one test: ``(tail_ptr, tail_tok, tail_mask, head_ptr, head_tok, head_mask)``."""
    tail_ptr = np.zeros(_TAILK + 1, np.int64)
    head_ptr = np.zeros(_HEADK + 1, np.int64)
    tail_mask = np.zeros((_TAILK, 4), np.uint64)
    head_mask = np.zeros((_HEADK, 4), np.uint64)
    for t in range(starts.size):
        k, q = _tail_key(flat, starts[t], lens[t])
        if k >= 0:
            tail_ptr[k + 1] += 1
            x = flat[starts[t] + lens[t] - q - 1]
            tail_mask[k, x >> 6] |= np.uint64(1) << np.uint64(x & 63)
        k, q = _head_key(flat, starts[t], lens[t])
        if k >= 0:
            head_ptr[k + 1] += 1
            x = flat[starts[t] + q]
            head_mask[k, x >> 6] |= np.uint64(1) << np.uint64(x & 63)
    tail_ptr = np.cumsum(tail_ptr)
    head_ptr = np.cumsum(head_ptr)
    tail_tok = np.empty(tail_ptr[-1], np.int64)
    head_tok = np.empty(head_ptr[-1], np.int64)
    tfill = tail_ptr[:-1].copy()
    hfill = head_ptr[:-1].copy()
    for t in range(starts.size):
        k, _ = _tail_key(flat, starts[t], lens[t])
        if k >= 0:
            tail_tok[tfill[k]] = t
            tfill[k] += 1
        k, _ = _head_key(flat, starts[t], lens[t])
        if k >= 0:
            head_tok[hfill[k]] = t
            hfill[k] += 1
    return tail_ptr, tail_tok, tail_mask, head_ptr, head_tok, head_mask


@njit(cache=True, nogil=True, inline="always")
def _spelled(data, p, flat, s, n):
    for t in range(n):
        if data[p + t] != flat[s + t]:
            return False
    return True


@njit(cache=True, nogil=True)
def _tail_spelled(data, i, a, k, q, flat, starts, lens, ptr, tok):
    """A tail token of key ``k`` (its partial character ``q`` bytes long) ends at ``data[i+q]``."""
    for j in range(ptr[k], ptr[k + 1]):
        t = tok[j]
        pn = lens[t] - q
        if i - pn >= a and _spelled(data, i - pn, flat, starts[t], pn):
            return True
    return False


@njit(cache=True, nogil=True)
def _head_spelled(data, i, b, k, q, flat, starts, lens, ptr, tok):
    """A head token of key ``k`` (``q`` continuation bytes) starts inside the character at ``data[i]``."""
    for j in range(ptr[k], ptr[k + 1]):
        t = tok[j]
        rn = lens[t] - q
        if i + 3 + rn <= b and _spelled(data, i + 3, flat, starts[t] + q, rn):
            return True
    return False


@njit(cache=True, nogil=True)
def _premerge(data, a, b, byte_ids, merging, tables, ids):
    """Base ids of ``data[a:b]`` into ``ids``, each 3-byte character that is safe to merge ahead as its
    own BPE result. Returns the count (``b - a`` when nothing was merged ahead: then ``ids`` are the byte
    ids). ``tables``: ``_char_pointers`` of the ``chars`` tables, ``raw`` pointers (no reference counts: as
    arrays, the 13 of this call cost 26 atomic updates a chunk, and unpacking a tuple of arrays per
    character made this step slower than the merges it saves); ``data``, ``byte_ids`` and ``ids`` arrays
    or pointers. ``merging`` False (``cp3`` empty: nothing merged ahead for this vocabulary) gives the
    byte ids."""
    if not merging:
        for t in range(b - a):
            ids[ix(t)] = byte_ids[data[ix(a + t)]]
        return b - a
    cp3, flat, starts, lens, tail_ptr, tail_tok, tail_mask, head_ptr, head_tok, head_mask = tables
    m = 0
    p = a
    while p < b:
        x = data[p]
        if x >= 0xE0 and x <= 0xEF and p + 3 <= b:
            v = cp3[((np.int64(x) & 0xF) << 12) | ((np.int64(data[p + 1]) & 0x3F) << 6) | (np.int64(data[p + 2]) & 0x3F)]
            # Safe to merge ahead: no tail or head token spelled around the character (a tail ends
            # part-way into it, a head starts part-way into it). A 256-bit mask per key, of the byte
            # next to the character, rules out ~90% of characters in one test; the token lists are
            # scanned out of line. Written here rather than in an inlined helper taking the arrays:
            # that helper cost numba's reference counting on each array, per character (~1/3 of the
            # kernel on Chinese: Llama 3 zh 12.0 -> 17.8 MB/s in-process, ids equal).
            safe = v != 0
            if safe and p > a:
                xx = data[p - 1]
                k1 = np.int64(x) - 0xE0
                if (tail_mask[ix(4 * k1 + (np.int64(xx) >> 6))] >> np.uint64(xx & 63)) & np.uint64(1) != 0:
                    if _tail_spelled(data, p, a, k1, 1, flat, starts, lens, tail_ptr, tail_tok):
                        safe = False
                k2 = 16 + (k1 << 6 | (np.int64(data[p + 1]) & 0x3F))
                if safe and (tail_mask[ix(4 * k2 + (np.int64(xx) >> 6))] >> np.uint64(xx & 63)) & np.uint64(1) != 0:
                    if _tail_spelled(data, p, a, k2, 2, flat, starts, lens, tail_ptr, tail_tok):
                        safe = False
            if safe and p + 3 < b:
                y = data[p + 3]
                h1 = np.int64(data[p + 2]) & 0x3F
                if (head_mask[ix(4 * h1 + (np.int64(y) >> 6))] >> np.uint64(y & 63)) & np.uint64(1) != 0:
                    if _head_spelled(data, p, b, h1, 1, flat, starts, lens, head_ptr, head_tok):
                        safe = False
                h2 = 64 + ((np.int64(data[p + 1]) & 0x3F) << 6 | h1)
                if safe and (head_mask[ix(4 * h2 + (np.int64(y) >> 6))] >> np.uint64(y & 63)) & np.uint64(1) != 0:
                    if _head_spelled(data, p, b, h2, 2, flat, starts, lens, head_ptr, head_tok):
                        safe = False
            if safe:
                ids[m] = v & 0xFFFFF
                m += 1
                if v >> 60 == 2:
                    ids[m] = (v >> 20) & 0xFFFFF
                    m += 1
                p += 3
                continue
        ids[m] = byte_ids[x]
        m += 1
        p += 1
    return m


# ------------------------------------------------------------------------------ the word tables
# Chunks of 1 to 7 bytes are 64-90% of all chunks, and most of them are one token (English words under
# GPT-2's split: " the", " and"). They are looked up in word tables: open addressing, ``[key, value]``
# pairs side by side, key = the bytes and the length packed (``_packed``, never 0), value = the count of
# ids in the low 2 bits and the ids above them (``_word_value``: one id in bits 2 and up; two or three
# ids 20 bits each), or a count of 0: the chunk's ids are in the small-chunk table (more than three, or
# ids of more than 20 bits), or, with bit 2 set (``_BYTEWISE``), they are its bytes' own ids (BPE merged
# nothing: written from the key's bytes, no small-table row). Two tables per chunk size (1-7 bytes; 8-15
# bytes, keyed by two words):
#
# * the seed (``vtab``, ``vtab2``), built once per tokenizer and shared read-only by every thread: every
#   chunk among the vocabulary's tokens whose encoding (computed by this very kernel) is one id, so a
#   chunk is found on its first sighting and a cold cache pays no merge for it. One copy for all
#   threads: two threads' private copies of o200k's (25 MB each) outgrew the L3 cache (two threads on
#   code ran at 0.72x one shared table's speed);
# * the merged table (``mtab``, ``mtab2``, per thread, a fixed size, 2 MB each): every chunk the thread
#   merges, emptied when half full (so a probe always ends at an empty row).
#
# A chunk seen before costs one 8-byte load, one multiply, one probe of the seed (and, for a chunk of
# several ids, one of the merged table) and up to three unconditional stores.
@njit(cache=True, nogil=True, inline="always")
def _vslot(key, vmask):
    return np.int64(((key * _FIB) >> np.uint64(32)) & vmask)


@njit(cache=True, nogil=True, inline="always")
def _packed(word, nbytes, length):
    """A chunk's key word: the low ``nbytes`` (0-7) bytes of ``word`` and ``length`` in the top byte (never
    0). A chunk of 1-7 bytes is ``_packed(its first 8 bytes, n, n)``; one of 8-15 bytes has its first 8
    bytes as a first word and ``_packed(the next 8, n - 8, n)`` as its second."""
    return (word & ((np.uint64(1) << np.uint64(8 * nbytes)) - np.uint64(1))) | (np.uint64(length) << np.uint64(56))


@njit(cache=True, nogil=True, inline="always")
def _hash2(k0, k1):
    """The hash of a two-word key (chunks of 8-15 bytes): its high half picks the wide word table's row and
    the small-chunk table's bucket."""
    return (k0 * _FIB) ^ (k1 * _FIB2)


@njit(cache=True, nogil=True, inline="always")
def _vslot2(k0, k1, vmask):
    return np.int64((_hash2(k0, k1) >> np.uint64(32)) & vmask)


@njit(cache=True, nogil=True, inline="always")
def _rows_ok(tab, width):
    """Whether ``tab`` holds a power of two rows of ``width`` words (at least one): a slot is a hash masked by
    the row count, so the probes below stay inside."""
    rows = tab.size // width
    return tab.size == rows * width and rows >= 1 and (rows & (rows - 1)) == 0


@njit(cache=True, nogil=True, inline="always")
def _long_keys(dp, a, n):
    """The four key words of a chunk of 16 to 31 bytes at ``dp[a:a + n]`` (32 bytes readable from ``a``): its
    bytes, zero past ``n``, and ``n`` in the top byte of the last word (never 0)."""
    k0 = load_u64(dp, a)
    k1 = load_u64(dp, a + 8)
    if n >= 24:
        return k0, k1, load_u64(dp, a + 16), _packed(load_u64(dp, a + 24), n - 24, n)
    return k0, k1, _packed(load_u64(dp, a + 16), n - 16, 0), np.uint64(n) << np.uint64(56)


@njit(cache=True, nogil=True, inline="always")
def _hash4(k0, k1, k2, k3):
    """The hash of a four-word key (chunks of 16-31 bytes): its high half picks the long table's row."""
    return (k0 * _FIB) ^ (k1 * _FIB2) ^ (k2 * _FIB3) ^ (k3 * _FIB4)


@njit(cache=True, nogil=True)
def _to_long(lt, data, a, n, ids, at, m, sizes):
    """Put the chunk ``data[a:a + n]`` (16-31 bytes, 32 readable from ``a``) and its ``m`` ids ``ids[at:at + m]``
    in the long table ``lt`` (rows of 8 words: the four key words, the count and up to 7 ids of 32 bits;
    a power of two rows, at least one), emptied when half full (``sizes[8]``: its rows used). A chunk of
    more ids (unless each byte is its own: count ``_LBYTEWISE``) or of an id over 32 bits stays out."""
    if m > _LONG_IDS and m != n:
        return
    for t in range(m):
        if ids[at + t] < 0 or ids[at + t] >= np.int64(1) << 32:
            return
    rows = lt.size // 8
    lmask = np.uint64(rows - 1)
    if sizes[8] + 1 > rows // 2:
        lt[:] = 0
        sizes[8] = 0
    k0, k1, k2, k3 = _long_keys(data, a, n)
    li = np.int64((_hash4(k0, k1, k2, k3) >> np.uint64(32)) & lmask)
    while lt[8 * li + 3] != 0:
        if lt[8 * li + 3] == k3 and lt[8 * li] == k0 and lt[8 * li + 1] == k1 and lt[8 * li + 2] == k2:
            return
        li = (li + 1) & np.int64(lmask)
    lt[8 * li] = k0
    lt[8 * li + 1] = k1
    lt[8 * li + 2] = k2
    lt[8 * li + 3] = k3
    if m > _LONG_IDS:
        lt[8 * li + 4] = _LBYTEWISE
    else:
        slots = np.zeros(8, np.uint64)
        slots[0] = np.uint64(m)
        for t in range(m):
            slots[1 + t] = np.uint64(ids[at + t])
        for w in range(4):
            lt[8 * li + 4 + w] = slots[2 * w] | (slots[2 * w + 1] << np.uint64(32))
    sizes[8] += 1


@njit(cache=True, nogil=True, inline="always")
def _row1(tab, key, mask):
    """The row of a word table of ``[key, value]`` rows holding ``key``, or the empty row its probe ended at."""
    i = _vslot(key, mask)
    k = tab[ix(2 * i)]
    while k != key and k != 0:
        i = (i + 1) & np.int64(mask)
        k = tab[ix(2 * i)]
    return i


@njit(cache=True, nogil=True, inline="always")
def _row2(tab, k0, k1, mask):
    """The row of a wide word table (rows ``[k0, k1, value, 0]``) holding the key ``(k0, k1)``, or the empty
    row its probe ended at."""
    i = _vslot2(k0, k1, mask)
    while tab[ix(4 * i + 1)] != 0 and (tab[ix(4 * i + 1)] != k1 or tab[ix(4 * i)] != k0):
        i = (i + 1) & np.int64(mask)
    return i


@njit(cache=True, nogil=True)
def build_vocab_table2(k0, k1, ids):
    """``vtab2``, the seed of the wide word tables: chunks of 8 to 15 bytes, rows ``[k0, k1, value, 0]`` (32
    bytes), k0 the first 8 bytes, k1 the rest with the length in the top byte (never 0), the value of one
    id as in ``vtab``; at least 4 rows per key (and 1,024 rows), as ``vtab``."""
    cap = 1024
    while cap < 4 * k0.size:
        cap *= 2
    vt = np.zeros(4 * cap, np.uint64)
    vmask = np.uint64(cap - 1)
    for k in range(k0.size):
        i = _vslot2(k0[k], k1[k], vmask)
        while vt[4 * i + 1] != 0 and (vt[4 * i] != k0[k] or vt[4 * i + 1] != k1[k]):
            i = (i + 1) & (cap - 1)
        if vt[4 * i + 1] == 0:
            vt[4 * i] = k0[k]
            vt[4 * i + 1] = k1[k]
            vt[4 * i + 2] = np.uint64(1) | (np.uint64(ids[k]) << np.uint64(2))
    return vt


@njit(cache=True, nogil=True)
def build_vocab_table(keys, ids):
    """``vtab``, the seed of the word tables (see above): the non-zero uint64 ``keys`` with the value of
    one id each (``ids``, below 2**31; first one wins on a repeat). At least 4 rows per key (and 4,096
    rows): it fills a quarter at most, so a probe for a chunk it does not hold ends at an empty row after
    a row or two."""
    cap = 4096
    while cap < 4 * keys.size:
        cap *= 2
    vt = np.zeros(2 * cap, np.uint64)
    vmask = np.uint64(cap - 1)
    for k in range(keys.size):
        i = _vslot(keys[k], vmask)
        while vt[2 * i] != 0 and vt[2 * i] != keys[k]:
            i = (i + 1) & (cap - 1)
        if vt[2 * i] == 0:
            vt[2 * i] = keys[k]
            vt[2 * i + 1] = np.uint64(1) | (np.uint64(ids[k]) << np.uint64(2))
    return vt


@njit(cache=True, nogil=True)
def _byte_ids_out(out, nout, byte_ids, data, a, n):
    """Write the ids of the bytes ``data[a:a+n]`` (a ``_BYTEWISE`` chunk's) at ``out[nout:]``; returns the new
    ``nout``. The outer loop's copy, for chunks past ``_hot``'s reach."""
    for t in range(n):
        out[ix(nout + t)] = byte_ids[data[ix(a + t)]]
    return nout + n


@njit(cache=True, nogil=True, inline="always")
def _word_value(ids, at, m, n, imask):
    """The word-table value of the ``m`` ids ``ids[at:at + m]`` of a chunk of ``n`` bytes: one id in bits 2 and up;
    two or three ids of at most 20 bits (``imask`` is their mask: all ones when the vocabulary's ids are
    wider) 20 bits each; else ``_BYTEWISE`` where BPE merged nothing (``m == n``: the ids are the bytes'),
    or 0 (their place is the small-chunk table)."""
    if m == 1:
        return np.uint64(1) | (np.uint64(ids[ix(at)]) << np.uint64(2))
    if m > 3 or imask != _M20:
        return _BYTEWISE if m == n else np.uint64(0)
    v = np.uint64(m)
    for t in range(m):
        v |= np.uint64(ids[ix(at + t)]) << np.uint64(2 + 20 * t)
    return v


# ------------------------------------------------------------------------------ the chunk cache
@njit(cache=True, nogil=True, inline="always")
def _same_bytes(x, i, y, j, n):
    """Whether ``x[i:i+n]`` and ``y[j:j+n]`` (contiguous uint8 arrays, both in bounds) hold the same bytes:
    8 at a time, the last word the 8 bytes ending at ``n`` (it may overlap the one before)."""
    if n < 8:
        for t in range(n):
            if x[i + t] != y[j + t]:
                return False
        return True
    t = 0
    while t + 8 < n:
        if load_u64(x, i + t) != load_u64(y, j + t):
            return False
        t += 8
    return load_u64(x, i + n - 8) == load_u64(y, j + n - 8)


@njit(cache=True, nogil=True)
def _find(ctab, c_start, c_len, c_bytes, data, a, b, h):
    """Table slot holding chunk data[a:b], or the empty slot where it would go. Slots hold
    ``tag << 32 | entry`` (the tag: bits 32-62 of the hash), so a probe past another key reads the
    table only; the entry's length and bytes are compared on a tag match."""
    mask = ctab.size - 1
    i = np.int64(h & np.uint64(mask))
    tag = np.int64((h >> np.uint64(32)) & np.uint64(0x7FFFFFFF))
    n = b - a
    while True:
        v = ctab[i]
        if v == -1:
            return i
        if v >> 32 == tag:
            e = v & _ID
            s = c_start[e]
            if c_len[e] == n and _same_bytes(c_bytes, s, data, a, n):
                return i
        i = (i + 1) & mask


@njit(cache=True, nogil=True, inline="always")
def _han_key(data, a, n):
    """A chunk's length (over 7 bytes) and first 7 bytes in one key (``unreached`` in ``encode_chunks``)."""
    key = np.uint64(min(n, 255)) << np.uint64(56)
    for t in range(7):
        key |= np.uint64(data[a + t]) << np.uint64(8 * t)
    return key


@njit(cache=True, nogil=True)
def _hot(dp, op, k, end, ahead_end, outp, nout, vt, vmask, imask, vt2, vmask2, mt, mmask, mt2, mmask2, sk, si,
         bmask, bp, lt, lmask, lend):
    """The chunks ``k, k + 1, ...`` of ``[k, end)`` that the word tables (the seeds ``vt`` and ``vt2``, then the
    thread's merged tables ``mt`` and ``mt2``: 1-7 and 8-15 bytes) or the small-chunk table hold, their ids
    written at ``outp[nout:]``: returns the first chunk that none holds (or ``end``) and the ids written so
    far. ``encode_chunks``' loop for text it has seen, a function of its own over ``raw`` pointers: a few
    registers' worth of state instead of the whole kernel's (whose slow paths left the hot loop
    reloading its pointers from the stack), and no reference counts to pay when the kernel calls it
    again after a chunk it merged.

    Every chunk of ``[k, ahead_end)`` starts 16 bytes or more before the end of the last chunk (the
    caller cuts ``ahead_end`` there), so its key words are loaded without a test, and the three ids a
    word-table hit stores unconditionally (the count then says how many were real) land inside the
    output; ``end <= ahead_end``. The rows of the chunk ``_AHEAD`` on are prefetched (the seeds are
    larger than the L2 cache and a probe's miss is most of a chunk's time). A chunk of 16 to 31 bytes that
    starts at ``lend`` or before (32 bytes readable) is looked up in the long table ``lt`` (``_to_long``)."""
    while k < end:
        j = k + _AHEAD
        if j < ahead_end:
            a2 = op[j]
            n2 = op[j + 1] - a2
            if n2 <= _SMALL:
                h2 = (_packed(load_u64(dp, a2), n2, n2) * _FIB) >> np.uint64(32)
                prefetch(vt, np.uint64(2) * (h2 & vmask))
                prefetch(mt, np.uint64(2) * (h2 & mmask))
            elif n2 <= 15:
                h2 = _hash2(load_u64(dp, a2), _packed(load_u64(dp, a2 + 8), n2 - 8, n2)) >> np.uint64(32)
                prefetch(vt2, np.uint64(4) * (h2 & vmask2))
                prefetch(mt2, np.uint64(4) * (h2 & mmask2))
            elif n2 <= _LONG and a2 <= lend:
                q0, q1, q2, q3 = _long_keys(dp, a2, n2)
                prefetch(lt, np.uint64(8) * ((_hash4(q0, q1, q2, q3) >> np.uint64(32)) & lmask))
        a = op[k]
        n = op[k + 1] - a
        if n <= _SMALL:
            k0 = _packed(load_u64(dp, a), n, n)
            k1 = np.uint64(0)
            h = k0 * _FIB
            vi = (h >> np.uint64(32)) & vmask
            vk = vt[np.uint64(2) * vi]
            while vk != k0 and vk != 0:
                vi = (vi + np.uint64(1)) & vmask
                vk = vt[np.uint64(2) * vi]
            if vk != 0:  # a seed's: one id
                outp[nout] = np.int64((vt[np.uint64(2) * vi + np.uint64(1)] >> np.uint64(2)) & imask)
                nout += 1
                k += 1
                continue
            vi = (h >> np.uint64(32)) & mmask
            vk = mt[np.uint64(2) * vi]
            while vk != k0 and vk != 0:
                vi = (vi + np.uint64(1)) & mmask
                vk = mt[np.uint64(2) * vi]
            if vk == 0:  # never seen (or not since the merged table was emptied)
                return k, nout
            v = mt[np.uint64(2) * vi + np.uint64(1)]
        elif n <= 15:
            k0 = load_u64(dp, a)
            k1 = _packed(load_u64(dp, a + 8), n - 8, n)
            h = _hash2(k0, k1)
            vi = (h >> np.uint64(32)) & vmask2
            vk = vt2[np.uint64(4) * vi + np.uint64(1)]
            while vk != 0 and (vk != k1 or vt2[np.uint64(4) * vi] != k0):
                vi = (vi + np.uint64(1)) & vmask2
                vk = vt2[np.uint64(4) * vi + np.uint64(1)]
            if vk != 0:  # a seed's: one id
                outp[nout] = np.int64((vt2[np.uint64(4) * vi + np.uint64(2)] >> np.uint64(2)) & imask)
                nout += 1
                k += 1
                continue
            vi = (h >> np.uint64(32)) & mmask2
            vk = mt2[np.uint64(4) * vi + np.uint64(1)]
            while vk != k1 or mt2[np.uint64(4) * vi] != k0:
                if vk == 0:
                    return k, nout
                vi = (vi + np.uint64(1)) & mmask2
                vk = mt2[np.uint64(4) * vi + np.uint64(1)]
            v = mt2[np.uint64(4) * vi + np.uint64(2)]
        elif n <= _LONG and a <= lend:
            q0, q1, q2, q3 = _long_keys(dp, a, n)
            li = (_hash4(q0, q1, q2, q3) >> np.uint64(32)) & lmask
            vk = lt[np.uint64(8) * li + np.uint64(3)]
            while vk != q3 or lt[np.uint64(8) * li] != q0 or lt[np.uint64(8) * li + np.uint64(1)] != q1 or \
                    lt[np.uint64(8) * li + np.uint64(2)] != q2:
                if vk == 0:
                    return k, nout
                li = (li + np.uint64(1)) & lmask
                vk = lt[np.uint64(8) * li + np.uint64(3)]
            w = lt[np.uint64(8) * li + np.uint64(4)]
            if w == _LBYTEWISE:
                for t in range(n):
                    outp[nout + t] = bp[dp[a + t]]
                nout += n
                k += 1
                continue
            # up to 7 ids, stored unconditionally (the chunk has 16 slots or more in the output)
            outp[nout] = np.int64(w >> np.uint64(32))
            for t in range(3):
                w = lt[np.uint64(8) * li + np.uint64(5 + t)]
                outp[nout + 1 + 2 * t] = np.int64(w & np.uint64(0xFFFFFFFF))
                outp[nout + 2 + 2 * t] = np.int64(w >> np.uint64(32))
            nout += np.int64(lt[np.uint64(8) * li + np.uint64(4)] & np.uint64(0xFF))
            k += 1
            continue
        else:
            return k, nout
        c = v & np.uint64(3)
        if c != 0:
            outp[nout] = np.int64((v >> np.uint64(2)) & imask)
            outp[nout + 1] = np.int64((v >> np.uint64(22)) & _M20)
            outp[nout + 2] = np.int64(v >> np.uint64(42))
            nout += np.int64(c)
            k += 1
            continue
        if v == _BYTEWISE:  # each byte its own id (``bp``: the byte ids), stored unconditionally as above
            for t in range(7):
                outp[nout + t] = bp[(k0 >> np.uint64(8 * t)) & np.uint64(0xFF)]
            if n > _SMALL:
                outp[nout + 7] = bp[k0 >> np.uint64(56)]
                for t in range(7):
                    outp[nout + 8 + t] = bp[(k1 >> np.uint64(8 * t)) & np.uint64(0xFF)]
            nout += n
            k += 1
            continue
        # count 0: its ids are in the small-chunk table
        row = (h >> np.uint64(32)) & bmask
        last = row + np.uint64(_WAYS)
        while row < last and (sk[np.uint64(2) * row] != k0 or sk[np.uint64(2) * row + np.uint64(1)] != k1):
            row += np.uint64(1)
        if row == last:
            return k, nout
        m = si[np.uint64(8) * row]
        if m == _IN_CTAB:
            return k, nout
        for t in range(m):
            outp[nout + t] = si[np.uint64(8) * row + np.uint64(1 + t)]
        nout += m
        k += 1
    return k, nout


@njit(cache=True, nogil=True)
def encode_chunks(data, offs, marks, pos, byte_ids, byte_pairs, table, filt, chars, vtab, vtab2, imask, state,
                  limit, out):
    """Encode chunks ``data[offs[k]:offs[k+1]]`` into ``out`` (big enough: len(data) ids).

    ``vtab``, ``vtab2``: the seeds of the word tables of 1-7 and 8-15 bytes (``build_vocab_table``,
    ``build_vocab_table2``; a power of two rows, at least one, at most half of them used: read only);
    ``imask``: the mask of a word-table value's first id (``_M20``, or all ones where ids are wider).

    ``marks``: increasing chunk indices (in ``[0, offs.size - 1]``) where the documents of a batch start;
    ``pos[j]`` receives the number of ids written before chunk ``marks[j]`` (empty arrays for one text).

    ``state`` = (ctab, c_start, c_len, c_hash, c_bytes, c_ids_start, c_ids_len, c_ids, sizes, skeys,
    sids, seen, mtab, mtab2, ltab) is the cache; ``mtab``, ``mtab2``: the merged tables (chunks of 1-7 and 8-15
    bytes the thread merged, see above; a power of two rows, at least one), each emptied when half full;
    ``ltab``: the long table (chunks of 16-31 bytes put in or found in the byte-keyed cache, ``_to_long``:
    found again by ``_hot`` without leaving it, one row of one cache line; a power of two rows);
    ``skeys``/``sids``: the small-chunk table (rows of two key words, both 0 =
    empty; ids: count, then up to 7; buckets of ``_WAYS`` rows, a power of two rows, at least
    ``_WAYS``; a miss puts its chunk first in its bucket and the bucket's last row leaves; a count of
    ``_IN_CTAB``: the chunk's ids are in the byte-keyed cache); ``seen``: hashes
    of chunks seen once (the admission filter); ``sizes`` = [entries, bytes used, ids used, pinned entries, pinned bytes, pinned ids,
    rows used in ``mtab``, rows used in ``mtab2``, rows used in ``ltab``].
    When the cache would exceed ``limit`` entries it is reset to its pinned part.
    Returns (number of ids written, the new state or None): the state's arrays are updated in place, and
    only where the byte-keyed cache outgrew its arrays (new ones, returned) is a state handed back;
    returning all 15 arrays on every call cost ~8 us of a call's ~18 (a short text's encode).
    """
    ctab, c_start, c_len, c_hash, c_bytes, c_ids_start, c_ids_len, c_ids, sizes, skeys, sids, seen, mtab, mtab2, ltab = state
    if not (_rows_ok(vtab, 2) and _rows_ok(vtab2, 4) and _rows_ok(mtab, 2) and _rows_ok(mtab2, 4)
            and _rows_ok(ltab, 8)) or sizes.size < 9:
        raise ValueError("encode_chunks: a word table does not hold a power of two rows")
    cp3, flat, starts, lens, tail_ptr, tail_tok, tail_mask, head_ptr, head_tok, head_mask, unreached = chars
    nout = 0
    grown = False
    # a chunk's ids and its pairs' ranks for the merges, one block: ``work`` (a view, used to the end of the
    # loop) keeps it alive while the merge calls read it through the pointers ``wp`` and ``rp`` below (a
    # block only a pointer refers to is freed after its last use as an array: numba does not see a
    # pointer as a use)
    scratch = np.empty(2 * (_SHORT + 1), np.int64)
    work = scratch[: _SHORT + 1]
    smask = np.uint64(skeys.shape[0] - 1)
    bmask = smask & ~np.uint64(_WAYS - 1)  # a slot's bucket: its first row
    skflat = skeys.reshape(-1)
    siflat = sids.reshape(-1)
    vmask = np.uint64(vtab.size // 2 - 1)
    vmask2 = np.uint64(vtab2.size // 4 - 1)
    mmask = np.uint64(mtab.size // 2 - 1)
    mmask2 = np.uint64(mtab2.size // 4 - 1)
    mlimit = mtab.size // 4  # rows: a merged table is emptied when half full
    mlimit2 = mtab2.size // 8
    dsize = data.size
    nch = offs.size - 1
    # _hot takes the chunks that start 16 bytes or more before the end of the last chunk (their key
    # words load without a test, their ids' unconditional stores stay inside ``out``); the few after
    # them take the loop below all the way
    ahead_end = nch
    while ahead_end > 0 and offs[ix(ahead_end - 1)] + 16 > offs[ix(nch)]:
        ahead_end -= 1
    dp = raw(data)
    op = raw(offs)
    outp = raw(out)
    vtp = raw(vtab)
    vt2p = raw(vtab2)
    mtp = raw(mtab)
    mt2p = raw(mtab2)
    ltp = raw(ltab)
    lmask = np.uint64(ltab.size // 8 - 1)
    # the long table's keys read 32 bytes from a chunk's start: chunks starting after ``lend`` do not use it
    lend = offs[ix(nch)] - 32
    skp = raw(skflat)
    sip = raw(siflat)
    bip = raw(byte_ids)
    # the merge functions' arrays as pointers (each array handed to a function cost two atomic
    # reference-count updates a call: ~8% of a pass over text never seen before)
    wp = raw(scratch)
    rp = raw(scratch[_SHORT + 1 :])
    bpp = raw(byte_pairs)
    tflat, tmask, fflat, fmask = _flat_pairs(table, filt)
    tp = raw(tflat)
    filtp = raw(fflat)
    cpx = _char_pointers(cp3, flat, starts, lens, tail_ptr, tail_tok, tail_mask, head_ptr, head_tok, head_mask)
    mi = 0
    seg = 0
    while True:
        # the chunks up to the next document start (no test of the marks per chunk)
        while mi < marks.size and marks[ix(mi)] <= seg:
            pos[ix(mi)] = nout
            mi += 1
        end = min(marks[ix(mi)], nch) if mi < marks.size else nch
        if seg >= end:
            break
        nxt = seg
        seg = end
        while True:
            k, nout = _hot(dp, op, nxt, min(end, ahead_end), ahead_end, outp, nout, vtp, vmask, imask, vt2p, vmask2,
                           mtp, mmask, mt2p, mmask2, skp, sip, bmask, bip, ltp, lmask, lend)
            if k >= end:
                break
            nxt = k + 1
            # chunk k: not in the tables _hot reads (``probed``: it looked), or past ``ahead_end``
            probed = k < ahead_end
            a = offs[ix(k)]
            b = offs[ix(k + 1)]
            n = b - a
            if n <= _SMALL:
                # Most chunks are short (zh: half are one 3-byte character; en: most words fit in 7
                # bytes, 15% are one byte). Their bytes and length pack into one 64-bit key (one
                # unaligned load where 8 bytes are left to read): the word table (it holds every single
                # byte and short token too: one path for 1 to 7 bytes), then, for chunks of more ids than
                # it holds, the small-chunk table.
                if a + 8 <= dsize:
                    key = _packed(load_u64(data, a), n, n)
                else:
                    key = np.uint64(n) << np.uint64(56)
                    for t in range(n):
                        key |= np.uint64(data[a + t]) << np.uint64(8 * t)
                vi = _row1(vtp, key, vmask)
                if vtab[ix(2 * vi)] == key:  # a seed's: one id (only past ``ahead_end``: _hot took the others)
                    out[ix(nout)] = np.int64((vtab[ix(2 * vi + 1)] >> np.uint64(2)) & imask)
                    nout += 1
                    continue
                vi = _row1(mtp, key, mmask)
                vk = mtab[ix(2 * vi)]
                if vk == key:
                    v = mtab[ix(2 * vi + 1)]
                    c = np.int64(v & np.uint64(3))
                    if c != 0:  # (only past ``ahead_end``: _hot took the others)
                        out[ix(nout)] = np.int64((v >> np.uint64(2)) & imask)
                        for t in range(1, c):
                            out[ix(nout + t)] = np.int64((v >> np.uint64(2 + 20 * t)) & _M20)
                        nout += c
                        continue
                    if v == _BYTEWISE:  # (likewise)
                        nout = _byte_ids_out(out, nout, byte_ids, data, a, n)
                        continue
                bucket = np.int64(((key * _FIB) >> np.uint64(32)) & bmask)
                # only a chunk the merged table sends there can be in the small-chunk table
                row = _small_find(skp, bucket, key, np.uint64(0)) if vk == key and not probed else np.int64(-1)
                if row >= 0:
                    m = sids[ix(row), 0]
                    for t in range(m):
                        out[ix(nout + t)] = sids[ix(row), ix(1 + t)]
                    nout += m
                    continue
                # Not cached: merge. The byte-keyed cache holds no chunk of up to _SMALL bytes but the
                # pinned vocabulary tokens, and those are all in ``vtab`` (the whole-chunk rule puts every
                # token there): no need to look there.
                for t in range(n):
                    work[ix(t)] = byte_ids[data[ix(a + t)]]
                m = _bpe_short(wp, n, tp, tmask, filtp, fmask, rp, bpp, dp, a)
                for t in range(m):
                    out[ix(nout + t)] = work[ix(t)]
                v = _word_value(wp, 0, m, n, imask)
                if vk != key:  # into the merged table (``vi``: the empty row its probe ended at)
                    if sizes[6] + 1 > mlimit:  # half full: emptied (the chunk's row is then its own slot)
                        mtab[:] = 0
                        sizes[6] = 0
                        vi = _vslot(key, mmask)
                    if sizes[6] + 1 <= mlimit:
                        mtab[ix(2 * vi)] = key
                        mtab[ix(2 * vi + 1)] = v
                        sizes[6] += 1
                if v == 0:
                    _to_small(skp, sip, bucket, key, np.uint64(0), outp, nout, m)
                nout += m
                continue
            wide = n <= 15 and a + 16 <= dsize
            k0 = np.uint64(0)
            k1 = np.uint64(0)
            found = False  # in the wide merged table (at row ``vi2``; else ``vi2`` is the empty row its probe ended at)
            vi2 = np.int64(0)
            if wide:  # the wide word tables: one probe each, no hashing of bytes
                k0 = load_u64(data, a)
                k1 = _packed(load_u64(data, a + 8), n - 8, n)
                vi2 = _row2(vt2p, k0, k1, vmask2)
                if vtab2[ix(4 * vi2 + 1)] != 0:  # a seed's: one id (only past ``ahead_end``)
                    out[ix(nout)] = np.int64((vtab2[ix(4 * vi2 + 2)] >> np.uint64(2)) & imask)
                    nout += 1
                    continue
                vi2 = _row2(mt2p, k0, k1, mmask2)
                found = mtab2[ix(4 * vi2 + 1)] != 0
                if found:
                    v = mtab2[ix(4 * vi2 + 2)]
                    c = np.int64(v & np.uint64(3))
                    if c != 0:  # (only past ``ahead_end``: _hot took the others)
                        out[ix(nout)] = np.int64((v >> np.uint64(2)) & imask)
                        for t in range(1, c):
                            out[ix(nout + t)] = np.int64((v >> np.uint64(2 + 20 * t)) & _M20)
                        nout += c
                        continue
                    if v == _BYTEWISE:  # (likewise)
                        nout = _byte_ids_out(out, nout, byte_ids, data, a, n)
                        continue
            # A run of Han characters (a U+4000-U+9FFF character starts in the chunk's first 4 bytes)
            # where characters are merged ahead: long, mostly unique (hits 9% of lookups under Llama 3)
            # and cheap to merge, so the cache is skipped: no probe of the big table, no admission, no
            # insert (zh +16-18% under Llama 3 and Qwen 3.5). Exact: the pinned vocabulary matters only for
            # a token BPE does not reach from its own bytes; those of this shape are in ``unreached``
            # (sorted ``_han_key``s: length and first 7 bytes, cheaper than hashing the chunk) and take the
            # cached path. The test reads 4 bytes: the chunk has more than _SMALL.
            skip = False
            if cp3.size > 0:
                for t in range(4):  # bytes 0xE4-0xE9 only ever lead a character
                    if data[a + t] >= 0xE4 and data[a + t] <= 0xE9:
                        skip = True
                        break
            if skip and unreached.size > 0:
                key = _han_key(data, a, n)
                j = np.searchsorted(unreached, key)
                skip = j >= unreached.size or unreached[j] != key
            # Chunks of 8-15 bytes of several ids (en: 4%, code: 5.5% of chunks) go in the small-chunk table
            # too, keyed by both words: one probe, ids inline, where the byte-keyed cache costs a hash of
            # the bytes and ~5 dependent reads. That table is their cache: one that misses it is merged
            # at once, no hash of its bytes, no probe of the byte-keyed cache, no admission (a first
            # sighting cost ~25% less). One of more ids than a row holds (rare: emoji, symbols) is kept in
            # the byte-keyed cache, and its row says so (count _IN_CTAB, no ids).
            mslot = np.int64(-1)
            probe = True
            if wide and not skip:
                mslot = np.int64((_hash2(k0, k1) >> np.uint64(32)) & bmask)
                # only a chunk the wide merged table sends there can be in the small-chunk table
                row = _small_find(skp, mslot, k0, k1) if found else np.int64(-1)
                probe = False
                if row >= 0:
                    m = sids[ix(row), 0]
                    if m != _IN_CTAB:
                        for t in range(m):
                            out[ix(nout + t)] = sids[ix(row), ix(1 + t)]
                        nout += m
                        continue
                    probe = True
            e = -1
            h = np.uint64(0)
            if not skip and probe:
                h = words_hash(data, a, b)
                slot = _find(ctab, c_start, c_len, c_bytes, data, a, b, h)
                e = ctab[slot]
            if e != -1:
                e &= _ID
                s = c_ids_start[e]
                m = c_ids_len[e]
                for t in range(m):
                    out[nout + t] = c_ids[s + t]
                if n > 15 and n <= _LONG and a <= lend:  # found again (admitted, or pinned): into _hot's long table
                    _to_long(ltab, data, a, n, out, nout, m, sizes)
                nout += m
                continue
            # miss: run BPE (3-byte characters merged ahead where that is exact; a wide chunk without a
            # lead byte of one, told from its two key words, skips that step's call)
            if n <= _SHORT:
                if cp3.size > 0 and (mslot < 0 or _has_lead3(k0) or _has_lead3(k1)):
                    m0 = _premerge(dp, a, b, bip, True, cpx, wp)
                else:
                    for t in range(n):
                        work[t] = byte_ids[data[a + t]]
                    m0 = n
                if m0 == n:
                    m = _bpe_short(wp, n, tp, tmask, filtp, fmask, rp, bpp, dp, a)
                else:
                    m = _bpe_ids(wp, m0, tp, tmask, filtp, fmask, rp)
                for t in range(m):
                    out[nout + t] = work[t]
            else:
                big = np.empty(n, np.int64)
                m0 = _premerge(dp, a, b, bip, cp3.size > 0, cpx, big)
                if m0 <= _SHORT:
                    m = _bpe_ids(big, m0, tp, tmask, filtp, fmask, rp)
                else:
                    m = _bpe_long(big, m0, table, filt)
                for t in range(m):
                    out[nout + t] = big[t]
            if mslot >= 0:
                v = _word_value(outp, nout, m, n, imask)
                if not found:  # into the wide merged table
                    if sizes[7] + 1 > mlimit2:  # half full: emptied (the chunk's row is then its own slot)
                        mtab2[:] = 0
                        sizes[7] = 0
                        vi2 = _vslot2(k0, k1, mmask2)
                    if sizes[7] + 1 <= mlimit2:
                        mtab2[ix(4 * vi2)] = k0
                        mtab2[ix(4 * vi2 + 1)] = k1
                        mtab2[ix(4 * vi2 + 2)] = v
                        sizes[7] += 1
                if v != 0:
                    nout += m
                    continue
                if m <= 7:
                    _to_small(skp, sip, mslot, k0, k1, outp, nout, m)
                    nout += m
                    continue
                if not probe:  # (probe: its row says so already, the byte-keyed cache was reset since)
                    _to_small(skp, sip, mslot, k0, k1, outp, nout, 0)
                    sids[mslot, 0] = _IN_CTAB
                    h = words_hash(data, a, b)
            elif n > _CACHE_MAX_BYTES or skip:
                nout += m  # long chunks are rare and would bloat the cache
                continue
            else:
                # Admit a chunk on its second sighting only: where most chunks are new (Chinese under GPT-2's
                # split: 1.3 M distinct of 5.5 M) inserting each one cost more than the cache saved
                # (zh kernel 1.67 s with, 0.99 s without); repeated words (English) still get cached.
                fp = seen.size - 1
                fslot = np.int64(h & np.uint64(fp))
                if seen[fslot] != h:
                    seen[fslot] = h
                    if n > 15 and n <= _LONG and a <= lend:  # into _hot's long table at once: no second merge
                        _to_long(ltab, data, a, n, out, nout, m, sizes)
                    nout += m
                    continue
            # insert into the cache (reset to its pinned part when it holds ``limit`` entries)
            if sizes[0] + 1 > limit:
                _reset(ctab, c_hash, sizes)
            if (2 * (sizes[0] + 1) > ctab.size or sizes[0] + 1 > c_start.size
                    or sizes[1] + n > c_bytes.size or sizes[2] + m > c_ids.size):
                grown = True
                ctab, c_start, c_len, c_hash, c_bytes, c_ids_start, c_ids_len, c_ids = _grow_cache(
                    ctab, c_start, c_len, c_hash, c_bytes, c_ids_start, c_ids_len, c_ids, sizes, n, m)
            slot = _find(ctab, c_start, c_len, c_bytes, data, a, b, h)
            if ctab[slot] != -1:  # held already (a wide chunk whose small-table row was evicted)
                nout += m
                continue
            e = sizes[0]
            ctab[slot] = (np.int64((h >> np.uint64(32)) & np.uint64(0x7FFFFFFF)) << 32) | e
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
            if n > 15 and n <= _LONG and a <= lend:  # and into _hot's long table
                _to_long(ltab, data, a, n, out, nout, m, sizes)
            nout += m
    while mi < marks.size:
        pos[mi] = nout
        mi += 1
    if grown:
        return nout, (ctab, c_start, c_len, c_hash, c_bytes, c_ids_start, c_ids_len, c_ids, sizes, skeys, sids, seen,
                      mtab, mtab2, ltab)
    return nout, None


@njit(cache=True, nogil=True, inline="always")
def _char_pointers(cp3, flat, starts, lens, tail_ptr, tail_tok, tail_mask, head_ptr, head_tok, head_mask):
    """``_premerge``'s tables (``char_table``'s ``cp3`` and ``partial_index``'s, the masks flat: four words a
    key) as ``raw`` pointers, one tuple."""
    return (raw(cp3), raw(flat), raw(starts), raw(lens), raw(tail_ptr), raw(tail_tok), raw(tail_mask.reshape(-1)),
            raw(head_ptr), raw(head_tok), raw(head_mask.reshape(-1)))


@njit(cache=True, nogil=True, inline="always")
def _has_lead3(w):
    """Whether a byte of the 64-bit word ``w`` is E0-EF (leads a 3-byte UTF-8 character): the bytes' high
    nibbles compared with E at once, a zero byte found with the borrow test (exact for "any")."""
    y = (w & np.uint64(0xF0F0F0F0F0F0F0F0)) ^ np.uint64(0xE0E0E0E0E0E0E0E0)
    return ((y - np.uint64(0x0101010101010101)) & ~y & np.uint64(0x8080808080808080)) != 0


@njit(cache=True, nogil=True, inline="always")
def _small_find(skp, bucket, k0, k1):
    """The row of the small-chunk table's bucket (rows ``bucket .. bucket + _WAYS - 1``) holding the chunk
    keyed ``(k0, k1)``, or -1. ``skp``: its keys, two words a row (``raw`` of the flattened array)."""
    for j in range(_WAYS):
        if skp[ix(2 * (bucket + j))] == k0 and skp[ix(2 * (bucket + j) + 1)] == k1:
            return bucket + j
    return np.int64(-1)


@njit(cache=True, nogil=True, inline="always")
def _to_small(skp, sip, bucket, k0, k1, out, s, m):
    """Put the ``m`` ids ``out[s:s+m]`` of the chunk keyed ``(k0, k1)`` first in the small-chunk table's bucket
    ``bucket``: its rows move one down and the last (the least recently put) leaves. ``skp``, ``sip``: its
    keys (two words a row) and ids (eight a row), ``raw`` of the flattened arrays, as ``out``."""
    for j in range(_WAYS - 1, 0, -1):
        r = bucket + j
        skp[ix(2 * r)] = skp[ix(2 * r - 2)]
        skp[ix(2 * r + 1)] = skp[ix(2 * r - 1)]
        for t in range(8):
            sip[ix(8 * r + t)] = sip[ix(8 * r - 8 + t)]
    skp[ix(2 * bucket)] = k0
    skp[ix(2 * bucket + 1)] = k1
    sip[ix(8 * bucket)] = m
    for t in range(m):
        sip[ix(8 * bucket + 1 + t)] = out[ix(s + t)]


@njit(cache=True, nogil=True)
def _reset(ctab, c_hash, sizes):
    """Drop every unpinned entry: rebuild the table from the pinned entries only."""
    reindex_tagged(ctab, c_hash, sizes[3])
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
        reindex_tagged(ctab, c_hash, sizes[0])
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
        c_hash[e] = words_hash(c_bytes, c_start[e], c_start[e] + c_len[e])
    reindex_tagged(ctab, c_hash, c_start.size)


@njit(cache=True, nogil=True)
def build_byte_pairs(byte_ids, table, filt):
    """``prio << 32 | id`` of every pair of raw bytes (``_BIG`` where the two byte tokens do not merge)."""
    out = np.empty(65536, np.int64)
    tf, tmask, ff, fmask = _flat_pairs(table, filt)
    for x in range(256):
        for y in range(256):
            out[(x << 8) | y] = _rank_at(tf, tmask, ff, fmask, byte_ids[x], byte_ids[y])
    return out
