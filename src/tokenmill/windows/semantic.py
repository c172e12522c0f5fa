"""Semantic-aware windows: cut at paragraph and sentence boundaries, overlap by whole units.

Fixed token windows cut paragraphs, code and dialogue in half. Here the text is first
split into *units* at boundaries (blank lines, newlines, sentence-final punctuation in Chinese and
English: ``。！？；.!?``), the unit ends are mapped from characters to token positions, and whole
units are packed greedily into windows; consecutive windows share the last ``overlap_units`` units::

    units     [u0--][u1------][u2---][u3--][u4-------][u5-]
    window 0  [u0--][u1------][u2---]                          (u3 would not fit)
    window 1                  [u2---][u3--][u4-------]         (overlap_units=1: starts at u2)
    window 2                                [u4-------][u5-]

Rules, in order:

1. Cut points are the ends of boundary matches (``boundaries``: ``"sentence"`` (default),
   ``"line"``, ``"paragraph"``, or a regex whose match ends are cut points). ASCII ``.!?`` cut only
   before whitespace or the end (so ``3.14`` and ``e.g.x`` stay whole); ``。！？；`` always cut; closing
   quotes and brackets (``"'”’»」』》】〉〕）)]``, after either kind) stay with their sentence; whitespace
   after the cut starts the next unit.
   ``"paragraph"`` cuts after a run of blank lines (``\n``, ``\r\n`` or lines of white space only, U+3000 too), so
   the next paragraph's indentation starts the next unit.
2. A character cut ``c`` becomes the token position "number of tokens whose first byte is before
   ``c``'s first byte": a token holding only later bytes of a character stays with that character,
   so a cut never lands inside a character, and :meth:`SemanticPlan.window_span` is exactly the
   text of the window's tokens.
3. ``atomic`` character spans (e.g. an instruction with its response) become single units: no cut
   inside them. A non-atomic unit longer than the content size ``C`` is hard-split into pieces of at
   most ``C`` tokens, each cut where a character starts (every ``C`` tokens with :meth:`plan_units`, which
   knows no characters; inside a character only where one takes more than ``C`` tokens); an atomic one
   follows ``oversize``: ``"split"`` (pieces), ``"truncate"`` (keep its first
   ``C`` tokens; the rest is counted in ``truncated_tokens`` and left uncovered) or ``"error"``.
4. A window takes units from ``i`` while they fit in ``C``. The next window starts at
   ``max(i + 1, j - overlap_units)`` (``j``: first unit not taken), moved further right if the
   overlapping units and the next new unit would not fit together, so every window adds new text.

The plan is computed for all documents at once: one numpy step per window *index*, not per window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import regex

from .._arrays import ranks_in_groups
from .._validate import check_array, check_int, check_rows, check_texts
from ..data.source import ArraySource
from ..errors import ConfigError, InputError
from ._text import char_byte_starts, encode_with_byte_offsets
from .sliding import PlanStats, WindowPlan, check_choice, check_size, sealed_columns

BOUNDARIES = {
    "paragraph": r"\n[^\S\n]*\n(?:[^\S\n]*\n)*",  # (blank: any white space but a line break, U+3000 too)
    "line": r"\n+",
    # (one set of closers after both kinds of end: full-width ones after ".!?" had blocked the cut, and
    # "》】" after "。" were cut off their sentence)
    "sentence": r"\n+|[。！？；]+[\"'”’»」』》】〉〕）)\]]*|[.!?]+[\"'”’»」』》】〉〕）)\]]*(?=\s|$)",
}


@dataclass(frozen=True, eq=False)
class SemanticPlan:
    """A semantic plan: the window rows, the token ids they index, and the units they were cut from.

    ``units``: int64 ``(k, 3)`` rows ``(doc, token_start, token_end)`` after atomic merging and
    splitting; ``char_bounds``: per document, the character offset of every token boundary.
    """

    plan: WindowPlan
    source: ArraySource
    units: np.ndarray
    char_bounds: tuple[np.ndarray, ...]
    truncated_tokens: int
    split_units: int

    def window_span(self, r: int) -> slice:
        """Character span of window ``r`` in its document's text."""
        r = check_int(r, "window", min=0, max=len(self.plan) - 1, error=InputError)
        b = self.char_bounds[int(self.plan.doc[r])]
        return slice(int(b[self.plan.start[r]]), int(b[self.plan.end[r]]))


class SemanticWindows:
    """Windows of whole units (sentences, lines or paragraphs), at most ``window_size`` tokens.

    ``reserve`` keeps room for special tokens (content size ``window_size - reserve``); ``score`` is
    as in :class:`~tokenmill.windows.SlidingWindows`.

    >>> sw = SemanticWindows(6, overlap_units=1)
    >>> p = sw.plan_units([np.array([2, 3, 2, 4])])
    >>> p.start.tolist(), p.length.tolist()   # units [0,2) [2,5) [5,7) [7,11)
    ([0, 2, 5], [5, 5, 6])
    """

    def __init__(self, window_size: int, *, overlap_units: int = 1, boundaries: str = "sentence",
                 oversize: str = "split", reserve: int = 0, score: str = "all"):
        window_size = check_size("window_size", window_size, 1)
        overlap_units = check_size("overlap_units", overlap_units, 0)
        reserve = check_size("reserve", reserve, 0)
        if reserve >= window_size:
            raise ConfigError(f"reserve={reserve:,d} leaves no room in window_size={window_size:,d}; "
                              "pass reserve < window_size")
        if oversize not in ("split", "truncate", "error"):
            raise ConfigError(f"oversize={oversize!r} is not one of ('split', 'truncate', 'error')")
        check_choice("score", score)
        if not isinstance(boundaries, str):  # (bytes compiled, then failed on every text; a compiled pattern
            # had been "neither ... nor a valid regex")
            raise ConfigError(f"boundaries is a {type(boundaries).__name__}; pass one of {tuple(BOUNDARIES)} or a "
                              "regex as a str (its source: pattern.pattern for a compiled one)")
        if boundaries not in BOUNDARIES and boundaries.isascii() and boundaries.isalpha():
            import difflib

            near = difflib.get_close_matches(boundaries.lower(), BOUNDARIES, n=1, cutoff=0.6)
            raise ConfigError(f"boundaries={boundaries!r} is not one of {tuple(BOUNDARIES)}"
                              + (f" (did you mean {near[0]!r}?)" if near else "")
                              + "; a regex of one plain word would cut only after that word: to mean that, write "
                              f"it as a group, r'(?:{boundaries})'")
        pattern = BOUNDARIES.get(boundaries, boundaries)
        try:
            self._re = regex.compile(pattern)
        except (regex.error, TypeError) as e:
            raise ConfigError(f"boundaries={boundaries!r} is neither one of {tuple(BOUNDARIES)} nor a valid "
                              f"regex: {e}") from None
        self.window_size, self.overlap_units, self.boundaries = window_size, overlap_units, boundaries
        self.oversize, self.reserve, self.score = oversize, reserve, score

    @property
    def capacity(self) -> int:
        return self.window_size - self.reserve

    def __repr__(self) -> str:
        return (f"SemanticWindows({self.window_size}, overlap_units={self.overlap_units}, "
                f"boundaries={self.boundaries!r}, oversize={self.oversize!r})")

    # -- text -> units ---------------------------------------------------------------------------

    def cut_points(self, text: str) -> list[int]:
        """Character offsets where units end (the text's end excluded).

        >>> SemanticWindows(8).cut_points("Hi. It is 3.14 now!\\n\\n你好。再见")
        [3, 19, 21, 24]
        """
        n = len(text)
        if self.boundaries in BOUNDARIES:
            return sorted({m.end() for m in self._re.finditer(text) if 0 < m.end() < n})
        # a custom pattern runs under the tokenizer patterns' time budget: one that backtracks without end
        # ((a|a)+$) stops with an error naming it, not a hang
        from ..tokenizer.pretokenize.patterns import regex_budget

        budget = regex_budget(n)
        try:
            return sorted({m.end() for m in self._re.finditer(text, timeout=budget) if 0 < m.end() < n})
        except TimeoutError:
            raise ConfigError(f"boundaries={self.boundaries!r} ran past its {budget:.1f} s budget on a text of "
                              f"{n:,d} characters (nested quantifiers backtrack without end); rewrite the pattern, "
                              "or raise TOKENMILL_REGEX_TIMEOUT") from None

    def plan_texts(self, texts: Sequence[str], tokenizer, *, atomic: Sequence[Sequence[tuple[int, int]]] | None = None,
                   epoch: int = 0) -> SemanticPlan:
        """Encode ``texts`` with ``tokenizer`` (duck-typed: ``encode_ordinary``, ``token_bytes``) and
        plan windows of whole units. ``atomic[d]``: character spans ``(start, end)`` of document ``d``
        that must stay in one window."""
        texts = list(check_texts(texts, "SemanticWindows.plan_texts"))
        if atomic is not None:
            atomic = list(check_texts(atomic, "plan_texts' atomic", "span lists", "pass one list of spans per text",
                                      "lists of (start, end) pairs"))
            if len(atomic) != len(texts):
                raise InputError(f"atomic has {len(atomic):,d} entries for {len(texts):,d} texts; pass one list of "
                                 "(start, end) character spans per text ([] for none)")
        docs, bounds, unit_lens, unit_atomic = [], [], [], []
        split_here = 0  # units longer than the window cut at characters' starts (_units)
        for d, text in enumerate(texts):
            ids, cb, bb = encode_with_byte_offsets(text, tokenizer)
            spans = [] if atomic is None else list(atomic[d])
            lens, flags, presplit = self._units(text, bb, spans, d)
            docs.append(ids)
            bounds.append(cb)
            unit_lens.append(lens)
            unit_atomic.append(flags)
            split_here += presplit
        plan, units, truncated, split = self._plan(unit_lens, unit_atomic, epoch)
        return SemanticPlan(plan, ArraySource(docs), units, tuple(bounds), truncated, split + split_here)

    def _units(self, text: str, bb: np.ndarray, spans, d: int) -> tuple[np.ndarray, np.ndarray]:
        n_tok = bb.size - 1
        char_byte = char_byte_starts(text)
        # A cut before character c falls after every token whose first *byte* is before c's first
        # byte: a token holding only later bytes of the character before c stays with it, so no cut
        # lands inside a character (comparing character offsets instead cut "。" after its first byte).
        to_tok = lambda c: int(np.searchsorted(bb[:-1], char_byte[c], side="left"))
        points = np.asarray(self.cut_points(text), np.int64)  # (all at once: one search a cut had been ~30% here)
        cuts = set(np.searchsorted(bb[:-1], char_byte[points], side="left").tolist())
        regions = []
        for span in spans:
            if isinstance(span, (str, bytes)) or not hasattr(span, "__len__") or len(span) != 2:
                raise InputError(f"document {d:,d}: atomic span {span!r} is not a (start, end) pair of character "
                                 "offsets")
            s, e = span
            s = check_int(s, f"document {d:,d}: atomic span start", error=InputError)
            e = check_int(e, f"document {d:,d}: atomic span end", error=InputError)
            if s > e:  # (had read "outside its N characters")
                raise InputError(f"document {d:,d}: atomic span ({s:,d}, {e:,d}) starts after it ends; pass (start, "
                                 "end) character offsets with start <= end")
            if not (0 <= s <= e <= len(text)):
                raise InputError(f"document {d:,d}: atomic span ({s:,d}, {e:,d}) is outside its {len(text):,d} characters")
            if e == s:
                continue
            # from the token that holds the span's first byte (GPT-2's " the" holds the space before "the":
            # to_tok(s) left it to the unit before, a cut inside the span), to the last holding a byte of it
            a = int(np.searchsorted(bb[:-1], char_byte[s], side="right")) - 1
            b = to_tok(e)
            if b > a:
                regions.append((a, b))
        # overlapping spans are one span: each kept whole means their union is (cutting the second's
        # edge inside the first split it, silently)
        merged: list = []
        for a, b in sorted(regions):
            if merged and a < merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        regions = merged
        for a, b in regions:
            cuts = {c for c in cuts if not a < c < b} | {a, b}
        edges = np.array(sorted(cuts | {0, n_tok}), np.int64) if n_tok else np.zeros(0, np.int64)
        edges = edges[(edges >= 0) & (edges <= n_tok)]
        # a unit longer than the window is cut into pieces here, at token positions where a character starts
        # (the last such within C tokens of the piece's start), not every C tokens (that had cut inside a
        # character: a window starting with an emoji's last bytes); only a character of more than C tokens is cut
        # inside. Atomic units are left to oversize unless it is "split".
        C = self.capacity
        long = np.flatnonzero(np.diff(edges) > C)
        presplit = 0
        if long.size:
            idx = np.minimum(np.searchsorted(char_byte, bb), char_byte.size - 1)
            aligned = np.flatnonzero(char_byte[idx] == bb)  # token positions at a character's first byte
            extra = []
            for u in long.tolist():
                a, b = int(edges[u]), int(edges[u + 1])
                if self.oversize != "split" and any(ra <= a < rb for ra, rb in regions):
                    continue
                presplit += 1
                p = a
                while b - p > C:
                    k = int(np.searchsorted(aligned, p + C, side="right")) - 1
                    q = int(aligned[k]) if k >= 0 and aligned[k] > p else p + C
                    extra.append(q)
                    p = q
            edges = np.unique(np.concatenate([edges, np.array(extra, np.int64)]))
        lens = np.diff(edges)
        starts = edges[:-1]
        flags = np.zeros(lens.size, bool)
        for a, b in regions:
            flags |= (starts >= a) & (starts < b)
        return lens, flags, presplit

    # -- units -> windows ------------------------------------------------------------------------

    def plan_units(self, unit_lengths: Sequence[np.ndarray], atomic: Sequence[np.ndarray] | None = None,
                   epoch: int = 0) -> WindowPlan:
        """Plan from unit token lengths per document (units are contiguous, in order).

        ``unit_lengths[d]``: the token length of each unit of document ``d``, in order (integers
        >= 0; empty units are skipped), covering it whole: they add up to its length (a plan is checked
        against the documents it is made for when materialized: give a trailing piece its own unit). ``atomic``: None, or per document a boolean array with one
        flag per unit, True where the unit must not be cut (an oversized one follows ``oversize``).
        Consecutive atomic units are *not* merged here: give one unit per atomic span.

        >>> SemanticWindows(5, overlap_units=0).plan_units([[2, 4, 3]], atomic=[[False, True, False]]).length.tolist()
        [2, 4, 3]
        """
        return self._plan(unit_lengths, atomic, epoch)[0]

    def _plan(self, unit_lengths, atomic, epoch):
        C = self.capacity
        epoch = check_size("epoch", epoch, 0)  # (as SlidingWindows.plan: -5 or 1.5 was stored in the plan)
        unit_lengths = check_texts(unit_lengths, "plan_units", "per-document unit lengths",
                                   "pass one list of unit lengths per document", "arrays of ints")
        if any(np.ndim(u) == 0 for u in unit_lengths):  # [3, 4] is one document's units, not two documents
            raise ConfigError("plan_units takes one list of unit lengths per document; [3, 4] is read as two "
                              "documents of a bare length each: pass [[3, 4]] for one document of two units")
        lens = [check_array(u, f"document {d:,d}: unit lengths", min=0) for d, u in enumerate(unit_lengths)]
        D = len(lens)
        if atomic is not None:
            atomic = list(check_texts(atomic, "plan_units' atomic", "flag arrays", "pass one flag array per document",
                                      "arrays of bools"))
        if atomic is not None and len(atomic) != D:
            raise InputError(f"atomic has {len(atomic):,d} entries for {D:,d} documents; pass one flag array each")
        flags = [np.zeros(u.size, bool) if atomic is None else _flags(atomic[d], d) for d, u in enumerate(lens)]
        for d in range(D):
            if flags[d].shape != lens[d].shape:
                raise InputError(f"document {d:,d}: atomic has {flags[d].size:,d} flags for {lens[d].size:,d} units")
            if lens[d].size and lens[d].min() < 0:
                raise InputError(f"document {d:,d} has a unit of negative length")
        u_len = np.concatenate(lens) if D else np.zeros(0, np.int64)
        if u_len.sum(dtype=np.float64) > 2**62:  # (an int64 sum past 2**63 wrapped: a plan of -2**63 tokens)
            d = next((d for d, u in enumerate(lens) if u.sum(dtype=np.float64) > 2**62), None)
            what = (f"document {d:,d}: its units add up to {sum(lens[d].tolist()):,d}" if d is not None else
                    f"the documents' units add up to {sum(u_len.tolist()):,d}")
            raise InputError(f"{what} tokens, more than a plan holds ({2**62:,d}); pass token lengths")
        doc_len = np.array([int(u.sum()) for u in lens], np.int64)
        u_doc = np.repeat(np.arange(D, dtype=np.int64), [u.size for u in lens])
        u_atom = np.concatenate(flags) if D else np.zeros(0, bool)
        u_start = np.concatenate([np.cumsum(u) - u for u in lens]) if D else np.zeros(0, np.int64)
        keep = u_len > 0
        u_doc, u_len, u_atom, u_start = u_doc[keep], u_len[keep], u_atom[keep], u_start[keep]

        big = u_len > C
        truncated = 0
        if (big & u_atom).any():
            if self.oversize == "error":
                k = int(np.flatnonzero(big & u_atom)[0])
                raise InputError(f"document {int(u_doc[k]):,d}: an atomic segment has {int(u_len[k]):,d} tokens, "
                                 f"more than the window's {C:,d}; pass oversize='split' or 'truncate', or a larger "
                                 "window_size")
            if self.oversize == "truncate":
                cut = big & u_atom
                truncated = int((u_len[cut] - C).sum())
                u_len = np.where(cut, C, u_len)
                big = u_len > C
        # hard-split what is still longer than C into C-token pieces (as many rows as a plan may hold)
        pieces = np.where(big, -(-u_len // C), 1)
        check_rows(int(pieces.sum()), "the semantic plan's units", "raise window_size or split the documents")
        rep = np.repeat(np.arange(u_len.size), pieces)
        k = ranks_in_groups(pieces)
        p_start = u_start[rep] + k * C
        p_len = np.minimum(C, u_len[rep] - k * C)
        p_doc = u_doc[rep]
        split = int(big.sum())

        doc, start, length = _pack(p_doc, p_start, p_len, D, C, self.overlap_units)
        plan = _semantic_plan(doc, start, length, doc_len, truncated, self.score, epoch, self.window_size,
                              self.capacity)
        units = np.stack([p_doc, p_start, p_start + p_len], axis=1).reshape(-1, 3)
        return plan, units, truncated, split


def _pack(p_doc, p_start, p_len, D, C, overlap):
    """Greedy packing of units (sorted by doc, contiguous unless truncated) for all documents at once."""
    m = p_len.size
    if m == 0:
        z = np.zeros(0, np.int64)
        return z, z, z
    cum = np.concatenate([[0], np.cumsum(p_len)])  # exclusive prefix over all units
    first_unit = np.searchsorted(p_doc, np.arange(D), side="left")
    last_unit = np.searchsorted(p_doc, np.arange(D), side="right")  # exclusive
    active = np.flatnonzero(last_unit > first_unit)
    i, stop = first_unit[active], last_unit[active]
    rows_doc, rows_i, rows_j = [], [], []
    while active.size:
        j = np.searchsorted(cum, cum[i] + C, side="right") - 1  # largest j with sum(units[i:j]) <= C
        j = np.minimum(np.maximum(j, i + 1), stop)
        rows_doc.append(active), rows_i.append(i), rows_j.append(j)
        more = j < stop
        active, i, j, stop = active[more], i[more], j[more], stop[more]
        fit = np.searchsorted(cum, cum[j + 1] - C, side="left")  # overlap + next unit must fit
        i = np.maximum.reduce([i + 1, j - overlap, fit])
    doc = np.concatenate(rows_doc)
    ui, uj = np.concatenate(rows_i), np.concatenate(rows_j)
    order = np.lexsort((ui, doc))
    doc, ui, uj = doc[order], ui[order], uj[order]
    start = p_start[ui]
    length = p_start[uj - 1] + p_len[uj - 1] - start
    return doc.astype(np.int64), start, length


def _semantic_plan(doc, start, length, doc_len, truncated, score, epoch, window_size, capacity) -> WindowPlan:
    end = start + length
    same = np.zeros(doc.size, bool)
    same[1:] = doc[1:] == doc[:-1]
    prev_end = np.where(same, np.concatenate([[0], end[:-1]]), 0)
    target_start = np.minimum(start + 1, end)
    if score == "new":
        target_start = np.minimum(np.maximum(target_start, prev_end), end)
    covered = int(np.maximum(end - np.maximum(start, prev_end), 0).sum())
    unique_t = int(np.maximum(end - np.maximum(target_start, prev_end), 0).sum())
    last = np.ones(doc.size, bool)
    last[:-1] = ~same[1:]
    num_tokens = int(doc_len.sum())
    tail = int((doc_len[doc[last]] - end[last]).sum())
    head = int(start[~same].sum())
    stats = PlanStats(
        num_docs=int(doc_len.size), num_tokens=num_tokens, num_windows=int(doc.size),
        empty_docs=int((doc_len == 0).sum()), short_docs=0, short_docs_dropped=0,
        # full: as long as the window holds (every window had been said full); short: cut at a unit's end before
        full_windows=int((length >= capacity).sum()), tail_windows=0, short_windows=int((length < capacity).sum()), windows_capped=0, window_tokens=int(length.sum()), covered_tokens=covered,
        uncovered_head=head, uncovered_gap=num_tokens - covered - head - tail, uncovered_tail=tail,
        uncovered_short=0, target_tokens=int((end - target_start).sum()), unique_targets=unique_t,
        unscored_tokens=covered - unique_t - int((start[~same] == 0).sum()))
    return WindowPlan(**sealed_columns({"doc": doc, "start": start, "length": length, "target_start": target_start}),
                      scale=np.full(doc.size, window_size, np.int64), stats=stats, score=score, epoch=epoch,
                      scale_stats=(stats,))


def _flags(values, d: int) -> np.ndarray:
    """One document's atomic flags as a bool array: True or False each (``"False"`` read as True before)."""
    a = np.asarray(values)
    if a.size and not (a.dtype == bool or (a.dtype.kind in "iu" and ((a == 0) | (a == 1)).all())):
        raise InputError(f"document {d:,d}: atomic flags must be True/False (or 1/0) per unit, got dtype {a.dtype}")
    return a.astype(bool).ravel()
