"""What flushing a store's files to the disk costs: a store build with ``fsync`` (shard files flushed by
a background thread, the manifest written once they are on the disk) against the same build with every
flush turned off, alternating, in one process.

    .venv/bin/python bench/_store_durability.py [--corpus ../shared/corpora/en] [--repeat 9] [--shard-mb 8]

Prints each build's seconds and the medians (the first build of each kind warms the caches). The
tokenizer is GPT-2's rank file (``TOKENMILL_GPT2_RANKS`` or ``.cache/gpt2.tiktoken``), one worker,
no EOS. A probe, not a published table: the result is quoted in ``_io.LaterFlush``'s docstring.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
import warnings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "corpora", "en"))
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--shard-mb", type=float, default=8)
    args = ap.parse_args()

    import tokenmill
    from tokenmill import _io

    ranks = os.environ.get("TOKENMILL_GPT2_RANKS", os.path.join(os.path.dirname(__file__), "..", ".cache",
                                                                 "gpt2.tiktoken"))
    tok = tokenmill.Tokenizer.from_tiktoken(ranks, pattern="gpt2")
    real = _io._flush_to_disk
    times: dict[str, list[float]] = {"fsync": [], "no fsync": []}
    work = tempfile.mkdtemp(prefix="tokenmill-durability-")
    try:
        for _ in range(args.repeat):
            for mode in times:
                _io._flush_to_disk = real if mode == "fsync" else (lambda path, folder=False: None)
                out = os.path.join(work, "store")
                shutil.rmtree(out, ignore_errors=True)
                t = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # (the corpus folder's other files)
                    st = tokenmill.TokenStore.build(out, args.corpus, tok, workers=1, progress=False,
                                                    shard_bytes=int(args.shard_mb * 2**20), append_eos=False)
                times[mode].append(time.perf_counter() - t)
        _io._flush_to_disk = real
        for mode, v in times.items():
            print(f"{mode:9s} {' '.join(f'{x:.2f}' for x in v)}  median {statistics.median(v):.3f} s")
        print(f"{st.num_shards} shards, {st.manifest['input_bytes'] / 1e6:.1f} MB of input")
    finally:
        _io._flush_to_disk = real
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
