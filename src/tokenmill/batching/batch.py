"""The packed or padded batch itself: :class:`Batch` (rows of ids, labels, positions, document ids,
``cu_seqlens``, masks) and :class:`Block` (one row), with where every position comes from derived
from the segment table when first read. How batches are built from segments is :mod:`.layout`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np

from .._arrays import ranks_in_groups, readonly
from .._validate import as_index
from ..conventions import IGNORE_INDEX
from ..errors import ConfigError, InputError, OutOfRangeError
from .stats import stats_of

FragmentPositions = Literal["restart", "continue"]

# A first run (the layout and provenance passes not compiled yet) builds up to this many positions in
# all with the numpy twins instead of compiling (~1.3 s per signature).
FIRST_RUN_PYTHON_POSITIONS = 1 << 22


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


class Provenance:
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
    """A :class:`Batch` field that may be given as a :class:`Provenance`, derived on first read."""

    def __set_name__(self, owner, name: str):
        self.name, self.key = name, "_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            raise AttributeError(self.name)  # tells dataclass the field has no default
        value = obj.__dict__[self.key]
        if type(value) is Provenance:
            value = obj.__dict__[self.key] = value.get(self.name)
        return value

    def __set__(self, obj, value) -> None:
        obj.__dict__[self.key] = value


def provenance_arrays(seg_row: np.ndarray, seg_doc: np.ndarray, seg_start: np.ndarray, seg_len: np.ndarray,
                      B: int, T: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """``(doc_ids, token_offsets)``, each ``(B, T)`` of ``dtype``, of a segment table checked when its
    batch was built: the source document and offset of every position, ``-1`` at padding. One
    compiled pass (its numpy twin on a machine's first run)."""
    from .._jit import python_first
    from . import _kernels

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
    else:  # (read-only views: one kernel type whatever the table's flags, as layout_batch hands the layout kernel)
        ok = _kernels.provenance(*readonly(seg_row, seg_doc, seg_start, seg_len), T, doc_ids, token_offsets)
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
        """Row ``i`` as a :class:`Block` (its cu_seqlens re-based to start at 0); ``i`` counts from the end
        when negative, as a Python index (out of range: an IndexError naming the rows there are)."""
        B, T = self.shape
        row = as_index(i)
        if row is None:
            raise TypeError(f"a batch's row index must be an integer, not {type(i).__name__}")
        i = row
        if not -B <= i < B:
            raise OutOfRangeError(f"row {int(i):,d} is outside this batch's {B:,d} rows (-{B:,d} .. {B - 1:,d})")
        i = int(i) % B
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
        odd = next((i for i, b in enumerate(blocks) if not isinstance(b, Block)), None)
        if odd is not None:
            raise ConfigError(f"block {odd} is a {type(blocks[odd]).__name__}, not a Block; pass the Blocks a plan "
                              "gives (PackPlan.block, or a PackedBlocks dataset's items)")
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


def with_loss_mask(batch: Batch, masked) -> Batch:
    """``batch`` with the labels of the tokens ``masked`` (a :class:`~tokenmill.data.masked.MaskedSource`, or None:
    ``batch`` as it is) flags 0 set to -100, in place; where each position comes from is the batch's own
    ``doc_ids``/``token_offsets``, in the numbering of the source the batch was made from."""
    if masked is not None:
        from ..data.masked import masked_labels

        masked_labels(batch.labels, batch.doc_ids, batch.token_offsets, masked)
    return batch


def _segment_ids(cu_seqlens: np.ndarray, total: int) -> np.ndarray:
    """The segment of each of ``total`` positions; ``cu_seqlens`` checked first (a batch made by hand,
    or whose arrays were edited, may hold any values)."""
    cu = np.asarray(cu_seqlens)
    if (cu.ndim != 1 or cu.size < 2 or cu.dtype.kind not in "iu" or int(cu[0]) != 0 or int(cu[-1]) != total
            or bool((cu[1:] <= cu[:-1]).any())):
        raise InputError(f"this batch's cu_seqlens must be a 1-D integer array rising strictly from 0 to rows x "
                         f"positions = {total:,d} (got {cu.dtype} of shape {cu.shape}: "
                         f"{cu.ravel()[:4].tolist()}{' ..' if cu.size > 4 else ''}); build batches with pad_batch, "
                         "pack(...).batches or Batch.from_blocks rather than by hand")
    seg = np.zeros(total, np.int64)
    seg[cu_seqlens[1:-1]] = 1
    return np.cumsum(seg)


def _dense_mask(segment_ids: np.ndarray) -> np.ndarray:
    T = segment_ids.shape[-1]
    causal = np.tril(np.ones((T, T), dtype=bool))
    return (segment_ids[:, :, None] == segment_ids[:, None, :]) & causal


def as_batch(batch, what: str, also: str = "") -> Batch:
    """``batch`` as a :class:`Batch` (one :class:`Block`: a batch of 1); anything else is a ConfigError that
    names it (``what``: the function that was given it; ``also``: what else it takes)."""
    if isinstance(batch, Block):
        return Batch.from_blocks([batch])
    if not isinstance(batch, Batch):
        from ..errors import ConfigError

        raise ConfigError(f"{what} takes a tokenmill Batch or Block{also}, not {type(batch).__name__}")
    return batch


def check_fragment_positions(value: str) -> None:
    if value not in ("restart", "continue"):
        raise ConfigError(f"fragment_positions={value!r} is not one of 'restart' (each piece of a split "
                          "document counts positions from 0) or 'continue' (from its offset in the document)")


# fill(out, seg_dst): write the ids of segment k to out[seg_dst[k] : seg_dst[k] + seg_len[k]]
Filler = Callable[[np.ndarray, np.ndarray], None]


def segment_destinations(seg_row: np.ndarray, seg_len: np.ndarray, B: int, T: int) -> np.ndarray:
    """``(S,)`` flat offset of every segment: its row's start plus the lengths before it in the row."""
    per_row = np.bincount(seg_row, minlength=B)
    used = np.bincount(seg_row, weights=seg_len, minlength=B).astype(np.int64)
    end_in_row = np.cumsum(seg_len) - np.repeat(np.cumsum(used) - used, per_row)
    return seg_row * T + end_in_row - seg_len
