"""Copying token slices out of a flat token array, compiled: the one home of the gathers that the
token store, the windows and the packed batches share (it sits below all three).

Copying many short slices is a loop with per-iteration work too small for Python (about 1 us of
interpreter overhead per window would cap W=512 uint16 windows near 1 GB/s); numpy fancy indexing
would build an int64 index per token (4x the bytes of uint16 ids). A numba loop of slice copies runs
at memory bandwidth. ``gather_rows_py`` and ``gather_segments_py`` are the readable twins; tests
check they agree. Both entry points are the kernels' validating boundary: numba checks no bounds.
"""

from __future__ import annotations

import functools

import numpy as np

from .errors import ConfigError, InputError


def gather_rows_py(tokens, src_start, lengths, out, pad_id) -> None:
    """Reference: ``out[i, :n] = tokens[s:s+n]``, the rest of the row ``pad_id``."""
    for i in range(src_start.shape[0]):
        s, n = int(src_start[i]), int(lengths[i])
        out[i, :n] = tokens[s:s + n]
        out[i, n:] = pad_id


def gather_rows(tokens, src_start, lengths, out, pad_id: int) -> None:
    """Fill ``out`` (B, W) with the windows; compiled on first use, ``gather_rows_py`` semantics.

    The kernel's boundary: every window must lie inside ``tokens``, ``out`` must have a row per
    window and room for the longest one, and its dtype must hold every token id and ``pad_id``
    exactly (numba would truncate in silence).
    """
    from ._validate import check_array, check_int, check_out, check_spans

    tok = np.asarray(tokens)  # a memmap becomes a plain ndarray view (no copy), which numba types
    if tok.ndim != 1 or (tok.size and tok.dtype.kind not in "iu"):
        raise InputError(f"tokens has shape {tok.shape} and dtype {tok.dtype}; pass a flat 1-D integer array")
    src_start = check_array(src_start, "src_start")
    lengths = check_array(lengths, "lengths", shape=src_start.shape)
    check_spans(src_start, lengths, tok.size, "windows")
    width = int(lengths.max()) if lengths.size else 0
    out = check_out(out, "out", shape=(src_start.size, width))
    if tok.size and not np.can_cast(tok.dtype, out.dtype, "safe"):
        raise ConfigError(f"out has dtype {out.dtype}, which cannot hold every {tok.dtype} token id; "
                          f"pass out with dtype {tok.dtype} (or wider)")
    for name, a in (("tokens", tok), ("out", out)):
        if not a.dtype.isnative:  # (numba's own error: "Unsupported array dtype: >u2")
            raise InputError(f"{name} has dtype {a.dtype.str}, not in this machine's byte order; pass " + (
                f"np.asarray(tokens, np.dtype('{a.dtype.str}').newbyteorder('='))" if name == "tokens" else
                "an out array in native order (or none)"))
    if tok.size and np.may_share_memory(tok, out):  # (rows written over the ids later rows read)
        raise ConfigError("out shares memory with tokens; pass an out array of its own")
    info = np.iinfo(out.dtype)
    pad = check_int(pad_id, "pad_id", min=int(info.min), max=int(info.max))
    if src_start.size == 0:
        return
    if out.shape[0] > src_start.size:  # only the first rows are written
        out = out[: src_start.size]
    if tok.size == 0:
        tok = np.zeros(1, out.dtype)  # every window is empty; the kernel reads nothing
    from . import _gather_kernels as K

    kernel = K.gather
    if _python_first(kernel, out.size):
        gather_rows_py(tok, src_start, lengths, out, pad)
        return
    kernel(tok, src_start, lengths, out, out.dtype.type(pad))


# A first run (the gather not compiled yet) fills up to this many positions in all with the Python
# twin (one slice copy per window) instead of compiling (~1 s per dtype pair).
FIRST_RUN_PYTHON_POSITIONS = 1 << 22


def _python_first(kernel, positions: int) -> bool:
    from ._jit import python_first

    return python_first("windows gather", kernel, positions, FIRST_RUN_PYTHON_POSITIONS)


def gather_segments_py(tokens, src, length, dst, out) -> None:
    """Reference: ``out[dst[k]:dst[k] + length[k]] = tokens[src[k]:src[k] + length[k]]`` for every k."""
    for s, n, d in zip(src.tolist(), length.tolist(), dst.tolist()):
        out[d : d + n] = tokens[s : s + n]


def gather_segments(tokens, src, length, dst, out) -> None:
    """Copy segment ``k`` (``length[k]`` ids from ``tokens[src[k]]``) to ``out[dst[k]:]`` (flat).

    The boundary: ``src``/``length``/``dst`` int64 of one shape, every span inside ``tokens`` and
    inside ``out``, and ``out`` (writable, flat) able to hold every id of ``tokens``' dtype exactly.
    """
    from ._validate import check_array, check_spans

    tok = np.asarray(tokens)
    if tok.ndim != 1 or (tok.size and tok.dtype.kind not in "iu"):
        raise InputError(f"tokens has shape {tok.shape} and dtype {tok.dtype}; pass a flat 1-D integer array")
    src = check_array(src, "src")
    length = check_array(length, "length", shape=src.shape)
    dst = check_array(dst, "dst", shape=src.shape)
    check_spans(src, length, tok.size, "segments")
    if not isinstance(out, np.ndarray) or out.ndim != 1 or not out.flags.writeable or not out.flags.c_contiguous:
        raise ConfigError("out must be a writable, C-contiguous 1-D array")
    check_spans(dst, length, out.size, "segment destinations")
    if tok.size and not np.can_cast(tok.dtype, out.dtype, "safe"):
        raise ConfigError(f"out has dtype {out.dtype}, which cannot hold every {tok.dtype} token id")
    if src.size == 0 or tok.size == 0:
        return
    from . import _gather_kernels as K

    kernel = K.gather_segments
    if _python_first(kernel, int(length.sum())):
        gather_segments_py(tok, src, length, dst, out)
        return
    kernel(tok, src, length, dst, out)


@functools.cache
def _kernels():
    """The kernel module, imported on first use (it imports numba, which importing tokenmill does not)."""
    from . import _gather_kernels

    return _gather_kernels


class Pieces:
    """Byte strings kept in one buffer: piece ``i`` is ``blob[starts[i]:starts[i + 1]]`` (a tokenizer's decode
    table, every id's bytes; None for an id that holds none, marked in ``missing``). Made once and checked by
    construction (``starts`` from 0, non-decreasing, ending at the buffer's size; all read-only), so
    :meth:`concat`, the compiled join's boundary, has only the ids to check, which its kernel does before
    using each."""

    def __init__(self, pieces) -> None:
        pieces = list(pieces)
        if not all(p is None or type(p) is bytes for p in pieces):
            raise ConfigError("pieces must be bytes or None")
        lengths = np.fromiter((0 if p is None else len(p) for p in pieces), np.int64, len(pieces))
        starts = np.zeros(len(pieces) + 1, np.int64)
        np.cumsum(lengths, out=starts[1:])
        missing = np.fromiter((p is None for p in pieces), np.bool_, len(pieces))
        starts.setflags(write=False)
        missing.setflags(write=False)
        self.blob = np.frombuffer(b"".join(p for p in pieces if p is not None) or b"\0", np.uint8)  # read-only
        self.starts, self.missing = starts, missing

    def __len__(self) -> int:
        return self.missing.size

    def concat(self, ids: np.ndarray) -> tuple[bytes, int]:
        """``(b"".join(piece[i] for i in ids), -1)`` for a 1-D int64 array ``ids``, compiled; ``(b"", k)`` when
        ``ids[k]`` is the first that names no piece (out of range, or None: the caller names it)."""
        if type(ids) is not np.ndarray or ids.dtype != np.int64 or ids.ndim != 1:
            raise ConfigError(f"ids must be a 1-D int64 array, not {type(ids).__name__}")
        out, bad = _kernels().concat_pieces(self.blob, self.starts, self.missing, ids)  # (compiled on first use: ~0.6 s)
        return out.tobytes(), bad


def concat_pieces_py(pieces: Pieces, ids: np.ndarray) -> tuple[bytes, int]:
    """Reference of :meth:`Pieces.concat`."""
    blob, starts, missing, out = pieces.blob, pieces.starts.tolist(), pieces.missing, []
    for k, i in enumerate(ids.tolist()):
        if not 0 <= i < len(missing) or missing[i]:
            return b"", k
        out.append(blob[starts[i]:starts[i + 1]].tobytes())
    return b"".join(out), -1
