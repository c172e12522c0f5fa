"""The ``tokenmill`` command. One module per command group; each has ``register(subparsers)``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings

from ..errors import TokenmillError

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
        epilog="example: tokenmill train --input corpus/ --vocab-size 8192 --out tok.json",
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
    args = parser.parse_args(argv)
    debug = bool(getattr(args, "debug", False)) or os.environ.get("TOKENMILL_DEBUG", "") not in ("", "0")
    if hasattr(args, "quiet"):  # notices follow --quiet; progress bars also need a terminal or --progress
        args.notices = not args.quiet
        if not args.quiet and not getattr(args, "progress", False):
            args.quiet = not _is_terminal(sys.stderr)
    quiet = not getattr(args, "notices", True)
    # the command as typed: "store build", not "store" (a subcommand's messages name it)
    name = " ".join(x for x in (args.command, getattr(args, "store_command", None)) if x)
    try:
        with warnings.catch_warnings():
            # a warning is one line, as an error is (Python's shows the file, line and source of the call);
            # --quiet silences it (what it says is in the command's own output: e.g. train's merges count)
            warnings.showwarning = lambda message, category, *_, **__: None if quiet else print(
                f"tokenmill {name}: warning: {' '.join(str(message).split())}", file=sys.stderr)
            return int(args.func(args) or 0)
    except BrokenPipeError:  # e.g. `tokenmill encode ... | head`
        return 0
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"tokenmill {name}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 -- every failure becomes one line unless --debug
        if debug:
            raise
        if _interrupted(e):  # Ctrl-C inside a compiled kernel's call back into Python: numba's SystemError
            print(f"tokenmill {name}: interrupted", file=sys.stderr)
            return 130
        print(f"tokenmill {name}: error: {_one_line(e)}", file=sys.stderr)
        return 1


def _interrupted(e: BaseException) -> bool:
    """Whether ``e`` wraps a KeyboardInterrupt (numba turns one raised while a kernel runs into a SystemError,
    "returned a result with an exception set", with the interrupt as its context)."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def _one_line(e: BaseException) -> str:
    """The message for an exception: ours as they are; files, memory and bugs explained."""
    if isinstance(e, TokenmillError):
        text = str(e)
    elif isinstance(e, OSError):
        name = f" {e.filename!r}" if e.filename else ""
        text = f"cannot access{name}: {e.strerror or e}"
    elif isinstance(e, MemoryError):
        text = "out of memory; use smaller inputs or options (e.g. --sample, a smaller --vocab-size)"
    else:
        text = (f"unexpected {type(e).__name__}: {e}; this is a bug in tokenmill: rerun with --debug for the "
                "traceback and report it")
    return " ".join(text.split())  # one line
