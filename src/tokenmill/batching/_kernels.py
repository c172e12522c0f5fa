"""numba kernels for the sequential loops of packing; pure-Python twins live in ``reference.py``.

Only :mod:`tokenmill.batching.packing` imports this module, and only when a plan is computed, so
``import tokenmill.batching`` does not load numba's compiler. Kernels take and return numpy arrays.
"""

from __future__ import annotations

import numpy as np

from .._intrinsics import prefetch
from .._jit import njit


@njit(cache=True, nogil=True)
def _tree_add(tree, size, leaf, delta):
    i = leaf + size
    while i >= 1:
        tree[i] += delta
        i >>= 1


@njit(cache=True, nogil=True)
def _tree_first_nonzero_at_or_after(tree, size, leaf):
    """Smallest leaf >= ``leaf`` with a nonzero count, or -1 (``tree`` holds subtree counts)."""
    if leaf >= size:
        return -1
    i = leaf + size
    if tree[i] > 0:
        return leaf
    while i > 1:
        # A left child's right sibling covers the leaves just right of everything seen so far.
        if (i & 1) == 0 and tree[i + 1] > 0:
            i += 1
            while i < size:
                i *= 2
                if tree[i] == 0:
                    i += 1
            return i - size
        i >>= 1
    return -1


@njit(cache=True, nogil=True)
def best_fit(lengths, capacity):
    """Best fit: put each item into the open block with the least room that still fits it.

    Items are taken in the given order (sort them decreasing first for best-fit *decreasing*).
    Open blocks are bucketed by remaining room, ``0 .. capacity``; a segment tree over the rooms
    finds the smallest room >= the item in O(log capacity). Among blocks with equal room, the most
    recently filled one wins (a stack per bucket). Returns ``(block of each item, number of blocks)``.
    """
    n = lengths.size
    size = 1
    while size < capacity + 1:
        size *= 2
    tree = np.zeros(2 * size, np.int64)
    head = np.full(capacity + 1, -1, np.int64)  # top block of each room's stack
    below = np.empty(n, np.int64)  # next block down the same stack
    assign = np.empty(n, np.int64)
    nblocks = 0
    for i in range(n):
        need = lengths[i]
        room = _tree_first_nonzero_at_or_after(tree, size, need)
        if room < 0:
            b = nblocks
            nblocks += 1
            left = capacity - need
        else:
            b = head[room]
            head[room] = below[b]
            _tree_add(tree, size, room, -1)
            left = room - need
        assign[i] = b
        if left > 0:
            below[b] = head[left]
            head[left] = b
            _tree_add(tree, size, left, 1)
    return assign, nblocks


# ---- best fit for any block size: a treap over the open blocks ------------------------------------
# ``best_fit`` above indexes rooms 0 .. capacity densely: fast, but its memory grows with the block
# size (2.7 GB for two documents at 2**26, and 2**62 never returned). ``best_fit_sparse`` keeps one
# treap node per open block instead (at most one per item), keyed (room, -push time), so the
# smallest room >= the item, most recently filled first, is the leftmost node with room >= need:
# the same choice as the dense kernel (tested equal), in memory proportional to the items.


@njit(cache=True, nogil=True, inline="always")
def _before(a, b, room, tt):
    """Key order: room ascending, then the most recently pushed first."""
    return room[a] < room[b] or (room[a] == room[b] and tt[a] > tt[b])


@njit(cache=True, nogil=True)
def _treap_insert(root, x, path, room, tt, lc, rc, pr):
    depth = 0
    node = root
    while node != 0:
        path[depth] = node
        depth += 1
        node = lc[node] if _before(x, node, room, tt) else rc[node]
    if depth == 0:
        return x
    p = path[depth - 1]
    if _before(x, p, room, tt):
        lc[p] = x
    else:
        rc[p] = x
    while depth > 0:  # rotate x up while its priority beats its parent's
        p = path[depth - 1]
        if pr[x] <= pr[p]:
            break
        if lc[p] == x:
            lc[p] = rc[x]
            rc[x] = p
        else:
            rc[p] = lc[x]
            lc[x] = p
        depth -= 1
        if depth == 0:
            root = x
        else:
            g = path[depth - 1]
            if lc[g] == p:
                lc[g] = x
            else:
                rc[g] = x
    return root


@njit(cache=True, nogil=True)
def _treap_delete(root, c, parent, lc, rc, pr):
    while lc[c] != 0 and rc[c] != 0:  # rotate c down below its higher-priority child
        if pr[lc[c]] > pr[rc[c]]:
            y = lc[c]
            lc[c] = rc[y]
            rc[y] = c
        else:
            y = rc[c]
            rc[c] = lc[y]
            lc[y] = c
        if parent == 0:
            root = y
        elif lc[parent] == c:
            lc[parent] = y
        else:
            rc[parent] = y
        parent = y
    child = lc[c] if lc[c] != 0 else rc[c]
    if parent == 0:
        root = child
    elif lc[parent] == c:
        lc[parent] = child
    else:
        rc[parent] = child
    lc[c] = 0
    rc[c] = 0
    return root


@njit(cache=True, nogil=True)
def best_fit_sparse(lengths, capacity):
    """``best_fit`` with memory O(items) whatever ``capacity`` is (see above); same result."""
    n = lengths.size
    m = n + 2  # node 0 is "none"; at most one open block per item
    room = np.zeros(m, np.int64)
    tt = np.zeros(m, np.int64)
    pr = np.zeros(m, np.uint64)
    lc = np.zeros(m, np.int64)
    rc = np.zeros(m, np.int64)
    blk = np.zeros(m, np.int64)
    free = np.empty(m, np.int64)
    path = np.empty(m, np.int64)
    nfree = 0
    fresh = 1
    root = 0
    state = np.uint64(0x9E3779B97F4A7C15)
    assign = np.empty(n, np.int64)
    nblocks = 0
    for i in range(n):
        need = lengths[i]
        node = root
        cand = 0
        cand_parent = 0
        parent = 0
        while node != 0:
            if room[node] >= need:
                cand = node
                cand_parent = parent
                parent = node
                node = lc[node]
            else:
                parent = node
                node = rc[node]
        if cand == 0:
            b = nblocks
            nblocks += 1
            left = capacity - need
        else:
            b = blk[cand]
            left = room[cand] - need
            root = _treap_delete(root, cand, cand_parent, lc, rc, pr)
            free[nfree] = cand
            nfree += 1
        assign[i] = b
        if left > 0:
            if nfree > 0:
                nfree -= 1
                x = free[nfree]
            else:
                x = fresh
                fresh += 1
            room[x] = left
            tt[x] = i + 1
            blk[x] = b
            lc[x] = 0
            rc[x] = 0
            state ^= state << np.uint64(13)  # xorshift64: priorities only shape the tree
            state ^= state >> np.uint64(7)
            state ^= state << np.uint64(17)
            pr[x] = state
            root = _treap_insert(root, x, path, room, tt, lc, rc, pr)
    return assign, nblocks


@njit(cache=True, nogil=True)
def first_fit(lengths, capacity):
    """First fit: put each item into the lowest-numbered block with room for it.

    A max-tree over ``n`` potential blocks (all starting with ``capacity`` room) finds that block
    in O(log n); an untouched block is simply the next new one.
    """
    n = lengths.size
    size = 1
    while size < max(n, 1):
        size *= 2
    tree = np.full(2 * size, capacity, np.int64)
    assign = np.empty(n, np.int64)
    nblocks = 0
    for i in range(n):
        need = lengths[i]
        node = 1
        while node < size:
            node = 2 * node if tree[2 * node] >= need else 2 * node + 1
        b = node - size
        assign[i] = b
        if b + 1 > nblocks:
            nblocks = b + 1
        tree[node] -= need
        node >>= 1
        while node >= 1:
            tree[node] = max(tree[2 * node], tree[2 * node + 1])
            node >>= 1
    return assign, nblocks


@njit(cache=True, nogil=True)
def greedy(lengths, capacity):
    """In order: append to the current block while it fits, else start a new one (torchtune)."""
    n = lengths.size
    assign = np.empty(n, np.int64)
    b = -1
    used = capacity
    for i in range(n):
        if lengths[i] > capacity - used:  # not used + length > capacity: that sum can overflow int64
            b += 1
            used = 0
        assign[i] = b
        used += lengths[i]
    return assign, b + 1


# Planning passes write into arrays the caller allocates: numpy asks for transparent huge pages on
# large arrays, and first-touch page faults on fresh memory cost more than these passes themselves.
@njit(cache=True, nogil=True)
def items(doc_lengths, T, split, doc, start, length):
    """Fill ``doc``/``start``/``length`` with the items of the non-empty documents in document order:
    each document whole (``split`` False: ``length = min(L, T)``, the rest is truncated) or cut in
    pieces of ``T`` (``split``). Returns the item count, or -1 if the outputs are too small."""
    k = 0
    cap = doc.size
    for d in range(doc_lengths.size):
        L = doc_lengths[d]
        if L <= 0:
            continue
        s = 0
        while True:
            if k >= cap:
                return -1
            doc[k] = d
            start[k] = s
            length[k] = min(L - s, T)
            k += 1
            s += T
            if not split or s >= L:
                break
    return k


@njit(cache=True, nogil=True)
def sort_decreasing(doc, start, length, max_length, out_doc, out_start, out_length):
    """``out_*`` = the items ``(doc, start, length)`` sorted by decreasing length, equal lengths kept
    in their given order (a stable counting sort over ``0 .. max_length``: O(n + max_length)). For
    items in ``(doc, start)`` order this is ``np.lexsort((start, doc, -length))`` (tested equal)."""
    n = length.size
    first = np.zeros(max_length + 2, np.int64)  # first[k]: where key k = max_length - length starts
    for i in range(n):
        first[max_length - length[i] + 1] += 1
    for k in range(1, max_length + 2):
        first[k] += first[k - 1]
    for k in range(max_length + 1):  # the sorted lengths are runs: no scatter needed
        out_length[first[k] : first[k + 1]] = max_length - k
    for i in range(n):
        key = max_length - length[i]
        j = first[key]
        first[key] = j + 1
        out_doc[j] = doc[i]
        out_start[j] = start[i]


@njit(cache=True, nogil=True)
def group_by_block(assign, perm, nblocks, doc, start, length, out_doc, out_start, out_length):
    """``out_*`` = the items grouped by block ``perm[assign[i]]`` (``perm`` empty: ``assign[i]``), in
    block order and, inside a block, in item order: ``np.argsort(block, kind="stable")`` applied to
    the three arrays, as a counting sort. Returns ``block_ptr``."""
    n = assign.size
    permute = perm.size > 0
    count = np.zeros(nblocks, np.int64)  # items per block, by creation number
    for i in range(n):
        count[assign[i]] += 1
    ptr = np.zeros(nblocks + 1, np.int64)
    if permute:
        for b in range(nblocks):
            ptr[perm[b] + 1] = count[b]
    else:
        ptr[1:] = count
    for b in range(nblocks):
        ptr[b + 1] += ptr[b]
    pos = np.empty(nblocks, np.int64)  # next free slot of every block, by creation number
    for b in range(nblocks):
        pos[b] = ptr[perm[b]] if permute else ptr[b]
    for i in range(n):
        b = assign[i]
        j = pos[b]
        pos[b] = j + 1
        out_doc[j] = doc[i]
        out_start[j] = start[i]
        out_length[j] = length[i]
    return ptr


@njit(cache=True, nogil=True)
def first_bad_slice(doc, start, length, doc_lengths):
    """The first ``i`` whose slice ``(doc[i], start[i], length[i])`` (three int64 arrays of one size) is not
    inside its document (``doc_lengths``: int64, each >= 0), or -1: one pass, no temporaries (the numpy
    form made five arrays of the slices' size; 56M windows took ~2 s). Reads ``doc_lengths`` only at a
    checked index."""
    nd = doc_lengths.size
    for i in range(doc.size):
        d = doc[i]
        n = length[i]
        s = start[i]
        if d < 0 or d >= nd or s < 0 or n < 0 or s > doc_lengths[d] - n:
            return i
    return -1


@njit(cache=True, nogil=True)
def segments_ok(seg_row, seg_doc, seg_start, seg_len, seg_src, num_rows, row_length, num_tokens, index32):
    """True when a segment table (five ``(S,)`` arrays of one size) is safe for ``layout`` reading
    ``tokens[seg_src[k]:]``: rows nondecreasing in ``0 .. num_rows-1``, lengths >= 0, each row's
    lengths summing to at most ``row_length``, every span inside ``0 .. num_tokens``, and (``index32``)
    document ids and token offsets within int32. Reads only its own arrays, by index < S."""
    i32 = 2147483647
    prev = 0
    used = 0
    for k in range(seg_row.size):
        r = seg_row[k]
        n = seg_len[k]
        if r < prev or r >= num_rows or n < 0:
            return False
        if r != prev:
            prev = r
            used = 0
        used += n
        if used > row_length:
            return False
        s = seg_src[k]
        if s < 0 or s > num_tokens - n:
            return False
        if index32 and (seg_doc[k] < 0 or seg_doc[k] > i32 or seg_start[k] < 0 or seg_start[k] > i32 - n):
            return False
    return True


@njit(cache=True, nogil=True)
def provenance(seg_row, seg_doc, seg_start, seg_len, row_length, doc_ids, token_offsets):
    """``doc_ids`` and ``token_offsets`` (flat ``B*T``) of a segment table, as :func:`layout` writes
    them: each segment's document and offsets at its place in its row, ``-1`` at padding. The table
    was checked when its batch was built; the rows and lengths are checked again here (cheap, per
    segment), so a table changed since then cannot write out of bounds. Returns False if it was."""
    T = row_length
    B = doc_ids.size // T
    S = seg_row.size
    if token_offsets.size != doc_ids.size or seg_doc.size != S or seg_start.size != S or seg_len.size != S:
        return False
    k = 0
    for r in range(B):
        base = r * T
        p = 0
        while k < S and seg_row[k] == r:
            n = seg_len[k]
            if n < 0 or n > T - p:
                return False
            d = seg_doc[k]
            s = seg_start[k]
            first = base + p
            for j in range(n):
                q = np.uint64(first + j)
                doc_ids[q] = d
                token_offsets[q] = s + j
            p += n
            k += 1
        for i in range(base + p, base + T):
            doc_ids[np.uint64(i)] = -1
            token_offsets[np.uint64(i)] = -1
    return k == S


@njit(cache=True, nogil=True)
def layout(seg_row, seg_doc, seg_start, seg_len, num_rows, row_length, stream, continue_positions, pad_id,
           tokens, seg_src, input_ids, labels, position_ids, doc_ids, token_offsets, real, cu_seqlens):
    """Fill the per-position arrays of a batch from its segment table, in one pass.

    If ``tokens`` is non-empty, segment ``k``'s ids are read from ``tokens[seg_src[k]:]`` (a flat
    token store); otherwise ``input_ids`` (flat, ``B*T``) already holds them at the real positions.
    Padding gets ``pad_id``. Empty ``doc_ids`` and ``token_offsets`` are left unwritten (the batch
    derives them on first read). Returns ``(number of cu_seqlens entries, max_seqlen)``.
    """
    gather = tokens.size > 0
    with_provenance = doc_ids.size > 0
    T = row_length
    S = seg_row.size
    k = 0
    ncu = 1
    cu_seqlens[0] = 0
    longest = 0
    for r in range(num_rows):
        base = r * T
        p = 0
        while k < S and seg_row[k] == r:
            n = seg_len[k]
            d = seg_doc[k]
            s = seg_start[k]
            first = base + p
            if stream:
                pos0 = p
            elif continue_positions:
                pos0 = s
            else:
                pos0 = 0
            # One pass per segment writing every array. Indices are cast to unsigned: numba then
            # drops its negative-index wraparound, which otherwise kept LLVM from vectorizing the
            # loop (3-4x slower); all of them are >= 0 here (checked before the kernel is called).
            if gather:
                src = seg_src[k]
                if k + 2 < S:  # start loading segment k+2's ids (a random place of the store) now
                    ahead = seg_src[k + 2]
                    for o in range(0, seg_len[k + 2], 64 // tokens.itemsize):
                        prefetch(tokens, ahead + o)
                if with_provenance:
                    for j in range(n):
                        q = np.uint64(first + j)
                        v = tokens[np.uint64(src + j)]
                        input_ids[q] = v
                        labels[q] = v
                        position_ids[q] = pos0 + j
                        token_offsets[q] = s + j
                        doc_ids[q] = d
                        real[q] = True
                else:  # the same loop without the two provenance arrays (16 of 41 bytes per position)
                    for j in range(n):
                        q = np.uint64(first + j)
                        v = tokens[np.uint64(src + j)]
                        input_ids[q] = v
                        labels[q] = v
                        position_ids[q] = pos0 + j
                        real[q] = True
            elif with_provenance:
                for j in range(n):
                    q = np.uint64(first + j)
                    labels[q] = input_ids[q]
                    position_ids[q] = pos0 + j
                    token_offsets[q] = s + j
                    doc_ids[q] = d
                    real[q] = True
            else:
                for j in range(n):
                    q = np.uint64(first + j)
                    labels[q] = input_ids[q]
                    position_ids[q] = pos0 + j
                    real[q] = True
            if not stream:
                labels[first] = -100
                cu_seqlens[ncu] = first + n
                ncu += 1
                longest = max(longest, n)
            p += n
            k += 1
        if stream and p > 0:
            labels[base] = -100
            cu_seqlens[ncu] = base + p
            ncu += 1
            longest = max(longest, p)
        if p < T:
            lo, hi = base + p, base + T
            input_ids[lo:hi] = pad_id
            labels[lo:hi] = -100
            for i in range(hi - lo):
                position_ids[np.uint64(lo + i)] = i
            if with_provenance:
                doc_ids[lo:hi] = -1
                token_offsets[lo:hi] = -1
            real[lo:hi] = False
            cu_seqlens[ncu] = base + T
            ncu += 1
            longest = max(longest, T - p)
    return ncu, longest
