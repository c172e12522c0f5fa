"""The ``tokenmill`` command. One module per command group; each has ``register(subparsers)``."""

from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import TokenmillError

# Command modules, in the order `tokenmill --help` lists them.
COMMAND_MODULES = [
    "tokenizer_cmds",  # train, encode, decode, inspect
    "demo",
    "windows",
    "batching",
    "store",  # store build, verify, stats
    "warmup",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tokenmill",
        description="Raw text to training-ready language-model data.",
        epilog="example: tokenmill train --input corpus/ --vocab-size 8192 --out tok.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"tokenmill {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(f".{name}", __name__).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except TokenmillError as e:
        print(f"tokenmill {args.command}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `tokenmill encode ... | head`
        return 0
