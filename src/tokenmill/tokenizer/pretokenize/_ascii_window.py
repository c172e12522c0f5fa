"""The ASCII fast path of the splitters (GPT-2, cl100k, o200k, Llama 3 / Qwen): the chunk starts of up to 64
bytes at once.

``_pretok_kernels._scan`` steps a state machine through every character: one dependent table load per
character, and a mispredicted branch at most word ends (English: ~24 ns a chunk, the splitter a third
of a whole encode of text seen before). ``cl100k_window`` instead reads up to 64 bytes of plain ASCII
with one vector load, turns them into one 64-bit mask per character class (bit ``j`` for byte
``p + j``; ``_wide.byte_classes64``: a vector compare per class, each made a mask, a few dozen
instructions where eight 8-byte words and carry-free byte arithmetic took ~500: the splitter alone
1.6-2.4x faster on English and code), and finds every chunk start of the window with a few dozen
integer operations on those masks, with no branch per character or per chunk. It runs the rules of
cl100k's pattern (and of its pre-possessive spelling, Llama 3's and Qwen's: ``_family_kernels``),
which on ASCII text are these:

* a letter starts a chunk unless the character before is a letter, a space or tab (always the
  one-character prefix ``[^\\r\\n\\p{L}\\p{N}]?`` then), or an other character that itself starts a
  chunk (prefix too); a contraction ``'(?i:[sdmt]|ll|ve|re)`` at an apostrophe that starts a chunk is
  a chunk, so the character after it starts one;
* a digit starts one after a non-digit and every K digits (``\\p{N}{1,K}``);
* an other character (``[^\\s\\p{L}\\p{N}]``) starts one unless the character before is an other
  character or ' ' (`` ?[^\\s\\p{L}\\p{N}]+``); CR and LF right after an other-run belong to it
  (``[\\r\\n]*``, found with one addition: the carry runs through the CR/LF run);
* in a run of whitespace that a non-whitespace character follows: its first character, the one after
  its last CR/LF (``\\s*[\\r\\n]``), and its last when the last two are not CR/LF (``\\s+(?!\\S)``).

Chunks are matched from each chunk start on their own (the patterns look nothing behind a match), so
the window starts at a chunk start and needs nothing from before it. What its bytes cannot settle is
left to the next window or to the machine: whitespace at the window's end (the run may go on), an
apostrophe in its last three bytes (a contraction may follow), and everything from its first byte of
0x80 or more (``*_window_punct``, which the splitters call where a window stopped at a byte E2, take the
characters U+2010-U+2027 in: dashes and curly quotes, other characters of three bytes each). The window
reports the last chunk start it settled; the caller goes on from there.
o200k's word rules (case, contraction suffixes, ``[\r\n/]*``) and GPT-2's are variants below. Exact:
tested equal to the machine alone (the ``*_machine`` kernels) and to ``regex`` on generated text and
the corpora.
"""

from __future__ import annotations

import numpy as np

from ..._jit import njit
from .._wide import byte_classes64, clz64, ctz64, ix, popc64, punct3_starts64

_1 = np.uint64(1)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(cache=True, nogil=True, inline="always")
def _is_contraction(data, i, fold):
    """0 unless an apostrophe at ``data[i]`` begins ``'(?i:[sdmt]|ll|ve|re)`` (``fold``; else GPT-2's,
    lower case only): then its length, 2 or 3 (the caller has checked that ``data[i + 2]`` exists;
    ``| 0x20`` lowercases only letters here)."""
    c1 = data[i + 1] | (0x20 if fold else 0)
    c2 = data[i + 2] | (0x20 if fold else 0)
    if c1 == 0x73 or c1 == 0x74 or c1 == 0x6D or c1 == 0x64:  # s t m d
        return 2
    if (c1 == 0x6C and c2 == 0x6C) or (c1 == 0x76 and c2 == 0x65) or (c1 == 0x72 and c2 == 0x65):  # ll ve re
        return 3
    return 0


@njit(cache=True, nogil=True, inline="always")
def _contractions(data, p, As, wl, fold):
    """The contractions (``_is_contraction``) at the apostrophes ``As`` (those that start a chunk):
    ``(F, inside, u)``, the character after each (a chunk start), their letters, and the first apostrophe
    too close to the window's end to tell (``wl`` when none: the window settles nothing from there)."""
    F = np.uint64(0)
    inside = np.uint64(0)
    u = wl
    while As != 0:
        j = np.int64(ctz64(As))
        As &= As - _1
        if j + 3 >= wl:
            u = j
            break
        ln = _is_contraction(data, p + j, fold)
        if ln != 0:
            F |= _1 << np.uint64(j + ln)
            inside |= ((_1 << np.uint64(ln - 1)) - _1) << np.uint64(j + 1)
    return F, inside, u


@njit(cache=True, nogil=True, inline="always")
def _classes(data, p, e, cased):
    """The class masks of the window ``data[p:p+64]`` (bit ``j``: byte ``p + j``), which stops at the first
    byte >= 0x80 and at ``e``: ``(LW, U, N, SP, W, NL, A, SL, V, wl, M3)``, letters in ``LW`` (``cased``, a
    constant: lower case there, upper case in ``U``, and '/' in ``SL``; else ``U`` and ``SL`` are 0),
    digits, ' ', the other whitespace but CR/LF (tab, VT, FF), CR/LF, the apostrophe, the window's
    bytes (``V``) and their count, and ``M3`` 0 (see ``_classes_punct``). The caller checks ``p + 64 <=
    data.size``."""
    LO, UP, N, SP, W, NL, A, SL, HI = byte_classes64(data, p)
    return _masks(LO, UP, N, SP, W, NL, A, SL, HI, np.uint64(0), p, e, cased)


@njit(cache=True, nogil=True, inline="always")
def _classes_punct(data, p, e, cased):
    """``_classes`` of a window that stops at the first byte >= 0x80 that does not begin a character
    U+2010-U+2027 (dashes, curly quotes, the ellipsis: ``E2 80 90``-``E2 80 A7``) lying whole in the window
    and the document, ``M3`` the first bytes of those characters. All three bytes of one are in no class:
    other characters, as every pattern here has them, but one character (see ``_prefix_ends``)."""
    LO, UP, N, SP, W, NL, A, SL, HI = byte_classes64(data, p)
    M3 = punct3_starts64(data, p)
    lim = min(np.int64(64), e - p)
    if lim < 64:
        M3 &= (_1 << np.uint64(max(lim - 2, 0))) - _1
    HI &= ~(M3 | (M3 << _1) | (M3 << np.uint64(2)))
    return _masks(LO, UP, N, SP, W, NL, A, SL, HI, M3, p, e, cased)


@njit(cache=True, nogil=True, inline="always")
def _masks(LO, UP, N, SP, W, NL, A, SL, HI, M3, p, e, cased):
    """``_classes``' masks cut at the window's end: the first byte in ``HI`` or ``e``."""
    wl = np.int64(ctz64(HI))  # the window ends at the first byte of a non-ASCII character it does not take (64: none)
    if cased:
        LW, U = LO, UP
    else:
        LW, U, SL = LO | UP, np.uint64(0), np.uint64(0)
    wl = min(wl, e - p)
    V = _ALL if wl >= 64 else (_1 << np.uint64(wl)) - _1
    return LW & V, U & V, N & V, SP & V, W & V, NL & V, A & V, SL & V, V, wl, M3 & V


@njit(cache=True, nogil=True, inline="always")
def _commit(p, out, osize, k, starts, u, WS, V, wl):
    """Write the starts (mask ``starts``, bit 0 = ``p``, written already) that the window settles: those up
    to ``u`` (the first position whose chunk it cannot settle) and before its trailing whitespace (the
    run may go on past the window). Returns ``(q, k, wl)`` as the windows do."""
    rest = V & ~WS
    t = np.int64(0) if rest == 0 else np.int64(64 - clz64(rest))
    u = min(u, t)
    starts &= ~_1
    if u < 0:
        starts = np.uint64(0)
    elif u < 63:
        starts &= (_1 << np.uint64(u + 1)) - _1
    if starts == 0:
        return p, k, wl
    q = p + np.int64(63 - clz64(starts))
    if k + 72 <= osize:
        # eight stores a round whatever the count (a store past the last start lands beyond ``k`` and is
        # overwritten later): the loop's exit mispredicts once every few windows, not once every window
        kend = k + np.int64(popc64(starts))
        while True:
            for t in range(8):
                out[ix(k + t)] = p + np.int64(ctz64(starts))
                starts &= starts - _1
            k += 8
            if k >= kend:
                return q, kend, wl
    while starts != 0:
        out[ix(k)] = p + np.int64(ctz64(starts))
        k += 1
        starts &= starts - _1
    return q, k, wl


@njit(cache=True, nogil=True, inline="always")
def _whitespace_starts(NW, NL, E, V):
    """The chunk starts in the runs of whitespace ``E`` (``NW``: its spaces and tabs, ``NL``: CR/LF): the
    start of each run, the character after its last CR/LF (a CR/LF followed by spaces and tabs that
    another CR/LF ends is not the run's last: rare, one step each), and its last character when a
    non-whitespace character follows and the last two are spaces or tabs."""
    starts = E & ~(E << _1)
    S1 = NW & (NL << _1)
    if S1 != 0:
        bad = (NW + S1) & ~NW & NL  # the byte after each run of spaces and tabs those open
        while bad != 0:
            b = bad & (~bad + _1)
            bad &= bad - _1
            below = S1 & (b - _1)
            S1 &= ~(_1 << (np.uint64(63) - clz64(below)))
        starts |= S1
    return starts | (NW & (NW << _1) & ((V & ~(NW | NL)) >> _1))


@njit(cache=True, nogil=True, inline="always")
def _prefix_ends(Ost, M3):
    """The last bytes of the other characters that start a chunk (``Ost``, their first bytes): one byte
    each, but a U+2010-U+2027 character's (its first byte in ``M3``) two bytes on. A letter right after
    one of them goes on its chunk (the prefix ``[^\\r\\n\\p{L}\\p{N}]?`` of a word: "“Hello" is one chunk)."""
    return (Ost & ~M3) | ((Ost & M3) << np.uint64(2))


@njit(cache=True, nogil=True, inline="always")
def cl100k_window(data, p, e, out, osize, k, dmax, o200k):
    """The chunk starts after ``p`` (a chunk start) that the ASCII bytes ``data[p:p+64]`` settle, under
    cl100k's rules with chunks of up to ``dmax`` digits (``o200k``, a constant: under o200k's),
    written to ``out[k:]``. Returns ``(q, k, wl)``: ``q`` the last start written (``p`` when none),
    ``wl`` the bytes the window read (it stops at the first byte >= 0x80 and at ``e``, the end of the
    document). The caller checks ``p + 64 <= data.size`` (one 64-byte load) and that ``out`` has
    room (one entry per byte)."""
    return _cl100k_rules(data, p, out, osize, k, dmax, o200k, _classes(data, p, e, o200k))


@njit(cache=True, nogil=True, inline="always")
def _cl100k_rules(data, p, out, osize, k, dmax, o200k, classes):
    """``cl100k_window`` on the window's ``classes`` (``_classes`` or ``_classes_punct``)."""
    LW, U, N, SP, W, NL, A, SL, V, wl, M3 = classes
    L = LW | U
    NW = SP | W
    OT = V & ~(L | N | NW | NL)
    u = wl  # the first position whose chunk the window cannot settle
    F = np.uint64(0)
    if o200k:
        # CR, LF and '/' right after an other-run belong to it (``[\r\n/]*``): from each CR/LF after
        # an other character ('/' included), the carry of the addition runs to the end of its run of
        # CR, LF and '/' (a second such CR/LF in one run adds where the first carry has cleared: no
        # carry, so it is or-ed back); a '/' taken so is no longer an other character
        X = NL | SL
        seeds = NL & (OT << _1)
        absorbed = (X & ((X + seeds) ^ X)) | seeds
        OT &= ~(absorbed & SL)
        # a contraction right after a letter ends that letter's word (not after one that ends a
        # contraction: the word ended there); the character after it starts a chunk (an apostrophe in
        # the last three bytes: the word's start is the last one settled)
        inside = np.uint64(0)
        Aw = A & (L << _1)
        while Aw != 0:
            j = np.int64(ctz64(Aw))
            Aw &= Aw - _1
            if ((inside >> np.uint64(j - 1)) & _1) != 0:
                continue
            if j + 3 >= wl:
                u = min(u, j - 1)
                break
            ln = _is_contraction(data, p + j, True)
            if ln != 0:
                F |= _1 << np.uint64(j + ln)
                inside |= ((_1 << np.uint64(ln)) - _1) << np.uint64(j)
        Ost = OT & ~(OT << _1) & ~(SP << _1) & ~inside
        # a letter starts a chunk unless it goes on a word (a lower-case letter, or an upper-case one
        # after an upper-case one) or follows a one-character prefix (its last byte: ``_prefix_ends``);
        # an upper-case letter after a lower-case one starts the next word
        starts = ((L & ~(L << _1) & ~((NW | _prefix_ends(Ost, M3)) << _1)) | (U & (LW << _1)) | (F & L)) & ~inside
    else:
        absorbed = NL & ~(NL + (NL & (OT << _1)))
        # other characters: a start unless after an other character or ' '
        Ost = OT & ~(OT << _1) & ~(SP << _1)
        # contractions: at an apostrophe that starts a chunk, the character after one starts the next
        F, _, u = _contractions(data, p, A & Ost, wl, True)
        starts = (L & ~(L << _1) & ~((NW | _prefix_ends(Ost, M3)) << _1)) | (F & L)
    # digits: a start after a non-digit and every dmax digits
    if dmax == 1:
        Nst = N
    else:
        Nst = N & ~(N << _1)
        x = N
        for t in range(1, dmax + 1):
            x &= N << np.uint64(t)  # digits with dmax digits before them in their run
        while x != 0:
            j = np.int64(ctz64(x))
            x &= x - _1
            r = j
            while r > 0 and ((N >> np.uint64(r - 1)) & _1) != 0:
                r -= 1
            if (j - r) % dmax == 0:
                Nst |= _1 << np.uint64(j)
    # whitespace: CR/LF that an other-run took aside
    starts |= Ost | Nst | F | _whitespace_starts(NW, NL, (NW | NL) & ~absorbed, V)
    return _commit(p, out, osize, k, starts, u, NW | NL, V, wl)


@njit(cache=True, nogil=True, inline="always")
def gpt2_window(data, p, e, out, osize, k):
    """``cl100k_window`` under GPT-2's pattern (``_pretok_kernels._scan_gpt2``' rules: a letter, digit or
    other character starts a chunk after a character of another kind that is not ' '; whitespace after
    non-whitespace, and the last of a run of two or more that non-whitespace follows; a contraction at
    an apostrophe that starts a chunk is one, the character after it starts the next)."""
    return _gpt2_rules(data, p, out, osize, k, _classes(data, p, e, False))


@njit(cache=True, nogil=True, inline="always")
def _gpt2_rules(data, p, out, osize, k, classes):
    """``gpt2_window`` on the window's ``classes`` (``_classes`` or ``_classes_punct``)."""
    L, _, N, SP, W, NL, A, _, V, wl, _ = classes
    WS = SP | W | NL
    OT = V & ~(L | N | WS)
    starts = ((L & ~(L << _1)) | (N & ~(N << _1)) | (OT & ~(OT << _1))) & ~(SP << _1)
    F, inside, u = _contractions(data, p, A & starts, wl, False)
    starts = (starts & ~inside) | F | (WS & ~(WS << _1)) | (WS & (WS << _1) & ((V & ~WS) >> _1))
    return _commit(p, out, osize, k, starts, u, WS, V, wl)


@njit(cache=True, nogil=True)
def cl100k_window_punct(data, p, e, out, osize, k, dmax, o200k):
    """``cl100k_window`` taking the characters U+2010-U+2027 in, a function of its own (called, not
    inlined: a second copy of the window in the splitter's loop made its plain windows ~25% slower)."""
    return _cl100k_rules(data, p, out, osize, k, dmax, o200k, _classes_punct(data, p, e, o200k))


@njit(cache=True, nogil=True)
def gpt2_window_punct(data, p, e, out, osize, k):
    """``gpt2_window`` taking the characters U+2010-U+2027 in (as ``cl100k_window_punct``)."""
    return _gpt2_rules(data, p, out, osize, k, _classes_punct(data, p, e, False))
