"""`tokenmill windows`: plan sliding windows over text files, check coverage, preview as text."""

from __future__ import annotations

import json
import sys

from ._common import (
    add_command,
    add_document_args,
    add_quiet,
    add_tokenizer_args,
    documents_from_args,
    integer,
    load_tokenizer,
    say_replaced,
    seed,
)


def register(sub) -> None:
    p = add_command(
        sub, "windows", help="plan sliding windows over tokenized documents; print summary, coverage, previews",
        example="tokenmill windows --tokenizer tok.json --input notes.txt --window 512 --stride 256 "
                "--jitter global --epoch 3 --preview 5",
        func=cmd_windows)
    add_tokenizer_args(p)
    add_document_args(p)
    p.add_argument("--window", type=integer, required=True, help="tokens per window (special tokens included)")
    p.add_argument("--stride", type=integer, default=None, help="step between window starts (default: half the content, (window - reserve) // 2)")
    p.add_argument("--start-offset", type=integer, default=0, help="first start (clamped to max(N - window, 0))")
    p.add_argument("--tail", choices=["align", "drop", "pad"], default="align",
                   help="tokens after the last full window: aligned last window, leave uncovered, short window")
    p.add_argument("--short", choices=["keep", "drop"], default="keep", help="documents shorter than the window")
    p.add_argument("--max-windows-per-doc", type=integer, default=None, help="keep k evenly spread windows per document")
    p.add_argument("--jitter", choices=["global", "per_doc"], default=None,
                   help="random start offset in [0, stride) per epoch (training only)")
    p.add_argument("--seed", type=seed, default=None, help="--jitter's seed (default 0)")
    p.add_argument("--epoch", type=integer, default=None, help="--jitter's epoch (default 0)")
    p.add_argument("--score", choices=["all", "new"], default="all",
                   help="'new': score each token once (strided perplexity evaluation)")
    p.add_argument("--reserve", type=integer, default=0, help="room kept for special tokens inside --window")
    p.add_argument("--preview", type=integer, default=5, metavar="N", help="decode the first N windows (0: none)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    add_quiet(p)


def _encoded(tok, texts, per_batch: int = 4096) -> list:
    """Each text's ids (int64 arrays) as ``encode_ordinary`` gives them: in batches through ``encode_batch``
    where the tokenizer has it (one call a line made --split-lines of 256 MiB take 107 s, 8 s in a store
    build), text by text otherwise."""
    import itertools

    import numpy as np

    if not hasattr(tok, "encode_batch"):
        return [np.asarray(tok.encode_ordinary(t), np.int64) for t in texts]
    out, it = [], iter(texts)
    while batch := list(itertools.islice(it, per_batch)):
        out.extend(tok.encode_batch(batch, as_arrays=True, allowed_special=(), disallowed_special=()))
    return out


def cmd_windows(args) -> int:
    from .._validate import check_int
    from ..data.readers import blank_note
    from ..data.source import ArraySource
    from ..data.text import Replaced
    from ..errors import ConfigError
    from ..windows import SlidingWindows, coverage_report, preview

    n_preview = check_int(args.preview, "--preview", min=0)  # (before any work: "n=-1" named preview's argument)
    given = [o for o, v in (("--seed", args.seed), ("--epoch", args.epoch)) if v is not None]
    if given and args.jitter is None:  # (they move only jittered starts: had been echoed in --json, unused)
        raise ConfigError(f"{' and '.join(given)} without --jitter: windows start where the stride puts them, the same "
                          "in every epoch; add --jitter global (or per_doc), or leave them out")
    args.seed, args.epoch = args.seed or 0, args.epoch or 0
    tok = load_tokenizer(args)
    # half the content by default (the window less --reserve: half the window left gaps where --reserve
    # took half or more of it)
    stride = args.stride if args.stride is not None else max(1, (args.window - args.reserve) // 2)
    sw = SlidingWindows(args.window, stride, start_offset=args.start_offset, tail=args.tail, short=args.short,
                        max_windows_per_doc=args.max_windows_per_doc, jitter=args.jitter, seed=args.seed,
                        score=args.score, reserve=args.reserve)
    replaced, blank = Replaced(), [0]
    docs = _encoded(tok, documents_from_args(args, None, replaced, blank))
    say_replaced(replaced)
    if blank[0]:  # (the documents are numbered without them: "doc 1" can be the file's line 4)
        print(f"tokenmill: {blank_note(blank[0], 'documents are numbered without them')}", file=sys.stderr)
    if not any(len(d) for d in docs):  # (an empty plan read "coverage 100.00%", an empty file one of 0 tokens too)
        from ..errors import InputError

        raise InputError(f"--input {' '.join(map(str, args.input))} holds no text (every file is empty"
                         + (", or holds only blank lines" if args.split_lines else "") + "); nothing to plan")
    source = ArraySource(docs)
    plan = sw.plan(source.lengths, epoch=args.epoch)
    report = coverage_report(plan, source.lengths)
    previews = preview(plan, source, tok, n=n_preview)
    if args.json:
        print(json.dumps({
            "config": {"window": args.window, "stride": stride, "start_offset": args.start_offset,
                       "tail": args.tail, "short": args.short, "max_windows_per_doc": args.max_windows_per_doc,
                       "jitter": args.jitter, "seed": args.seed, "epoch": args.epoch, "score": args.score,
                       "reserve": args.reserve},
            "stats": {**plan.stats.__dict__, "coverage": plan.stats.coverage},
            "coverage": report.to_dict(),
            "previews": [{**p.__dict__} for p in previews],
        }, ensure_ascii=False, indent=1))
        return 0
    print(f"{sw.window_size:,d}-token windows, stride {stride:,d}, epoch {args.epoch:,d}")
    print(plan.summary())
    print(report.summary())
    for p in previews:
        print()
        print(p.render())
    return 0
