"""Inputs a crash hunt found taken silently or failing with another library's error: each refused here with
tokenmill's own, naming the argument (a bool among ints read as 1, an id past the last document given a
part, complex labels, a count clamped to 1, a masked array reaching a kernel, an 8 GiB+ dense mask)."""

from __future__ import annotations

import numpy as np
import pytest

from tokenmill.errors import ConfigError, InputError


def test_a_bool_among_integers_is_not_one():
    from tokenmill.batching import pack, pad_batch
    from tokenmill.windows import SlidingWindows

    for call in (lambda: SlidingWindows(8, 4).plan([True, 5]), lambda: pack([3, np.True_], 8),
                 lambda: pad_batch([[1, True, 11, 2]], pad_id=2), lambda: pad_batch([[1, 2], [3, False]], pad_id=0)):
        with pytest.raises(InputError, match=r"holds (np\.)?(True_?|False) at index \d; it must hold integers \(True is not 1\)"):
            call()
    assert pad_batch([[1, 2], [3]], pad_id=0).input_ids.tolist() == [[1, 2], [3, 0]]  # (lists of ints as before)
    assert SlidingWindows(8, 4).plan([3, 5]).length.tolist() == [3, 5]


def test_mixture_part_of_and_masked_flagged_check_their_ids():
    from tokenmill import MaskedSource
    from tokenmill.data.mixture import Mixture

    m = Mixture([([[1, 2, 3]], 1), ([[7, 8]], 1)])
    assert m.part_of(np.array([[0, 1], [-1, 1]])).tolist() == [[0, 1], [-1, 1]]
    for bad, said in (([2], "doc_ids holds 2"), ([0.9], "dtype float64"), ([True], "dtype bool"),
                      (np.array([2**64 - 1], np.uint64), "doc_ids holds 18,446")):
        with pytest.raises(InputError, match=said):
            m.part_of(bad)
    src = MaskedSource([np.array([1, 2, 3]), np.array([4, 5])], [np.array([0, 1, 1]), np.array([1, 0])])
    assert src.flagged([0, 1], [0, 0], [3, 2]) == 3
    with pytest.raises(InputError, match="doc holds 2"):
        src.flagged([2], [0], [1])  # (had been numpy's IndexError)
    with pytest.raises(InputError, match="dtype float64"):
        src.flagged([0.9], [0.5], [2.9])  # (had been truncated: 1)


def test_loss_refuses_complex_labels_and_a_cpu_count_it_would_clamp():
    torch = pytest.importorskip("torch")
    from tokenmill.torch import token_weighted_loss

    logits, labels = torch.zeros(1, 3, 4), torch.tensor([[-100, 1, 2]])
    assert token_weighted_loss(logits, labels, num_targets=torch.tensor(2)).item() == pytest.approx(np.log(4))
    with pytest.raises(ConfigError, match="complex64"):
        token_weighted_loss(logits, torch.tensor([[-100, 1 + 5j, 2]], dtype=torch.complex64), num_targets=2)
    with pytest.raises(ConfigError, match="num_targets=-3 is out of range"):
        token_weighted_loss(logits, labels, num_targets=torch.tensor(-3))
    with pytest.raises(ConfigError, match="num_targets=0, but these labels hold 2 targets"):
        token_weighted_loss(logits, labels, num_targets=torch.tensor(0))
    assert token_weighted_loss(logits, torch.full((1, 3), -100), num_targets=torch.tensor(0)).item() == 0.0
    # numpy labels checked as integers first (torch's own errors, or a uint64 wrapped to a negative id, before)
    assert token_weighted_loss(logits, np.array([[-100, 1, 2]], ">i8"), num_targets=2).item() == pytest.approx(
        np.log(4) * 2 / 2)
    for bad_logits, bad_labels, said in ((logits, np.array([[-100, 1, "a"]], object), "labels holds 'a'"),
                                         (logits, np.array([[0, 1, 2**63]], np.uint64), "labels holds 9,223"),
                                         (np.zeros((1, 3, 4)), [[-100, 1, 2]], "logits are a ndarray"),
                                         (torch.zeros(1, 3, 0), [[-100, 1, 2]], r"logits are of shape \(1, 3, 0\)")):
        with pytest.raises(ConfigError, match=said):
            token_weighted_loss(bad_logits, bad_labels, num_targets=2)
    with pytest.raises(ConfigError, match="ignore_index=1.5 must be an integer"):
        token_weighted_loss(logits, labels, num_targets=2, ignore_index=1.5)


def test_outputs_plans_blocks_and_masks_are_checked_before_use(tmp_path):
    torch = pytest.importorskip("torch")
    from tokenmill import TokenStore
    from tokenmill.batching import pack
    from tokenmill.torch import collate_blocks, flex_block_mask, sdpa_mask
    from tokenmill.windows import SlidingWindows

    toks, offs = np.arange(10), np.array([0, 6, 10])
    plan = SlidingWindows(4, 4).plan([6, 4])
    with pytest.raises(ConfigError, match="out is a masked array; pass a plain numpy array"):
        plan.gather(toks, offs, out=np.ma.zeros((3, 4), np.int64))
    store = TokenStore.from_token_arrays(tmp_path / "s", [(np.array([6, 4]), toks)], vocab_size=16)
    assert store.gather_windows(plan)[0].tolist() == plan.gather(toks, offs)[0].tolist()
    with pytest.raises(ConfigError, match="plan is a list, not a WindowPlan"):
        store.gather_windows([1, 2])
    for out in ([[0] * 4] * 3, np.ma.zeros((3, 4), np.uint16)):
        with pytest.raises(ConfigError, match="out must be a writable C-contiguous array"):
            store.gather_windows(plan, out=out)
    block = next(pack([2, 1], 3).blocks([[1, 2], [3]], pad_id=0))
    with pytest.raises(ConfigError, match="block 1 is a int, not a Block"):
        collate_blocks([block, 1])
    with pytest.raises(ConfigError, match="BLOCK_SIZE=0 is out of range"):
        flex_block_mask(block, BLOCK_SIZE=0)
    with pytest.raises(ConfigError, match=r"a dense mask of 1 row of 1,048,576 positions is 1,024 GiB .* use "
                                          r"flex_block_mask"):
        sdpa_mask({"input_ids": torch.zeros((1, 2**20), dtype=torch.int8), "cu_seqlens": torch.tensor([0, 2**20])})


def test_decode_batch_threads_and_semantic_boundaries_are_checked():
    import re
    import warnings

    from tokenmill import train_bpe
    from tokenmill.windows import SemanticWindows

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (training stops early on this text)
        tok = train_bpe(["hello world"] * 10, 260)
    assert tok.decode_batch([[104, 105]], num_threads=2) == ["hi"]
    for call in (lambda: tok.decode_batch([[1]], num_threads=0), lambda: tok.decode_bytes_batch([[1]], num_threads=-1)):
        with pytest.raises(ConfigError, match="num_threads=-?[01] is out of range"):  # (as encode_batch refuses it)
            call()
    for given in (b"\n", re.compile("\n")):
        with pytest.raises(ConfigError, match=f"boundaries is a {type(given).__name__}; pass one of"):
            SemanticWindows(6, boundaries=given)


def test_a_batch_dicts_cu_seqlens_and_input_ids_are_checked_before_torch_reads_them():
    pytest.importorskip("torch")
    from tokenmill.torch import sdpa_mask

    ids = np.zeros((1, 3))
    assert sdpa_mask({"input_ids": ids, "cu_seqlens": np.array([0, 2, 3], ">i8")})[0, 0].int().tolist() == \
        [[1, 0, 0], [1, 1, 0], [0, 0, 1]]  # (big-endian: torch had refused its byte order)
    with pytest.raises(ConfigError, match=r"batch\['cu_seqlens'\] holds 'a' at index 1"):
        sdpa_mask({"input_ids": ids, "cu_seqlens": np.array([0, "a", 3], object)})
    with pytest.raises(ConfigError, match=r"batch\['input_ids'\] is a list; pass a 2-D tensor or numpy array"):
        sdpa_mask({"input_ids": [[1, 2, 3]], "cu_seqlens": [0, 3]})


def test_a_masked_array_with_masked_entries_is_refused_not_read_under_its_mask():
    from tokenmill.batching import pack
    from tokenmill.windows import SlidingWindows

    lengths = np.ma.masked_array([3, 7, 5], mask=[False, True, False])  # (np.asarray reads the 7 under the mask)
    for call in (lambda: SlidingWindows(8, 4).plan(lengths), lambda: pack(lengths, 8)):
        with pytest.raises(InputError, match=r"masked array with 1 masked entry \(the first at flat index 1\).*"
                                             r"a\.filled\(value\) or a\.compressed\(\)"):
            call()
    with pytest.raises(InputError, match="with 2 masked entries"):
        pack(np.ma.masked_array([3, 7, 5], mask=[True, True, False]), 8)
    plain = np.ma.masked_array([3, 7, 5], mask=[False, False, False])  # (nothing masked: the values as they are)
    assert SlidingWindows(8, 4).plan(plain).length.tolist() == [3, 7, 5]
    assert SlidingWindows(8, 4).plan(lengths.compressed()).length.tolist() == [3, 5]
