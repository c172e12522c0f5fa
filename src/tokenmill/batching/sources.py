"""Pack windows, not only documents: a token source whose items are slices of another source.

::

    document 0:   t0 t1 t2 t3 t4 t5 t6 t7 t8 t9
    windows       (0, 0, 6) -> t0..t5      (0, 4, 6) -> t4..t9      (overlap t4 t5)

    SliceSource(docs, doc=[0, 0], start=[0, 4], length=[6, 6])  -> 2 items of 6 tokens

Packing plans and materializes the items like documents; blocks report the *original* document
and offset in ``doc_ids`` / ``token_offsets``, so ``stats()`` counts a target scored by two
overlapping windows as a duplicate. A window plan from :mod:`tokenmill.windows` (columns ``doc``,
``start``, ``length``) converts with :meth:`SliceSource.from_windows`.
"""

from __future__ import annotations

import numpy as np

from .._arrays import owned
from .._validate import check_array
from ..data.source import TokenSource, as_source, doc_index, ids_checked
from ..errors import ConfigError, InputError

COMPILED_SLICES = 1 << 16  # from this many slices on, the bounds check is one compiled pass (first_bad_slice)


class SliceSource:
    """Items ``(doc, start, length)`` of ``source`` as a token source.

    >>> src = SliceSource([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]], doc=[0, 0], start=[0, 4], length=[6, 6])
    >>> len(src), src.lengths.tolist(), src.get(1).tolist()
    (2, [6, 6], [4, 5, 6, 7, 8, 9])
    """

    def __init__(self, source, *, doc, start, length):
        self.base: TokenSource = as_source(source)
        # exact (no float truncation, no wrap-around), and the slice's own read-only copies: the caller's arrays
        # written after it was made had made it read into the next document
        self.origin_doc, self.origin_start, self._lengths = (
            owned(check_array(a, name)) for a, name in ((doc, "doc"), (start, "start"), (length, "length")))
        n = self.origin_doc.size
        if self.origin_start.shape != (n,) or self._lengths.shape != (n,):
            raise InputError("doc, start and length must be 1-D arrays of equal length")
        self._check(check_array(self.base.lengths, "the source's lengths", min=0))
        tokens = getattr(self.base, "token_array", None)
        offsets = getattr(self.base, "doc_offsets", None)
        if tokens is not None and offsets is not None:
            # Flat fast path: item i starts at token_array[doc_offsets[i]] (the last entry is unused).
            self.token_array = tokens
            self.doc_offsets = np.append(np.asarray(offsets, np.int64)[self.origin_doc] + self.origin_start, 0)

    @property
    def segment_filler(self):
        """The base's compiled filler of segments (a multi-shard TokenStore's per-shard copy), through this
        slice, or None when the base has none. (A method, not a lambda kept on the instance: a slice travels
        to spawned DataLoader workers pickled.)"""
        return None if getattr(self.base, "segment_filler", None) is None else self._fill_segments

    def check_mapped(self, doc) -> None:
        """The base's :meth:`check_mapped` for items ``doc``, where the base has one (a memory-mapped store)."""
        check = getattr(self.base, "check_mapped", None)
        if check is not None:
            check(self.origin_doc[np.asarray(doc, np.int64)])

    def _fill_segments(self, doc, start, length):
        return self.base.segment_filler(self.origin_doc[doc], self.origin_start[doc] + start, length)

    def _check(self, base_lengths: np.ndarray) -> None:
        if self.origin_doc.size == 0:
            return
        if base_lengths.size == 0:  # (no document to index: every slice is outside)
            i = 0
        elif self.origin_doc.size < COMPILED_SLICES:  # numpy, without loading numba (~0.6 s a fresh process)
            inside = (self.origin_doc >= 0) & (self.origin_doc < base_lengths.size)
            end = self.origin_start + self._lengths  # (wraps past int64 max: ``end < start`` is caught)
            bad = ~inside | (self.origin_start < 0) | (self._lengths < 0) | (end < self.origin_start) | \
                (end > np.where(inside, base_lengths[np.where(inside, self.origin_doc, 0)], -1))
            i = int(np.argmax(bad)) if bad.any() else -1
        else:  # one compiled pass, no slice-sized temporaries
            from ._kernels import first_bad_slice

            i = int(first_bad_slice(*(np.ascontiguousarray(a) for a in (self.origin_doc, self.origin_start,
                                                                         self._lengths)),
                                    np.ascontiguousarray(base_lengths)))
        if i >= 0:
            if not 0 <= self.origin_doc[i] < base_lengths.size:
                where = f"0 .. {base_lengths.size - 1:,d}" if base_lengths.size else "the source, which has none"
                raise InputError(f"slice {i} names a document outside {where} (document {int(self.origin_doc[i]):,d})")
            raise InputError(f"slice {i} (doc {int(self.origin_doc[i])}, start {int(self.origin_start[i]):,d}, "
                             f"length {int(self._lengths[i]):,d}) reaches outside its document")

    @classmethod
    def from_windows(cls, plan, source) -> "SliceSource":
        """The windows of a :class:`tokenmill.windows` plan (its ``doc``, ``start``, ``length``), as training
        items: every token of a window a target, no bos/eos added. A plan of ``score="new"`` (each token scored
        by one window: evaluation) or with a template is refused, as ``TrainingLoader`` refuses them, and one of
        ``positions="absolute"``: their slices had been packed as if none were set (71 scored targets became
        119, the template's tokens left out, positions from 0); ``plan.materialize`` gives such windows as
        planned."""
        if getattr(plan, "score", "all") != "all":
            raise ConfigError("a window plan of score='new' scores each token in one window only (evaluation); "
                              "slices are packed with every token a target: plan with score='all', or use "
                              "plan.materialize(...) for the windows as planned")
        if getattr(plan, "positions", "reset") != "reset":
            raise ConfigError("a window plan of positions='absolute' numbers a window's positions from its "
                              "document's start; slices are packed with positions from 0: plan with "
                              "positions='reset', or pass the windows to TrainingLoader(windows=...), which keeps "
                              "them")
        if getattr(plan, "bos", None) is not None or getattr(plan, "eos", None) is not None:
            raise ConfigError("a window plan with a template (bos/eos) adds tokens that slices of the documents "
                              "do not hold: plan without one (add the special tokens to the documents, e.g. a "
                              "store's append_eos), or use plan.materialize(...) for the windows as planned")
        source = as_source(source)
        if hasattr(plan, "check_source"):  # (the plan's own documents: longer ones, or more of them, had their
            # extra tokens never sliced, so never trained on, silently; materialize refuses them the same way)
            plan.check_source(np.asarray(source.lengths, np.int64), what="source", fix="plan the source you slice")
        return cls(source, doc=plan.doc, start=plan.start, length=plan.length)

    def __getattr__(self, name: str):
        # the base's vocabulary (a Mixture compares its parts': a slice of a GPT-2 store beside a Llama 3 store
        # had given batches of ids of two vocabularies, silently)
        if name in ("vocab_size", "tokenizer_hash", "eos_id", "bos_id") and "base" in self.__dict__:
            return getattr(self.__dict__["base"], name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def lengths(self) -> np.ndarray:
        return self._lengths

    @property
    def ids_checked(self) -> bool:
        return ids_checked(self.base)

    def __len__(self) -> int:
        return int(self._lengths.size)

    def get(self, i: int) -> np.ndarray:
        i = doc_index(i, len(self))
        s = int(self.origin_start[i])
        return np.asarray(self.base.get(int(self.origin_doc[i])))[s : s + int(self._lengths[i])]
