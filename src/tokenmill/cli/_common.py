"""Argument helpers shared by the command modules."""

from __future__ import annotations

import argparse


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
    return p


def add_document_args(p: argparse.ArgumentParser, *, required: bool = True) -> None:
    """--input PATH... with --split-lines / --separator / --errors, as in `tokenmill train`."""
    p.add_argument("--input", nargs="+", required=required, metavar="PATH",
                   help="text files (one document each) or directories of .txt files")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--split-lines", action="store_true", help="one document per non-blank line")
    g.add_argument("--separator", metavar="STR", help="split each file into documents on STR")
    p.add_argument("--errors", choices=["strict", "replace"], default="strict",
                   help="invalid UTF-8: fail naming file and byte offset (default) or replace with U+FFFD")


def add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bars on stderr")


def documents_from_args(args):
    from ..data.text import expand_inputs, iter_documents

    sep = args.separator.encode().decode("unicode_escape") if args.separator else None
    return iter_documents(expand_inputs(args.input), split_lines=args.split_lines,
                          separator=sep, errors=args.errors)
