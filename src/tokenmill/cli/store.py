"""`tokenmill store build | sft | verify | stats`: encode a corpus once into a verified token store."""

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

    f = add_command(inner, "sft", help="encode supervised fine-tuning examples (a prompt and a completion a record) "
                    "into a loss-masked source: the completions are the targets, the prompts context",
                    example="tokenmill store sft --tokenizer tok.json --input train.jsonl --out sft/", func=cmd_sft)
    add_tokenizer_args(f)
    f.add_argument("--input", nargs="+", required=True, metavar="PATH",
                   help=".jsonl/.ndjson or .parquet files (or folders, globs) of records, optionally .gz/.zst")
    f.add_argument("--out", required=True, help="the folder to write: its tokens/ and loss_mask/ stores")
    f.add_argument("--prompt-field", default="prompt", help="the field (column) of the prompt (default: prompt)")
    f.add_argument("--completion-field", default="completion",
                   help="the field (column) of the completion, the targets (default: completion)")
    f.add_argument("--format", choices=["auto", "jsonl", "parquet"], default="auto",
                   help="input format (default: by file extension)")
    f.add_argument("--no-eos", action="store_true", help="do not end every example with EOS (a target)")
    f.add_argument("--bos", action="store_true", help="start every example with BOS")
    f.add_argument("--special-text", choices=["error", "special", "plain"], default="error",
                   help="text that spells a special token: fail (default), encode it as the special token (a chat "
                        "template's), or as plain text")
    f.add_argument("--overwrite", action="store_true", help="replace the stores a run before wrote there")
    f.add_argument("--json", action="store_true", help="print the counts as JSON")
    add_quiet(f)

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


def cmd_sft(args: argparse.Namespace) -> int:
    from ..data.masked import encode_sft
    from ..data.readers import files
    from ..errors import InputError, SpecialTokenError

    tok = load_tokenizer(args)
    examples: list[tuple[str, str]] = []
    where: list[str] = []  # each example's file:line
    for path in args.input:  # each record read twice, a field each, by the one reader (rows checked to agree)
        prompts = files(path, field=args.prompt_field, format=args.format)
        completions = files(path, field=args.completion_field, format=args.format)
        try:
            for (p, pf, pr), (c, cf, cr) in zip(prompts.documents(), completions.documents(), strict=True):
                if (pf, pr) != (cf, cr):  # (cannot happen: both read the same records in order; said, not assumed)
                    raise RuntimeError(f"{path}: the prompt and completion readers disagree on record {pr}")
                examples.append((p, c))
                where.append(f"{prompts.files()[pf]}:{pr + 1}")
        except InputError as e:  # (the reader's advice names its own option, --field)
            raise InputError(str(e).replace("pass field=... (CLI: --field)", "pass --prompt-field and "
                                            "--completion-field")) from None
    special = {"error": ((), "all"), "special": ("all", "all"), "plain": ((), ())}[args.special_text]
    try:
        src = encode_sft(tok, examples, append_eos=not args.no_eos, prepend_bos=args.bos,
                         allowed_special=special[0], disallowed_special=special[1])
    except SpecialTokenError as e:
        if getattr(e, "example", None) is None:
            raise
        field = args.completion_field if e.part else args.prompt_field
        raise SpecialTokenError(f"{where[e.example]}: field {field!r}: {e.found}; pass --special-text special where "
                                "the records spell special tokens on purpose (a chat template's), or --special-text "
                                "plain to encode them as plain text") from None
    saved = src.save(args.out, overwrite=args.overwrite)
    tokens, targets = int(saved.mask.size), saved.num_targets
    empty = int(sum(1 for i in range(len(saved)) if not saved.loss_mask(i).any()))
    out = {"out": args.out, "examples": len(saved), "tokens": tokens, "targets": targets,
           "examples_without_target": empty, "fingerprint": saved.fingerprint}
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    share = f" ({targets / tokens:.1%})" if tokens else ""
    print(f"{counted(len(saved), 'example')}, {counted(tokens, 'token')}, {counted(targets, 'target')}{share}: the "
          f"completions{'' if args.no_eos else ' and their EOS'}; the prompts are context")
    if empty:
        print(f"  {counted(empty, 'example')} without a target (an empty completion{'' if args.no_eos else ' and no EOS'})")
    print(f"  written to {args.out}: tokens/ (the ids) and loss_mask/ (the flags); read it with "
          f"tokenmill.MaskedSource.open({args.out!r}), or `tokenmill loader {args.out} ...`")
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
