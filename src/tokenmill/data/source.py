"""The small protocol every token consumer reads documents through.

A *token source* is anything with ``__len__`` (number of documents), ``lengths`` (int64 array of
document lengths, shape ``(num_docs,)``) and ``get(i)`` (the ids of document ``i`` as a 1-D numpy
integer array). A list of arrays satisfies it through :func:`as_source`; the memory-mapped token
store satisfies it directly. Windows and packing plans are computed from ``lengths`` alone; tokens
are touched only when a batch is materialized.
"""

from __future__ import annotations

from typing import Iterable, Protocol, Sequence, runtime_checkable

import numpy as np

from .._validate import check_array
from ..errors import ConfigError, InputError, OutOfRangeError


def doc_index(i, n: int, hint: str = "") -> int:
    """``i`` as a document index of a source of ``n`` documents: an integer (not a bool) in ``0 .. n - 1``,
    else a ConfigError (not an integer) or an OutOfRangeError (a ConfigError and an IndexError) naming it. Every source's ``get`` checks here: a
    negative index is refused rather than counted from the end (``-1`` is more often a bug than a wish)."""
    if type(i) is int and 0 <= i < n:  # the common case, first (a get per packed segment)
        return i
    if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
        raise ConfigError(f"document index {i!r} must be an integer")
    i = int(i)
    if not 0 <= i < n:
        raise OutOfRangeError(f"document {i:,d} is outside 0 .. {n - 1:,d}"
                         + (f" (negative indices are refused by get(){hint})" if i < 0 else ""))
    return i


@runtime_checkable
class TokenSource(Protocol):
    @property
    def lengths(self) -> np.ndarray: ...

    def __len__(self) -> int: ...

    def get(self, i: int) -> np.ndarray: ...


class KnownLengths:
    """The ``lengths``/``len`` half of a token source whose document lengths are one int64 array, held
    in ``self._lengths`` (ArraySource, MegatronSource, Mixture)."""

    _lengths: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        return self._lengths

    def __len__(self) -> int:
        return int(self._lengths.size)


class ArraySource(KnownLengths):
    """A token source over in-memory sequences of ids.

    >>> src = as_source([[1, 2, 3], [4]])
    >>> len(src), src.lengths.tolist(), src.get(1).tolist()
    (2, [3, 1], [4])
    """

    def __init__(self, docs: Sequence[Sequence[int] | np.ndarray]):
        self._docs = []
        if isinstance(docs, (str, bytes)) or not isinstance(docs, Iterable):
            raise InputError(f"docs is a {type(docs).__name__}; pass a sequence of token id sequences (one list "
                             "or array of ids per document)")
        for i, d in enumerate(docs):
            # exact int64 (no float truncation, no uint64 wrap-around)
            self._docs.append(check_array(d, f"document {i}"))
        self._lengths = np.fromiter((d.size for d in self._docs), dtype=np.int64, count=len(self._docs))

    def get(self, i: int) -> np.ndarray:
        return self._docs[doc_index(i, len(self._docs))]


def as_source(obj) -> TokenSource:
    """Return ``obj`` if it already is a token source, else wrap a sequence of id sequences."""
    if isinstance(obj, TokenSource) and not isinstance(obj, (list, tuple)):
        return obj
    return ArraySource(obj)
