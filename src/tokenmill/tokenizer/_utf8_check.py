"""The UTF-8 check of bytes read from a file (the token store's readers keep a well-formed text file as the
bytes it is, not decoded to a str and encoded back). ``encoding.well_formed_utf8`` is its boundary and imports
this module on first use, so importing tokenmill loads no numba; the kernel reads only ``data[0:data.size]``."""

from __future__ import annotations

from .._jit import njit
from ._wide import load_u64

_HIGH = 0x8080808080808080  # the top bit of each of 8 bytes: set in every byte of a multi-byte sequence


@njit(cache=True, nogil=True)
def first_invalid(data):
    """The offset of the first byte of the first ill-formed sequence of ``data`` (a 1-D uint8 array), or -1
    when all of it is well-formed UTF-8: exactly what Python's strict ``bytes.decode("utf-8")`` accepts
    (no overlong forms, no surrogates U+D800-U+DFFF, nothing above U+10FFFF, no truncated sequence), the
    offset its ``UnicodeDecodeError.start`` gives. ASCII is skipped 16 bytes a step, without holding the GIL."""
    n = data.size
    high = (1 << 64) - 1 & _HIGH
    i = 0
    while i < n:
        c = data[i]
        if c < 0x80:  # ASCII: 16 bytes a step while they all are
            if i + 16 <= n and ((load_u64(data, i) | load_u64(data, i + 8)) & high) == 0:
                i += 16
            else:
                i += 1
            continue
        if 0xC2 <= c <= 0xDF:  # two bytes (Latin, Greek, Cyrillic, Hebrew, Arabic...)
            if i + 1 < n and (data[i + 1] & 0xC0) == 0x80:
                i += 2
                continue
            return i
        if 0xE1 <= c <= 0xEF and c != 0xED:  # three bytes with any continuation (CJK, most of the BMP)
            if i + 2 < n and (data[i + 1] & 0xC0) == 0x80 and (data[i + 2] & 0xC0) == 0x80:
                i += 3
                continue
            return i
        lo = 0x80
        hi = 0xBF
        if c < 0xC2:  # a continuation byte, or the lead of an overlong two-byte form
            return i
        if c < 0xE0:
            need = 1
        elif c < 0xF0:
            need = 2
            if c == 0xE0:
                lo = 0xA0  # below: overlong
            elif c == 0xED:
                hi = 0x9F  # above: a surrogate
        elif c < 0xF5:
            need = 3
            if c == 0xF0:
                lo = 0x90  # below: overlong
            elif c == 0xF4:
                hi = 0x8F  # above: past U+10FFFF
        else:
            return i
        if i + 1 >= n:
            return i
        b = data[i + 1]
        if b < lo or b > hi:
            return i
        for k in range(2, need + 1):
            if i + k >= n or (data[i + k] & 0xC0) != 0x80:
                return i
        i += need + 1
    return -1
