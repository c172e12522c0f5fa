"""Pure-Python (and plain numpy) twins of the batching kernels: short, readable, and the oracles the
kernels are tested against (same inputs, same tie-breaking, identical outputs)."""

from __future__ import annotations

import bisect

import numpy as np

from ..conventions import IGNORE_INDEX
from ..errors import ConfigError
from .batch import Batch, check_fragment_positions


def best_fit(lengths: list[int], capacity: int) -> tuple[list[int], int]:
    """Each item goes to the open block with the least room >= its length; ties: most recent.

    >>> best_fit([5, 4, 3, 2, 1], 6)   # 5|1 ; 4|2 ; 3
    ([0, 1, 2, 1, 0], 3)
    """
    stacks: dict[int, list[int]] = {}  # room -> blocks with that room, most recent last
    rooms: list[int] = []  # sorted rooms that have at least one block
    assign, nblocks = [], 0
    for need in lengths:
        k = bisect.bisect_left(rooms, need)
        if k == len(rooms):
            b, left = nblocks, capacity - need
            nblocks += 1
        else:
            room = rooms[k]
            b = stacks[room].pop()
            if not stacks[room]:
                del stacks[room], rooms[k]
            left = room - need
        assign.append(b)
        if left > 0:
            if left not in stacks:
                stacks[left] = []
                bisect.insort(rooms, left)
            stacks[left].append(b)
    return assign, nblocks


def first_fit(lengths: list[int], capacity: int) -> tuple[list[int], int]:
    """Each item goes to the lowest-numbered block with room for it.

    >>> first_fit([5, 4, 3, 2, 1], 6)   # 5|1 ; 4|2 ; 3
    ([0, 1, 2, 1, 0], 3)
    """
    room: list[int] = []
    assign = []
    for need in lengths:
        b = next((i for i, r in enumerate(room) if r >= need), len(room))
        if b == len(room):
            room.append(capacity)
        room[b] -= need
        assign.append(b)
    return assign, len(room)


def greedy(lengths: list[int], capacity: int) -> tuple[list[int], int]:
    """In order; a new block whenever the next item does not fit the current one.

    >>> greedy([5, 1, 4, 3, 2], 6)   # 5 1 | 4 | 3 2
    ([0, 0, 1, 2, 2], 3)
    """
    assign, b, used = [], -1, capacity
    for need in lengths:
        if used + need > capacity:
            b, used = b + 1, 0
        assign.append(b)
        used += need
    return assign, b + 1


def assemble(fill, seg_row: np.ndarray, seg_doc: np.ndarray, seg_start: np.ndarray, seg_len: np.ndarray,
             *, num_rows: int, row_length: int, pad_id: int, stream: bool = False,
             fragment_positions: str = "restart", truncated_tokens: int = 0) -> Batch:
    """Vectorized numpy twin of :func:`tokenmill.batching.layout.assemble` (same arguments, same Batch)."""
    check_fragment_positions(fragment_positions)
    B, T = int(num_rows), int(row_length)
    seg_len = np.asarray(seg_len, np.int64)
    used = np.bincount(seg_row, weights=seg_len, minlength=B).astype(np.int64)  # (B,)
    if used.size > B or (used > T).any():
        raise ConfigError(f"a row holds {int(used.max()):,d} tokens, more than row_length={T:,d}")
    row_first = np.arange(B, dtype=np.int64) * T
    # Destination of every real segment: its row's start plus the lengths before it in that row.
    seg_end_in_row = np.cumsum(seg_len) - np.repeat(np.cumsum(used) - used, np.bincount(seg_row, minlength=B))
    seg_dst = row_first[seg_row] + seg_end_in_row - seg_len  # (S,)

    N = B * T
    input_ids = np.full(N, pad_id, dtype=np.int64)
    fill(input_ids, seg_dst)
    doc_ids = np.full(N, -1, dtype=np.int64)
    token_offsets = np.full(N, -1, dtype=np.int64)
    real = np.zeros(N, dtype=bool)
    idx = np.arange(N, dtype=np.int64)
    if seg_len.size:
        seg_of_pos = np.repeat(np.arange(seg_len.size), seg_len)  # (tokens,)
        pos = np.repeat(seg_dst - seg_start, seg_len)
        real_idx = np.repeat(seg_dst, seg_len) + (np.arange(seg_of_pos.size) - np.repeat(np.cumsum(seg_len) - seg_len, seg_len))
        doc_ids[real_idx] = seg_doc[seg_of_pos]
        token_offsets[real_idx] = real_idx - pos
        real[real_idx] = True

    # Attention segments: documents (or one stream per row), then the row's padding.
    if stream:
        a_start = row_first
        a_len = used
        a_doc_start = np.zeros(B, np.int64)
    else:
        a_start, a_len, a_doc_start = seg_dst, seg_len, np.asarray(seg_start, np.int64)
    pad_len = T - used
    starts = np.concatenate([a_start, row_first + used])
    lens = np.concatenate([a_len, pad_len])
    offs = np.concatenate([a_doc_start if fragment_positions == "continue" and not stream
                           else np.zeros_like(a_start), np.zeros(B, np.int64)])
    keep = lens > 0
    order = np.argsort(starts[keep], kind="stable")
    starts, lens, offs = starts[keep][order], lens[keep][order], offs[keep][order]

    position_ids = idx - np.repeat(starts - offs, lens)
    target = real.copy()
    target[starts] = False  # first position of every segment: nothing before it to predict from
    labels = np.where(target, input_ids, IGNORE_INDEX)
    cu = np.concatenate([[0], np.cumsum(lens)])
    if N > np.iinfo(np.int32).max:
        raise ConfigError(f"a batch of {N:,d} positions overflows int32 cu_seqlens; use fewer rows per batch")
    shape = (B, T)
    return Batch(input_ids.reshape(shape), labels.reshape(shape), position_ids.reshape(shape),
                 real.reshape(shape), doc_ids.reshape(shape), token_offsets.reshape(shape),
                 cu.astype(np.int32), int(lens.max()) if lens.size else 0, int(truncated_tokens))
