"""Character classes as Unicode 16.0 defines them, whatever ``regex`` release is installed.

tokenmill evaluates ``\\p{L}``, ``\\p{N}``, ``\\s``... with the ``regex`` module: the compiled kernels' class
tables are built from it and the pure-Python paths run it. tiktoken 0.14 and HF tokenizers 0.23 split by
Unicode 16, while ``regex`` 2025.11 and later follow Unicode 17 and newer (17,480 more code points
assigned in 2026.12: U+0558, CJK Extension J...), which made a text holding one of them split, and encode,
differently from theirs. A code point Unicode 16 leaves unassigned (``_unicode16.ASSIGNED``) is read here as
an unassigned one (a noncharacter, unassigned in every version), and one a later version moved to another
category (U+0295) as a stand-in of its Unicode 16 category, wherever tokenmill splits text: its row
of a class table is that one's (:func:`as_unicode16_table`), and the regex engine matches a copy of the
text with it in its place (:func:`as_unicode16`: one code point for one, so every match's span is the
original text's). With a ``regex`` of Unicode 16 there is nothing to change.
"""

from __future__ import annotations

import functools

import numpy as np

from ._unicode16 import ASSIGNED

STANDIN = 0xFDD0  # a noncharacter: unassigned (Cn) in every Unicode version, now and to come


@functools.cache
def newer() -> np.ndarray:
    """The code points the installed ``regex`` reads as assigned and Unicode 16 does not (sorted int64)."""
    import regex

    assigned = np.zeros(0x110000, bool)
    for m in regex.finditer(r"\P{Cn}+", "".join(map(chr, range(0x110000)))):
        assigned[m.start() : m.end()] = True
    for a, b in ASSIGNED:
        assigned[a : b + 1] = False
    out = np.flatnonzero(assigned)
    out.setflags(write=False)
    return out


# Code points Unicode 16 assigns that a later version moved to another general category, each with a
# stand-in that Unicode 16 and every later version give the category (and script, case and classes) it had
# in 16: U+0295 ʕ went from Ll to Lo in Unicode 17 (under the o200k pattern "ʕAb" was one chunk, tiktoken's
# and HF's two); U+0138 ĸ is a caseless Latin Ll.
_RECATEGORIZED = {0x0295: (r"\p{Ll}", 0x0138)}


@functools.cache
def recategorized() -> dict[int, int]:
    """``{code point: stand-in}`` of the :data:`_RECATEGORIZED` code points the installed ``regex`` reads in
    another category than Unicode 16 (empty with a ``regex`` of Unicode 16)."""
    import regex

    return {cp: standin for cp, (was, standin) in _RECATEGORIZED.items() if not regex.fullmatch(was, chr(cp))}


def as_unicode16_table(table: np.ndarray) -> np.ndarray:
    """``table`` (one row per code point) with every :func:`newer` code point's row made ``STANDIN``'s and
    every :func:`recategorized` one's its stand-in's, in place; returned."""
    cps = newer()
    if cps.size:
        table[cps] = table[STANDIN]
    for cp, standin in recategorized().items():
        table[cp] = table[standin]
    return table


@functools.cache
def _translation():
    """(the ``str.translate`` map of the newer code points to ``STANDIN``, a compiled class finding one), or
    (None, None) when the installed ``regex`` reads Unicode 16."""
    import regex

    cps = newer()
    moved = recategorized()
    if not cps.size and not moved:
        return None, None
    starts = np.flatnonzero(np.diff(cps, prepend=-2) != 1)
    ends = np.append(starts[1:], cps.size) - 1
    cls = "".join(f"\\U{int(cps[a]):08X}-\\U{int(cps[b]):08X}" for a, b in zip(starts, ends))
    cls += "".join(f"\\U{cp:08X}" for cp in moved)
    return dict.fromkeys(cps.tolist(), STANDIN) | moved, regex.compile(f"[{cls}]")


def as_unicode16(text: str) -> str:
    """``text`` as Unicode 16 reads it: each code point it leaves unassigned that the installed ``regex``
    reads as assigned replaced by ``STANDIN`` (the same length: spans of matches in it are spans of
    ``text``); ``text`` itself when it holds none (one scan)."""
    table, finder = _translation()
    if table is None or finder.search(text) is None:
        return text
    return text.translate(table)
