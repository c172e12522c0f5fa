"""Encoding one chunk by merge rank, and the pair table it uses.

A vocabulary is an id -> bytes list. Merging two adjacent tokens ``(l, r)`` gives token ``m`` when
``pair_table[(l, r)] == m``; a lower ``m`` merges first (ranks are ids, as in tiktoken). Encoding a
chunk repeatedly merges the adjacent pair with the lowest resulting id, leftmost first on ties.
For a trained tokenizer this is exactly "apply the merges in rank order", and for a tiktoken rank
file it is exactly tiktoken's rule. A heap over pair positions keeps it O(n log n) in the chunk
length, so a 10 MB run of one letter is no trap.
"""

from __future__ import annotations

import heapq

from ..pretokenize.patterns import split_with_gaps
from .tables import pair_dict

_CACHE_LIMIT = 1 << 17  # chunk cache entries before it is cleared


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
