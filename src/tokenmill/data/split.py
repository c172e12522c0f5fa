"""``store.split``: train/validation views of a store, by document, source, file or any group key.

Groups are shuffled with the seed and taken into the validation view until it holds
``val_fraction`` of the documents, so a group (all documents of one file, say) never lands in both
views. Both views are token sources over the same memory maps (no copy), with their own fingerprint.
"""

from __future__ import annotations

import hashlib
from typing import Callable

import numpy as np

from .._io import canonical_hash
from ..errors import ConfigError
from .store import StoreSource


class StoreView(StoreSource):
    """Documents ``index`` (int64; increasing for a split, any order for a slice) of a store, as a
    token source and a sequence (see :class:`~tokenmill.data.store.StoreSource`)."""

    def __init__(self, store, index: np.ndarray, definition: dict):
        self.store = store
        self.index = np.asarray(index, np.int64)
        self.definition = definition
        self.dtype = store.dtype

    @property
    def fingerprint(self) -> str:
        return canonical_hash({"store": self.store.fingerprint, "view": self.definition})

    vocab_size = property(lambda self: self.store.vocab_size)
    tokenizer_hash = property(lambda self: self.store.tokenizer_hash)
    eos_id = property(lambda self: self.store.eos_id)
    bos_id = property(lambda self: self.store.bos_id)

    def check_tokenizer(self, tokenizer) -> None:
        self.store.check_tokenizer(tokenizer)

    def __len__(self) -> int:
        return int(self.index.size)

    @property
    def num_tokens(self) -> int:
        return int(self.lengths.sum())

    @property
    def lengths(self) -> np.ndarray:
        return self.store.lengths[self.index]

    def get(self, i: int) -> np.ndarray:
        return self.store.get(int(self.index[self._doc_index(i)]))

    def provenance(self, i: int):
        return self.store.provenance(int(self.index[self._doc_index(i)]))

    def decode(self, i: int, tokenizer) -> str:
        return self.store.decode(int(self.index[self._doc_index(i)]), tokenizer)

    def _fill(self, doc, start, length, dst, out) -> None:
        if doc.size and (doc.min() < 0 or doc.max() >= len(self)):
            raise ConfigError(f"a segment names document {int(doc.max()):,d}, outside this view's 0 .. {len(self) - 1:,d}")
        self.store._fill(self.index[doc], start, length, dst, out)

    def __repr__(self) -> str:
        return f"StoreView({len(self):,d} of {len(self.store):,d} documents, {self.definition})"


def _group_keys(store, by) -> np.ndarray:
    """``(num_docs,)`` int64 group ids in a deterministic order."""
    n = len(store)
    if by == "doc":
        return np.arange(n, dtype=np.int64)
    base = getattr(store, "store", None)
    index = getattr(store, "index", None)
    if by in ("source", "file"):
        root = base if base is not None else store
        files = root.meta()[:, 0]
        if index is not None:
            files = files[index]
        if by == "file":
            return files
        return np.asarray(root.manifest["file_source"], np.int64)[files]
    if callable(by):
        ids: dict = {}
        out = np.empty(n, np.int64)
        for i in range(n):
            out[i] = ids.setdefault(by(i), len(ids))
        return out
    raise ConfigError(f"by={by!r}: use 'doc', 'source', 'file' or a callable doc_index -> group key")


def split_store(store, val_fraction: float, *, by: str | Callable = "doc", seed: int = 0):
    """``(train, val)`` views; see :meth:`TokenStore.split`."""
    if isinstance(val_fraction, bool) or not isinstance(val_fraction, (int, float)) or not 0 < val_fraction < 1:
        raise ConfigError(f"val_fraction={val_fraction!r} must be a number strictly between 0 and 1")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ConfigError(f"seed={seed!r} must be an integer")
    keys = _group_keys(store, by)
    uniq, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    if uniq.size < 2:
        raise ConfigError(f"the store has {uniq.size} group(s) by {by!r}; a split needs at least 2 "
                          "(use by='doc' or a finer grouping)")
    order = np.random.default_rng(int(seed)).permutation(uniq.size)
    want = val_fraction * len(store)
    taken = np.cumsum(counts[order])
    k = int(np.searchsorted(taken, want, side="left")) + 1  # groups until val holds >= want documents
    k = min(max(k, 1), uniq.size - 1)
    is_val = np.zeros(uniq.size, bool)
    is_val[order[:k]] = True
    val_doc = is_val[inverse]
    by_name = by if isinstance(by, str) else "callable:" + _callable_name(by)
    define = {"split": {"val_fraction": float(val_fraction), "by": by_name, "seed": int(seed)}}
    base = getattr(store, "store", store)
    base_index = getattr(store, "index", None)

    def view(mask, part):
        idx = np.flatnonzero(mask)
        if base_index is not None:
            idx = base_index[idx]
        return StoreView(base, idx, {**define, "part": part,
                                     "parent": getattr(store, "definition", None)})

    return view(~val_doc, "train"), view(val_doc, "val")


def _callable_name(f) -> str:
    name = f"{getattr(f, '__module__', '')}.{getattr(f, '__qualname__', type(f).__name__)}"
    return name + ":" + hashlib.sha256(name.encode()).hexdigest()[:8]
