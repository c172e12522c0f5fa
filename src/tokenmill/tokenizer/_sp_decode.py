"""SentencePiece's decode, compiled: the kernel of ``SentencePieceTokenizer.decode`` and ``decode_bytes``.

``sentencepiece.decode_reference`` is its readable twin (the tests hold them equal): control pieces
dropped, ``▁`` a space, the text's first ``▁`` dropped (while nothing has been written: with
``remove_extra_whitespaces``, every leading piece that is only ``▁``), unknown pieces their surface
(`` ⁇ ``), and runs of byte pieces joined, then (``replace``) each byte of a run that starts no
valid UTF-8 character made U+FFFD, sentencepiece's rule (Python's ``"replace"`` makes one U+FFFD of
a truncated sequence). Python's loop was ~2.4 us an id (sentencepiece ~0.05).

The tables come from the tokenizer (:class:`SentencePieceDecoder`): ``blob``/``starts`` each id's
surface (UTF-8, ``▁`` as a space; an unknown piece's surface is the model's; a byte piece its byte;
a control piece nothing), ``types`` the piece types, ``lead_ws`` whether a piece starts with ``▁``.
Every id is checked against the tables before any is used (numba checks no bounds)."""

from __future__ import annotations

import numpy as np

from .._jit import njit
from .sp_types import BYTE, CONTROL, UNKNOWN


@njit(cache=True, nogil=True, inline="always")
def _valid_at(data, i, end):
    """sentencepiece's ``IsValidDecodeUTF8`` at ``data[i:end]``: (valid, bytes consumed; 1 when invalid)."""
    n = end - i
    b0 = np.int64(data[i])
    if b0 < 0x80:
        return True, 1
    if n >= 2 and (b0 & 0xE0) == 0xC0:
        b1 = np.int64(data[i + 1])
        if (b1 & 0xC0) == 0x80 and (((b0 & 0x1F) << 6) | (b1 & 0x3F)) >= 0x80:
            return True, 2
    elif n >= 3 and (b0 & 0xF0) == 0xE0:
        b1 = np.int64(data[i + 1])
        b2 = np.int64(data[i + 2])
        cp = ((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F)
        if (b1 & 0xC0) == 0x80 and (b2 & 0xC0) == 0x80 and cp >= 0x800 and not (0xD800 <= cp < 0xE000):
            return True, 3
    elif n >= 4 and (b0 & 0xF8) == 0xF0:
        b1 = np.int64(data[i + 1])
        b2 = np.int64(data[i + 2])
        b3 = np.int64(data[i + 3])
        cp = ((b0 & 0x07) << 18) | ((b1 & 0x3F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
        if (b1 & 0xC0) == 0x80 and (b2 & 0xC0) == 0x80 and (b3 & 0xC0) == 0x80 and 0x10000 <= cp <= 0x10FFFF:
            return True, 4
    return False, 1


@njit(cache=True, nogil=True, inline="always")
def _flush(queue, ql, out, o, replace):
    """Append the run of byte pieces ``queue[:ql]`` to ``out`` at ``o`` (``replace``: each byte that starts no
    valid character as U+FFFD); the new end of ``out``."""
    i = 0
    while i < ql:
        if replace:
            ok, n = _valid_at(queue, i, ql)
        else:
            ok, n = True, 1
        if ok:
            for j in range(n):
                out[o + j] = queue[i + j]
            o += n
        else:
            out[o] = 0xEF
            out[o + 1] = 0xBF
            out[o + 2] = 0xBD
            o += 3
        i += n
    return o


@njit(cache=True, nogil=True)
def sp_decode(ids, blob, starts, types, lead_ws, strip_first, rew, replace):
    """``(the decoded bytes, -1)``, or ``(nothing, k)`` where ``ids[k]`` is outside the tables."""
    n = types.size
    room = 0
    for k in range(ids.size):
        i = ids[k]
        if i < 0 or i >= n:
            return np.empty(0, np.uint8), k
        room += starts[i + 1] - starts[i]
    out = np.empty(3 * room, np.uint8)  # (a byte piece's one byte may become U+FFFD's three)
    queue = np.empty(ids.size, np.uint8)
    o = 0
    ql = 0
    bos_ws = True
    for k in range(ids.size):
        i = ids[k]
        t = types[i]
        if t == BYTE:
            queue[ql] = blob[starts[i]]
            ql += 1
            continue
        if ql:
            o = _flush(queue, ql, out, o, replace)
            ql = 0
        if o:
            bos_ws = False
        if t == CONTROL:
            continue
        s = starts[i]
        has_bos_ws = False
        if bos_ws and strip_first and lead_ws[i]:
            if t != UNKNOWN:
                s += 1  # the first ``▁``, a space in the surface
            has_bos_ws = not rew
        for j in range(s, starts[i + 1]):
            out[o] = blob[j]
            o += 1
        if has_bos_ws or o:
            bos_ws = False
    if ql:
        o = _flush(queue, ql, out, o, replace)
    return out[:o].copy(), -1
