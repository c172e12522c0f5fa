"""Attention masks for packed batches: a dense SDPA mask and a FlexAttention ``BlockMask``.

Both encode the same rule, True = may attend: query ``q`` sees key ``kv`` when ``kv <= q`` and
both lie in the same attention segment (document, or padding run) of the same row::

    segment_ids   0 0 0 0 1 1 1 2        (A, B, padding)
    mask_mod(b, h, q, kv) = (segment_ids[b, q] == segment_ids[b, kv]) & (q >= kv)

The dense mask costs ``B*T*T`` bytes; the BlockMask stores only which 128x128 tiles are full, partial
or empty, so long packed blocks skip the empty tiles entirely.
"""

from __future__ import annotations

from ..batching.batch import as_batch
from ..errors import require

torch = require("torch", "torch")


def sdpa_mask(batch, *, device=None):
    """``(B, 1, T, T)`` bool tensor for ``torch.nn.functional.scaled_dot_product_attention``
    (``attn_mask``; True = may attend). Every row has at least its diagonal, so no NaNs.
    ``batch``: a :class:`~tokenmill.batching.Batch`, a ``Block``, or a dict of tensors from
    :func:`to_tensors` / :class:`~tokenmill.torch.TrainingLoader` (its ``cu_seqlens`` are used; the mask
    is made on their device unless ``device`` says otherwise).

    >>> from tokenmill.batching import pack
    >>> block = next(pack([2, 1], 3).blocks([[1, 2], [3]], pad_id=0))
    >>> sdpa_mask(block)[0, 0].int().tolist()
    [[1, 0, 0], [1, 1, 0], [0, 0, 1]]
    >>> from tokenmill.torch import to_tensors
    >>> torch.equal(sdpa_mask(to_tensors(block)), sdpa_mask(block))
    True
    """
    if isinstance(batch, dict):
        B, T = batch["input_ids"].shape
        cu = torch.as_tensor(batch["cu_seqlens"])  # (a numpy array too, as hf_inputs takes them)
        if device is None:  # where the batch is (a batch moved to the GPU gets its mask there)
            device = cu.device
        seg = segment_ids(cu.to(device), B, T)
        causal = torch.ones(T, T, dtype=torch.bool, device=device).tril()
        return ((seg[:, :, None] == seg[:, None, :]) & causal).unsqueeze(1)
    return torch.from_numpy(as_batch(batch, "sdpa_mask", " (or a dict of tensors from to_tensors)").dense_mask()
                            ).unsqueeze(1).to(device)


def document_mask_mod(segment_ids):
    """The FlexAttention ``mask_mod`` of block-diagonal causal attention over ``segment_ids``
    (``(B, T)`` int tensor: the attention segment of every position, padding its own segment)."""

    def mask_mod(b, h, q_idx, kv_idx):
        return (segment_ids[b, q_idx] == segment_ids[b, kv_idx]) & (q_idx >= kv_idx)

    return mask_mod


def segment_ids(cu_seqlens, rows: int, positions: int):
    """``(rows, positions)`` int64: the attention segment of every position (a document or a padding
    run), numbered over the flattened batch, from ``cu_seqlens`` (on its device)."""
    seg = torch.zeros(rows * positions, dtype=torch.int64, device=cu_seqlens.device)
    seg[cu_seqlens[1:-1].to(torch.int64)] = 1
    return seg.cumsum(0).view(rows, positions)


def flex_block_mask(batch, *, device="cpu", BLOCK_SIZE: int = 128):
    """A FlexAttention ``BlockMask`` for ``batch`` (a Batch, a Block, or a dict of tensors from
    :func:`to_tensors` / :class:`~tokenmill.torch.TrainingLoader`, as :func:`sdpa_mask`), built from
    :func:`document_mask_mod`."""
    from torch.nn.attention.flex_attention import create_block_mask

    if isinstance(batch, dict):
        B, T = batch["input_ids"].shape
        seg = segment_ids(batch["cu_seqlens"].to(device), B, T)
    else:
        b = as_batch(batch, "flex_block_mask", " (or a dict of tensors from to_tensors)")
        B, T = b.shape
        seg = torch.from_numpy(b.segment_ids).to(device)
    return create_block_mask(document_mask_mod(seg), B, None, T, T, device=device, BLOCK_SIZE=BLOCK_SIZE)
