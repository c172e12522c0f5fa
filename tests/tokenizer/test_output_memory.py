"""The arrays ``encode_batch`` returns reuse the memory of arrays a caller dropped: a loop that encodes
batches and drops the results runs on memory already mapped, not on fresh pages (a page fault each:
~850 a pass of 2.7 MB of English before ``_scratch.heap_for_large_blocks``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_LOOP = textwrap.dedent("""
    import resource
    import numpy as np
    from tokenmill import train_bpe

    rng = np.random.default_rng(0)
    words = ["the", "cat", "sat", "on", "mat", "and", "a", "dog", "ran", "far", "away"]
    tok = train_bpe([" ".join(words)] * 4, 300, pattern="gpt2")
    docs = [" ".join(rng.choice(words, 40_000).tolist()) for _ in range(6)]  # ~1.3 MB, two groups
    faults, ids = [], 0
    for i in range(8):
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        out = tok.encode_batch(docs, num_threads=1, as_arrays=True)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
        ids = sum(a.size for a in out)
        del out
    print(min(faults[2:]), ids)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc (Linux) is what this is about")
def test_arrays_out_in_a_loop_reuse_dropped_memory():
    """A fresh process (the threshold as glibc starts it). With ``heap_for_large_blocks`` left out this loop took
    255 faults a pass of its 511 pages (c91f4a3); ``bench/_fault_loop.py`` compares both on the corpora."""
    got = subprocess.run([sys.executable, "-c", _LOOP], capture_output=True, text=True, check=True)
    fewest, ids = map(int, got.stdout.split())
    pages = ids * 8 // 4096  # the ids' pages: each a fault where the block is fresh
    assert fewest < pages // 10, (fewest, pages)
