"""The loader over a MaskedSource (supervised fine-tuning): flagged-0 tokens are never targets, resume stays exact
and checks the mask, and the packed loss equals the loss of every example alone."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tokenmill import IGNORE_INDEX, MaskedSource, SlidingWindows, TokenmillError, pack, pad_batch
from tokenmill.torch import TinyCausalLM, TinyConfig, TrainingLoader, sdpa_mask, to_tensors
from tokenmill.torch.loss import token_weighted_loss


def make(n=80, seed=1, vocab=64):
    rng = np.random.default_rng(seed)
    docs = [rng.integers(0, vocab, int(k)) for k in rng.integers(2, 30, n)]
    masks = [np.r_[np.zeros(c, np.uint8), np.ones(d.size - c, np.uint8)]
             for d, c in ((d, int(rng.integers(0, d.size))) for d in docs)]
    return docs, masks


DOCS, MASKS = make()


def masked_by_hand(batch):
    labels = batch["labels"].numpy().copy()
    doc, off = batch["doc_ids"].numpy(), batch["token_offsets"].numpy()
    for p in zip(*np.nonzero(doc >= 0)):
        if not MASKS[doc[p]][off[p]]:
            labels[p] = IGNORE_INDEX
    return labels


@pytest.mark.parametrize("how", [dict(block_size=40), dict(windows=SlidingWindows(12, stride=8)),
                                 dict(windows=SlidingWindows(12, stride=8), block_size=30)])
def test_loader_batches_are_the_plain_ones_with_the_prompts_ignored(how):
    src = MaskedSource(DOCS, MASKS)
    plain = TrainingLoader(DOCS, batch_size=3, seed=5, **how)
    masked = TrainingLoader(src, batch_size=3, seed=5, **how)
    n = off = 0
    for a, b in zip(plain, masked):
        assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["cu_seqlens"], b["cu_seqlens"])
        want = masked_by_hand(a)
        np.testing.assert_array_equal(b["labels"].numpy(), want)
        assert int(b["num_targets"]) == int(np.sum(want != IGNORE_INDEX))
        off += int(a["num_targets"]) - int(b["num_targets"])
        n += 1
    assert n == len(masked) > 2 and off > 20  # (the test can fail: the prompts' targets are gone)


def test_resume_is_exact_and_a_state_of_another_mask_is_refused():
    src = MaskedSource(DOCS, MASKS)
    whole = [b["labels"].clone() for b in TrainingLoader(src, batch_size=2, block_size=32, seed=3)]
    first = TrainingLoader(src, batch_size=2, block_size=32, seed=3)
    it = iter(first)
    for _ in range(3):
        next(it)
    state = first.state_dict()
    again = TrainingLoader(src, batch_size=2, block_size=32, seed=3)
    again.load_state_dict(state)
    rest = [b["labels"] for b in again]
    assert all(torch.equal(a, b) for a, b in zip(whole[3:], rest)) and len(rest) == len(whole) - 3
    other = MaskedSource(DOCS, [1 - m for m in MASKS])
    with pytest.raises(TokenmillError, match="data"):
        TrainingLoader(other, batch_size=2, block_size=32, seed=3).load_state_dict(state)


def test_workers_give_the_same_masked_batches():
    src = MaskedSource(DOCS, MASKS)
    one = [b["labels"] for b in TrainingLoader(src, batch_size=2, block_size=32, seed=0)]
    two = [b["labels"] for b in TrainingLoader(src, batch_size=2, block_size=32, seed=0, num_workers=2)]
    assert len(one) == len(two) and all(torch.equal(a, b) for a, b in zip(one, two))


def test_packed_loss_equals_the_loss_of_each_example_alone():
    """The packed equals unpacked proof, with a loss mask: the same summed token losses over the same targets."""
    docs, masks = DOCS[:24], MASKS[:24]
    src = MaskedSource(docs, masks)
    model = TinyCausalLM(TinyConfig(positions="rope", vocab_size=64), seed=0, dtype=torch.float64).eval()

    def summed(batch):
        t = to_tensors(batch)
        logits = model(t["input_ids"], position_ids=t["position_ids"], attention_mask=sdpa_mask(t))
        n = int((t["labels"] != IGNORE_INDEX).sum())
        return token_weighted_loss(logits, t["labels"], num_targets=1).item(), n

    with torch.no_grad():
        packed = [summed(b) for b in pack(src.lengths, 64).batches(src, batch_size=4, pad_id=0)]
        alone = [summed(pad_batch([d], pad_id=0, loss_mask=[m])) for d, m in zip(docs, masks)]
    assert sum(n for _, n in packed) == sum(n for _, n in alone) == sum(int(m[1:].sum()) for m in masks)
    assert abs(sum(v for v, _ in packed) - sum(v for v, _ in alone)) < 1e-9
    # (the test can fail: without the mask the packed loss counts the prompts too)
    with torch.no_grad():
        unmasked = sum(summed(b)[0] for b in pack(src.lengths, 64).batches(docs, batch_size=4, pad_id=0))
    assert unmasked - sum(v for v, _ in alone) > 1.0
