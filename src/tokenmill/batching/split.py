"""Split documents into train and validation *before* any cutting or packing, by group.

Packing a mixed stream and then drawing random blocks for validation leaks: neighbouring pieces of
one document (or of one source, one author) land on both sides. Here whole groups go to one side,
and each side is then packed on its own.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError


@dataclass(frozen=True, eq=False)
class Split:
    """Sorted int64 document indices of each side, and the number of groups on each side."""

    train: np.ndarray
    val: np.ndarray
    train_groups: int
    val_groups: int

    @property
    def val_fraction(self) -> float:
        n = self.train.size + self.val.size
        return self.val.size / n if n else 0.0


def split_documents(groups, val_fraction: float, *, seed: int = 0) -> Split:
    """Assign every group (source, author, any hashable key; one per document) wholly to train or
    to validation, so that validation holds about ``val_fraction`` of the documents.

    Groups are ordered by a seeded hash of their key (independent of document order) and taken into
    validation until it reaches ``round(val_fraction * n)`` documents; the result is deterministic for
    a seed and never puts one group on both sides.

    Rules: ``val_fraction`` must lie strictly inside ``(0, 1)``; ``groups`` needs at least 2 distinct
    keys (else ConfigError); neither side is ever empty: validation gets at least one group (even when
    ``val_fraction * n`` rounds to 0) and train keeps at least one (even when the first groups already
    exceed the target), so the realized ``Split.val_fraction`` can differ from the request when groups
    are large.

    >>> s = split_documents(["a", "a", "b", "c", "c", "d"], 0.3, seed=1)
    >>> s.train.tolist(), s.val.tolist()
    ([0, 1, 3, 4], [2, 5])
    >>> set(s.train) & set(s.val)
    set()
    """
    if not 0.0 < float(val_fraction) < 1.0:
        raise ConfigError(f"val_fraction={val_fraction!r} must be between 0 and 1 (exclusive)")
    keys = list(groups)
    n = len(keys)
    codes: dict = {}
    doc_group = np.fromiter((codes.setdefault(k, len(codes)) for k in keys), np.int64, n)
    if len(codes) < 2:
        raise ConfigError(f"{len(codes)} distinct group(s) cannot be split into train and validation; "
                          "pass finer groups (e.g. one per document)")
    rank = np.array([_seeded_hash(k, seed) for k in codes], dtype=np.uint64)
    order = np.argsort(rank, kind="stable")  # group codes in hash order
    sizes = np.bincount(doc_group, minlength=len(codes))[order]
    target = max(1, round(float(val_fraction) * n))
    # Take groups while validation is still short of the target; always leave one group for train.
    before = np.cumsum(sizes) - sizes
    take = before < target
    if take.all():
        take[-1] = False
    is_val = np.zeros(len(codes), dtype=bool)
    is_val[order[take]] = True
    val_docs = is_val[doc_group]
    return Split(np.flatnonzero(~val_docs), np.flatnonzero(val_docs), int((~is_val).sum()), int(is_val.sum()))


def _seeded_hash(key, seed: int) -> int:
    digest = hashlib.blake2b(f"{seed}\x00{type(key).__name__}\x00{key!r}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")
