"""The readable BPE algorithms every compiled path is tested against (the oracles).

Training, the textbook way: text to UTF-8 byte ids (0-255), count adjacent pairs with a size-2
stride-1 window, pick the most frequent pair (ties: the smaller pair), merge it left to right, repeat.
Ids are counted per chunk, so no merge crosses a pre-token or document boundary (joining documents
with spaces first would learn pairs across them). ``"低" * 30`` is 90 bytes: every Han character is
three UTF-8 bytes. ``train_bpe_naive`` and ``encode_naive`` are that, in a few lines each.

Encoding one chunk by merge rank (``encode_chunk``): merging two adjacent tokens ``(l, r)`` gives token
``m`` when ``pair_table[(l, r)] == m``; a lower ``m`` merges first (ranks are ids, as in tiktoken),
leftmost first on ties. For a trained tokenizer this is exactly "apply the merges in rank order", and
for a tiktoken rank file it is exactly tiktoken's rule. A heap over pair positions keeps it
O(n log n) in the chunk length, so a 10 MB run of one letter is no trap. ``PythonEncoder`` splits and
encodes whole texts with it: the twin of the compiled encoder.
"""

from __future__ import annotations

import heapq
from collections import Counter
from typing import Iterable, Sequence

from ..pretokenize.patterns import split_with_gaps
from .tables import pair_dict

_CACHE_LIMIT = 1 << 17  # chunk cache entries before it is cleared

Pair = tuple[int, int]


def text_to_ids(text: str) -> list[int]:
    """UTF-8 bytes as ids 0-255.

    >>> text_to_ids("低")
    [228, 189, 142]
    """
    return list(text.encode("utf-8"))


def count_pairs(ids: Sequence[int], counts: Counter | None = None, weight: int = 1) -> Counter:
    """Count adjacent pairs with a window of size 2 and stride 1 (adds into ``counts`` if given).

    >>> dict(count_pairs([1, 2, 3, 1, 2]))
    {(1, 2): 2, (2, 3): 1, (3, 1): 1}
    """
    counts = Counter() if counts is None else counts
    for pair in zip(ids, ids[1:]):
        counts[pair] += weight
    return counts


def merge_ids(ids: Sequence[int], pair: Pair, new_id: int) -> list[int]:
    """Replace every occurrence of ``pair``, scanning left to right without overlap.

    >>> merge_ids([1, 2, 3, 1, 2], (1, 2), 99)
    [99, 3, 99]
    >>> merge_ids([5, 5, 5], (5, 5), 9)  # non-overlapping: the third 5 stays
    [9, 5]
    """
    out: list[int] = []
    i, n = 0, len(ids)
    while i < n:
        if i + 1 < n and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def best_pair(counts: Counter) -> Pair:
    """Most frequent pair; ties go to the smaller pair, so results never depend on dict order."""
    return min(counts, key=lambda p: (-counts[p], p))


def train_bpe_naive(chunks: Iterable[bytes], vocab_size: int) -> list[tuple[Pair, int]]:
    """Learn ``vocab_size - 256`` merges (fewer if pairs run out) over separate byte chunks.

    Returns ``[(pair, new_id), ...]`` in rank order; merge ``i`` gets id ``256 + i``.
    Full recount per merge: O(merges x corpus). Only for tests and teaching.

    >>> [(p, i) for p, i in train_bpe_naive([("低" * 30).encode()], 258)]
    [((189, 142), 256), ((228, 256), 257)]
    """
    seqs = [list(c) for c in chunks]
    merges: list[tuple[Pair, int]] = []
    for new_id in range(256, vocab_size):
        counts: Counter = Counter()
        for s in seqs:
            count_pairs(s, counts)
        if not counts:
            break
        pair = best_pair(counts)
        seqs = [merge_ids(s, pair, new_id) for s in seqs]
        merges.append((pair, new_id))
    return merges


def encode_naive(chunk: bytes, ranks: dict[Pair, int]) -> list[int]:
    """Encode one chunk by applying merges in rank order: always merge the lowest-ranked pair present.

    >>> encode_naive(b"aab", {(97, 97): 256, (256, 98): 257})
    [257]
    """
    ids = list(chunk)
    while len(ids) > 1:
        pair = min(zip(ids, ids[1:]), key=lambda p: ranks.get(p, float("inf")))
        if pair not in ranks:
            break
        ids = merge_ids(ids, pair, ranks[pair])
    return ids


def encode_chunk(ids: list[int], pair_table: dict[tuple[int, int], int], result=None) -> list[int]:
    """Merge ``ids`` (base token ids of one chunk) by rank.

    ``result``: None when ``pair_table`` gives the merged id itself (its rank); else the table gives
    the merge's priority and ``result[priority]`` the merged id (imported merge lists, as HF applies
    them: lowest priority first, leftmost on ties).

    >>> encode_chunk([97, 97, 98], {(97, 97): 256, (256, 98): 257})
    [257]
    """
    n = len(ids)
    if n < 2:
        return list(ids)
    ids = list(ids)
    nxt = list(range(1, n + 1))
    nxt[-1] = -1
    prv = list(range(-1, n - 1))
    heap = []
    for i in range(n - 1):
        m = pair_table.get((ids[i], ids[i + 1]))
        if m is not None:
            heap.append((m, i, ids[i], ids[i + 1]))
    heapq.heapify(heap)
    while heap:
        m, i, left, right = heapq.heappop(heap)
        j = nxt[i]
        if ids[i] != left or j < 0 or ids[j] != right:
            continue  # stale: one side was merged away since this entry was queued
        new = m if result is None else int(result[m])
        ids[i], ids[j] = new, -1
        k = nxt[j]
        nxt[i] = k
        if k >= 0:
            prv[k] = i
            mk = pair_table.get((new, ids[k]))
            if mk is not None:
                heapq.heappush(heap, (mk, i, new, ids[k]))
        h = prv[i]
        if h >= 0:
            mh = pair_table.get((ids[h], new))
            if mh is not None:
                heapq.heappush(heap, (mh, h, ids[h], new))
    return [t for t in ids if t >= 0]


class PythonEncoder:
    """The readable pure-Python encoder of a :class:`~tokenmill.tokenizer.spec.TokenizerSpec`: split
    with ``regex``, each chunk merged by :func:`encode_chunk`, chunks cached. The twin the compiled
    encoder is tested against, and what a first run uses while the kernels are not compiled."""

    def __init__(self, spec, pair_table, byte_ids: list[int]):
        self.spec = spec
        self.pairs = pair_dict(pair_table)
        self.byte_ids = byte_ids
        self.whole = {b: i for i, b in enumerate(spec.vocab) if b is not None} if spec.whole_chunk_lookup else None
        self.cache: dict[bytes, tuple[int, ...]] = {}

    def encode(self, text: str) -> list[int]:
        """The ids of plain text (no special or added tokens in it)."""
        out: list[int] = []
        for chunk in self.split(text):
            out.extend(self.encode_chunk(chunk.encode("utf-8")))
        return out

    def split(self, text: str) -> list[str]:
        spec = self.spec
        if not text:
            return []
        if spec.add_prefix_space and not text.startswith(" "):
            text = " " + text
        if spec.pattern is None:
            return [text]
        chunks = split_with_gaps(spec.pattern, text)
        for p in spec.split_patterns:
            chunks = [c for chunk in chunks for c in split_with_gaps(p, chunk)]
        return chunks

    def encode_chunk(self, chunk: bytes) -> tuple[int, ...]:
        hit = self.cache.get(chunk)
        if hit is not None:
            return hit
        if self.whole is not None and chunk in self.whole:
            ids = (self.whole[chunk],)  # tiktoken's whole-chunk shortcut
        else:
            ids = tuple(encode_chunk([self.byte_ids[c] for c in chunk], self.pairs, self.spec.merge_ids))
        if len(self.cache) >= _CACHE_LIMIT:
            self.cache.clear()
        self.cache[chunk] = ids
        return ids
