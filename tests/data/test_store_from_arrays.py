"""TokenStore.from_token_arrays: a store from ids a user already has, checked like a built one."""

from __future__ import annotations

import numpy as np
import pytest

from tokenmill import ConfigError, FormatError, InputError, TokenmillError, TokenStore, pack


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
    (tmp_path / "d").mkdir()  # (an empty folder is written into, as a new one: tempfile.mkdtemp()'s)
    assert TokenStore.from_token_arrays(tmp_path / "d", [([1], [1])], vocab_size=10).verify()["documents"] == 1
    # a vocabulary a manifest cannot record: the argument is named (it was a format error about "the manifest")
    with pytest.raises(ConfigError, match="vocab_size"):
        TokenStore.from_token_arrays(tmp_path / "e", [([1], [1])], vocab_size=2**31 + 10)
    assert not (tmp_path / "e").exists()



def test_rerun_over_its_folder_with_overwrite(tmp_path):
    """A script run twice had no way through but deleting the folder by hand: overwrite=True replaces the
    store, which stays whole when the new arrays are bad; a folder with a user's files is never removed."""
    out = tmp_path / "s"
    TokenStore.from_token_arrays(out, [([2, 1], [5, 6, 7])], vocab_size=10)
    with pytest.raises(ConfigError, match="already holds a token store .or an unfinished one.; pass overwrite=True"):
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
    for overwrite in (False, True):  # (named, not told to pass overwrite=True)
        with pytest.raises(ConfigError, match="holds files that are not part of a token store .notes.txt."):
            TokenStore.from_token_arrays(mine, [([1], [4])], vocab_size=10, overwrite=overwrite)
    assert (mine / "notes.txt").read_text() == "keep me"
    with pytest.raises(ConfigError, match="overwrite='yes' must be True or False"):
        TokenStore.from_token_arrays(out, [([1], [4])], vocab_size=10, overwrite="yes")


KILLED_BETWEEN_SHARDS = """
import os, signal, sys
import numpy as np
from tokenmill import TokenStore
def shards():
    yield np.array([2]), np.array([1, 2])
    os.kill(os.getpid(), signal.SIGKILL)
    yield np.array([2]), np.array([1, 2])
TokenStore.from_token_arrays(sys.argv[1], shards(), vocab_size=10, overwrite=sys.argv[2] == "1")
"""


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_run_killed_between_shards_is_replaced_by_the_next(tmp_path, overwrite):
    """Shards were written before anything said whose they were: a run killed between two left shard files
    without a manifest, which every later call refused ("remove the folder yourself")."""
    import subprocess
    import sys

    out = tmp_path / "s"
    if overwrite:
        TokenStore.from_token_arrays(out, [([3], [1, 2, 3])], vocab_size=10)
    r = subprocess.run([sys.executable, "-c", KILLED_BETWEEN_SHARDS, str(out), "1" if overwrite else "0"],
                       capture_output=True, timeout=300)
    assert r.returncode == -9, r.stderr.decode()
    if overwrite:  # the old store stands, whole
        assert [x.tolist() for x in TokenStore.open(out)] == [[1, 2, 3]]
    else:  # and the unfinished folder says how to finish it (it had said to rerun a build "to resume")
        with pytest.raises(FormatError, match=r"from_token_arrays was interrupted: run it again with overwrite=True"):
            TokenStore.open(out)
    st = TokenStore.from_token_arrays(out, [([3], [4, 5, 6])], vocab_size=10, overwrite=True)
    assert [x.tolist() for x in st] == [[4, 5, 6]] and st.verify()["documents"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"] and not (out / "build.json").exists()


def test_overwrite_through_a_link_replaces_the_store_where_it_is(tmp_path):
    """A store reached through a symbolic link had its link swapped with the new store (written beside the link,
    on the link's disk), the old one's files deleted through it, and the call failed after all that."""
    (tmp_path / "big").mkdir()
    real = tmp_path / "big" / "store"
    TokenStore.from_token_arrays(real, [([2], [7, 8])], vocab_size=10)
    link = tmp_path / "store"
    link.symlink_to(real, target_is_directory=True)
    st = TokenStore.from_token_arrays(link, [([1], [9])], vocab_size=10, overwrite=True)
    assert link.is_symlink() and [x.tolist() for x in TokenStore.open(link)] == [[9]]
    assert [x.tolist() for x in TokenStore.open(real)] == [[9]] and st.path == real
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big", "store"]


def test_a_shard_without_documents(tmp_path):
    st = TokenStore.from_token_arrays(tmp_path / "s", [([2, 1], [5, 6, 7]), ([], []), ([1], [9])], vocab_size=10)
    assert [x.tolist() for x in st] == [[5, 6], [7], [9]] and st.num_shards == 3
    assert st.verify()["documents"] == 3


def test_ids_are_checked_in_their_own_dtype_and_written_without_an_int64_copy(tmp_path):
    """The ids were copied to int64 to be checked, then cast to the store's dtype: ~10 bytes an id more than the
    input at once (200M uint32 ids: 3 GB). Now they are checked as they are and cast once (not at all when they
    have the store's dtype): the allocations of a write stay far below one int64 copy of the ids."""
    import tracemalloc

    n = 1 << 21
    ids = np.full(n, 7, np.uint16)
    lengths = np.full(1 << 10, n >> 10, np.int64)
    tracemalloc.start()
    try:
        TokenStore.from_token_arrays(tmp_path / "s", [(lengths, ids)], vocab_size=1000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < n * 4, peak  # an int64 copy alone is n * 8 bytes
    assert TokenStore.open(tmp_path / "s").get(3).tolist() == [7] * (n >> 10)
    with pytest.raises(InputError, match=r"shards\[0\] ids holds 1,000 \(at index 5\); shards\[0\] ids must be in 0 .. 999"):
        TokenStore.from_token_arrays(tmp_path / "t", [([6], np.array([1, 2, 3, 4, 5, 1000], np.int64))], vocab_size=1000)
