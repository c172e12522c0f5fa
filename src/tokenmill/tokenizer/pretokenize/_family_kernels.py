"""Compiled matcher for the split regexes of today's open models: Llama 3, Qwen 2/2.5/3, Qwen 3.5.

They are one family, the pre-possessive spelling of cl100k's regex::

    (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?LET+|\\p{N}{1,K}| ?[^\\s LET \\p{N}]+[\\r\\n]*
    |\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+

with LET = ``\\p{L}`` (Llama 3: K = 3; Qwen 2: K = 1) or ``[\\p{L}\\p{M}]`` (Qwen 3.5: K = 1). Unlike
tiktoken's cl100k spelling it has no ``\\s++$`` alternative, so whitespace after the last newline at
the end of a text is a chunk of its own (cl100k keeps it with the newline): the gpt4 kernel would be
wrong on such texts, hence this one. Qwen 3.5's letter class is run with a class table whose L bit
also holds ``\\p{M}``: then ``[^\\s\\p{L}\\p{M}\\p{N}]`` is "kind 0" and a mark can start a word, which
is exactly what the prefix ``[^\\r\\n\\p{L}\\p{N}]?`` (which admits marks) followed by LET+ gives.

Every backtrack is worked out as in ``_pretok_kernels`` (whose helpers this module uses):

* the contraction is tried first (an apostrophe followed by s, t, m, d, ll, ve, re in any case);
* a LET character starts a LET run; a character that is not CR, LF, LET or N followed by a LET
  character is a one-character prefix of the run (if it is not followed by one, LET+ fails there and,
  the character not being LET itself, so does the branch without it);
* a digit: up to K digits;
* `` ?[^\\s LET N]+[\\r\\n]*``: the other-run, with one leading space, then any CR/LF;
* whitespace: ``\\s*[\\r\\n]+`` ends after the run's last CR/LF; else ``\\s+(?!\\S)`` leaves the run's
  last character when a non-space follows (all of it at the end); else one character.

That matcher is the twin (``split_family_matcher``) of the splitter, ``split_family``, which runs
``_pretok_kernels._scan`` (one pass over the characters) with cl100k's state machine built for K and
without ``\\s++$`` (``family_machine``).
"""

from __future__ import annotations

import functools

import numpy as np

from ..._jit import njit
from ._pretok_kernels import (
    APOS,
    CR,
    KIND,
    L_,
    LF,
    N_,
    SP,
    cl100k_machine,
    classify,
    contraction_ci,
    grow_offsets,
    new_offsets,
    next_char,
    run_end,
    scan_documents,
    skip_bytes,
    space_end,
)
from .presets import scratch


@njit(cache=True, nogil=True, inline="always")
def _m_family(data, cls, i, n, dmax):
    b = data[i]
    j = next_char(cls, i)
    if b == APOS:
        e = contraction_ci(data, cls, i, n)
        if e >= 0:
            return e
    kind = cls[i] & KIND
    if kind == L_:
        return run_end(cls, j, n, L_)
    if b != CR and b != LF and kind != N_ and j < n and (cls[j] & KIND) == L_:
        return run_end(cls, j, n, L_)
    if kind == N_:
        for _ in range(dmax - 1):
            if j >= n or (cls[j] & KIND) != N_:
                break
            j = next_char(cls, j)
        return j
    if b == SP and j < n and (cls[j] & KIND) == 0:
        return skip_bytes(data, run_end(cls, j, n, 0), n, CR, LF, LF)
    if kind == 0:
        return skip_bytes(data, run_end(cls, j, n, 0), n, CR, LF, LF)
    return space_end(data, cls, i, j, n, True, False)


@njit(cache=True, nogil=True, inline="always")
def _fill_family(data, cls, i, n, out, k, dmax):
    while i < n and k < out.shape[0]:
        i = _m_family(data, cls, i, n, dmax)
        out[k] = i
        k += 1
    return i, k


@functools.cache
def family_machine(dmax: int):
    """The state table of ``split_family`` for K = ``dmax``: cl100k's machine without ``\\s++$``."""
    return cl100k_machine(dmax, dollar=False)


_FAMILY3 = family_machine(3)
_FAMILY1 = family_machine(1)


def split_family(data, tab, docs, table, fast, buf=None):
    """(offsets, bad) as ``_pretok_kernels.split_gpt4``, for the family pattern whose state table
    ``table`` is (``family_machine(K)``; LET is whatever the table's L bit holds): one pass over the
    characters (``_pretok_kernels._scan``), the twin of ``split_family_matcher`` (tested equal).
    ``fast``: K, to run stretches of ASCII 64 bytes at a time (``_ascii_window``; K of 1 and 3, the
    family's), or 0 (the machine alone, its twin in the tests). One compiled kernel per case, each with
    its K a constant: as a run-time value the machine's hand-back test stays in its loop (~15% slower
    on Chinese). ``buf``: the ``out_buf`` of ``presets.split_offsets`` (None: a new array), checked here."""
    fast = int(fast)
    if fast in (1, 3) and table is family_machine(fast):  # the kernels hold these tables as constants
        return (split_family_k3 if fast == 3 else split_family_k1)(data, tab, docs, scratch(buf, data.shape[0]))
    return split_family_machine(data, tab, docs, table)


@njit(cache=True, nogil=True)
def split_family_k3(data, tab, docs, buf):
    """``split_family`` with K = 3 (Llama 3): ``family_machine(3)``, a constant (as ``split_gpt4``'s)."""
    return scan_documents(data, tab, docs, _FAMILY3, False, 3, buf)


@njit(cache=True, nogil=True)
def split_family_k1(data, tab, docs, buf):
    """``split_family`` with K = 1 (Qwen): ``family_machine(1)``, a constant."""
    return scan_documents(data, tab, docs, _FAMILY1, False, 1, buf)


@njit(cache=True, nogil=True)
def split_family_machine(data, tab, docs, table):
    """``split_family`` through the machine alone (any K: the one its table was built for)."""
    return scan_documents(data, tab, docs, table, False, 0, np.empty(0, np.int64))


@njit(cache=True, nogil=True)
def split_family_matcher(data, tab, docs, dmax):
    """``split_family`` through the matcher ``_m_family`` with K = ``dmax`` (its twin in the tests)."""
    cls, bad = classify(data, tab, docs)
    out = new_offsets(data.shape[0])
    k = 1
    for d in range(docs.shape[0] - 1):
        i, k = _fill_family(data, cls, docs[d], docs[d + 1], out, k, dmax)
        while i < docs[d + 1]:
            out = grow_offsets(out, k)
            i, k = _fill_family(data, cls, i, docs[d + 1], out, k, dmax)
    return out[:k].copy(), bad
