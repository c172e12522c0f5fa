"""`tokenmill train | encode | decode | inspect | export`."""

from __future__ import annotations

import json
import sys

from ..errors import ConfigError, SpecialTokenError
from ._common import (
    add_command,
    add_document_args,
    add_quiet,
    add_rank_options,
    add_tokenizer_args,
    documents_from_args,
    integer,
    load_tokenizer,
    say_replaced,
    seed,
)


def register(sub) -> None:
    p = add_command(sub, "train", help="train a byte-level BPE tokenizer on text files",
                    example="tokenmill train --input corpus/ --vocab-size 8192 --pattern gpt4 --special '<|endoftext|>' "
                            "--out tok.json",
                    func=cmd_train)
    add_document_args(p)
    p.add_argument("--vocab-size", type=integer, required=True, help="ids in all: 256 bytes + merges + special tokens")
    p.add_argument("--pattern", default="gpt4",
                   help="split preset (gpt2, gpt4 = cl100k, o200k, llama3, qwen2, ...; default gpt4), 'none' (one "
                        "chunk per document) or a regex")
    p.add_argument("--special", nargs="+", action="extend", default=[], metavar="TOKEN",
                   help="special tokens to add, e.g. --special '<|endoftext|>' '<pad>' (or the option repeated)")
    p.add_argument("--min-frequency", type=integer, default=1,
                   help="stop merging when the most frequent pair occurs fewer times (default 1)")
    p.add_argument("--max-token-bytes", type=integer, default=None, help="no token longer than this many bytes "
                   "(default: no limit)")
    p.add_argument("--sample", default=None, help="a fraction of documents (0.1) or a byte budget (50MB)")
    p.add_argument("--seed", type=seed, default=None, help="seed for --sample (default 0)")
    p.add_argument("--out", required=True, help="tokenizer file to write (JSON)")
    p.add_argument("--json", action="store_true", help="print what training saw and did as JSON")
    add_quiet(p)

    p = add_command(sub, "encode", help="encode text to token ids",
                    example="tokenmill encode --tokenizer tok.json 'Hello world'\n"
                            "  tokenmill encode --tokenizer Llama-3/tokenizer.json 'Hello world'\n"
                            "  tokenmill encode --tokenizer qwen.tiktoken --pattern qwen2 "
                            "--special '<|endoftext|>=151643' 'Hello world'", func=cmd_encode)
    add_tokenizer_args(p)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("text", nargs="?", help="text to encode (-: standard input, as --input -)")
    g.add_argument("--input", help="file to encode (UTF-8); - reads standard input")
    p.add_argument("--allow-special", action="store_true", help="encode special-token text as special tokens "
                   "(= --special-text special)")
    p.add_argument("--special-text", choices=["error", "special", "plain"], default=None,
                   help="text that spells a special token: fail naming it (default), encode it as the special "
                        "token, or encode it as plain text")
    p.add_argument("--errors", choices=["strict", "replace"], default="strict",
                   help="invalid UTF-8 in --input: fail naming the byte offset (default) or replace with U+FFFD")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of space-separated ids")
    add_quiet(p)

    p = add_command(sub, "decode", help="decode token ids to text",
                    example="tokenmill decode --tokenizer tok.json 72 101 108 108 111\n"
                            "  tokenmill encode --tokenizer tok.json --json 'Hello' | tokenmill decode --tokenizer "
                            "tok.json -", func=cmd_decode)
    add_tokenizer_args(p)
    p.add_argument("ids", nargs="+", metavar="ID",
                   help="token ids: integers, a JSON list ('[72, 101]', as encode --json prints), or - to read "
                        "either from standard input")
    p.add_argument("-n", "--no-newline", action="store_true",
                   help="write the text alone, without the line break after it (a byte-exact round trip of a file)")
    p.add_argument("--skip-special", action="store_true",
                   help="leave out the special tokens' ids (EOS, BOS, chat markers) instead of writing their names")
    add_quiet(p)  # (accepted by every command: a script adds -q to each call)

    p = add_command(sub, "inspect", help="summarize a tokenizer file",
                    example="tokenmill inspect tok.json", func=cmd_inspect)
    p.add_argument("path", help="a tokenizer file, as --tokenizer takes (a rank file with --pattern)")
    add_rank_options(p)
    p.add_argument("--top", type=integer, default=10, help="how many merges and longest tokens to show")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (tokens as lists of byte values)")
    add_quiet(p)

    p = add_command(sub, "export", help="write a tokenizer in another library's form: a transformers folder, a "
                                        "Hugging Face tokenizer.json, a tiktoken rank file, or tokenmill's own file",
                    example="tokenmill export --tokenizer tok.json --to transformers --out my-tokenizer/\n"
                            "  tokenmill export --tokenizer gpt2.tiktoken --pattern gpt2 "
                            "--special '<|endoftext|>=50256' --to tokenmill --out gpt2.json", func=cmd_export)
    add_tokenizer_args(p)
    p.add_argument("--to", required=True, choices=list(_EXPORTS),
                   help="transformers: a folder AutoTokenizer.from_pretrained loads (tokenizer.json and "
                        "tokenizer_config.json); huggingface: a tokenizer.json file; tiktoken: a .tiktoken rank "
                        "file (the ranks alone: its split pattern and special tokens are given when it is read, "
                        "as printed); tokenmill: tokenmill's own file (a rank file with its --pattern and --special in one)")
    p.add_argument("--out", required=True, help="the folder (--to transformers) or file to write")
    for role in ("eos", "bos", "pad", "unk"):
        p.add_argument(f"--{role}-token", default=None, metavar="TOKEN",
                       help=f"--to transformers: the {role.upper()} special token's text, or 'none' (default: what the "
                            "model's folder says, tokenizer_config.json or special_tokens_map.json, else found by "
                            "name" + (", e.g. <|endoftext|> or </s>)" if role == "eos" else ")"))
    p.add_argument("--model-max-length", type=integer, default=None, metavar="N",
                   help="--to transformers: the longest input the model takes, in tokens (default: the model's "
                        "folder's tokenizer_config.json, if it says)")
    p.add_argument("--chat-template", default=None, metavar="FILE",
                   help="--to transformers: a file holding a Jinja chat template (apply_chat_template's); default: "
                        "the model's own (its folder's chat_template.jinja or tokenizer_config.json)")
    p.add_argument("--overwrite", action="store_true",
                   help="--to transformers: replace the tokenizer.json and tokenizer_config.json of another tokenizer "
                        "in the --out folder (without it such a folder is refused; one holding this same tokenizer, "
                        "or a model's weights alone, is written into as it is)")
    add_quiet(p)


# (--to: the method each writes with)
_EXPORTS = {"transformers": "save_pretrained", "huggingface": "save_huggingface", "tiktoken": "save_tiktoken",
            "tokenmill": "save"}


def _rank_file_reload(tok, out: str) -> str:
    """What a rank file leaves out (it holds the ranks alone) and the options that read it back as ``tok``."""
    import shlex

    from ..tokenizer.pretokenize.splitter import pattern_name

    pattern = "none" if tok.pattern is None else pattern_name(tok.pattern) or tok.pattern
    specials = sorted(tok.special_tokens.items(), key=lambda kv: kv[1])
    options = ([f"--pattern {shlex.quote(pattern)}"] if pattern else []) + [
        f"--special {shlex.quote(f'{name}={i}')}" for name, i in specials[:8]]
    if not options:
        return ")"
    if len(specials) > 8:  # (a command of 8 of them and "N more" could not be run as printed)
        return (f": the ranks alone; a rank file holds no split pattern or special tokens, and this tokenizer has "
                f"{len(specials):,d} special tokens: export --to tokenmill for one file that holds them all, or read "
                f"it back with --tokenizer {shlex.quote(out)}"
                + (f" --pattern {shlex.quote(pattern)}" if pattern else "") + " and a --special NAME=ID for each)")
    return (f": the ranks alone; a rank file holds no split pattern or special tokens, so read it back with "
            f"--tokenizer {shlex.quote(out)} {' '.join(options)}, or export --to tokenmill for one file "
            "that holds them)")


def cmd_export(args) -> int:
    tok = load_tokenizer(args)
    roles = {f"{r}_token": getattr(args, f"{r}_token") for r in ("eos", "bos", "pad", "unk")}
    if args.to != "transformers":
        given = [f"--{k.replace('_', '-')}" for k, v in roles.items() if v is not None]
        given += [o for o, v in (("--model-max-length", args.model_max_length), ("--chat-template", args.chat_template),
                                 ("--overwrite", args.overwrite or None)) if v is not None]
        if given:
            raise ConfigError(f"{', '.join(given)} only go into a transformers folder; pass --to transformers, or "
                              "leave them out")
        from ..tokenizer.foreign import ForeignTokenizer
        from ..tokenizer.model import Tokenizer

        if args.to in ("tokenmill", "tiktoken") and not isinstance(tok, (Tokenizer, ForeignTokenizer)):
            why = ("tiktoken runs byte-level BPE over regex splits" if args.to == "tiktoken" else
                   "it is run as its own file says, and every tokenmill command reads that file")
            raise ConfigError(f"{args.tokenizer!r} is a SentencePiece-family tokenizer, which has no {args.to} form "
                              f"({why}); pass --to huggingface or --to transformers for HF's forms")
        getattr(tok, _EXPORTS[args.to])(args.out)
        print(f"wrote {args.out} ({args.to}" + (_rank_file_reload(tok, args.out) if args.to == "tiktoken" else ")"))
        return 0
    from ..tokenizer.formats.pretrained import INFERRED, read_chat_template, read_config

    kw = {k: INFERRED if v is None else None if v.lower() == "none" else v for k, v in roles.items()}
    if args.model_max_length is not None and args.model_max_length < 1:
        raise ConfigError(f"--model-max-length {args.model_max_length}: pass a positive number of tokens (the longest "
                          "input the model takes), or leave it out")
    template = None if args.chat_template is None else read_chat_template(args.chat_template, "--chat-template",
                                                                           ConfigError)
    try:
        folder = tok.save_pretrained(args.out, model_max_length=args.model_max_length, chat_template=template,
                                     overwrite=args.overwrite, **kw)
    except ConfigError as e:  # (the command line spells Python's None as none)
        raise ConfigError(str(e).replace(", or None", ", or none")) from None
    conf = read_config(folder / "tokenizer_config.json")
    set_ = ", ".join(f"{k} {getattr(conf, k)!r}" for k in ("eos_token", "bos_token", "pad_token", "unk_token")
                     if isinstance(getattr(conf, k), str))
    print(f"wrote {args.out} (transformers: tokenizer.json and tokenizer_config.json; "
          f"{set_ or 'no special-token roles'}" + ("; a chat template" if conf.chat_template is not None else "") + ")")
    return 0


def cmd_train(args) -> int:
    from .._io import protect_inputs, resolve_output
    from ..data.readers import blank_note
    from ..data.text import Replaced
    from ..tokenizer.bpe.train import train_bpe
    from ._common import input_files

    for item in args.special:  # (other commands' NAME=ID form, which `export --to tiktoken` prints: refused, not a
        name, sep, value = item.rpartition("=")  # token named '<|endoftext|>=100257')
        if sep and name and value.isdigit():
            raise ConfigError(f"--special {item!r}: train gives its special tokens the ids after the learned vocabulary, "
                              f"in the order given; pass the token's text alone, --special {name!r}")
    if args.seed is not None and args.sample is None:  # (it had been a silent no-op)
        raise ConfigError(f"--seed {args.seed} without --sample: training reads every document, the seed draws none; "
                          "add --sample (e.g. 0.1 or 50MB), or leave --seed out")
    files = input_files(args)
    resolve_output(args.out, what="--out", inputs=files)  # fail before training, not after
    pattern = None if args.pattern.lower() == "none" else args.pattern
    replaced, blank = Replaced(), [0]
    tok = train_bpe(documents_from_args(args, files, replaced, blank), args.vocab_size, pattern=pattern,
                    special_tokens=args.special, min_frequency=args.min_frequency,
                    max_token_bytes=args.max_token_bytes, sample=args.sample, seed=args.seed or 0, progress=not args.quiet)
    with protect_inputs(files):
        tok.save(args.out)
    say_replaced(replaced)
    r = tok.train_report
    if args.json:
        import dataclasses

        print(json.dumps({"out": str(args.out), "vocab_size": tok.vocab_size, "special_tokens": dict(tok.special_tokens),
                          **dataclasses.asdict(r), "blank_lines_skipped": blank[0], "invalid_utf8_replaced": replaced.count}))
        return 0
    print(f"trained {tok!r} -> {args.out}")
    print(f"  documents {r.documents_used:,d} of {r.documents_seen:,d} ({r.sampled_share:.1%} of {r.bytes_seen:,d} bytes), "
          f"chunks {r.chunks:,d} ({r.distinct_chunks:,d} distinct), merges {r.merges:,d} ("
          + {"vocab_size": "--vocab-size reached", "no_pairs": "stopped early: no pairs left to merge",
             "min_frequency": "stopped at --min-frequency",
             "max_token_bytes": "stopped early: every pair left makes a token longer than --max-token-bytes",
             }.get(r.stop_reason, r.stop_reason) + ")")
    if blank[0]:
        print(f"  {blank_note(blank[0], 'none was trained on')}")
    if r.special_tokens_in_text:
        print(f"  {r.special_tokens_in_text:,d} special token{'s' if r.special_tokens_in_text != 1 else ''} spelled in "
              "the text: none was trained on (each cuts its document there)")
    return 0


def cmd_encode(args) -> int:
    if args.input is None and args.text == "-":  # (as decode's "-": the text "-" itself had been encoded)
        args.input = "-"
    tok = load_tokenizer(args)
    if args.input is not None:
        from ..data.text import Replaced, decode_utf8, read_input_bytes

        replaced = Replaced()
        raw = sys.stdin.buffer.read() if args.input == "-" else read_input_bytes(args.input)
        name = "<stdin>" if args.input == "-" else args.input
        text = decode_utf8(raw, name=name, errors=args.errors, replaced=replaced)
        say_replaced(replaced)
    else:
        text = args.text
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:  # (bytes that are not UTF-8 on the command line: Python's surrogateescape)
            raise ConfigError(f"the text argument holds bytes that are not UTF-8 (at character {e.start:,d}); write "
                              "it to a file and pass --input FILE (with --errors replace to make them U+FFFD)") from None
    mode = args.special_text or ("special" if args.allow_special else "error")
    if args.allow_special and mode != "special":
        raise ConfigError(f"--allow-special and --special-text {mode} disagree; pass one of them")
    if mode == "special" and not tok.special_tokens:  # (a rank file lists none: they come from --special)
        from ..errors import warn

        option = "--allow-special" if args.allow_special else "--special-text special"
        warn(f"the tokenizer has no special tokens, so {option} changes nothing: the text is encoded as plain "
             "text (a rank file lists none: give them with --special NAME=ID)")
    try:
        ids = tok.encode(text, allowed_special="all" if mode == "special" else (),
                         disallowed_special=() if mode == "plain" else "all")
    except SpecialTokenError as e:  # (its advice names the Python arguments: say the options)
        where = "" if args.input is None else f"{'<stdin>' if args.input == '-' else args.input}: "
        raise SpecialTokenError(where + e.found + "; pass --special-text special (or --allow-special) to encode it as the "
                                "special token, or --special-text plain to encode it as text", e.found) from None
    from .._jit import twins_used

    if "encode" in twins_used and getattr(args, "notices", not args.quiet):
        print("tokenmill: encoded in pure Python: the compiled kernels are not built yet on this machine "
              "(`tokenmill warmup` builds them once, in parallel; a larger input builds them itself)",
              file=sys.stderr)
    print(json.dumps(ids) if args.json else " ".join(map(str, ids)))
    return 0


def _ids_of(values: list[str]) -> list[int]:
    """The ids of decode's arguments: integers, JSON lists of integers, or ``-`` (standard input holding
    either); anything else is a ConfigError naming the argument."""
    ids: list[int] = []
    if values.count("-") > 1:  # (the second read nothing: standard input is read once)
        raise ConfigError("ids: '-' is given more than once; standard input is read once: give it once")
    for v in values:
        if v == "-":
            v = sys.stdin.read()
        text = v.strip()
        if text.startswith("["):
            try:
                got = json.loads(text)
            except json.JSONDecodeError as e:
                raise ConfigError(f"ids: {text[:40]!r} is not a JSON list ({e})") from None
            if not isinstance(got, list) or not all(type(i) is int for i in got):
                raise ConfigError(f"ids: {text[:40]!r} must be a JSON list of integers")
            ids.extend(got)
            continue
        for word in text.split():
            try:
                ids.append(int(word))
            except ValueError:
                raise ConfigError(f"ids: {word[:40]!r} is not an integer; pass ids as integers, a JSON list, "
                                  "or - to read them from standard input") from None
    return ids


def cmd_decode(args) -> int:
    sys.stdout.write(load_tokenizer(args).decode(_ids_of(args.ids), skip_special_tokens=args.skip_special))
    if not args.no_newline:
        sys.stdout.write("\n")
    return 0


def cmd_inspect(args) -> int:
    from .._validate import check_int

    top = check_int(args.top, "--top", min=0, max=1 << 20)
    args.tokenizer = args.path  # (a rank file with --pattern / --special, as every tokenizer option takes it)
    tok = load_tokenizer(args)
    info = inspect_tokenizer(tok, top)
    if args.json:
        print(json.dumps(info, indent=1, ensure_ascii=False))
        return 0
    print(info["repr"])
    print(f"pattern: {info['pattern']!r}")
    items = sorted(info["special_tokens"].items(), key=lambda kv: kv[1])
    if items:
        more = f", ... ({len(items):,d} in all)" if len(items) > 12 else ""
        print("special tokens: " + ", ".join(f"{s}={i}" for s, i in items[:12]) + more)
    if info["merges"] and not info["first_merges"]:  # (imported, or --top 0: from the tokenizer, not the list)
        print(f"merges: {info['merges']:,d}" + (" (imported merge list)" if info["imported_merges"] else ""))
    show = lambda t: f"  {t['id']:>7,d}  {_readable(bytes(t['bytes']))}" + (
        f"  (count {t['count']:,d})" if t.get("count") is not None else "")
    if info["first_merges"]:
        print(f"first merges (of {info['merges']:,d}):")
        for t in info["first_merges"]:
            print(show(t))
        print("last merges:")
        for t in info["last_merges"]:
            print(show(t))
    if info["longest_tokens"]:  # (none with --top 0: no empty heading)
        print("longest tokens:")
    for t in info["longest_tokens"]:
        print(f"  {t['id']:>7,d}  {len(t['bytes']):>3d} bytes  {_readable(bytes(t['bytes']))}")
    return 0


def inspect_tokenizer(tok, top: int = 10) -> dict:
    """What ``tokenmill inspect`` shows, as JSON-ready data: any tokenizer ``as_tokenizer`` returns
    (a tokenmill Tokenizer, or one run through HF tokenizers / tiktoken, which has no merge list)."""
    merges = getattr(tok, "merges", None)
    merge_ids = getattr(tok, "merge_ids", None)
    n = len(merges) if merges is not None and merge_ids is None else 0
    trace = getattr(tok, "trace", None)
    counts = trace.counts if trace is not None else None

    def entry(i):
        out = {"id": int(i), "bytes": list(tok.token_bytes(i))}
        if counts is not None and i >= 256 and i - 256 < len(counts):
            out["count"] = int(counts[i - 256])
        return out

    if hasattr(tok, "vocab_items"):
        ids = [i for i, _ in tok.vocab_items()]
    else:
        specials = set(tok.special_tokens.values())
        ids = [i for i in range(tok.vocab_size) if i not in specials]
    longest = sorted(ids, key=lambda i: (-len(tok.token_bytes(i)), i))[:top]
    return {"repr": repr(tok), "kind": type(tok).__name__, "vocab_size": int(tok.vocab_size),
            "pattern": getattr(tok, "pattern", None), "special_tokens": dict(tok.special_tokens),
            "merges": len(merges) if merges is not None else 0,
            "imported_merges": merges is not None and merge_ids is not None,
            "first_merges": [entry(i) for i in range(256, 256 + min(top, n))],
            "last_merges": [entry(i) for i in range(max(256, 256 + n - top), 256 + n)] if n else [],
            "longest_tokens": [entry(i) for i in longest]}


def _readable(b: bytes) -> str:
    r"""Token bytes as quoted text: UTF-8 as is, other bytes and control characters escaped.

    >>> print(_readable("低\n".encode() + b"\xe0"))
    '低\n\xe0'
    """
    text = b.decode("utf-8", errors="backslashreplace")
    return "'" + "".join(c if c.isprintable() else repr(c)[1:-1] for c in text) + "'"
