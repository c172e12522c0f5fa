"""Every numba kernel equals its pure-Python (or plain numpy) twin, on random inputs."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill.batching import _kernels, layout
from tokenmill.batching import reference as _reference

items = st.lists(st.integers(1, 30), min_size=0, max_size=200)


@settings(max_examples=80, deadline=None)
@given(lengths=items, extra=st.integers(0, 20))
def test_bin_packing_kernels_equal_their_twins(lengths, extra):
    capacity = max(lengths, default=1) + extra
    arr = np.array(lengths, np.int64)
    for name in ("best_fit", "first_fit", "greedy"):
        assign, n = getattr(_kernels, name)(arr, capacity)
        ref_assign, ref_n = getattr(_reference, name)(lengths, capacity)
        assert (assign.tolist(), n) == (ref_assign, ref_n), name
        used = np.bincount(assign, weights=arr, minlength=n) if lengths else np.zeros(0)
        assert (used <= capacity).all()


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(1, 64), min_size=1, max_size=300), capacity=st.integers(64, 128))
def test_best_fit_decreasing_never_worse_than_first_fit_decreasing_by_much(lengths, capacity):
    arr = np.sort(np.array(lengths, np.int64))[::-1].copy()
    _, bf = _kernels.best_fit(arr, capacity)
    _, ff = _kernels.first_fit(arr, capacity)
    lower = -(-int(arr.sum()) // capacity)
    # Both are within 11/9 OPT + 1 (Johnson); OPT >= the volume bound.
    assert lower <= bf <= 11 * max(lower, 1) // 9 + 2 and lower <= ff


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(st.lists(st.integers(1, 9), max_size=4), min_size=1, max_size=5),
       extra=st.integers(0, 5), stream=st.booleans(), cont=st.booleans(), pad_id=st.integers(0, 3))
def test_layout_kernel_equals_numpy_twin(rows, extra, stream, cont, pad_id):
    T = max(sum(r) for r in rows) + extra
    if T == 0:
        T = 1
    seg_row = np.array([i for i, r in enumerate(rows) for _ in r], np.int64)
    seg_len = np.array([n for r in rows for n in r], np.int64)
    seg_doc = np.arange(seg_len.size, dtype=np.int64) * 3 % 7
    seg_start = (np.arange(seg_len.size, dtype=np.int64) % 3) * 5

    def fill(out, dst):
        for k, (d, n) in enumerate(zip(dst, seg_len)):
            out[d : d + n] = 100 * seg_doc[k] + seg_start[k] + np.arange(n)

    kw = dict(num_rows=len(rows), row_length=T, pad_id=pad_id, stream=stream,
              fragment_positions="continue" if cont else "restart", truncated_tokens=2)
    want = _reference.assemble(fill, seg_row, seg_doc, seg_start, seg_len, **kw)
    # the same ids as a flat uint16 token array (a memory-mapped store), read inside the kernel
    flat = np.concatenate([np.zeros(3)] + [100 * d + s + np.arange(n) for d, s, n in zip(seg_doc, seg_start, seg_len)])
    seg_src = 3 + np.cumsum(seg_len) - seg_len
    for how in (fill, (flat.astype(np.uint16), seg_src)):
        got = layout.assemble(how, seg_row, seg_doc, seg_start, seg_len, **kw)
        for name in ("input_ids", "labels", "position_ids", "attention_mask", "doc_ids", "token_offsets", "cu_seqlens"):
            a, b = getattr(got, name), getattr(want, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), name
        assert (got.max_seqlen, got.truncated_tokens) == (want.max_seqlen, want.truncated_tokens)


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(0, 20), min_size=1, max_size=20), dtype=st.sampled_from([np.uint16, np.uint32, np.int64]))
def test_gather_kernel(lengths, dtype):
    rng = np.random.default_rng(len(lengths))
    tokens = rng.integers(0, 60000, sum(lengths) + 5).astype(dtype)
    src = np.cumsum([0] + lengths[:-1]).astype(np.int64)
    length = np.array(lengths, np.int64)
    dst = (np.cumsum(length) - length + np.arange(length.size)).astype(np.int64)
    out = np.full(int(length.sum()) + length.size, -1, np.int64)
    from tokenmill import _gather, _gather_kernels

    _gather_kernels.gather_segments(tokens, src, length, dst, out)  # the kernel itself
    want = np.full_like(out, -1)
    for s, n, d in zip(src, length, dst):
        want[d : d + n] = tokens[s : s + n]
    assert np.array_equal(out, want)
    twin, checked = np.full_like(out, -1), np.full_like(out, -1)
    _gather.gather_segments_py(tokens, src, length, dst, twin)
    _gather.gather_segments(tokens, src, length, dst, checked)  # the validating entry point
    assert np.array_equal(twin, want) and np.array_equal(checked, want)


def _items_in_doc_order(pieces):
    """(doc, start, length) items in (doc, start) order, as packing._items makes them."""
    doc, start, length = [], [], []
    for d, lens in enumerate(pieces):
        s = 0
        for n in lens:
            doc.append(d), start.append(s), length.append(n)
            s += n
    return (np.array(doc, np.int64), np.array(start, np.int64), np.array(length, np.int64))


@settings(max_examples=80, deadline=None)
@given(pieces=st.lists(st.lists(st.integers(1, 12), min_size=1, max_size=3), max_size=60), extra=st.integers(0, 5))
def test_sort_decreasing_is_the_lexsort_of_items_in_doc_order(pieces, extra):
    doc, start, length = _items_in_doc_order(pieces)
    cap = int(length.max(initial=0)) + extra
    order = np.lexsort((start, doc, -length))
    got = tuple(np.full(doc.size, -7, np.int64) for _ in range(3))
    _kernels.sort_decreasing(doc, start, length, cap, *got)
    for a, b in zip(got, (doc[order], start[order], length[order])):
        assert a.tolist() == b.tolist()


@settings(max_examples=80, deadline=None)
@given(assign=st.lists(st.integers(0, 9), max_size=80), extra=st.integers(0, 3), permute=st.booleans(),
       seed=st.integers(0, 2**16))
def test_group_by_block_is_a_stable_argsort_by_block(assign, extra, permute, seed):
    nblocks = max(assign, default=-1) + 1 + extra
    a = np.array(assign, np.int64)
    rng = np.random.default_rng(seed)
    doc, start, length = (rng.integers(0, 1000, a.size) for _ in range(3))
    perm = rng.permutation(nblocks).astype(np.int64) if permute else np.zeros(0, np.int64)
    block = perm[a] if permute else a
    by_block = np.argsort(block, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(block, minlength=nblocks))])
    out = tuple(np.full(a.size, -7, np.int64) for _ in range(3))
    got = (*out, _kernels.group_by_block(a, perm, nblocks, doc, start, length, *out))
    for x, y in zip(got, (doc[by_block], start[by_block], length[by_block], ptr)):
        assert x.tolist() == y.tolist()


@settings(max_examples=80, deadline=None)
@given(lengths=st.lists(st.integers(0, 40), max_size=80), T=st.integers(1, 12), split=st.booleans())
def test_items_kernel_equals_numpy(lengths, T, split):
    dl = np.array(lengths, np.int64)
    nonempty = np.flatnonzero(dl > 0)
    if split:  # pieces of T, in document then piece order
        pieces = -(-dl[nonempty] // T)
        doc = np.repeat(nonempty, pieces)
        start = (np.arange(doc.size) - np.repeat(np.cumsum(pieces) - pieces, pieces)) * T
        length = np.minimum(dl[doc] - start, T)
    else:  # whole documents, cut at T
        doc, start, length = nonempty, np.zeros(nonempty.size, np.int64), np.minimum(dl[nonempty], T)
    out = tuple(np.full(doc.size, -7, np.int64) for _ in range(3))
    assert _kernels.items(dl, T, split, *out) == doc.size
    for a, b in zip(out, (doc, start, length)):
        assert a.tolist() == b.tolist()
    if doc.size:  # outputs too small: refused, nothing written past them
        assert _kernels.items(dl, T, split, *(a[:-1].copy() for a in out)) == -1
