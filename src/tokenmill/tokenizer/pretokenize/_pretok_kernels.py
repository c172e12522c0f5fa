"""Compiled pre-tokenization kernels: the split regexes of gpt2, gpt4 (cl100k) and o200k on UTF-8 bytes.

Each ``_m_<preset>(data, cls, i, n)`` returns the end (byte offset) of the chunk that
``regex.findall(pattern, text)`` matches at byte offset ``i``. It tries the pattern's alternatives
in order, as the backtracking engine does, with every backtrack worked out once by hand (the
comments next to each alternative say how). The presets always match at least one character at
every position, so consecutive matches cover the text and the chunk boundaries are simply the
successive match ends.

``tab`` is a uint16 array indexed by code point (0x110000 entries) whose bits are the character
classes the patterns use, derived from the ``regex`` module itself (see ``pretokenize.py``).
A first pass (``classify``) decodes the UTF-8 once and stores, at the first byte of every character,
its table entry plus its UTF-8 length (``cls``); the matchers then only read that array (and compare
ASCII characters as raw bytes: they never occur inside a multi-byte sequence). Decoding at every
look instead made the matchers so large that numba took over 100 s of CPU to compile them, and
they ran no faster. Matching is bound by branch mispredictions (about one per chunk), not by
memory: classify runs at about 1 GB/s, the matchers at 100-300 MB/s. Only plain Python entry points
in ``pretokenize.py`` call these kernels.

The splitters themselves (``split_gpt2``, ``split_gpt4``, ``split_o200k``) no longer run the matchers:
they make one pass over the characters and decide at each one whether a chunk starts there, which
costs no branch per chunk (``_scan_gpt2``: a few integer operations on the character and its
neighbours; ``_scan``: one load from a state table per character, the tables derived in Python by
``cl100k_machine`` and ``o200k_machine`` from the rules of the patterns). The matchers stay as their
twins (``split_*_matcher``), tested equal on generated text, ill-formed UTF-8 and document boundaries.
"""

from __future__ import annotations

import numpy as np

from ..._jit import njit
from .._wide import letters_from, load_u64, raw
from ._ascii_window import cl100k_window, cl100k_window_punct, gpt2_window, gpt2_window_punct

# Bits of the class table (see pretokenize.build_class_table). L, N and S are disjoint, so
# ``tab[c] & KIND`` is L_, N_, S_ or 0 (0 = "other": [^\s\p{L}\p{N}]).
L_ = 1  # \p{L}
N_ = 2  # \p{N}
S_ = 4  # \s as the regex module defines it (Unicode White_Space)
KIND = 7
U_ = 8  # [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]  (o200k's "upper" class)
W_ = 16  # [\p{Ll}\p{Lm}\p{Lo}\p{M}]       (o200k's "lower" class)
# Case-insensitive contraction letters: characters that (?i:x) matches, e.g. 'S', 's' and U+017F.
F_S = 32
F_D = 64
F_M = 128
F_T = 256
F_L = 512
F_V = 1024
F_E = 2048
F_R = 4096
# classify() stores the character's UTF-8 length minus one in bits 13-14 of its entry.
STEP = 13

CR, LF, SP, APOS, _SLASH = 13, 10, 32, 39, 47


@njit(cache=True, nogil=True, inline="always")
def _decode(data, i, n):
    """(code point, length) of the UTF-8 sequence at ``i`` (lead byte >= 0x80); length 0 if ill-formed.

    Well-formed as Python's strict decoder (Unicode's table 3-7) has it: continuation bytes
    10xxxxxx, no overlong form, no surrogate, nothing above U+10FFFF, nothing truncated. Any such
    error is reported at the lead byte, as Python does.
    """
    b = np.int64(data[i])
    if b < 0xC2:  # continuation byte, or lead of an overlong 2-byte form
        return 0, 0
    if b < 0xE0:
        if i + 1 >= n or (data[i + 1] & 0xC0) != 0x80:
            return 0, 0
        return ((b & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F), 2
    if b < 0xF0:
        if i + 2 >= n or (data[i + 1] & 0xC0) != 0x80 or (data[i + 2] & 0xC0) != 0x80:
            return 0, 0
        cp = ((b & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6) | (np.int64(data[i + 2]) & 0x3F)
        if cp < 0x800 or (0xD800 <= cp and cp <= 0xDFFF):
            return 0, 0
        return cp, 3
    if b < 0xF5:
        if i + 3 >= n or (data[i + 1] & 0xC0) != 0x80 or (data[i + 2] & 0xC0) != 0x80:
            return 0, 0
        if (data[i + 3] & 0xC0) != 0x80:
            return 0, 0
        cp = ((b & 0x07) << 18) | ((np.int64(data[i + 1]) & 0x3F) << 12)
        cp |= ((np.int64(data[i + 2]) & 0x3F) << 6) | (np.int64(data[i + 3]) & 0x3F)
        if cp < 0x10000 or cp > 0x10FFFF:
            return 0, 0
        return cp, 4
    return 0, 0


@njit(cache=True, nogil=True)
def classify(data, tab, docs):
    """(cls, bad): per-byte classes of ``data`` and the offset of its first ill-formed byte (or -1).

    ``data`` is UTF-8 (uint8, shape (n,)) holding the documents ``data[docs[d]:docs[d + 1]]``
    (``docs``: int64, non-decreasing, from 0 to n), each of which must be well-formed on its own.
    ``cls`` is uint16, shape (n,): at each character's first byte
    ``tab[code point] | (len - 1) << STEP``, 0 at continuation bytes (never read). Validating here
    is cheap; decoding with Python first cost 15% of the time on Chinese. An ill-formed byte counts
    as a one-byte character of class 0 ("other"), so the matchers stay in bounds and make progress.
    """
    cls = np.zeros(data.shape[0], np.uint16)
    bad = -1
    for d in range(docs.shape[0] - 1):
        i = docs[d]
        n = docs[d + 1]  # no character crosses the end of its document
        while i < n:
            b = np.int64(data[i])
            if b < 0x80:
                cls[i] = tab[b]
                i += 1
                continue
            cp, m = _decode(data, i, n)
            if m == 0:
                if bad < 0:
                    bad = i
                i += 1
                continue
            cls[i] = tab[cp] | ((m - 1) << STEP)
            i += m
    return cls, bad


@njit(cache=True, nogil=True, inline="always")
def next_char(cls, p):
    """Offset of the character after the one starting at ``p``."""
    return p + 1 + (cls[p] >> STEP)


@njit(cache=True, nogil=True, inline="always")
def run_end(cls, p, n, kind):
    """End of the run of characters of class ``kind`` (L_, N_, S_ or 0) starting at ``p``."""
    while p < n:
        c = cls[p]
        if (c & KIND) != kind:
            break
        p += 1 + (c >> STEP)
    return p


@njit(cache=True, nogil=True, inline="always")
def _run_bits(cls, p, n, bits):
    """End of the run of characters having any of ``bits`` starting at ``p``."""
    while p < n:
        c = cls[p]
        if (c & bits) == 0:
            break
        p += 1 + (c >> STEP)
    return p


@njit(cache=True, nogil=True, inline="always")
def _digits3(cls, j, n):
    """End of ``\\p{N}{1,3}`` whose first digit ends at ``j``."""
    for _ in range(2):
        if j >= n or (cls[j] & KIND) != N_:
            break
        j = next_char(cls, j)
    return j


@njit(cache=True, nogil=True, inline="always")
def skip_bytes(data, p, n, a, b, c):
    """End of the run of the ASCII bytes a, b or c starting at ``p`` (e.g. ``[\\r\\n]*+``)."""
    while p < n and (data[p] == a or data[p] == b or data[p] == c):
        p += 1
    return p


@njit(cache=True, nogil=True, inline="always")
def space_end(data, cls, i, j, n, newlines, dollar):
    """End of the whitespace chunk starting at ``i`` (its first character ends at ``j``).

    Tries, in order: ``\\s++$`` (if ``dollar``: the whole run when it reaches the end of the text),
    ``\\s*[\\r\\n]`` / ``\\s*[\\r\\n]+`` (if ``newlines``: up to and including the run's last CR or LF,
    the backtracking of ``\\s*`` stopping at the last one), ``\\s+(?!\\S)`` (the run minus its last
    character when followed by non-space, or all of it at the end), and ``\\s`` / ``\\s+`` (one
    character: the run has only one then).
    """
    p = i
    last = i  # start of the run's last character
    nl_end = -1  # end of the run's last CR/LF
    while p < n:
        c = cls[p]
        if (c & S_) == 0:
            break
        last = p
        p += 1 + (c >> STEP)
        if data[last] == CR or data[last] == LF:
            nl_end = p
    if dollar and p == n:
        return n
    if newlines and nl_end >= 0:
        return nl_end
    if p == n:
        return n
    if last > i:
        return last
    return j


@njit(cache=True, nogil=True, inline="always")
def _m_gpt2(data, cls, i, n):
    """'(?:[sdmt]|ll|ve|re)| ?\\p{L}++| ?\\p{N}++| ?[^\\s\\p{L}\\p{N}]++|\\s++$|\\s+(?!\\S)|\\s"""
    b = data[i]
    j = next_char(cls, i)
    if b == APOS and j < n:  # case-sensitive contractions: ASCII bytes only
        b1 = data[j]
        if b1 == 115 or b1 == 100 or b1 == 109 or b1 == 116:  # s d m t
            return j + 1
        if j + 1 < n:
            b2 = data[j + 1]
            if (b1 == 108 and b2 == 108) or (b2 == 101 and (b1 == 118 or b1 == 114)):  # ll ve re
                return j + 2
    if b == SP and j < n:  # " ?X++": the space joins a following run of L, N or other
        kind2 = cls[j] & KIND
        if kind2 != S_:
            return run_end(cls, j, n, kind2)
    kind = cls[i] & KIND
    if kind != S_:
        return run_end(cls, j, n, kind)
    return space_end(data, cls, i, j, n, False, True)


@njit(cache=True, nogil=True, inline="always")
def contraction_ci(data, cls, e, n):
    """End of a case-insensitive contraction at ``e`` ('s 'd 'm 't 'll 've 're), or -1."""
    if e + 1 >= n or data[e] != APOS:
        return -1
    g2 = cls[e + 1]
    if (g2 & (F_S | F_D | F_M | F_T)) != 0:
        return next_char(cls, e + 1)
    j2 = next_char(cls, e + 1)
    if j2 < n:
        g3 = cls[j2]
        if ((g2 & F_L) != 0 and (g3 & F_L) != 0) or ((g3 & F_E) != 0 and (g2 & (F_V | F_R)) != 0):
            return next_char(cls, j2)
    return -1


@njit(cache=True, nogil=True, inline="always")
def _m_gpt4(data, cls, i, n):
    """'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+
    |\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s"""
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
        return run_end(cls, j, n, L_)  # one non-letter, non-digit prefix ("?+": no way back)
    if kind == N_:
        return _digits3(cls, j, n)
    if b == SP and j < n and (cls[j] & KIND) == 0:
        return skip_bytes(data, run_end(cls, j, n, 0), n, CR, LF, LF)
    if kind == 0:
        return skip_bytes(data, run_end(cls, j, n, 0), n, CR, LF, LF)
    return space_end(data, cls, i, j, n, True, True)


@njit(cache=True, nogil=True, inline="always")
def _o200k_letters(cls, s, n):
    """(end of [U]*[W]+ at ``s`` or -1, end of the U run at ``s``); U = Lu Lt Lm Lo M, W = Ll Lm Lo M.

    U* first takes the whole U run; if the next character is in W (so it is Ll), W+ takes the W run
    from there. Otherwise U* gives back characters until one in W can start W+: the match ends just
    after the run's last W character (all characters after it are Lu/Lt, so W+ takes only it).
    """
    p = s
    last_w_end = -1
    while p < n:
        g = cls[p]
        q = p + 1 + (g >> STEP)
        if (g & U_) == 0:
            if (g & W_) != 0:
                return _run_bits(cls, q, n, W_), p
            break
        if (g & W_) != 0:
            last_w_end = q
        p = q
    return last_w_end, p


@njit(cache=True, nogil=True, inline="always")
def _o200k_word(cls, i, j, n, prefix):
    """End of o200k's first two alternatives (without the contraction) at ``i``, or -1.

    Backtracking order: [P]?[U]*[W]+ with the optional prefix P taken (if this character can be
    one), then without it; then [P]?[U]+[W]* likewise. When [U]*[W]+ fails at a start, the character
    after the U run is not in W, so [U]+[W]* there is exactly the U run (if not empty).
    """
    e1, u1 = -1, j
    if prefix:
        e1, u1 = _o200k_letters(cls, j, n)
        if e1 >= 0:
            return e1
    e0, u0 = -1, i
    if (cls[i] & (U_ | W_)) != 0:  # else [U]*[W]+ and [U]+ fail at once without the prefix
        e0, u0 = _o200k_letters(cls, i, n)
        if e0 >= 0:
            return e0
    if u1 > j:
        return u1
    if u0 > i:
        return u0
    return -1


@njit(cache=True, nogil=True, inline="always")
def _m_o200k(data, cls, i, n):
    """[^\\r\\n\\p{L}\\p{N}]?[U]*[W]+C?|[^\\r\\n\\p{L}\\p{N}]?[U]+[W]*C?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*
    |\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+   (C = (?i:'s|'t|'re|'ve|'m|'ll|'d))"""
    b = data[i]
    j = next_char(cls, i)
    kind = cls[i] & KIND
    # can this character be the optional prefix [^\r\n\p{L}\p{N}]?
    prefix = b != CR and b != LF and kind != L_ and kind != N_ and j < n
    e = _o200k_word(cls, i, j, n, prefix)
    if e >= 0:
        e2 = contraction_ci(data, cls, e, n)
        return e2 if e2 >= 0 else e
    if kind == N_:
        return _digits3(cls, j, n)
    if b == SP and j < n and (cls[j] & KIND) == 0:
        return skip_bytes(data, run_end(cls, j, n, 0), n, CR, LF, _SLASH)
    if kind == 0:
        return skip_bytes(data, run_end(cls, j, n, 0), n, CR, LF, _SLASH)
    return space_end(data, cls, i, j, n, True, False)


# The entry points: one per preset, so that a process compiles only the matcher it uses (each
# compiles in about 6 s; the three together in one kernel took 17 s). The hot loop (``_fill_*``)
# is kept apart from the growing of ``out`` so that it never rebinds an array: numba would then
# count references on every iteration (measured: 2x slower).


@njit(cache=True, nogil=True, inline="always")
def _fill_gpt2(data, cls, i, n, out, k):
    """Write match ends into ``out[k:]`` until the text or ``out`` runs out; return (i, k)."""
    while i < n and k < out.shape[0]:
        i = _m_gpt2(data, cls, i, n)
        out[k] = i
        k += 1
    return i, k


@njit(cache=True, nogil=True, inline="always")
def _fill_gpt4(data, cls, i, n, out, k):
    """Write match ends into ``out[k:]`` until the text or ``out`` runs out; return (i, k)."""
    while i < n and k < out.shape[0]:
        i = _m_gpt4(data, cls, i, n)
        out[k] = i
        k += 1
    return i, k


@njit(cache=True, nogil=True, inline="always")
def _fill_o200k(data, cls, i, n, out, k):
    """Write match ends into ``out[k:]`` until the text or ``out`` runs out; return (i, k)."""
    while i < n and k < out.shape[0]:
        i = _m_o200k(data, cls, i, n)
        out[k] = i
        k += 1
    return i, k


@njit(cache=True, nogil=True)
def new_offsets(n):
    out = np.empty(n // 4 + 16, np.int64)  # int64 (chunks,): grown by doubling when full
    out[0] = 0
    return out


@njit(cache=True, nogil=True)
def grow_offsets(out, k):
    grown = np.empty(2 * out.shape[0], np.int64)
    grown[:k] = out[:k]
    return grown


@njit(cache=True, nogil=True, inline="always")
def _scan_gpt2(data, tab, s, e, out, k, bad, stops, limit):
    r"""Chunk ends of the document ``data[s:e]`` under the gpt2 pattern into ``out[k:]`` (``out[k - 1] == s``
    on entry); returns (k, bad). One pass over the characters with no branch per chunk, which the
    matcher (``_m_gpt2``, a branch ladder per chunk and a loop exit per run) could not avoid: on one
    thread 1.5-2x its speed, the same offsets (tested). Whether a chunk starts at a character follows
    from it and its neighbours alone:

    * a letter, digit or other character (``[^\s\p{L}\p{N}]``) starts a chunk when the character
      before is of another kind and is not ``' '`` (a space joins the run after it: `` ?\p{L}+``);
    * a whitespace character starts one after a non-whitespace one, and, inside a run of whitespace,
      when it is the run's last and a non-whitespace character follows (``\s+(?!\S)`` leaves it to
      the next match): decided one character late, when the next one is read;
    * a contraction (``'s 't 'm 'd 'll 've 're``, ASCII, case-sensitive) where a chunk starts is a chunk
      of its own, and the character after it starts the next.

    Characters are decoded here (ASCII through the table directly); an ill-formed byte is a one-byte
    character of class 0, as in ``classify``. ``out`` must hold two more entries than characters.
    Returns (k, bad, stop), ``stop`` as ``_scan``'s (``stops``, ``limit``)."""
    pk = np.int64(-1)  # the kind of the character before (-1: none, or a contraction ended: a chunk starts)
    psp = np.int64(0)  # it is ' '
    prun = np.int64(0)  # it is whitespace after whitespace
    pi = s
    i = s
    k -= 1  # the first character starts a chunk at s, which out[k - 1] already holds
    while i < e:
        b = np.int64(data[i])
        m = np.int64(1)
        if b < 0x80:
            c = np.int64(tab[b])
        else:
            cp, m = _decode(data, i, e)
            if m == 0:
                if bad < 0:
                    bad = i
                c = np.int64(0)
                m = np.int64(1)
            else:
                c = np.int64(tab[cp])
        kind = c & KIND
        ws = np.int64(kind == S_)
        pws = np.int64(pk == S_)
        if prun & (1 - ws):  # rare: a branch, not a store per character
            out[k] = pi  # the one before, the last of a whitespace run, when this one is not whitespace
            k += 1
        start = (ws & (1 - pws)) | ((1 - ws) & np.int64(pk != kind) & (1 - psp))
        out[k] = i
        k += start
        if b == APOS and start == 1 and i + 1 < e:
            b1 = data[i + 1]
            ln = 0
            if b1 == 115 or b1 == 100 or b1 == 109 or b1 == 116:  # s d m t
                ln = 2
            elif i + 2 < e:
                b2 = data[i + 2]
                if (b1 == 108 and b2 == 108) or (b2 == 101 and (b1 == 118 or b1 == 114)):  # ll ve re
                    ln = 3
            if ln > 0:
                i += ln
                pk = np.int64(-1)
                psp = np.int64(0)
                prun = np.int64(0)
                continue
        prun = ws & pws
        pk = kind
        psp = np.int64(b == SP)
        pi = i
        i += m
        if b < 0x80:
            if stops and pi >= limit and start == 1:  # (as in ``_scan``)
                return k, bad, pi
            if kind == L_:  # the ASCII letters after a letter start no chunk: found 8 bytes at a time
                j = letters_from(data, i, e, 3)
                if j > i:
                    pi = j - 1
                    i = j
            elif kind == S_:  # nor do the spaces after whitespace (which leave it whitespace after whitespace)
                j = letters_from(data, i, e, 4)
                if j > i:
                    pi = j - 1
                    i = j
                    prun = np.int64(1)
                    psp = np.int64(1)
    return k, bad, e


@njit(cache=True, nogil=True, inline="always")
def _char_at(data, tab, p, e):
    """(class, length) of the character at ``p`` (< ``e``); an ill-formed byte is (0, 1), as in ``classify``."""
    b = np.int64(data[p])
    if b < 0x80:
        return np.int64(tab[b]), np.int64(1)
    cp, m = _decode(data, p, e)
    if m == 0:
        return np.int64(0), np.int64(1)
    return np.int64(tab[cp]), np.int64(m)


@njit(cache=True, nogil=True, inline="always")
def _contraction_len(data, tab, i, e):
    """Length of the case-insensitive contraction ('s 'd 'm 't 'll 've 're) at ``i`` (an apostrophe), or 0;
    ``contraction_ci`` on the bytes (decoding the one or two characters after the apostrophe)."""
    if i + 1 >= e:
        return np.int64(0)
    c1, m1 = _char_at(data, tab, i + 1, e)
    if (c1 & (F_S | F_D | F_M | F_T)) != 0:
        return 1 + m1
    if i + 1 + m1 < e:
        c2, m2 = _char_at(data, tab, i + 1 + m1, e)
        if ((c1 & F_L) != 0 and (c2 & F_L) != 0) or ((c2 & F_E) != 0 and (c1 & (F_V | F_R)) != 0):
            return 1 + m1 + m2
    return np.int64(0)


# ---- the scanners of cl100k and o200k: state machines over the characters --------------------------
# Character classes (one numbering for both machines; ``scan_classes`` maps bytes and table entries
# to them): other ([^\s\p{L}\p{N}]; the apostrophe is one, tested as a byte), digit, ' ', whitespace
# other than ' ', CR and LF, CR or LF; cl100k's letter; o200k's letter classes: Lu/Lt (only in its
# "upper" class U), Ll (only in "lower" W), Lm/Lo (both), a mark \p{M} (both, but not \p{L}), and '/'
# (which o200k's [\r\n/]* takes after punctuation). C_END is the end of the document.
C_O, C_N, C_SP, C_W, C_NL, C_L, C_U, C_LL, C_B, C_MK, C_SL = range(11)
C_END = 15
_ROW_BITS = 4
_NCC = 1 << _ROW_BITS  # row width of a state table
# flags of a table entry (the next state's row, ``next * _NCC``, sits above them)
_START = 1  # a chunk starts at this character
_EMIT_CAND = 2  # a chunk starts at the pending position (``cand``)
_EMIT_LAST = 4  # a chunk starts at the character before
_SET_CAND = 8  # this character is the pending position from now on
_TRY_C = 16  # a contraction may start here (the byte is tested: an apostrophe)
_C_START = 32  # if one does, a chunk starts at it (cl100k; o200k's contraction ends the word before)
_SHIFT = 6


def _machine(step, classes) -> np.ndarray:
    """The table of the machine whose transitions ``step(state, class) -> (next state, flags)`` gives,
    over the states reachable from state 0 (``init``, which ``step`` also names the first): int32,
    ``table[row + class] = next_row << _SHIFT | flags``, rows ``_NCC`` apart, state 0 first."""
    init = step(None, None)
    index, order, rows = {init: 0}, [init], []
    while len(rows) < len(order):
        state = order[len(rows)]
        row = [0] * _NCC
        for cc in (*classes, C_END):
            nxt, flags = step(state, cc)
            if nxt not in index:
                index[nxt] = len(order)
                order.append(nxt)
            row[cc] = (index[nxt] * _NCC) << _SHIFT | flags
        rows.append(row)
    return np.array(rows, np.int32).ravel()


def cl100k_machine(dmax: int = 3, dollar: bool = True) -> np.ndarray:
    r"""The state machine of cl100k's pattern for ``_scan`` (17 states for ``dmax`` = 3), from these rules:

    * a letter starts a chunk unless the character before is a letter, or can be the one-character
      prefix of ``[^\r\n\p{L}\p{N}]?+\p{L}++``: whitespace other than CR/LF (always the last of its
      run then, which starts a chunk), or an other character that starts a chunk (its run has only it
      then: ``[^\s\p{L}\p{N}]++`` takes the whole run);
    * a digit starts one after a non-digit and after every ``dmax`` digits (``\p{N}{1,3}+``);
    * an other character starts one unless the character before is an other character or ' '
      (`` ?[^\s\p{L}\p{N}]++``: such a space is the last of its whitespace run, which leaves it); a
      contraction (``'(?i:[sdmt]|ll|ve|re)``) at an apostrophe that starts a chunk is a chunk;
    * CR and LF right after an other-run belong to it (``[\r\n]*+``); the first whitespace character
      after them, or after a non-whitespace character, starts a chunk. Inside a whitespace run that a
      non-whitespace character follows (``\s++$`` takes a run that reaches the end), a chunk starts
      after the run's last CR/LF (``\s*[\r\n]``: the pending position) and, when the run's last two
      characters are whitespace other than CR/LF, at its last one (``\s+(?!\S)``).

    A state is (the kind of the character before, -1 for none or after a contraction; it is ' ';
    CR/LF; other whitespace; it and the one before are other whitespace; it is a CR/LF an other-run
    took; it is an other character that starts a chunk; the digits of its chunk; a position is
    pending). ``dollar=False`` (the pattern family of ``_family_kernels``, which has no ``\s++$``):
    the pending position counts at the end of the document too.
    """

    def step(state, cc):
        if state is None:
            return (-1, 0, 0, 0, 0, 0, 0, 0, 0)
        pk, psp, pnl, pnw, prun, pabs, pstart, pdc, pend = state
        if cc == C_END:
            return state, _EMIT_CAND * (pend and not dollar)
        kind = {C_L: L_, C_N: N_, C_O: 0}.get(cc, S_)
        ws, nl = int(kind == S_), int(cc == C_NL)
        dc = 1 if pk != N_ or pdc == dmax else pdc + 1  # this digit's place in its chunk
        ab = nl & int(pk == 0 or pabs == 1)  # taken by the other-run before
        if kind == L_:
            start = int(pk != L_ and not pnw and not (pk == 0 and pstart))
        elif kind == N_:
            start = int(dc == 1)
        elif kind == 0:
            start = int(pk != 0 and not psp)
        else:
            start = int(not ab and (pk != S_ or pabs == 1))
        nw = ws & (1 - nl)
        setc = nw & pnl & (1 - pabs)  # the first character after a CR/LF of this run
        nxt = (kind, int(cc == C_SP), nl, nw, pnw & nw, ab, start if kind == 0 else 0,
               dc if kind == N_ else 0, nw & (pend | setc))
        flags = (start | (pend & (1 - ws)) * _EMIT_CAND | (prun & (1 - ws)) * _EMIT_LAST | setc * _SET_CAND
                 | (start & int(kind == 0)) * (_TRY_C | _C_START))
        return nxt, flags

    return _machine(step, (C_O, C_N, C_SP, C_W, C_NL, C_L))


def o200k_machine() -> np.ndarray:
    r"""The state machine of o200k's pattern for ``_scan`` (20 states). With U = [Lu Lt Lm Lo M] and
    W = [Ll Lm Lo M] (a mark is in both, and is an "other" character [^\s\p{L}\p{N}] too):

    * a word (``[P]?[U]*[W]+C?`` or ``[P]?[U]+[W]*C?``) runs over U characters, then W characters
      once one that is only W (Ll) comes; a character only U (Lu/Lt) after the W part starts the next
      word. When the U part ends without an Ll after it, ``[U]*`` gives back up to its last character
      in W (Lm, Lo, a mark), which ``[W]+`` takes: a chunk starts after it if only-U characters follow
      (the pending position, decided when the word ends). A contraction ``C`` right after a word is
      its end; the character after it starts a chunk;
    * the prefix ``P`` ([^\r\n\p{L}\p{N}]): a character that starts a chunk and is not CR, LF, a letter
      or a digit joins the word that follows it (a mark starts a word on its own: it is in U and W);
    * ``\p{N}{1,3}``: a digit starts a chunk after a non-digit and after every three digits;
    * `` ?[^\s\p{L}\p{N}]+[\r\n/]*``: an other character that starts a chunk and no word follows runs
      with the other characters after it (marks included), then CR, LF and '/'; a ' ' that ends its
      whitespace run joins such a run;
    * whitespace (``\s*[\r\n]+|\s+(?!\S)|\s+``): a run starts a chunk; a chunk starts after its last
      CR/LF (the pending position, also at the end of the document: there is no ``\s++$``) and, when a
      non-whitespace character follows and the last two are not CR/LF, at its last one.

    States: ``init`` (the next character starts a chunk), ``wU`` (in a word's U part: the character
    before is in W, a position is pending), ``wW``, ``dig`` (digits in the chunk), ``o1`` (an other
    character that starts a chunk), ``orun``, ``abs`` ([\r\n/] after an other-run), ``ws`` (the class of
    the character before, the last two are other whitespace, a position is pending).
    """
    letters = (C_U, C_LL, C_B, C_MK)

    def begin(cc):  # the state after a character that starts a chunk
        if cc in letters:
            return join(cc)
        if cc == C_N:
            return ("dig", 1)
        if cc in (C_O, C_SL):
            return ("o1",)
        return ("ws", cc, 0, 0)

    def join(cc):  # a letter-like character that goes on a word (or follows its prefix)
        return ("wW",) if cc == C_LL else ("wU", int(cc != C_U), 0)

    def step(state, cc):
        if state is None:
            return ("init",)
        mode = state[0]
        if cc == C_END:
            pend = state[2] if mode == "wU" else state[3] if mode == "ws" else 0
            return state, _EMIT_CAND * pend
        if mode == "wU":
            inw, pend = state[1], state[2]
            if cc == C_U:  # after an Lm/Lo/mark, this is the pending position
                return ("wU", 0, pend | inw), _SET_CAND * inw
            if cc in (C_B, C_MK):
                return ("wU", 1, 0), 0
            if cc == C_LL:
                return ("wW",), 0
            return begin(cc), _START | _EMIT_CAND * pend | _TRY_C * (cc == C_O)
        if mode == "wW":
            if cc in (C_LL, C_B, C_MK):
                return ("wW",), 0
            if cc == C_U:
                return ("wU", 0, 0), _START
            return begin(cc), _START | _TRY_C * (cc == C_O)
        if mode == "dig":
            if cc == C_N:
                return ("dig", 1 if state[1] == 3 else state[1] + 1), _START * (state[1] == 3)
            return begin(cc), _START
        if mode == "o1":
            if cc in letters:
                return join(cc), 0
            if cc in (C_O, C_SL):
                return ("orun",), 0
            if cc == C_NL:
                return ("abs",), 0
            return begin(cc), _START
        if mode == "orun":
            if cc in (C_O, C_SL, C_MK):
                return ("orun",), 0
            if cc == C_NL:
                return ("abs",), 0
            return begin(cc), _START
        if mode == "abs":
            if cc in (C_NL, C_SL):
                return ("abs",), 0
            return begin(cc), _START
        if mode == "ws":
            t, prun, pend = state[1:]
            if cc in (C_SP, C_W, C_NL):
                nw = int(cc != C_NL)
                setc = nw & int(t == C_NL)
                return ("ws", cc, int(t != C_NL) & nw, nw & (pend | setc)), _SET_CAND * setc
            flags = _EMIT_CAND * pend | _EMIT_LAST * prun
            if t == C_NL or cc == C_N or (cc in (C_O, C_SL) and t == C_W):
                return begin(cc), flags | _START
            return join(cc) if cc in letters else ("orun",), flags  # the prefix; ' ' + punctuation
        return begin(cc), _START  # init

    return _machine(step, (C_O, C_N, C_SP, C_W, C_NL, C_U, C_LL, C_B, C_MK, C_SL))


_GPT4_TABLE = cl100k_machine()
_O200K_TABLE = o200k_machine()


@njit(cache=True, nogil=True)
def scan_classes(tab, o200k):
    """The scanner's class (C_*) of each ASCII byte, then of each table entry's low bits
    (``128 + (entry & 31)``: kind, U_, W_), for the cl100k machine or (``o200k``) o200k's."""
    acc = np.empty(128 + 32, np.uint8)
    for c in range(32):
        kind = c & KIND
        if kind == L_:
            if not o200k:
                acc[128 + c] = C_L
            elif (c & W_) == 0:
                acc[128 + c] = C_U
            elif (c & U_) == 0:
                acc[128 + c] = C_LL
            else:
                acc[128 + c] = C_B
        elif kind == N_:
            acc[128 + c] = C_N
        elif kind == S_:
            acc[128 + c] = C_W
        elif o200k and (c & (U_ | W_)) != 0:
            acc[128 + c] = C_MK
        else:
            acc[128 + c] = C_O
    for b in range(128):
        acc[b] = acc[128 + (tab[b] & 31)]
    acc[SP] = C_SP
    acc[CR] = C_NL
    acc[LF] = C_NL
    if o200k:
        acc[_SLASH] = C_SL
    return acc


@njit(cache=True, nogil=True, inline="always")
def _scan(data, tab, acc, table, skip, s, e, out, k, bad, stops, limit):
    r"""Chunk ends of the document ``data[s:e]`` under the pattern of the machine ``table``
    (``cl100k_machine``, ``o200k_machine``) into ``out[k:]`` (``out[k - 1] == s`` on entry); returns
    (k, bad). One pass over the characters, as ``_scan_gpt2``, but the flags that say where chunks
    start come from one table load per character (state and class) instead of being worked out per
    character (tried for cl100k: no faster than the matcher). Decisions that need characters not
    read yet (the last CR/LF of a whitespace run, its last character, o200k's give-back inside a word)
    are kept pending and written when the run ends. The twins of the matchers ``_m_gpt4`` and
    ``_m_o200k`` (tested equal). ``acc``: ``scan_classes``. A contraction (where the table allows
    one) is read here: the state after it is the first (the character after it starts a chunk).

    Characters are decoded here; an ill-formed byte is a one-byte other character, as in
    ``classify``. ``out`` must hold two more entries than characters. ``skip``: ``skip_rows``; inside a word
    the letters after the first, and inside a run of whitespace its spaces, are found 8 bytes at a time,
    not stepped through the table (the loop's time is the chain of table loads, one per character: en
    1.4-1.8x, code 1.3-1.5x). Returns (k, bad, stop): ``stop`` is ``e``, or, with ``stops`` (a constant:
    the test is compiled out without it; cl100k's, o200k's and the family's machines), the first ASCII
    character at or past ``limit`` that starts a chunk (written; the caller goes on from it: a chunk
    start needs nothing from before it, and no decision is pending there)."""
    st = np.int64(0)  # the state's row in ``table``
    cand = np.int64(0)  # the pending position
    pi = s
    i = s
    k -= 1  # the first character starts a chunk at s, which out[k - 1] already holds
    while i < e:
        b = np.int64(data[i])
        m = np.int64(1)
        if b < 0x80:
            cc = np.int64(acc[b])
        else:
            cp, m = _decode(data, i, e)
            if m == 0:
                if bad < 0:
                    bad = i
                cc = np.int64(C_O)
                m = np.int64(1)
            else:
                cc = np.int64(acc[128 + (tab[cp] & 31)])
        x = np.int64(table[st + cc])
        if (x & (_EMIT_CAND | _EMIT_LAST)) != 0:  # rare (the end of a whitespace run): a branch, not two stores per character
            out[k] = cand
            k += (x >> 1) & 1  # _EMIT_CAND
            out[k] = pi
            k += (x >> 2) & 1  # _EMIT_LAST
        out[k] = i
        if b == APOS and (x & _TRY_C) != 0:
            ln = _contraction_len(data, tab, i, e)
            if ln > 0:
                k += (x >> 5) & 1  # _C_START
                i += ln
                st = np.int64(0)
                continue
        k += x & 1  # _START
        if (x & _SET_CAND) != 0:
            cand = i
        st = x >> _SHIFT
        pi = i
        i += m
        # ASCII letters and spaces that leave this state as it is with no flag are skipped 8 at a time
        # (tried only after an ASCII character: after a Han character it costs more than it finds)
        if b < 0x80:
            # (the cl100k family: back to the caller at a chunk start past ``limit``; ASCII only,
            # where the caller's windows can go on, so mostly non-ASCII text pays no test)
            if stops and pi >= limit and (x & 1) != 0:
                return k, bad, pi
            sk = skip[st >> _ROW_BITS]
            if sk != 0:
                j = letters_from(data, i, e, sk)
                if j > i:
                    pi = j - 1
                    i = j
    out[k] = cand
    k += (table[st + C_END] >> 1) & 1
    return k, bad, e


@njit(cache=True, nogil=True)
def skip_rows(table, acc):
    """Per state of the machine ``table`` (its row index), the ASCII letters and the space
    (``_wide.ascii_letters``' kinds: 1 a-z, 2 A-Z, 4 ' ') that keep the machine in that state and raise no
    flag (a word's letters; the spaces inside a run of whitespace, code's indentation): ``_scan`` skips them."""
    rows = table.shape[0] // _NCC
    out = np.zeros(rows, np.uint8)
    for r in range(rows):
        for bit, first, count in ((1, 0x61, 26), (2, 0x41, 26), (4, 0x20, 1)):
            cc = np.int64(acc[first])
            same = True
            for c in range(first, first + count):
                same = same and np.int64(acc[c]) == cc
            x = np.int64(table[r * _NCC + cc])
            if same and (x >> _SHIFT) == r * _NCC and (x & ((1 << _SHIFT) - 1)) == 0:
                out[r] |= bit
    return out


@njit(cache=True, nogil=True, inline="always")
def scan_documents(data, tab, docs, table, o200k, fast, buf):
    """(offsets, bad) as ``split_gpt2``, through ``_scan`` with the state table ``table`` (``o200k``:
    its classes are o200k's, see ``scan_classes``). ``fast`` > 0 (a cl100k-family table or o200k's, chunks
    of up to ``fast`` digits): stretches of ASCII go through ``_ascii_window.cl100k_window`` instead, 64
    bytes at a time, the machine taking over at each stretch's end and handing back at the first chunk
    start past it (cl100k: en 1.8x, code 1.9-2.0x on the splitter; zh 0.9-1.0x, other scripts
    1.0-1.16x). ``buf``: where to write the offsets (see ``offsets_buffer``)."""
    acc = scan_classes(tab, o200k)
    skip = skip_rows(table, acc)
    out = offsets_buffer(data, buf)
    out[0] = 0
    k = 1
    bad = np.int64(-1)
    dsize = data.shape[0]
    dp, op, osize = _window_io(data, out)
    for d in range(docs.shape[0] - 1):
        e = docs[d + 1]
        p = docs[d]
        fails = 0
        while p < e:  # out[k - 1] == p, a chunk start
            limit = e  # the machine to the end of the document
            if fast > 0 and p + 64 <= dsize:
                p0 = p
                wl = np.int64(0)
                if (load_u64(data, p) & np.uint64(0x8080)) == 0:
                    p, k, wl = cl100k_window(dp, p, e, op, osize, k, fast, o200k)
                    if wl == 64 and p > p0:
                        fails = 0
                        continue
                if _at_punct3(data, p0, wl, p, e, dsize):
                    p1 = p
                    p, k, wl = cl100k_window_punct(dp, p, e, op, osize, k, fast, o200k)
                    if wl == 64 and p > p1:
                        fails = 0
                        continue
                    p0 = p1
                limit, fails = _handback(p0, wl, fails)
            k, bad, p = _scan(data, tab, acc, table, skip, p, e, out, k, bad, fast > 0, limit)
        if e > docs[d]:
            out[k] = e
            k += 1
    return out[:k], bad  # a view: the callers copy what they keep (presets.split_offsets)


@njit(cache=True, nogil=True, inline="always")
def _window_io(data, out):
    """What the ASCII windows read and write through: ``data`` and ``out`` as ``raw`` pointers, and ``out``'s
    size. An array handed to them cost two atomic reference-count updates a window (numba's, which its
    pruning pass left in the splitters' loops), half the splitter's time. ``out`` stays the caller's array,
    used to the end (a block only a pointer refers to would be freed)."""
    return raw(data), raw(out), out.shape[0]


@njit(cache=True, nogil=True, inline="always")
def offsets_buffer(data, buf):
    """The split kernels' output: ``buf`` (int64, C-contiguous) where it has a slot per byte of ``data`` and
    two more, else a new array. A caller that splits again and again (the encoder) passes one buffer
    each time: a new one of 8 bytes per input byte came back from the OS on every call (``malloc``
    hands blocks that large back when they are freed), and faulting its pages in cost more than the
    split of English itself (2.7 MB: ~1,100 page faults, ~1.5 ms of ~4)."""
    if buf.shape[0] >= data.shape[0] + 2:
        return buf
    return np.empty(data.shape[0] + 2, np.int64)


@njit(cache=True, nogil=True)
def split_gpt2(data, tab, docs, buf):
    """(offsets, bad): chunk boundaries of the documents in ``data`` under the gpt2 pattern.

    ``data``: uint8 UTF-8, shape (n,); ``docs``: int64 document boundaries, non-decreasing, from 0
    to n (``[0, n]`` for one document). Each document is split on its own: ``offsets`` is int64
    ``[0, e1, ..., n]``, strictly increasing, and holds every document boundary. ``bad`` is the
    offset of the first ill-formed UTF-8 byte, or -1 (offsets are then meaningless but in bounds).
    Temporary memory: 8 bytes per input byte (``_scan_gpt2``; ``_scan`` for split_gpt4 and
    split_o200k alike). The matchers' twins (``split_*_matcher``) take 2 bytes per input byte (the
    class array) and 8 bytes per chunk. ``buf``: int64, where the offsets go if it has ``n + 2`` slots
    (the result is then a view of it), else an empty array (a new one is made).
    """
    return _gpt2_documents(data, tab, docs, True, buf)


@njit(cache=True, nogil=True)
def split_gpt2_machine(data, tab, docs):
    """``split_gpt2`` with every character through ``_scan_gpt2`` (its twin in the tests)."""
    return _gpt2_documents(data, tab, docs, False, np.empty(0, np.int64))


@njit(cache=True, nogil=True, inline="always")
def _gpt2_documents(data, tab, docs, fast, buf):
    """``split_gpt2``: ``_scan_gpt2``, and with ``fast`` stretches of ASCII through
    ``_ascii_window.gpt2_window`` (as ``scan_documents``)."""
    out = offsets_buffer(data, buf)
    out[0] = 0
    k = 1
    bad = np.int64(-1)
    dsize = data.shape[0]
    dp, op, osize = _window_io(data, out)
    for d in range(docs.shape[0] - 1):
        e = docs[d + 1]
        p = docs[d]
        fails = 0
        while p < e:  # out[k - 1] == p, a chunk start
            limit = e
            if fast and p + 64 <= dsize:
                p0 = p
                wl = np.int64(0)
                if (load_u64(data, p) & np.uint64(0x8080)) == 0:
                    p, k, wl = gpt2_window(dp, p, e, op, osize, k)
                    if wl == 64 and p > p0:
                        fails = 0
                        continue
                if _at_punct3(data, p0, wl, p, e, dsize):
                    p1 = p
                    p, k, wl = gpt2_window_punct(dp, p, e, op, osize, k)
                    if wl == 64 and p > p1:
                        fails = 0
                        continue
                    p0 = p1
                limit, fails = _handback(p0, wl, fails)
            k, bad, p = _scan_gpt2(data, tab, p, e, out, k, bad, fast, limit)
        if e > docs[d]:
            out[k] = e
            k += 1
    return out[:k], bad  # a view (see scan_documents)


@njit(cache=True, nogil=True, inline="always")
def _at_punct3(data, p0, wl, p, e, dsize):
    """Whether the window from ``p0``, which read ``wl`` bytes (0: not tried, ``p`` opens with a non-ASCII
    byte) and settled the chunks up to ``p``, stopped at a byte ``E2`` inside the document (a character
    U+2000-U+2FFF: dashes, curly quotes), with 64 bytes left from ``p``: then a window that takes the
    characters U+2010-U+2027 in (``*_window_punct``) goes on from ``p`` before the machine does. English
    prose has one every few hundred bytes, each of which stopped the windows: the machine then took the
    text up to a chunk start past it (~140 ns a character, a fifth of the split of an English sample).
    Asked only where a window stopped short; the second window is called, not inlined: a second copy
    of the window inlined in this loop made its plain windows ~25% slower."""
    return p0 + wl < e and data[p0 + wl] == 0xE2 and p + 64 <= dsize


@njit(cache=True, nogil=True, inline="always")
def _handback(p0, wl, fails):
    """Where the machine hands back to the windows after one that read ``wl`` bytes from ``p0`` did not
    settle them all (a non-ASCII character, a long run, the document's end): at the first chunk
    start past the window's end, or, where windows keep stopping within their first 16 bytes
    (``fails``: since the last window that read 16 bytes or more; text that is mostly not ASCII), past
    longer stretches each time, up to 1 KB. Returns (limit, fails). (Before, only a whole window of 64
    bytes ended the growth, and English dialogue, a curly quote every ~130 bytes, grew stretches to
    1 KB: the machine split 11.9% of an English sample's bytes, 6.5% now; the splitter alone 1.09-1.15x
    on English.)"""
    if wl >= 16:
        return p0 + wl + 1, 1
    return p0 + max(wl + 1, 64 << fails), min(fails + 1, 4)


@njit(cache=True, nogil=True)
def split_gpt2_matcher(data, tab, docs):
    """``split_gpt2`` through the matcher ``_m_gpt2`` (its twin in the tests)."""
    cls, bad = classify(data, tab, docs)
    out = new_offsets(data.shape[0])
    k = 1
    for d in range(docs.shape[0] - 1):
        i, k = _fill_gpt2(data, cls, docs[d], docs[d + 1], out, k)
        while i < docs[d + 1]:
            out = grow_offsets(out, k)
            i, k = _fill_gpt2(data, cls, i, docs[d + 1], out, k)
    return out[:k].copy(), bad


@njit(cache=True, nogil=True)
def split_gpt4(data, tab, docs, buf):
    """(offsets, bad) as ``split_gpt2``, under the gpt4 (cl100k) pattern (``_scan`` with ``cl100k_machine``,
    ASCII through ``_ascii_window``; ``buf`` as ``split_gpt2``'s)."""
    return scan_documents(data, tab, docs, _GPT4_TABLE, False, 3, buf)


@njit(cache=True, nogil=True)
def split_gpt4_machine(data, tab, docs):
    """``split_gpt4`` with every character through the machine (its twin in the tests)."""
    return scan_documents(data, tab, docs, _GPT4_TABLE, False, 0, np.empty(0, np.int64))


@njit(cache=True, nogil=True)
def split_gpt4_matcher(data, tab, docs):
    """``split_gpt4`` through the matcher ``_m_gpt4`` (its twin in the tests)."""
    cls, bad = classify(data, tab, docs)
    out = new_offsets(data.shape[0])
    k = 1
    for d in range(docs.shape[0] - 1):
        i, k = _fill_gpt4(data, cls, docs[d], docs[d + 1], out, k)
        while i < docs[d + 1]:
            out = grow_offsets(out, k)
            i, k = _fill_gpt4(data, cls, i, docs[d + 1], out, k)
    return out[:k].copy(), bad


@njit(cache=True, nogil=True)
def split_o200k(data, tab, docs, buf):
    """(offsets, bad) as ``split_gpt2``, under the o200k pattern (``_scan`` with ``o200k_machine``, ASCII
    through ``_ascii_window``; ``buf`` as ``split_gpt2``'s)."""
    return scan_documents(data, tab, docs, _O200K_TABLE, True, 3, buf)


@njit(cache=True, nogil=True)
def split_o200k_machine(data, tab, docs):
    """``split_o200k`` with every character through the machine (its twin in the tests)."""
    return scan_documents(data, tab, docs, _O200K_TABLE, True, 0, np.empty(0, np.int64))


@njit(cache=True, nogil=True)
def split_o200k_matcher(data, tab, docs):
    """``split_o200k`` through the matcher ``_m_o200k`` (its twin in the tests)."""
    cls, bad = classify(data, tab, docs)
    out = new_offsets(data.shape[0])
    k = 1
    for d in range(docs.shape[0] - 1):
        i, k = _fill_o200k(data, cls, docs[d], docs[d + 1], out, k)
        while i < docs[d + 1]:
            out = grow_offsets(out, k)
            i, k = _fill_o200k(data, cls, i, docs[d + 1], out, k)
    return out[:k].copy(), bad


@njit(cache=True, nogil=True)
def char_offsets(data, offsets):
    """Code point offsets of the byte ``offsets`` (int64, increasing, on character starts) in ``data``."""
    res = np.empty(offsets.shape[0], np.int64)
    chars = 0
    p = 0
    for k in range(offsets.shape[0]):
        end = offsets[k]
        while p < end:
            if (data[p] & 0xC0) != 0x80:  # count lead bytes only
                chars += 1
            p += 1
        res[k] = chars
    return res
