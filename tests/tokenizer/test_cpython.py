"""The two C-API bridges of ``tokenizer._cpython``: texts in as CPython's UTF-8, ids out as lists.

Both read and write Python objects from compiled code, so besides equal results these tests check what
a mistake would break silently: reference counts (a leak or a double free of the shared ints),
read-only buffers, ids outside the table (must raise before any object is touched), lone surrogates
(no UTF-8: reported, not raised, and no error left set)."""

from __future__ import annotations

import gc
import sys

import numpy as np
import pytest

from tokenmill import LoneSurrogateError, train_bpe
from tokenmill.tokenizer._cpython import IntLists, utf8_joined

TEXTS = ["hello", "", "héllo wörld", "滑动窗口，窗口", "emoji 🙂 done", "x" * 5000, "tab\tand\nnewline"]


def test_utf8_joined_is_the_texts_utf8_with_their_offsets():
    for texts in (TEXTS, TEXTS[::-1], [], [""], ["only ascii"]):
        fresh = [t.encode().decode() for t in texts]  # new str objects: no UTF-8 kept yet
        for _ in range(2):  # the second pass reads the UTF-8 CPython kept with each str
            buf, offs = utf8_joined(fresh)
            assert bytes(buf) == b"".join(t.encode() for t in texts)
            assert offs.tolist() == np.cumsum([0] + [len(t.encode()) for t in texts]).tolist()
            assert buf.dtype == np.uint8 and not buf.flags.writeable


def test_utf8_joined_takes_str_subclasses_and_rejects_other_types():
    buf, offs = utf8_joined([np.str_("numpy str"), "plain"])
    assert bytes(buf) == b"numpy strplain" and offs.tolist() == [0, 9, 14]
    with pytest.raises(TypeError, match="bytes"):
        utf8_joined(["a", b"b"])


def test_a_lone_surrogate_is_reported_and_leaves_no_error_set():
    assert utf8_joined(["fine", "bad \ud800 here", "fine"]) is None
    assert utf8_joined(["still fine"])[1].tolist() == [0, 10]  # no stale exception surfaces later
    assert "x".encode() == b"x"


def test_lists_equal_tolist_and_reference_counts_balance():
    lists = IntLists(1000)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 1000, 5000).astype(np.int64)
    ids[:10] = 700  # an int of its own (CPython shares those below 257 with everyone)
    bounds = np.array([0, 10, 10, 2500, 5000], np.int64)
    before = sys.getrefcount(lists.ints[700])
    got = lists.split(ids, bounds)
    after = sys.getrefcount(lists.ints[700])
    refs = sys.getrefcount(got), sys.getrefcount(got[0])
    del got
    gc.collect()
    final = sys.getrefcount(lists.ints[700])
    # one reference per place the int is listed, the lists held by `got` alone, all dropped with it
    # (measured apart from the asserts below: pytest keeps the operands of an assert)
    assert (after - before, final - before) == (int(np.count_nonzero(ids == 700)), 0)
    assert refs == (2, 2)
    got = lists.split(ids, bounds)
    assert got == [ids[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:])]
    assert {type(x) for row in got for x in row} == {int}
    assert lists.one(ids) == ids.tolist() and lists.one(ids[:3]) == ids[:3].tolist()
    assert lists.split(ids, np.array([0], np.int64)) == []


def test_items_stored_directly_or_through_the_c_api_give_the_same_lists_and_references():
    """Each way ``_build`` can store an item (``PyList_SetItem``; a store into the list's item array with
    ``Py_IncRef``; with the increment inline, where CPython's ``Py_INCREF`` is one) gives the lists
    ``tolist`` gives, one reference per place an int is listed, all dropped with the lists. On a standard
    CPython build the item array is found (the fast path is the one in use), and the increment is inline
    exactly before 3.12."""
    import ctypes
    import sysconfig

    from tokenmill.tokenizer import _cpython as C

    standard = sys.implementation.name == "cpython" and not sysconfig.get_config_var("Py_GIL_DISABLED") \
        and not hasattr(sys, "gettotalrefcount")
    assert (C._ITEMS_AT == 3 * ctypes.sizeof(ctypes.c_ssize_t)) == standard
    assert C._INLINE == (standard and sys.version_info < (3, 12))
    lists = IntLists(2000)
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 2000, 20000).astype(np.int64)
    ids[5:50] = 1500
    bounds = np.array([0, 0, 7, 7, 12000, 19999, 20000], np.int64)
    want = [ids[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:])]
    ways = [(-1, False)] + ([(C._ITEMS_AT, False), (C._ITEMS_AT, True) if C._INLINE else (C._ITEMS_AT, False)]
                            if C._ITEMS_AT > 0 else [])
    for items_at, inline in ways:
        before = sys.getrefcount(lists.ints[1500])
        addr = C._build(lists.addrs, ids, bounds, items_at, inline)
        got = ctypes.cast(addr, ctypes.py_object).value
        C._decref(addr)
        after = sys.getrefcount(lists.ints[1500])
        same = got == want
        del got
        gc.collect()
        final = sys.getrefcount(lists.ints[1500])
        assert same and (after - before, final - before) == (int(np.count_nonzero(ids == 1500)), 0), (items_at, inline)


def test_an_id_outside_the_table_raises_before_any_list_is_made():
    lists = IntLists(310)
    before = [sys.getrefcount(x) for x in lists.ints[300:]]  # ints of their own (not CPython's shared ones)
    for bad in (310, -1, 1 << 40):
        ids = np.array([301, 302, 303] * 200 + [bad], np.int64)
        with pytest.raises(ValueError, match=f"token id {bad} is outside"):
            lists.split(ids, np.array([0, 300, ids.size], np.int64))
    assert [sys.getrefcount(x) for x in lists.ints[300:]] == before
    with pytest.raises(ValueError, match="bounds"):
        lists.split(np.zeros(4, np.int64), np.array([0, 3, 2], np.int64))
    with pytest.raises(ValueError, match="bounds"):
        lists.split(np.zeros(4, np.int64), np.array([0, 5], np.int64))


def test_encode_batch_lists_and_arrays_through_both_bridges():
    texts = ["hello world, 滑动窗口 123 don't", "the cat sat on the mat"] * 20
    tok = train_bpe(texts, 300, pattern="gpt4")
    batch = [t * 30 for t in TEXTS if t] + TEXTS
    want = [tok.encode(t) for t in batch]
    for _ in range(2):
        assert tok.encode_batch(batch, num_threads=1) == want
        assert [a.tolist() for a in tok.encode_batch(batch, num_threads=2, as_arrays=True)] == want
    # a text without UTF-8 leaves the one-pass path, and fails as encode() does, named by its place
    with pytest.raises(LoneSurrogateError) as single:
        tok.encode("a lone \ud800 surrogate")
    with pytest.raises(LoneSurrogateError) as batched:
        tok.encode_batch(batch + ["a lone \ud800 surrogate"], num_threads=1)
    assert str(single.value).startswith("the text holds a lone surrogate at character 7 (U+D800)")
    assert str(batched.value) == f"text {len(batch)} of the batch" + str(single.value)[len("the text"):]


def test_join_list_reads_exact_ints_and_joins_their_bytes():
    """``join_list`` reads a list of ids through the C API: exact ints within int64 only (anything else is the
    caller's to name: None here), every id checked against the table before a byte is read, the items'
    reference counts untouched."""
    import enum

    from tokenmill._gather import Pieces
    from tokenmill.tokenizer._cpython import join_list

    table = [b"a", b"bc", None, b"", b"\xff\xfe"] + [bytes([i % 256]) * (i % 5) for i in range(300)]
    pieces = Pieces(table)
    ids = [0, 1, 4, 3, 1, 0] * 50 + [304]
    assert join_list(ids, pieces) == (b"".join(table[i] for i in ids), -1)
    assert join_list([], pieces) == (b"", -1)
    own = int("303")  # an int object of its own (CPython shares those below 257)
    before = sys.getrefcount(own)
    assert join_list([own] * 100, pieces) == (table[303] * 100, -1)
    assert sys.getrefcount(own) == before
    flag = enum.IntEnum("Flag", {"ONE": 1})
    for bad in (True, False, np.int64(1), 1.0, "1", None, flag.ONE, 2**63, -(2**63) - 1, 2**200):
        assert join_list([0] * 40 + [bad, 0], pieces) is None, bad
    for bad in (2, -1, len(table), 1 << 40, -(2**63), 2**63 - 1):  # exact ints naming no piece: their place
        assert join_list([0] * 40 + [bad, 0], pieces) == (b"", 40), bad
    with pytest.raises(TypeError, match="tuple"):
        join_list((0, 1), pieces)
