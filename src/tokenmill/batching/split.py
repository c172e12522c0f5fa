"""Split documents into train and validation *before* any cutting or packing, by group.

Packing a mixed stream and then drawing random blocks for validation leaks: neighbouring pieces of
one document (or of one source, one author) land on both sides. Here whole groups go to one side,
and each side is then packed on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validate import check_float, check_int, check_texts
from ..data.split import assign_groups, checked_keys
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

    The rule is the one of ``TokenStore.split`` (:func:`tokenmill.data.split.assign_groups`): groups
    are ordered by a seeded hash of their key (independent of document order) and taken into
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
    if not 0.0 < check_float(val_fraction, "val_fraction") < 1.0:
        raise ConfigError(f"val_fraction={val_fraction!r} must be between 0 and 1 (exclusive)")
    seed = check_int(seed, "seed", min=0, max=2**63 - 1)  # (1.5 or -1 split as some other integer would)
    if hasattr(groups, "__array__") and not isinstance(groups, (str, bytes)):  # a numpy array, a torch tensor
        try:
            arr = np.asarray(groups)
        except (TypeError, ValueError, RuntimeError) as e:
            raise ConfigError(f"groups is a {type(groups).__name__} that numpy cannot read ({e}); pass one key per "
                              "document, e.g. a list (a torch tensor: groups.cpu())") from None
        if arr.ndim != 1:
            raise ConfigError(f"groups is an array of shape {arr.shape}; pass one key per document (1-D)")
        groups = arr.tolist()
    keys = list(check_texts(groups, "split_documents", "group keys", "pass one key per document, e.g. a list",
                            "one per document"))
    # a numpy scalar or a tensor's element is its Python value: np.str_("k0") and "k0" are one group (the group's
    # side had followed the first spelling's type), and a tensor's elements, hashed by identity, had each been
    # a group of their own (one group on both sides)
    keys = checked_keys(keys)
    val_docs, n_train, n_val = assign_groups(keys, val_fraction, seed, what="the groups")
    return Split(np.flatnonzero(~val_docs), np.flatnonzero(val_docs), n_train, n_val)
