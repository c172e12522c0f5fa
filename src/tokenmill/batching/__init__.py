"""Batches: padding, packing with exact document boundaries, accounting, train/validation split.

Everything here needs only numpy (numba compiles the packing loops on first use); the torch side
(attention masks, loss normalization, the reference model) is :mod:`tokenmill.torch`.
"""

from .batch import Batch, Block
from .packing import Chunks, PackPlan, chunk_stream, pack
from .padding import LengthGroupedBatches, pad_batch
from .sources import SliceSource
from .split import Split, split_documents
from .stats import BatchStats, stats_of

__all__ = [
    "Batch", "Block", "BatchStats", "Chunks", "LengthGroupedBatches", "PackPlan",
    "SliceSource", "Split", "chunk_stream", "pack", "pad_batch", "split_documents", "stats_of",
]
