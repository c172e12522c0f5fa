"""Small vectorized idioms shared by the planners, the batch layout, the tokenizer's importers and the store."""

from __future__ import annotations

import weakref

import numpy as np


def ranks_in_groups(counts) -> np.ndarray:
    """For items that come in consecutive groups of ``counts[i]``, each item's index inside its group.

    >>> ranks_in_groups([3, 0, 2]).tolist()
    [0, 1, 2, 0, 1]
    """
    counts = np.asarray(counts, dtype=np.int64)
    return np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)


# the arrays tokenmill made and sealed (:func:`seal`), by id, each with a weak reference to it (an id is only
# trusted while its array lives: the entry leaves with the array)
_SEALED: dict[int, weakref.ref] = {}


def seal(a: np.ndarray) -> np.ndarray:
    """``a`` handed over to its holder for good: an int64 read-only view of ``a``'s memory (``a`` itself made
    read-only too, so the view can never be made writeable again), marked as tokenmill's own (:func:`is_sealed`).
    No copy when ``a`` is a C-contiguous int64 array owning its memory (what a planner just made); else a copy.
    The caller must not write ``a`` afterwards.

    >>> a = np.arange(3); b = seal(a); is_sealed(b), is_sealed(a), b.flags.writeable
    (True, False, False)
    """
    if not (a.dtype == np.int64 and a.flags.owndata and a.flags.c_contiguous):
        a = np.array(a, np.int64)
    a.flags.writeable = False
    v = a.view()
    key = id(v)
    _SEALED[key] = weakref.ref(v, lambda _ref, key=key: _SEALED.pop(key, None))
    return v


def readonly(*arrays: np.ndarray) -> list[np.ndarray]:
    """Read-only views of ``arrays`` (no copy; the arrays themselves untouched): what a kernel is handed, so that
    its argument types do not depend on whether a caller's arrays happen to be writable (numba compiles each
    combination of those flags apart, and a type the warm-up never passed is compiled on a user's first call).

    >>> a = np.arange(3); [v.flags.writeable for v in readonly(a)], a.flags.writeable
    ([False], True)
    """
    out = []
    for a in arrays:
        v = a.view()
        v.flags.writeable = False
        out.append(v)
    return out


def is_sealed(a) -> bool:
    """Whether ``a`` is an array :func:`seal` made (no one else holds its memory writeable): what a plan may
    keep unchecked. A user's read-only array is not (a read-only view of an array the user still writes, a
    memory map of a file)."""
    ref = _SEALED.get(id(a))
    return ref is not None and ref() is a


def owned(a: np.ndarray) -> np.ndarray:
    """``a`` as a read-only int64 array of its holder's own: ``a`` itself when tokenmill sealed it, else a sealed
    copy (a plan's or a slice's columns, which the caller's arrays written afterwards must not move; a read-only
    view is no such array: its base may be written).

    >>> a = np.arange(3); b = owned(a); a[0] = 9; b.tolist(), b.flags.writeable
    ([0, 1, 2], False)
    """
    return a if is_sealed(a) else seal(np.array(a, np.int64))


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
