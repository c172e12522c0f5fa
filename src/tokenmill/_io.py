"""Atomic, versioned, validated files: write to a temporary name, then rename."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

from .errors import FormatError


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it over ``path``.

    On failure the temporary file is removed and the original error propagates unchanged.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def canonical_hash(obj: Any) -> str:
    """sha256 of the canonical JSON of ``obj`` (sorted keys, no whitespace), as ``sha256:<hex>``."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(blob.encode("utf-8")).hexdigest()


def read_json(path: str | os.PathLike, *, what: str) -> Any:
    """Read a JSON file, turning every failure into a FormatError that names the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FormatError(f"{what} file {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise FormatError(f"cannot read {what} file {str(path)!r}: {e}") from e
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise FormatError(
            f"{what} file {str(path)!r} is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}); "
            "the file is corrupted or truncated: write it again"
        ) from e
