"""The tables a BPE model is made of, built and checked from merges or a merge list.

A vocabulary is an id -> bytes list (None where only an added or special token holds the id). The
pair table maps ``(left id, right id)`` to the merge's priority (lower first): for trained tokenizers
and rank files the priority is the merged id itself; for imported merge lists (tokenizer.json) it is
the merge's position and ``merge_ids[priority]`` the id it makes. Tables are held either as a dict or
as three int64 arrays (lefts, rights, priorities); the kernels take the arrays, the Python twin the dict.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..._validate import check_array
from ...errors import ConfigError, FormatError


def merge_array(merges) -> np.ndarray:
    """Merges as an exact int64 (M, 2) array (no float truncation, no wrap-around)."""
    if not isinstance(merges, np.ndarray):  # (numpy reads True in [(True, 105)] as 1: a merge nobody meant)
        for i, pair in enumerate(merges if isinstance(merges, (list, tuple)) else ()):
            if isinstance(pair, (list, tuple)) and any(isinstance(x, (bool, np.bool_)) for x in pair):
                raise FormatError(f"merge {i} = {tuple(pair)!r} holds a bool; merges are pairs of integer ids")
    arr = check_array(merges, "merges", ndim=None, error=FormatError)
    if arr.size == 0:
        return np.zeros((0, 2), np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise FormatError(f"merges has shape {arr.shape}; pass (left id, right id) pairs, shape (M, 2)")
    return arr


def from_merges(merges, merge_counts=None) -> tuple[list[bytes], dict, np.ndarray, np.ndarray | None]:
    """(vocab, pair table, merges, counts) of merges in rank order: merge ``i`` joins ``merges[i]``
    into id ``256 + i``; every merge refers to ids before it and no pair repeats."""
    arr = merge_array(merges)
    if merge_counts is not None:
        merge_counts = check_array(merge_counts, "merge_counts", min=0, error=FormatError)
        if merge_counts.shape != (len(arr),):
            raise FormatError(f"merge_counts has {merge_counts.size:,d} entries for {len(arr):,d} merges; "
                              "it needs one count per merge")
    vocab = [bytes([i]) for i in range(256)]
    table: dict[tuple[int, int], int] = {}
    for i, (a, b) in enumerate(arr.tolist()):
        if not (0 <= a < len(vocab) and 0 <= b < len(vocab)):
            bad = a if not 0 <= a < len(vocab) else b
            raise FormatError(f"merge {i} = ({a}, {b}) refers to id {bad}, which is not an id before it "
                              f"(0 .. {len(vocab) - 1:,d})")
        if (a, b) in table:
            raise FormatError(f"merge {i} repeats pair ({a}, {b}) of merge {table[(a, b)] - 256}")
        table[(a, b)] = 256 + i
        vocab.append(vocab[a] + vocab[b])
    return vocab, table, arr, merge_counts


def from_merge_list(vocab, merges, merge_ids=None, source="<merges>") -> tuple[tuple, np.ndarray, np.ndarray]:
    """(pair arrays, merges, merge ids) of a merge list in any id space, as HF ``tokenizers`` applies it.

    Merge ``k`` joins ``merges[k]`` into the id whose bytes are ``vocab[l] + vocab[r]`` (or
    ``merge_ids[k]``, checked by length); a pair listed twice keeps its last priority (HF's merge map).
    """
    n = len(vocab)
    bad_tok = next((i for i, b in enumerate(vocab) if b is not None and not isinstance(b, bytes)), None)
    if bad_tok is not None:
        raise ConfigError(f"{source}: vocab[{bad_tok}] is a {type(vocab[bad_tok]).__name__}; the vocabulary holds "
                          "each id's token bytes (or None for an id no token holds)")
    arr = merge_array(merges)
    present = np.fromiter((b is not None for b in vocab), np.bool_, n)
    bad = np.flatnonzero(((arr < 0) | (arr >= n)).any(axis=1))
    if bad.size == 0:
        bad = np.flatnonzero(~(present[arr[:, 0]] & present[arr[:, 1]]))
    if bad.size:
        k = int(bad[0])
        raise FormatError(f"{source}: merge {k} refers to id {arr[k].tolist()}, which is not a vocabulary token")
    if merge_ids is None:
        by_bytes: dict[bytes, int] = {}
        for i, b in enumerate(vocab):
            if b is not None:
                by_bytes.setdefault(b, i)
        res = np.empty(len(arr), np.int64)
        for k, (a, b) in enumerate(arr.tolist()):
            m = by_bytes.get(vocab[a] + vocab[b])
            if m is None:
                raise FormatError(f"{source}: merge {k} ({a}, {b}) produces bytes {vocab[a] + vocab[b]!r}, "
                                  "which are not in the vocabulary")
            res[k] = m
    else:  # the importer derived them from the token strings; check the lengths add up
        res = np.asarray(merge_ids, np.int64).reshape(-1)
        lens = np.fromiter((0 if b is None else len(b) for b in vocab), np.int64, n)
        if res.shape[0] != arr.shape[0] or ((res < 0) | (res >= n)).any() or (
                lens[res] != lens[arr[:, 0]] + lens[arr[:, 1]]).any():
            raise FormatError(f"{source}: merge_ids do not match the merges")
    keys = (arr[:, 0] << 32) | arr[:, 1]
    _, last_rev = np.unique(keys[::-1], return_index=True)
    keep = np.sort(len(keys) - 1 - last_rev)
    return (arr[keep, 0].copy(), arr[keep, 1].copy(), keep.astype(np.int64)), arr, res


def pair_arrays(src) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A pair table as (lefts, rights, priorities) int64 arrays."""
    if isinstance(src, dict):
        n = len(src)
        return (np.fromiter((p[0] for p in src), np.int64, n), np.fromiter((p[1] for p in src), np.int64, n),
                np.fromiter(src.values(), np.int64, n))
    return src


def pair_dict(src) -> dict[tuple[int, int], int]:
    """A pair table as a dict ``(left, right) -> priority``."""
    if isinstance(src, dict):
        return src
    lefts, rights, prios = src
    return dict(zip(zip(lefts.tolist(), rights.tolist()), prios.tolist()))


def byte_ids(vocab: Sequence[bytes | None]) -> list[int]:
    """The id of each single byte (the first token holding it); a byte-level BPE needs all 256."""
    ids = [-1] * 256
    for i, b in enumerate(vocab):
        if b is not None and len(b) == 1 and ids[b[0]] < 0:
            ids[b[0]] = i
    missing = [b for b in range(256) if ids[b] < 0]
    if missing:
        raise FormatError(f"vocabulary lacks single-byte tokens for bytes {missing[:8]}...; a byte-level BPE needs all 256")
    return ids
