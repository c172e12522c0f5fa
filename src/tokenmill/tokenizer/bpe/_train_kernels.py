"""numba kernels for training: the incremental merge loop over flat linked symbols.

Same algorithm and data layout as ``merges.learn_merges`` (its pure-Python twin, which the tests
hold it equal to), with hand-rolled structures so nothing allocates per operation:

* pair table: open addressing (linear probing) from ``key = left << 32 | right`` to a dense pair slot;
  per slot the weighted count, the head of its occurrence list, and a touch mark;
* occurrence lists: one growing arena of ``(position, next entry)`` int32 links; entries go stale
  and are re-checked on use;
* heap: a binary min-heap on ``(-count, key)``, i.e. highest count first, ties to the smaller pair,
  with lazy invalidation.
"""

from __future__ import annotations

import numpy as np

from ..._jit import njit
from ._hashing import mix64


@njit(cache=True, nogil=True)
def _probe(tab, key):
    """Row of ``key`` in the open-addressing table ``tab`` ((cap, 2): key, slot), or of the empty row where it goes."""
    mask = tab.shape[0] - 1
    i = np.int64(mix64(key) & np.uint64(mask))
    while True:
        k = tab[i, 0]
        if k == key or k == -1:
            return i
        i = (i + 1) & mask


@njit(cache=True, nogil=True)
def _rehash(tab, new_cap):
    new = np.full((new_cap, 2), -1, np.int64)
    for i in range(tab.shape[0]):
        k = tab[i, 0]
        if k != -1:
            j = _probe(new, k)
            new[j, 0] = k
            new[j, 1] = tab[i, 1]
    return new


@njit(cache=True, nogil=True)
def _slot_of(tab, S, nslots, key):
    """The pair slot of ``key``, created if new. Returns (tab, S, nslots, slot)."""
    i = _probe(tab, key)
    if tab[i, 0] == -1:
        if 2 * (nslots + 1) > tab.shape[0]:
            tab = _rehash(tab, 2 * tab.shape[0])
            i = _probe(tab, key)
        if nslots == S.shape[0]:
            S2 = np.empty((2 * S.shape[0], 4), np.int64)
            S2[:nslots] = S[:nslots]
            S = S2
        tab[i, 0] = key
        tab[i, 1] = nslots
        S[nslots, 0] = key
        S[nslots, 1] = 0
        S[nslots, 2] = -1
        S[nslots, 3] = -1
        nslots += 1
    return tab, S, nslots, tab[i, 1]


@njit(cache=True, nogil=True)
def _grow(a, n, fill):
    b = np.full(max(2 * a.size, n), fill, a.dtype)
    b[: a.size] = a
    return b


@njit(cache=True, nogil=True)
def _heap_push(hneg, hkey, n, neg, key):
    if n == hneg.size:
        hneg = _grow(hneg, n + 1, 0)
        hkey = _grow(hkey, n + 1, 0)
    i = n
    while i > 0:
        parent = (i - 1) >> 1
        if hneg[parent] < neg or (hneg[parent] == neg and hkey[parent] <= key):
            break
        hneg[i] = hneg[parent]
        hkey[i] = hkey[parent]
        i = parent
    hneg[i] = neg
    hkey[i] = key
    return hneg, hkey, n + 1


@njit(cache=True, nogil=True)
def _heap_pop(hneg, hkey, n):
    """Remove the top; returns the new size."""
    n -= 1
    neg = hneg[n]
    key = hkey[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and (hneg[c + 1] < hneg[c] or (hneg[c + 1] == hneg[c] and hkey[c + 1] < hkey[c])):
            c += 1
        if neg < hneg[c] or (neg == hneg[c] and key <= hkey[c]):
            break
        hneg[i] = hneg[c]
        hkey[i] = hkey[c]
        i = c
    if n > 0:
        hneg[i] = neg
        hkey[i] = key
    return n


@njit(cache=True, nogil=True)
def learn_merges_kernel(rec, num_merges, min_frequency, max_token_bytes, progress):
    """Learn up to ``num_merges`` merges.

    ``rec``: (n, 5) rows ``(symbol, next, prev, weight, pair slot)`` per position, modified in place;
    ``pair slot`` names the pair that starts at that position, so a merge decrements its neighbours'
    pairs without a hash lookup. Rows, slots ``(key, count, head, mark)`` and table entries
    ``(key, slot)`` are each one record: the merge loop is bound by cache misses (zh: millions of
    distinct pairs), and one record per object is one miss instead of three or four.
    Returns (pairs (M, 2), counts (M,), stop code 0 vocab, 1 no pairs, 2 min freq, 3 asked to stop);
    ``progress[0]`` counts merges done (read by a Python thread for the progress bar); a non-zero
    ``progress[1]`` (set by the caller's thread on Ctrl-C) stops the loop at its next merge (or the next
    million positions of its set-up).
    """
    n = rec.shape[0]
    tab = np.full((1 << 17, 2), -1, np.int64)
    S = np.empty((1 << 16, 4), np.int64)  # per pair slot: key, count, occurrence head, touch mark
    nslots = 0
    occ = np.empty((max(n, 16), 2), np.int32)  # occurrence arena: position, next entry
    nocc = 0
    touched = np.empty(1024, np.int64)
    buf = np.empty(1024, np.int64)
    tlen = np.ones(256 + num_merges, np.int64)
    out_pairs = np.empty((num_merges, 2), np.int64)
    out_counts = np.empty(num_merges, np.int64)

    # ---- initial pairs
    for p in range(n):
        if (p & 0xFFFFF) == 0 and progress[1] != 0:
            return out_pairs[:0].copy(), out_counts[:0].copy(), 3
        rec[p, 4] = -1
        q = rec[p, 1]
        if q < 0:
            continue
        key = (np.int64(rec[p, 0]) << 32) | np.int64(rec[q, 0])
        tab, S, nslots, s = _slot_of(tab, S, nslots, key)
        rec[p, 4] = s
        S[s, 1] += rec[p, 3]
        occ, nocc = _occ_push(occ, nocc, S, s, p)

    hneg = np.empty(max(nslots, 16), np.int64)
    hkey = np.empty(max(nslots, 16), np.int64)
    hn = 0
    for s in range(nslots):
        hneg, hkey, hn = _heap_push(hneg, hkey, hn, -S[s, 1], S[s, 0])

    m = 0
    stop = 1
    while m < num_merges:
        if progress[1] != 0:
            stop = 3
            break
        # ---- pop the best valid pair
        best = -1
        bc = 0
        while hn > 0:
            neg = hneg[0]
            key = hkey[0]
            s = tab[_probe(tab, key), 1]
            cur = S[s, 1]
            hn = _heap_pop(hneg, hkey, hn)
            if cur == -neg:
                a = key >> 32
                b = key & 0xFFFFFFFF
                if max_token_bytes > 0 and tlen[a] + tlen[b] > max_token_bytes:
                    S[s, 1] = 0  # never mergeable: forget it
                    continue
                best = s
                bc = cur
                break
            if 0 < cur < -neg:
                hneg, hkey, hn = _heap_push(hneg, hkey, hn, -cur, key)
        if best < 0:
            stop = 1
            break
        if bc < min_frequency:
            stop = 2
            break
        key = S[best, 0]
        a = key >> 32
        b = key & 0xFFFFFFFF
        z = 256 + m
        # ---- collect, sort and dedupe this pair's positions
        cnt = 0
        e = S[best, 2]
        while e != -1:
            if cnt == buf.size:
                buf = _grow(buf, cnt + 1, 0)
            buf[cnt] = occ[e, 0]
            cnt += 1
            e = occ[e, 1]
        S[best, 2] = -1
        # Order matters only when occurrences can overlap (a == b, as in "aaa"): then left to right.
        # Otherwise the list order (reverse insertion) is fine and saves a sort per merge.
        pos = np.sort(buf[:cnt]) if a == b else buf[:cnt]
        ntouch = 0
        for k in range(cnt):
            p = pos[k]
            q = rec[p, 1]
            if rec[p, 0] != a or q < 0 or rec[q, 0] != b:
                continue  # stale: consumed by an earlier merge
            c = np.int64(rec[p, 3])
            left = np.int64(rec[p, 2])
            right = np.int64(rec[q, 1])
            for side in range(2):
                if side == 0:
                    if left < 0:
                        continue
                    S[rec[left, 4], 1] -= c  # (x, a) disappears
                    new = (np.int64(rec[left, 0]) << 32) | z
                    at = left
                else:
                    if right < 0:
                        continue
                    S[rec[q, 4], 1] -= c  # (b, y) disappears
                    new = (z << 32) | np.int64(rec[right, 0])
                    at = p
                tab, S, nslots, sn = _slot_of(tab, S, nslots, new)
                rec[at, 4] = sn
                S[sn, 1] += c
                occ, nocc = _occ_push(occ, nocc, S, sn, at)
                if S[sn, 3] != m:
                    S[sn, 3] = m
                    if ntouch == touched.size:
                        touched = _grow(touched, ntouch + 1, 0)
                    touched[ntouch] = sn
                    ntouch += 1
            rec[p, 0] = z
            rec[q, 0] = -1
            rec[q, 4] = -1
            rec[p, 1] = right
            if right < 0:
                rec[p, 4] = -1
            else:
                rec[right, 2] = p
        S[best, 1] = 0  # every occurrence is merged; none can remain
        for k in range(ntouch):
            s = touched[k]
            if S[s, 1] > 0:
                hneg, hkey, hn = _heap_push(hneg, hkey, hn, -S[s, 1], S[s, 0])
        tlen[z] = tlen[a] + tlen[b]
        out_pairs[m, 0] = a
        out_pairs[m, 1] = b
        out_counts[m] = bc
        m += 1
        progress[0] = m
    if m == num_merges:
        stop = 0
    return out_pairs[:m].copy(), out_counts[:m].copy(), stop


@njit(cache=True, nogil=True, inline="always")
def _occ_push(occ, nocc, S, s, pos):
    """Record that pair slot ``s`` occurs at ``pos``: prepend to its list in the arena."""
    if nocc == occ.shape[0]:
        occ = _grow2(occ, nocc)
    occ[nocc, 0] = pos
    occ[nocc, 1] = S[s, 2]
    S[s, 2] = nocc
    return occ, nocc + 1


@njit(cache=True, nogil=True)
def _grow2(a, n):
    b = np.empty((2 * a.shape[0], a.shape[1]), a.dtype)
    b[:n] = a[:n]
    return b
