"""Decode the first windows of a plan back to text, with the overlap marked.

"Print five windows as text and read them": numbers that look fine often read wrong. The part of
a window that the previous window of the same document (and scale) already holds is wrapped in
``[[...]]``; a gap (``stride`` larger than the window) is announced in the header::

    window 1  doc 0  tokens [3, 7) of 11  overlap 1
    [[d]]efg
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validate import check_int
from ..data.source import as_source
from ..errors import ConfigError
from .sliding import WindowPlan

OPEN, CLOSE = "[[", "]]"


@dataclass(frozen=True)
class WindowPreview:
    """One decoded window: ``overlap_text`` (already in the previous window) + ``new_text``."""

    index: int
    doc: int
    start: int
    length: int
    doc_length: int
    overlap_tokens: int
    gap_tokens: int
    overlap_text: str
    new_text: str
    scale: int

    @property
    def text(self) -> str:
        return self.overlap_text + self.new_text

    def render(self) -> str:
        head = (f"window {self.index:,d}  doc {self.doc:,d}  tokens [{self.start:,d}, {self.start + self.length:,d}) "
                f"of {self.doc_length:,d}  overlap {self.overlap_tokens:,d}")
        if self.gap_tokens:
            head += f"  gap of {self.gap_tokens:,d} uncovered tokens before"
        marked = f"{OPEN}{self.overlap_text}{CLOSE}" if self.overlap_tokens else ""
        return f"{head}\n{marked}{self.new_text}"

    def __str__(self) -> str:
        return self.render()


def _split_decode(ids: np.ndarray, cut: int, tokenizer) -> tuple[str, str]:
    """Decode ``ids`` once and split the text at token ``cut``, snapped forward to a character start (a character
    whose bytes the cut splits is in the first part)."""
    ids = [int(i) for i in ids]
    if hasattr(tokenizer, "decode_bytes"):
        data = tokenizer.decode_bytes(ids)
        at = len(tokenizer.decode_bytes(ids[:cut])) if cut else 0
        while at < len(data) and (data[at] & 0xC0) == 0x80:  # do not cut inside a character
            at += 1
        return data[:at].decode("utf-8", "replace"), data[at:].decode("utf-8", "replace")
    # a tokenizer with text alone: the head's text is the whole's up to where they differ (a character split by
    # the cut is one U+FFFD in the head: its byte length is no offset into the whole), and that character with it
    text = tokenizer.decode(ids)
    head = tokenizer.decode(ids[:cut]) if cut else ""
    at = 0
    while at < min(len(head), len(text)) and head[at] == text[at]:
        at += 1
    if at < len(head):
        at = min(at + 1, len(text))
    return text[:at], text[at:]


def preview(plan: WindowPlan, source, tokenizer, n: int = 5, *, rows=None) -> list[WindowPreview]:
    """Decode the first ``n`` windows (or the given ``rows``) of ``plan`` from ``source``.

    >>> from tokenmill.windows import SlidingWindows
    >>> class Bytes:
    ...     def decode_bytes(self, ids): return bytes(ids)
    >>> docs = [list(b"abcdefghijk")]
    >>> print(preview(SlidingWindows(4, 3).plan([11]), docs, Bytes(), n=4)[3])
    window 3  doc 0  tokens [7, 11) of 11  overlap 3
    [[hij]]k
    """
    if not isinstance(plan, WindowPlan):
        raise ConfigError(f"plan is a {type(plan).__name__}; pass the WindowPlan of SlidingWindows(...).plan(lengths) "
                          "(or another planner's)")
    n = check_int(n, "n", min=0)
    from ..tokenizer.adapters import tokenizer_with

    if not hasattr(tokenizer, "decode_bytes"):  # (an HF or tiktoken object: converted, for its bytes; else its text)
        try:
            tokenizer = tokenizer_with(tokenizer, ("decode_bytes",))
        except ConfigError:
            tokenizer = tokenizer_with(tokenizer, ("decode",))
    src = as_source(source)
    lengths = np.asarray(src.lengths)
    picked = np.arange(min(n, len(plan))) if rows is None else plan.row_indices(rows)
    plan.check_source(lengths, picked)
    out = []
    for r in picked.tolist():
        d, s, m = int(plan.doc[r]), int(plan.start[r]), int(plan.length[r])
        prev_end = None
        if r > 0 and plan.doc[r - 1] == d and plan.scale[r - 1] == plan.scale[r]:
            prev_end = int(plan.end[r - 1])
        overlap = 0 if prev_end is None else min(max(prev_end - s, 0), m)
        gap = 0 if prev_end is None else max(s - prev_end, 0)
        ids = np.asarray(src.get(d))[s:s + m]
        old, new = _split_decode(ids, overlap, tokenizer)
        out.append(WindowPreview(r, d, s, m, int(lengths[d]), overlap, gap, old, new, int(plan.scale[r])))
    return out
