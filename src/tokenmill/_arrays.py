"""Small vectorized idioms shared by the planners, the batch layout, the tokenizer's importers and the store."""

from __future__ import annotations

import numpy as np


def ranks_in_groups(counts) -> np.ndarray:
    """For items that come in consecutive groups of ``counts[i]``, each item's index inside its group.

    >>> ranks_in_groups([3, 0, 2]).tolist()
    [0, 1, 2, 0, 1]
    """
    counts = np.asarray(counts, dtype=np.int64)
    return np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)


def owned(a: np.ndarray) -> np.ndarray:
    """``a`` as a read-only int64 array of its holder's own: ``a`` itself when it already is read-only int64, else
    a read-only copy (a plan's or a slice's columns, which the caller's arrays written afterwards must not move).

    >>> a = np.arange(3); b = owned(a); a[0] = 9; b.tolist(), b.flags.writeable
    ([0, 1, 2], False)
    """
    if a.flags.writeable or a.dtype != np.int64:
        a = np.array(a, np.int64)
        a.flags.writeable = False
    return a


def offsets_of(lengths) -> np.ndarray:
    """The int64 offsets ``[0, l0, l0 + l1, ...]`` of consecutive pieces of ``lengths``: piece ``i`` is
    ``[offsets[i], offsets[i + 1])``.

    >>> offsets_of([3, 0, 2]).tolist()
    [0, 3, 3, 5]
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    out = np.zeros(lengths.size + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    return out
