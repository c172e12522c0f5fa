"""`tokenmill pack` (plan statistics) and `tokenmill verify-packing` (packed == unpacked proof)."""

from __future__ import annotations

import re
import sys
import time

from ._common import add_command, add_quiet, integer, number, seed


def register(sub) -> None:
    p = add_command(sub, "pack", help="plan packed blocks from document lengths and report fill, splits, truncation",
                    example="tokenmill pack --lognormal 1000000 --block-size 2048 --compare", func=cmd_pack)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--lengths", metavar="FILE", help="document lengths: a .npy array or one integer per line")
    src.add_argument("--lognormal", type=integer, metavar="N", help="N synthetic log-normal lengths")
    p.add_argument("--mu", type=number, default=None, help="--lognormal: mean of log length (default 5.5: median ~245)")
    p.add_argument("--sigma", type=number, default=None, help="--lognormal: sigma of log length (default 1.0)")
    p.add_argument("--block-size", type=integer, required=True, help="positions per packed block")
    p.add_argument("--method", default=None, choices=["best_fit", "first_fit_decreasing", "greedy", "concat"],
                   help="packing algorithm (default best_fit)")
    p.add_argument("--long-docs", default=None, choices=["split", "truncate", "error"],
                   help="a document longer than a block: split across blocks (default), truncate, or error (the "
                        "document methods; concat cuts one stream into blocks)")
    p.add_argument("--compare", action="store_true", help="run every method and print one line each")
    p.add_argument("--json", action="store_true", help="print each plan's counts as JSON (a list, one per method)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the synthetic lengths and of methods that draw "
                   "(default 0)")
    add_quiet(p)

    v = add_command(sub, "verify-packing",
                    help="check that packed blocks give the same logits as documents run alone (tiny reference "
                         "transformer); exit status 1 if a check fails",
                    example="tokenmill verify-packing --positions learned rope --docs 32 --block-size 64", func=cmd_verify)
    v.add_argument("--positions", nargs="+", default=["learned", "rope"], choices=["learned", "rope"],
                   help="position encodings to check (default: both)")
    v.add_argument("--layout", default="documents", choices=["documents", "stream"],
                   help="documents: block-diagonal mask + position reset; stream: plain stream packing (fails)")
    v.add_argument("--attention", default="dense", choices=["dense", "flex"], help="attention masks (default dense)")
    v.add_argument("--method", default="best_fit", choices=["best_fit", "first_fit_decreasing", "greedy"],
                   help="packing algorithm (default best_fit)")
    v.add_argument("--docs", type=integer, default=32, help="number of random documents (default 32)")
    v.add_argument("--block-size", type=integer, default=64, help="positions per packed block (default 64)")
    v.add_argument("--dtype", default="float64", choices=["float32", "float64"], help="model dtype (default float64)")
    v.add_argument("--atol", type=number, default=None, help="default: 1e-9 for float64, 1e-4 for float32")
    v.add_argument("--expect", default="pass", choices=["pass", "fail"],
                   help="exit 0 when every check has this outcome (use 'fail' to demonstrate the stream baseline)")
    v.add_argument("--seed", type=seed, default=0)
    v.add_argument("--json", action="store_true", help="print one JSON object per --positions value (a list)")
    add_quiet(v)


def _read_lengths(args):
    import numpy as np

    from .._validate import check_float, check_int
    from ..errors import ConfigError, InputError

    if args.lognormal is None and (args.mu is not None or args.sigma is not None):  # (they had been ignored)
        raise ConfigError("--mu and --sigma shape the synthetic --lognormal lengths; with --lengths FILE leave "
                          "them out")
    if args.lognormal is not None:
        n = check_int(args.lognormal, "--lognormal", min=1, max=2**31)  # (0: "0 documents at 100% fill")
        mu = check_float(5.5 if args.mu is None else args.mu, "--mu", min=-1e3, max=1e3)
        sigma = check_float(1.0 if args.sigma is None else args.sigma, "--sigma", min=0.0, max=1e3) + 0.0  # (-0.0)
        rng = np.random.default_rng(check_int(args.seed, "--seed", min=0))
        with np.errstate(over="ignore"):
            x = rng.lognormal(mu, sigma, n)
        if n and not (np.isfinite(x).all() and x.max() < 2**40):
            raise ConfigError(f"--mu {mu:g} --sigma {sigma:g} draw lengths up to {x.max():.3g} tokens, more than "
                              f"2**40 (or infinite); lower --mu or --sigma")
        return np.maximum(x.astype(np.int64), 1)
    from ..data.text import check_input_file

    try:
        check_input_file(args.lengths)  # a clear error for a folder, a device or a missing file
        if args.lengths.endswith(".npy"):
            # mapped first: a header claiming more entries than the file holds is refused by its size (it had
            # been read into memory: "out of memory")
            arr = np.load(args.lengths, allow_pickle=False, mmap_mode="r")
            if arr.ndim != 1 or arr.dtype.kind not in "iu":
                raise InputError(f"it holds a {arr.dtype} array of shape {arr.shape}; pass a 1-D integer array of "
                                 "document lengths")
            if arr.size == 0:  # (as an empty text file: 0 documents "packed" at 100% fill)
                raise InputError("it holds no lengths (an empty array); pass one length per document")
            return np.array(arr)
        with open(args.lengths, "rb") as f:
            raw = f.read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"not a text file (byte offset {e.start:,d} is not UTF-8); pass one length per line, "
                             "or a .npy array") from None
        body = text.rstrip()
        marked = re.sub(r"#[^\n]*", "#", body)  # ('#' comments, which loadtxt skips: a comment line is no blank)
        if not marked.replace("#", "").split():  # (loadtxt warns and returns nothing: 0 documents "packed" at
            # 100% fill; comments alone too)
            raise InputError("it holds no lengths; pass one length per line, or a .npy array")
        blank = re.search(r"(?m)^[ \t\r\f\v]*$", marked)
        if blank:  # (loadtxt skips it: every later document's index moved by one, without a word)
            raise InputError(f"line {marked.count(chr(10), 0, blank.start()) + 1:,d} is blank; pass one length per "
                             "line (0 for an empty document), with no blank lines between them")
        several = re.search(r"(?m)^[ \t]*[^\s#]+[ \t]+[^\s#]", marked)
        if several:  # ("5 6 7" was read as 3 documents, "5 6\n7 8" failed as "shape (1, 2)")
            raise InputError(f"line {marked.count(chr(10), 0, several.start()) + 1:,d} holds more than one number; pass "
                             "one length per line")
        return _parse_lengths(body)
    except (InputError, OSError, ValueError, OverflowError, EOFError) as e:
        raise InputError(f"cannot read lengths from {args.lengths}: {' '.join(str(e).split())}") from e


def _parse_lengths(body: str):
    """One length a line of ``body`` (lines cut at ``\n`` only, as the checks above count them; a ``#`` comment
    line is no length), each an ASCII whole number in 0 .. 2**62 - 1, or an InputError naming its line. Read
    here, not by np.loadtxt: its errors said "row 1, column 1" (rows from 0, columns from 1), and a negative
    length came back from pack() as "document 3", the file and its line 4 unnamed."""
    import numpy as np

    from ..errors import InputError

    lines = body.split("\n")
    numbered = list(range(1, len(lines) + 1))
    if "#" in body:
        kept = [(i, line.split("#", 1)[0]) for i, line in zip(numbered, lines)]
        kept = [(i, t) for i, t in kept if t.strip()]
        numbered, lines = [i for i, _ in kept], [t for _, t in kept]
    vals = None
    if not re.search(r"[^0-9+\- \t\r\n]", "\n".join(lines)):  # digits, signs and spaces: numpy reads them at once
        try:
            vals = np.array(lines, dtype=np.int64)
        except (ValueError, OverflowError):
            vals = None
    if vals is None:  # the first line that is not a whole number, named
        for i, line in zip(numbered, lines):
            t = line.strip(" \t\r")
            if not re.fullmatch(r"[+-]?[0-9]{1,19}", t) or not -(2**63) <= int(t) < 2**63:
                raise InputError(f"line {i:,d} holds {t[:40]!r}, not a whole number of tokens (ASCII digits, "
                                 "at most 19); pass one length per line")
        raise AssertionError("tokenmill bug: lengths numpy refused were all read")
    bad = (vals < 0) | (vals >= 2**62)
    if bad.any():
        k = int(np.argmax(bad))
        raise InputError(f"line {numbered[k]:,d} holds {int(vals[k]):,d}; a length must be in 0 .. 2**62 - 1")
    return vals


def cmd_pack(args) -> int:
    from ..batching import pack
    from ..errors import ConfigError

    if args.compare and args.method is not None:  # (it had been ignored: every method ran)
        raise ConfigError(f"--compare runs every method; leave --method {args.method} out, or --compare")
    if args.method == "concat" and args.long_docs not in (None, "split"):  # (ignored: a too-long document passed)
        raise ConfigError(f"--long-docs {args.long_docs} is for the document methods; --method concat cuts one stream "
                          "of every document into blocks, where no document is too long: leave it out")
    args.long_docs = args.long_docs or "split"
    lengths = _read_lengths(args)
    methods = ["best_fit", "first_fit_decreasing", "greedy", "concat"] if args.compare else [args.method or "best_fit"]
    rows = []
    for m in methods:
        # the kernels loaded first (~0.8 s a process, from their disk cache), apart from the time printed: it had
        # read 0.86 s for 1,000 documents and for 30,000 alike
        pack(lengths[:1], args.block_size, method=m, long_docs=args.long_docs, seed=args.seed)
        t0 = time.perf_counter()
        plan = pack(lengths, args.block_size, method=m, long_docs=args.long_docs, seed=args.seed)
        dt = time.perf_counter() - t0
        if args.json:
            rows.append({"method": m, "block_size": plan.block_size, "documents": plan.num_docs,
                         "blocks": plan.num_blocks, "tokens": plan.tokens, "fill": plan.fill,
                         "padding": plan.padding, "split_docs": plan.split_docs,
                         "truncated_docs": plan.truncated_docs, "truncated_tokens": plan.truncated_tokens,
                         "boundary_targets": plan.boundary_targets, "empty_docs": plan.empty_docs,
                         "seconds": round(dt, 4)})
        else:
            print(f"{plan}; {dt:.2f} s")
    if args.json:
        import json

        print(json.dumps(rows, indent=1))
    return 0


def cmd_verify(args) -> int:
    import numpy as np

    from .._validate import check_float, check_int
    from ..errors import require
    from ..verify import packing_equivalence

    torch = require("torch", "torch")
    from ..torch.model import TinyCausalLM, TinyConfig

    dtype = getattr(torch, args.dtype)
    atol = args.atol if args.atol is not None else (1e-9 if args.dtype == "float64" else 1e-4)
    check_float(atol, "--atol", min=0.0)  # NaN would make every comparison pass
    check_int(args.docs, "--docs", min=1, max=100_000)
    check_int(args.block_size, "--block-size", min=2, max=4096)  # dense masks: block_size**2 per block
    check_int(args.seed, "--seed", min=0)
    rng = np.random.default_rng(args.seed)
    cfg_kw = dict(vocab_size=64, max_positions=max(args.block_size, 1))
    docs = [rng.integers(0, 64, n) for n in rng.integers(2, max(args.block_size // 2, 3), args.docs)]
    outcomes = []
    for pos in args.positions:
        model = TinyCausalLM(TinyConfig(positions=pos, **cfg_kw), seed=args.seed, dtype=dtype)
        report = packing_equivalence(model, docs, args.block_size, method=args.method, layout=args.layout,
                                     attention=args.attention, atol=atol, rtol=0.0, seed=args.seed,
                                     progress=not args.quiet)
        if not args.json:
            print(f"{pos:>7} positions: {report}")
        outcomes.append(report)
    if args.json:
        import dataclasses
        import json

        print(json.dumps([{"positions": pos, **dataclasses.asdict(r), "equivalent": r.equivalent,
                           "isolated": r.isolated, "passed": r.passed} for pos, r in zip(args.positions, outcomes)],
                         indent=1))
    outcomes = [r.passed for r in outcomes]
    want = args.expect == "pass"
    if all(o == want for o in outcomes):
        return 0
    odd = [pos for pos, o in zip(args.positions, outcomes) if o != want]
    print(f"tokenmill verify-packing: --expect {args.expect}, but the check "
          + ("failed" if want else "passed") + f" with --positions {', '.join(odd)}: exit status 1", file=sys.stderr)
    return 1
