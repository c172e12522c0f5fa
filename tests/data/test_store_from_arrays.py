"""TokenStore.from_token_arrays: a store from ids a user already has, checked like a built one."""

from __future__ import annotations

import numpy as np
import pytest

from tokenmill import ConfigError, InputError, TokenmillError, TokenStore, pack


def test_round_trip_verify_and_batches(tmp_path):
    rng = np.random.default_rng(0)
    shards = [(rng.integers(0, 9, 20), None) for _ in range(3)]
    shards = [(lengths, rng.integers(0, 70000, int(lengths.sum()))) for lengths, _ in shards]
    st = TokenStore.from_token_arrays(tmp_path / "s", shards, vocab_size=70000)
    assert st.num_shards == 3 and len(st) == 60 and st.vocab_size == 70000
    assert st.verify()  # hashes, offsets, ids < vocab
    flat = np.concatenate([ids for _, ids in shards])
    offs = np.concatenate([[0], np.cumsum(np.concatenate([lengths for lengths, _ in shards]))])
    for i in range(len(st)):
        assert st.get(i).tolist() == flat[offs[i]:offs[i + 1]].tolist()
    plan = pack(st.lengths, 16)
    got = np.concatenate([b.input_ids[b.attention_mask] for b in plan.batches(st, batch_size=4, pad_id=0)])
    assert got.size == flat.size


def test_bad_input(tmp_path):
    with pytest.raises(InputError, match="add up to 3"):
        TokenStore.from_token_arrays(tmp_path / "a", [([1, 2], [1, 2])], vocab_size=10)
    with pytest.raises(InputError, match="add up to 18,446,744,073,709,551,619 ids but 3"):  # (int64 wrapped to 3)
        TokenStore.from_token_arrays(tmp_path / "a", [([2**62] * 3 + [2**62 + 3], [1, 2, 3])], vocab_size=10)
    with pytest.raises(TokenmillError):
        TokenStore.from_token_arrays(tmp_path / "b", [([2], [1, 10])], vocab_size=10)  # id 10 >= vocab
    with pytest.raises(TokenmillError):
        TokenStore.from_token_arrays(tmp_path / "c", [([1.5], [1])], vocab_size=10)  # fractional length
    (tmp_path / "d").mkdir()
    with pytest.raises(ConfigError, match="already exists"):
        TokenStore.from_token_arrays(tmp_path / "d", [([1], [1])], vocab_size=10)
    # a vocabulary a manifest cannot record: the argument is named (it was a format error about "the manifest")
    with pytest.raises(ConfigError, match="vocab_size"):
        TokenStore.from_token_arrays(tmp_path / "e", [([1], [1])], vocab_size=2**31 + 10)
    assert not (tmp_path / "e").exists()



def test_rerun_over_its_folder_with_overwrite(tmp_path):
    """A script run twice had no way through but deleting the folder by hand: overwrite=True replaces the
    store, which stays whole when the new arrays are bad; a folder with a user's files is never removed."""
    out = tmp_path / "s"
    TokenStore.from_token_arrays(out, [([2, 1], [5, 6, 7])], vocab_size=10)
    with pytest.raises(ConfigError, match="already exists; .* pass overwrite=True"):
        TokenStore.from_token_arrays(out, [([1], [4])], vocab_size=10)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(TokenmillError):  # id 10 >= vocab: the old store is untouched, no staging folder is left
        TokenStore.from_token_arrays(out, [([2], [1, 10])], vocab_size=10, overwrite=True)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]
    st = TokenStore.from_token_arrays(out, [([1], [4]), ([2], [8, 9])], vocab_size=10, overwrite=True)
    assert [x.tolist() for x in TokenStore.open(out)] == [[4], [8, 9]] and st.verify()["documents"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]
    ref = TokenStore.from_token_arrays(tmp_path / "ref", [([1], [4]), ([2], [8, 9])], vocab_size=10)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {p.name: p.read_bytes() for p in ref.path.iterdir()}
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="holds files that are not part of a token store"):
        TokenStore.from_token_arrays(mine, [([1], [4])], vocab_size=10, overwrite=True)
    assert (mine / "notes.txt").read_text() == "keep me"
    with pytest.raises(ConfigError, match="overwrite='yes' must be True or False"):
        TokenStore.from_token_arrays(out, [([1], [4])], vocab_size=10, overwrite="yes")


def test_a_shard_without_documents(tmp_path):
    st = TokenStore.from_token_arrays(tmp_path / "s", [([2, 1], [5, 6, 7]), ([], []), ([1], [9])], vocab_size=10)
    assert [x.tolist() for x in st] == [[5, 6], [7], [9]] and st.num_shards == 3
    assert st.verify()["documents"] == 3
