"""GPU check of packing: packed == unpacked with SDPA masks, FlexAttention and varlen flash
attention, then packed vs padded training throughput (forward + backward, bf16).

    PYTHONPATH=src python bench/gpu_packing.py [--out DIR] [--tokens 1000000]

Needs CUDA (exits with a message otherwise). Writes ``gpu_packing.json`` to ``--out``. If numba is missing on the machine, the pure-Python twins stand in for the kernels
(plans are small here).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import types
import warnings
from pathlib import Path

import numpy as np


def _numba_or_twins() -> str:
    try:
        import numba  # noqa: F401 (only whether it imports)

        return "numba"
    except ImportError:
        from tokenmill.batching import layout, packing, padding
        from tokenmill.batching import reference as _reference

        def wrap(f):
            def run(lengths, capacity):
                assign, n = f([int(x) for x in lengths], int(capacity))
                return np.asarray(assign, np.int64), n
            return run

        fake = types.ModuleType("tokenmill.batching._kernels")
        fake.best_fit, fake.first_fit, fake.greedy = (wrap(_reference.best_fit), wrap(_reference.first_fit),
                                                      wrap(_reference.greedy))
        sys.modules["tokenmill.batching._kernels"] = fake
        layout.assemble = packing.assemble = padding.assemble = _reference.assemble
        return "pure-Python twins (numba missing)"


def equivalence(torch, dev) -> list[dict]:
    from tokenmill.torch import TinyCausalLM, TinyConfig
    from tokenmill.verify import packing_equivalence

    rng = np.random.default_rng(0)
    docs = [rng.integers(0, 512, n) for n in rng.integers(2, 256, 64)]
    rows = []
    for pos in ("learned", "rope"):
        cfg = TinyConfig(vocab_size=512, d_model=128, n_heads=4, n_layers=2, max_positions=512, positions=pos)
        for attention, layout, dtype, tol in [("dense", "documents", torch.float32, 1e-4),
                                              ("flex", "documents", torch.float32, 1e-4),
                                              ("varlen", "documents", torch.bfloat16, 6e-2),
                                              ("dense", "stream", torch.float32, 1e-4)]:
            model = TinyCausalLM(cfg, seed=0, dtype=dtype).to(dev)
            t0 = time.perf_counter()
            try:
                r = packing_equivalence(model, docs, 512, attention=attention, layout=layout, atol=tol, rtol=tol)
                row = dict(positions=pos, attention=attention, layout=layout, dtype=str(dtype).split(".")[-1],
                           passed=r.passed, max_abs_diff=r.max_abs_diff, isolation_max_diff=r.isolation_max_diff,
                           mismatched=r.mismatched_targets, targets=r.targets_compared, tol=tol)
            except Exception as e:  # report and go on: one missing kernel must not hide the others
                row = dict(positions=pos, attention=attention, layout=layout, error=f"{type(e).__name__}: {e}"[:300])
            row["seconds"] = round(time.perf_counter() - t0, 2)
            print(row, flush=True)
            rows.append(row)
    return rows


def throughput(torch, dev, total_tokens: int, small: bool = False) -> list[dict]:
    from tokenmill.batching import LengthGroupedBatches, pack, pad_batch
    from tokenmill.torch import TinyCausalLM, TinyConfig, flex_block_mask, token_weighted_loss

    T = 2048
    rng = np.random.default_rng(1)
    lengths = np.clip(rng.lognormal(5.5, 1.0, 4 * total_tokens // 400).astype(np.int64), 2, T)
    lengths = lengths[: int(np.searchsorted(np.cumsum(lengths), total_tokens)) + 1]
    cfg = TinyConfig(vocab_size=32768, d_model=1024, n_heads=16, n_layers=8, max_positions=T, positions="rope")
    if small:  # a dry run of the code paths on CPU
        cfg = TinyConfig(vocab_size=256, d_model=32, n_heads=2, n_layers=1, max_positions=T, positions="rope")
    docs = [rng.integers(0, cfg.vocab_size, n) for n in lengths]
    model = TinyCausalLM(cfg, seed=0, dtype=torch.bfloat16).to(dev)
    params = sum(p.numel() for p in model.parameters())

    def padded(order_batches):
        for idx in order_batches:
            yield pad_batch([docs[i] for i in idx], pad_id=0, pad_to_multiple_of=64), None

    def random_batches(bs=16):
        perm = rng.permutation(len(docs))
        return [perm[i : i + bs] for i in range(0, len(docs), bs)]

    plan = pack(lengths, T)

    def packed(kind):
        for batch in plan.batches(docs, batch_size=8, pad_id=0):
            if kind == "flex":
                yield batch, flex_block_mask(batch, device=dev)
            else:
                yield batch, (torch.as_tensor(batch.cu_seqlens, device=dev), batch.max_seqlen)

    variants = {
        "padded, random batches of 16 (SDPA causal, flash)": lambda: padded(random_batches()),
        "padded, length-grouped batches of 16 (SDPA causal)": lambda: padded(
            list(LengthGroupedBatches(lengths, batch_size=16, seed=0))),
        "packed best_fit 8x2048, FlexAttention BlockMask (compiled)": lambda: packed("flex"),
        "packed best_fit 8x2048, varlen flash (cu_seqlens)": lambda: packed("varlen"),
    }
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    rows = []
    for name, make in variants.items():
        try:
            for i, (batch, mask) in enumerate(make()):  # warm-up: compile, allocator, cuBLAS plans
                _step(torch, model, batch, mask, dev, token_weighted_loss)
                if i == 2:
                    break
            sync()
            positions = targets = 0
            t0 = time.perf_counter()
            for batch, mask in make():
                _step(torch, model, batch, mask, dev, token_weighted_loss)
                s = batch.stats()
                positions, targets = positions + s.positions, targets + s.targets
            sync()
            dt = time.perf_counter() - t0
            row = dict(variant=name, seconds=round(dt, 3), positions=positions, targets=targets,
                       targets_per_s=round(targets / dt), positions_per_s=round(positions / dt),
                       target_rate=round(targets / positions, 4))
        except Exception as e:
            row = dict(variant=name, error=f"{type(e).__name__}: {e}"[:300])
        print(row, flush=True)
        rows.append(row)
    rows.append(dict(model_params=params, documents=len(docs), tokens=int(lengths.sum()), blocks=plan.num_blocks,
                     fill=round(plan.fill, 4)))
    return rows


def _step(torch, model, batch, mask, dev, loss_fn):
    ids = torch.as_tensor(batch.input_ids, device=dev)
    labels = torch.as_tensor(batch.labels, device=dev)
    pos = torch.as_tensor(batch.position_ids, device=dev)
    logits = model(ids, position_ids=pos, attention_mask=mask)
    loss = loss_fn(logits, labels, num_targets=int((batch.labels[:, 1:] != -100).sum()))
    loss.backward()
    model.zero_grad(set_to_none=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("."))
    ap.add_argument("--tokens", type=int, default=1_000_000)
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--skip-equivalence", action="store_true")
    ap.add_argument("--cpu-dry-run", action="store_true", help="run the code paths on CPU with a toy model")
    ap.add_argument("--publish", action="store_true",
                    help="also write bench/results/gpu-packing.json and its docs/benchmarks.md section")
    args = ap.parse_args()
    kernels = _numba_or_twins()
    import torch

    if not torch.cuda.is_available() and not args.cpu_dry_run:
        print("no CUDA device: nothing to do")
        return 0
    warnings.filterwarnings("ignore")
    dev = torch.device("cpu" if args.cpu_dry_run else "cuda")
    name = "cpu" if args.cpu_dry_run else torch.cuda.get_device_name()
    info = dict(torch=torch.__version__, device=name, kernels=kernels)
    print(info, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)

    def save(**parts):  # after every stage, so a timeout still leaves what finished
        (args.out / "gpu_packing.json").write_text(json.dumps(dict(info=info, **parts), indent=1))

    eq = [] if args.skip_equivalence else equivalence(torch, dev)
    save(equivalence=eq)
    tp = [] if args.skip_throughput else throughput(torch, dev, args.tokens, small=args.cpu_dry_run)
    save(equivalence=eq, throughput=tp)
    if args.publish and not args.cpu_dry_run:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _results import publish

        publish("gpu-packing", dict(info=info, equivalence=eq, throughput=tp),
                "\n\n".join(_table(rows) for rows in (eq, tp) if rows), note=f"Device: {name}, torch {torch.__version__}.")
    return 0


def _table(rows: list[dict]) -> str:
    """Rows of dicts as one markdown table (columns: every key, in first-seen order)."""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    fmt = lambda v: f"{v:.3g}" if isinstance(v, float) else str(v)
    return "\n".join(["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
                     + ["| " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |" for r in rows])


if __name__ == "__main__":
    sys.exit(main())
