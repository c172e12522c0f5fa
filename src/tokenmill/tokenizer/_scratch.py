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
