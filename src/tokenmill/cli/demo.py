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

    eot = tok.special_tokens["<|endoftext|>"]
    docs_ids = [x + [eot] for x in ids]
    _windows(tok, docs_ids)
    _batches(docs_ids, eot)

    out = Path(args.out)
    tok.save(out / "tokenizer.json")
    print(f"\nsaved {out / 'tokenizer.json'}; next: tokenmill inspect {out / 'tokenizer.json'}, "
          f"tokenmill windows --help, tokenmill pack --help")
    return 0


def _windows(tok, docs_ids) -> None:
    import numpy as np

    from ..data.source import as_source
    from ..windows.coverage import coverage_report
    from ..windows.preview import preview
    from ..windows.sliding import SlidingWindows

    lengths = np.array([len(x) for x in docs_ids])
    sw = SlidingWindows(512, 256)  # add jitter="global" for a new start offset every epoch
    plan = sw.plan(lengths, epoch=0)
    cov = coverage_report(plan, lengths)
    print(f"\n3. sliding windows 512/256 over {len(lengths):,d} documents: {len(plan):,d} windows, "
          f"coverage {cov.coverage_percent:.2f}%, each token in {cov.multiplicity_min}-{cov.multiplicity_max} windows")
    first = preview(plan, as_source(docs_ids), tok, n=1)[0]
    print("   first window as text, overlap with the next in [[...]]: " + repr(str(first)[:160]) + " ...")


def _batches(docs_ids, eot) -> None:
    from ..batching.packing import pack
    from ..data.source import as_source

    src = as_source(docs_ids)
    for method in ("best_fit", "greedy"):
        plan = pack(src.lengths, 2048, method=method)
        print(f"\n4. packed into blocks of 2,048 ({method}): {plan}")
    plan = pack(src.lengths, 2048)
    batch = next(iter(plan.batches(src, batch_size=4, pad_id=eot)))
    st = batch.stats()
    print(f"   first batch of 4 blocks: {st.positions:,d} positions, {st.non_pad:,d} real tokens, {st.targets:,d} targets "
          f"(every document's first position is ignored); cu_seqlens {batch.cu_seqlens[:6].tolist()} ...")
