"""Batches as torch tensors (``collate_fn`` for a DataLoader over blocks)."""

from __future__ import annotations

from ..batching.layout import Batch, Block
from ..errors import require

torch = require("torch", "torch")


def to_tensors(batch: Batch | Block, *, device=None) -> dict:
    """A :class:`~tokenmill.batching.Batch` (or one Block, as a batch of 1) as a dict of tensors:
    ``input_ids``, ``labels``, ``position_ids``, ``doc_ids`` (int64, ``(B, T)``), ``attention_mask``
    (bool non-pad, ``(B, T)``), ``cu_seqlens`` (int32) and ``max_seqlen`` (int).

    >>> from tokenmill.batching import pad_batch
    >>> t = to_tensors(pad_batch([[1, 2, 3], [4]], pad_id=0))
    >>> t["labels"].tolist(), t["cu_seqlens"].dtype
    ([[-100, 2, 3], [-100, -100, -100]], torch.int32)
    """
    if isinstance(batch, Block):
        batch = Batch.from_blocks([batch])
    out = {name: torch.from_numpy(getattr(batch, name)).to(device)
           for name in ("input_ids", "labels", "position_ids", "doc_ids", "attention_mask", "cu_seqlens")}
    out["max_seqlen"] = int(batch.max_seqlen)
    return out


def collate_blocks(blocks: list[Block]) -> dict:
    """``collate_fn`` for a DataLoader that yields :class:`~tokenmill.batching.Block` s."""
    return to_tensors(Batch.from_blocks(list(blocks)))
