"""The textbook algorithms, small and readable: the oracles every fast path is tested against.

Seed 002 builds byte-level BPE in four steps: text to UTF-8 byte ids, count adjacent pairs with a
size-2 stride-1 window, pick the most frequent pair (ties: the smaller pair), merge it left to right.
Two of the seed's slips are fixed here: ``"低" * 30`` is 90 bytes (not 60), and the ids are counted
per chunk so that no merge crosses a pre-token or document boundary (the seed's ``" ".join(texts)``
would learn pairs across documents, which its own section 5.5 warns against).
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence

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
