"""Bounded work (issue 11, class 3): cost follows the input, not a parameter's value."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill import ConfigError, pack, train_bpe
from tokenmill.batching import _kernels


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 40), max_size=120), st.integers(40, 70), st.booleans())
def test_sparse_best_fit_equals_dense(lengths, capacity, sort):
    L = np.array(sorted(lengths, reverse=True) if sort else lengths, np.int64)
    dense = _kernels.best_fit(L, capacity)
    sparse = _kernels.best_fit_sparse(L, capacity)
    assert dense[1] == sparse[1] and dense[0].tolist() == sparse[0].tolist()


@pytest.mark.parametrize("block_size", [2**26, 2**40, 2**62])
def test_best_fit_with_huge_blocks_returns(block_size):
    # The dense kernel allocated 24 bytes x block_size (2**62 never returned); this finishing at all
    # (pytest-timeout) with the right plan is the test: the sparse kernel's memory follows the items.
    plan = pack([5, 3, 7], block_size)
    assert plan.num_blocks == 1 and plan.tokens == 15
    plan.validate()


def test_block_size_beyond_2_62_is_refused():
    with pytest.raises(ConfigError, match="block_size"):
        pack([5], 2**63)


def test_train_with_a_huge_vocab_stops_early_and_says_so():
    text = "the quick brown fox jumps over the lazy dog " * 40
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tok = train_bpe([text], 10**9, pattern="gpt2", progress=False)
    r = tok.train_report
    assert r.merges < 100 and r.merges_requested == 10**9 - 256 and r.stop_reason == "no_pairs"
    assert any(f"learned {r.merges:,d} of {10**9 - 256:,d} merges" in str(x.message) for x in w)


def test_catastrophic_pattern_ends_with_an_error_naming_it(monkeypatch):
    monkeypatch.setenv("TOKENMILL_REGEX_TIMEOUT", "0.5")
    text = "a" * 30 + "!"
    for pattern in (r"(a|a)+$",):  # 2**30 backtracking steps without the budget: it would not finish
        with pytest.raises(ConfigError, match=r"\(a\|a\)\+\$.*time budget"):
            train_bpe([text], 260, pattern=pattern, progress=False)
    from tokenmill.tokenizer.model import Tokenizer

    tok = Tokenizer.from_merges([], pattern=r"(a|a)+$")
    with pytest.raises(ConfigError, match="time budget"):
        tok.encode(text)


def test_regex_timeout_setting_is_checked(monkeypatch):
    from tokenmill.tokenizer.patterns import regex_budget

    monkeypatch.setenv("TOKENMILL_REGEX_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match="TOKENMILL_REGEX_TIMEOUT"):
        regex_budget(10)
    monkeypatch.setenv("TOKENMILL_REGEX_TIMEOUT", "0")
    assert regex_budget(10) is None


def test_devices_as_inputs_are_refused():
    from tokenmill import InputError, FormatError, Tokenizer
    from tokenmill.data.text import iter_documents

    with pytest.raises(InputError, match="not a regular file"):
        list(iter_documents(["/dev/zero"]))
    with pytest.raises(FormatError, match="not a regular file"):
        Tokenizer.load("/dev/zero")


@pytest.mark.parametrize("method", ["best_fit", "first_fit_decreasing", "greedy", "concat"])
def test_lengths_near_int64_limits_pack_exactly(method):
    # found by make fuzz: greedy compared used + length > capacity, which wrapped around at 2**63
    plan = pack([2**62], 2**62, method=method)
    plan.validate()
    assert plan.tokens == 2**62 and plan.num_blocks == 1
    plan = pack([2**61, 2**61 - 1, 1], 2**62 - 1, method=method)
    plan.validate()
    assert plan.tokens == 2**62 and plan.num_blocks == 2
