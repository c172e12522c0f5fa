"""numba kernels for SentencePiece BPE: the normalizer and the encoder (see ``sentencepiece.py``).

Every array comes through ``sp_encoder.CompiledSentencePiece``, which builds and checks them (ids and
symbols inside their tables, trie transitions inside the trie, offsets inside the text); numba checks
no bounds.

**Segments.** ``sentencepiece`` merges over the whole normalized text. A merge makes a piece, so no
merged symbol spans two characters ``a b`` unless some piece holds ``ab``. The encoder cuts the text
where that cannot happen and encodes the pieces between cuts on their own, which gives the same
symbols (merges in different segments never meet, and each segment's merges run in the same order
alone as they do together: best score first, then leftmost). Cuts, all decided from the vocabulary:

* before and after a character no multi-character piece holds (Mistral: ``\\n``, most CJK characters),
  and around a user-defined symbol (frozen: never merged);
* before a ``▁`` that follows another character, when no piece holds ``x▁`` for a character
  ``x`` other than ``▁`` (Mistral, Llama 2: pieces start with ``▁``, runs of ``▁`` included); after a
  ``▁`` followed by another character when no piece holds ``▁x`` (``treat_whitespace_as_suffix``).

A segment is looked up in a per-thread cache (its bytes -> its ids) and encoded on a miss: a rescan
of adjacent pairs for short segments, a heap of pairs with linked neighbours for long ones (each
O(n log n)). Pair keys are symbol ids: a piece's id, or an id after the vocabulary for a character
that is no piece but is part of one. A pair's value is ``rank << 32 | merged id``, the rank being
the merged piece's place in sentencepiece's score order (equal scores share a rank, the leftmost
pair wins).

The loops are compiled with ``refcount=False`` (``_jit.njit``): with numba's reference counting,
each inlined helper taking an array cost two atomic calls per character. So they make no array:
``encode`` makes the merge buffers and calls the resumable loop ``_encode`` again with larger ones
when a segment needs them. (``decode_pieces``, which makes its output, keeps the default.)
"""

from __future__ import annotations

import numpy as np

from ..._jit import njit
from .._wide import load_u64, store_u64
from ..sp_types import BYTE, CONTROL, UNKNOWN
from ._hashing import fnv1a, mix64
from ._heap import heap_pop, heap_push
from ._pairs import pair_hash, pair_table, table_filter

_BIG = np.int64(1) << 62
_LOW = np.int64(0xFFFFFFFF)
_SYM = np.int64(0x1FFFFFFF)  # a character's symbol in its ``cp_info`` entry (bit 29: a piece on its own, bit 30: cut)
_SHORT = 32  # segments of up to this many symbols merge by rescanning; longer ones through a heap
_SMALL = 15  # segments of up to this many bytes use the short-segment table (two 64-bit key words)
CACHE_MAX_BYTES = 96  # longer segments are encoded every time
_FIB = np.uint64(0x9E3779B97F4A7C15)

# kinds of symbols (``kind`` array): what an unmerged symbol outputs
K_PIECE, K_UNKNOWN, K_UNUSED = 0, 1, 2


# ------------------------------------------------------------------------------ UTF-8 and tries
@njit(cache=True, nogil=True, refcount=False, inline="always")
def _decode(data, i, end):
    """(valid, length, code point) of the character at ``data[i:end]``, as sentencepiece's
    ``DecodeUTF8`` (an invalid byte: (False, 1, 0xFFFD))."""
    b0 = np.int64(data[i])
    n = end - i
    if b0 < 0x80:
        return True, 1, b0
    if n >= 2 and (b0 & 0xE0) == 0xC0:
        b1 = np.int64(data[i + 1])
        cp = ((b0 & 0x1F) << 6) | (b1 & 0x3F)
        if (b1 & 0xC0) == 0x80 and cp >= 0x80:
            return True, 2, cp
    elif n >= 3 and (b0 & 0xF0) == 0xE0:
        b1 = np.int64(data[i + 1])
        b2 = np.int64(data[i + 2])
        cp = ((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F)
        if (b1 & 0xC0) == 0x80 and (b2 & 0xC0) == 0x80 and cp >= 0x800 and not (0xD800 <= cp < 0xE000):
            return True, 3, cp
    elif n >= 4 and (b0 & 0xF8) == 0xF0:
        b1 = np.int64(data[i + 1])
        b2 = np.int64(data[i + 2])
        b3 = np.int64(data[i + 3])
        cp = ((b0 & 0x07) << 18) | ((b1 & 0x3F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
        if (b1 & 0xC0) == 0x80 and (b2 & 0xC0) == 0x80 and (b3 & 0xC0) == 0x80 and 0x10000 <= cp <= 0x10FFFF:
            return True, 4, cp
    return False, 1, np.int64(0xFFFD)


@njit(cache=True, nogil=True, refcount=False, inline="always")
def _next_char(data, i, end):
    """(length, code point) of the character at ``data[i]`` of text known to be valid UTF-8 (the
    normalizer's output, or a Python string's bytes): the lead byte's length, no validation. Memory
    safe whatever the bytes: the length is clamped to ``end`` and the code point to the table."""
    b0 = np.int64(data[i])
    if b0 < 0xE0:
        if b0 < 0xC0 or i + 1 >= end:
            return 1, b0
        return 2, ((b0 & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F)
    if b0 < 0xF0:
        if i + 2 >= end:
            return 1, np.int64(0xFFFD)
        return 3, ((b0 & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6) | (np.int64(data[i + 2]) & 0x3F)
    if i + 3 >= end:
        return 1, np.int64(0xFFFD)
    cp = ((b0 & 0x07) << 18) | ((np.int64(data[i + 1]) & 0x3F) << 12) | ((np.int64(data[i + 2]) & 0x3F) << 6) | (
        np.int64(data[i + 3]) & 0x3F)
    return 4, cp if cp < 0x110000 else np.int64(0xFFFD)


@njit(cache=True, nogil=True, refcount=False)
def _ud_match(data, i, end, ud_ptr, ud_start, ud_len, ud_bytes):
    """Index (into the ``ud_*`` arrays) of the longest user-defined symbol ``data[i:end]`` starts
    with, -1 if none. Candidates are grouped by first byte, longest first."""
    b = np.int64(data[i])
    for k in range(ud_ptr[b], ud_ptr[b + 1]):
        n = ud_len[k]
        if n > end - i:
            continue
        s = ud_start[k]
        ok = True
        for t in range(1, n):
            if data[i + t] != ud_bytes[s + t]:
                ok = False
                break
        if ok:
            return k
    return -1


@njit(cache=True, nogil=True, refcount=False, inline="always")
def _trie_longest(trie, data, i, end):
    """Darts ``commonPrefixSearch``: (length, value) of the longest of the first 32 matches of
    ``data[i:end]``, (0, 0) if none. The trie was validated: every step stays inside it."""
    unit = np.int64(trie[0])
    pos = (unit >> 10) << ((unit & 512) >> 6)
    found = 0
    best_len = 0
    best_val = 0
    for k in range(i, end):
        c = np.int64(data[k])
        pos ^= c
        unit = np.int64(trie[pos])
        if (unit & 0x800000FF) != c:
            break
        pos ^= (unit >> 10) << ((unit & 512) >> 6)
        if (unit >> 8) & 1:
            if found < 32:
                best_len = k - i + 1
                best_val = np.int64(trie[pos]) & 0x7FFFFFFF
            found += 1
    return best_len, best_val


@njit(cache=True, nogil=True, refcount=False, inline="always")
def _prefix(data, i, end, trie, repl, ud_ptr, ud_start, ud_len, ud_bytes):
    """``NormalizePrefix`` at ``data[i:end]``: (source, start, length, consumed): the normalized text
    is ``data[start:start+length]`` (source 0) or ``repl[start:start+length]`` (source 1, a character
    map rule or U+FFFD)."""
    if ud_ptr[256] > 0:
        k = _ud_match(data, i, end, ud_ptr, ud_start, ud_len, ud_bytes)
        if k >= 0:
            return 0, i, ud_len[k], ud_len[k]
    if trie.size > 0:
        n, v = _trie_longest(trie, data, i, end)
        if n > 0:
            e = v
            while repl[e] != 0:
                e += 1
            return 1, v, e - v, n
    ok, n, cp = _decode(data, i, end)
    if ok:
        return 0, i, n, n
    return 1, repl.size - 4, 3, 1  # U+FFFD, kept at the end of ``repl``


@njit(cache=True, nogil=True, refcount=False, inline="always")
def _ws(out, n, escape):
    """Append the whitespace symbol: ``▁`` (``escape`` 1), else a space (0: a space; 2: a space standing
    for ``▁``). Returns the new length."""
    if escape == 1:
        out[n] = 0xE2
        out[n + 1] = 0x96
        out[n + 2] = 0x81
        return n + 3
    out[n] = 32
    return n + 1


@njit(cache=True, nogil=True)
def char_map(trie, repl, limit):
    """What the character map does to each code point below ``limit`` on its own: -2 nothing (no
    rule starts with the character), ``offset << 7 | clean << 6 | length`` its rule's string
    ``repl[offset:offset+length]`` (the character is a rule, and no longer rule starts with it;
    ``clean``: the string is not empty and holds no space, so it is copied as it is), -1 ask the trie (a
    longer rule starts with it: a combining sequence; a surrogate; a string of 64 bytes or more). The
    trie was validated: every transition and child probe stays inside it."""
    out = np.full(limit, -1, np.int32)
    if trie.size == 0:
        return out
    buf = np.zeros(4, np.int64)
    unit = np.int64(trie[0])
    root = (unit >> 10) << ((unit & 512) >> 6)
    for cp in range(limit):
        if 0xD800 <= cp < 0xE000:
            continue
        if cp < 0x80:
            buf[0] = cp
            ln = 1
        elif cp < 0x800:
            buf[0] = 0xC0 | (cp >> 6)
            buf[1] = 0x80 | (cp & 0x3F)
            ln = 2
        elif cp < 0x10000:
            buf[0] = 0xE0 | (cp >> 12)
            buf[1] = 0x80 | ((cp >> 6) & 0x3F)
            buf[2] = 0x80 | (cp & 0x3F)
            ln = 3
        else:
            buf[0] = 0xF0 | (cp >> 18)
            buf[1] = 0x80 | ((cp >> 12) & 0x3F)
            buf[2] = 0x80 | ((cp >> 6) & 0x3F)
            buf[3] = 0x80 | (cp & 0x3F)
            ln = 4
        pos = root
        alive = True
        early = False
        value = np.int64(-1)
        for k in range(ln):
            c = buf[k]
            q = pos ^ c
            if q >= trie.size:
                alive = False
                break
            unit = np.int64(trie[q])
            if (unit & 0x800000FF) != c:
                alive = False
                break
            pos = q ^ ((unit >> 10) << ((unit & 512) >> 6))
            if (unit >> 8) & 1:
                if k < ln - 1:
                    early = True  # a rule ends inside the character (not UTF-8): the trie decides
                elif pos < trie.size:
                    value = np.int64(trie[pos]) & 0x7FFFFFFF
                else:
                    early = True
        if early:
            continue
        if not alive:
            out[cp] = -2
            continue
        longer = False
        for c in range(256):
            q = pos ^ c
            if q < trie.size and (np.int64(trie[q]) & 0x800000FF) == c:
                longer = True
                break
        if longer:
            continue
        if value < 0:
            out[cp] = -2
            continue
        e = value
        while e < repl.size and repl[e] != 0:
            e += 1
        if e < repl.size and e - value < 64 and value < (1 << 24):
            clean = e > value
            for t in range(value, e):
                if repl[t] == 32:
                    clean = False
            out[cp] = np.int32((value << 7) | (np.int64(clean) << 6) | (e - value))
    return out


@njit(cache=True, nogil=True, refcount=False)
def normalize(data, trie, repl, plain, cont, run, follow, cmap, ud_ptr, ud_start, ud_len, ud_bytes, add_dummy_prefix,
              remove_extra, escape, suffix, out):
    """sentencepiece's ``Normalizer::Normalize`` of UTF-8 ``data`` (a Python string's bytes: valid)
    into ``out``: the length written, or -1 when ``out`` is too small (the caller retries with the
    bound ``3 * longest rule * len + 6``). ``escape``: 1 writes whitespace as ``▁``, 0 as a space
    (``escape_whitespaces`` off), 2 as a space standing for ``▁`` (the encoder reads it so: the text
    stays short and ASCII; the trailing whitespace removed is then both forms). ``repl`` ends with
    the bytes of U+FFFD and a NUL (the caller appends them). ``plain[b]``: no rule and no
    user-defined symbol starts with byte ``b``, so a character starting with it is itself (most
    characters: the loop takes them without a trie lookup); ``cont[b]``: for an ASCII byte starting
    rules none of which is the byte alone, a 256-bit set of the bytes that continue them (an ASCII
    letter starts only rules like ``a`` + a combining mark: one test keeps it plain). ``run[b]``: 1
    a plain byte other than a space, continuation bytes included when all are plain; 2 an ASCII byte
    ``cont`` may keep plain, copied unless the next byte is in ``follow`` (the union of those sets,
    0 in ``run``: a run ends there); runs of 1s and 2s are found first, then copied 8 bytes at a time;
    4 an ASCII byte that stands for one space on its own (a space, or a rule writing one space, no
    longer rule nor user-defined symbol starting there). ``cmap``: ``char_map``'s answer per code
    point (a table lookup instead of a trie walk; empty: none). All give what ``_prefix`` gives.
    Compiled without reference counting (``refcount=False``): ``out`` is the caller's."""
    end = data.size
    cap = out.size - 6  # room for the two whitespace symbols added at the ends
    n = 0
    if end == 0:
        return 0
    i = 0
    if remove_extra:
        while i < end:
            src, s, ln, used = _prefix(data, i, end, trie, repl, ud_ptr, ud_start, ud_len, ud_bytes)
            if ln != 1:
                break
            if (data[s] if src == 0 else repl[s]) != 32:
                break
            i += used
    if i >= end:
        return 0
    if not suffix and add_dummy_prefix:
        n = _ws(out, n, escape)
    prev_space = remove_extra
    nmap = cmap.size
    while i < end:
        b = data[i]
        r = run[b]
        if r == 4:  # an ASCII character that stands for a space on its own (a space, a newline...)
            if n + 3 > cap:
                return -1
            if not prev_space:
                n = _ws(out, n, escape)
            prev_space = remove_extra
            i += 1
            continue
        if r != 0:  # a run of characters that are themselves: found first, then copied
            j = i + 1
            while j < end and (run[data[j]] & 3) != 0:
                j += 1
            if j < end and follow[data[j]] and run[data[j - 1]] == 2:
                j -= 1  # an ASCII byte a rule may continue with the next one: the rules decide
            if j > i:
                if n + (j - i) > cap:
                    return -1
                t = 0
                while t < j - i and i + t + 8 <= end and n + t + 8 <= out.size:  # 8 bytes at a time (the
                    store_u64(out, n + t, load_u64(data, i + t))  # last may write past the run: room
                    t += 8                                        # the next characters overwrite)
                while t < j - i:
                    out[n + t] = data[i + t]
                    t += 1
                n += j - i
                i = j
                prev_space = False
                continue
        if b < 0x80:
            fast = plain[b]
            if not fast and (cont[b, 0] | cont[b, 1] | cont[b, 2] | cont[b, 3]) != 0:
                c = np.int64(data[i + 1]) if i + 1 < end else np.int64(-1)
                fast = c < 0 or (cont[b, c >> 6] >> np.uint64(c & 63)) & np.uint64(1) == 0
            if fast:  # no rule starts here: the character is itself
                if n + 3 > cap:
                    return -1
                if b == 32:
                    if not prev_space:
                        n = _ws(out, n, escape)
                    prev_space = remove_extra
                else:
                    out[n] = b
                    n += 1
                    prev_space = False
                i += 1
                continue
        elif plain[b]:  # (the text is a Python string's UTF-8: the lead byte gives the length)
            ln, cp = _next_char(data, i, end)
            if n + ln > cap:
                return -1
            for t in range(ln):
                out[n + t] = data[i + t]
            n += ln
            i += ln
            prev_space = False
            continue
        v = np.int64(-1)
        cl = 1
        if nmap > 0 and ud_ptr[b + 1] == ud_ptr[b]:  # the character alone decides: a table lookup
            ok, cl, cp = _decode(data, i, end)
            if ok and cp < nmap:
                v = np.int64(cmap[cp])
        if v >= 0 and (v >> 6) & 1 and b != 32:  # a rule whose string holds no space: copied
            s = v >> 7
            ln = v & 63
            if n + ln > cap:
                return -1
            for t in range(ln):
                out[n + t] = repl[s + t]
            n += ln
            i += cl
            prev_space = False
            continue
        if v == -2 and b != 32:  # no rule: the character is itself
            if n + cl > cap:
                return -1
            for t in range(cl):
                out[n + t] = data[i + t]
            n += cl
            i += cl
            prev_space = False
            continue
        if v == -2:
            src, s, ln, used = 0, i, cl, cl
        elif v >= 0:
            src, s, ln, used = 1, v >> 7, v & 63, cl
        else:
            src, s, ln, used = _prefix(data, i, end, trie, repl, ud_ptr, ud_start, ud_len, ud_bytes)
        a = s
        e = s + ln
        if prev_space:
            while a < e and (data[a] if src == 0 else repl[a]) == 32:
                a += 1
        if a < e:
            if n + 3 * (e - a) > cap:
                return -1
            if src == 0:
                for t in range(a, e):
                    c = data[t]
                    if c == 32:
                        n = _ws(out, n, escape)
                    else:
                        out[n] = c
                        n += 1
                prev_space = data[e - 1] == 32
            else:
                for t in range(a, e):
                    c = repl[t]
                    if c == 32:
                        n = _ws(out, n, escape)
                    else:
                        out[n] = c
                        n += 1
                prev_space = repl[e - 1] == 32
        i += used
        if not remove_extra:
            prev_space = False
    if remove_extra:
        while True:
            if escape != 0 and n >= 3 and out[n - 3] == 0xE2 and out[n - 2] == 0x96 and out[n - 1] == 0x81:
                n -= 3
            elif escape != 1 and n >= 1 and out[n - 1] == 32:
                n -= 1
            else:
                break
    if suffix and add_dummy_prefix:
        n = _ws(out, n, escape)
    return n


# ------------------------------------------------------------------------------ pair table
@njit(cache=True, nogil=True)
def build_pair_table(lefts, rights, values):
    """``_pairs.pair_table`` (``left << 32 | right`` -> ``rank << 32 | merged id``) and the filter in front of it."""
    table = pair_table(lefts, rights, values)
    return table, table_filter(table)


@njit(cache=True, nogil=True, refcount=False, inline="always")
def _maybe(filt, key):
    """False when ``key`` is certainly not in the filter."""
    h = pair_hash(key)
    w = filt[np.int64((h >> np.uint64(32)) & np.uint64(filt.size - 1))]
    return ((w >> (h >> np.uint64(58))) & (w >> ((h >> np.uint64(52)) & np.uint64(63))) & np.uint64(1)) != 0


@njit(cache=True, nogil=True, refcount=False, inline="always")
def _pair(table, filt, left, right):
    """``rank << 32 | merged id`` of the pair, ``_BIG`` if its concatenation is no mergeable piece."""
    key = (np.int64(left) << 32) | np.int64(right)
    h = pair_hash(key)
    hi = h >> np.uint64(32)
    w = filt[np.int64(hi & np.uint64(filt.size - 1))]
    if ((w >> (h >> np.uint64(58))) & (w >> ((h >> np.uint64(52)) & np.uint64(63))) & np.uint64(1)) == 0:
        return _BIG
    mask = table.shape[0] - 1
    i = np.int64(hi & np.uint64(mask))
    while True:
        k = table[i, 0]
        if k == key:
            return table[i, 1]
        if k == -1:
            return _BIG
        i = (i + 1) & mask


# ------------------------------------------------------------------------------ BPE on one segment
@njit(cache=True, nogil=True, refcount=False, inline="always")
def _merge_short(syms, pos, n, table, filt, ranks):
    """Merge ``syms[:n]`` in place (``pos`` moves along): the best rank first, leftmost on ties."""
    for i in range(n - 1):
        ranks[i] = _pair(table, filt, syms[i], syms[i + 1])
    while n > 1:
        best = _BIG >> 32  # no pair: ``_BIG``'s rank part
        at = -1
        for i in range(n - 1):
            r = ranks[i] >> 32
            if r < best:
                best = r
                at = i
        if at < 0:
            break
        syms[at] = ranks[at] & _LOW
        for i in range(at + 1, n - 1):
            syms[i] = syms[i + 1]
            pos[i] = pos[i + 1]
            ranks[i] = ranks[i + 1]
        n -= 1
        if at > 0:
            ranks[at - 1] = _pair(table, filt, syms[at - 1], syms[at])
        if at < n - 1:
            ranks[at] = _pair(table, filt, syms[at], syms[at + 1])
    return n


@njit(cache=True, nogil=True, refcount=False)
def _merge_long(syms, pos, n, table, filt, nxt, prv, heap):
    """Heap of ``rank << 32 | left position`` over linked symbols; an entry is used only if the pair
    now at its position still has its rank (sentencepiece keeps such a pair's own entry, with the same
    key). Returns the new length (``syms``/``pos`` compacted). ``nxt``, ``prv``: room for ``n``;
    ``heap``: for ``3 * n`` (``n - 1`` pairs, then at most two new ones per merge)."""
    for i in range(n):
        nxt[i] = i + 1
        prv[i] = i - 1
    nxt[n - 1] = -1
    hn = 0
    for i in range(n - 1):
        r = _pair(table, filt, syms[i], syms[i + 1])
        if r != _BIG:
            heap_push(heap, hn, ((r >> 32) << 32) | i)
            hn += 1
    while hn > 0:
        top = heap[0]
        heap_pop(heap, hn)
        hn -= 1
        rank = top >> 32
        i = top & _LOW
        j = nxt[i]
        if syms[i] < 0 or j < 0:
            continue
        v = _pair(table, filt, syms[i], syms[j])
        if v >> 32 != rank:
            continue
        nid = v & _LOW
        syms[i] = nid
        syms[j] = -1
        k = nxt[j]
        nxt[i] = k
        if k >= 0:
            prv[k] = i
            rk = _pair(table, filt, nid, syms[k])
            if rk != _BIG:
                heap_push(heap, hn, ((rk >> 32) << 32) | i)
                hn += 1
        h = prv[i]
        if h >= 0:
            rh = _pair(table, filt, syms[h], nid)
            if rh != _BIG:
                heap_push(heap, hn, ((rh >> 32) << 32) | h)
                hn += 1
    m = 0
    for i in range(n):
        if syms[i] >= 0:
            syms[m] = syms[i]
            pos[m] = pos[i]
            m += 1
    return m


@njit(cache=True, nogil=True, refcount=False, inline="always")
def _sym_at(data, i, end, cp_info, ws_info, space_ws):
    """(info, byte length) of the character at ``data[i]`` (valid UTF-8); a space is ``▁`` when
    ``space_ws``."""
    b = np.int64(data[i])
    if b < 0x80:
        if b == 32 and space_ws:
            return ws_info, 1
        return np.int64(cp_info[b]), 1
    n, cp = _next_char(data, i, end)
    return np.int64(cp_info[cp]), n


@njit(cache=True, nogil=True, refcount=False, inline="always")
def _unknown(data, p, end, space_ws, byte_fallback, byte_ids, unk, fuse, out, o, first):
    """Write the ids of an unknown character at ``data[p]`` into ``out[o:]``: its UTF-8 bytes as byte
    pieces (``byte_fallback``, when each byte has one), else the unknown id (none if ``unk`` is -1),
    not again if ``out[o-1]`` (``o > first``) is one and ``fuse`` (a run of them is one id). Returns
    the new end."""
    if byte_fallback:
        b = np.int64(data[p])
        if b == 32 and space_ws:  # ``▁``, written as a space in the text
            if byte_ids[0xE2] >= 0 and byte_ids[0x96] >= 0 and byte_ids[0x81] >= 0:
                out[o] = byte_ids[0xE2]
                out[o + 1] = byte_ids[0x96]
                out[o + 2] = byte_ids[0x81]
                return o + 3
        else:
            ok, n, cp = _decode(data, p, end)
            every = True
            for t in range(n):
                if byte_ids[data[p + t]] < 0:
                    every = False
            if every:
                for t in range(n):
                    out[o + t] = byte_ids[data[p + t]]
                return o + n
    if unk < 0:
        return o
    if fuse and o > first and out[o - 1] == unk:
        return o
    out[o] = unk
    return o + 1


@njit(cache=True, nogil=True, refcount=False, inline="always")
def _segment(data, a, b, cp_info, ws_info, space_ws, table, filt, kind, byte_fallback, byte_ids, unk, fuse,
             syms, pos, ranks, nxt, prv, heap, out, o):
    """BPE of the segment ``data[a:b]``, its ids written to ``out[o:]`` (room: 3 per byte; ``syms``,
    ``pos``, ``ranks``, ``nxt``, ``prv``: room for its characters, ``heap`` for 3 per character).
    Returns (end, whether an UNUSED piece is left, which only sentencepiece's split-back over the
    whole text resolves)."""
    n = 0
    p = a
    while p < b:
        info, ln = _sym_at(data, p, b, cp_info, ws_info, space_ws)
        syms[n] = info & _SYM if info >= 0 else -2
        pos[n] = p
        n += 1
        p += ln
    if n > _SHORT:
        n = _merge_long(syms, pos, n, table, filt, nxt, prv, heap)
    elif n > 1:
        n = _merge_short(syms, pos, n, table, filt, ranks)
    m = o
    unused = False
    for t in range(n):
        s = syms[t]
        k = K_UNKNOWN if s < 0 else kind[s]
        if k == K_PIECE:
            out[m] = s
            m += 1
        elif k == K_UNKNOWN:
            m = _unknown(data, pos[t], b, space_ws, byte_fallback, byte_ids, unk, fuse, out, m, o)
        else:
            unused = True
            out[m] = s
            m += 1
    return m, unused


# ------------------------------------------------------------------------------ the segment cache
@njit(cache=True, nogil=True, refcount=False)
def _find(ctab, c_start, c_len, c_bytes, data, a, b, h):
    """Slot of the big table holding segment ``data[a:b]``, or the empty slot where it would go."""
    mask = ctab.size - 1
    i = np.int64(h & np.uint64(mask))
    tag = np.int64((h >> np.uint64(32)) & np.uint64(0x7FFFFFFF))
    n = b - a
    while True:
        v = ctab[i]
        if v == -1:
            return i
        if v >> 32 == tag:
            e = v & _LOW
            if c_len[e] == n:
                s = c_start[e]
                same = True
                for t in range(n):
                    if c_bytes[s + t] != data[a + t]:
                        same = False
                        break
                if same:
                    return i
        i = (i + 1) & mask


@njit(cache=True, nogil=True, refcount=False)
def _insert(ctab, ent, c_bytes, c_ids, sizes, data, a, b, h, ids, o, m):
    """Cache segment ``data[a:b]`` -> ``ids[o:m]``; the cache is cleared first when it is full (its
    arrays never grow: reallocating them inside the encoder's loop made every segment pay numba's
    reference counting)."""
    n = b - a
    if 2 * (sizes[0] + 1) > ctab.size or sizes[0] + 1 > ent.shape[0] or sizes[1] + n > c_bytes.size or (
            sizes[2] + m - o > c_ids.size):
        ctab[:] = -1
        sizes[0] = 0
        sizes[1] = 0
        sizes[2] = 0
        if n > c_bytes.size or m - o > c_ids.size:
            return
    slot = _find(ctab, ent[:, 0], ent[:, 1], c_bytes, data, a, b, h)
    e = sizes[0]
    ctab[slot] = (np.int64((h >> np.uint64(32)) & np.uint64(0x7FFFFFFF)) << 32) | e
    ent[e, 0] = sizes[1]
    ent[e, 1] = n
    ent[e, 2] = sizes[2]
    ent[e, 3] = m - o
    for t in range(n):
        c_bytes[sizes[1] + t] = data[a + t]
    for t in range(m - o):
        c_ids[sizes[2] + t] = ids[o + t]
    sizes[0] += 1
    sizes[1] += n
    sizes[2] += m - o


@njit(cache=True, nogil=True, refcount=False)
def _lookup(ctab, ent, c_bytes, c_ids, data, a, b, h, out, o):
    """Copy the cached ids of segment ``data[a:b]`` to ``out[o:]``: the new end, or -1 if not cached."""
    v = ctab[_find(ctab, ent[:, 0], ent[:, 1], c_bytes, data, a, b, h)]
    if v == -1:
        return -1
    e = v & _LOW
    s = ent[e, 2]
    m = ent[e, 3]
    for t in range(m):
        out[o + t] = c_ids[s + t]
    return o + m


_NIB = np.uint64(0x0FFFFFFFFFFFFFFF)  # key bits of a short segment's second word (the top 4: its id count)


@njit(cache=True, nogil=True, refcount=False, inline="always")
def _short_slot(stab, k0, k1):
    """Slot of the short-segment table holding key ``(k0, k1)``, or the empty slot where it goes."""
    mask = stab.shape[0] - 1
    i = np.int64(mix64(np.int64((k0 ^ (k1 * _FIB)) & np.uint64(0x7FFFFFFFFFFFFFFF))) & np.uint64(mask))
    while True:
        w = np.uint64(stab[i, 1])
        if w == 0 or (np.uint64(stab[i, 0]) == k0 and (w & _NIB) == k1):
            return i
        i = (i + 1) & mask


@njit(cache=True, nogil=True, refcount=False)
def _short_insert(stab, s_ids, sizes, slot, k0, k1, ids, o, m):
    """Remember short segment ``(k0, k1)`` -> ``ids[o:m]`` at ``slot`` (its empty slot): up to 4 ids
    inline, more in ``s_ids``. Returns False when the table is full (the caller clears it)."""
    c = m - o
    if 2 * (sizes[3] + 1) > stab.shape[0] or (c > 4 and sizes[4] + c > s_ids.size):
        return False
    stab[slot, 0] = np.int64(k0)
    if c <= 4:
        v0 = np.int64(0)
        v1 = np.int64(0)
        for t in range(c):
            x = np.int64(ids[o + t]) & _LOW
            if t == 0:
                v0 |= x
            elif t == 1:
                v0 |= x << 32
            elif t == 2:
                v1 |= x
            else:
                v1 |= x << 32
        stab[slot, 2] = v0
        stab[slot, 3] = v1
        stab[slot, 1] = np.int64(k1 | (np.uint64(c) << np.uint64(60)))
    else:
        stab[slot, 2] = sizes[4]
        stab[slot, 3] = c
        for t in range(c):
            s_ids[sizes[4] + t] = ids[o + t]
        sizes[4] += c
        stab[slot, 1] = np.int64(k1 | (np.uint64(15) << np.uint64(60)))
    sizes[3] += 1
    return True


# ------------------------------------------------------------------------------ the encoder
@njit(cache=True, nogil=True)
def encode(data, docs, cp_info, ws_info, space_ws, ws_cp, ws_rule, abig, bfilt, table, filt, kind, byte_fallback,
           byte_ids, unk, fuse_unk, ud_ptr, ud_start, ud_len, ud_bytes, ud_id, hot, stab, s_ids, ctab, ent, c_bytes, c_ids,
           sizes, seen, out, bounds, slow):
    """Encode the documents ``data[docs[k]:docs[k+1]]`` (normalized UTF-8; a space is ``▁`` when
    ``space_ws``) into ``out``: :func:`_encode`, with its merge buffers (made here: the loop itself is
    compiled without reference counting, so makes no array), made larger when a segment needs it."""
    st = np.zeros(4, np.int64)
    st[1] = -1
    cap = 256
    while True:
        need = _encode(data, docs, cp_info, ws_info, space_ws, ws_cp, ws_rule, abig, bfilt, table, filt, kind,
                       byte_fallback, byte_ids, unk, fuse_unk, ud_ptr, ud_start, ud_len, ud_bytes, ud_id, hot, stab,
                       s_ids, ctab, ent, c_bytes, c_ids, sizes, seen, out, bounds, slow, st, np.empty(cap, np.int64),
                       np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64),
                       np.empty(cap, np.int64), np.empty(3 * cap + 16, np.int64))
        if need == 0:
            return
        cap = max(2 * cap, need)


@njit(cache=True, nogil=True, refcount=False)
def _encode(data, docs, cp_info, ws_info, space_ws, ws_cp, ws_rule, abig, bfilt, table, filt, kind, byte_fallback,
           byte_ids, unk, fuse_unk, ud_ptr, ud_start, ud_len, ud_bytes, ud_id, hot, stab, s_ids, ctab, ent, c_bytes, c_ids,
           sizes, seen, out, bounds, slow, st, syms, pos, ranks, nxt, prv, heap):
    """Encode the documents ``data[docs[k]:docs[k+1]]`` (normalized UTF-8; a space is ``▁`` when
    ``space_ws``; ``ws_cp``: the code point of the whitespace symbol, ``▁`` or a space; ``ws_rule``:
    cut before a ``▁`` after another character (1), after a ``▁`` before another one (2), before
    every ``▁`` (3, a word per ``▁``), never for ``▁`` (0)) into ``out``
    (room: 3 ids per byte); ``bounds[k]`` receives document ``k``'s first id slot (``bounds[-1]``
    the total), ``slow[k]`` whether it left an UNUSED piece (the caller encodes it again in Python).

    Adjacent characters no piece holds side by side are a cut too: ``abig`` (128 x 128 bits) says for
    two ASCII bytes (32 standing for ``▁`` when ``space_ws``), the Bloom filter ``bfilt`` over
    ``left symbol << 32 | right symbol`` for other pairs (a false positive only misses a cut).

    The per-thread cache: ``stab``/``s_ids``, a table of segments up to 15 bytes (one 32-byte slot:
    two key words, the bytes and the length, then up to 4 ids inline; more in ``s_ids``), with ``hot``
    in front, a direct-mapped copy of the slots last used (4,096: it stays in cache); ``ctab``/
    ``ent``/``c_bytes``/``c_ids``, a table of longer segments up to ``CACHE_MAX_BYTES`` admitted on
    their second sighting (``seen``: hashes seen once). ``sizes``: entries and ids used of each. A
    table is cleared when full.

    Resumable: ``st`` holds (document, segment start or -1, ids written, slow) where it stopped. It
    stops (returns the characters needed) at a segment longer than the merge buffers (``syms``...),
    which the caller makes larger before calling again; 0 when done."""
    cap = syms.size
    d = st[0]
    nout = st[2]
    has_ud = ud_ptr[256] > 0
    fmask = seen.size - 1
    while d < docs.size - 1:
        if st[1] >= 0:  # resumed at a segment
            p = st[1]
            is_slow = st[3] != 0
            st[1] = -1
        else:
            bounds[d] = nout
            p = docs[d]
            is_slow = False
        first = bounds[d]
        end = docs[d + 1]
        seg = p
        prev_cut = True  # the previous character cuts (or there is none)
        prev_ws = False
        prev_b = np.int64(-1)  # the previous character's byte if ASCII
        prev_sym = np.int64(0)
        # the character that ended the last segment, read once: it starts the next one
        pending = False
        pend_info = np.int64(-1)
        pend_ln = np.int64(1)
        pend_ws = False
        pend_cb = np.int64(-1)
        while True:
            # -- find the end of the segment starting at ``seg``: the next cut at or after ``p``
            ud = -1
            nchars = 0
            first_info = np.int64(-1)
            while p < end:
                if pending:
                    pending = False
                    info = pend_info
                    ln = pend_ln
                    ws = pend_ws
                    cb = pend_cb
                else:
                    b = np.int64(data[p])
                    if has_ud and ud_ptr[b + 1] > ud_ptr[b]:
                        ud = _ud_match(data, p, end, ud_ptr, ud_start, ud_len, ud_bytes)
                        if ud >= 0:
                            break
                    if b < 0x80:
                        if b == 32 and space_ws:
                            info = ws_info
                            ws = True
                        else:
                            info = np.int64(cp_info[b])
                            ws = b == ws_cp
                        ln = np.int64(1)
                        cb = b
                    else:
                        ln, cp = _next_char(data, p, end)
                        info = np.int64(cp_info[cp])
                        if p == seg and (info >> 29) == 3:  # cut, and a piece: written at once (most Han)
                            out[nout] = info & _SYM
                            nout += 1
                            p += ln
                            seg = p
                            continue
                        ws = cp == ws_cp
                        cb = np.int64(-1)
                cut = info < 0 or (info >> 30) != 0
                sym = info & _SYM
                if cut and p == seg:
                    # a character no multi-character piece holds: a segment of its own, written here
                    # (most characters of Chinese text under most vocabularies)
                    k = K_UNKNOWN if info < 0 else kind[sym]
                    if k == K_PIECE:
                        out[nout] = sym
                        nout += 1
                    elif k == K_UNKNOWN:
                        nout = _unknown(data, p, end, space_ws, byte_fallback, byte_ids, unk, fuse_unk, out, nout,
                                        first)
                    else:
                        out[nout] = sym
                        nout += 1
                        is_slow = True
                    p += ln
                    seg = p
                    continue
                if p > seg:
                    if cut or prev_cut or (ws_rule == 1 and ws and not prev_ws) or (ws_rule == 2 and prev_ws and not ws) or (
                            ws_rule == 3 and ws):
                        pending = True
                    elif prev_b >= 0 and cb >= 0:
                        pending = (abig[2 * prev_b + (cb >> 6)] >> np.uint64(cb & 63)) & np.uint64(1) == 0
                    else:
                        pending = not _maybe(bfilt, (prev_sym << 32) | sym)
                    if pending:  # a cut before this character: kept for the next segment
                        pend_info = info
                        pend_ln = ln
                        pend_ws = ws
                        pend_cb = cb
                        break
                else:
                    first_info = info
                nchars += 1
                prev_cut = cut
                prev_ws = ws
                prev_b = cb
                prev_sym = sym
                p += ln
            # -- the ids of segment ``data[seg:p]``: from the cache, else BPE
            if p > seg and nchars == 1:  # one character: its piece, or unknown (no cache)
                o = nout
                k = K_UNKNOWN if first_info < 0 else kind[first_info & _SYM]
                if k == K_PIECE:
                    out[o] = first_info & _SYM
                    m = o + 1
                elif k == K_UNKNOWN:
                    m = _unknown(data, seg, p, space_ws, byte_fallback, byte_ids, unk, fuse_unk, out, o, first)
                else:
                    out[o] = first_info & _SYM
                    m = o + 1
                    is_slow = True
                nout = m
            elif p > seg:
                a = seg
                n = p - a
                o = nout
                m = -1
                slot = -1
                hs = 0
                k0 = np.uint64(0)
                k1 = np.uint64(0)
                h = np.uint64(0)
                if n <= _SMALL:
                    if a + 16 <= data.size:  # the bytes as two little-endian words, in two loads
                        if n >= 8:
                            k0 = load_u64(data, a)
                            k1 = load_u64(data, a + 8) & ((np.uint64(1) << np.uint64(8 * (n - 8))) - np.uint64(1))
                        else:
                            k0 = load_u64(data, a) & ((np.uint64(1) << np.uint64(8 * n)) - np.uint64(1))
                    else:
                        for t in range(min(n, 8)):
                            k0 |= np.uint64(data[a + t]) << np.uint64(8 * t)
                        for t in range(8, n):
                            k1 |= np.uint64(data[a + t]) << np.uint64(8 * (t - 8))
                    k1 |= np.uint64(n) << np.uint64(56)
                    hk = mix64(np.int64((k0 ^ (k1 * _FIB)) & np.uint64(0x7FFFFFFFFFFFFFFF)))
                    hs = np.int64(hk >> np.uint64(40)) & (hot.shape[0] - 1)
                    if np.uint64(hot[hs, 0]) == k0 and (np.uint64(hot[hs, 1]) & _NIB) == k1:
                        # the hot table: direct-mapped, small enough to stay in cache (the frequent words)
                        w = np.uint64(hot[hs, 1])
                        v0 = hot[hs, 2]
                        v1 = hot[hs, 3]
                        c = np.int64(w >> np.uint64(60))
                        out[o] = v0 & _LOW
                        if c > 1:
                            out[o + 1] = v0 >> 32
                        if c > 2:
                            out[o + 2] = v1 & _LOW
                        if c > 3:
                            out[o + 3] = v1 >> 32
                        m = o + c
                        w = np.uint64(0)
                    else:
                        slot = _short_slot(stab, k0, k1)
                        w = np.uint64(stab[slot, 1])
                    if w != 0:
                        c = np.int64(w >> np.uint64(60))
                        if c <= 4:
                            v0 = stab[slot, 2]
                            v1 = stab[slot, 3]
                            hot[hs, 0] = stab[slot, 0]
                            hot[hs, 1] = stab[slot, 1]
                            hot[hs, 2] = v0
                            hot[hs, 3] = v1
                            if c > 0:
                                out[o] = v0 & _LOW
                            if c > 1:
                                out[o + 1] = v0 >> 32
                            if c > 2:
                                out[o + 2] = v1 & _LOW
                            if c > 3:
                                out[o + 3] = v1 >> 32
                        else:
                            c = stab[slot, 3]
                            s0 = stab[slot, 2]
                            for t in range(c):
                                out[o + t] = s_ids[s0 + t]
                        m = o + c
                elif n <= CACHE_MAX_BYTES:
                    h = fnv1a(data, a, p)
                    m = _lookup(ctab, ent, c_bytes, c_ids, data, a, p, h, out, o)
                if m < 0:
                    if n > cap:  # (bytes: at least its characters) the caller makes the buffers larger
                        st[0] = d
                        st[1] = a
                        st[2] = nout
                        st[3] = is_slow
                        return n
                    m, unused = _segment(data, a, p, cp_info, ws_info, space_ws, table, filt, kind, byte_fallback,
                                         byte_ids, unk, fuse_unk, syms, pos, ranks, nxt, prv, heap, out, o)
                    if unused:
                        is_slow = True
                    elif n <= _SMALL:
                        if slot < 0:
                            slot = _short_slot(stab, k0, k1)
                        if not _short_insert(stab, s_ids, sizes, slot, k0, k1, out, o, m):
                            stab[:, 1] = 0
                            sizes[3] = 0
                            sizes[4] = 0
                            slot = _short_slot(stab, k0, k1)
                            _short_insert(stab, s_ids, sizes, slot, k0, k1, out, o, m)
                        if m - o <= 4:
                            hot[hs, 0] = stab[slot, 0]
                            hot[hs, 1] = stab[slot, 1]
                            hot[hs, 2] = stab[slot, 2]
                            hot[hs, 3] = stab[slot, 3]
                    elif n <= CACHE_MAX_BYTES:
                        fs = np.int64(h & np.uint64(fmask))
                        if seen[fs] != h:  # admitted on the second sighting
                            seen[fs] = h
                        else:
                            _insert(ctab, ent, c_bytes, c_ids, sizes, data, a, p, h, out, o, m)
                if fuse_unk and unk >= 0 and m > o and o > first and out[o] == unk and out[o - 1] == unk:
                    for t in range(o, m - 1):  # a run of unknown ids across segments is one id
                        out[t] = out[t + 1]
                    m -= 1
                nout = m
            if p >= end:
                break
            seg = p
            prev_cut = True
            prev_ws = False
            prev_b = -1
            if ud >= 0:  # a user-defined symbol: its own segment, never merged
                out[nout] = ud_id[ud]
                nout += 1
                p += ud_len[ud]
                seg = p
                if p >= end:
                    break
        slow[d] = is_slow
        d += 1
    bounds[docs.size - 1] = nout
    return 0


# ------------------------------------------------------------------------------ decode
@njit(cache=True, nogil=True, inline="always")
def _flush_bytes(queue, ql, out, o, replace):
    """Append the run of byte pieces ``queue[:ql]`` to ``out`` at ``o`` (``replace``: each byte that starts no
    valid character as U+FFFD); the new end of ``out``."""
    i = 0
    while i < ql:
        if replace:
            ok, n, _ = _decode(queue, i, ql)
        else:
            ok, n = True, 1
        if ok:
            for j in range(n):
                out[o + j] = queue[i + j]
            o += n
        else:
            out[o] = 0xEF
            out[o + 1] = 0xBF
            out[o + 2] = 0xBD
            o += 3
        i += n
    return o


@njit(cache=True, nogil=True)
def decode_pieces(ids, blob, starts, types, lead_ws, strip_first, rew, replace):
    """sentencepiece's ``decode`` of ``ids``: ``(the decoded bytes, -1)``, or ``(nothing, k)`` where ``ids[k]`` is
    outside the tables (every id checked before any is used). ``sentencepiece.decode_reference`` is its
    readable twin: control pieces dropped, ``▁`` a space (``blob``/``starts``: each id's surface, ``▁`` as a
    space, an unknown piece's the model's, a byte piece its byte, a control piece nothing), the text's first
    ``▁`` dropped while nothing has been written (``lead_ws``: a piece starts with one; with
    ``remove_extra_whitespaces``, every leading piece that is only ``▁``), runs of byte pieces joined and
    (``replace``) each byte of a run that starts no valid character made U+FFFD, sentencepiece's rule
    (Python's ``"replace"`` makes one U+FFFD of a truncated sequence). It makes its output: compiled with
    reference counting, unlike the encoder's loops."""
    n = types.size
    room = 0
    for k in range(ids.size):
        i = ids[k]
        if i < 0 or i >= n:
            return np.empty(0, np.uint8), k
        room += starts[i + 1] - starts[i]
    out = np.empty(3 * room, np.uint8)  # (a byte piece's one byte may become U+FFFD's three)
    queue = np.empty(ids.size, np.uint8)
    o = 0
    ql = 0
    bos_ws = True
    for k in range(ids.size):
        i = ids[k]
        t = types[i]
        if t == BYTE:
            queue[ql] = blob[starts[i]]
            ql += 1
            continue
        if ql:
            o = _flush_bytes(queue, ql, out, o, replace)
            ql = 0
        if o:
            bos_ws = False
        if t == CONTROL:
            continue
        s = starts[i]
        has_bos_ws = False
        if bos_ws and strip_first and lead_ws[i]:
            if t != UNKNOWN:
                s += 1  # the first ``▁``, a space in the surface
            has_bos_ws = not rew
        for j in range(s, starts[i + 1]):
            out[o] = blob[j]
            o += 1
        if has_bos_ws or o:
            bos_ws = False
    if ql:
        o = _flush_bytes(queue, ql, out, o, replace)
    return out[:o].copy(), -1
