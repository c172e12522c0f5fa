"""Accounting: three different "tokens per step" -- input positions, non-pad positions, effective targets.

::

    pad_batch([A, B])  A = [BOS 甲 乙 EOS], B = [BOS 丙 EOS]   ->  8 positions, 7 non-pad, 5 targets
    pack([A, B], 7)                                        ->  7 positions, 7 non-pad, 5 targets

    4 devices x 2 sequences x 512 positions x 8 accumulation steps = 32,768 input positions;
    if 3/4 of them are effective targets, a step trains on 24,576 targets.

A *target* is a label that is not -100 at positions 1 .. T-1 of a row (the model shifts by one, so a
row's first label is never scored). ``BatchStats`` add up with ``+`` (or ``sum``) over micro-batches,
ranks and a run. ``duplicate_targets`` counts targets whose ``(document, offset)`` occurs more than
once *within the unit the stats were computed on* (a batch: e.g. overlapping windows); to count
repeats across batches, compute :func:`stats_of` over their arrays together.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from .._words import counted
from ..conventions import target_mask


@dataclass(frozen=True)
class BatchStats:
    """Counts for a batch (or, summed, for a step or a run). All fields are ints.

    >>> s = BatchStats(sequences=2, positions=1024, non_pad=1024, targets=768, documents=2)
    >>> step = sum(s for _device in range(4) for _micro_batch in range(8))
    >>> step.positions, step.targets, step.target_rate
    (32768, 24576, 0.75)
    """

    sequences: int = 0  # rows
    positions: int = 0  # input positions, padding included
    non_pad: int = 0  # positions holding real tokens
    targets: int = 0  # effective targets: scored labels
    duplicate_targets: int = 0  # targets scored more than once (the extra occurrences)
    documents: int = 0  # distinct source documents present (summed per unit)
    truncated_tokens: int = 0  # tokens cut off while building the batches

    def __add__(self, other: "BatchStats") -> "BatchStats":
        if not isinstance(other, BatchStats):
            return NotImplemented
        return BatchStats(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def __radd__(self, other):
        if other == 0:  # lets sum() start from 0
            return self
        return NotImplemented

    @property
    def padding(self) -> int:
        return self.positions - self.non_pad

    @property
    def fill_rate(self) -> float:
        """Non-pad positions / positions."""
        return self.non_pad / self.positions if self.positions else 0.0

    @property
    def target_rate(self) -> float:
        """Effective targets / positions."""
        return self.targets / self.positions if self.positions else 0.0

    @property
    def targets_per_document(self) -> float:
        return self.targets / self.documents if self.documents else 0.0

    @property
    def target_multiplicity(self) -> float:
        """Mean number of times a distinct target is scored (1.0 = no duplicates)."""
        unique = self.targets - self.duplicate_targets
        return self.targets / unique if unique else 0.0

    def __str__(self) -> str:
        return (f"{counted(self.sequences, 'sequence')}, {counted(self.positions, 'position')}, "
                f"{self.non_pad:,d} non-pad ({self.fill_rate:.1%}), {counted(self.targets, 'effective target')} "
                f"({self.target_rate:.1%} of positions; {counted(self.duplicate_targets, 'duplicate')}), "
                f"{counted(self.documents, 'document')}, {counted(self.truncated_tokens, 'truncated token')}")


def stats_of(labels: np.ndarray, doc_ids: np.ndarray, token_offsets: np.ndarray, *,
             truncated_tokens: int = 0) -> BatchStats:
    """Count a batch from its ``(B, T)`` labels, doc ids (-1 = padding) and token offsets.

    >>> labels = np.array([[-100, 10, 11, 2], [-100, 12, 2, -100]])
    >>> docs = np.array([[0, 0, 0, 0], [1, 1, 1, -1]])
    >>> offs = np.array([[0, 1, 2, 3], [0, 1, 2, -1]])
    >>> s = stats_of(labels, docs, offs); (s.positions, s.non_pad, s.targets, s.fill_rate)
    (8, 7, 5, 0.875)
    """
    labels, doc_ids, token_offsets = (np.atleast_2d(np.asarray(a)) for a in (labels, doc_ids, token_offsets))
    scored = target_mask(labels)
    targets = int(scored.sum())
    docs, offs = doc_ids[scored], token_offsets[scored]
    unique = _count_unique_pairs(docs, offs)
    present = doc_ids[doc_ids >= 0]
    return BatchStats(sequences=int(labels.shape[0]), positions=int(labels.size), non_pad=int(present.size),
                      targets=targets, duplicate_targets=targets - unique,
                      documents=int(np.unique(present).size), truncated_tokens=int(truncated_tokens))


def _count_unique_pairs(a: np.ndarray, b: np.ndarray) -> int:
    if a.size == 0:
        return 0
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    return int(1 + ((a[1:] != a[:-1]) | (b[1:] != b[:-1])).sum())
