"""`tokenmill report`: one self-contained HTML page of a tokenizer, a token store and its plans."""

from __future__ import annotations

import sys

from .._words import counted
from ._common import add_command, add_quiet, add_tokenizer_args, integer, load_tokenizer, seed


def register(sub) -> None:
    p = add_command(sub, "report",
                    help="write one self-contained HTML page: tokens over text, vocabulary, store lengths, "
                         "sliding windows and packing, from bounded samples (no server, no network)",
                    example="tokenmill report --tokenizer tok.json --store store/ --out report.html\n"
                            "  tokenmill report --tokenizer tok.json --text README.md notes.txt --out report.html",
                    func=cmd_report)
    add_tokenizer_args(p)
    p.add_argument("--store", metavar="DIR", help="a token store built with the tokenizer")
    p.add_argument("--text", "--input", dest="text", nargs="+", default=[], metavar="FILE",
                   help="text files to show token by token (one document each, their first --text-bytes bytes); "
                        "--input is the same option, as the other commands name it")
    p.add_argument("--out", required=True, metavar="HTML", help="the page to write, e.g. report.html")
    p.add_argument("--samples", type=integer, default=8, help="store documents shown token by token, and as many of the texts: up to twice this in all "
                        "(default 8; store documents only while the statistics' budget of 1M tokens lasts)")
    p.add_argument("--sample-tokens", type=integer, default=1024, help="tokens shown per sample (its first ones)")
    p.add_argument("--window", type=integer, default=512, help="sliding window size drawn (with half and double)")
    p.add_argument("--stride", type=integer, default=None, help="sliding window stride (default: window / 2)")
    p.add_argument("--block-size", type=integer, default=2048, help="positions per packed block")
    p.add_argument("--seed", type=seed, default=0, help="seed of the samples and of the packing plan")
    p.add_argument("--text-bytes", type=integer, default=1 << 20, help="bytes read from the start of each text file")
    p.add_argument("--allow-special", action="store_true",
                   help="text that spells a special token becomes that token (default: plain text)")
    p.add_argument("--errors", choices=["strict", "replace"], default="strict",
                   help="invalid UTF-8 in a text: fail naming the byte offset (default) or replace with U+FFFD")
    add_quiet(p)


def cmd_report(args) -> int:
    from .._io import protect_inputs
    from ..reporting import report

    tok = load_tokenizer(args)
    with protect_inputs([args.tokenizer]):
        r = report(tok, out=args.out, store=args.store, files=args.text, progress=not args.quiet,
                   samples=args.samples, sample_tokens=args.sample_tokens, window=args.window, stride=args.stride,
                   block_size=args.block_size, seed=args.seed, text_bytes=args.text_bytes,
                   allow_special=args.allow_special, errors=args.errors)
    if r.data.meta.get("invalid_utf8_replaced"):  # (stderr, as every command with --errors replace says it)
        print(f"tokenmill: {r.data.meta['invalid_utf8_note']}", file=sys.stderr)
    t, p = r.data.tokens["totals"], r.data.packing
    # (no tokens: no fill to say; its None had failed the format after the page was written)
    packing = (f"packing fill {p['fill']:.1%} vs padding {p['padding_fill']:.1%} at block size {p['block_size']:,d}"
               if p.get("fill") is not None and p.get("padding_fill") is not None else "no tokens to pack")
    print(f"wrote {r.path} ({r.bytes:,d} bytes) in {r.seconds:.1f} s: {counted(len(r.data.tokens['samples']), 'sample')}, "
          f"{counted(t['tokens'], 'token')} shown; {packing}")
    return 0
