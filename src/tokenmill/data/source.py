"""The small protocol every token consumer reads documents through.

A *token source* is anything with ``__len__`` (number of documents), ``lengths`` (int64 array of
document lengths, shape ``(num_docs,)``) and ``get(i)`` (the ids of document ``i`` as a 1-D numpy
integer array). A list of arrays satisfies it through :func:`as_source`; the memory-mapped token
store satisfies it directly. Windows and packing plans are computed from ``lengths`` alone; tokens
are touched only when a batch is materialized. A source tokenmill did not make is checked as it is
read (:func:`checked_get`); tokenmill's own set ``ids_checked = True``.
"""

from __future__ import annotations

from typing import Iterable, Protocol, Sequence, runtime_checkable

import numpy as np

from .._arrays import seal
from .._validate import as_index, check_array, check_doc_ids
from ..errors import ConfigError, InputError, OutOfRangeError


def doc_index(i, n: int, hint: str = "") -> int:
    """``i`` as a document index of a source of ``n`` documents: an integer (not a bool) in ``0 .. n - 1``,
    else a ConfigError (not an integer) or an OutOfRangeError (a ConfigError and an IndexError) naming it. Every source's ``get`` checks here: a
    negative index is refused rather than counted from the end (``-1`` is more often a bug than a wish)."""
    if type(i) is int and 0 <= i < n:  # the common case, first (a get per packed segment)
        return i
    j = as_index(i)
    if j is None:
        raise ConfigError(f"document index {i!r} must be an integer")
    i = j
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


# the dtypes whose every value int64 holds: a document of one of them needs no value check
_EXACT_IN_INT64 = frozenset(np.dtype(t).newbyteorder(order) for t in ("i1", "i2", "i4", "i8", "u1", "u2", "u4")
                            for order in "<>")


def _document(d, i: int) -> np.ndarray:
    """Document ``i`` as a 1-D array of a dtype int64 holds exactly (not copied), or :func:`check_array`'s
    verdict on it: the same array as int64, or the error naming the document (and the id and position)."""
    if type(d) is not np.ndarray:
        if isinstance(d, dict):  # a record (a row of a datasets.Dataset, a list of dicts)
            raise InputError(f"document {i} is a record (a dict of {', '.join(map(repr, list(d)[:5]))}), not a "
                             "sequence of ids; pass the column of ids (ds['input_ids'], [r['input_ids'] for r in "
                             "rows]), or the Dataset itself where it has an 'input_ids' column")
        try:
            d = np.asarray(d)
        except (ValueError, TypeError, OverflowError, RuntimeError):
            return check_array(d, f"document {i}")
    if d.ndim == 1 and d.dtype in _EXACT_IN_INT64:
        return d
    return check_array(d, f"document {i}")


class ArraySource(KnownLengths):
    """A token source over in-memory sequences of ids.

    The documents are checked (1-D, integers int64 holds exactly; an error names the first that is
    not: a test of each document's dtype and shape, no value read) and copied once, here, into one
    int64 array, ``token_array``: document ``i`` is ``token_array[doc_offsets[i]:doc_offsets[i + 1]]``
    and ``get(i)`` a view of it (later changes to the arrays passed in do not reach the source).
    Packing and the loader read it with the compiled pass that reads a store, one call per batch.
    Memory: 8 bytes per id, plus 8 per document; while you keep the documents too, their ids are
    held twice (drop them, or build a :class:`~tokenmill.data.store.TokenStore`, whose ids stay on
    disk).

    >>> src = as_source([[1, 2, 3], [4]])
    >>> len(src), src.lengths.tolist(), src.get(1).tolist(), src.doc_offsets.tolist()
    (2, [3, 1], [4], [0, 3, 4])
    """

    def __init__(self, docs: Sequence[Sequence[int] | np.ndarray]):
        if isinstance(docs, (str, bytes)) or not isinstance(docs, Iterable):
            raise InputError(f"docs is a {type(docs).__name__}; pass a sequence of token id sequences (one list "
                             "or array of ids per document)")
        arrays = []
        keep, exact, ndarray = arrays.append, _EXACT_IN_INT64, np.ndarray
        for i, d in enumerate(docs):  # (the usual document, an int64-exact 1-D array, passes one test)
            keep(d if type(d) is ndarray and d.ndim == 1 and d.dtype in exact else _document(d, i))
        n = len(arrays)
        self._lengths = np.fromiter(map(len, arrays), dtype=np.int64, count=n)
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(self._lengths, out=offsets[1:])
        # exact int64 (a float, or a value int64 cannot hold, was refused above: nothing is truncated or wraps)
        self.token_array = np.concatenate(arrays, dtype=np.int64) if n else np.zeros(0, np.int64)
        self.doc_offsets = offsets
        offsets.flags.writeable = False  # (the ids stay writable, as the documents were: any int64 is valid)
        # (lengths written had merged documents in batches, unchecked); sealed: a plan takes them without a copy
        self._lengths = seal(self._lengths)

    ids_checked = True  # (checked_get: by check_memory_ids, wherever an ArraySource reaches batches)

    def get(self, i: int) -> np.ndarray:
        i = doc_index(i, self._lengths.size)
        return self.token_array[self.doc_offsets[i]:self.doc_offsets[i + 1]]

    def check_ids(self, what: str = "") -> None:
        """Every id is >= 0 (in memory, never validated as a store's ids were: -100 would read as an
        ignored label), one pass over ``token_array``; else ``check_doc_ids``' InputError naming the
        document and position (``what`` prefixes it)."""
        if self.token_array.size and int(self.token_array.min()) < 0:
            check_doc_ids((self.get(i) for i in range(len(self))), what=what)


def check_memory_ids(src, what: str = "") -> None:
    """Every id of a source held in memory is >= 0: an :class:`ArraySource` (never validated as a store's
    ids were: -100 would read as an ignored label, a target dropped without a word), also under a view of
    it (a ``SliceSource``'s ``base``). Other sources: a store's ids were checked when written; a user's
    class is checked document by document as it is read (:func:`checked_get`)."""
    if isinstance(src, ArraySource):
        src.check_ids(what)
    base = getattr(src, "base", None)
    if base is not None:
        check_memory_ids(base, what)


def ids_checked(src) -> bool:
    """Whether ``src`` is a source whose documents need no check as they are read: one of tokenmill's
    (``ids_checked = True``: a store, a Megatron file, an ArraySource; a view of one asks its base)."""
    return getattr(src, "ids_checked", False) is True


def checked_get(src, d: int, n: int) -> np.ndarray:
    """``src.get(d)`` of a source whose ids nothing checked (a user's class with ``lengths`` and ``get``): a
    1-D array of integers int64 holds exactly, ``n`` of them (the document's entry in ``lengths``), none
    negative; else an InputError naming the document (a float was truncated into the batch, a short
    document failed in numpy's broadcasting, and a negative id reached the batch as input and label)."""
    a = _document(src.get(d), d)
    if a.shape[0] != n:
        raise InputError(f"document {d:,d}: get() gave {a.shape[0]:,d} ids where the source's lengths say {n:,d}; "
                         "a token source's get(i) must hold lengths[i] ids")
    if a.size and a.dtype.kind == "i" and int(a.min()) < 0:  # (check_doc_ids' message, for document d)
        pos = int(np.argmax(a < 0))
        raise InputError(f"document {d} holds token id {int(a[pos])} at position {pos}; token ids must be >= 0")
    return a


def reader(src, lengths: np.ndarray):
    """``get(d)`` of ``src`` as batches and windows read it: its own ``get`` where ``ids_checked``, else
    :func:`checked_get` against ``lengths``."""
    return src.get if ids_checked(src) else (lambda d: checked_get(src, d, int(lengths[d])))


def as_source(obj) -> TokenSource:
    """Return ``obj`` if it already is a token source, else wrap a sequence of id sequences. A
    ``datasets.Dataset`` is its ``input_ids`` column (the tokenized datasets' convention), read into
    memory as an :class:`ArraySource`."""
    if isinstance(obj, TokenSource) and not isinstance(obj, (list, tuple)):
        return obj
    columns = getattr(obj, "column_names", None)
    if isinstance(columns, list) and hasattr(obj, "with_format"):  # a datasets.Dataset
        if "input_ids" not in columns:
            raise InputError(f"the Dataset has no 'input_ids' column (its columns: {', '.join(columns)}); tokenize "
                             "it first (ds.map), pass its column of ids (ds['my_ids']), or build a token store "
                             "from its text (TokenStore.build(out, ds, tokenizer, field=...))")
        return ArraySource(obj.with_format("numpy")["input_ids"])
    return ArraySource(obj)
