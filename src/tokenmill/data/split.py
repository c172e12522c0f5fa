"""``store.split``: train/validation views of a store, by document, source, file or any group key.

The one train/validation rule of tokenmill (:func:`assign_groups`, also behind
:func:`tokenmill.split_documents`): groups are ordered by a seeded hash of their key and taken into
the validation view until it holds ``val_fraction`` of the documents, so a group (all documents of
one file, say) never lands in both views, and a group's side depends only on its key and the seed.
Both views are token sources over the same memory maps (no copy), with their own fingerprint.
"""

from __future__ import annotations

import hashlib
from typing import Callable

import numpy as np

from ..errors import ConfigError


def checked_keys(keys: list, what: str = "group key"):
    """Group keys as the split rule hashes them: a numpy scalar or a 0-d array (a torch scalar tensor, as
    ``keys[i]`` of a tensor gives) is its Python value (a tensor hashed by identity: every document its own
    group, one group on both sides); all ints within int64 become one int64 array. An array of one or more
    dimensions, or anything unhashable, is a ConfigError naming the key's place."""
    out = []
    for i, k in enumerate(keys):
        if isinstance(k, np.generic):
            k = k.item()
        elif hasattr(k, "__array__") and not isinstance(k, (str, bytes)):
            try:
                a = np.asarray(k)
            except (TypeError, ValueError, RuntimeError) as e:
                raise ConfigError(f"{what} {i:,d} is a {type(k).__name__} that numpy cannot read ({e}); pass a str, "
                                  "an int or a tuple per document") from None
            if a.ndim:
                raise ConfigError(f"{what} {i:,d} is an array of shape {a.shape}; pass a str, an int or a tuple per "
                                  "document (one key, not a row of them)")
            k = a.item()
        try:
            hash(k)
        except TypeError:
            raise ConfigError(f"{what} {i:,d} is a {type(k).__name__}, which cannot be a group key (it is not "
                              "hashable); pass a str, an int or a tuple per document") from None
        out.append(k)
    if out and all(isinstance(k, int) and not isinstance(k, bool) and -2**63 <= k < 2**63 for k in out):
        return np.asarray(out, np.int64)
    return out


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
        return checked_keys([by(i) for i in range(n)])  # the keys themselves: their hash, not their order, decides
    raise ConfigError(f"by={by!r}: use 'doc', 'source', 'file' or a callable doc_index -> group key")


def split_store(store, val_fraction: float, *, by: str | Callable = "doc", seed: int = 0):
    """``[(index, definition, determined)]`` of the ``train`` and ``val`` views (indices into the store
    beneath ``store``, itself or a view's); see :meth:`TokenStore.split`, which makes the views. The rule is
    :func:`assign_groups`'s, the one ``tokenmill.split_documents`` follows too (same documents, keys and
    seed, same split). ``determined``: whether the definition says which documents a view holds (a split
    by document, source or file of a store or of a view its own definition determines); a callable's
    keys are not in it, so such a view's fingerprint hashes its index."""
    from .._validate import check_float, check_int

    if not 0 < check_float(val_fraction, "val_fraction") < 1:
        raise ConfigError(f"val_fraction={val_fraction!r} must be a number strictly between 0 and 1")
    seed = check_int(seed, "seed", min=0, max=2**63 - 1)
    keys = _group_keys(store, by)
    what = f"the {'view' if hasattr(store, 'index') else 'store'}'s documents by {by!r}"
    val_doc, _, val_groups = assign_groups(keys, val_fraction, int(seed), what=what)
    by_name = by if isinstance(by, str) else "callable:" + _callable_name(by)
    _say_if_far(store, val_doc, float(val_fraction), by_name, val_groups)
    define = {"split": {"val_fraction": float(val_fraction), "by": by_name, "seed": int(seed),
                        "rule": "seeded-hash-v1"}}
    base_index = getattr(store, "index", None)
    determined = isinstance(by, str) and getattr(store, "determined", True)

    def part(mask, name):
        idx = np.flatnonzero(mask)
        if base_index is not None:
            idx = base_index[idx]
        return idx, {**define, "part": name, "parent": getattr(store, "definition", None)}, determined

    return [part(~val_doc, "train"), part(val_doc, "val")]


def _say_if_far(store, val_doc: np.ndarray, fraction: float, by: str, val_groups: int) -> None:
    """A warning where the validation side holds far from ``fraction`` of the documents or of the tokens
    (outside half to twice it, and more than half a percentage point off): a split by few or uneven groups
    takes whole groups, and with two sources one of them (57% of the tokens, or 13 documents of 30,931, in
    a probe of the README's example) had become validation without a word."""
    lengths = np.asarray(store.lengths, np.int64)
    n, total = val_doc.size, int(lengths.sum())
    if not n or not total:
        return
    docs, tokens = float(val_doc.sum()) / n, float(lengths[val_doc].sum()) / total
    # by document, the split is one of documents: their tokens follow their lengths, which no finer group evens
    # out (the demo's 40 documents had been told to "pass by='doc'", split by='doc' already)
    shares = (("documents", docs),) if by == "doc" else (("documents", docs), ("tokens", tokens))
    far = [f"{what} {got:.1%}" for what, got in shares
           if not fraction / 2 <= got <= 2 * fraction and abs(got - fraction) > 0.005]
    if far:
        from ..errors import warn

        advice = (f"the store holds few documents ({n:,d}), each taken with probability {fraction:g}"
                  if by == "doc" else "its groups are few or uneven; pass finer ones ("
                  + ("by='doc'" if by == "file" else "by='file' or by='doc'") + ") for a split near the fraction")
        warn(f"split({fraction:g}, by={by!r}): validation holds {' and '.join(far)} of the store, far from "
             f"{fraction:.1%} ({val_groups:,d} whole group{'s' if val_groups != 1 else ''} of "
             f"{int(val_doc.sum()):,d} documents): {advice}")


# ---- the one split rule ---------------------------------------------------------------------------
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, vectorized (uint64 arithmetic wraps, as the hash wants); an array is mixed in
    place, in blocks (one temporary of a block, not six of the whole array: 40M keys 4 s -> ~0.3 s)."""
    if np.ndim(x) == 0:
        return _mix64(np.array([x], np.uint64))[0]
    step = 1 << 16
    tmp = np.empty(min(step, x.size), np.uint64)
    with np.errstate(over="ignore"):
        for lo in range(0, x.size, step):
            v = x[lo:lo + step]
            t = tmp[:v.size]
            for shift, mul in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
                np.right_shift(v, np.uint64(shift), out=t)
                np.bitwise_xor(v, t, out=v)
                np.multiply(v, np.uint64(mul), out=v)
            np.right_shift(v, np.uint64(31), out=t)
            np.bitwise_xor(v, t, out=v)
    return x


def seeded_key_hash(keys, seed: int) -> np.ndarray:
    """A seeded 64-bit hash of each group key (uint64), independent of the keys' order: integer keys
    (document, file or source indices) vectorized with splitmix64, other keys (strings, tuples) by a
    blake2b digest of their type and repr."""
    arr = np.asarray(keys) if not isinstance(keys, np.ndarray) else keys
    if arr.dtype.kind in "iu" and arr.ndim == 1:
        with np.errstate(over="ignore"):
            s = _mix64(np.uint64(seed % 2**64) * _GOLDEN + _GOLDEN)
            return _mix64(np.bitwise_xor(arr.astype(np.int64).view(np.uint64), s))  # (a new array, mixed in place)
    out = np.empty(len(keys), np.uint64)
    for i, k in enumerate(keys):
        digest = hashlib.blake2b(f"{seed}\x00{type(k).__name__}\x00{k!r}".encode(), digest_size=8).digest()
        out[i] = int.from_bytes(digest, "little")
    return out


def assign_groups(keys, val_fraction: float, seed: int, *, what: str = "the documents"):
    """The one train/validation rule: ``(is_val per document (bool), train groups, val groups)``.

    Every group (documents with one key) goes wholly to one side. Groups are ordered by
    :func:`seeded_key_hash` of their key (so a group's side depends on its key and the seed, not on
    the order of the documents) and taken into validation while it holds fewer than
    ``max(1, round(val_fraction * n))`` documents; train always keeps at least one group.
    """
    if (isinstance(keys, np.ndarray) and keys.dtype.kind in "iu" and keys.ndim == 1 and keys.size >= 2
            and bool((keys[1:] > keys[:-1]).all())):
        # one document a key (by="doc": 0 .. n-1), keys rising: the groups in hash order are the documents in
        # hash order, and integer keys' hashes are distinct (splitmix64 is a bijection), so validation is the
        # `target` smallest hashes, found without a sort (the same documents as the sort below: 40M documents
        # 15-24 s and 2.8 GB -> a few seconds)
        g = keys.size
        target = min(max(1, round(float(val_fraction) * g)), g - 1)
        is_val = np.zeros(g, bool)
        is_val[np.argpartition(seeded_key_hash(keys, seed), target - 1)[:target]] = True
        return is_val, g - target, target
    if isinstance(keys, np.ndarray) and keys.dtype.kind in "iu":
        uniq, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    else:
        codes: dict = {}
        inverse = np.fromiter((codes.setdefault(k, len(codes)) for k in keys), np.int64)
        uniq = list(codes)
        counts = np.bincount(inverse, minlength=len(uniq))
    g = len(uniq)
    if g < 2 and len(keys) < 2:  # (finer groups cannot help: there are not two documents)
        raise ConfigError(f"{what}: {len(keys)} document{'' if len(keys) == 1 else 's'}, which cannot be split "
                          "into train and validation; a split needs at least 2 documents")
    if g < 2:
        raise ConfigError(f"{what} form {g} distinct group(s), which cannot be split into train and validation; "
                          "a split needs at least 2 (use finer groups, e.g. one per document: by='doc')")
    order = np.argsort(seeded_key_hash(uniq, seed), kind="stable")
    sizes = counts[order]
    target = max(1, round(float(val_fraction) * int(counts.sum())))
    before = np.cumsum(sizes) - sizes
    take = before < target
    take[-1] = False if take.all() else take[-1]
    is_val = np.zeros(g, bool)
    is_val[order[take]] = True
    return is_val[inverse], int((~is_val).sum()), int(is_val.sum())


def _callable_name(f) -> str:
    name = f"{getattr(f, '__module__', '')}.{getattr(f, '__qualname__', type(f).__name__)}"
    return name + ":" + hashlib.sha256(name.encode()).hexdigest()[:8]
