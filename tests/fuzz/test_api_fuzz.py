"""Hostile arguments against the public API: every call returns a result the oracles
accept or raises a TokenmillError with a message; never a crash, a hang or a silent coercion.

The calls run in a subprocess worker (``worker`` fixture), so a segfault fails one test with its input.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from .conftest import budget, expect_ok_or_refused

# values that do not belong where an int does, and ints that are too large or negative
BAD_SCALARS = st.sampled_from([0, -1, -3, 1, 2, 7, 2**31, 2**62, 2**63, 2**64 - 1, 2**70, -(2**63), 1.5, 2.0,
                               float("nan"), float("inf"), True, False, "3", None, np.uint64(2**63 + 1),
                               np.float32(2.0), np.int8(5)])
SMALL = st.integers(0, 40)
SCALAR = st.one_of(SMALL, BAD_SCALARS)


@st.composite
def int_arrays(draw, max_len=12, elements=SMALL):
    """Integer-ish arrays in hostile shapes, dtypes and layouts."""
    values = draw(st.lists(elements, max_size=max_len))
    kind = draw(st.sampled_from(["list", "int64", "uint64", "int8", "float", "bool", "object", "strided",
                                 "2d", "fortran", "scalar"]))
    if kind == "list":
        return values
    if kind == "scalar":
        return values[0] if values else 5
    ints = [int(v) if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else 1 for v in values]
    if kind == "int64":
        return np.array([min(max(v, -(2**63)), 2**63 - 1) for v in ints], np.int64)
    if kind == "uint64":
        return np.array([v % 2**64 for v in ints], np.uint64)
    if kind == "int8":
        return np.array([v % 128 for v in ints], np.int8)
    if kind == "float":
        return np.array(ints, np.float64) + draw(st.sampled_from([0.0, 0.5]))
    if kind == "bool":
        return np.array(ints, bool)
    if kind == "object":
        return np.array(values + [2**70], dtype=object)
    if kind == "strided":
        return np.repeat(np.array([v % 2**63 for v in ints], np.int64), 2)[::2]
    if kind == "2d":
        return np.array([v % 50 for v in ints] * 2, np.int64).reshape(2, -1)
    return np.asfortranarray(np.array([v % 50 for v in ints] * 2, np.int64).reshape(-1, 2))


lengths_st = st.one_of(st.lists(st.integers(0, 30), max_size=10), int_arrays(elements=SCALAR))


@budget(25)
@given(lengths_st, SCALAR, st.sampled_from(["best_fit", "first_fit_decreasing", "greedy", "concat", "bogus", 3]),
       st.sampled_from(["split", "truncate", "error", None]))
def test_pack(worker, lengths, block_size, method, long_docs):
    expect_ok_or_refused(worker, "pack_plan", lengths, block_size, method, long_docs)


@budget(25)
@given(lengths_st, SCALAR, SCALAR,
       st.fixed_dictionaries({}, optional={"tail": st.sampled_from(["align", "drop", "pad", "x"]),
                                           "start_offset": SCALAR, "max_windows_per_doc": SCALAR,
                                           "jitter": st.sampled_from([None, "global", "per_doc"]),
                                           "score": st.sampled_from(["all", "new"]), "reserve": SCALAR,
                                           "template": st.sampled_from([None, (1, 2), (1.5, None), (-1, 2)])}))
def test_window_plans(worker, lengths, window, stride, options):
    expect_ok_or_refused(worker, "window_plan", lengths, window, stride, options)


@st.composite
def gather_args(draw):
    lengths = draw(st.lists(st.integers(0, 12), min_size=1, max_size=5))
    total = sum(lengths)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    if draw(st.booleans()):  # lie about where documents are
        offsets = offsets + draw(st.sampled_from([-3, -1, 1, 5, 2**40]))
    if draw(st.booleans()):
        offsets = offsets[: draw(st.integers(0, offsets.size))]
    dtype = draw(st.sampled_from([np.int64, np.uint16, np.int32, np.uint64, np.float64]))
    tokens = np.arange(total + draw(st.sampled_from([0, 0, -2, 3])), dtype=np.int64).clip(0).astype(dtype)
    out = draw(st.sampled_from([None, "small", "narrow", "int8", "exact", "readonly", "big"]))
    rows = 2 * total + 10
    if out == "small":
        out = np.zeros((1, 16), np.int64)
    elif out == "narrow":
        out = np.zeros((rows, 1), np.int64)
    elif out == "int8":
        out = np.zeros((rows, 16), np.int8)
    elif out == "readonly":
        out = np.zeros((rows, 16), np.int64)
        out.flags.writeable = False
    elif out in ("exact", "big"):
        out = np.full((rows + (5 if out == "big" else 0), 16), -9, np.int64)
    return lengths, draw(st.integers(1, 6)), draw(st.integers(1, 6)), tokens, offsets, out, draw(SCALAR)


@budget(25)
@given(gather_args())
def test_gather(worker, args):
    expect_ok_or_refused(worker, "gather", *args)


@st.composite
def flat_sources(draw):
    lengths = draw(st.lists(st.integers(0, 10), min_size=1, max_size=5))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    shift = draw(st.sampled_from([0, 0, 0, -1, 1, 4, -(2**40)]))
    offsets = offsets + shift
    cut = draw(st.sampled_from([0, 0, 1, 3]))
    tokens = np.arange(max(sum(lengths) - cut, 0), dtype=draw(st.sampled_from([np.int64, np.int32, np.uint64,
                                                                               np.float32])))
    return lengths, draw(st.integers(1, 16)), tokens, offsets, draw(st.one_of(st.integers(1, 3), BAD_SCALARS)), \
        draw(st.one_of(st.integers(-5, 5), BAD_SCALARS))


@budget(25)
@given(flat_sources())
def test_pack_batches_from_lying_sources(worker, args):
    expect_ok_or_refused(worker, "pack_batches", *args)


@budget(20)
@given(st.lists(int_arrays(max_len=6), max_size=4), SCALAR, st.one_of(st.none(), SCALAR), st.booleans())
def test_pad_batch(worker, seqs, pad_id, max_length, truncation):
    expect_ok_or_refused(worker, "pad", seqs, pad_id, max_length, truncation)


@budget(15)
@given(st.lists(int_arrays(max_len=6), max_size=4), st.lists(int_arrays(max_len=6), max_size=4),
       st.one_of(st.floats(allow_nan=True), SCALAR), st.one_of(st.floats(allow_nan=True), SCALAR),
       st.one_of(st.none(), SCALAR))
def test_retrieval(worker, query, docs, k1, b, budget_tokens):
    expect_ok_or_refused(worker, "retrieval", query, docs, k1, b, budget_tokens)


@budget(15)
@given(SCALAR, SCALAR, st.sampled_from(["pad", "drop", "keep"]))
def test_chunk_stream(worker, length, block_size, last):
    expect_ok_or_refused(worker, "stream", length, block_size, last)


@budget(20)
@given(st.binary(max_size=64), st.sampled_from(["gpt2", "gpt4", "o200k", "llama", 5]),
       st.one_of(st.none(), int_arrays(max_len=5, elements=st.integers(-3, 70))))
def test_split_offsets(worker, data, preset, doc_offsets):
    expect_ok_or_refused(worker, "split", data, preset, doc_offsets)
