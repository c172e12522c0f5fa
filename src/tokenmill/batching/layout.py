"""Rows of a batch: ids, labels, positions, document ids, cu_seqlens and masks, built from segments.

Every batch, padded or packed, is described the same way: each row of ``block_size`` positions holds
a few *segments* ``(doc, start, length)`` (a slice of one source document) followed by padding.
From that table alone, vectorized over the whole batch, this module derives::

    segments   A=[BOS 甲 乙 EOS] (doc 0), B=[BOS 丙 EOS] (doc 1), block_size 8

    position      0    1    2    3    4    5    6    7
    input_ids     BOS  甲   乙   EOS  BOS  丙   EOS  PAD
    doc_ids       0    0    0    0    1    1    1    -1     (-1 = padding)
    position_ids  0    1    2    3    0    1    2    0      (reset per document; padding restarts too)
    labels        -    甲   乙   EOS  -    丙   EOS  -      (- = -100: first position of every
                                                             document, and padding)
    cu_seqlens    [0, 4, 7, 8]   int32; padding is its own segment, so no row of the mask is empty
    dense_mask    (True = may attend; row = query, column = key)

                  0 1 2 3 4 5 6 7
                0 1 . . . . . . .
                1 1 1 . . . . . .
                2 1 1 1 . . . . .
                3 1 1 1 1 . . . .
                4 . . . . 1 . . .
                5 . . . . 1 1 . .
                6 . . . . 1 1 1 .
                7 . . . . . . . 1

Labels sit at the input positions; the model (or :func:`tokenmill.torch.token_weighted_loss`)
shifts them by one, so the output at position ``i`` is scored against ``labels[i + 1]``. Ignoring
the label at each document's first position is what keeps A's EOS from being asked to predict B's
BOS. Padding is recognised by the segment lengths, never by comparing ids with ``pad_id``, so a real
EOS keeps its label even when ``pad_id`` equals the EOS id.

In *stream* layout (``concat`` packing, an intended continuous text stream) the row is one attention
segment: positions run 0..n-1, only the row's first label is ignored, and the mask is one causal
triangle; ``doc_ids`` still name the source document of every position.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from sys import getrefcount
from typing import Callable, Literal

import numpy as np

from .._arrays import ranks_in_groups
from .._validate import check_array, check_int, check_spans
from ..conventions import IGNORE_INDEX
from ..errors import ConfigError, InputError
from .stats import stats_of

FragmentPositions = Literal["restart", "continue"]


@dataclass(frozen=True, eq=False)
class Block:
    """One row of a batch (one packed block or one padded sequence); every array has shape ``(T,)``.

    ``input_ids``, ``labels``, ``position_ids``, ``doc_ids``, ``token_offsets`` are int64;
    ``cu_seqlens`` is int32 ``(segments + 1,)``, 0 .. T, strictly increasing.

    >>> from tokenmill.batching import pack
    >>> A, B = [1, 10, 11, 2], [1, 12, 2]          # [BOS 甲 乙 EOS], [BOS 丙 EOS]
    >>> block = next(pack([4, 3], 7).blocks([A, B], pad_id=0))
    >>> block.input_ids.tolist(), block.position_ids.tolist()
    ([1, 10, 11, 2, 1, 12, 2], [0, 1, 2, 3, 0, 1, 2])
    >>> block.labels.tolist(), block.cu_seqlens.tolist(), block.max_seqlen
    ([-100, 10, 11, 2, -100, 12, 2], [0, 4, 7], 4)
    """

    input_ids: np.ndarray
    labels: np.ndarray
    position_ids: np.ndarray
    doc_ids: np.ndarray  # source document of every position; -1 at padding
    token_offsets: np.ndarray  # offset of every position inside its source document; -1 at padding
    cu_seqlens: np.ndarray
    max_seqlen: int

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def attention_mask(self) -> np.ndarray:
        """``(T,)`` bool, True at real tokens, False at padding (the 2-D 'non-pad' mask)."""
        return self.doc_ids >= 0

    @property
    def segment_ids(self) -> np.ndarray:
        """``(T,)`` int64 index of the attention segment of every position (padding included)."""
        return _segment_ids(self.cu_seqlens, len(self))

    def dense_mask(self) -> np.ndarray:
        """``(T, T)`` bool block-diagonal causal mask, True = query (row) may attend to key (column).

        >>> from tokenmill.batching import pad_batch
        >>> pad_batch([[5, 6], [7]], pad_id=0).block(1).dense_mask().astype(int).tolist()
        [[1, 0], [0, 1]]
        """
        return _dense_mask(self.segment_ids[None, :])[0]

    def stats(self):
        """Accounting for this row alone (see :class:`tokenmill.batching.BatchStats`)."""
        return stats_of(self.labels[None], self.doc_ids[None], self.token_offsets[None])


class _Provenance:
    """``doc_ids`` and ``token_offsets`` of a batch kept as its segment table until first read.

    Those two arrays say where every position comes from (for :meth:`Batch.stats`, checks and
    debugging); no model reads them, yet written eagerly they were 16 of the 41 bytes a full batch
    writes per position. :meth:`PackPlan.batches` leaves them here; the first read derives both
    (exactly what the layout pass would have written) and the batch keeps them.
    """

    __slots__ = ("table", "shape", "dtype", "arrays")

    def __init__(self, seg_row, seg_doc, seg_start, seg_len, shape: tuple[int, int], dtype):
        self.table = (seg_row, seg_doc, seg_start, seg_len)
        self.shape, self.dtype, self.arrays = shape, dtype, None

    def get(self, name: str) -> np.ndarray:
        if self.arrays is None:  # two threads may both derive them: same values, either is kept
            self.arrays = provenance_arrays(*self.table, *self.shape, self.dtype)
        return self.arrays[0 if name == "doc_ids" else 1]


class _Derivable:
    """A :class:`Batch` field that may be given as a :class:`_Provenance`, derived on first read."""

    def __set_name__(self, owner, name: str):
        self.name, self.key = name, "_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            raise AttributeError(self.name)  # tells dataclass the field has no default
        value = obj.__dict__[self.key]
        if type(value) is _Provenance:
            value = obj.__dict__[self.key] = value.get(self.name)
        return value

    def __set__(self, obj, value) -> None:
        obj.__dict__[self.key] = value


def provenance_arrays(seg_row: np.ndarray, seg_doc: np.ndarray, seg_start: np.ndarray, seg_len: np.ndarray,
                      B: int, T: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """``(doc_ids, token_offsets)``, each ``(B, T)`` of ``dtype``, of a segment table checked when its
    batch was built: the source document and offset of every position, ``-1`` at padding. One
    compiled pass (its numpy twin on a machine's first run)."""
    from . import _kernels
    from .._jit import python_first

    doc_ids, token_offsets = np.empty(B * T, dtype), np.empty(B * T, dtype)
    if python_first("provenance", _kernels.provenance, B * T, FIRST_RUN_PYTHON_POSITIONS):
        ok = _table_fits(seg_row, seg_doc, seg_start, seg_len, B, T)
        doc_ids[:], token_offsets[:] = -1, -1
        if ok and seg_len.size:
            dst = segment_destinations(seg_row, seg_len, B, T)
            within = ranks_in_groups(seg_len)
            q = np.repeat(dst, seg_len) + within
            doc_ids[q] = np.repeat(seg_doc, seg_len)
            token_offsets[q] = np.repeat(seg_start, seg_len) + within
    else:
        ok = _kernels.provenance(seg_row, seg_doc, seg_start, seg_len, T, doc_ids, token_offsets)
    if not ok:
        raise InputError("the segment table of this batch was changed after the batch was built (its rows "
                         "no longer fit); do not modify a plan's arrays while its batches are in use")
    return doc_ids.reshape(B, T), token_offsets.reshape(B, T)


def _table_fits(seg_row, seg_doc, seg_start, seg_len, B: int, T: int) -> bool:
    """The structural checks of :func:`_kernels.provenance`, for its numpy twin."""
    S = seg_row.size
    if not seg_doc.size == seg_start.size == seg_len.size == S:
        return False
    if S == 0:
        return True
    if seg_row.min() < 0 or seg_row.max() >= B or seg_len.min() < 0 or (np.diff(seg_row) < 0).any():
        return False
    return bool((np.bincount(seg_row, weights=seg_len, minlength=B) <= T).all())


@dataclass(frozen=True, eq=False)
class Batch:
    """A rectangular batch of ``B`` rows of ``T`` positions; 2-D arrays have shape ``(B, T)``, int64
    (``position_ids``, ``doc_ids`` and ``token_offsets`` int32 where made with ``index_dtype=np.int32``).

    ``attention_mask`` is the bool non-pad mask (True = real token); it is *not* the attention
    pattern, which also depends on causality and document boundaries (see :meth:`dense_mask`).
    ``cu_seqlens`` (int32) covers the flattened ``B * T`` positions, as variable-length attention
    kernels take it: ``0 .. B*T``, strictly increasing, one entry per segment boundary, padding
    included as its own segment. ``truncated_tokens`` counts tokens cut off to build this batch.
    ``doc_ids`` and ``token_offsets`` (where every position comes from; no model input) are derived
    from the batch's segment table the first time they are read when the batch came from
    :meth:`PackPlan.batches`: a loop that never reads them does not pay for writing them.

    >>> from tokenmill.batching import pad_batch
    >>> b = pad_batch([[1, 10, 11, 2], [1, 12, 2]], pad_id=0)
    >>> b.input_ids.tolist()
    [[1, 10, 11, 2], [1, 12, 2, 0]]
    >>> b.labels.tolist()
    [[-100, 10, 11, 2], [-100, 12, 2, -100]]
    >>> b.cu_seqlens.tolist(), b.max_seqlen
    ([0, 4, 7, 8], 4)
    """

    input_ids: np.ndarray
    labels: np.ndarray
    position_ids: np.ndarray
    attention_mask: np.ndarray
    doc_ids: np.ndarray = _Derivable()  # batches of PackPlan.batches derive these two on first read
    token_offsets: np.ndarray = _Derivable()
    cu_seqlens: np.ndarray
    max_seqlen: int
    truncated_tokens: int = 0

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.input_ids.shape)  # type: ignore[return-value]

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def segment_ids(self) -> np.ndarray:
        """``(B, T)`` int64: the attention segment of every position, numbered over the whole batch."""
        B, T = self.shape
        return _segment_ids(self.cu_seqlens, B * T).reshape(B, T)

    def dense_mask(self) -> np.ndarray:
        """``(B, T, T)`` bool block-diagonal causal mask, True = may attend. Memory is B*T*T bytes:
        use it for small blocks and tests; long blocks want ``cu_seqlens`` or a FlexAttention mask."""
        return _dense_mask(self.segment_ids)

    def shifted_labels(self) -> np.ndarray:
        """``(B, T)`` pre-shifted targets for models that do not shift: ``out[:, i] = labels[:, i+1]``,
        ``-100`` in the last column.

        >>> from tokenmill.batching import pad_batch
        >>> pad_batch([[1, 2, 3]], pad_id=0).shifted_labels().tolist()
        [[2, 3, -100]]
        """
        out = np.full_like(self.labels, IGNORE_INDEX)
        out[:, :-1] = self.labels[:, 1:]
        return out

    def block(self, i: int) -> Block:
        """Row ``i`` as a :class:`Block` (its cu_seqlens re-based to start at 0)."""
        B, T = self.shape
        cu = self.cu_seqlens
        lo, hi = np.searchsorted(cu, [i * T, (i + 1) * T])
        row_cu = (cu[lo : hi + 1] - i * T).astype(np.int32)
        return Block(self.input_ids[i], self.labels[i], self.position_ids[i], self.doc_ids[i],
                     self.token_offsets[i], row_cu, int(np.diff(row_cu).max()))

    def blocks(self) -> list[Block]:
        return [self.block(i) for i in range(len(self))]

    @classmethod
    def from_blocks(cls, blocks: list[Block]) -> "Batch":
        """Stack equal-length blocks into a batch."""
        if not blocks:
            raise ConfigError("cannot build a batch from 0 blocks; pass at least one block")
        T = len(blocks[0])
        for i, b in enumerate(blocks):
            if len(b) != T:
                raise ConfigError(f"block {i} has {len(b):,d} positions, block 0 has {T:,d}; "
                                  "blocks of one batch must have equal length")
        cu = [np.asarray(blocks[0].cu_seqlens[:1], np.int64)]
        cu += [np.asarray(b.cu_seqlens[1:], np.int64) + i * T for i, b in enumerate(blocks)]
        doc_ids = np.stack([b.doc_ids for b in blocks])
        return cls(np.stack([b.input_ids for b in blocks]), np.stack([b.labels for b in blocks]),
                   np.stack([b.position_ids for b in blocks]), doc_ids >= 0, doc_ids,
                   np.stack([b.token_offsets for b in blocks]), np.concatenate(cu).astype(np.int32),
                   max(b.max_seqlen for b in blocks))

    def stats(self):
        """Positions, non-pad positions, effective targets, ... as a summable
        :class:`tokenmill.batching.BatchStats`."""
        return stats_of(self.labels, self.doc_ids, self.token_offsets, truncated_tokens=self.truncated_tokens)


def _segment_ids(cu_seqlens: np.ndarray, total: int) -> np.ndarray:
    seg = np.zeros(total, np.int64)
    seg[cu_seqlens[1:-1]] = 1
    return np.cumsum(seg)


def _dense_mask(segment_ids: np.ndarray) -> np.ndarray:
    T = segment_ids.shape[-1]
    causal = np.tril(np.ones((T, T), dtype=bool))
    return (segment_ids[:, :, None] == segment_ids[:, None, :]) & causal


def check_fragment_positions(value: str) -> None:
    if value not in ("restart", "continue"):
        raise ConfigError(f"fragment_positions={value!r} is not one of 'restart' (each piece of a split "
                          "document counts positions from 0) or 'continue' (from its offset in the document)")


# fill(out, seg_dst): write the ids of segment k to out[seg_dst[k] : seg_dst[k] + seg_len[k]]
Filler = Callable[[np.ndarray, np.ndarray], None]


def assemble(fill: Filler | tuple[np.ndarray, np.ndarray], seg_row: np.ndarray, seg_doc: np.ndarray,
             seg_start: np.ndarray, seg_len: np.ndarray, *, num_rows: int, row_length: int, pad_id: int,
             stream: bool = False, fragment_positions: FragmentPositions = "restart",
             truncated_tokens: int = 0, index_dtype=np.int64, buffers: "Buffers | None" = None,
             defer_provenance: bool = False) -> Batch:
    """Build a :class:`Batch` from a segment table (all arrays ``(S,)`` int64, ``seg_row``
    nondecreasing, each row's lengths summing to at most ``row_length``).

    ``fill(out, dst)`` copies the ids of segment ``k`` to ``out[dst[k] : dst[k] + seg_len[k]]`` of the
    flat ``(B*T,)`` int64 ``input_ids``; one compiled pass then writes every other array (the
    vectorized numpy twin in ``reference.py`` is the oracle it is tested against). ``fill`` may
    instead be ``(tokens, seg_src)``: a flat token array and each segment's offset in it, read by
    that same pass (no separate copy).

    ``index_dtype`` (int64 or int32) is the dtype of ``position_ids``, ``doc_ids`` and
    ``token_offsets`` (int32: 12 fewer bytes written per position); ``buffers`` (a :class:`Buffers`)
    lends the memory of batches nobody holds any more instead of fresh pages.
    ``defer_provenance=True`` leaves ``doc_ids`` and ``token_offsets`` to be derived on first read.
    """
    check_fragment_positions(fragment_positions)
    B = check_int(num_rows, "num_rows", min=1)
    T = check_int(row_length, "row_length", min=1)
    pad_id = check_int(pad_id, "pad_id")
    seg_row, seg_doc, seg_start, seg_len = (check_array(a, name) for a, name in (
        (seg_row, "seg_row"), (seg_doc, "seg_doc"), (seg_start, "seg_start"), (seg_len, "seg_len")))
    if not seg_row.shape == seg_doc.shape == seg_start.shape == seg_len.shape:
        raise ConfigError("the segment arrays seg_row, seg_doc, seg_start and seg_len must have one shape")
    if seg_len.size and seg_len.min() < 0:
        raise ConfigError(f"seg_len holds {int(seg_len.min()):,d}; segment lengths must be >= 0")
    N = _checked_size(seg_row, seg_len, B, T)
    idx = check_index_dtype(index_dtype)
    if idx == np.int32 and seg_row.size and (seg_doc.min() < 0 or seg_doc.max() > INT32_MAX
                                             or (seg_start.astype(np.float64) + seg_len).max() > INT32_MAX):
        raise ConfigError("index_dtype=int32 cannot hold these document ids or token offsets (over "
                          f"{INT32_MAX:,d}); use index_dtype=np.int64")
    seg_dst = None if isinstance(fill, tuple) else segment_destinations(seg_row, seg_len, B, T)
    outputs = batch_outputs(N, idx, buffers, provenance=not defer_provenance)
    if isinstance(fill, tuple):
        tokens = check_token_array(fill[0], "tokens")
        seg_src = check_array(fill[1], "seg_src", shape=seg_len.shape)
        check_spans(seg_src, seg_len, tokens.size, "segments")
    else:
        tokens, seg_src = np.zeros(0, np.int64), seg_start
        fill(outputs[0], seg_dst)
    return layout_batch(seg_row, seg_doc, seg_start, seg_len, B, T, bool(stream), fragment_positions == "continue",
                        pad_id, tokens, seg_src, outputs, truncated_tokens)


def assemble_flat(tokens: np.ndarray, seg_src: np.ndarray, seg_row: np.ndarray, seg_doc: np.ndarray,
                  seg_start: np.ndarray, seg_len: np.ndarray, *, num_rows: int, row_length: int, pad_id: int,
                  stream: bool, fragment_positions: FragmentPositions, index_dtype=np.int64,
                  buffers: "Buffers | None" = None, defer_provenance: bool = False) -> Batch:
    """``assemble((tokens, seg_src), ...)`` with less Python per batch, for callers that checked the
    options (``pad_id``, ``fragment_positions``, ``index_dtype``) once: int64 C-contiguous segment
    arrays of one size are checked by one compiled pass (:func:`_kernels.segments_ok`); anything
    else, or a table that pass refuses, goes through :func:`assemble`, whose checks name the problem."""
    from . import _kernels

    B, T = num_rows, row_length
    arrays = (seg_row, seg_doc, seg_start, seg_len, seg_src)
    S = seg_row.shape[0] if type(seg_row) is np.ndarray and seg_row.ndim == 1 else -1
    tokens = check_token_array(tokens, "tokens")
    idx = check_index_dtype(index_dtype)
    if (S >= 0 and type(B) is int and type(T) is int and 1 <= B and 1 <= T and B * T <= INT32_MAX
            and all(type(a) is np.ndarray and a.dtype == np.int64 and a.shape == (S,) and a.flags.c_contiguous
                    for a in arrays)
            and _kernels.segments_ok(seg_row, seg_doc, seg_start, seg_len, seg_src, B, T, tokens.size,
                                     idx == np.int32)):
        if S == 0:
            tokens = np.zeros(0, np.int64)
        return layout_batch(seg_row, seg_doc, seg_start, seg_len, B, T, bool(stream),
                            fragment_positions == "continue", pad_id, tokens, seg_src,
                            batch_outputs(B * T, idx, buffers, provenance=not defer_provenance), 0)
    return assemble((tokens, seg_src), seg_row, seg_doc, seg_start, seg_len, num_rows=num_rows,
                    row_length=row_length, pad_id=pad_id, stream=stream, fragment_positions=fragment_positions,
                    index_dtype=index_dtype, buffers=buffers, defer_provenance=defer_provenance)


def assemble_segments(how: Filler | tuple[np.ndarray, np.ndarray], seg_row: np.ndarray, seg_doc: np.ndarray,
                      seg_start: np.ndarray, seg_len: np.ndarray, **options) -> Batch:
    """:func:`assemble` for what a segment filler returned: a flat ``(tokens, seg_src)`` pair takes
    :func:`assemble_flat` (one compiled pass checks the table), a ``fill`` callable :func:`assemble`.
    ``options``: their keywords (``num_rows``, ``row_length``, ``pad_id``, ``stream``, ...)."""
    if isinstance(how, tuple):
        return assemble_flat(how[0], how[1], seg_row, seg_doc, seg_start, seg_len, **options)
    return assemble(how, seg_row, seg_doc, seg_start, seg_len, **options)


INT32_MAX = int(np.iinfo(np.int32).max)


def check_index_dtype(index_dtype) -> type:
    """``np.int64`` or ``np.int32`` (the dtype of position ids, document ids and token offsets)."""
    try:
        dt = np.dtype(index_dtype)
    except TypeError:
        dt = None
    if dt == np.int64:
        return np.int64
    if dt == np.int32:
        return np.int32
    raise ConfigError(f"index_dtype={index_dtype!r} is not np.int64 (the default) or np.int32 (position ids, "
                      "document ids and token offsets as int32: fewer bytes per position)")


class Buffers:
    """Memory for the arrays of successive batches, lent again once nothing refers to it.

    A buffer is reused only when its reference count shows that no :class:`Batch`, no array view
    and no tensor made from one (``torch.from_numpy`` keeps its array alive) is left anywhere, so a
    batch the caller still holds is never overwritten; a batch that is dropped gives its memory
    (pages already mapped: no page faults, often still in cache) to a later one. Thread-safe.
    """

    def __init__(self, keep: int = 4):
        import threading

        self._keep = keep
        self._pool: list[np.ndarray] = []
        self._lock = threading.Lock()
        probe = [np.empty(1, np.uint8)]
        self._free_refs = getrefcount(probe[0])  # the count of a buffer only the pool holds (as take counts)

    def take(self, nbytes: int) -> np.ndarray:
        with self._lock:
            pool = self._pool
            for i in range(len(pool)):
                if pool[i].nbytes == nbytes and getrefcount(pool[i]) == self._free_refs:
                    return pool[i]
            buf = np.empty(nbytes, np.uint8)
            if len(pool) >= self._keep:  # forget the oldest (it lives on while its batch does)
                del pool[0]
            pool.append(buf)
            return buf


def batch_outputs(N: int, idx: type, buffers: Buffers | None, provenance: bool = True):
    """The per-position arrays of a batch, carved from one allocation (or a reused buffer): large
    enough for transparent huge pages, which made fresh per-batch buffers ~4x faster to fill (page
    faults dominated: 60 vs 430 M positions/s). ``provenance=False``: ``doc_ids`` and
    ``token_offsets`` are empty (the layout pass then leaves them to :class:`_Provenance`)."""
    w = np.dtype(idx).itemsize
    k = 3 if provenance else 1  # index arrays: positions (+ doc ids and offsets)
    nbytes = N * (16 + k * w + 1)
    raw = buffers.take(nbytes) if buffers is not None else np.empty(nbytes, np.uint8)
    ids = raw[: 16 * N].view(np.int64)
    index = raw[16 * N : (16 + k * w) * N].view(idx)
    real = raw[(16 + k * w) * N :].view(bool)
    if not provenance:
        return ids[:N], ids[N:], index, index[:0], index[:0], real
    return ids[:N], ids[N:], index[:N], index[N : 2 * N], index[2 * N :], real


def layout_batch(seg_row, seg_doc, seg_start, seg_len, B, T, stream, continue_positions, pad_id, tokens, seg_src,
                 outputs, truncated_tokens) -> Batch:
    """The compiled layout pass on a segment table already checked (by :func:`assemble`'s checks or
    :func:`_kernels.segments_ok`): int64 C-contiguous ``(S,)`` arrays, ``outputs`` from
    :func:`batch_outputs` (empty ``doc_ids``/``token_offsets``: the batch derives them on first read).
    Not a public entry point: unchecked input here reaches the kernel."""
    from . import _kernels

    input_ids, labels, position_ids, doc_ids, token_offsets, real = outputs
    if _python_first(B * T):
        return _layout_python(seg_row, seg_doc, seg_start, seg_len, B, T, stream, continue_positions, pad_id,
                              tokens, seg_src, input_ids, position_ids.dtype, truncated_tokens)
    cu = np.empty(seg_row.size + 2 * B + 1, np.int64)
    ncu, longest = _kernels.layout(seg_row, seg_doc, seg_start, seg_len, B, T, stream, continue_positions, pad_id,
                                   tokens, seg_src, input_ids, labels, position_ids, doc_ids, token_offsets, real, cu)
    shape = (B, T)
    if doc_ids.size == 0:
        doc_ids = token_offsets = _Provenance(seg_row, seg_doc, seg_start, seg_len, shape, position_ids.dtype)
    else:
        doc_ids, token_offsets = doc_ids.reshape(shape), token_offsets.reshape(shape)
    return Batch(input_ids.reshape(shape), labels.reshape(shape), position_ids.reshape(shape),
                 real.reshape(shape), doc_ids, token_offsets, cu[:ncu].astype(np.int32), int(longest),
                 int(truncated_tokens))


# A first run (the layout kernel not compiled yet) builds up to this many positions in all with the
# vectorized numpy twin (reference.assemble) instead of compiling the kernel (~1.3 s per signature).
FIRST_RUN_PYTHON_POSITIONS = 1 << 22


def _python_first(positions: int) -> bool:
    from .._jit import python_first
    from . import _kernels

    return python_first("layout", _kernels.layout, positions, FIRST_RUN_PYTHON_POSITIONS)


def _layout_python(seg_row, seg_doc, seg_start, seg_len, B, T, stream, continue_positions, pad_id, tokens, seg_src,
                   input_ids, index_dtype, truncated_tokens) -> Batch:
    """``layout_batch`` by the numpy twin: the ids come from ``tokens[seg_src[k]:]`` or, without
    tokens, from where ``input_ids`` already holds them; index arrays in ``index_dtype``."""
    from .reference import assemble as assemble_twin

    if tokens.size:
        def fill(out, dst):
            for s, d, n in zip(seg_src.tolist(), dst.tolist(), seg_len.tolist()):
                out[d : d + n] = tokens[s : s + n]
    else:
        def fill(out, dst):  # the ids are already where the twin puts them
            for d, n in zip(dst.tolist(), seg_len.tolist()):
                out[d : d + n] = input_ids[d : d + n]

    b = assemble_twin(fill, seg_row, seg_doc, seg_start, seg_len, num_rows=B, row_length=T, pad_id=pad_id,
                      stream=stream, fragment_positions="continue" if continue_positions else "restart",
                      truncated_tokens=truncated_tokens)
    if index_dtype != np.int64:
        b = replace(b, position_ids=b.position_ids.astype(index_dtype), doc_ids=b.doc_ids.astype(index_dtype),
                    token_offsets=b.token_offsets.astype(index_dtype))
    return b


def check_token_array(tokens, name: str) -> np.ndarray:
    """A flat 1-D integer token array the compiled passes can read as is (a memmap stays a view).

    uint64 is refused: its ids could exceed the int64 the batches hold (checking every value of a
    memory-mapped corpus would read it all).
    """
    a = np.asarray(tokens)
    if a.ndim != 1:
        raise InputError(f"{name} has shape {a.shape}; it must be a flat 1-D array of token ids")
    if a.size == 0:
        return np.zeros(0, np.int64)
    if a.dtype.kind not in "iu" or a.dtype == np.uint64:
        raise InputError(f"{name} has dtype {a.dtype}; token ids must be int8..int64 or uint8..uint32")
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return a


def _checked_size(seg_row: np.ndarray, seg_len: np.ndarray, B: int, T: int) -> int:
    if B * T > np.iinfo(np.int32).max:
        raise ConfigError(f"a batch of {B * T:,d} positions overflows int32 cu_seqlens; use fewer rows per batch")
    if seg_row.size and (seg_row[0] < 0 or seg_row[-1] >= B or (np.diff(seg_row) < 0).any()):
        raise ConfigError(f"segment rows must be nondecreasing within 0 .. {B - 1}")
    used = np.bincount(seg_row, weights=seg_len, minlength=B)
    if used.size and used.max() > T:
        raise ConfigError(f"row {int(np.argmax(used))} holds {int(used.max()):,d} tokens, more than "
                          f"row_length={T:,d}")
    return B * T


def segment_destinations(seg_row: np.ndarray, seg_len: np.ndarray, B: int, T: int) -> np.ndarray:
    """``(S,)`` flat offset of every segment: its row's start plus the lengths before it in the row."""
    per_row = np.bincount(seg_row, minlength=B)
    used = np.bincount(seg_row, weights=seg_len, minlength=B).astype(np.int64)
    end_in_row = np.cumsum(seg_len) - np.repeat(np.cumsum(used) - used, per_row)
    return seg_row * T + end_in_row - seg_len
