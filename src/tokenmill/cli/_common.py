"""Argument helpers shared by the command modules."""

from __future__ import annotations

import argparse
import re
import sys


def add_command(sub, name: str, *, help: str, example: str, func) -> argparse.ArgumentParser:
    """Add a subcommand whose --help ends with a runnable example."""
    p = sub.add_parser(
        name,
        help=help,
        description=help,
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(func=func)
    from . import COMMANDS

    COMMANDS[p.prog.removeprefix("tokenmill ")] = p  # (its own errors: unknown arguments, the options' names)
    # also after the command name; SUPPRESS keeps `tokenmill --debug CMD` from being overridden
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show the traceback of an error instead of one line")
    return p


def add_document_args(p: argparse.ArgumentParser, *, required: bool = True) -> None:
    """--input PATH... with --split-lines / --separator / --errors, as in `tokenmill train`."""
    p.add_argument("--input", nargs="+", required=required, metavar="PATH",
                   help="text files (one document each), .jsonl or .parquet files (--field of each record), "
                        "or folders of them (read as store build reads a folder); - reads standard input as text")
    p.add_argument("--field", default="text", help="the text field of .jsonl / .parquet inputs (default: text)")
    p.add_argument("--format", choices=["auto", "text", "jsonl", "parquet"], default="auto",
                   help="how to read the files (default: by extension; a .json file of one object a line: jsonl)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--split-lines", action="store_true", help="one document per non-blank line")
    g.add_argument("--separator", metavar="STR", help="split each file into documents on STR")
    p.add_argument("--errors", choices=["strict", "replace"], default="strict",
                   help="invalid UTF-8: fail naming file and byte offset (default) or replace with U+FFFD")


def add_quiet(p: argparse.ArgumentParser) -> None:
    """``--quiet`` and ``--progress``: progress bars go to stderr when it is a terminal, never into a
    log file or a pipe unless ``--progress`` asks for them (``main`` sets ``quiet`` accordingly)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quiet", "-q", action="store_true",
                   help="no progress bars or notices on stderr (warnings, and counts of input left out or replaced, "
                        "still show)")
    g.add_argument("--progress", action="store_true",
                   help="progress bars on stderr even when it is not a terminal (a log file, a pipe)")


_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE)


def integer(value: str) -> int:
    """The type of every integer option: ASCII digits only (Python's ``int`` also reads ``"３００"``, ``"٧٢"`` and
    ``"1_000"``, which had been taken as numbers).

    >>> integer("512"), integer("-3")
    (512, -3)
    """
    if not _INTEGER.fullmatch(value.strip()):
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer; write it in ASCII digits, e.g. 512")
    return int(value)


def number(value: str) -> float:
    """The type of every real-valued option: a decimal number in ASCII (``float`` also reads ``"１.５"`` and
    ``"1_0"``); ``inf`` and ``nan`` pass here, for the option's own check to name.

    >>> number("0.5"), number("1e-9")
    (0.5, 1e-09)
    """
    if not _NUMBER.fullmatch(value.strip()):
        raise argparse.ArgumentTypeError(f"{value!r} is not a number; write it in ASCII, e.g. 0.5 or 1e-6")
    return float(value)


def seed(value: str) -> int:
    """``--seed``'s type: an integer >= 0, refused when parsed (before any work) as the library refuses it.

    >>> seed("7")
    7
    """
    v = int(value) if _INTEGER.fullmatch(value.strip()) else -1
    if v < 0 or v >= 2**63:
        raise argparse.ArgumentTypeError(f"{value!r} is not a seed; pass an integer >= 0 (and < 2**63)")
    return v


def unescape(value: str, option: str) -> str:
    """Backslash escapes (``\\n``, ``\\t``, ``\\x1e``, ``\\u2029``) in an option's value; other
    characters, non-ASCII included, stay as they are. A bad escape is a ConfigError naming the option.

    >>> unescape(r"\\n\\t。", "--separator") == "\\n\\t。"
    True
    """
    from ..errors import ConfigError

    try:
        return value.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{option} {value!r} holds an invalid backslash escape ({e.reason}); write e.g. "
                          r"'\n' for a newline or '\\' for a backslash") from None


def separator_of(args) -> str | None:
    """``--separator``'s text (escapes read), or None; an empty one is refused (it was read as none: each
    file one document, silently)."""
    from ..errors import ConfigError

    if args.separator == "":
        raise ConfigError("--separator '' is empty; pass the text that separates documents, e.g. --separator '\\n\\n'")
    return unescape(args.separator, "--separator") if args.separator else None


def megabytes(value: float, option: str) -> int:
    """``value`` megabytes (MiB, from a ``type=float`` option) as a byte count >= 1, or a ConfigError
    naming the option: NaN, infinities, negative numbers and sizes under one byte are refused, never
    turned into 1 byte.

    >>> megabytes(0.5, "--shard-mb")
    524288
    """
    import math

    from .._validate import INT64_MAX
    from ..errors import ConfigError

    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{option} {value!r} must be a positive finite number of megabytes, e.g. {option} 16")
    n = int(value * 2**20)
    if n < 1:
        raise ConfigError(f"{option} {value!r} is less than one byte; pass at least {1 / 2**20:.3g} megabytes "
                          f"(e.g. {option} 16)")
    if n > INT64_MAX:
        raise ConfigError(f"{option} {value!r} is more than {INT64_MAX:,d} bytes; pass a smaller size (e.g. {option} 16)")
    return n


def input_files(args) -> list:
    """The files named by ``--input`` (directories expanded to the files a store reads from a folder)."""
    from ..data.text import expand_inputs

    return expand_inputs(["/dev/stdin" if p == "-" else p for p in args.input])  # (-: standard input, a stream)


def documents_from_args(args, files=None, replaced=None, blank=None):
    """The documents of ``--input``; invalid UTF-8 that ``--errors replace`` replaces is counted in
    ``replaced`` (a ``data.text.Replaced``), which the command then reports (:func:`say_replaced`), and the
    blank lines ``--split-lines`` skips in ``blank[0]``."""
    from ..data.text import iter_documents

    sep = separator_of(args)
    return iter_documents(input_files(args) if files is None else files, split_lines=args.split_lines,
                          separator=sep, errors=args.errors, replaced=replaced, field=args.field,
                          format=args.format, blank=blank)


def say_replaced(replaced) -> None:
    """Tell stderr how much invalid UTF-8 ``--errors replace`` replaced (nothing when none was): a count of
    what the input's text became, said under ``--quiet`` too (for `encode` it is nowhere else)."""
    import sys

    if replaced.count:
        print(f"tokenmill: {replaced.note()}", file=sys.stderr)


def add_tokenizer_args(p: argparse.ArgumentParser, *, required: bool = True) -> None:
    """--tokenizer PATH, with --pattern and --special for rank files (see ``load_tokenizer``)."""
    p.add_argument("--tokenizer", required=required, metavar="PATH",
                   help="a tokenmill tokenizer file, a Hugging Face tokenizer.json (or its folder), Mistral's "
                        "tekken.json, a SentencePiece .model (Mistral v1-v3, Llama 2), or a tiktoken rank file "
                        "(.tiktoken, Llama 3's tokenizer.model) with --pattern; or, where no such file is, a Hugging "
                        "Face Hub repo id (meta-llama/Meta-Llama-3-8B) or a tiktoken encoding name (cl100k_base)")
    add_rank_options(p)


def add_rank_options(p: argparse.ArgumentParser) -> None:
    """--pattern and --special: what a rank file does not carry (``load_tokenizer`` passes them on)."""
    p.add_argument("--pattern", dest="tokenizer_pattern", default=None, metavar="PRESET|REGEX",
                   help="split pattern of a rank file: gpt2, cl100k, o200k, llama3, qwen2, qwen3.5, a regex, or "
                        "none (no split: a tokenizer trained with --pattern none) (default: the model's, for a rank "
                        "file tokenmill knows by its SHA-256)")
    p.add_argument("--special", dest="tokenizer_special", action="append", default=[], metavar="NAME=ID",
                   help="a special token of a rank file (repeat; replaces the ones OpenAI's files come with), "
                        "e.g. --special '<|endoftext|>=100257'")


def load_tokenizer(args):
    """The tokenizer named by ``--tokenizer`` (with ``--pattern`` / ``--special`` for rank files):
    every command that takes a tokenizer resolves it here (``tokenmill.as_tokenizer``)."""
    from ..errors import ConfigError
    from ..tokenizer.adapters import as_tokenizer
    from ..tokenizer.named import download_bars
    from . import is_terminal

    specials = {}
    for item in getattr(args, "tokenizer_special", None) or []:
        name, sep, value = item.rpartition("=")
        if not sep or not name or not _INTEGER.fullmatch(value.strip()) or value.strip().startswith(("-", "+")):
            raise ConfigError(f"--special {item!r}: expected NAME=ID, e.g. --special '<|endoftext|>=100257'")
        name = unescape(name, "--special")
        if name in specials:  # (the last had won, silently)
            raise ConfigError(f"--special names {name!r} twice (ids {specials[name]} and {int(value)}); give each "
                              "special token once")
        specials[name] = int(value)
    # a Hub repo's download bars follow the command's progress rule (a terminal, no --quiet)
    with download_bars(not args.quiet if hasattr(args, "quiet") else is_terminal(sys.stderr)):
        return as_tokenizer(args.tokenizer, pattern=getattr(args, "tokenizer_pattern", None),
                            special_tokens=specials or None)
