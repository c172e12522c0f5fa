"""A store and its views are read-only sequences of documents, exactly as Python's own sequences."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from tokenmill import TokenStore
from tokenmill.data import texts
from tokenmill.errors import ConfigError, InputError, TokenmillError

DOCS = [f"doc {i} " + "the " * (i % 5) for i in range(23)]


@pytest.fixture(scope="module")
def store(tmp_path_factory, request):
    from tokenmill import Tokenizer

    tok = Tokenizer.from_merges([(116, 104), (256, 101)], special_tokens=["<|endoftext|>"])
    d = tmp_path_factory.mktemp("seq") / "s"
    return TokenStore.build(d, texts(DOCS), tok, workers=1, shard_bytes=40, progress=False)


def as_lists(seq):
    return [np.asarray(x).tolist() for x in seq]


def test_store_is_a_sequence_like_a_list(store):
    ref = [store.get(i).tolist() for i in range(len(store))]
    assert isinstance(store, Sequence) and store.num_shards > 3
    assert len(store) == len(ref) == len(DOCS)
    for i in list(range(-len(ref), len(ref))):
        assert store[i].tolist() == ref[i]
        assert store[np.int64(i)].tolist() == ref[i]
    for bad in (len(ref), -len(ref) - 1, 10**30):
        with pytest.raises(IndexError):
            store[bad]
        with pytest.raises(IndexError):
            ref[bad]
    for bad in ("1", 1.0, None, True):
        with pytest.raises(TypeError):
            store[bad]
    assert as_lists(store) == ref  # iteration
    assert as_lists(reversed(store)) == ref[::-1]


@pytest.mark.parametrize("sl", [slice(None), slice(2, 9), slice(-5, None), slice(None, None, 3), slice(9, 2, -2),
                                slice(100, 200), slice(-100, 3), slice(None, None, -1), slice(5, 5)])
def test_slices_are_views_as_python_slices(store, sl):
    ref = [store.get(i).tolist() for i in range(len(store))]
    view = store[sl]
    assert isinstance(view, Sequence) and len(view) == len(ref[sl])
    assert as_lists(view) == ref[sl]
    assert view.lengths.tolist() == [len(x) for x in ref[sl]]
    if len(view):
        assert not view[0].flags.owndata  # the memory map itself, no copy of the data
        assert as_lists(view[::2]) == ref[sl][::2]  # a view of a view
        assert view[-1].tolist() == ref[sl][-1]


def test_slice_step_zero_and_membership_are_refused_clearly(store):
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        store[::0]
    with pytest.raises(TypeError, match="np.array_equal"):
        store[0] in store  # noqa: B015 (the expression must raise)
    assert not hasattr(store, "count")  # Sequence's content-comparing helpers are not offered


def test_get_refuses_negative_document_ids(store):
    # -1 is the doc id of padding in batches: get(-1) must not silently return the last document
    with pytest.raises(IndexError, match="document -1 is outside 0 .. 22") as e:
        store.get(-1)
    assert isinstance(e.value, TokenmillError)  # (every refusal is one: it was a bare IndexError)
    assert store[-1].tolist() == store.get(len(store) - 1).tolist()


def test_every_source_checks_its_document_index_alike(store, tmp_path):
    """``get`` of every token source (in-memory arrays, a store, its views, a mixture, a Megatron export, the
    slices of a window plan) takes an integer in 0 .. len - 1: a negative index is refused, not counted
    from the end (ArraySource and the Megatron reader gave the last document for -1, a mixture took 1.5
    as 1, the slices' reader wrapped -1 as numpy does), a float or bool is a ConfigError."""
    from tokenmill import ArraySource, Mixture, SliceSource, SlidingWindows
    from tokenmill.data.megatron import MegatronSource

    arrays = ArraySource([store.get(i) for i in range(len(store))])
    store.export_megatron(tmp_path / "m")
    plan = SlidingWindows(4, 4).plan(store.lengths)
    sources = {"arrays": arrays, "store": store, "view": store[2:9], "split": store.split(0.3, seed=1)[0],
               "mixture": Mixture({arrays: 1.0}), "megatron": MegatronSource(tmp_path / "m"),
               "slices": SliceSource.from_windows(plan, arrays)}
    for name, src in sources.items():
        n = len(src)
        assert src.get(n - 1).tolist() == src.get(np.int64(n - 1)).tolist(), name
        for bad in (-1, n, -n):
            with pytest.raises(IndexError, match=rf"document {bad:,d} is outside 0 .. {n - 1:,d}"):
                src.get(bad)
        for bad in (1.5, 1.0, True, "1", None):
            with pytest.raises(ConfigError, match="must be an integer"):
                src.get(bad)


def test_split_views_are_sequences_too(store):
    train, val = store.split(0.3, seed=1)
    ref = [store.get(int(i)).tolist() for i in train.index]
    assert as_lists(train) == ref and train[-1].tolist() == ref[-1]
    assert as_lists(train[1:4]) == ref[1:4] and len(train[1:4]) == 3
    with pytest.raises(IndexError):
        train[len(train)]


def test_a_list_of_strings_is_paths_and_the_error_says_so(tmp_path, store):
    from tokenmill import Tokenizer

    tok = Tokenizer.from_merges([(116, 104)], special_tokens=["<|endoftext|>"])
    with pytest.raises(InputError, match=r"input 'hello world' does not exist.*tokenmill\.data\.texts"):
        TokenStore.build(tmp_path / "s", ["hello world"], tok, progress=False)
    with pytest.raises(ConfigError):
        store[0:3].get(-1.5)
