"""Reading text documents from files: one document per file, per line, or per separator.

Invalid UTF-8 is an error that names the file and the byte offset, unless ``errors="replace"``
is asked for explicitly. Nothing is silently dropped: empty documents are kept (they simply yield
no tokens) and counted by the callers that report.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Iterator, Literal

from .._io import nonempty_path
from ..errors import ConfigError, InputError
from .readers import (
    KNOWN_FILES,
    FileSource,
    Replaced,
    check_options_apply,
    decode_utf8,
    folder_files,
    format_of,
    is_known_file,
    refuse_repeated_files,
    text_documents,
)

Errors = Literal["strict", "replace"]

__all__ = ["Errors", "Replaced", "check_input_file", "decode_utf8", "expand_inputs", "iter_documents", "read_input_bytes"]


def iter_documents(
    paths: Iterable[str | os.PathLike],
    *,
    split_lines: bool = False,
    separator: str | None = None,
    errors: Errors = "strict",
    replaced: Replaced | None = None,
    field: str = "text",
    format: str = "auto",
    blank: list | None = None,
) -> Iterator[str]:
    """Yield documents from text files, and from JSONL and Parquet files (``field`` of each record or row,
    read as a token store reads them: a ``.jsonl`` corpus was read as one text, its keys, quotes and escapes
    trained on); a ``.json``, ``.csv`` or ``.tsv`` file is refused (which of its forms it holds is the
    caller's to say): ``format`` ("text", "jsonl" or "parquet") says how every file is read, as a store's
    ``format=`` does.

    One document per file by default; ``split_lines=True``: one per line (line ends removed, blank
    lines skipped, their number added to ``blank[0]`` when a one-item list is given); ``separator``: split each
    file on that string. With ``errors="replace"``, invalid
    UTF-8 is counted in ``replaced`` (:class:`Replaced`) as it is replaced. Files are streamed in blocks by
    :func:`tokenmill.data.readers.text_documents` (the store's reader: the same documents, in time
    linear in the size); a document larger than ``$TOKENMILL_MAX_DOCUMENT_BYTES`` (1 GiB) is an
    InputError naming the file and the byte offset where it starts. A FIFO (``<(cmd)``) is read too.
    """
    if errors not in ("strict", "replace"):
        raise ConfigError(f"errors={errors!r}; use 'strict' or 'replace'")
    if split_lines and separator is not None:
        raise ConfigError("pass either split_lines=True or separator=..., not both")
    if separator == "":
        raise ConfigError("separator must not be empty")
    if format not in ("auto", "text", "jsonl", "parquet"):
        raise ConfigError(f"format={format!r} is not one of 'auto', 'text', 'jsonl', 'parquet'")
    paths = [Path(p) for p in paths]
    kinds = [format if format != "auto" else format_of(p) for p in paths]
    check_options_apply(kinds, field=field, split_lines=split_lines, separator=separator)  # (over them all)
    for p, kind in zip(paths, kinds):
        if not check_input_file(p):  # a FIFO (<(cmd)): its text as it streams
            if kind != "text":  # (its records had been read as one text: JSON syntax trained on, --field unchecked)
                raise InputError(f"{p} is a pipe (a FIFO, or standard input), which is read as text only, and "
                                 f"{'format=' + repr(format) if format != 'auto' else 'its name'} says it holds "
                                 f"{kind} records; write them to a file and pass that (or pass format='text' "
                                 "for plain text)")
            for text, _ in text_documents(p, split_lines=split_lines, separator=separator, errors=errors,
                                          opener=_open_input, replaced=replaced, blank=blank):
                yield text
            continue
        # a file as a store reads it: .gz and .zst decompressed (a .txt.gz had been read as its compressed
        # bytes: an invalid UTF-8 error, or with errors="replace" a tokenizer trained on them), other
        # compressions, archives and .json / .csv / .tsv refused by name
        text = kind == "text"  # (each file with the options that apply to it: checked over all of them above)
        source = FileSource([p], format=format, field="text" if text else field, split_lines=split_lines and text,
                            separator=separator if text else None, errors=errors)
        for texts, _, _ in source.batches():
            yield from texts
        if replaced is not None:
            replaced.merge(source.replaced)
        if blank is not None:
            blank[0] += source.blank_lines[0]


def check_input_file(path: str | os.PathLike) -> bool:
    """True for a regular file, False for a FIFO; an InputError naming ``path`` for anything else
    (missing, a directory, a device such as /dev/zero, a socket)."""
    import stat

    raw = nonempty_path(os.fspath(path), "an input path", "pass a file", InputError)
    try:
        st = os.stat(raw)
    except FileNotFoundError:
        if raw == "-":
            raise InputError("input '-' (standard input) is not read here; pass a file") from None
        raise InputError(f"input {raw!r} does not exist") from None
    except OSError as e:
        raise InputError(f"cannot read input {raw!r}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"input {raw!r} is a directory; pass a file (or, where accepted, the directory's "
                         "files are read)")
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
        raise InputError(f"input {raw!r} is not a regular file (a device or socket); pass a text file")
    return stat.S_ISREG(st.st_mode)


def _open_input(path: Path):
    """A binary reader of an input: a regular file or a FIFO (:func:`check_input_file`)."""
    check_input_file(path)
    try:
        return open(path, "rb")
    except OSError as e:
        raise InputError(f"cannot read input {str(path)!r}: {e.strerror or e}") from None


def read_input_bytes(path: str | os.PathLike) -> bytes:
    """The bytes of one input file (one document). A directory, a missing file or a device
    (``/dev/zero`` would be read until memory runs out) is an InputError naming it; a regular file
    or a FIFO (``<(cmd)``, a pipe) is read in blocks, up to ``$TOKENMILL_MAX_DOCUMENT_BYTES`` (1 GiB)."""
    from .readers import read_all

    return read_all(Path(nonempty_path(os.fspath(path), "an input path", "pass a file", InputError)),
                    opener=_open_input)


def expand_inputs(inputs: Iterable[str | os.PathLike]) -> list[Path]:
    """Files as given; directories expand to the files a token store reads from a folder (text, JSONL and
    Parquet, optionally .gz or .zst: :func:`~tokenmill.data.readers.is_known_file`), sorted, recursively
    (hidden ones left out, as a glob leaves them). (Only their ``.txt`` files had been read: a tokenizer
    trained on a folder saw other data than a store built from it.)"""
    out: list[Path] = []
    for item in inputs:
        p = Path(nonempty_path(os.fspath(item), "an input path", "pass a file or folder", InputError))
        if p.is_dir():
            files = folder_files(p, is_known_file)
            if not files:
                raise InputError(f"input directory {str(p)!r} holds no {KNOWN_FILES}")
            out.extend(files)
        elif p.exists():
            out.append(p)
        else:
            raise InputError(f"input {str(p)!r} does not exist")
    refuse_repeated_files(out)
    return out
