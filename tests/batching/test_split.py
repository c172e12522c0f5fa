"""Train/validation split by group, before packing."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill.batching import pack, split_documents
from tokenmill.errors import ConfigError


@settings(max_examples=60, deadline=None)
@given(groups=st.lists(st.integers(0, 15), min_size=2, max_size=80), frac=st.floats(0.05, 0.5), seed=st.integers(0, 5))
def test_no_group_on_both_sides_and_deterministic(groups, frac, seed):
    if len(set(groups)) < 2:
        return
    s = split_documents(groups, frac, seed=seed)
    g = np.array(groups)
    assert not set(g[s.train]) & set(g[s.val])
    assert sorted(s.train.tolist() + s.val.tolist()) == list(range(len(groups)))
    assert s.train.size > 0 and s.val.size > 0
    again = split_documents(groups, frac, seed=seed)
    assert np.array_equal(again.val, s.val)


def test_independent_of_document_order():
    groups = [f"author{i % 37}" for i in range(500)]
    s = split_documents(groups, 0.2, seed=3)
    perm = np.random.default_rng(0).permutation(500)
    t = split_documents([groups[i] for i in perm], 0.2, seed=3)
    assert {groups[i] for i in s.val} == {groups[perm[i]] for i in t.val}
    assert abs(s.val_fraction - 0.2) < 0.05


def test_pack_each_side_alone_never_mixes():
    rng = np.random.default_rng(1)
    lengths = rng.integers(1, 50, 300)
    groups = rng.integers(0, 40, 300)
    s = split_documents(groups, 0.25)
    train_plan = pack(lengths[s.train], 64)
    val_plan = pack(lengths[s.val], 64)
    train_docs = set(s.train[train_plan.doc].tolist())
    val_docs = set(s.val[val_plan.doc].tolist())
    assert not train_docs & val_docs
    assert not set(groups[list(train_docs)]) & set(groups[list(val_docs)])


def test_errors():
    with pytest.raises(ConfigError, match="val_fraction=1.5"):
        split_documents([1, 2], 1.5)
    with pytest.raises(ConfigError, match="1 distinct group"):
        split_documents(["a", "a"], 0.5)
    # one str would be one group per character, an int is no list of keys, "0.5" is no number
    with pytest.raises(ConfigError, match="^split_documents takes an iterable of group keys, not one str"):
        split_documents("abc", 0.5)
    with pytest.raises(ConfigError, match=r"^split_documents takes an iterable of group keys \(one per document\), not int"):
        split_documents(3, 0.5)
    for bad in ("0.5", None, float("nan")):
        with pytest.raises(ConfigError, match="^val_fraction="):
            split_documents(["a", "b"], bad)


def test_in_memory_documents_that_are_no_sequence_are_named():
    from tokenmill import InputError, as_source

    for bad, kind in ((None, "NoneType"), (5, "int"), ("ids", "str")):
        with pytest.raises(InputError, match=f"^docs is a {kind}; pass a sequence of token id sequences"):
            as_source(bad)


def test_seed_and_keys_are_checked_and_the_split_ignores_key_spelling_order():
    """A float or negative seed split as some other integer would; equal keys spelled as a numpy str and a
    str formed one group hashed by whichever came first (its side depended on the documents' order); an
    int key past int64 or an unhashable key raised bare errors."""
    import numpy as np

    from tokenmill import split_documents

    for seed in (1.5, -1, True):
        with pytest.raises(ConfigError, match="seed="):
            split_documents(list("abcd"), 0.5, seed=seed)
    a = [np.str_("k0"), "k0", "k1", "k2", "k3", "k4"]
    b = ["k0", np.str_("k0"), "k1", "k2", "k3", "k4"]
    for seed in range(12):
        assert split_documents(a, 0.4, seed=seed).val.tolist() == split_documents(b, 0.4, seed=seed).val.tolist()
        assert split_documents(a, 0.4, seed=seed).val.tolist() == split_documents(["k0"] * 2 + a[2:], 0.4,
                                                                                  seed=seed).val.tolist()
    s = split_documents([2**70, 1, 2], 0.3)
    assert sorted(s.train.tolist() + s.val.tolist()) == [0, 1, 2]
    with pytest.raises(ConfigError, match="group key 0 is a list, which cannot be a group key"):
        split_documents([["a"], ["b"]], 0.5)
