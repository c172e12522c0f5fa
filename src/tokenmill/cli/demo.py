"""`tokenmill demo`: raw text to a trained tiny GPT, end to end, on the embedded corpus (or --corpus).

Stages: train a tokenizer -> build a token store -> split train/validation by document -> plan
windows and packs -> train a tiny causal transformer on the CPU through ``TrainingLoader`` with the
token-weighted loss, write a checkpoint halfway, resume a fresh model/optimizer/loader from that
checkpoint alone and check it reproduces the uninterrupted run -> validation loss, the
packed-equals-unpacked proof, one report and PNG plots. Without torch the data stages run and the
demo says what ``pip install 'tokenmill[torch]'`` adds.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Literal

from .._schema import Count, Struct
from ._common import add_command, add_quiet, integer, seed

_TORCH_ADDS = ("pip install 'tokenmill[torch]' adds the training stages: a tiny GPT trained through "
               "TrainingLoader with the token-weighted loss, stopped and resumed exactly, validation loss, "
               "the packed-equals-unpacked proof and the loss plot")


def register(sub) -> None:
    p = add_command(sub, "demo",
                    help="raw text to a trained tiny GPT: tokenizer, token store, split, windows, packs, "
                         "training through TrainingLoader (stopped halfway and resumed exactly), report and plots",
                    example="tokenmill demo --out demo-out      (in seconds: tokenmill demo --quick)", func=cmd_demo)
    p.add_argument("--corpus", nargs="+", metavar="PATH", default=None,
                   help="text files (one document each) or folders of .txt files (default: the embedded corpus)")
    p.add_argument("--errors", choices=["strict", "replace"], default="strict",
                   help="--corpus files of invalid UTF-8: fail naming file and byte offset, or replace with U+FFFD")
    p.add_argument("--out", default="demo-out", help="output folder (tokenizer, store, checkpoint, plots, report)")
    p.add_argument("--vocab-size", type=integer, default=2048, help="the tokenizer's vocabulary (default 2048)")
    p.add_argument("--steps", type=integer, default=400, help="training steps of the uninterrupted run (even; default 400)")
    p.add_argument("--block-size", type=integer, default=128, help="positions per packed block (default 128)")
    p.add_argument("--batch-size", type=integer, default=8, help="blocks per step")
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--quick", action="store_true",
                   help="a few seconds: 40 documents, vocabulary 512, 16 steps (for tests and a first look)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots (matplotlib)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    add_quiet(p)


def _say(args, text: str = "") -> None:
    if not args.json:
        print(text, flush=True)


def cmd_demo(args) -> int:
    from .._io import check_writable_folder
    from ..errors import ConfigError

    if args.steps < 2 or args.steps % 2:
        raise ConfigError(f"--steps {args.steps}: pass an even number >= 2 (the run is stopped at steps/2)")
    # (blocks of 1-3 left no stride for the windows, no documents to compare; a vocabulary under 257, no room for
    # the 256 byte tokens and <|endoftext|>, failed after the corpus line was printed)
    for name, least, why in (("vocab_size", 257, " (256 byte tokens + <|endoftext|>)"), ("block_size", 4, ""),
                             ("batch_size", 1, "")):
        if getattr(args, name) < least:
            raise ConfigError(f"--{name.replace('_', '-')} {getattr(args, name)} must be an integer >= {least}{why}")
    if args.quick:
        args.vocab_size, args.steps = min(args.vocab_size, 512), min(args.steps, 16)
    out = Path(args.out)
    if out.exists() and not out.is_dir():  # (mkdir said "cannot access ...: File exists")
        raise ConfigError(f"--out {args.out} is a file; the demo writes a folder (tokenizer, store, checkpoint, plots, "
                          "report): pass a folder's path")
    check_writable_folder(out, "--out", args.out)  # (before the corpus is read and the tokenizer trained)
    _own_folder(out, args.out)
    report: dict = {"out": str(out)}
    docs, what = _corpus(args)
    if len(docs) < 2:  # (one document cannot be split into training and validation documents)
        raise ConfigError(f"the corpus holds {len(docs)} document(s); the demo needs 2 or more (it holds some out "
                          "for validation): pass --corpus with more text files or folders of .txt files")
    n_bytes = sum(len(d.encode()) for d in docs)
    report["corpus"] = {"documents": len(docs), "bytes": n_bytes, "source": what}
    _say(args, f"corpus: {len(docs):,d} documents, {n_bytes:,d} bytes ({what})")

    tok, store = _tokenizer_and_store(args, docs, out, report)
    train, val = store.split(0.1, seed=args.seed)
    report["split"] = {"train_documents": len(train), "val_documents": len(val),
                       "train_tokens": int(train.lengths.sum()), "val_tokens": int(val.lengths.sum())}
    _say(args, f"\n3. split by document (seed {args.seed}): train {len(train):,d} documents "
               f"({int(train.lengths.sum()):,d} tokens), validation {len(val):,d} ({int(val.lengths.sum()):,d}); "
               "no document on both sides, validation never shares a block with training")
    _plans(args, train, report)

    try:
        import torch  # noqa: F401 (only whether it imports)
    except ImportError:
        report["training"] = None
        _say(args, f"\ntorch is not installed: the data stages are done. {_TORCH_ADDS}.")
        plots = [] if args.no_plots else _plots(args, out, train, None, report)
        report["plots"] = plots + [_html_report(args, out, tok, store)]
        _finish(args, out, report)
        return 0

    _train(args, out, tok, train, val, report)
    report["plots"] = ([] if args.no_plots else _plots(args, out, train, report["training"], report)) + [
        _html_report(args, out, tok, store)]
    _finish(args, out, report)
    return 0 if report["training"]["resumed_equals_uninterrupted"] else 1


def _corpus(args):
    from ..corpus import default_corpus

    if args.corpus is None:
        docs = default_corpus()
        what = "the embedded corpus: Python's own help topics and docstrings"
    else:
        from ..data.text import Replaced, expand_inputs, iter_documents
        from ._common import say_replaced

        replaced = Replaced()
        docs = [d for d in iter_documents(expand_inputs(args.corpus), errors=args.errors, replaced=replaced) if d]
        say_replaced(replaced)
        what = ", ".join(args.corpus)
    if args.quick:
        docs = docs[:40]
    return docs, what


_MARK = ".tokenmill-demo"  # the demo's mark in its output folder: a folder holding it is the demo's own
_OUTPUTS = {"tokenizer.json", "store", "checkpoint", "loss.png", "lengths.png", "coverage.png", "report.html",
            "report.json"}


def _own_folder(out: Path, given: str) -> None:
    """Make ``out`` the demo's folder: new, empty, or one a demo wrote before (its mark); a folder of the
    user's is refused before anything is written (the demo replaced its tokenizer.json, report and plots)."""
    from .._io import write_bytes_atomic
    from ..errors import ConfigError

    if out.is_dir() and not (out / _MARK).exists():
        held = sorted(p.name for p in out.iterdir())
        # a demo's folder from before the mark: its outputs alone, its report.json the demo's (a user's evaluation
        # report.json beside their tokenizer.json had been taken for one, and both replaced)
        earlier = "report.json" in held and set(held) <= _OUTPUTS and _demo_report(out / "report.json")
        if held and not earlier:
            raise ConfigError(f"--out {given} holds files the demo did not write ({', '.join(held[:3])}"
                              f"{', ...' if len(held) > 3 else ''}); pass a new or empty folder (the demo writes "
                              "tokenizer.json, store/, checkpoint/, plots and a report there)")
    out.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(out / _MARK, b"written by tokenmill demo; its outputs here are replaced by the next demo run\n")


def _demo_report(path: Path) -> bool:
    """Whether ``path`` is a report.json the demo wrote: a JSON object with the demo's sections."""
    import json

    try:
        with open(path, "rb") as f:
            body = json.loads(f.read(1 << 20))
    except (OSError, ValueError):
        return False
    return isinstance(body, dict) and {"corpus", "split", "training", "plots"} <= set(body)


def _tokenizer_and_store(args, docs, out: Path, report: dict):
    from ..data.readers import texts
    from ..data.store import TokenStore
    from ..tokenizer.bpe.train import train_bpe

    t0 = time.perf_counter()
    tok = train_bpe(docs, args.vocab_size, pattern="gpt4", special_tokens=["<|endoftext|>"], progress=not args.quiet)
    tok.save(out / "tokenizer.json")
    dt_train = dt = time.perf_counter() - t0
    r = tok.train_report
    _say(args, f"\n1. trained {tok!r} in {dt:.1f} s: {r.merges:,d} merges ({r.stop_reason}); "
               f"first merges " + ", ".join(repr(tok.token_bytes(i).decode('utf-8', 'replace')) for i in range(256, 262)))
    t0 = time.perf_counter()
    store = TokenStore.build(out / "store", texts(docs), tok, workers=1, overwrite=True, progress=not args.quiet)
    dt = time.perf_counter() - t0
    n_bytes = report["corpus"]["bytes"]
    content = store.num_tokens - len(store)  # without the EOS appended to every document
    report["tokenizer"] = {"vocab_size": tok.vocab_size, "merges": r.merges, "seconds": round(dt_train, 2)}
    report["store"] = {"path": str(out / "store"), "documents": len(store), "tokens": store.num_tokens,
                       "shards": store.num_shards, "bytes_per_token": round(n_bytes / max(content, 1), 3),
                       "fingerprint": store.fingerprint, "seconds": round(dt, 2)}
    _say(args, f"\n2. token store {out / 'store'}: {len(store):,d} documents, {store.num_tokens:,d} tokens "
               f"(EOS appended), {n_bytes / max(content, 1):.2f} bytes per token, {store.num_shards} shard(s), "
               f"built in {dt:.1f} s")
    return tok, store


def _plans(args, train, report: dict) -> None:
    import numpy as np

    from ..batching.packing import pack
    from ..windows.coverage import coverage_report
    from ..windows.sliding import SlidingWindows

    T = args.block_size
    lengths = np.asarray(train.lengths)
    sw = SlidingWindows(T, T // 2, jitter="global", seed=args.seed)
    wplan = sw.plan(lengths, epoch=0)
    cov = coverage_report(wplan, lengths)
    report["windows"] = {"window": T, "stride": T // 2, "windows": len(wplan),
                         "coverage_percent": round(cov.coverage_percent, 3),
                         "multiplicity_min": int(cov.multiplicity_min), "multiplicity_max": int(cov.multiplicity_max),
                         "window_tokens_per_token": round(wplan.stats.window_tokens / max(wplan.stats.num_tokens, 1), 3)}
    _say(args, f"\n4. sliding windows {T}/{T // 2} (jitter per epoch) over the training documents: {len(wplan):,d} "
               f"windows, coverage {cov.coverage_percent:.2f}%, every token in {cov.multiplicity_min}-"
               f"{cov.multiplicity_max} windows ({report['windows']['window_tokens_per_token']:.2f}x the tokens; "
               f"this epoch's jitter of {wplan.stats.jitter} leaves the first tokens of each document to other epochs)")
    plan = pack(lengths, T)
    rows = int(np.ceil(lengths / T).sum())  # padding: every document (cut into T pieces) in its own rows
    pad_fill = float(lengths.sum()) / (rows * T) if rows else 1.0
    report["packing"] = {"block_size": T, "blocks": plan.num_blocks, "packing_fill": round(plan.fill, 4),
                         "padding_rows": rows, "padding_fill": round(pad_fill, 4),
                         "split_documents": plan.split_docs, "targets_lost_at_cuts": plan.boundary_targets}
    _say(args, f"\n5. blocks of {T}: padding each document fills {pad_fill:.1%} of {rows:,d} rows; best-fit packing "
               f"fills {plan.fill:.1%} of {plan.num_blocks:,d} blocks ({plan.split_docs:,d} long documents split, "
               f"{plan.boundary_targets:,d} targets lost at cuts)")


# ---- training ---------------------------------------------------------------------------------------
def _train(args, out: Path, tok, train, val, report: dict) -> None:
    import numpy as np
    import torch

    from ..torch.loader import TrainingLoader
    from ..torch.model import TinyCausalLM, TinyConfig

    torch.set_num_threads(1)  # tiny tensors on a shared machine: one thread is the fastest and deterministic
    T, B, N = args.block_size, args.batch_size, args.steps
    cfg = TinyConfig(vocab_size=tok.vocab_size, d_model=64, n_heads=4, n_layers=2, max_positions=T)
    make_loader = lambda: TrainingLoader(train, batch_size=B, block_size=T, seed=args.seed, pad_id=0)
    make_eval = lambda: TrainingLoader(val, batch_size=B, block_size=T, shuffle=False, drop_last=False)

    model = TinyCausalLM(cfg, seed=args.seed)
    val_before = _evaluate(model, make_eval())
    opt = _optimizer(model)
    loader = make_loader()
    batches = _forever(loader)
    ckpt = out / "checkpoint"
    losses, targets, positions = [], [], 0
    t0 = time.perf_counter()
    bar = _bar(args, N, "training (uninterrupted; checkpoint at step %d)" % (N // 2))
    for step in range(N):
        batch = next(batches)
        loss = _step(model, opt, batch)
        losses.append(loss)
        targets.append(int(batch["num_targets"]))
        positions += batch["input_ids"].numel()
        bar.update(1)
        if step + 1 == N // 2:
            _save_checkpoint(ckpt, model, opt, loader, step + 1)
    bar.close()
    train_seconds = time.perf_counter() - t0
    val_after = _evaluate(model, make_eval())
    final = {k: v.detach().clone() for k, v in model.state_dict().items()}

    # the resumed run: nothing but the checkpoint file carries over
    del model, opt, loader
    model, opt, loader, start = _load_checkpoint(ckpt, cfg, make_loader)
    batches = _forever(loader)
    resumed = []
    bar = _bar(args, N - start, f"training (resumed from {ckpt} at step {start})")
    for _ in range(start, N):
        resumed.append(_step(model, opt, next(batches)))
        bar.update(1)
    bar.close()
    same_losses = resumed == losses[start:]
    max_diff = max(float((model.state_dict()[k] - final[k]).abs().max()) for k in final)
    equal = same_losses and max_diff == 0.0
    verdict = _verify(model, val, T)
    report["training"] = {
        "model": {"d_model": cfg.d_model, "layers": cfg.n_layers, "heads": cfg.n_heads, "vocab_size": cfg.vocab_size,
                  "parameters": sum(p.numel() for p in model.parameters())},
        "steps": N, "batch_size": B, "block_size": T, "epochs": round(N / len(make_loader()), 2),
        "seconds": round(train_seconds, 1), "positions_per_step": B * T,
        "effective_targets_per_step": round(float(np.mean(targets)), 1),
        "target_rate": round(float(np.sum(targets)) / positions, 4),
        "val_loss_before": round(val_before, 4), "val_loss_after": round(val_after, 4),
        "losses": [round(x, 6) for x in losses], "resumed_losses": [round(x, 6) for x in resumed],
        "resumed_from_step": start, "checkpoint": str(ckpt),
        "resumed_equals_uninterrupted": bool(equal), "resumed_max_param_diff": max_diff,
        "packed_equals_unpacked": verdict,
    }
    tr = report["training"]
    _say(args, f"\n6. trained a {tr['model']['parameters']:,d}-parameter GPT ({cfg.n_layers} layers, d={cfg.d_model}) "
               f"for {N} steps ({tr['epochs']} epochs) in {train_seconds:.0f} s: {B} x {T} = {B * T:,d} positions per "
               f"step, {tr['effective_targets_per_step']:,.0f} effective targets per step on average "
               f"({tr['target_rate']:.1%}; the first position of every document is not a target)")
    _say(args, f"   validation loss (token-weighted, nats) {val_before:.3f} before -> {val_after:.3f} after")
    _say(args, f"   stopped at step {start}, resumed from {ckpt} (model, optimizer, loader state): "
               + ("identical to the uninterrupted run" if equal else "DIFFERENT from the uninterrupted run")
               + f" ({sum(a == b for a, b in zip(resumed, losses[start:]))}/{N - start} step losses equal, "
                 f"max parameter difference {max_diff:g})")
    _say(args, f"   packed == unpacked on the trained model (float64, validation documents): "
               f"{'PASS' if verdict['passed'] else 'FAIL'} ({verdict['targets_compared']:,d} targets compared, "
               f"max |diff| {verdict['max_abs_diff']:.1e})")


def _bar(args, total: int, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="step", disable=args.quiet, file=sys.stderr, leave=False)


def _forever(loader):
    """The loader's batches, epoch after epoch (it moves to the next epoch when one ends)."""
    while True:
        yield from loader


def _optimizer(model):
    import torch

    return torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)


def _step(model, opt, batch) -> float:
    import torch

    from ..torch.loss import token_weighted_loss
    from ..torch.masks import sdpa_mask

    logits = model(batch["input_ids"], position_ids=batch["position_ids"], attention_mask=sdpa_mask(batch))
    loss = token_weighted_loss(logits, batch["labels"], num_targets=batch["num_targets"])
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return float(loss.detach())


def _evaluate(model, loader) -> float:
    import torch

    from ..torch.loss import token_weighted_loss
    from ..torch.masks import sdpa_mask

    total, n = 0.0, 0
    model.eval()
    with torch.no_grad():
        for batch in loader:
            k = int(batch["num_targets"])
            if k == 0:
                continue
            logits = model(batch["input_ids"], position_ids=batch["position_ids"], attention_mask=sdpa_mask(batch))
            total += float(token_weighted_loss(logits, batch["labels"], num_targets=1))
            n += k
    model.train()
    return total / max(n, 1)


def _save_checkpoint(path: Path, model, opt, loader, step: int) -> None:
    """Model and optimizer tensors in .npz (no pickle), everything else in JSON; written atomically."""
    import numpy as np

    from .._io import atomic_path, write_json_atomic

    path.mkdir(parents=True, exist_ok=True)
    osd = opt.state_dict()
    tensors = {f"model/{k}": v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    for pid, st in osd["state"].items():
        for name, v in st.items():
            tensors[f"optim/{pid}/{name}"] = v.detach().cpu().numpy()
    with atomic_path(path / "tensors.npz") as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **tensors)
    write_json_atomic(path / "state.json", {"format": "tokenmill.demo.checkpoint", "version": 1, "step": step,
                                            "optimizer_param_groups": osd["param_groups"],
                                            "loader": loader.state_dict()})


class DemoCheckpoint(Struct):
    """``state.json`` of a demo checkpoint (the tensors are in ``tensors.npz`` beside it)."""

    format: Literal["tokenmill.demo.checkpoint"]
    version: Literal[1]
    step: Count
    optimizer_param_groups: list[dict[str, Any]]
    loader: dict[str, Any]  # checked by TrainingLoader.load_state_dict


def _load_checkpoint(path: Path, cfg, make_loader):
    import numpy as np
    import torch

    from .._schema import load_json
    from ..torch.model import TinyCausalLM

    meta, _ = load_json(path / "state.json", DemoCheckpoint, what="demo checkpoint")
    with np.load(path / "tensors.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    model = TinyCausalLM(cfg, seed=12345)  # other initial weights: the checkpoint must overwrite them all
    model.load_state_dict({k[6:]: torch.from_numpy(v) for k, v in arrays.items() if k.startswith("model/")})
    opt = _optimizer(model)
    state: dict = {}
    for k, v in arrays.items():
        if k.startswith("optim/"):
            _, pid, name = k.split("/", 2)
            state.setdefault(int(pid), {})[name] = torch.from_numpy(v)
    opt.load_state_dict({"state": state, "param_groups": meta["optimizer_param_groups"]})
    loader = make_loader()
    loader.load_state_dict(meta["loader"])
    return model, opt, loader, int(meta["step"])


def _verify(model, val, T: int) -> dict:
    import copy

    import numpy as np
    import torch

    from ..verify import packing_equivalence

    m = copy.deepcopy(model).to(torch.float64).eval()
    docs = [np.asarray(val.get(i), np.int64)[: T // 2] for i in range(min(len(val), 12))]
    docs = [d for d in docs if d.size >= 2]
    r = packing_equivalence(m, docs, block_size=T, atol=1e-9, rtol=0.0)
    return {"passed": bool(r.passed), "targets_compared": int(r.targets_compared),
            "max_abs_diff": float(r.max_abs_diff), "moved_targets": int(r.moved_targets)}


# ---- plots and report ----------------------------------------------------------------------------------
def _plots(args, out: Path, train, training, report: dict) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        _say(args, "\n(matplotlib is not installed: no plots; pip install 'tokenmill[plot]')")
        return []
    import numpy as np

    from ..windows.sliding import SlidingWindows

    T = args.block_size
    written = []
    if training is not None:
        fig, ax = plt.subplots(figsize=(7, 4))
        steps = np.arange(1, len(training["losses"]) + 1)
        ax.plot(steps, training["losses"], lw=1.2, label="uninterrupted")
        s0 = training["resumed_from_step"]
        ax.plot(steps[s0:], training["resumed_losses"], "--", lw=1.2, label=f"resumed at step {s0}")
        ax.axvline(s0, color="grey", lw=0.8)
        ax.set_xlabel("step")
        ax.set_ylabel("token-weighted loss (nats)")
        ax.set_title("training loss: the resumed run lies on the uninterrupted one")
        ax.legend()
        written.append(_save(fig, out / "loss.png"))
    lengths = np.asarray(train.lengths)
    fig, ax = plt.subplots(figsize=(7, 4))
    bins = np.logspace(0, np.log10(max(int(lengths.max()), 2)), 40)
    ax.hist(lengths, bins=bins, color="tab:blue", alpha=0.8)
    ax.axvline(T, color="tab:red", label=f"block size {T}")
    ax.set_xscale("log")
    ax.set_xlabel("document length (tokens)")
    ax.set_ylabel("documents")
    ax.set_title(f"{int((lengths > T).sum())} of {lengths.size} documents are longer than a block")
    ax.legend()
    written.append(_save(fig, out / "lengths.png"))
    d = int(np.argmax(lengths))
    sw = SlidingWindows(T, T // 2, jitter="global", seed=args.seed)
    fig, ax = plt.subplots(figsize=(7, 4))
    n = int(lengths[d])
    for e in range(2):
        plan = sw.plan(np.array([n]), epoch=e)
        ax.plot(plan.multiplicity([n]), lw=1, label=f"epoch {e} (jitter {plan.stats.jitter})")
    ax.set_xlabel(f"token position in the longest training document ({n:,d} tokens)")
    ax.set_ylabel("windows holding the token")
    ax.set_title(f"window coverage, windows {T} / stride {T // 2}")
    ax.legend()
    written.append(_save(fig, out / "coverage.png"))
    return written


def _html_report(args, out: Path, tok, store) -> str:
    """``report.html``: the tokenizer, the store, windows and packing of this run on one page."""
    from ..reporting import report

    T = args.block_size
    r = report(tok, store=store, out=out / "report.html", window=T, block_size=T, seed=args.seed,
               progress=not args.quiet)
    _say(args, f"\nreport: {r.path} ({r.bytes:,d} bytes): tokens over text, vocabulary, store, windows and "
               "packing on one self-contained page; open it in a browser")
    return str(r.path)


def _save(fig, path: Path) -> str:
    import matplotlib.pyplot as plt

    from .._io import save_figure

    fig.tight_layout()
    try:
        return str(save_figure(fig, path))
    finally:
        plt.close(fig)


def _finish(args, out: Path, report: dict) -> None:
    from .._io import write_json_atomic

    write_json_atomic(out / "report.json", report)
    if args.json:
        slim = json.loads(json.dumps(report))
        if slim.get("training"):
            slim["training"].pop("losses", None)
            slim["training"].pop("resumed_losses", None)
        print(json.dumps(slim, indent=1))
        return
    files = ["tokenizer.json", "store/", "checkpoint/"] if report.get("training") else ["tokenizer.json", "store/"]
    files += [Path(p).name for p in report.get("plots", [])] + ["report.json"]
    print(f"\noutputs in {out}/: " + ", ".join(files))
    print(f"next: tokenmill store stats {out / 'store'}, tokenmill inspect {out / 'tokenizer.json'}, and "
          "tokenmill's training guide (docs/guide.md in its source)")
