"""Reading text documents from files: one document per file, per line, or per separator.

Invalid UTF-8 is an error that names the file and the byte offset, unless ``errors="replace"``
is asked for explicitly. Nothing is silently dropped: empty documents are kept (they simply yield
no tokens) and counted by the callers that report.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Iterator, Literal

from ..errors import ConfigError, InputError

Errors = Literal["strict", "replace"]


def decode_utf8(data: bytes, *, name: str, errors: Errors = "strict") -> str:
    """Decode UTF-8, or raise an InputError naming ``name`` and the first bad byte offset.

    >>> decode_utf8(b"ok", name="x.txt")
    'ok'
    >>> decode_utf8(b"a\\xffb", name="x.txt", errors="replace")
    'a\\ufffdb'
    """
    if errors not in ("strict", "replace"):
        raise ConfigError(f"errors={errors!r}; use 'strict' or 'replace'")
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as e:
        raise InputError(
            f"{name}: invalid UTF-8 at byte offset {e.start:,d} ({e.reason}); fix the file, "
            "or pass errors='replace' (CLI: --errors replace) to substitute U+FFFD"
        ) from None


def iter_documents(
    paths: Iterable[str | os.PathLike],
    *,
    split_lines: bool = False,
    separator: str | None = None,
    errors: Errors = "strict",
) -> Iterator[str]:
    """Yield documents from text files.

    One document per file by default; ``split_lines=True``: one per line (line ends removed, blank
    lines skipped); ``separator``: split each file on that string.
    """
    if split_lines and separator is not None:
        raise ConfigError("pass either split_lines=True or separator=..., not both")
    if separator == "":
        raise ConfigError("separator must not be empty")
    for path in paths:
        p = Path(path)
        text = decode_utf8(read_input_bytes(p), name=str(p), errors=errors)
        if split_lines:
            yield from (line for line in text.splitlines() if line.strip())
        elif separator is not None:
            yield from text.split(separator)
        else:
            yield text


def check_input_file(path: str | os.PathLike) -> bool:
    """True for a regular file, False for a FIFO; an InputError naming ``path`` for anything else
    (missing, a directory, a device such as /dev/zero, a socket)."""
    import stat

    raw = os.fspath(path)
    try:
        st = os.stat(raw)
    except FileNotFoundError:
        raise InputError(f"input {raw!r} does not exist") from None
    except OSError as e:
        raise InputError(f"cannot read input {raw!r}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"input {raw!r} is a directory; pass a file (or, where accepted, the directory's "
                         ".txt files are read)")
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
        raise InputError(f"input {raw!r} is not a regular file (a device or socket); pass a text file")
    return stat.S_ISREG(st.st_mode)


def read_input_bytes(path: str | os.PathLike) -> bytes:
    """The bytes of one input file. A directory, a missing file or a device (``/dev/zero`` would be
    read until memory runs out) is an InputError naming it; a FIFO (``<(cmd)``, a pipe) is read up
    to ``$TOKENMILL_MAX_FILE_BYTES`` (1 GiB); a regular file is read whole."""
    from .._io import max_file_bytes

    raw = os.fspath(path)
    limit = None if check_input_file(raw) else max_file_bytes()
    try:
        with open(raw, "rb") as f:
            data = f.read() if limit is None else f.read(limit + 1)
    except OSError as e:
        raise InputError(f"cannot read input {raw!r}: {e.strerror or e}") from None
    if limit is not None and len(data) > limit:
        raise InputError(f"input {raw!r} is a stream of more than {limit:,d} bytes; save it to a file, "
                         "or raise TOKENMILL_MAX_FILE_BYTES")
    return data


def expand_inputs(inputs: Iterable[str | os.PathLike]) -> list[Path]:
    """Files as given; directories expand to their ``*.txt`` files, sorted, recursively."""
    out: list[Path] = []
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            files = sorted(f for f in p.rglob("*.txt") if f.is_file())
            if not files:
                raise InputError(f"input directory {str(p)!r} holds no .txt files")
            out.extend(files)
        elif p.exists():
            out.append(p)
        else:
            raise InputError(f"input {str(p)!r} does not exist")
    return out
