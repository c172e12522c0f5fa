"""Batches as torch tensors (``collate_fn`` for a DataLoader over blocks)."""

from __future__ import annotations

from ..batching.batch import Batch, Block, as_batch
from ..errors import require

torch = require("torch", "torch")


def to_tensors(batch: Batch | Block, *, device=None) -> dict:
    """A :class:`~tokenmill.batching.Batch` (or one Block, as a batch of 1) as a dict of tensors:
    ``input_ids``, ``labels`` (int64, ``(B, T)``), ``position_ids``, ``doc_ids`` (``(B, T)``, the batch's
    ``index_dtype``: int64, or int32 when the batches were made with ``index_dtype=np.int32``), ``attention_mask``
    (bool non-pad, ``(B, T)``), ``cu_seqlens`` (int32) and ``max_seqlen`` (int).

    >>> from tokenmill.batching import pad_batch
    >>> t = to_tensors(pad_batch([[1, 2, 3], [4]], pad_id=0))
    >>> t["labels"].tolist(), t["cu_seqlens"].dtype
    ([[-100, 2, 3], [-100, -100, -100]], torch.int32)
    """
    batch = as_batch(batch, "to_tensors")
    out = {name: torch.from_numpy(getattr(batch, name)).to(device)
           for name in ("input_ids", "labels", "position_ids", "doc_ids", "attention_mask", "cu_seqlens")}
    out["max_seqlen"] = int(batch.max_seqlen)
    return out


def collate_blocks(blocks: list[Block]) -> dict:
    """``collate_fn`` for a DataLoader that yields :class:`~tokenmill.batching.Block` s."""
    return to_tensors(Batch.from_blocks(list(blocks)))


class PackedBatches(torch.utils.data.IterableDataset):
    """A plan's batches as dicts of tensors (see :func:`to_tensors`), for
    ``DataLoader(PackedBatches(...), batch_size=None, num_workers=k)``.

    Batch ``i`` holds blocks ``i*batch_size .. (i+1)*batch_size - 1``; DataLoader worker ``w`` of
    ``k`` builds batches ``w, w+k, ...`` and the DataLoader returns them in plan order. Shard the
    plan per rank first (``plan.shard(rank, world_size)``). Options go to ``plan.batches``.

    >>> from tokenmill.batching import pack
    >>> docs = [[1, 2, 3], [4, 5], [6, 7, 8, 9], [1, 2, 3, 4, 5]]       # 3 blocks: 5 | 4 | 3+2
    >>> ds = PackedBatches(pack([len(d) for d in docs], 5), docs, batch_size=2, pad_id=0)
    >>> [b["input_ids"].shape for b in torch.utils.data.DataLoader(ds, batch_size=None)]
    [torch.Size([2, 5]), torch.Size([1, 5])]
    """

    def __init__(self, plan, source, *, batch_size: int, pad_id: int, **options):
        from .._validate import check_int

        super().__init__()
        # (checked here: 0 divided by zero in len(), a tensor failed inside the workers' first batch)
        batch_size = check_int(batch_size, "batch_size", min=1)
        self.plan, self.source, self.batch_size, self.pad_id, self.options = plan, source, batch_size, pad_id, options

    def __len__(self) -> int:
        return -(-self.plan.num_blocks // self.batch_size)

    def __iter__(self):
        import numpy as np

        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        mine = np.arange(worker, len(self), workers)  # this worker's batch numbers
        blocks = (mine[:, None] * self.batch_size + np.arange(self.batch_size)).ravel()
        part = self.plan.select(blocks[blocks < self.plan.num_blocks])
        for batch in part.batches(self.source, batch_size=self.batch_size, pad_id=self.pad_id, **self.options):
            yield to_tensors(batch)
