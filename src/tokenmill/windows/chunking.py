"""Retrieval chunking with exact character spans, BM25 over token ids, and context assembly.

Cut a long knowledge source into overlapping windows, score them against a query,
and put the best ones into a prompt within a token budget::

    text        |=================================================================|
    chunks      [c0------]     [c2------]     [c4------]     [c6------]
                     [c1------]     [c3------]     [c5------]
    scores        .1    .9    .8    .0    .0    .7    .2
    budget 24   pick c1, c2 (overlap merged into one piece), c5 -> pieces in document order

Chunks are sliding windows (:class:`~tokenmill.windows.SlidingWindows`, ``tail="align"``) over the
text's tokens; each has its token range and the character span ``text[chunk.span]``, snapped so
that a character belongs to the token holding its first byte (see ``_text``). Chunks of
non-overlapping windows (``stride == window``, ``tail="pad"``; with ``"align"`` the last one ends at the text's
end, overlapping the one before) therefore partition the text exactly.
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .._validate import check_array, check_float, check_int
from ..errors import ConfigError, InputError
from ._text import encode_with_offsets
from .sliding import SlidingWindows


@dataclass(frozen=True, eq=False)
class Chunk:
    """One chunk: tokens ``[token_start, token_end)``, characters ``[start, end)`` of the source text;
    ``source``: that text's digest (``text_digest``), which keeps chunks of different texts apart."""

    index: int
    token_start: int
    token_end: int
    start: int
    end: int
    text: str
    ids: np.ndarray  # (token_end - token_start,) int64
    source: str = ""

    @property
    def span(self) -> slice:
        """``source_text[chunk.span] == chunk.text``."""
        return slice(self.start, self.end)

    @property
    def num_tokens(self) -> int:
        return self.token_end - self.token_start


def chunk_text(text: str, tokenizer, window: int, stride: int, *, tail: str = "align") -> list[Chunk]:
    """Cut ``text`` into windows of ``window`` tokens every ``stride`` tokens, with character spans.

    >>> class Bytes:
    ...     def encode_ordinary(self, text): return list(text.encode())
    ...     def token_bytes(self, i): return bytes([i])
    >>> text = "ab中cd"
    >>> [(c.text, c.span) for c in chunk_text(text, Bytes(), 3, 2)]  # bytes 61 62 e4 b8 ad 63 64
    [('ab中', slice(0, 3, None)), ('中', slice(2, 3, None)), ('cd', slice(3, 5, None))]
    """
    window = check_int(window, "window", min=1)  # (named as chunk_text names it, not SlidingWindows' window_size)
    stride = check_int(stride, "stride", min=1)
    ids, bounds = encode_with_offsets(text, tokenizer)
    plan = SlidingWindows(window, stride, tail=tail).plan([ids.size])
    source = text_digest(text)
    out = []
    for i, (a, n) in enumerate(zip(plan.start.tolist(), plan.length.tolist())):
        s, e = int(bounds[a]), int(bounds[a + n])
        out.append(Chunk(i, a, a + n, s, e, text[s:e], ids[a:a + n], source))
    return out


def text_digest(text: str) -> str:
    """The ``source`` of a text's chunks: ``sha256:`` and the first 32 hex digits of its UTF-8's sha256 (the
    same text chunked twice gives chunks of one source; ~1 ms a MB, against ~10 for encoding it)."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def bm25_scores(query_ids, documents: Sequence, *, k1: float = 1.5, b: float = 0.75) -> np.ndarray:
    """Okapi BM25 of each document (a sequence of token ids) for the query's distinct ids.

    ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``; ``score = sum idf * tf (k1 + 1) / (tf + k1 (1 - b +
    b |d| / avgdl))``. Repeated query ids count once. Returns float64 ``(len(documents),)``.

    >>> bm25_scores([7], [[1, 2], [7, 7, 3], [7, 1]]).round(3).tolist()
    [0.0, 0.615, 0.502]
    """
    k1 = check_float(k1, "k1", min=0.0)
    b = check_float(b, "b", min=0.0, max=1.0)
    q = check_array(query_ids, "query_ids", ndim=None, min=0)
    if q.ndim > 1:  # (flattened, several queries had read as one)
        raise ConfigError(f"query_ids has shape {q.shape}; pass one query's ids (one call a query)")
    q = np.unique(q.ravel())
    if isinstance(documents, (str, bytes)) or not hasattr(documents, "__iter__"):
        raise ConfigError(f"documents is a {type(documents).__name__}; pass a list of token-id sequences, one per "
                          "document")
    documents = list(documents)
    if any(np.ndim(d) == 0 for d in documents):  # [1, 2, 3] is one document's ids, not three documents
        raise ConfigError("documents holds a bare id; pass a list of token-id sequences, one per document "
                          "([ids] for one document)")
    docs = [check_array(d, f"document {i}", min=0) for i, d in enumerate(documents)]  # (1-D: 2-D was flattened)
    n = len(docs)
    if n == 0:
        return np.zeros(0)
    dl = np.array([d.size for d in docs], np.float64)
    flat = np.concatenate(docs) if n else np.zeros(0, np.int64)
    owner = np.repeat(np.arange(n), dl.astype(np.int64))
    hit = np.isin(flat, q)
    term = np.searchsorted(q, flat[hit])
    tf = np.zeros((n, q.size))
    np.add.at(tf, (owner[hit], term), 1.0)
    df = (tf > 0).sum(axis=0)
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    avgdl = dl.mean() if dl.mean() > 0 else 1.0
    norm = k1 * (1 - b + b * dl / avgdl)
    denom = tf + norm[:, None]
    # a term absent from a document adds 0, also where the denominator is 0 (k1=0, or an empty chunk
    # with b=1), where the formula's limit is 0 and a plain division would give NaN
    part = np.divide(tf * (k1 + 1), denom, out=np.zeros_like(tf), where=denom > 0)
    return (idf * part).sum(axis=1)


@dataclass(frozen=True)
class ContextPiece:
    """Merged chunks of one text: tokens ``[token_start, token_end)``, text ``source_text[start:end]``;
    ``source``: that text's digest (the chunks' ``source``)."""

    token_start: int
    token_end: int
    start: int
    end: int
    text: str
    chunks: tuple[int, ...]  # indices of the chunks merged here
    score: float  # best score among them
    source: str = ""

    @property
    def span(self) -> slice:
        return slice(self.start, self.end)

    @property
    def num_tokens(self) -> int:
        return self.token_end - self.token_start


class _Union:
    """A union of token ranges as sorted disjoint ones: what a range would add to it, and adding it, in
    O(log n + the ranges it overlaps) (summing the union of all ranges again for each chunk made
    ``assemble_context`` quadratic: 4,000 chunks 0.6 s)."""

    def __init__(self):
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.size = 0

    def _span(self, a: int, e: int) -> tuple[int, int, int]:
        """``(new tokens, first, last + 1)``: the ranges ``first .. last`` overlap ``[a, e)``."""
        i = bisect.bisect_right(self.ends, a)  # the first range ending after a
        j, overlap = i, 0
        while j < len(self.starts) and self.starts[j] < e:
            overlap += min(e, self.ends[j]) - max(a, self.starts[j])
            j += 1
        return max(e - a, 0) - overlap, i, j

    def added(self, a: int, e: int) -> int:
        return self._span(a, e)[0]

    def add(self, a: int, e: int) -> None:
        if e <= a:
            return
        new, i, j = self._span(a, e)
        if i < j:
            a, e = min(a, self.starts[i]), max(e, self.ends[j - 1])
        self.starts[i:j], self.ends[i:j] = [a], [e]
        self.size += new


def assemble_context(chunks: Sequence[Chunk], scores=None, budget_tokens: int | None = None, *,
                     query_ids=None) -> list[ContextPiece]:
    """Pick the best-scoring chunks whose merged tokens fit ``budget_tokens``; merge overlapping or
    touching neighbours; return the pieces in document order.

    Greedy by score (ties: earlier chunk first); a chunk that does not fit is skipped and smaller
    later ones may still fit. Overlapping tokens count once toward the budget. ``scores=None``
    scores the chunks with :func:`bm25_scores` against ``query_ids``. ``budget_tokens=None`` means no
    limit: every chunk is taken (merged and in document order).

    Chunks of several texts (``chunk_text`` of each, one list: a corpus searched at once) stay apart by
    their ``source``: only chunks of one text merge or share tokens, and the pieces come text by text,
    in the order each text's first chunk has in ``chunks``, each text's pieces in document order.

    >>> class Bytes:
    ...     def encode_ordinary(self, text): return list(text.encode())
    ...     def token_bytes(self, i): return bytes([i])
    >>> chunks = chunk_text("aaaa bbbb cccc", Bytes(), 5, 5)
    >>> [p.text for p in assemble_context(chunks, [0.1, 0.9, 0.5], 10)]
    ['bbbb cccc']
    """
    if isinstance(chunks, (str, bytes)) or not hasattr(chunks, "__iter__"):
        raise ConfigError(f"chunks is a {type(chunks).__name__}; pass the Chunks of chunk_text")
    chunks = list(chunks)
    bad = next((c for c in chunks if not isinstance(c, Chunk)), None)
    if bad is not None:
        raise ConfigError(f"chunks holds a {type(bad).__name__}; pass the Chunks of chunk_text")
    budget = check_int(budget_tokens, "budget_tokens", min=0, none=True)
    if budget is None:
        budget = sum(c.num_tokens for c in chunks)  # no limit: everything fits
    if scores is None:
        if query_ids is None:
            raise ConfigError("pass scores (one per chunk) or query_ids for the default BM25 scorer")
        scores = bm25_scores(query_ids, [c.ids for c in chunks])
    elif query_ids is not None:  # (query_ids had been ignored)
        raise ConfigError("pass scores or query_ids, not both: query_ids are scored by BM25 only when scores is None")
    try:
        scores = np.asarray(scores)
    except (TypeError, ValueError, RuntimeError) as e:  # (RuntimeError: a tensor that requires grad)
        raise ConfigError(f"scores must be numbers, one per chunk, that numpy can read ({e})") from None
    if scores.size and scores.dtype.kind not in "iuf":  # ("0.1" strings, bools, None: never coerced)
        raise ConfigError(f"scores has dtype {scores.dtype}; it must hold numbers (int or float), one per chunk: "
                          "strings, bools and None are not converted")
    scores = scores.astype(np.float64)
    if scores.shape == (len(chunks),) and np.isnan(scores).any():
        raise InputError(f"scores hold NaN at chunk {int(np.argmax(np.isnan(scores))):,d}; NaN cannot be ranked")
    if scores.shape != (len(chunks),):
        raise InputError(f"scores has shape {scores.shape} but there are {len(chunks):,d} chunks; pass one score each")
    rank = {}  # source -> its place: the order of each text's first chunk
    for c in chunks:
        rank.setdefault(c.source, len(rank))
    chosen: list[int] = []
    taken = {src: _Union() for src in rank}  # each text's tokens taken
    size = 0
    for i in sorted(range(len(chunks)), key=lambda i: (-scores[i], i)):
        c = chunks[i]
        new = taken[c.source].added(c.token_start, c.token_end)
        if size + new <= budget:
            chosen.append(i)
            taken[c.source].add(c.token_start, c.token_end)
            size += new
    order = sorted(chosen, key=lambda i: (rank[chunks[i].source], chunks[i].token_start, i))
    return _merge([(chunks[i], float(scores[i])) for i in order])


def _merge(items: list[tuple[Chunk, float]]) -> list[ContextPiece]:
    pieces: list[ContextPiece] = []
    for c, score in items:
        last = pieces[-1] if pieces else None
        if last is not None and last.source == c.source and c.token_start <= last.token_end:
            text = last.text + c.text[max(last.end - c.start, 0):] if c.end > last.end else last.text
            pieces[-1] = ContextPiece(last.token_start, max(last.token_end, c.token_end), last.start,
                                      max(last.end, c.end), text, last.chunks + (c.index,),
                                      max(last.score, score), c.source)
        else:
            pieces.append(ContextPiece(c.token_start, c.token_end, c.start, c.end, c.text, (c.index,), score,
                                       c.source))
    return pieces
