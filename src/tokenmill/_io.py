"""Atomic, versioned, validated files: write to a temporary name, then rename."""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import re
import socket
import stat
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

from .errors import ConfigError, FormatError

# Temporary files are named ``.<target name>~<host>~<pid>~<random>.tokenmill-tmp`` beside their
# target, so that a later write to the same folder recognises the leftovers of a process that was
# killed (SIGKILL, power loss) and removes them.
TMP_SUFFIX = ".tokenmill-tmp"
_HOST = re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname() or "host")[:40]

# Paths the running command reads: an output that is one of them is refused (see protect_inputs).
_INPUTS: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("tokenmill_inputs", default=())


@contextlib.contextmanager
def protect_inputs(paths: Iterable[str | os.PathLike]) -> Iterator[None]:
    """While active, every atomic write refuses a target that is one of ``paths`` (the same file,
    also through links): a command must never overwrite its own input."""
    token = _INPUTS.set(_INPUTS.get() + tuple(os.fspath(p) for p in paths))
    try:
        yield
    finally:
        _INPUTS.reset(token)


def resolve_output(path: str | os.PathLike, *, what: str = "output", inputs: Iterable = ()) -> Path:
    """The file a write to ``path`` replaces, or a ConfigError saying why it must not be written.

    A symlink is followed (the link stays, its target is replaced). Refused: an empty path, a
    directory, anything that exists and is not a regular file (a device such as /dev/null, a FIFO,
    a socket), and a file that is one of the command's inputs (``inputs`` or :func:`protect_inputs`).
    """
    raw = os.fspath(path)
    if not raw:
        raise ConfigError(f"the {what} path is empty; pass a file name")
    p = Path(raw)
    target = Path(os.path.realpath(p)) if p.is_symlink() else p
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise ConfigError(f"cannot use {what} {raw!r}: {e.strerror or e}") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise ConfigError(f"{what} {raw!r} is a directory; pass a file path (e.g. {os.path.join(raw, 'out.json')!r})")
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{what} {raw!r} exists and is not a regular file (a device, FIFO or socket); "
                              "tokenmill only creates or replaces regular files")
        for inp in (*inputs, *_INPUTS.get()):
            try:
                same = os.path.samefile(target, inp)
            except OSError:
                continue
            if same:
                raise ConfigError(f"{what} {raw!r} is also an input of this command ({os.fspath(inp)!r}); "
                                  "writing it would destroy the input: pass another path")
    parent = target.parent
    if parent.exists() and not parent.is_dir():
        raise ConfigError(f"cannot write {what} {raw!r}: {str(parent)!r} is not a directory")
    return target


def remove_stale_temporaries(directory: str | os.PathLike, name: str | None = None) -> int:
    """Remove temporaries left in ``directory`` by killed tokenmill processes of this host (for the
    target ``name`` only, when given); returns how many were removed. A temporary whose process
    still runs is kept."""
    removed = 0
    pattern = f".{name}~*{TMP_SUFFIX}" if name else f".*{TMP_SUFFIX}"
    for f in Path(directory).glob(pattern):
        parts = f.name[: -len(TMP_SUFFIX)].rsplit("~", 3)
        if len(parts) != 4 or parts[1] != _HOST or not parts[2].isdigit():
            continue
        if _alive(int(parts[2])):
            continue
        with contextlib.suppress(OSError):
            f.unlink()
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # exists (another user's process) or cannot tell: keep its file
    return True


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)  # not thread-safe, hence only where /proc is missing
    os.umask(old)
    return old


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, inputs: Iterable = ()) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it over ``path``.

    The target is checked first (:func:`resolve_output`: no directory, device, FIFO, or input of the
    command; a symlink is written through). The new file keeps the permission bits of the file it
    replaces, or gets ``0o666 & ~umask`` when new (as ``open()`` would create it). Leftover
    temporaries of killed processes for the same target are removed first. On failure the temporary
    file is removed and the original error propagates unchanged.
    """
    target = resolve_output(path, inputs=inputs)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    remove_stale_temporaries(target.parent, target.name)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}~{_HOST}~{os.getpid()}~", suffix=TMP_SUFFIX,
                               dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json_atomic(path: str | os.PathLike, obj: Any, *, inputs: Iterable = ()) -> None:
    with atomic_path(path, inputs=inputs) as tmp:
        tmp.write_text(json.dumps(obj, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def canonical_hash(obj: Any) -> str:
    """sha256 of the canonical JSON of ``obj`` (sorted keys, no whitespace), as ``sha256:<hex>``."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(blob.encode("utf-8")).hexdigest()


def max_file_bytes() -> int:
    """The size cap for files that must be small (tokenizer files, rank files, manifests, records):
    ``$TOKENMILL_MAX_FILE_BYTES`` (default 1 GiB)."""
    raw = os.environ.get("TOKENMILL_MAX_FILE_BYTES", str(1 << 30))
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"TOKENMILL_MAX_FILE_BYTES={raw!r} is not a number of bytes") from None


def read_bytes_limited(path: str | os.PathLike, *, what: str, limit: int | None = None,
                       error=FormatError) -> bytes:
    """The bytes of a file that must be small: a regular file (or a FIFO, read with the same bound)
    of at most ``limit`` bytes (default :func:`max_file_bytes`). Devices such as /dev/zero,
    directories and missing files are errors that name the file."""
    limit = max_file_bytes() if limit is None else limit
    raw = os.fspath(path)
    try:
        st = os.stat(raw)
    except FileNotFoundError:
        raise error(f"{what} file {raw!r} does not exist") from None
    except OSError as e:
        raise error(f"cannot read {what} file {raw!r}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{what} file {raw!r} is a directory; pass a file")
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
        raise error(f"{what} file {raw!r} is not a regular file (a device or socket); pass a file")
    if stat.S_ISREG(st.st_mode) and st.st_size > limit:
        raise error(f"{what} file {raw!r} has {st.st_size:,d} bytes, more than the {limit:,d} allowed; "
                    "if it is genuine, raise TOKENMILL_MAX_FILE_BYTES")
    try:
        with open(raw, "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise error(f"cannot read {what} file {raw!r}: {e.strerror or e}") from None
    if len(data) > limit:
        raise error(f"{what} file {raw!r} holds more than the {limit:,d} bytes allowed; "
                    "if it is genuine, raise TOKENMILL_MAX_FILE_BYTES")
    return data


def read_json(path: str | os.PathLike, *, what: str, limit: int | None = None) -> Any:
    """Read a JSON file, turning every failure into a FormatError that names the file.

    The file is read with :func:`read_bytes_limited` (no device, no endless stream, at most
    ``limit`` bytes), and nesting deep enough to exhaust the parser's stack is a FormatError too.
    """
    data = read_bytes_limited(path, what=what, limit=limit)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(f"{what} file {os.fspath(path)!r} is not UTF-8 (byte offset {e.start:,d}: {e.reason})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise FormatError(
            f"{what} file {os.fspath(path)!r} is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}); "
            "the file is corrupted or truncated: write it again"
        ) from e
    except RecursionError:
        raise FormatError(f"{what} file {os.fspath(path)!r} nests JSON too deeply to read; "
                          "it is not a file tokenmill wrote") from None
    except ValueError as e:  # e.g. an integer literal of more than 4,300 digits
        raise FormatError(f"{what} file {os.fspath(path)!r} holds a value JSON cannot read ({e})") from None
