"""`tokenmill store build | sft | verify | stats`: encode a corpus once into a verified token store."""

from __future__ import annotations

import argparse
import json
import os

from .._words import counted
from ._common import (
    add_command,
    add_quiet,
    add_tokenizer_args,
    integer,
    load_tokenizer,
    megabytes,
    number,
    separator_of,
)

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
    b.add_argument("--workers", type=integer, default=None, help="parallel workers (default: all cores)")
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
    add_role_ids(b)
    b.add_argument("--special-text", choices=["error", "special", "plain"], default="error",
                   help="text that spells a special token: fail (default), encode it as the special token (data "
                        "whose documents spell their own separators), or as plain text")
    b.add_argument("--shard-mb", type=number, default=16,
                   help="megabytes of text (the documents' UTF-8) per shard, a positive number (default 16)")
    b.add_argument("--overwrite", action="store_true", help="replace a store built with other arguments")
    b.add_argument("--json", action="store_true", help="print what was built as JSON")
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
    f.add_argument("--chat-template", metavar="FILE|NAME", default=None,
                   help="records holding a chat (--messages-field, a list of {role, content}) are rendered by this "
                        "Jinja template (a .jinja file, a tokenizer_config.json holding one, or the name of one of "
                        "the --tokenizer's named templates), the assistant's turns the targets; default: the "
                        "template of the --tokenizer's folder, where it has one (its 'default' of named ones; JSONL "
                        "input)")
    f.add_argument("--messages-field", default="messages", help="the field of a chat's messages (default: messages)")
    f.add_argument("--train-on", action="append", default=None, metavar="ROLE",
                   help="a chat's role whose turns are the targets (repeat for several; default: assistant)")
    f.add_argument("--no-eos", action="store_true", help="do not end every example with EOS (a target)")
    f.add_argument("--bos", action="store_true", help="start every example with BOS")
    add_role_ids(f)
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


def add_role_ids(p: argparse.ArgumentParser) -> None:
    p.add_argument("--eos-id", type=integer, default=None, metavar="ID",
                   help="the id of EOS (default: the tokenizer's EOS, declared by its model folder or found by name)")
    p.add_argument("--bos-id", type=integer, default=None, metavar="ID", help="the id of BOS (with --bos; default: the "
                   "tokenizer's BOS)")


def check_role_ids(args: argparse.Namespace) -> None:
    """--eos-id with --no-eos, --bos-id without --bos: refused (they had been ignored, silently)."""
    from ..errors import ConfigError

    if args.eos_id is not None and args.no_eos:
        raise ConfigError(f"--eos-id {args.eos_id} and --no-eos: no EOS is appended, so its id is unused; leave one out")
    if args.bos_id is not None and not args.bos:
        raise ConfigError(f"--bos-id {args.bos_id} without --bos: BOS is prepended only with --bos; add --bos, or leave "
                          "--bos-id out")


def cmd_build(args: argparse.Namespace) -> int:
    from ..data.store import TokenStore
    check_role_ids(args)
    shard_bytes = megabytes(args.shard_mb, "--shard-mb")
    sep = separator_of(args)  # the same as `tokenmill train`
    tok = load_tokenizer(args)
    store = TokenStore.build(args.out, list(args.input), tok, workers=args.workers, engine=args.engine,
                             ray_address=args.ray_address, field=args.field, format=args.format,
                             split_lines=args.split_lines, separator=sep, errors=args.errors,
                             append_eos=not args.no_eos, prepend_bos=args.bos, special_text=args.special_text,
                             eos_id=args.eos_id, bos_id=args.bos_id,
                             shard_bytes=shard_bytes, overwrite=args.overwrite,
                             progress=not args.quiet)
    m = store.manifest
    if args.json:
        print(json.dumps({"out": str(args.out), "documents": len(store), "tokens": store.num_tokens,
                          "shards": store.num_shards, "input_bytes": m["input_bytes"], "files": len(m["files"]),
                          "fingerprint": store.fingerprint, "dtype": str(store.dtype), "eos_id": store.eos_id,
                          "bos_id": store.bos_id, "invalid_utf8_replaced": m.get("invalid_utf8_replaced", 0)}))
        return 0
    print(f"{store}")
    print(f"  input {counted(m['input_bytes'], 'byte')} of text (the documents' UTF-8) from "
          f"{counted(len(m['files']), 'file')}; "
          f"fingerprint {store.fingerprint}")
    if m.get("invalid_utf8_replaced"):
        print(f"  {counted(m['invalid_utf8_replaced'], 'invalid UTF-8 sequence')} replaced with U+FFFD "
              "(--errors replace)")
    return 0


def cmd_sft(args: argparse.Namespace) -> int:
    from ..errors import InputError

    try:
        return _sft(args)
    except InputError as e:  # (the readers' advice of --errors replace, an option store sft does not take)
        said = str(e).replace(", or pass errors='replace' (CLI: --errors replace) to substitute U+FFFD", "")
        said = said.replace("; pass errors='replace' (CLI: --errors replace) to make it U+FFFD, or fix the file",
                            "; fix the file")
        if said == str(e):
            raise
        raise InputError(said) from None


def _sft(args: argparse.Namespace) -> int:
    from ..data.readers import files
    from ..errors import InputError

    tok = load_tokenizer(args)
    template = _chat_template(args, tok)
    if template is not None and (args.chat_template is not None or _all_jsonl(args)):
        return _sft_records(args, tok, template)  # whole records (a chat's messages are no text field): JSONL only
    where = _Where()

    def examples():
        for path in args.input:  # each record read twice, a field each, by the one reader (rows checked to agree)
            prompts = files(path, field=args.prompt_field, format=args.format)
            completions = files(path, field=args.completion_field, format=args.format)
            text = [p for p in prompts.paths if prompts.kind_of(p) == "text"]
            if text:  # (its whole text had been read as the prompt and again as the completion)
                raise InputError(f"{text[0]}: a text file, which holds no records; store sft reads JSONL (.jsonl, "
                                 ".ndjson) and Parquet files of prompt-completion records or chats: convert it, or "
                                 "pass --format jsonl if it holds one JSON object a line")
            try:
                for (p, pf, pr), (c, cf, cr) in zip(prompts.documents(), completions.documents(), strict=True):
                    if (pf, pr) != (cf, cr):  # (cannot happen: both read the same records in order; said, not assumed)
                        raise RuntimeError(f"{path}: the prompt and completion readers disagree on record {pr}")
                    where.add(f"{prompts.paths[pf]}:{pr + 1}")  # (as typed, as the reader's own errors name it)
                    yield p, c
            except InputError as e:  # (the reader's advice names its own option, --field)
                said = str(e).replace("pass field=... (CLI: --field)", "pass --prompt-field and --completion-field")
                if template is None and "no field" in said:  # (records of chats, maybe, and no template to render
                    # them: say where one comes from)
                    said += ("; records of chats (a --messages-field list of {role, content}) need a chat template: "
                             "--chat-template FILE, or a --tokenizer folder holding one")
                raise InputError(said) from None

    return _encode_and_save(args, tok, examples(), where)


class _Where:
    """Each example's file:line as the readers go, kept for the examples of the batches not yet written (an error
    names the example it is about by its number): a set of millions of examples is never held whole."""

    def __init__(self):
        from ..data.masked import SFT_BATCH

        self.first, self.held, self.batch = 0, [], SFT_BATCH

    def add(self, place: str) -> None:
        if len(self.held) >= 4 * self.batch:  # (the oldest half: examples of batches encoded already)
            drop = 2 * self.batch
            self.first, self.held = self.first + drop, self.held[drop:]
        self.held.append(place)

    def __len__(self) -> int:
        return self.first + len(self.held)

    def get(self, i: int, default: str) -> str:
        return self.held[i - self.first] if self.first <= i < len(self) else default


def _all_jsonl(args) -> bool:
    from ..data.readers import expand_paths, format_of

    return args.format == "jsonl" or (args.format == "auto" and
                                      all(format_of(p) == "jsonl" for p in expand_paths(list(args.input))))


def _chat_template(args, tok) -> str | None:
    """``--chat-template``'s text (a .jinja file, or a tokenizer_config.json's template), else the template of the
    tokenizer's folder, else None."""
    from ..errors import ConfigError
    from ..tokenizer.formats.pretrained import own_chat_template, read_chat_template, read_config

    if args.chat_template is None:
        try:
            return own_chat_template(tok)
        except ConfigError as e:
            raise ConfigError(str(e).replace("(chat_template='...')", "(--chat-template NAME)")) from None
    named = own_chat_template(tok, args.chat_template)
    if named is not None and not os.path.exists(args.chat_template):  # (a name of the tokenizer's named templates)
        return named
    if str(args.chat_template).endswith(".json"):
        template = read_config(args.chat_template).chat_template
        if not isinstance(template, str):
            raise ConfigError(f"--chat-template {args.chat_template}: the config holds "
                              + ("no chat template" if template is None else "several named chat templates")
                              + "; pass a .jinja file of the one to use")
        return template
    return read_chat_template(args.chat_template, "--chat-template", error=ConfigError)


def _sft_records(args, tok, template: str) -> int:
    """``store sft`` over whole JSONL records: chats (``--messages-field``) and prompt-completion records."""
    from ..data.readers import expand_paths, format_of, jsonl_records
    from ..errors import InputError

    where = _Where()

    def examples():
        for path in expand_paths(list(args.input)):
            kind = format_of(path) if args.format == "auto" else args.format
            if kind != "jsonl":
                raise InputError(f"{path}: a {kind} file; chats (--chat-template) are read from JSONL files")
            for line, rec in jsonl_records(path):
                if args.messages_field not in rec and args.prompt_field not in rec:
                    have = ", ".join(map(repr, list(rec)[:8])) or "none"
                    raise InputError(f"{path}:{line}: no field {args.messages_field!r} (a chat) nor "
                                     f"{args.prompt_field!r} (its fields: {have}); pass --messages-field or "
                                     "--prompt-field")
                where.add(f"{path}:{line}")
                yield rec

    return _encode_and_save(args, tok, examples(), where, template)


def _encode_and_save(args, tok, examples, where: _Where, template: str | None = None) -> int:
    """Encode the examples (an iterator, read once) a batch at a time into the stores of ``--out``, and say what
    was written."""
    import itertools
    import re

    from ..data.masked import is_chat_record, save_sft
    from ..errors import InputError, SpecialTokenError

    special = {"error": ((), "all"), "special": ("all", "all"), "plain": ((), ())}[args.special_text]
    check_role_ids(args)
    first = next(examples, None)
    if first is None:  # (an empty store had been written, and a garbled summary)
        raise InputError(f"{', '.join(map(str, args.input))} hold no examples; pass JSONL records of prompt and "
                         "completion, or of messages")
    seen = [0, 0]  # examples, chats

    def counted_examples():
        for ex in itertools.chain([first], examples):
            seen[0] += 1
            seen[1] += is_chat_record(ex, args.messages_field, args.prompt_field)
            yield ex

    try:
        saved = save_sft(tok, counted_examples(), args.out, overwrite=args.overwrite, progress=not args.quiet,
                         prompt=args.prompt_field, completion=args.completion_field,
                         messages=args.messages_field, chat_template=template,
                         train_on=tuple(args.train_on or ("assistant",)),
                         append_eos=False if args.no_eos else None, prepend_bos=args.bos,
                         eos_id=args.eos_id, bos_id=args.bos_id,
                         allowed_special=special[0], disallowed_special=special[1])
    except SpecialTokenError as e:
        if getattr(e, "example", None) is None:
            raise
        field = args.completion_field if e.part else args.prompt_field
        raise SpecialTokenError(f"{where.get(e.example, f'example {e.example:,d}')}: field {field!r}: {e.found}; pass "
                                "--special-text special where the records spell special tokens on purpose (a chat "
                                "template's), or --special-text plain to encode them as plain text") from None
    except InputError as e:  # ("example 7, message 2: ..." -> "train.jsonl:8, message 2: ...")
        said = re.sub(r"^example (\d{1,3}(?:,\d{3})+|\d+)", lambda m: where.get(int(m.group(1).replace(",", "")), m[0]), str(e))
        raise InputError(said.replace("prompt=... and completion=...", "--prompt-field and --completion-field")
                         .replace("messages with messages=...", "messages with --messages-field")
                         .replace("chat_template is given", "--chat-template is given")) from None
    tokens, targets = int(saved.mask.size), saved.num_targets
    empty = saved.documents_without_targets()
    out = {"out": args.out, "examples": len(saved), "tokens": tokens, "targets": targets,
           "examples_without_target": empty, "fingerprint": saved.fingerprint}
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    share = f" ({targets / tokens:.1%})" if tokens else ""
    roles = args.train_on or ["assistant"]
    chats = seen[1]
    said = []
    if chats:
        said.append(f"the {' and '.join(roles)} turns of {counted(chats, 'chat')}")
    if chats < seen[0]:
        said.append(f"the completions{'' if args.no_eos else ' and their EOS'} of "
                    f"{counted(seen[0] - chats, 'prompt-completion record')}")
    what = " and ".join(said) + "; the rest is context"
    print(f"{counted(len(saved), 'example')}, {counted(tokens, 'token')}, {counted(targets, 'target')}{share}: {what}")
    if empty:
        print(f"  {counted(empty, 'example')} without a target (an empty completion or turn, and no EOS)")
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
    from ..data.store import TokenStore, outside_store, store_files

    store = TokenStore.open(args.dir)
    if args.plot:  # (checked before the work)
        outside_store(args.plot, store, f"--plot {args.plot!r}")
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
