"""`tokenmill store build | verify | stats`: encode a corpus once into a verified token store."""

from __future__ import annotations

import argparse
import json

from .._words import counted
from ._common import add_command, add_quiet, add_tokenizer_args, load_tokenizer, megabytes, separator_of

EXAMPLE_BUILD = ("tokenmill store build --tokenizer tok.json --input corpus/ data.jsonl.zst --out store/ "
                 "--workers 4")


def register(sub) -> None:
    p = add_command(sub, "store", help="build, verify and describe token stores (corpora encoded once)",
                    example="tokenmill store build --tokenizer tok.json --input corpus/ --out store/",
                    func=None)  # (a subcommand is required: its own func runs)
    # required: `tokenmill store` alone is a usage error naming the subcommands (it printed the help to stdout)
    inner = p.add_subparsers(dest="store_command", metavar="SUBCOMMAND", required=True)

    b = add_command(inner, "build", help="encode text sources into a token store (resumable, same bytes for "
                    "any --workers)", example=EXAMPLE_BUILD, func=cmd_build)
    add_tokenizer_args(b)
    b.add_argument("--input", nargs="+", required=True, metavar="PATH",
                   help="files, folders or globs: .txt, .jsonl/.ndjson, .parquet, optionally .gz/.zst")
    b.add_argument("--out", required=True, help="the store folder to write")
    b.add_argument("--workers", type=int, default=None, help="parallel workers (default: all cores)")
    b.add_argument("--engine", choices=["local", "process", "ray"], default="local",
                   help="local threads (default), local processes (many tiny documents), or Ray tasks")
    b.add_argument("--ray-address", default=None, help="Ray cluster address for --engine ray (e.g. auto)")
    b.add_argument("--field", default="text", help="JSONL field / Parquet column holding the text (default: text)")
    b.add_argument("--format", choices=["auto", "text", "jsonl", "parquet"], default="auto",
                   help="input format (default: by file extension)")
    g = b.add_mutually_exclusive_group()
    g.add_argument("--split-lines", action="store_true", help="text files: one document per non-blank line")
    g.add_argument("--separator", metavar="STR", help="text files: split each file into documents on STR "
                   r"(backslash escapes such as '\n' or '\x1e' are decoded, as in `tokenmill train`)")
    b.add_argument("--errors", choices=["strict", "replace"], default="strict",
                   help="invalid UTF-8 (and JSONL escapes of lone surrogates): fail naming file and byte offset "
                        "(default) or replace each with U+FFFD, counted in the manifest")
    b.add_argument("--no-eos", action="store_true", help="do not append EOS to every document")
    b.add_argument("--bos", action="store_true", help="prepend BOS to every document")
    b.add_argument("--special-text", choices=["error", "plain"], default="error",
                   help="text that spells a special token: fail (default) or encode it as plain text")
    b.add_argument("--shard-mb", type=float, default=16,
                   help="megabytes of text (the documents' UTF-8) per shard, a positive number (default 16)")
    b.add_argument("--overwrite", action="store_true", help="replace a store built with other arguments")
    add_quiet(b)

    v = add_command(inner, "verify", help="check every shard's sha256, offsets and ids of a token store",
                    example="tokenmill store verify store/", func=cmd_verify)
    v.add_argument("dir")
    v.add_argument("--json", action="store_true", help="print what was verified as JSON (a failed check is an "
                                                      "error on stderr and exit status 1, as without --json)")
    add_quiet(v)

    s = add_command(inner, "stats", help="documents, tokens, bytes per token, length percentiles and histogram",
                    example="tokenmill store stats store/ --plot lengths.png", func=cmd_stats)
    s.add_argument("dir")
    s.add_argument("--plot", metavar="PNG", help="draw the length histogram (needs matplotlib)")
    s.add_argument("--json", action="store_true", help="print the statistics as JSON")
    add_quiet(s)


def cmd_build(args: argparse.Namespace) -> int:
    from ..data.store import TokenStore
    shard_bytes = megabytes(args.shard_mb, "--shard-mb")
    sep = separator_of(args)  # the same as `tokenmill train`
    tok = load_tokenizer(args)
    store = TokenStore.build(args.out, list(args.input), tok, workers=args.workers, engine=args.engine,
                             ray_address=args.ray_address, field=args.field, format=args.format,
                             split_lines=args.split_lines, separator=sep, errors=args.errors,
                             append_eos=not args.no_eos, prepend_bos=args.bos, special_text=args.special_text,
                             shard_bytes=shard_bytes, overwrite=args.overwrite,
                             progress=not args.quiet)
    m = store.manifest
    print(f"{store}")
    print(f"  input {counted(m['input_bytes'], 'byte')} of text (the documents' UTF-8) from "
          f"{counted(len(m['files']), 'file')}; "
          f"fingerprint {store.fingerprint}")
    if m.get("invalid_utf8_replaced"):
        print(f"  {counted(m['invalid_utf8_replaced'], 'invalid UTF-8 sequence')} replaced with U+FFFD "
              "(--errors replace)")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from ..data.store import TokenStore

    store = TokenStore.open(args.dir)
    r = store.verify(progress=not args.quiet)
    if args.json:
        print(json.dumps({"ok": True, **{k: int(v) for k, v in r.items()}}))
        return 0
    print(f"ok: {counted(r['shards'], 'shard')}, {counted(r['documents'], 'document')}, "
          f"{counted(r['tokens'], 'token')}, "
          f"{r['bytes']:,d} bytes verified")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from ..data.stats import plot_lengths
    from ..data.store import TokenStore, store_files

    store = TokenStore.open(args.dir)
    st = store.stats()
    if args.plot:  # never onto the store it reads (a link or hard link to its manifest, say)
        args.plot = str(plot_lengths(st, args.plot, inputs=store_files(store)))
    if args.json:
        print(json.dumps(st.to_dict(), indent=1))
    else:
        print(st.summary())
        if args.plot:
            print(f"length histogram: {args.plot}")
    return 0
