"""Compiled pre-tokenization kernels: the split regexes of gpt2, gpt4 (cl100k) and o200k on UTF-8 bytes.

Each ``_m_<preset>(data, tab, i, n)`` returns the end (byte offset) of the chunk that
``regex.findall(pattern, text)`` matches at byte offset ``i``. It tries the pattern's alternatives
in order, as the backtracking engine does, with every backtrack worked out once by hand (the
comments next to each alternative say how). The presets always match at least one character at
every position, so consecutive matches cover the text and the chunk boundaries are simply the
successive match ends.

``tab`` is a uint16 array indexed by code point (0x110000 entries) whose bits are the character
classes the patterns use, derived from the ``regex`` module itself (see ``pretokenize.py``).
Characters are decoded from UTF-8 on the fly; ASCII bytes can never occur inside a multi-byte
sequence, so ASCII characters are compared as raw bytes. Only plain Python entry points in
``pretokenize.py`` call these kernels.
"""

from __future__ import annotations

import numpy as np
from numba import njit

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

GPT2, GPT4, O200K = 0, 1, 2  # preset ids of split_offsets

_CR, _LF, _SP, _APOS, _SLASH = 13, 10, 32, 39, 47


@njit(cache=True, nogil=True, inline="always")
def _dec(data, i, n):
    """(code point, next offset) of the character starting at byte ``i``; never reads past ``n``.

    Valid UTF-8 is assumed; on invalid input the result is some code point <= 0x10FFFF and an
    offset in (i, n], so callers stay in bounds and always advance.
    """
    b = np.int64(data[i])
    if b < 0x80:
        return b, i + 1
    if b < 0xC0:  # stray continuation byte (invalid)
        return b, i + 1
    if b < 0xE0:
        m = 2
        cp = b & 0x1F
    elif b < 0xF0:
        m = 3
        cp = b & 0x0F
    else:
        m = 4
        cp = b & 0x07
    if i + m > n:  # truncated sequence (invalid)
        return b, i + 1
    for k in range(1, m):
        cp = (cp << 6) | (np.int64(data[i + k]) & 0x3F)
    if cp > 0x10FFFF:
        cp = 0xFFFD
    return cp, i + m


@njit(cache=True, nogil=True, inline="always")
def _run(data, tab, p, n, kind):
    """End of the run of characters of class ``kind`` (L_, N_, S_ or 0) starting at ``p``."""
    while p < n:
        c, q = _dec(data, p, n)
        if (tab[c] & KIND) != kind:
            break
        p = q
    return p


@njit(cache=True, nogil=True, inline="always")
def _run_bits(data, tab, p, n, bits):
    """End of the run of characters having any of ``bits`` starting at ``p``."""
    while p < n:
        c, q = _dec(data, p, n)
        if (tab[c] & bits) == 0:
            break
        p = q
    return p


@njit(cache=True, nogil=True, inline="always")
def _skip_bytes(data, p, n, a, b, c):
    """End of the run of the ASCII bytes a, b or c starting at ``p`` (e.g. ``[\\r\\n]*+``)."""
    while p < n and (data[p] == a or data[p] == b or data[p] == c):
        p += 1
    return p


@njit(cache=True, nogil=True, inline="always")
def _space_end(data, tab, i, j, n, newlines, dollar):
    """End of the whitespace chunk starting at ``i`` (its first character ends at ``j``).

    Tries, in order: ``\\s++$`` (if ``dollar``: the whole run when it reaches the end of the text),
    ``\\s*[\\r\\n]`` / ``\\s*[\\r\\n]+`` (if ``newlines``: up to and including the run's last CR or LF,
    the backtracking of ``\\s*`` stopping at the last one), ``\\s+(?!\\S)`` (the run minus its last
    character when followed by non-space, or all of it at the end), and ``\\s`` / ``\\s+`` (one
    character: the run has only one then).
    """
    p = j
    last = i  # start of the run's last character
    nl_end = -1  # end of the run's last CR/LF
    if data[i] == _CR or data[i] == _LF:
        nl_end = j
    while p < n:
        c, q = _dec(data, p, n)
        if (tab[c] & S_) == 0:
            break
        if c == _CR or c == _LF:
            nl_end = q
        last = p
        p = q
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
def _m_gpt2(data, tab, i, n):
    """'(?:[sdmt]|ll|ve|re)| ?\\p{L}++| ?\\p{N}++| ?[^\\s\\p{L}\\p{N}]++|\\s++$|\\s+(?!\\S)|\\s"""
    c, j = _dec(data, i, n)
    if c == _APOS and j < n:  # case-sensitive contractions: ASCII bytes only
        b = data[j]
        if b == 115 or b == 100 or b == 109 or b == 116:  # s d m t
            return j + 1
        if j + 1 < n:
            b2 = data[j + 1]
            if (b == 108 and b2 == 108) or (b2 == 101 and (b == 118 or b == 114)):  # ll ve re
                return j + 2
    if c == _SP and j < n:  # " ?X++": the space joins a following run of L, N or other
        c2, j2 = _dec(data, j, n)
        kind2 = tab[c2] & KIND
        if kind2 != S_:
            return _run(data, tab, j2, n, kind2)
    kind = tab[c] & KIND
    if kind != S_:
        return _run(data, tab, j, n, kind)
    return _space_end(data, tab, i, j, n, False, True)


@njit(cache=True, nogil=True, inline="always")
def _contraction_ci(data, tab, e, n):
    """End of a case-insensitive contraction at ``e`` ('s 'd 'm 't 'll 've 're), or -1."""
    if e >= n or data[e] != _APOS or e + 1 >= n:
        return -1
    c2, j2 = _dec(data, e + 1, n)
    g2 = tab[c2]
    if (g2 & (F_S | F_D | F_M | F_T)) != 0:
        return j2
    if j2 < n:
        c3, j3 = _dec(data, j2, n)
        g3 = tab[c3]
        if (g2 & F_L) != 0 and (g3 & F_L) != 0:
            return j3
        if (g3 & F_E) != 0 and (g2 & (F_V | F_R)) != 0:
            return j3
    return -1


@njit(cache=True, nogil=True, inline="always")
def _m_gpt4(data, tab, i, n):
    """'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+
    |\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s"""
    c, j = _dec(data, i, n)
    if c == _APOS:
        e = _contraction_ci(data, tab, i, n)
        if e >= 0:
            return e
    f = tab[c]
    kind = f & KIND
    if kind == L_:
        return _run(data, tab, j, n, L_)
    if c != _CR and c != _LF and kind != N_ and j < n:  # one non-letter, non-digit prefix
        c2, j2 = _dec(data, j, n)
        if (tab[c2] & KIND) == L_:
            return _run(data, tab, j2, n, L_)
    if kind == N_:  # \p{N}{1,3}+
        p = j
        for _ in range(2):
            if p >= n:
                break
            c2, q = _dec(data, p, n)
            if (tab[c2] & KIND) != N_:
                break
            p = q
        return p
    if c == _SP and j < n:
        c2, j2 = _dec(data, j, n)
        if (tab[c2] & KIND) == 0:
            return _skip_bytes(data, _run(data, tab, j2, n, 0), n, _CR, _LF, _LF)
    if kind == 0:
        return _skip_bytes(data, _run(data, tab, j, n, 0), n, _CR, _LF, _LF)
    return _space_end(data, tab, i, j, n, True, True)


@njit(cache=True, nogil=True, inline="always")
def _o200k_letters1(data, tab, s, n):
    """End of [U]*[W]+ at ``s`` (U = Lu Lt Lm Lo M, W = Ll Lm Lo M), or -1.

    U* first takes the whole U run; if the next character is in W (so it is Ll), W+ takes the W run
    from there. Otherwise U* gives back characters until one in W can start W+: the match ends just
    after the run's last W character (all characters after it are Lu/Lt, so W+ takes only it).
    """
    p = s
    last_w_end = -1
    while p < n:
        c, q = _dec(data, p, n)
        g = tab[c]
        if (g & U_) == 0:
            if (g & W_) != 0:
                return _run_bits(data, tab, q, n, W_)
            break
        if (g & W_) != 0:
            last_w_end = q
        p = q
    return last_w_end


@njit(cache=True, nogil=True, inline="always")
def _o200k_letters2(data, tab, s, n):
    """End of [U]+[W]* at ``s``, or -1 (greedy; W* may be empty, so no backtracking is needed)."""
    p = _run_bits(data, tab, s, n, U_)
    if p == s:
        return -1
    return _run_bits(data, tab, p, n, W_)


@njit(cache=True, nogil=True, inline="always")
def _m_o200k(data, tab, i, n):
    """[^\\r\\n\\p{L}\\p{N}]?[U]*[W]+C?|[^\\r\\n\\p{L}\\p{N}]?[U]+[W]*C?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*
    |\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+   (C = (?i:'s|'t|'re|'ve|'m|'ll|'d))"""
    c, j = _dec(data, i, n)
    f = tab[c]
    kind = f & KIND
    # The optional prefix is greedy: try with it (if this character can be one), then without.
    prefix = c != _CR and c != _LF and kind != L_ and kind != N_
    e = -1
    if prefix and j < n:
        e = _o200k_letters1(data, tab, j, n)
    if e < 0:
        e = _o200k_letters1(data, tab, i, n)
    if e < 0 and prefix and j < n:
        e = _o200k_letters2(data, tab, j, n)
    if e < 0:
        e = _o200k_letters2(data, tab, i, n)
    if e >= 0:
        e2 = _contraction_ci(data, tab, e, n)
        return e2 if e2 >= 0 else e
    if kind == N_:  # \p{N}{1,3}
        p = j
        for _ in range(2):
            if p >= n:
                break
            c2, q = _dec(data, p, n)
            if (tab[c2] & KIND) != N_:
                break
            p = q
        return p
    if c == _SP and j < n:
        c2, j2 = _dec(data, j, n)
        if (tab[c2] & KIND) == 0:
            return _skip_bytes(data, _run(data, tab, j2, n, 0), n, _CR, _LF, _SLASH)
    if kind == 0:
        return _skip_bytes(data, _run(data, tab, j, n, 0), n, _CR, _LF, _SLASH)
    return _space_end(data, tab, i, j, n, True, False)


@njit(cache=True, nogil=True, inline="always")
def _fill(data, tab, preset, i, n, out, k):
    """Write match ends into ``out[k:]`` until the text or ``out`` runs out; return (i, k).

    Kept apart from the growing of ``out`` so that the hot loop never rebinds an array (numba would
    then count references on every iteration: measured 2x slower).
    """
    cap = out.shape[0]
    while i < n and k < cap:
        if preset == GPT2:
            i = _m_gpt2(data, tab, i, n)
        elif preset == GPT4:
            i = _m_gpt4(data, tab, i, n)
        else:
            i = _m_o200k(data, tab, i, n)
        out[k] = i
        k += 1
    return i, k


@njit(cache=True, nogil=True)
def split_offsets(data, tab, preset):
    """Chunk boundaries of ``data`` (uint8 UTF-8) for ``preset`` (GPT2, GPT4 or O200K).

    Returns int64 ``[0, e1, ..., len(data)]``, strictly increasing.
    """
    n = data.shape[0]
    out = np.empty(n // 4 + 16, np.int64)
    out[0] = 0
    i, k = _fill(data, tab, preset, 0, n, out, 1)
    while i < n:  # out is full: double it (amortized O(1) per chunk)
        grown = np.empty(2 * out.shape[0], np.int64)
        grown[:k] = out[:k]
        out = grown
        i, k = _fill(data, tab, preset, i, n, out, k)
    return out[:k].copy()


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
