"""`tokenmill demo`: the main job end to end on the embedded default corpus."""

from __future__ import annotations

import time
from pathlib import Path

from ._common import add_command, add_quiet


def register(sub) -> None:
    p = add_command(sub, "demo", help="train a tokenizer on the embedded corpus and walk the pipeline",
                    example="tokenmill demo --vocab-size 2048 --out demo-out", func=cmd_demo)
    p.add_argument("--vocab-size", type=int, default=2048)
    p.add_argument("--out", default="demo-out", help="folder for the tokenizer file")
    add_quiet(p)


def cmd_demo(args) -> int:
    from ..corpus import default_corpus
    from ..tokenizer.train import train_bpe

    docs = default_corpus()
    n_bytes = sum(len(d.encode()) for d in docs)
    print(f"corpus: {len(docs):,d} documents, {n_bytes:,d} bytes (Python's own help topics and docstrings)")

    t0 = time.perf_counter()
    tok = train_bpe(docs, args.vocab_size, pattern="gpt4", special_tokens=["<|endoftext|>"], progress=not args.quiet)
    dt = time.perf_counter() - t0
    r = tok.train_report
    print(f"\n1. trained {tok!r} in {dt:.1f} s: {r.chunks:,d} chunks ({r.distinct_chunks:,d} distinct), "
          f"{r.merges:,d} merges ({r.stop_reason})")
    print("   first merges: " + ", ".join(repr(tok.token_bytes(i).decode("utf-8", "replace")) for i in range(256, 266)))
    longest = max(range(256, tok.vocab_size - 1), key=lambda i: (len(tok.token_bytes(i)), -i))
    print(f"   longest token: {tok.token_bytes(longest).decode('utf-8', 'replace')!r}")

    t0 = time.perf_counter()
    ids = tok.encode_batch(docs)
    dt = time.perf_counter() - t0
    n_tokens = sum(map(len, ids))
    assert all(tok.decode(x) == d for x, d in zip(ids, docs)), "round trip failed"
    print(f"\n2. encoded {n_tokens:,d} tokens in {dt:.2f} s ({n_bytes / 1e6 / dt:.1f} MB/s): "
          f"{n_bytes / n_tokens:.2f} bytes per token; decode(encode(doc)) == doc for all {len(docs)} documents")
    sample = "Sliding windows over token ids: 滑动窗口。"
    print(f"   {sample!r} -> {tok.encode(sample)}")

    out = Path(args.out)
    tok.save(out / "tokenizer.json")
    print(f"\nsaved {out / 'tokenizer.json'}; try: tokenmill inspect {out / 'tokenizer.json'}")
    return 0
