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

from dataclasses import replace
from sys import getrefcount

import numpy as np

from .._arrays import readonly
from .._validate import check_array, check_int, check_spans
from .._words import counted
from ..errors import ConfigError, InputError
from .batch import (  # noqa: F401 (layout re-exports the batch types its callers import from here)
    FIRST_RUN_PYTHON_POSITIONS,
    Batch,
    Block,
    Filler,
    FragmentPositions,
    Provenance,
    check_fragment_positions,
    provenance_arrays,
    segment_destinations,
)


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
    pad_id = check_int(pad_id, "pad_id", min=0)  # (a token id: padding is found by length, so EOS is safe)
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
            and _kernels.segments_ok(*readonly(seg_row, seg_doc, seg_start, seg_len, seg_src), B, T, tokens.size,
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
    ``token_offsets`` are empty (the layout pass then leaves them to :class:`Provenance`)."""
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
    # (one argument type whatever the caller's arrays' flags: a plan's are read-only, assemble's user arrays not)
    seg_row, seg_doc, seg_start, seg_len, tokens, seg_src = readonly(seg_row, seg_doc, seg_start, seg_len, tokens,
                                                                     seg_src)
    if _python_first(B * T):
        return _layout_python(seg_row, seg_doc, seg_start, seg_len, B, T, stream, continue_positions, pad_id,
                              tokens, seg_src, input_ids, position_ids.dtype, truncated_tokens)
    cu = np.empty(seg_row.size + 2 * B + 1, np.int64)
    ncu, longest = _kernels.layout(seg_row, seg_doc, seg_start, seg_len, B, T, stream, continue_positions, pad_id,
                                   tokens, seg_src, input_ids, labels, position_ids, doc_ids, token_offsets, real, cu)
    shape = (B, T)
    if doc_ids.size == 0:
        doc_ids = token_offsets = Provenance(seg_row, seg_doc, seg_start, seg_len, shape, position_ids.dtype)
    else:
        doc_ids, token_offsets = doc_ids.reshape(shape), token_offsets.reshape(shape)
    return Batch(input_ids.reshape(shape), labels.reshape(shape), position_ids.reshape(shape),
                 real.reshape(shape), doc_ids, token_offsets, cu[:ncu].astype(np.int32), int(longest),
                 int(truncated_tokens))


# A first run (the layout kernel not compiled yet) builds up to this many positions in all with the
# vectorized numpy twin (reference.assemble) instead of compiling the kernel (~1.3 s per signature).


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
    if not a.dtype.isnative:  # (numba's own error: "Unsupported array dtype: >i4")
        raise InputError(f"{name} has dtype {a.dtype.str}, not in this machine's byte order; pass its ids in native "
                         f"order (np.asarray(ids, np.dtype('{a.dtype.str}').newbyteorder('=')))")
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return a


def _checked_size(seg_row: np.ndarray, seg_len: np.ndarray, B: int, T: int) -> int:
    if B * T > np.iinfo(np.int32).max:
        raise ConfigError(f"a batch of {B * T:,d} positions ({counted(B, 'row')} of {T:,d}) overflows int32 cu_seqlens (at most "
                          f"{2**31 - 1:,d}); use " + ("fewer rows per batch" if B > 1 else
                                                       "shorter rows (block_size, or pad_batch's max_length)"))
    if seg_row.size and (seg_row[0] < 0 or seg_row[-1] >= B or (np.diff(seg_row) < 0).any()):
        raise ConfigError(f"segment rows must be nondecreasing within 0 .. {B - 1}")
    used = np.bincount(seg_row, weights=seg_len, minlength=B)
    if used.size and used.max() > T:
        raise ConfigError(f"row {int(np.argmax(used))} holds {int(used.max()):,d} tokens, more than "
                          f"row_length={T:,d}")
    return B * T
