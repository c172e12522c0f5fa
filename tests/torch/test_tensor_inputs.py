"""What a PyTorch user passes: tensors and scalar tensors where the API documents lists and ints.

A probe of every public entry point with the inputs a torch user has at hand (a tensor of ids or keys,
``lengths.max()``, ``ids[0]``, a list of tensors, a tensor on another device, one that requires grad)
found them refused where numpy and the anchors take them, refused with bare Python errors, and in one
case silently wrong: a tensor of group keys split every document into its own group (a 0-d tensor
hashes by identity), so one group landed on both sides of a train/validation split. Each test here
holds the tensor form equal to the plain form, or the refusal to a message that names the input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tokenmill import (  # noqa: E402
    ConfigError,
    InputError,
    LengthGroupedBatches,
    SlidingWindows,
    TokenStore,
    bm25_scores,
    pack,
    pad_batch,
    split_documents,
    train_bpe,
)


@pytest.fixture(scope="module")
def tok():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return train_bpe(["hello world, the tensors are here"] * 5, 290)


def test_tensor_group_keys_split_as_their_values(tmp_path):
    """Each 0-d tensor hashed by identity: every document its own group, so group 2 (docs 10-14) was split
    across train and validation. Keys are their values now, whatever holds them."""
    keys = [i // 5 for i in range(40)]
    want = split_documents(keys, 0.3)
    for form in (torch.tensor(keys), list(torch.tensor(keys)), np.array(keys), [np.int64(k) for k in keys]):
        got = split_documents(form, 0.3)
        assert got.val.tolist() == want.val.tolist() and got.train.tolist() == want.train.tolist()
    val = set(want.val.tolist())
    assert all((i in val) == (j in val) for i in range(40) for j in range(40) if keys[i] == keys[j])
    store = TokenStore.from_token_arrays(tmp_path / "s", [(np.ones(40, np.int64), np.arange(40))], vocab_size=64)
    g = torch.tensor(keys)
    train, val_view = store.split(0.3, by=lambda i: g[i])
    assert val_view.index.tolist() == want.val.tolist() and train.index.tolist() == want.train.tolist()
    for bad, match in ((torch.zeros((2, 3)), r"groups is an array of shape \(2, 3\)"),
                       ([torch.zeros(2)] * 3, r"group key 0 is an array of shape \(2,\)")):
        with pytest.raises(ConfigError, match=match):
            split_documents(bad, 0.3)
    with pytest.raises(ConfigError, match="group key 0 is a list, which cannot be a group key"):
        store.split(0.3, by=lambda i: [keys[i]])  # (a bare TypeError: unhashable type)
    assert store.split(np.float32(0.3))[1].index.size == store.split(0.3)[1].index.size  # (was refused)


def test_scalar_tensors_are_integers_where_ints_are_taken(tok, tmp_path):
    """``pad_id=torch.tensor(0)``, ``max_length=lengths.max()``, ``store[ids[0]]``: refused as "must be an integer
    (got a Tensor)" where numpy scalars were taken. A 0-d integer tensor is its value now; a bool, a float or a
    one-element 1-D tensor is still refused."""
    lengths = torch.tensor([2, 1])
    assert pad_batch([[1, 2], [3]], pad_id=torch.tensor(0), max_length=lengths.max()).input_ids.tolist() == \
        pad_batch([[1, 2], [3]], pad_id=0, max_length=2).input_ids.tolist()
    assert pack([2, 1], torch.tensor(3)).num_blocks == pack([2, 1], 3).num_blocks
    ids = torch.tensor(tok.encode("hello"))
    assert tok.token_bytes(ids[0]) == tok.token_bytes(int(ids[0]))
    assert SlidingWindows(torch.tensor(4), torch.tensor(2)).plan([9]).start.tolist() == SlidingWindows(4, 2).plan([9]).start.tolist()
    store = TokenStore.from_token_arrays(tmp_path / "s", [([2, 1], [5, 6, 7])], vocab_size=10)
    assert store[torch.tensor(1)].tolist() == store.get(torch.tensor(1)).tolist() == [7]
    batch = next(pack([2, 1], 3).batches([[1, 2], [3]], batch_size=1, pad_id=0))
    assert batch.block(torch.tensor(0)).input_ids.tolist() == batch.block(0).input_ids.tolist()
    for bad in (torch.tensor(True), torch.tensor(3.0), torch.tensor([3])):
        with pytest.raises(ConfigError, match="must be an integer"):
            pack([2, 1], bad)


def test_decode_takes_a_list_of_tensor_elements_and_refuses_one_id(tok):
    ids = tok.encode("hello world, the tensors are here " * 3)
    t = torch.tensor(ids)
    for n in (3, 40):  # the Python join and the compiled one
        assert tok.decode(list(t[:n])) == tok.decode(tuple(t[:n])) == tok.decode(ids[:n])
    zero_one = torch.tensor([0, 1] * 20)  # (a bool and an int read alike as 0 and 1: each such item looked at)
    assert tok.decode(tuple(zero_one)) == tok.decode([0, 1] * 20)
    for one in (torch.tensor(ids[0]), np.array(ids[0])):  # as decode(5) is refused: no silent one-id sequence
        with pytest.raises(ConfigError, match="ids is one id"):
            tok.decode(one)


def test_token_arrays_check_the_special_ids_before_writing_and_leave_no_folder_behind(tmp_path):
    """``eos_id=np.int64(7)`` failed with a bare TypeError after the shards were written, and a bad eos_id or a bad
    shard left a folder no call could finish ("already exists") or open."""
    st = TokenStore.from_token_arrays(tmp_path / "ok", [([2, 1], [5, 6, 7])], vocab_size=10, eos_id=np.int64(7),
                                      bos_id=torch.tensor(1))
    assert (st.eos_id, st.bos_id) == (7, 1)
    for kw, match in ((dict(eos_id=1.5), "eos_id=1.5 must be an integer"), (dict(eos_id=-3), "eos_id=-3 is out of range"),
                      (dict(bos_id=10), "bos_id=10 is out of range"), (dict(eos_id=True), "eos_id=True must be an integer"),
                      (dict(tokenizer_hash=3), "tokenizer_hash=3 must be a non-empty str")):
        with pytest.raises(ConfigError, match=match):
            TokenStore.from_token_arrays(tmp_path / "bad", [([2, 1], [5, 6, 7])], vocab_size=10, **kw)
        assert not (tmp_path / "bad").exists()
    with pytest.raises(InputError, match=r"shards\[1\]: the lengths add up to 2 ids but 1 are given"):
        TokenStore.from_token_arrays(tmp_path / "bad", [([2, 1], [5, 6, 7]), ([2], [1])], vocab_size=10)
    assert not (tmp_path / "bad").exists()
    TokenStore.from_token_arrays(tmp_path / "bad", [([2, 1], [5, 6, 7])], vocab_size=10)  # the retry works


def test_tensors_that_numpy_cannot_read_are_named():
    """A tensor that requires grad raised torch's bare RuntimeError, one on another device (meta here, as a GPU
    one) numpy's bare TypeError."""
    from tokenmill import Chunk, assemble_context

    scores = torch.tensor([0.5, 0.2], requires_grad=True)
    chunks = [Chunk(0, 0, 2, 0, 2, "ab", np.array([1, 2])), Chunk(1, 2, 3, 2, 3, "c", np.array([3]))]
    with pytest.raises(ConfigError, match="scores must be numbers.*requires grad"):
        assemble_context(chunks, scores, 2)
    with pytest.raises(InputError, match="not an array of integers numpy can read"):
        pad_batch([torch.tensor([1.0, 2.0], requires_grad=True)], pad_id=0)
    plan = SlidingWindows(4, 2).plan([6])
    with pytest.raises(InputError, match=r"tokens is a Tensor numpy cannot read .*tokens.cpu\(\)"):
        plan.gather(torch.arange(6, device="meta"), np.array([0, 6]))


def test_planners_take_the_documents_themselves():
    """``LengthGroupedBatches`` said it takes "a list of arrays: its lengths", and refused one (an inhomogeneous
    shape), as did ``pack`` and the windows' ``plan``: a list of documents (tensors, arrays or lists of ids)
    is its lengths now."""
    docs = [torch.arange(2), torch.arange(5), torch.arange(3)]
    for form in (docs, [d.numpy() for d in docs], [d.tolist() for d in docs]):
        assert LengthGroupedBatches(form, batch_size=1).lengths.tolist() == [2, 5, 3]
        assert pack(form, 8).doc_lengths.tolist() == [2, 5, 3]
        assert SlidingWindows(4, 2).plan(form).start.tolist() == SlidingWindows(4, 2).plan([2, 5, 3]).start.tolist()
    with pytest.raises(InputError, match=r"item 1 has shape \(1, 1\), not 1-D"):
        pack([[1, 2], [[3]]], 8)


def test_torch_helpers_check_what_they_are_given():
    from tokenmill.torch import PackedBatches, sdpa_mask, to_tensors, token_weighted_loss
    from tokenmill.torch.model import TinyCausalLM, TinyConfig

    docs = [[1, 2, 3], [4, 5]]
    plan = pack([3, 2], 5)
    for bad in (0, 2.5):  # (ZeroDivisionError and TypeError inside len())
        with pytest.raises(ConfigError, match="batch_size"):
            PackedBatches(plan, docs, batch_size=bad, pad_id=0)
    assert len(PackedBatches(plan, docs, batch_size=torch.tensor(2), pad_id=0)) == 1
    block = next(plan.blocks(docs, pad_id=0))
    tensors = to_tensors(block)
    as_numpy = {k: (v.numpy() if torch.is_tensor(v) else v) for k, v in tensors.items()}
    assert torch.equal(sdpa_mask(as_numpy), sdpa_mask(tensors))  # (AttributeError: no .to on an ndarray)
    logits = torch.randn(1, 5, 8)
    labels = torch.tensor([[1, 2, 3, -100, 4]])
    want = token_weighted_loss(logits, labels, num_targets=3)
    assert torch.equal(token_weighted_loss(logits, labels.int(), num_targets=3), want)  # (cross_entropy's RuntimeError)
    with pytest.raises(ConfigError, match="labels are a torch.float32 tensor"):
        token_weighted_loss(logits, labels.float(), num_targets=3)
    for kw, match in ((dict(n_heads=0), "n_heads=0 is out of range"), (dict(vocab_size=64.0), "vocab_size=64.0 must be")):
        with pytest.raises(ConfigError, match=match):
            TinyConfig(**kw)
    model = TinyCausalLM(TinyConfig())
    with pytest.raises(ConfigError, match=r"input_ids is a Tensor of shape \(3,\); pass a \(B, T\) integer tensor"):
        model(torch.tensor([1, 2, 3]))


def test_bm25_refuses_rows_of_queries_or_documents():
    """A 2-D query (several queries) was flattened into one, a 2-D document likewise."""
    assert bm25_scores(7, [[7]]).tolist() == bm25_scores([7], [[7]]).tolist()
    with pytest.raises(ConfigError, match=r"query_ids has shape \(2, 2\); pass one query's ids"):
        bm25_scores([[1, 2], [7, 7]], [[7, 1]])
    with pytest.raises(InputError, match=r"document 0 has shape \(1, 2\); it must be 1-D"):
        bm25_scores([7], [[[1, 2]], [7]])
