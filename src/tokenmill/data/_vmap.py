"""Map several files back to back into one contiguous read-only address range (Linux).

A multi-shard store then reads like one flat token array: shard ``s`` starts at element
``bases[s]`` (its file is mapped at a page boundary; the bytes after its end up to the next page
read as zeros and belong to no document). The plans' compiled passes take one array and per-segment
offsets, so reading across shards costs nothing extra (measured in bench/store.py). Zero copies: the
kernel maps the files themselves. Where ``mmap(MAP_FIXED)`` through ctypes is not available
(non-Linux), :func:`map_files` returns None and callers copy shard by shard instead.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
import weakref

import numpy as np

_MAP_FIXED = 0x10
_MAP_NORESERVE = 0x4000
_PROT_NONE = 0


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.restype = ctypes.c_int
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return libc


def map_files(paths: list, sizes: list[int], dtype: np.dtype):
    """``(array, bases)``: the files' contents as one read-only array and each file's first element,
    or None where the platform cannot do it. ``sizes`` are the files' byte sizes (checked by the caller)."""
    if sys.platform != "linux" or dtype.itemsize > mmap.PAGESIZE:
        return None
    page = mmap.PAGESIZE
    spans = [-(-s // page) * page for s in sizes]
    total = sum(spans)
    if total == 0:
        return np.zeros(0, dtype), np.zeros(len(paths), np.int64)
    try:
        libc = _libc()
    except (OSError, AttributeError):
        return None
    MAP_FAILED = ctypes.c_void_p(-1).value
    base = libc.mmap(None, total, _PROT_NONE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE, -1, 0)
    if base in (None, MAP_FAILED):
        return None
    ok = False
    try:
        at = 0
        for path, size, span in zip(paths, sizes, spans):
            if size:
                fd = os.open(path, os.O_RDONLY)
                try:
                    got = libc.mmap(base + at, size, mmap.PROT_READ, mmap.MAP_SHARED | _MAP_FIXED, fd, 0)
                finally:
                    os.close(fd)
                if got != base + at:
                    return None
            at += span
        ok = True
    finally:
        if not ok:
            libc.munmap(base, total)
    buf = (ctypes.c_char * total).from_address(base)
    weakref.finalize(buf, libc.munmap, base, total)  # unmapped when the last array view is gone
    arr = np.frombuffer(buf, dtype=dtype)
    arr.flags.writeable = False
    bases = (np.concatenate([[0], np.cumsum(spans[:-1])]) // dtype.itemsize).astype(np.int64)
    return arr, bases
