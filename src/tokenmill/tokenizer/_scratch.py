"""Per-thread scratch buffers of the encoders, kept from one call to the next.

An encoder's kernels write into buffers sized by the input (a slot per byte: chunk offsets, ids), of
which a call uses a part. Allocated fresh on every call, a buffer of several MB is a memory mapping of
its own (glibc maps blocks this large apart, and one freed smaller than the next request does not raise
that threshold), and every page the kernel touches is a page fault (~1.5-2 us each here): GPT-2 over
2.7 MB of English in a loop that drops its results, the ids' buffer alone took ~870 faults a pass
(lists out 10.3-10.7 -> 9.2-9.8 ms a pass without them). So each thread keeps one buffer per use, shared
by every encoder the thread runs (a tokenizer built again, as benchmarks do, finds it mapped already);
what a caller keeps it copies out, or never reads from here (arrays out: see ``CompiledEncoder._run``).
"""

from __future__ import annotations

import threading

import numpy as np

KEEP_BYTES = 64 << 20  # a buffer up to this size is kept for the thread's next call
_LOCAL = threading.local()
# glibc's dynamic mmap threshold goes no higher than 32 MB (64-bit): a block just under it, freed, raises it
# to about its size
_HEAP_BLOCK = (32 << 20) - (1 << 20)
_HEAP_RAISED = False


def heap_for_large_blocks() -> None:
    """Once per process: let ``malloc`` serve blocks of up to ~31 MB from its heap, so that the arrays the
    encoders return (one block per batch, shrunk to its ids in place: a caller keeps them) reuse the
    memory of the ones a caller dropped instead of arriving as fresh pages.

    glibc maps every block over its *mmap threshold* apart (128 KB at first) and unmaps it when freed;
    the threshold rises to the size of a mapped block freed, up to 32 MB. An encoder's batch asks for a
    block of a slot per byte (8 MB for 1 MB of text) and shrinks it to its ids (~2 MB of English) before
    handing it out, so what the caller frees later never raises the threshold to the next request: in a
    loop that encodes 2.7 MB of English as arrays and drops them, every pass took ~850 page faults in
    fresh blocks, 8.8-10.0 ms a pass against 7.4-7.7 with none (``bench/_fault_loop.py``). One block of ~31 MB allocated (never
    touched: no page of it is used) and freed at once raises the threshold to ~31 MB, as any program
    that frees a 31 MB array does; freed memory at the heap's top then returns to the system above 62 MB
    (twice the threshold) instead of 128 KB. Nothing happens where the threshold was fixed with
    ``mallopt`` (or ``MALLOC_MMAP_THRESHOLD_``), or on another C library (a block allocated and freed)."""
    global _HEAP_RAISED
    if not _HEAP_RAISED:
        _HEAP_RAISED = True
        np.empty(_HEAP_BLOCK // 8, np.int64)  # freed at once (no reference kept)


def scratch(name: str, size: int, dtype) -> np.ndarray:
    """``size`` elements of this thread's buffer ``name`` (its contents undefined), valid until the thread's
    next call for ``name``: the caller copies what it keeps. Grown to a power of two elements (a call a
    little larger than the last fits); one of more than :data:`KEEP_BYTES` is made for this call only."""
    buf = getattr(_LOCAL, name, None)
    if buf is None or buf.size < size or buf.dtype != dtype:
        buf = np.empty(1 << max(10, (size - 1).bit_length()), dtype)
        if buf.nbytes > KEEP_BYTES:
            return buf[:size]
        setattr(_LOCAL, name, buf)
    return buf[:size]
