"""Where a batch's text spells a special token it must not: one compiled pass over the batch's UTF-8.

``encode_batch`` refuses a text that contains a disallowed special token (tiktoken's safety model,
``special.SpecialTokens``). Asked per text with ``str.__contains__``, that check read every byte of the
batch at ~3.7 GB/s: 0.7 ms of a 14 ms pass over 2.7 MB of English, more than the split of some texts.
Here the batch's UTF-8 (joined for the encoder anyway) is read 64 bytes at a time: the bytes equal to
a special token's first byte come out of one vector compare per distinct first byte
(``_wide.eq_mask64``), and only there are the tokens' bytes compared. The first match inside one
document (not across two) is returned; the caller then asks that document the usual way, so the
error is the one ``encode`` raises.
"""

from __future__ import annotations

import numpy as np

from .._jit import njit
from .._validate import check_offsets
from ._wide import ctz64, eq_mask64


@njit(cache=True, nogil=True, inline="always")
def _match_at(data, i, flat, starts, lens, k):
    """Whether needle ``k`` (``flat[starts[k]:starts[k] + lens[k]]``) is at ``data[i:]`` (the caller checks
    that it fits)."""
    s = starts[k]
    for t in range(lens[k]):
        if data[i + t] != flat[s + t]:
            return False
    return True


@njit(cache=True, nogil=True)
def first_special(data, docs, firsts, flat, starts, lens):
    """The offset in ``data`` of the first occurrence of any needle that lies inside one document, or -1.

    ``data``: uint8; ``docs``: int64 document boundaries, non-decreasing, from 0 to ``data.size``;
    ``firsts``: the needles' distinct first bytes (uint8, 1-8 of them); ``flat``, ``starts``, ``lens``: the
    needles' bytes laid end to end, each one at least a byte (``check_needles`` validates all of this)."""
    n = data.size
    nf = firsts.size
    d = 0  # the document of position i: docs[d] <= i < docs[d + 1]
    i = 0
    while i < n:
        if i + 64 <= n:
            m = np.uint64(0)
            for f in range(nf):
                m |= eq_mask64(data, i, firsts[f])
            width = 64
        else:
            m = np.uint64(0)
            width = n - i
            for t in range(width):
                for f in range(nf):
                    if data[i + t] == firsts[f]:
                        m |= np.uint64(1) << np.uint64(t)
        while m != np.uint64(0):
            j = i + np.int64(ctz64(m))
            m &= m - np.uint64(1)
            while docs[d + 1] <= j:
                d += 1
            end = docs[d + 1]
            for k in range(lens.size):
                if j + lens[k] <= end and _match_at(data, j, flat, starts, lens, k):
                    return j
        i += width
    return -1


def check_needles(needles: list[bytes]) -> tuple:
    """``first_special``'s needle arrays for the non-empty byte strings ``needles`` (the one boundary its
    arrays pass)."""
    if not needles or any(not isinstance(x, bytes) or not x for x in needles):
        raise ValueError("special-token needles must be non-empty bytes")
    firsts = np.array(sorted({x[0] for x in needles}), np.uint8)
    lens = np.array([len(x) for x in needles], np.int64)
    starts = np.concatenate(([0], np.cumsum(lens)[:-1])).astype(np.int64)
    flat = np.frombuffer(b"".join(needles), np.uint8)
    return firsts, flat, starts, lens


def find_special(data, docs: np.ndarray, needles: tuple) -> int:
    """``first_special`` over ``data`` (bytes-like) cut at ``docs`` (validated here: int64, from 0 to the
    data's size, non-decreasing), with ``needles`` from ``check_needles``."""
    buf = np.frombuffer(data, np.uint8)
    docs = check_offsets(docs, "document offsets", n=buf.size, error=ValueError)
    if docs.size < 2:
        return -1
    firsts, flat, starts, lens = needles
    return int(first_special(buf, docs, firsts, flat, starts, lens))
