"""`tokenmill loader`: what a TrainingLoader over a store (or a mixture of stores) delivers per epoch."""

from __future__ import annotations

import json

from .._words import counted
from ._common import add_command, add_quiet, integer, number, seed


def register(sub) -> None:
    p = add_command(
        sub, "loader",
        help="plan a TrainingLoader over token stores: samples and batches per epoch and rank, fill, effective "
             "targets, what drop_last leaves out, and for a mixture the epochs of each part (no torch needed)",
        example="tokenmill loader web.store:0.7 code.store:0.3 --batch-size 8 --block-size 2048 --world-size 8 "
                "--tokens 1000000000",
        func=cmd_loader)
    p.add_argument("stores", nargs="+", metavar="STORE[:WEIGHT]",
                   help="token store folders (or `store sft` folders: their prompts are no targets); with several, "
                        "a Mixture with these token weights (default 1 each)")
    p.add_argument("--batch-size", type=integer, required=True, help="samples per batch and rank")
    p.add_argument("--block-size", type=integer, default=None, help="packed blocks of this many positions")
    p.add_argument("--window", type=integer, default=None, help="sliding windows of this size (padded; packed with "
                                                              "--block-size)")
    p.add_argument("--stride", type=integer, default=None, help="window stride (default: --window)")
    p.add_argument("--method", default=None, choices=["best_fit", "first_fit_decreasing", "greedy", "concat"],
                   help="with --block-size: how documents (or windows) are packed into blocks (default best_fit)")
    p.add_argument("--world-size", type=integer, default=1)
    p.add_argument("--seed", type=seed, default=0,
                   help="the loader's seed (also a mixture's own, and the --split's); a mixture's data fingerprint "
                        "covers its parts' names, here the store paths as given (st/ and ./st are one name), its "
                        "weights and this seed: Mixture([...], seed=S, names=[paths]) in Python gives the same")
    p.add_argument("--keep-last", action="store_true", help="drop_last=False: complete the last batch with empty rows")
    p.add_argument("--split", type=number, default=None, metavar="VAL_FRACTION",
                   help="plan the training side of store.split(VAL_FRACTION, seed=--seed)")
    p.add_argument("--tokens", type=integer, default=None, help="mixture: epochs of each part these training tokens take (default: the tokens of one epoch)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    add_quiet(p)  # (accepted by every command: a script adds -q to each call)


def _parse(spec: str):
    import math

    from ..errors import ConfigError

    path, sep, weight = spec.rpartition(":")
    if not sep or not path:
        return spec, 1.0
    try:
        w = float(weight)
    except ValueError:
        raise ConfigError(f"{spec!r}: expected STORE or STORE:WEIGHT with a number after the colon") from None
    if not math.isfinite(w) or w <= 0:
        raise ConfigError(f"{spec!r}: the weight {weight!r} must be a positive finite number, e.g. "
                          f"{path}:0.5 (leave a store out instead of giving it weight 0)")
    return path, w


def cmd_loader(args) -> int:
    import numpy as np

    from ..batching.schedule import BatchSchedule
    from ..data.masked import MaskedSource, is_masked_folder
    from ..data.mixture import Mixture
    from ..data.store import TokenStore
    from ..errors import ConfigError
    from ..windows.sliding import SlidingWindows

    if args.block_size is None and args.window is None:  # (the library's message names its Python arguments)
        raise ConfigError("pass --block-size T (documents packed into rows of T tokens) or --window N (sliding "
                          "windows of N tokens)")
    import os

    specs = [_parse(spec) for spec in args.stores]  # (path, weight) each, parsed once
    real = [os.path.realpath(p) for p, _ in specs]  # st, st/ and ./st are one store
    twice = sorted({p for (p, _), r in zip(specs, real) if real.count(r) > 1})
    if twice:  # (a mixture of a store with itself: every document twice)
        raise ConfigError(f"a store is given twice ({', '.join(twice)}); give each part once, with its weight "
                          "(STORE:WEIGHT)")
    if args.tokens is not None and (len(args.stores) < 2 or args.tokens < 1):
        raise ConfigError(f"--tokens {args.tokens}: " + ("it sizes a mixture's epochs per part: give two stores or "
                                                         "more, or leave it out" if len(args.stores) < 2 else
                                                         "pass a positive number of training tokens"))
    parts, whole = [], []
    for path, w in specs:
        src = MaskedSource.open(path) if is_masked_folder(path) else TokenStore.open(path)  # (`store sft`'s folder: its flags count)
        whole.append(len(src))
        if args.split is not None:
            src = src.split(args.split, seed=args.seed)[0]
        parts.append((path, src, w))
    source = parts[0][1] if len(parts) == 1 else Mixture([(s, w) for _, s, w in parts], seed=args.seed,
                                                         names=[os.path.normpath(p) for p, _, _ in parts])
    windows = None
    if args.window is not None:
        windows = SlidingWindows(args.window, args.window if args.stride is None else args.stride)  # (0 refused)
    elif args.stride is not None:
        raise ConfigError("--stride needs --window")
    if args.method is not None and args.block_size is None:  # (it had been ignored: padded windows are not packed)
        raise ConfigError(f"--method {args.method} packs into --block-size rows; without --block-size each window is "
                          "a padded row of its own: pass --block-size, or leave --method out")
    sched = BatchSchedule(source, batch_size=args.batch_size, block_size=args.block_size,
                          method=args.method or "best_fit",
                          windows=windows, seed=args.seed, world_size=args.world_size, drop_last=not args.keep_last)
    n, nb = sched.num_samples(0), sched.num_batches(0)
    streams = [sched.stream(i, 0) for i in range(len(sched.parts))]
    # what epoch 0 yields, rows by rows (a mixture's parts as it draws them: the plans' totals had been taken
    # once each, unweighted: fill 65.7% where the loader gave 11.6%)
    counts = sched.epoch_counts(0)
    positions = counts["samples"] * streams[0].plan.block_size
    tokens, targets = counts["tokens"], counts["targets"]
    out = {
        "stores": [p for p, _, _ in parts], "data_fingerprint": sched.data_fingerprint,
        "documents": int(sum(len(s) for _, s, _ in parts)), "tokens": int(sum(int(np.sum(s.lengths)) for _, s, _ in parts)),
        "samples_per_epoch": n, "global_batch_size": sched.global_batch_size,
        "batches_per_epoch_per_rank": nb, "dropped_samples": sched.dropped_samples(0),
        "sample_positions": streams[0].plan.block_size, "fill": round(tokens / positions, 4) if positions else 1.0,
        "effective_targets_per_sample": round(targets / max(counts["samples"], 1), 1),
        "epoch_tokens": int(tokens),
        "plan_options": sched.plan_options(),
    }
    if args.split is not None:  # ("documents" and "tokens" are the training side's)
        out["split"] = {"val_fraction": args.split, "documents_before_split": int(sum(whole))}
    report = None
    if isinstance(source, Mixture):
        # training tokens: --tokens, else one epoch's (the stores' own total is not what an epoch draws)
        # (each part's epoch as the plan holds it: overlapping windows count a token once per window)
        # (over the default one epoch, what each part gives in it: the weights' split had been shown as drawn, a
        # sample or so off each part's count)
        report = source.report(args.tokens if args.tokens is not None else int(tokens),
                               part_tokens=[sched.stream(i, 0).tokens for i in range(len(parts))],
                               drawn=counts["part_tokens"] if args.tokens is None else None)
        out["mixture"] = report.to_dict()
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    what = "mixture of " + ", ".join(f"{p} ({w:g})" for p, _, w in parts) if report else parts[0][0]
    side = ("" if args.split is None else
            f" (the training side of --split {args.split:g}: {out['documents']:,d} of "
            f"{counted(sum(whole), 'document')})")
    print(f"{what}: {counted(out['documents'], 'document')}, {counted(out['tokens'], 'token')}{side}")
    print(f"samples per epoch {n:,d} of {out['sample_positions']:,d} positions (fill {out['fill']:.1%}, "
          f"{out['effective_targets_per_sample']:,.0f} effective targets each)")
    drawn = nb * sched.global_batch_size
    # (a mixture draws whole global batches; the rest of its samples carry into the next epoch, none is dropped:
    # "samples per epoch 5,887", "367 batches" of 16 and "leaves out 0" had not added up)
    left = (f"{counted(n - drawn, 'sample carries', 'samples carry')} into the next epoch (a mixture drops none)"
            if report is not None and n > drawn else
            f"drop_last leaves out {counted(out['dropped_samples'], 'sample')}")
    print(f"global batch {sched.global_batch_size:,d} = {args.world_size} rank{'s' if args.world_size != 1 else ''} x {args.batch_size}: "
          f"{counted(nb, 'batch', 'batches')} per epoch on every rank; {left}")
    if report is not None:
        print(report)
    return 0
