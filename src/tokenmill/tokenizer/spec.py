"""What a tokenizer is, as data: the immutable, public specification every file format writes from.

A :class:`TokenizerSpec` holds the vocabulary (each id's bytes), the merges and their resulting ids,
the split patterns, the normalizer, the prefix space rule, and the special and added tokens: all a
writer of a tokenizer file (tokenmill's own, tokenizer.json, a tiktoken rank file) needs, without
reading a :class:`~tokenmill.tokenizer.model.Tokenizer`'s private state. ``Tokenizer.spec`` returns it.

>>> from tokenmill import Tokenizer
>>> s = Tokenizer.from_merges([(104, 105)], special_tokens=["<|endoftext|>"]).spec
>>> s.vocab[256], s.merges.tolist(), dict(s.special_tokens)
(b'hi', [[104, 105]], {'<|endoftext|>': 257})
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

import numpy as np

from .added import AddedToken


@dataclass(frozen=True, eq=False)
class TokenizerSpec:
    """The immutable description of a byte-level BPE tokenizer (arrays read-only, mappings frozen)."""

    vocab: tuple  # id -> the token's bytes, or None for an id only an added or special token holds
    merges: np.ndarray | None  # (M, 2) int64 pairs in merge order; None for a rank file (ranks = ids)
    merge_ids: np.ndarray | None  # (M,) the id each merge produces; None when merge i makes id 256 + i
    pattern: str | None  # the split pattern (regex) before BPE; None: the whole text is one piece
    split_patterns: tuple  # further patterns, each splitting the pieces of the one before
    normalizer: str | None  # None or "NFC"
    add_prefix_space: bool  # a space before every piece that does not start with one (HF ByteLevel)
    whole_chunk_lookup: bool  # a piece that is a vocabulary token is that token (tiktoken, HF ignore_merges)
    special_tokens: Mapping[str, int]
    added_tokens: tuple | None  # AddedToken entries of a tokenizer.json import, else None

    @classmethod
    def of(cls, *, vocab, merges, merge_ids, pattern, split_patterns, normalizer, add_prefix_space,
           whole_chunk_lookup, special_tokens, added_tokens) -> "TokenizerSpec":
        def frozen(a):
            if a is None:
                return None
            a = np.array(a, np.int64, copy=True)
            a.setflags(write=False)
            return a

        added = None if added_tokens is None else tuple(added_tokens)
        if added is not None and not all(isinstance(t, AddedToken) for t in added):
            raise TypeError("added_tokens must be AddedToken entries")
        return cls(tuple(vocab), frozen(merges), frozen(merge_ids), pattern, tuple(split_patterns), normalizer,
                   bool(add_prefix_space), bool(whole_chunk_lookup), MappingProxyType(dict(special_tokens)), added)


@dataclass(frozen=True)
class MergeTrace:
    """The training trace: for each merge its rank, pair, new id, count and bytes."""

    pairs: np.ndarray  # (M, 2) int64
    counts: np.ndarray  # (M,) int64, weighted occurrences when merged
    token_bytes: tuple[bytes, ...]  # (M,) bytes of each new token

    @property
    def new_ids(self) -> np.ndarray:
        return np.arange(256, 256 + len(self.counts), dtype=np.int64)

    def __len__(self) -> int:
        return len(self.counts)

    def rows(self):
        """Yield ``(rank, (left, right), new_id, count, bytes)`` per merge."""
        for i, ((a, b), c, tb) in enumerate(zip(self.pairs.tolist(), self.counts.tolist(), self.token_bytes)):
            yield i, (a, b), 256 + i, c, tb

    def __iter__(self):
        """The rows, as :meth:`rows` gives them (``for rank, pair, new_id, count, token in tok.trace``)."""
        return self.rows()

    def __getitem__(self, rank):
        """Merge ``rank``'s row ``(rank, (left, right), new_id, count, bytes)``; negative ranks count from the
        last merge, as a list's do; a slice (``tok.trace[:5]``) gives a list of rows."""
        n = len(self.counts)
        if isinstance(rank, slice):
            return [self[i] for i in range(*rank.indices(n))]
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)):
            raise TypeError(f"a trace row is read by its merge rank (an int) or a slice of them, not a "
                            f"{type(rank).__name__}")
        i = int(rank) + n if rank < 0 else int(rank)
        if not 0 <= i < n:
            raise IndexError(f"merge rank {int(rank)} is outside 0 .. {n - 1} (the trace holds {n:,d} merges)")
        a, b = self.pairs[i].tolist()
        return i, (a, b), 256 + i, int(self.counts[i]), self.token_bytes[i]

    def __repr__(self) -> str:  # (the dataclass's printed every array: 84 KB for 8k merges)
        return f"MergeTrace({len(self):,d} merges)"
