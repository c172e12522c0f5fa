"""The ``tokenmill`` command. One module per command group; each has ``register(subparsers)``."""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import re
import sys
import warnings

from ..errors import TokenmillError

# every command's parser by its name as typed ("encode", "store build"), filled by _common.add_command
COMMANDS: dict[str, argparse.ArgumentParser] = {}

# Command modules, in the order `tokenmill --help` lists them.
COMMAND_MODULES = [
    "tokenizer_cmds",  # train, encode, decode, inspect
    "demo",
    "windows",
    "batching",
    "store",  # store build, verify, stats
    "warmup",
    "loader",  # plan a TrainingLoader over stores
    "report",  # one self-contained HTML page of it all
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tokenmill",
        description="Raw text to training-ready language-model data.",
        epilog="example: tokenmill train --input corpus/ --vocab-size 8192 --special '<|endoftext|>' --out tok.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from .._version import __version__

    parser.add_argument("--version", action="version", version=f"tokenmill {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error (also TOKENMILL_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(f".{name}", __name__).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    0: success; 1: an error (bad input, a file that cannot be read or written, a failed check), shown
    as one line ``tokenmill <command>: error: ...`` on stderr; 2: a usage error (argparse); 130:
    interrupted. ``--debug`` (or ``TOKENMILL_DEBUG=1``) shows the traceback instead.
    """
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # the command's own parser says it: "tokenmill encode: error: unrecognized arguments: --bogus"
        COMMANDS.get(_command_of(args), parser).error(f"unrecognized arguments: {' '.join(extra)}")
    debug = bool(getattr(args, "debug", False)) or os.environ.get("TOKENMILL_DEBUG", "") not in ("", "0")
    if hasattr(args, "quiet"):  # notices follow --quiet; progress bars also need a terminal or --progress
        args.notices = not args.quiet
        if not args.quiet and not getattr(args, "progress", False):
            args.quiet = not is_terminal(sys.stderr)
    quiet = not getattr(args, "notices", True)
    # --quiet also silences the first run's "compiling kernels" notice (``_jit``; read from the environment,
    # so that the command's worker processes stay quiet too), for this command only
    restore = os.environ.get("TOKENMILL_QUIET")
    if quiet:
        os.environ["TOKENMILL_QUIET"] = "1"
    # the command as typed: "store build", not "store" (a subcommand's messages name it)
    name = _command_of(args)
    try:
        with warnings.catch_warnings():
            # a warning is one line, as an error is (Python's shows the file, line and source of the call);
            # --quiet does not silence it: a warning says something about the user's data (files of a folder
            # left out, a tokenizer setting not applied, fewer merges than asked) that no output repeats
            warnings.showwarning = lambda message, category, *_, **__: print(
                f"tokenmill {name}: warning: {cli_spelling(' '.join(str(message).split()))}", file=sys.stderr)
            return int(args.func(args) or 0)
    except BrokenPipeError:  # e.g. `tokenmill encode ... | head`
        return 0
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"tokenmill {name}: interrupted{_RESUMES.get(name, '')}", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 -- every failure becomes one line unless --debug
        if debug:
            raise
        if _interrupted(e):  # Ctrl-C inside a compiled kernel's call back into Python: numba's SystemError
            print(f"tokenmill {name}: interrupted{_RESUMES.get(name, '')}", file=sys.stderr)
            return 130
        print(f"tokenmill {name}: error: {cli_names(_one_line(e), COMMANDS.get(name))}", file=sys.stderr)
        return 1
    finally:
        if quiet:
            if restore is None:
                os.environ.pop("TOKENMILL_QUIET", None)
            else:
                os.environ["TOKENMILL_QUIET"] = restore


# what an interrupted command leaves, where it can be taken up again
_RESUMES = {"store build": "; the same command resumes the build from the shards it finished"}


def _command_of(args) -> str:
    return " ".join(x for x in (getattr(args, "command", None), getattr(args, "store_command", None)) if x)


# the library's names for what a command's option sets, where the option is named otherwise
_ALIASES = {"window_size": "window", "out_dir": "out", "val_fraction": "split"}


# a library message's "name=value (CLI: --flag ...)": the Python argument and, after it, the option that sets it
_BOTH = re.compile(r"(?<![\w.])[a-z_]+=('[^']*'|\"[^\"]*\"|[^\s,;)]+) \(CLI: (--[a-z-]+)( [^),]*)?\)")


def cli_spelling(text: str) -> str:
    """``text`` with each ``name=value (CLI: --flag)`` the library writes for both audiences said the command
    line's way alone: ``--flag value`` (``--flag`` for ``True`` or ``...``; the CLI's own words where it gives a
    value or another flag).

    >>> cli_spelling("pass errors='replace' (CLI: --errors replace) to substitute U+FFFD")
    'pass --errors replace to substitute U+FFFD'
    >>> cli_spelling("pass overwrite=True (CLI: --overwrite) to replace it; field='body' (CLI: --field) names")
    "pass --overwrite to replace it; --field 'body' names"
    >>> cli_spelling("pass field=... (CLI: --field); append_eos=False (CLI: --no-eos) where; MaskedSource.open (CLI: x)")
    'pass --field; --no-eos where; MaskedSource.open (CLI: x)'
    """
    def one(m: re.Match) -> str:
        value, flag, rest = m.group(1), m.group(2), m.group(3)
        if rest is not None or value in ("True", "...", "False"):
            return flag + (rest or "")
        return f"{flag} {value}"

    return _BOTH.sub(one, text)


def cli_names(text: str, command: argparse.ArgumentParser | None) -> str:
    """``text`` (a library message) with the Python names of ``command``'s options spelled as the command
    line spells them: ``window_size=0`` -> ``--window=0``, ``out_dir '...'`` -> ``--out '...'``.

    A name with an underscore is an identifier wherever it stands (``pass reserve < window_size``); one
    without is a word of prose unless a value or a comparison follows it (``reserve=3``, ``reserve < 8``).

    >>> p = argparse.ArgumentParser(); _ = p.add_argument("--block-size", type=int); _ = p.add_argument("--window")
    >>> _ = p.add_argument("--reserve")
    >>> cli_names("block_size=0 is out of range; window_size=0 too; my_block_size=1", p)
    '--block-size=0 is out of range; --window=0 too; my_block_size=1'
    >>> cli_names("pass reserve < window_size; lower block_size; the reserve it keeps; runs/block_size.txt", p)
    'pass --reserve < --window; lower --block-size; the reserve it keeps; runs/block_size.txt'
    >>> cli_names("window='auto' reads it; window='a b' too", p)
    "--window auto reads it; --window='a b' too"
    """
    if command is None:
        return text
    text = cli_spelling(text)
    if "(CLI:" in text:  # (a message that says the command line's spelling itself)
        return text

    options = {a.dest: a.option_strings[-1] for a in command._actions if a.option_strings and a.dest != "help"}
    names = {**{d: o for d, o in options.items() if o.startswith("--")},
             **{k: options[v] for k, v in _ALIASES.items() if v in options}}
    for name, option in sorted(names.items(), key=lambda kv: -len(kv[0])):
        # name=value, and out_dir '...' (a word such as "field" before a quote is prose, not a parameter)
        # (not in a path or a file name: 'runs/vocab_size.txt')
        after = "(=| ')" if name == "out_dir" else r"(=| [<>]=? )" if "_" not in name else r"(?![\w/-]|\.\w)"
        text = re.sub(rf"(?<![\w/.-]){re.escape(name)}(?={after})", option, text)
    # --format='jsonl' as typed on a command line: --format jsonl (a value of plain characters only)
    return re.sub(r"(?<![\w-])(--[a-z][a-z-]*)='([\w.+-]+)'", r"\1 \2", text)


def _interrupted(e: BaseException) -> bool:
    """Whether ``e`` is or wraps a KeyboardInterrupt (:func:`tokenmill.errors.interrupt_in`)."""
    from ..errors import interrupt_in

    return interrupt_in(e) is not None


def is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}  # (a disk or quota full, a file too large for it)


def _one_line(e: BaseException) -> str:
    """The message for an exception: ours as they are; files, memory and bugs explained."""
    if isinstance(e, TokenmillError):
        text = str(e)
    elif isinstance(e, ConnectionError) and e.errno is None:  # (a library's own: Ray finding no cluster)
        text = f"cannot connect: {e}"
    elif isinstance(e, OSError) and e.filename and e.errno == errno.EFBIG:  # (not a full disk: a size limit)
        text = (f"cannot write {e.filename!r}: {e.strerror or e}; the file is larger than this process or file system "
                "allows (a `ulimit -f` limit, or the file system's largest file): raise the limit or pass a path on "
                "another disk")
    elif isinstance(e, OSError) and e.filename and e.errno in _FULL:
        text = f"cannot write {e.filename!r}: {e.strerror or e}; free some space or pass a path on another disk"
    elif isinstance(e, OSError):
        text = (f"cannot access {e.filename!r}: {e.strerror or e}" if e.filename else  # (a write to a full stdout
                f"cannot read or write the standard streams (or a file): {e.strerror or e}")  # named nothing)
    elif isinstance(e, MemoryError):
        text = "out of memory; use smaller inputs or options (e.g. --sample, a smaller --vocab-size)"
    else:
        text = (f"unexpected {type(e).__name__}: {e}; this is a bug in tokenmill: rerun with --debug for the "
                "traceback and report it")
    return " ".join(text.split())  # one line
