"""Sliding windows over token sequences: placement plans as arrays, tokens touched only on demand.

A window is ``(doc, start, length)``. :meth:`SlidingWindows.plan` computes those three columns for
every document at once from the document lengths alone, without reading a token and without a
Python loop per window or document (two compiled passes over the lengths; a vectorized numpy twin,
``place(..., kernel=False)``, gives the same columns); :meth:`WindowPlan.materialize` then cuts the
tokens lazily from any token source.

Placement, for a document of ``N`` tokens, content size ``C`` (= ``window_size`` minus the room
reserved for special tokens) and ``stride`` ``S``::

    N=11, C=4, S=3, tail="align"           tokens 0 1 2 3 4 5 6 7 8 9 10
                                           win 0  [-----]                    start 0  (full)
                                           win 1        [-----]              start 3  (full)
                                           win 2              [-----]        start 6  (full: 6+4 <= 11)
                                           win 3                [-----]      start 7  (tail: N-C)

1. the first start is ``start_offset`` (+ the epoch's jitter) clamped to ``max(N - C, 0)``;
2. full windows of ``C`` tokens while ``start + C <= N``, stepping by ``S``;
3. if tokens remain after the last full window: ``tail="align"`` adds one window at ``N - C``
   (it always starts after the previous one, so it is never a duplicate); ``"drop"`` leaves them
   uncovered (counted in :class:`PlanStats`); ``"pad"`` adds the short window that the stride grid
   gives, ``[last + S, N)`` (none when that start is already ``>= N``, possible only if ``S > C``);
4. ``0 < N < C``: one short window ``[0, N)`` (``short="keep"``) or none (``"drop"``); ``N == 0``: none;
5. ``max_windows_per_doc=k``: of a document's ``m > k`` windows keep indices
   ``round(i * (m - 1) / (k - 1))`` for ``i = 0..k-1`` (exact rational arithmetic, ties to even as
   Python's ``round``): evenly spread, first and last kept; ``k = 1`` keeps the first.

A worked example: N=10000, W=512, S=256 gives
``(10000 - 512) // 256 + 1 = 38`` full windows (last full start 9472, covering up to 9984), then the
aligned tail at 9488: 39 windows, every token covered.

Targets follow the convention of ``tokenmill/conventions.py``: ``labels`` sit at the input positions (the model shifts
by one), ignored targets are ``-100``. A window's first token has nothing before it, so it is never a
target (its label is ``-100``) unless a ``bos`` precedes it. ``score="new"`` additionally ignores
targets that an earlier window of the same document already scored, so each token is scored at
most once (strided perplexity); :attr:`WindowPlan.target_start` records the first scored token.

>>> plan = SlidingWindows(512, 256).plan([10000])
>>> len(plan), plan.start[-2:].tolist(), plan.stats.covered_tokens
(39, [9472, 9488], 10000)
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Iterator, Literal, Mapping

import numpy as np

from .._arrays import ranks_in_groups, seal
from .._validate import check_array, check_int, check_rows, check_spans, document_lengths
from ..conventions import IGNORE_INDEX
from ..errors import ConfigError, InputError

Tail = Literal["align", "drop", "pad"]
Short = Literal["keep", "drop"]
Jitter = Literal["global", "per_doc"]
_MAX_JITTER_DOC = 1 << 32  # the largest ``doc`` whose per_doc jitter windows() draws (~20 s of draws)
Positions = Literal["reset", "absolute"]
Score = Literal["all", "new"]

_CHOICES = {
    "tail": ("align", "drop", "pad"),
    "short": ("keep", "drop"),
    "jitter": (None, "global", "per_doc"),
    "positions": ("reset", "absolute"),
    "score": ("all", "new"),
}


def check_size(name: str, value, minimum: int) -> int:
    """An exact integer option of the window planners, in ``minimum .. 2**62`` (ConfigError otherwise), as a
    Python int: a numpy scalar kept as given would do the planners' sums in its own type (``np.int8(5)``
    beside a window of 2**31 overflowed)."""
    # sizes, strides and offsets up to 2**62: their sums stay inside int64 in the planners
    return check_int(value, name, min=minimum, max=2**62)


def check_choice(name: str, value) -> None:
    """One of the allowed values of a window-planner option (``tail``, ``short``, ...)."""
    if value not in _CHOICES[name]:
        raise ConfigError(f"{name}={value!r} is not one of {_CHOICES[name]}")


def as_lengths(doc_lengths) -> np.ndarray:
    """Document lengths as a 1-D int64 array; accepts a token source (``.lengths``) or array-like.

    >>> as_lengths([3, 0, 5]).tolist()
    [3, 0, 5]
    """
    return document_lengths(doc_lengths, "doc_lengths")


def jitter_rng(seed: int, epoch: int) -> np.random.Generator:
    """The generator behind ``jitter``: PCG64 seeded with ``SeedSequence([seed, epoch])``.

    >>> int(jitter_rng(0, 3).integers(0, 256)) == int(jitter_rng(0, 3).integers(0, 256))
    True
    """
    return np.random.default_rng([int(seed), int(epoch)])


def spread_indices(i: np.ndarray, m: np.ndarray, k: int) -> np.ndarray:
    """Index of the ``i``-th kept window out of ``m`` when keeping ``k < m`` evenly spread ones.

    ``round(i * (m - 1) / (k - 1))`` in exact integer arithmetic, ties to even (Python's ``round``).

    >>> spread_indices(np.arange(4), np.full(4, 10), 4).tolist()
    [0, 3, 6, 9]
    >>> spread_indices(np.arange(3), np.full(3, 4), 3).tolist()   # 0, 1.5 -> 2, 3
    [0, 2, 3]
    """
    i = np.asarray(i, np.int64)
    m = np.asarray(m, np.int64)
    if k == 1:
        return np.zeros_like(i)
    a, b = np.divmod(m - 1, k - 1)  # i * (m - 1) itself overflows int64 for m ~ 2**50
    q2, r = np.divmod(i * b, k - 1)  # i * b < k * (k - 1): k is at most the plan's row cap
    q = i * a + q2
    twice = 2 * r
    up = (twice > k - 1) | ((twice == k - 1) & (q % 2 == 1))
    return q + up


@dataclass(frozen=True)
class PlanStats:
    """What a plan covers and what it leaves out, in counts (nothing is dropped silently).

    ``uncovered_head``: tokens before a document's first window (``start_offset``/jitter);
    ``uncovered_gap``: tokens between two windows (``stride > content size``, or windows removed by
    ``max_windows_per_doc``); ``uncovered_tail``: tokens after a document's last window, whatever left
    them (``tail="drop"``, a ``tail="pad"`` start past the end, windows removed after the last kept one);
    ``uncovered_short``: tokens of documents shorter than the window dropped by ``short="drop"``.
    ``target_tokens`` counts scored document tokens over all windows (an ``eos`` template's target at a
    document's end is not one; see :attr:`WindowPlan.target_count`), ``unique_targets`` the distinct
    document tokens among them (their difference is the number of repeated scorings).
    ``unscored_tokens``: tokens inside some window that no window scores, other than a document's
    first token (it has nothing before it to be predicted from, unless a ``bos`` precedes it). A
    window's first token has no context in its window, so with ``stride == capacity`` (no overlap)
    the first token of every later window is never a target: like the targets packing loses at
    cuts, they are counted here, not hidden.
    """

    num_docs: int
    num_tokens: int
    num_windows: int
    empty_docs: int
    short_docs: int
    short_docs_dropped: int
    full_windows: int
    tail_windows: int
    short_windows: int
    windows_capped: int
    window_tokens: int
    covered_tokens: int
    uncovered_head: int
    uncovered_gap: int
    uncovered_tail: int
    uncovered_short: int
    target_tokens: int
    unique_targets: int
    jitter: int | None = None
    unscored_tokens: int = 0

    @property
    def uncovered_tokens(self) -> int:
        return self.num_tokens - self.covered_tokens

    @property
    def coverage(self) -> float:
        """Fraction of document tokens inside at least one window (1.0 for no tokens)."""
        return self.covered_tokens / self.num_tokens if self.num_tokens else 1.0

    @property
    def coverage_percent(self) -> float:
        return 100.0 * self.coverage

    def __add__(self, other: "PlanStats") -> "PlanStats":
        # Only used to combine per-scale counters; coverage fields are recomputed by the caller.
        vals = {f: getattr(self, f) + getattr(other, f) for f in self.__dataclass_fields__ if f != "jitter"}
        return PlanStats(**vals, jitter=None)

    def summary(self) -> str:
        lines = [
            f"documents {self.num_docs:,d} ({self.empty_docs:,d} empty, {self.short_docs:,d} shorter than "
            f"the window, {self.short_docs_dropped:,d} of them dropped)",
            f"windows   {self.num_windows:,d} ({self.full_windows:,d} full, {self.tail_windows:,d} tail, "
            f"{self.short_windows:,d} short; {self.windows_capped:,d} removed by max_windows_per_doc)",
            f"tokens    {self.num_tokens:,d} in documents, {self.window_tokens:,d} in windows "
            f"({self.window_tokens / max(self.num_tokens, 1):.3f}x)",
            f"coverage  {100 * self.coverage:.2f}% ({self.uncovered_tokens:,d} uncovered: head "
            f"{self.uncovered_head:,d}, gaps {self.uncovered_gap:,d}, tail {self.uncovered_tail:,d}, "
            f"dropped short {self.uncovered_short:,d})",
            f"targets   {self.target_tokens:,d} scored, {self.unique_targets:,d} distinct tokens "
            f"({self.target_tokens - self.unique_targets:,d} scored again"
            + (f", {self.unscored_tokens:,d} covered but never scored)" if self.unscored_tokens else ")"),
        ]
        if self.jitter is not None:
            lines.append(f"jitter    {self.jitter:,d} (global offset this epoch)")
        return "\n".join(lines)


def sealed_columns(cols: dict) -> dict:
    """A planner's fresh columns sealed (``_arrays.seal``, no copy): a plan keeps them, and a slice over the plan
    (:class:`~tokenmill.batching.SliceSource`, every epoch of a loader over windows) takes them as they are
    instead of copying them."""
    return {k: seal(v) if k in ("doc", "start", "length", "target_start") else v for k, v in cols.items()}


_WINDOW_FIELDS = ("input_ids", "attention_mask", "position_ids", "labels", "doc", "offset", "index")


def _check_extra_names(names) -> None:
    """Extras named like a window's own fields would replace them in ``Window.to_dict`` (an extra ``labels``
    made the template's ignored positions targets): refused."""
    clash = [k for k in names if k in _WINDOW_FIELDS]
    if clash:
        raise ConfigError(f"extra {clash[0]!r} has the name of a window's own field ({', '.join(_WINDOW_FIELDS)}); "
                          "name it otherwise (e.g. 'loss_mask' to weight the labels the window makes)")


@dataclass(frozen=True, eq=False)
class Window:
    """One materialized window; every per-token array has the same length.

    ``labels`` are at the input positions (-100 = not a target); ``attention_mask`` is boolean,
    True = may attend; ``offset`` is the document position of the first content token; ``extras``
    holds the caller's extra per-token arrays cut the same way (0 at template positions).
    """

    input_ids: np.ndarray  # (T,) int64
    attention_mask: np.ndarray  # (T,) bool
    position_ids: np.ndarray  # (T,) int64
    labels: np.ndarray  # (T,) int64
    doc: int
    offset: int
    index: int = 0
    extras: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def to_dict(self) -> dict[str, Any]:
        return {"input_ids": self.input_ids, "attention_mask": self.attention_mask,
                "position_ids": self.position_ids, "labels": self.labels, "doc": self.doc,
                "offset": self.offset, **self.extras}


@dataclass(frozen=True, eq=False)
class WindowPlan:
    """All windows of a corpus as aligned int64 columns, shape ``(num_windows,)`` each.

    Rows are sorted by document, then start (multi-scale plans: by scale, then document, then
    start); within one document and scale, starts and ends never decrease. ``start``/``length`` count document
    tokens (content); the materialized window adds ``bos``/``eos`` around them when set.
    ``target_start`` is the document position of the first scored target (``end`` when none).
    """

    doc: np.ndarray
    start: np.ndarray
    length: np.ndarray
    target_start: np.ndarray
    scale: np.ndarray  # window_size of the scale the row belongs to
    stats: PlanStats
    bos: int | None = None
    eos: int | None = None
    positions: str = "reset"
    score: str = "all"
    epoch: int = 0
    scale_stats: tuple[PlanStats, ...] = ()
    scale_sizes: tuple[int, ...] = ()  # the window size of each of ``scale_stats`` (a scale may have no rows)

    def __post_init__(self):
        # the columns read-only (views, no copy): a plan's target_start written after it was made had turned a
        # window's first token into a target when materialized, its start a read into the next document
        n = None
        for name in ("doc", "start", "length", "target_start", "scale"):
            a = getattr(self, name)
            if not (isinstance(a, np.ndarray) and a.dtype == np.int64 and a.ndim == 1):
                # (a plan made by hand of lists: its end had been start + length, two lists joined)
                a = check_array(a, f"WindowPlan.{name}", error=ConfigError)
                object.__setattr__(self, name, a)
            if n is not None and a.shape[0] != n:
                raise ConfigError(f"WindowPlan.{name} has {a.shape[0]:,d} rows, WindowPlan.doc {n:,d}: a plan's "
                                  "columns are one row per window")
            n = a.shape[0]
            if a.flags.writeable:
                a = a.view()
                a.flags.writeable = False
                object.__setattr__(self, name, a)

    def __len__(self) -> int:
        return int(self.doc.shape[0])

    @property
    def end(self) -> np.ndarray:
        return self.start + self.length

    @property
    def target_count(self) -> np.ndarray:
        """Scored document tokens per window, ``end - target_start``. Under an ``eos`` template the window
        that ends its document also scores that eos (not a document token, so not counted here: the
        labels of ``materialize`` hold it, and ``count_targets`` of them is one more for such a window)."""
        return self.end - self.target_start

    @property
    def window_length(self) -> np.ndarray:
        """Length of each materialized window: content plus template tokens."""
        return self.length + (self.bos is not None) + (self.eos is not None)

    def summary(self) -> str:
        text = self.stats.summary()
        if len(self.scale_stats) < 2:  # (a single-scale plan)
            return text
        # a multi-scale plan: documents shorter than the window differ by scale (their sum read as a count of
        # documents: "documents 2 (3 empty, 3 shorter than the window...)")
        sizes = self.scale_sizes if len(self.scale_sizes) == len(self.scale_stats) else (
            sorted({int(w) for w in self.scale.tolist()}) if len(self) else [])
        per = ", ".join(f"{w:,d}: {st.short_docs:,d} ({st.short_docs_dropped:,d} dropped)"
                        for w, st in zip(sizes, self.scale_stats)) if len(sizes) == len(self.scale_stats) else \
            ", ".join(f"{st.short_docs:,d} ({st.short_docs_dropped:,d} dropped)" for st in self.scale_stats)
        first = (f"documents {self.stats.num_docs:,d} ({self.stats.empty_docs:,d} empty; shorter than the window, "
                 f"by scale: {per})")
        return "\n".join([first] + text.split("\n")[1:])

    def select(self, rows) -> "WindowPlan":
        """A plan of the given rows (indices or boolean mask), e.g. one rank's shard.

        ``stats`` stay those of the full plan.
        """
        rows = self.row_indices(rows)
        cols = {k: getattr(self, k)[rows] for k in ("doc", "start", "length", "target_start", "scale")}
        return WindowPlan(**sealed_columns(cols), stats=self.stats, bos=self.bos, eos=self.eos, positions=self.positions,
                          score=self.score, epoch=self.epoch, scale_stats=self.scale_stats,
                          scale_sizes=self.scale_sizes)

    # -- per-token accounting --------------------------------------------------------------------

    def multiplicity(self, doc_lengths, *, targets: bool = False) -> np.ndarray:
        """How many windows hold each token (``targets=True``: score it), all documents concatenated.

        Shape ``(sum(doc_lengths),)``, int32. Memory grows with the number of tokens; for corpus-size
        summaries use :func:`tokenmill.coverage_report`, which works from the window rows alone.

        >>> plan = SlidingWindows(4, 2).plan([6])
        >>> plan.multiplicity([6]).tolist(), plan.multiplicity([6], targets=True).tolist()
        ([1, 1, 2, 2, 1, 1], [0, 1, 1, 2, 1, 1])
        """
        lengths = as_lengths(doc_lengths)
        # (the plan's own documents: longer ones had their extra tokens shown as never covered, extra documents
        # added zeros, where coverage_report refuses both)
        self.check_source(lengths, what="doc_lengths", fix="pass the lengths the plan was made for")
        base = np.concatenate([[0], np.cumsum(lengths)])
        lo = self.target_start if targets else self.start
        total = int(base[-1])
        diff = np.bincount(base[self.doc] + lo, minlength=total + 1)
        diff = diff - np.bincount(base[self.doc] + self.end, minlength=total + 1)
        return np.cumsum(diff[:total]).astype(np.int32)

    # -- materialization -------------------------------------------------------------------------

    def materialize(self, source, rows=None, *, extras: Mapping[str, Any] | None = None) -> Iterator[Window]:
        """Yield windows lazily, cutting tokens from ``source`` (a token source or list of arrays).

        ``extras`` maps names to sources of per-token arrays aligned with ``source`` (for example
        ``{"token_type_ids": [...]}``); each is cut the same way.
        """
        from ..data.masked import document_flags, loss_mask_of
        from ..data.source import as_source, check_memory_ids, reader

        src = as_source(source)
        _check_extra_names(extras or {})
        ext = {k: as_source(v) for k, v in (extras or {}).items()}
        lengths = np.asarray(src.lengths)
        picked = self.row_indices(rows)
        self.check_source(lengths, picked)
        for k, s in ext.items():  # cut the same way: one value per token of the same documents
            el = np.asarray(s.lengths)
            if el.shape != lengths.shape or not np.array_equal(el, lengths):
                d = int(np.argmax(el != lengths)) if el.shape == lengths.shape else None
                raise InputError(f"extra {k!r} does not align with the source's tokens: " + (
                    f"it holds {el.size:,d} documents, the source {lengths.size:,d}" if d is None else
                    f"its document {d:,d} has {int(el[d]):,d} values, the source's {int(lengths[d]):,d} tokens")
                    + "; pass one value per token")
        check_memory_ids(src)  # ids nothing checked: -100 would read as an ignored label
        get = reader(src, lengths)
        masked = loss_mask_of(src) is not None  # (a MaskedSource: tokens flagged 0 are no target)
        for r in picked.tolist():
            d = int(self.doc[r])
            yield self._window(r, get(d), int(lengths[d]), {k: s.get(d) for k, s in ext.items()},
                               flags=document_flags(src, d) if masked else None)

    def check_source(self, lengths: np.ndarray, rows: np.ndarray | None = None, *, what: str = "source",
                     fix: str = "plan the source you read from") -> None:
        """Every window of ``rows`` (default: all) lies inside its document of a source of ``lengths`` (the plan
        was made for it), else an InputError naming the first that does not: "plan and source disagree" (a
        shorter source gave a bare IndexError, or windows past a document's end rendered empty). The one
        check of a plan against lengths (``coverage_report`` uses it too, ``what="lengths"``). The lengths must
        also be the plan's documents: as many, as many tokens in all (its stats)."""
        rows = np.arange(len(self), dtype=np.int64) if rows is None else rows
        if rows.size:
            self._check_rows_inside(lengths, rows, what, fix)
        # the documents the plan was made for (its stats): a longer source had passed, its extra tokens never
        # windowed and the last window's EOS label lost (the window no longer ended its document)
        n_scales = max(1, len(self.scale_stats))
        if lengths.size != self.stats.num_docs or int(lengths.sum()) * n_scales != self.stats.num_tokens:
            tokens = self.stats.num_tokens // n_scales
            raise InputError(f"the plan was made for {self.stats.num_docs:,d} documents of {tokens:,d} tokens, but the "
                             f"{what} holds {lengths.size:,d} of {int(lengths.sum()):,d}: plan and {what} disagree; {fix}")

    def _check_rows_inside(self, lengths: np.ndarray, rows: np.ndarray, what: str, fix: str) -> None:
        doc = self.doc[rows]
        if int(doc.min()) < 0 or int(doc.max()) >= lengths.size:
            bad = int(doc.min()) if int(doc.min()) < 0 else int(doc.max())
            raise InputError(f"the plan names document {bad:,d} but the {what} holds {lengths.size:,d} "
                             f"documents: plan and {what} disagree; {fix}")
        length, start, ts = self.length[rows], self.start[rows], self.target_start[rows]
        # a plan made by hand: lengths and target starts as planners make them (a window's first token is no
        # target unless a bos precedes it; nothing past its end)
        wrong = (length < 0) | (ts > start + length) | (ts < np.minimum(start + int(self.bos is None), start + length))
        if wrong.any():
            k = int(np.argmax(wrong))
            r = int(rows[k])
            raise InputError(f"window {r:,d} of the plan has start {int(start[k]):,d}, length {int(length[k]):,d} and "
                             f"target_start {int(ts[k]):,d}: a length is >= 0 and target_start lies in [start + 1, "
                             "start + length] (from start where a bos precedes the window); make the plan with "
                             "SlidingWindows(...).plan(lengths), or fix its columns")
        over = (start < 0) | (self.end[rows] > lengths[doc])
        if over.any():
            k = int(np.argmax(over))
            r, d = int(rows[k]), int(doc[k])
            raise InputError(f"document {d:,d} has {int(lengths[d]):,d} tokens but window {r:,d} needs "
                             f"[{int(self.start[r]):,d}, {int(self.end[r]):,d}): plan and {what} disagree; {fix}")

    def __getitem__(self, r):
        raise TypeError("a WindowPlan is indexed through materialize(source, rows) or select(rows)")

    def _window(self, r: int, ids: np.ndarray, n_doc: int, extras: Mapping[str, np.ndarray],
                doc: int | None = None, flags: np.ndarray | None = None) -> Window:
        s, n, ts = int(self.start[r]), int(self.length[r]), int(self.target_start[r])
        b, e = int(self.bos is not None), int(self.eos is not None)
        t = b + n + e
        if s + n > ids.shape[0]:
            raise InputError(f"document {int(self.doc[r]):,d} has {ids.shape[0]:,d} tokens but window {r:,d} "
                             f"needs [{s:,d}, {s + n:,d}); plan and source disagree")
        input_ids = np.empty(t, np.int64)
        input_ids[b:b + n] = ids[s:s + n]
        if b:
            input_ids[0] = self.bos
        if e:
            input_ids[-1] = self.eos
        labels = input_ids.copy()
        labels[:b + ts - s] = IGNORE_INDEX  # bos, the window's first token (no context), already-scored
        if e and s + n != n_doc:
            labels[-1] = IGNORE_INDEX  # eos is a true target only where the document really ends
        if flags is not None:  # a loss mask: the tokens flagged 0 are context only
            labels[b:b + n][~flags[s:s + n]] = IGNORE_INDEX
        pos = np.arange(t, dtype=np.int64) + (s if self.positions == "absolute" else 0)
        cut = {}
        for k, a in extras.items():
            a = np.asarray(a)
            out = np.zeros(t, a.dtype)
            out[b:b + n] = a[s:s + n]
            cut[k] = out
        return Window(input_ids, np.ones(t, bool), pos, labels, int(self.doc[r]) if doc is None else doc, s, r, cut)

    def gather(self, tokens: np.ndarray, doc_offsets: np.ndarray, rows=None, *, pad_id: int = 0,
               out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Fast path: content tokens of ``rows`` from one flat (e.g. memory-mapped) token array.

        ``tokens``: all documents concatenated, any integer dtype (kept); ``doc_offsets``: int64,
        ``(num_docs + 1,)``, document ``d`` is ``tokens[doc_offsets[d]:doc_offsets[d+1]]``. Returns
        ``(ids, lengths)``: ids ``(B, max length)`` padded with ``pad_id`` (find padding by length,
        never by id), lengths ``(B,)`` int64. Template tokens and labels are not added here.

        >>> plan = SlidingWindows(3, 2).plan([4, 2])
        >>> ids, n = plan.gather(np.arange(6, dtype=np.uint16), np.array([0, 4, 6]), pad_id=0)
        >>> ids.tolist(), n.tolist()
        ([[0, 1, 2], [1, 2, 3], [4, 5, 0]], [3, 3, 2])
        """
        from .._gather import gather_rows

        tokens = _token_array(tokens)
        rows = self.row_indices(rows)
        offs = check_array(doc_offsets, "doc_offsets")
        doc = self.doc[rows]
        if doc.size and int(doc.max()) + 1 >= offs.size:
            raise InputError(f"doc_offsets has {offs.size:,d} entries but the plan names document "
                             f"{int(doc.max()):,d}; pass one offset per document (plus the end)")
        src_start = offs[doc] + self.start[rows]
        lengths = self.length[rows]
        check_spans(src_start, lengths, tokens.size, "windows in tokens/doc_offsets")
        # each window inside its own document (offsets that disagree with the lengths the plan was made
        # for read the next document's tokens into a window, silently)
        over = (self.start[rows] < 0) | (src_start + lengths > offs[doc + 1])
        if over.any():
            k = int(np.argmax(over))
            d = int(doc[k])
            raise InputError(f"window {int(rows[k]):,d} reads tokens [{int(self.start[rows[k]]):,d}, "
                             f"{int(self.end[rows[k]]):,d}) of document {d:,d}, which doc_offsets make "
                             f"{int(offs[d + 1]) - int(offs[d]):,d} tokens long: doc_offsets disagree with the "
                             "lengths the plan was made for; pass the offsets of the same documents")
        width = int(lengths.max()) if lengths.size else 0
        if out is None:
            out = np.empty((rows.size, width), tokens.dtype)
        gather_rows(tokens, src_start, lengths, out, pad_id)
        return out, lengths

    def row_indices(self, rows=None) -> np.ndarray:
        """Row indices (int64, each in 0 .. len - 1) from indices, a boolean mask, or None (all rows);
        anything else is a ConfigError."""
        if rows is None:
            return np.arange(len(self), dtype=np.int64)
        r = np.asarray(rows)
        if r.dtype == bool:
            if r.shape != (len(self),):
                raise ConfigError(f"a boolean rows mask needs shape ({len(self):,d},), got {r.shape}")
            return np.flatnonzero(r)
        return check_array(r, "rows", min=0, max=max(len(self) - 1, 0) if len(self) else -1, error=ConfigError)


@dataclass(frozen=True)
class SlidingWindows:
    """Fixed-size sliding windows over token ids (see the module docstring for the exact rules).

    ``window_size``: tokens per materialized window, template included; ``stride``: step between
    starts (``stride > window_size`` is allowed; the gaps are reported); ``reserve``: room kept free
    for special tokens the caller adds later; ``template=(bos, eos)``: special-token ids added inside
    ``window_size`` (either may be None). The content size is ``window_size - max(reserve, number
    of template tokens)``: the template fills the reserved room. ``jitter``: ``"global"`` adds one
    offset in ``[0, stride)`` per epoch to every document's first start, ``"per_doc"`` one per
    document, both drawn from :func:`jitter_rng` ``(seed, epoch)``; the offset is added to
    ``start_offset`` before the clamp. ``positions``: ``"reset"`` numbers each materialized window
    0..T-1, ``"absolute"`` adds the window's start (the position in ``[bos] + document``).

    >>> sw = SlidingWindows(4, 2, template=(1, 2))
    >>> w = next(sw.windows([10, 11, 12, 13]))
    >>> w.input_ids.tolist(), w.labels.tolist()
    ([1, 10, 11, 2], [-100, 10, 11, -100])
    """

    window_size: int
    stride: int
    _: KW_ONLY
    start_offset: int = 0
    tail: Tail = "align"
    short: Short = "keep"
    max_windows_per_doc: int | None = None
    jitter: Jitter | None = None
    seed: int = 0
    positions: Positions = "reset"
    score: Score = "all"
    reserve: int = 0
    template: tuple[int | None, int | None] | None = None

    def __post_init__(self):
        # the integer options kept as Python ints (frozen: set through object.__setattr__)
        for name, minimum in (("window_size", 1), ("stride", 1), ("start_offset", 0), ("seed", 0), ("reserve", 0)):
            object.__setattr__(self, name, check_size(name, getattr(self, name), minimum))
        if self.max_windows_per_doc is not None:
            object.__setattr__(self, "max_windows_per_doc", check_size("max_windows_per_doc", self.max_windows_per_doc, 1))
        for name in _CHOICES:
            check_choice(name, getattr(self, name))
        if self.template is not None:
            if not isinstance(self.template, (tuple, list)) or len(self.template) != 2:
                raise ConfigError(f"template={self.template!r}; pass a pair (bos, eos), either may be None")
            object.__setattr__(self, "template", tuple(
                None if t is None else check_size(f"template {name}", t, 0) for name, t in zip(("bos", "eos"), self.template)))
        if self.reserve >= self.window_size:
            raise ConfigError(f"reserve={self.reserve:,d} leaves no room in window_size={self.window_size:,d}; "
                              "pass reserve < window_size")
        if self.capacity < 1:
            raise ConfigError(f"template {self.template!r} leaves no room in window_size={self.window_size:,d}; "
                              "pass a larger window_size")

    @property
    def bos(self) -> int | None:
        return None if self.template is None else self.template[0]

    @property
    def eos(self) -> int | None:
        return None if self.template is None else self.template[1]

    @property
    def capacity(self) -> int:
        """Document tokens per window: ``window_size`` minus the reserved/template room."""
        n_template = 0 if self.template is None else sum(t is not None for t in self.template)
        return self.window_size - max(self.reserve, n_template)

    def jitter_offsets(self, num_docs: int, epoch: int = 0, first_doc: int = 0) -> np.ndarray | int:
        """This epoch's jitter: an int (global), an int64 array (per_doc: documents ``first_doc`` to
        ``first_doc + num_docs - 1``) or 0 (no jitter)."""
        epoch = check_size("epoch", epoch, 0)
        num_docs = check_size("num_docs", num_docs, 0)
        first_doc = check_size("first_doc", first_doc, 0)
        if self.jitter is None:
            return 0
        rng = jitter_rng(self.seed, epoch)
        if self.jitter == "global":
            return int(rng.integers(0, self.stride))
        if first_doc > _MAX_JITTER_DOC:
            raise InputError(f"doc={first_doc:,d} with jitter='per_doc': a document's jitter is the generator's "
                             f"draw of that index, drawn in order, so at most doc {_MAX_JITTER_DOC:,d} "
                             "(2**32) is supported; plan the corpus with SlidingWindows.plan instead")
        while first_doc:  # skip the draws of the documents before: in blocks, the same stream as one call
            skip = min(first_doc, 1 << 20)
            rng.integers(0, self.stride, size=skip, dtype=np.int64)
            first_doc -= skip
        return rng.integers(0, self.stride, size=num_docs, dtype=np.int64)

    def plan(self, doc_lengths, epoch: int = 0) -> WindowPlan:
        """Place the windows of every document from its length alone; no token is read."""
        return self._plan(as_lengths(doc_lengths), epoch)

    def _plan(self, lengths: np.ndarray, epoch: int, first_doc: int = 0) -> WindowPlan:
        cols, stats = self.place_windows(lengths, epoch, first_doc=first_doc)
        scale = np.broadcast_to(np.int64(self.window_size), cols["doc"].shape)  # read-only view, no memory
        return WindowPlan(**sealed_columns(cols), scale=scale, stats=stats, bos=self.bos, eos=self.eos,
                          positions=self.positions, score=self.score, epoch=epoch, scale_stats=(stats,),
                          scale_sizes=(self.window_size,))

    def place_windows(self, lengths: np.ndarray, epoch: int, out=None,
                      first_doc: int = 0) -> tuple[dict[str, np.ndarray], PlanStats]:
        """The plan's columns (``doc, start, length, target_start``) and statistics for int64 ``lengths``;
        ``out``: preallocated columns of exactly :meth:`count_windows` rows (a multi-scale plan's slices);
        ``first_doc``: the corpus index of ``lengths[0]`` (its ``per_doc`` jitter; the columns count from 0)."""
        lengths = check_array(lengths, "lengths", min=0)
        jit = self.jitter_offsets(lengths.size, epoch, first_doc)
        cols, stats = place(lengths, self.capacity, self.stride, self.start_offset + jit, tail=self.tail,
                            short=self.short, max_windows_per_doc=self.max_windows_per_doc,
                            score=self.score, bos=self.bos is not None, out=out)
        if self.jitter == "global":
            stats = PlanStats(**{**stats.__dict__, "jitter": int(jit)})
        return cols, stats

    def count_windows(self, lengths: np.ndarray, epoch: int) -> int:
        """How many windows :meth:`place_windows` will place (the planner's first pass alone)."""
        from ._kernels import count_rows

        lengths = check_array(lengths, "lengths", min=0)
        if not lengths.size:
            return 0
        off = self.start_offset + self.jitter_offsets(lengths.size, epoch)
        args = (lengths, off, self.capacity, self.stride, self.tail, self.short == "keep", self.max_windows_per_doc or 0)
        if _python_first(lengths.size):
            return int(_place_numpy(*args, 1, False)[0]["doc"].size)
        return count_rows(*args)

    def windows(self, token_ids, epoch: int = 0, *, doc: int = 0, **extras) -> Iterator[Window]:
        """Lazily yield the windows of one token sequence; ``extras`` (e.g. ``token_type_ids=...``,
        ``loss_mask=...``) are per-token arrays cut the same way. ``doc``: the sequence's index in
        its corpus (reported in each window, and it selects the ``per_doc`` jitter, so the windows
        equal that document's rows of a corpus plan).

        >>> [w.input_ids.tolist() for w in SlidingWindows(3, 2).windows([5, 6, 7, 8])]
        [[5, 6, 7], [6, 7, 8]]
        """
        ids = check_array(token_ids, "token_ids", min=0)  # (an id of -100 would read as an ignored label)
        _check_extra_names(extras)
        for k, a in extras.items():
            if np.shape(a) != ids.shape:
                raise InputError(f"extra {k!r} has shape {np.shape(a)} but token_ids has {ids.shape}; "
                                 "extras must be aligned per token")
        doc = check_size("doc", doc, 0)
        # as document `doc` of a corpus: the same per_doc jitter, without placing the documents before it
        plan = self._plan(np.array([ids.shape[0]], np.int64), epoch, first_doc=doc)
        ex = {k: np.asarray(a) for k, a in extras.items()}
        for r in range(len(plan)):
            yield plan._window(r, ids, ids.shape[0], ex, doc=doc)


def _token_array(tokens) -> np.ndarray:
    """A flat integer token array, kept in its dtype (a memmap stays a view)."""
    try:
        a = np.asarray(tokens)
    except (TypeError, ValueError, RuntimeError) as e:  # a tensor on a GPU
        raise InputError(f"tokens is a {type(tokens).__name__} numpy cannot read ({e}); pass an array in main memory "
                         "(a torch tensor: tokens.cpu())") from None
    if a.ndim != 1:
        raise InputError(f"tokens has shape {a.shape}; pass the flat 1-D array of all documents' ids")
    if a.size and a.dtype.kind not in "iu":
        raise InputError(f"tokens has dtype {a.dtype}; token ids must be integers")
    return a if a.dtype.kind in "iu" else np.zeros(0, np.int64)


# -- placement for all documents at once ------------------------------------------------------------


def place(lengths: np.ndarray, capacity: int, stride: int, offset, *, tail: str = "align",
          short: str = "keep", max_windows_per_doc: int | None = None, score: str = "all",
          bos: bool = False, kernel: bool = True, out=None) -> tuple[dict[str, np.ndarray], PlanStats]:
    """Columns ``doc, start, length, target_start`` and the stats for all documents at once.

    ``offset``: the wanted first start, an int or an int64 array with one value per document.
    ``kernel=True``: two compiled passes over the documents (count, then fill the rows and sum the
    statistics); ``kernel=False``: the vectorized numpy twin :func:`_place_numpy`. Tests check that
    both agree, and both agree with :mod:`tokenmill.windows.reference`. ``out``: preallocated
    columns for the compiled path (multi-scale plans fill slices of one array).
    """
    L = lengths
    args = (L, offset, int(capacity), int(stride), tail, short == "keep", max_windows_per_doc or 0,
            0 if bos else 1, score == "new")
    if kernel and L.size and not _python_first(L.size):
        from ._kernels import plan_rows

        cols, acc = plan_rows(*args, out=out)
    else:
        cols, acc = _place_numpy(*args)
        if out is not None:
            cols = _into(out, cols)
    num_tokens = int(L.sum())
    known = acc["covered"] + acc["head"] + acc["tail_unc"] + acc["unc_short"]
    stats = PlanStats(
        num_docs=int(L.size), num_tokens=num_tokens, num_windows=int(cols["doc"].size), empty_docs=acc["empty"],
        short_docs=acc["short_docs"], short_docs_dropped=acc["short_dropped"], full_windows=acc["full"],
        tail_windows=acc["tail"], short_windows=acc["short"], windows_capped=acc["capped"],
        window_tokens=acc["window_tokens"], covered_tokens=acc["covered"], uncovered_head=acc["head"],
        uncovered_gap=num_tokens - known, uncovered_tail=acc["tail_unc"], uncovered_short=acc["unc_short"],
        target_tokens=acc["target_tokens"], unique_targets=acc["unique"],
        unscored_tokens=acc["covered"] - acc["unique"] - (acc["first_covered"] if not bos else 0),
    )
    return cols, stats


# A first run (the planner's kernels not compiled yet) plans up to this many documents in all with the
# numpy twin instead of compiling the two passes (~2 s).
FIRST_RUN_PYTHON_DOCS = 1 << 18


def _python_first(num_docs: int) -> bool:
    from .._jit import python_first
    from . import _plan_kernels

    return python_first("windows plan", [_plan_kernels.count, _plan_kernels.fill], num_docs, FIRST_RUN_PYTHON_DOCS)


def _into(out, cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The numpy path's columns copied into preallocated ``out`` columns (as the compiled path fills them)."""
    n = cols["doc"].size
    for name, col in cols.items():
        o = out[name]
        if not isinstance(o, np.ndarray) or o.dtype != np.int64 or o.shape != (n,) or not o.flags.writeable:
            raise ConfigError(f"out[{name!r}] must be a writeable int64 array of the plan's {n:,d} rows; "
                              "size the columns with count_windows")
        o[...] = col
    return out


def _place_numpy(L, offset, C, S, tail, keep_short_flag, k, lead, score_new):
    """Vectorized numpy twin of the compiled planner: the row columns and the summed statistics."""
    D = L.size
    first = np.minimum(np.asarray(offset, np.int64), np.maximum(L - C, 0))  # (D,)
    first = np.ascontiguousarray(np.broadcast_to(first, L.shape))
    has_full = L >= C
    nfull = np.where(has_full, (L - C - first) // S + 1, 0)  # (D,) full windows
    last_end = first + (nfull - 1) * S + C
    remains = has_full & (last_end < L)
    if tail == "align":
        has_tail, tail_start = remains, L - C
    elif tail == "pad":
        nxt = first + nfull * S
        has_tail, tail_start = remains & (nxt < L), nxt
    else:
        has_tail, tail_start = np.zeros(D, bool), L
    is_short = (L > 0) & (L < C)
    keep_short = is_short & keep_short_flag
    count = nfull + has_tail + keep_short  # (D,) windows per document before the cap
    kept = count if not k else np.minimum(count, k)
    capped = count > kept
    row0 = np.cumsum(kept) - kept  # (D,) first row of each document
    M = check_rows(int(kept.sum(dtype=np.float64)), "the window plan",
                   "raise the window size or stride, or pass max_windows_per_doc")

    doc = np.repeat(np.arange(D, dtype=np.int64), kept)  # (M,)
    start = np.arange(M, dtype=np.int64) * S - np.repeat(row0 * S - first, kept)  # first + i * S
    length = np.full(M, C, np.int64)
    t = np.flatnonzero(has_tail & ~capped)
    start[row0[t] + nfull[t]] = tail_start[t]
    length[row0[t] + nfull[t]] = L[t] - tail_start[t]
    s = np.flatnonzero(keep_short)
    start[row0[s]] = 0
    length[row0[s]] = L[s]
    full_windows = int(nfull[~capped].sum())
    if capped.any():  # evenly spread subset, first and last kept
        c = np.flatnonzero(capped)
        local = ranks_in_groups(kept[c])
        rows = np.repeat(row0[c], kept[c]) + local
        cd = doc[rows]
        j = spread_indices(local, count[cd], k)
        is_full = j < nfull[cd]
        start[rows] = np.where(is_full, first[cd] + j * S, tail_start[cd])
        length[rows] = np.where(is_full, C, L[cd] - tail_start[cd])
        full_windows += int(is_full.sum())
    end = start + length
    # ends never decrease within a document: the previous row's end is the furthest reached so far
    opens = row0[kept > 0]
    closes = opens + kept[kept > 0] - 1
    prev_end = np.zeros(M, np.int64)
    prev_end[1:] = end[:-1]
    prev_end[opens] = 0
    target_start = start + lead
    if score_new:
        target_start = np.maximum(target_start, prev_end)
    target_start = np.minimum(target_start, end)
    union = lambda lo: int(np.maximum(end - np.maximum(lo, prev_end), 0).sum())
    n_short = int(keep_short.sum())
    dropped = is_short & ~keep_short
    acc = {"covered": union(start), "unique": union(target_start), "head": int(start[opens].sum()),
           "tail_unc": int((L[kept > 0] - end[closes]).sum()), "full": full_windows,
           "tail": M - full_windows - n_short, "short": n_short, "window_tokens": int(length.sum()),
           "target_tokens": int((end - target_start).sum()), "capped": int((count - kept).sum()),
           "empty": int((L == 0).sum()), "short_docs": int(is_short.sum()), "short_dropped": int(dropped.sum()),
           "unc_short": int(L[dropped].sum()), "first_covered": int((start[opens] == 0).sum())}
    return {"doc": doc, "start": start, "length": length, "target_start": target_start}, acc
