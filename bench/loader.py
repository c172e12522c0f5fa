"""TrainingLoader throughput and startup, side by side with Hugging Face datasets + DataCollatorWithFlattening.

    .venv/bin/python bench/loader.py [--mb 16] [--batches 150] [--repeat 3] [--startup-docs 10000000]
                                     [--no-publish]

1. A token store of the first ``--mb`` MB of ``../shared/corpora/en`` (one document per paragraph,
   GPT-2's ranks; built once into .cache/bench_loader). ``TrainingLoader(store, batch_size=8,
   block_size=2048)`` (best-fit packs, shuffled) with 0, 1 and 2 DataLoader workers: batches/s and
   tokens/s over ``--batches`` batches after the first (median of ``--repeat``). The anchor: the same
   documents as an Arrow-backed ``datasets.Dataset`` of ``input_ids``, shuffled by a torch
   ``DataLoader`` with ``DataCollatorWithFlattening`` (one row of concatenated documents, position
   ids reset per document, -100 at every document's first label), with as many documents per batch
   as make the same number of tokens on average; same worker counts. Both sides deliver dicts of
   CPU tensors to the loop; tokens/s counts real (non-pad) tokens.
2. Startup on ``--startup-docs`` documents (a synthetic store, 1-23 tokens each, written directly):
   ``TrainingLoader(...)`` construction (plan, permutation) plus the first batch, per method; and
   best fit again with ``plan_cache`` (what a restarted run pays).
3. The loader's tokens/s against a consumer of 1 M tokens/s (a GPU step that fast would still wait
   less than ``1 / ratio`` of its time for data, with 0 workers; workers take it off the step).

Numbers are from a shared 2-core machine: the ratios side by side in one run are the robust part.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
CORPORA = ROOT / ".." / "shared" / "corpora"
CACHE = ROOT / ".cache" / "bench_loader"
B, T = 8, 2048


def build_store(mb: int):
    from tokenmill import Tokenizer, TokenStore
    from tokenmill.data.readers import texts

    path = CACHE / f"en-{mb}mb"
    if (path / "manifest.json").exists():
        return TokenStore.open(path)
    ranks = Path(os.environ.get("TOKENMILL_GPT2_RANKS", ROOT / ".cache" / "gpt2.tiktoken"))
    tok = Tokenizer.from_tiktoken(ranks, pattern="gpt2", special_tokens={"<|endoftext|>": 50256})
    docs, total = [], 0
    for f in sorted((CORPORA / "en").glob("*.txt")):
        for para in f.read_bytes().decode("utf-8").replace("\r\n", "\n").split("\n\n"):
            if para.strip():
                docs.append(para)
                total += len(para.encode())
        if total >= mb * 2**20:
            break
    return TokenStore.build(path, texts(docs), tok, workers=2, overwrite=True)


def median_rate(fn, repeat: int) -> tuple[float, float]:
    """(batches/s, tokens/s) medians; fn() -> (batches, tokens, seconds)."""
    rates = [fn() for _ in range(repeat)]
    return (statistics.median(b / s for b, _, s in rates), statistics.median(t / s for _, t, s in rates))


def tokenmill_run(store, workers: int, batches: int):
    from tokenmill.torch import TrainingLoader

    def run():
        loader = TrainingLoader(store, batch_size=B, block_size=T, seed=0, num_workers=workers)
        it = iter(loader)
        next(it)  # the first batch (workers started) is startup, not throughput
        t0, n, tokens = time.perf_counter(), 0, 0
        for batch in it:
            tokens += int(batch["attention_mask"].sum())
            n += 1
            if n == batches:
                break
        dt = time.perf_counter() - t0
        it.close()
        return n, tokens, dt

    return run


def hf_dataset(store):
    import datasets
    import numpy as np
    import pyarrow as pa

    tokens = np.concatenate([np.asarray(store.get(i)) for i in range(len(store))]).astype(np.int32)
    offsets = np.concatenate([[0], np.cumsum(store.lengths)]).astype(np.int64)
    col = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(tokens))
    return datasets.Dataset(pa.table({"input_ids": col}))


def hf_run(ds, per_batch: int, workers: int, batches: int):
    import torch
    from transformers import DataCollatorWithFlattening

    def run():
        g = torch.Generator().manual_seed(0)
        dl = torch.utils.data.DataLoader(ds, batch_size=per_batch, shuffle=True, generator=g, num_workers=workers,
                                         collate_fn=DataCollatorWithFlattening(return_tensors="pt"))
        it = iter(dl)
        next(it)
        t0, n, tokens = time.perf_counter(), 0, 0
        for batch in it:
            tokens += int(batch["input_ids"].numel())
            n += 1
            if n == batches:
                break
        dt = time.perf_counter() - t0
        del it
        return n, tokens, dt

    return run


def synthetic_store(path: Path, n_docs: int, shards: int = 4, seed: int = 0):
    """A valid store of n_docs random short documents (1-23 tokens), written directly."""
    import numpy as np

    from tokenmill import TokenStore

    rng = np.random.default_rng(seed)
    per = -(-n_docs // shards)

    def parts():
        for k in range(shards):
            lengths = rng.integers(1, 24, min(per, n_docs - k * per))
            yield lengths, rng.integers(0, 50257, int(lengths.sum()))

    TokenStore.from_token_arrays(path, parts(), vocab_size=50257, tokenizer_hash="synthetic")


def startup(n_docs: int, repeat: int) -> list[dict]:
    from tokenmill import SlidingWindows, TokenStore
    from tokenmill.torch import TrainingLoader

    rows = []
    next(iter(TrainingLoader([[1, 2, 3]] * 8, batch_size=1, block_size=4)))  # torch's first-use costs, once
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s"
        synthetic_store(path, n_docs)
        t0 = time.perf_counter()
        store = TokenStore.open(path)
        n = store.lengths.size
        opened = time.perf_counter() - t0
        cases = [("greedy packs", dict(block_size=T, method="greedy")),
                 ("concat packs", dict(block_size=T, method="concat")),
                 ("best-fit packs", dict(block_size=T, method="best_fit")),
                 ("windows 2048/2048, padded", dict(windows=SlidingWindows(T, T)))]
        for name, kw in cases:
            times = []
            for _ in range(repeat if "best" not in name else 1):
                t0 = time.perf_counter()
                loader = TrainingLoader(store, batch_size=B, seed=0, **kw)
                next(iter(loader))
                times.append(time.perf_counter() - t0)
            rows.append({"case": name, "documents": n, "seconds": statistics.median(times),
                         "samples": loader.num_samples(0)})
        cache = Path(tmp) / "plans"
        TrainingLoader(store, batch_size=B, seed=0, block_size=T, plan_cache=cache)  # plans and writes it
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            loader = TrainingLoader(store, batch_size=B, seed=0, block_size=T, plan_cache=cache)
            next(iter(loader))
            times.append(time.perf_counter() - t0)
        rows.append({"case": "best-fit packs, plan_cache (a restarted run)", "documents": n,
                     "seconds": statistics.median(times), "samples": loader.num_samples(0)})
        rows.append({"case": "TokenStore.open + lengths", "documents": n, "seconds": opened, "samples": None})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=16)
    ap.add_argument("--batches", type=int, default=150)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--startup-docs", type=int, default=10_000_000)
    ap.add_argument("--no-publish", action="store_true")
    args = ap.parse_args()
    import numpy as np
    import torch

    torch.set_num_threads(1)
    store = build_store(args.mb)
    lengths = np.asarray(store.lengths)
    ds = hf_dataset(store)
    per_batch = max(1, round(B * T / float(lengths.mean())))
    rows = []
    for workers in (0, 1, 2):
        tm = median_rate(tokenmill_run(store, workers, args.batches), args.repeat)
        hf = median_rate(hf_run(ds, per_batch, workers, args.batches), args.repeat)
        rows.append({"workers": workers, "tokenmill_batches_s": tm[0], "tokenmill_tokens_s": tm[1],
                     "hf_batches_s": hf[0], "hf_tokens_s": hf[1], "ratio_tokens": tm[1] / hf[1]})
        print(rows[-1], file=sys.stderr)
    st = startup(args.startup_docs, args.repeat)
    print(st, file=sys.stderr)
    consumer = rows[0]["tokenmill_tokens_s"] / 1e6

    md = [f"`TrainingLoader(store, batch_size={B}, block_size={T})` (best-fit packs, shuffled) over {len(store):,d} "
          f"paragraphs of the en corpus ({int(lengths.sum()):,d} GPT-2 tokens, mean {lengths.mean():.0f} per "
          f"document), against HF `datasets` (Arrow) + torch `DataLoader(shuffle=True)` + "
          f"`DataCollatorWithFlattening` with {per_batch} documents per batch (the same tokens per batch on "
          f"average). Median of {args.repeat} runs of {args.batches} batches after the first; tokens = real "
          "(non-pad) tokens delivered as tensors.", "",
          "| workers | tokenmill batches/s | tokenmill M tokens/s | HF batches/s | HF M tokens/s | tokenmill / HF (tokens/s) |",
          "|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        md.append(f"| {r['workers']} | {r['tokenmill_batches_s']:,.1f} | {r['tokenmill_tokens_s'] / 1e6:,.2f} | "
                  f"{r['hf_batches_s']:,.1f} | {r['hf_tokens_s'] / 1e6:,.2f} | {r['ratio_tokens']:.1f}x |")
    md += ["", f"Against a consumer of 1 M tokens/s, the loader alone (0 workers, in the training process) delivers "
               f"{consumer:,.1f}x that rate; with workers the batches are built beside the step.", "",
           f"Startup on {args.startup_docs:,d} documents (synthetic store, 1-23 tokens each): loader construction "
           "(plan and permutation) plus the first batch.", "",
           "| case | samples | seconds |", "|---|---:|---:|"]
    for r in st:
        md.append(f"| {r['case']} | {'' if r['samples'] is None else format(r['samples'], ',d')} | {r['seconds']:.2f} |")
    text = "\n".join(md)
    print(text)
    if not args.no_publish:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _results import publish

        publish("loader", {"throughput": rows, "startup": st, "consumer_1m_ratio": consumer,
                           "documents": len(store), "tokens": int(lengths.sum()), "hf_docs_per_batch": per_batch,
                           "batch_size": B, "block_size": T}, text)


if __name__ == "__main__":
    main()
