"""Attention masks: dense SDPA mask and FlexAttention BlockMask agree with the hand-drawn mask."""

import warnings

import numpy as np
import pytest

import tokenmill

torch = pytest.importorskip("torch")

from tokenmill.batching import pack, pad_batch
from tokenmill.torch import collate_blocks, document_mask_mod, flex_block_mask, sdpa_mask, to_tensors

A, B = [1, 10, 11, 2], [1, 12, 2]

# A (positions 0-3), B (4-6), one padding position (7): True = may attend, row = query.
HAND_DRAWN = np.array([
    [1, 0, 0, 0, 0, 0, 0, 0],
    [1, 1, 0, 0, 0, 0, 0, 0],
    [1, 1, 1, 0, 0, 0, 0, 0],
    [1, 1, 1, 1, 0, 0, 0, 0],
    [0, 0, 0, 0, 1, 0, 0, 0],
    [0, 0, 0, 0, 1, 1, 0, 0],
    [0, 0, 0, 0, 1, 1, 1, 0],
    [0, 0, 0, 0, 0, 0, 0, 1],
], dtype=bool)


def packed_batch():
    return next(pack([4, 3], 8).batches([A, B], batch_size=1, pad_id=0))


def test_sdpa_mask_is_hand_drawn():
    mask = sdpa_mask(packed_batch())
    assert mask.shape == (1, 1, 8, 8) and mask.dtype == torch.bool
    assert (mask[0, 0].numpy() == HAND_DRAWN).all()


def test_sdpa_mask_of_a_tensor_batch_is_made_where_the_batch_is():
    """A batch moved to an accelerator got its mask on the CPU (SDPA then fails, or worse, copies each step);
    the meta device stands in for a GPU here."""
    t = {k: (v.to("meta") if isinstance(v, torch.Tensor) else v) for k, v in to_tensors(packed_batch()).items()}
    assert sdpa_mask(t).device.type == "meta" and sdpa_mask(t).shape == (1, 1, 8, 8)
    assert sdpa_mask(to_tensors(packed_batch()), device="meta").device.type == "meta"
    assert sdpa_mask(to_tensors(packed_batch())).device.type == "cpu"


def test_mask_mod_densely_equals_hand_drawn():
    seg = torch.from_numpy(packed_batch().segment_ids)
    mod = document_mask_mod(seg)
    q = torch.arange(8)[:, None]
    kv = torch.arange(8)[None, :]
    dense = mod(torch.zeros((), dtype=torch.long), torch.zeros((), dtype=torch.long), q, kv)
    assert (dense.numpy() == HAND_DRAWN).all()


def test_flex_block_mask_matches_on_cpu():
    from torch.nn.attention.flex_attention import create_mask

    batch = packed_batch()
    seg = torch.from_numpy(batch.segment_ids)
    assert (create_mask(document_mask_mod(seg), 1, None, 8, 8, device="cpu")[0, 0].numpy() == HAND_DRAWN).all()
    bm = flex_block_mask(batch)
    assert bm.shape[-2:] == (8, 8)
    # flex attention with the BlockMask equals SDPA with the dense mask
    from torch.nn.attention.flex_attention import flex_attention

    q, k, v = torch.randn(3, 1, 2, 8, 16, generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = flex_attention(q, k, v, block_mask=bm)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=sdpa_mask(batch))
    assert torch.allclose(got, want, atol=1e-5)
    # a loader's dict of tensors: the same mask (it was refused, where sdpa_mask took it)
    bm2 = flex_block_mask(to_tensors(batch))
    assert torch.equal(bm2.to_dense(), bm.to_dense())


def test_a_dict_whose_cu_seqlens_do_not_fit_its_rows_is_refused():
    """``cu_seqlens`` of another batch (or a dict whose rows were sliced for micro-batches) had given a mask
    letting one document read another, or an IndexError; a dict of numpy arrays failed in flex_block_mask
    with an AttributeError, one without cu_seqlens with a bare KeyError."""
    big = next(pack([4, 3, 2, 5], 8).batches([A, B, [1, 2], [1, 3, 4, 5, 2]], batch_size=2, pad_id=0))
    t = to_tensors(big)
    halves = {k: v[:1] if torch.is_tensor(v) and v.ndim == 2 else v for k, v in t.items()}  # rows sliced
    for make in (sdpa_mask, flex_block_mask):
        with pytest.raises(tokenmill.ConfigError, match=r"cu_seqlens'\] must rise strictly from 0 to rows x positions = 8"):
            make(halves)
        with pytest.raises(tokenmill.ConfigError, match="the batch has no cu_seqlens"):
            make({k: v for k, v in t.items() if k != "cu_seqlens"})
    as_numpy = {k: v.numpy() if torch.is_tensor(v) else v for k, v in t.items()}
    assert torch.equal(flex_block_mask(as_numpy).to_dense(), flex_block_mask(t).to_dense())
    assert torch.equal(sdpa_mask(as_numpy), sdpa_mask(big))


def test_padded_rows_have_no_nan():
    batch = pad_batch([A, [1]], pad_id=0)
    q = torch.randn(2, 1, 4, 8)
    out = torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=sdpa_mask(batch))
    assert not out.isnan().any()


def test_tensors_and_collate():
    batch = packed_batch()
    t = to_tensors(batch)
    assert t["input_ids"].dtype == torch.int64 and t["cu_seqlens"].tolist() == [0, 4, 7, 8]
    assert t["max_seqlen"] == 4 and t["attention_mask"].dtype == torch.bool
    c = collate_blocks(batch.blocks() * 2)
    assert c["input_ids"].shape == (2, 8) and c["cu_seqlens"].tolist() == [0, 4, 7, 8, 12, 15, 16]


def test_packed_batches_dataloader_with_workers_keeps_plan_order():
    from tokenmill.torch import PackedBatches

    rng = np.random.default_rng(0)
    docs = [rng.integers(0, 100, n) for n in rng.integers(1, 30, 60)]
    plan = pack([len(d) for d in docs], 32)
    want = [b.input_ids.tolist() for b in plan.batches(docs, batch_size=3, pad_id=0)]
    ds = PackedBatches(plan, docs, batch_size=3, pad_id=0)
    assert len(ds) == len(want)
    for workers in (0, 2):
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers)
        assert [b["input_ids"].tolist() for b in loader] == want


def test_int32_index_batches_as_tensors():
    plan = pack([4, 3], 8)
    wide = next(plan.batches([A, B], batch_size=1, pad_id=0))
    small = next(plan.batches([A, B], batch_size=1, pad_id=0, index_dtype=np.int32))
    tw, ts = to_tensors(wide), to_tensors(small)
    assert ts["position_ids"].dtype == ts["doc_ids"].dtype == torch.int32
    assert ts["input_ids"].dtype == ts["labels"].dtype == torch.int64  # cross_entropy wants int64 targets
    for name in ("input_ids", "labels", "position_ids", "doc_ids", "attention_mask", "cu_seqlens"):
        assert torch.equal(tw[name].to(ts[name].dtype), ts[name]), name
    assert torch.equal(sdpa_mask(small), sdpa_mask(wide))
    emb = torch.nn.Embedding(8, 2)  # int32 position ids index an embedding as they are
    assert torch.equal(emb(ts["position_ids"]), emb(tw["position_ids"]))


def test_what_is_not_a_batch_is_named():
    """None or an array gave an AttributeError from deep inside."""
    from tokenmill import ConfigError
    from tokenmill.torch import flex_block_mask, sdpa_mask, to_tensors

    for fn, also in ((to_tensors, ""), (sdpa_mask, r" \(or a dict of tensors from to_tensors\)"),
                     (flex_block_mask, r" \(or a dict of tensors from to_tensors\)")):
        for bad, kind in ((None, "NoneType"), (np.zeros((2, 4), np.int64), "ndarray")):
            with pytest.raises(ConfigError, match=rf"^{fn.__name__} takes a tokenmill Batch or Block{also}, not {kind}"):
                fn(bad)
