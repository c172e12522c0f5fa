"""Atomic, versioned, validated files: write to a temporary name, then rename."""

from __future__ import annotations

import contextlib
import contextvars
import errno
import hashlib
import json
import os
import re
import shutil
import socket
import stat
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Iterator

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


@contextlib.contextmanager
def exclusive(target: str | os.PathLike, say: Callable[[str], None]) -> Iterator[None]:
    """Hold the machine-wide lock of the output ``target`` (an absolute path) while the block runs: a second
    writer of the same output, in this process or another, waits for the first (``say`` tells it why)
    instead of taking the first's half-written files for its own. The lock is an ``flock`` on
    ``.<name>.tokenmill-lock`` beside the output (where the build stages its folders too; the folder it is in
    is made first, as the write would make it), so every
    writer finds the same file whatever its ``TMPDIR`` or user; the holder removes it when it is done (a
    killed one leaves it, and the next writer takes it over). Where no file can be made beside the output, a
    file named by the path's hash in the temporary folder is locked instead (a writer with another
    ``TMPDIR`` does not see that one). The lock goes with the process, however it ends. Not across machines
    (a shared file system's locks are not reliable): there, build on one of them. Where ``fcntl`` is
    missing, nothing is locked."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover (not a POSIX system)
        yield
        return
    target = Path(target)
    fallback = Path(tempfile.gettempdir()) / f"tokenmill-locks-{os.getuid()}"
    places = [(target.parent, f".{target.name}.tokenmill-lock", 0o777),  # (folder, file name, the folder's mode)
              (fallback, hashlib.sha256(os.fsencode(os.fspath(target))).hexdigest()[:32] + ".lock", 0o700)]
    for folder, name, mode in places:
        path = folder / name
        try:
            folder.mkdir(mode=mode, parents=True, exist_ok=True)
            fd = _locked(path, fcntl, lambda holder: say(f"tokenmill: {os.fspath(target)} is being written by "
                                                          f"{holder}; waiting for it to finish"))
            break
        except OSError:
            continue
    else:  # no lock file can be made: the write goes on unlocked, as it did before the lock
        yield
        return
    _held_locks.add(fd)
    if not _held_locks_forget[0]:  # a forked child (a build's worker process) closes its copies: a child that
        _held_locks_forget[0] = True  # outlived the build would have held the lock on (an flock is shared by
        os.register_at_fork(after_in_child=_forget_held_locks)  # every copy of its descriptor)
    try:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"process {os.getpid()} on {_HOST}".encode(), 0)
        yield
    finally:
        _held_locks.discard(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)  # while held: a writer waiting on this file finds it gone and locks a new one
        os.close(fd)  # (releases the lock)


def _locked(path: Path, fcntl, waiting: Callable[[str], None]) -> int:
    """A descriptor of ``path`` holding its ``flock``, once the file locked is the one at ``path`` (a holder
    removes the file before it lets go: a writer that waited on a removed file opens the new one)."""
    told = False
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except PermissionError:  # another user's lock file: a read-only descriptor locks it as well
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not told:
                    told = True
                    waiting(os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "another process")
                fcntl.flock(fd, fcntl.LOCK_EX)
            held = os.fstat(fd)
            try:
                now = os.stat(path, follow_symlinks=False)
            except FileNotFoundError:
                now = None
        except BaseException:
            os.close(fd)
            raise
        if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            return fd
        os.close(fd)


_held_locks: set[int] = set()  # descriptors of the locks ``exclusive`` holds in this process
_held_locks_forget = [False]


def _forget_held_locks() -> None:
    for fd in list(_held_locks):
        with contextlib.suppress(OSError):
            os.close(fd)
    _held_locks.clear()


def fs_path(path, refusal: str) -> str:
    """``path`` (a str, bytes or ``os.PathLike``) as a str, else a ConfigError: ``refusal`` with ``{kind}`` the
    name of what it is."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise ConfigError(refusal.format(kind=type(path).__name__))
    return os.fsdecode(path)


def nonempty_path(raw, what: str, fix: str, error=ConfigError):
    """``raw`` (a path as given, str or bytes) unless it is empty: ``Path('')`` is ``'.'``, and an empty argument
    had been taken for the current folder (every known file under it read, a store built or opened there)."""
    if raw in ("", b""):
        raise error(f"{what} is empty (''); {fix} (the current folder is '.')")
    return raw


def resolve_output(path: str | os.PathLike, *, what: str = "output", inputs: Iterable = (),
                   suffix: str = ".json") -> Path:
    """The file a write to ``path`` replaces, or a ConfigError saying why it must not be written.

    Refused: an empty path, a symbolic link (writing through it would replace a file elsewhere, such
    as a store's manifest, under another name), a directory, anything that exists and is not a
    regular file (a device such as /dev/null, a FIFO, a socket), and a file that is one of the
    command's inputs (``inputs`` or :func:`protect_inputs`; hard links to an input too), or lies in a
    folder that is one (a new file there is let be). ``suffix``: of the file name a refusal of a folder
    suggests.
    """
    raw = fs_path(path, f"the {what} path is {{kind}}, not a str or a path; pass a file name")
    if not raw:
        raise ConfigError(f"the {what} path is empty; pass a file name")
    target = Path(raw)
    if os.path.islink(target):
        raise ConfigError(f"{what} {raw!r} is a symbolic link (to {os.readlink(target)!r}); tokenmill does not "
                          "write through links, which could replace another file: remove the link or pass "
                          "the real path")
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise ConfigError(f"cannot use {what} {raw!r}: {e.strerror or e}") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise ConfigError(f"{what} {raw!r} is a directory; pass a file path (e.g. "
                              f"{os.path.join(raw, 'out' + suffix)!r})")
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{what} {raw!r} exists and is not a regular file (a device, FIFO or socket); "
                              "tokenmill only creates or replaces regular files")
        real = None
        for inp in (*inputs, *_INPUTS.get()):
            try:
                same = os.path.samefile(target, inp)
                if not same and os.path.isdir(inp):  # a folder input (a tokenizer's, a corpus'): its files are read
                    real = real or os.path.realpath(target)
                    same = real.startswith(os.path.join(os.path.realpath(inp), ""))
            except OSError:
                continue
            if same:
                raise ConfigError(f"{what} {raw!r} is also an input of this command ({os.fspath(inp)!r}); "
                                  "writing it would destroy the input: pass another path")
    check_writable_folder(target.parent, what, raw)
    return target


def check_writable_folder(folder: str | os.PathLike, what: str, raw: str | None = None) -> None:
    """Raise a ConfigError naming ``what`` (an output: ``raw`` as given, else ``folder``) where ``folder`` cannot
    be written: its nearest existing folder (it, or where the missing folders would be made) is not a directory,
    or not writable. Said before the work, not after it (the OS's words had come after minutes of it: "cannot
    access ...: Permission denied")."""
    raw = os.fspath(folder) if raw is None else raw
    near = Path(os.path.abspath(folder))
    while not near.exists() and near != near.parent:  # (the folders a write would make: their nearest parent)
        near = near.parent
    if near.exists() and not near.is_dir():
        raise ConfigError(f"cannot write {what} {raw!r}: {str(near)!r} is not a directory")
    if near.is_dir() and not os.access(near, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write {what} {raw!r}: the folder {str(near)!r} is not writable (permissions, "
                          "or a read-only file system); pass a path in a folder you can write")


def _tmp_stem(name: str) -> str:
    """``name`` as its temporaries spell it: itself, or where a temporary's ~75 added bytes would pass the
    file system's 255 a name, its first 100 bytes and a hash of it (a legal name had failed to be written, the
    error naming the temporary)."""
    raw = name.encode("utf-8", "surrogateescape")
    if len(raw) <= 150:
        return name
    return raw[:100].decode("utf-8", "ignore") + "-" + hashlib.sha256(raw).hexdigest()[:16]


def remove_stale_temporaries(directory: str | os.PathLike, name: str | None = None) -> int:
    """Remove temporaries left in ``directory`` by killed tokenmill processes of this host (for the
    target ``name`` only, when given); returns how many were removed. A temporary whose process
    still runs is kept."""
    removed = 0
    prefix = f".{_tmp_stem(name)}~" if name else "."
    try:  # (os.scandir: pathlib's glob compiled its pattern on every call, ~1 ms per file written)
        with os.scandir(directory) as it:
            found = [Path(e.path) for e in it if e.name.startswith(prefix) and e.name.endswith(TMP_SUFFIX)]
    except (FileNotFoundError, NotADirectoryError):
        return 0
    for f in found:
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


def _flush_to_disk(path: str | os.PathLike, *, folder: bool = False) -> None:
    """``fsync`` a file's data (or a folder's entries) to the disk. A file system that cannot
    (``EINVAL``/``ENOTSUP``: some network and virtual ones) is let be: nothing better can be done there."""
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if folder else 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        if folder:
            return  # (a folder that cannot be opened for reading: Windows)
        raise
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def sync_folder(path: str | os.PathLike) -> None:
    """Make a rename or a removal in folder ``path`` survive a power loss (``fsync`` of the folder)."""
    _flush_to_disk(path, folder=True)


class LaterFlush:
    """Files written with ``durable=`` one of these (:func:`atomic_path`), flushed to the disk by one background
    thread while the writer goes on; :meth:`wait` returns once they and their folders are on the disk.
    For a writer with a commit point: a token store's shard files are flushed while the next shard is
    encoded, and its manifest (which says they are whole) is written after ``wait``. Flushing each file
    before its rename instead held the build up for the disk (53 MB of English text, 7 shards, GPT-2, one
    worker: 0.38 -> 0.56 s); flushed here, 0.37 s against 0.38 unflushed (median of 9 alternating builds:
    ``bench/_store_durability.py``)."""

    def __init__(self):
        self._pool = None
        self._pending: list = []
        self._folders: set[str] = set()

    def add(self, path: str | os.PathLike) -> None:
        """Flush ``path`` (a file, renamed into place already) and, at :meth:`wait`, its folder."""
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(1, thread_name_prefix="tokenmill-flush")
        self._folders.add(os.path.dirname(os.path.abspath(path)))
        self._pending.append(self._pool.submit(_flush_to_disk, path))

    def wait(self) -> None:
        """Block until every file added is on the disk, then flush their folders; the first error raised."""
        try:
            for f in self._pending:
                f.result()
            for d in sorted(self._folders):
                sync_folder(d)
        finally:
            self.close()

    def close(self) -> None:
        """Stop the thread (what it has not flushed yet the system writes in its own time)."""
        self._pending, self._folders = [], set()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, inputs: Iterable = (), durable: bool | LaterFlush = True
                ) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it over ``path``.

    The target is checked first (:func:`resolve_output`: no symlink, directory, device, FIFO, or
    input of the command). The new file keeps the permission bits of the file it
    replaces, or gets ``0o666 & ~umask`` when new (as ``open()`` would create it). Leftover
    temporaries of killed processes for the same target are removed first. On failure the temporary
    file is removed and the original error propagates (an OSError that named no file, a full disk's, or
    the temporary, names the target).

    ``durable``: the temporary's data is flushed to the disk before the rename and the folder after it,
    so that a power loss leaves the old file or the new one, never an empty or partial file under the
    target's name (renaming without the flush lets the file system write the name first: ~0.8 ms a
    file on this project's machines; off only for caches, which are checked on read and can be lost); a
    :class:`LaterFlush`: the renamed file is handed to it, flushed in the background.
    """
    target = resolve_output(path, inputs=inputs)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    remove_stale_temporaries(target.parent, target.name)
    fd, tmp = tempfile.mkstemp(prefix=f".{_tmp_stem(target.name)}~{_HOST}~{os.getpid()}~", suffix=TMP_SUFFIX,
                               dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, mode)
        if durable is True:
            _flush_to_disk(tmp)
        os.replace(tmp, target)
        if isinstance(durable, LaterFlush):
            durable.add(target)
        elif durable:
            sync_folder(target.parent)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.filename in (None, tmp, os.fspath(tmp)):  # (a full disk names no file)
            e.filename = os.fspath(target)  # the file the user asked for, not a temporary they never named
        raise


def json_text(obj: Any) -> str:
    """``json.dumps(obj, ensure_ascii=False, indent=1)``, the same text made faster: compact JSON by
    json's C encoder (with ``indent`` json takes its pure-Python one), indented by msgspec (a store's
    manifest of 16 shards: 2.2 -> 0.6 ms). NaN and infinities, which are not JSON, go json's own way."""
    import msgspec

    compact = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    try:
        return msgspec.json.format(compact, indent=1)
    except msgspec.DecodeError:
        return json.dumps(obj, ensure_ascii=False, indent=1)


ASIDE_SUFFIX = ".tokenmill-old"


@contextlib.contextmanager
def moved_aside(paths: Iterable) -> Iterator[Callable[[], None]]:
    """For files (or folders) replaced together (a tokenizer.json and its config, a Megatron .bin and .idx, an SFT
    source's two stores): yields a function that moves the existing ``paths`` aside (``NAME.tokenmill-old``), to
    call once every new one is written (to temporaries) and before they are renamed into place. Should anything
    fail after it, the old ones are put back and a new one where there was none is removed: the paths hold what
    they held before. On success the old ones are removed. Killed in between, the folder holds the new ones that
    were renamed and the old ones aside, never a mix of old and new under their names, and nothing of the user's is
    lost. A ``NAME.tokenmill-old`` already there (what such a kill left: the user's old file) is refused before
    anything is written, never written over."""
    paths = [os.fspath(p) for p in paths]
    nothing_aside(paths)
    kept: list[tuple[str, str]] = []
    new: list[str] = []  # (paths that held nothing: a new one renamed there is removed on failure)

    def aside() -> None:
        for p in paths:
            if os.path.lexists(p):
                os.replace(p, p + ASIDE_SUFFIX)
                kept.append((p + ASIDE_SUFFIX, p))
            else:
                new.append(p)

    try:
        yield aside
    except BaseException:
        for p in new:
            with contextlib.suppress(OSError):
                _remove(p)
        for old, target in kept:
            with contextlib.suppress(OSError):
                if os.path.lexists(target):
                    _remove(target)
                os.replace(old, target)
        raise
    for old, _ in kept:
        with contextlib.suppress(OSError):
            _remove(old)


def nothing_aside(paths: Iterable) -> None:
    """Refuse (a ConfigError naming them and what to do) where a ``NAME.tokenmill-old`` of one of ``paths`` is there:
    what a replacement killed part-way left (:func:`moved_aside`), the user's old file or folder. Said before any
    work by a caller with long work ahead of its replacement (an SFT save encodes first)."""
    left = [os.fspath(p) + ASIDE_SUFFIX for p in paths if os.path.lexists(os.fspath(p) + ASIDE_SUFFIX)]
    if left:
        one = len(left) == 1
        raise ConfigError(f"{' and '.join(repr(p) for p in left)} {'is' if one else 'are'} there: the old "
                          f"{'file' if one else 'files'} of a replacement stopped part-way, moved aside; the files in "
                          f"their places may be new, old or missing. To keep the old {'file' if one else 'files'}, "
                          f"put {'it' if one else 'all of them'} back in place (rename, dropping {ASIDE_SUFFIX}); to "
                          f"keep the new {'one' if one else 'ones'}, remove {'it' if one else 'them'}; then run "
                          "again")


def _remove(path: str) -> None:
    """Remove the file or folder at ``path`` (one tokenmill wrote or moved aside itself)."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def write_json_atomic(path: str | os.PathLike, obj: Any, *, inputs: Iterable = ()) -> None:
    with atomic_path(path, inputs=inputs) as tmp:
        tmp.write_text(json_text(obj) + "\n", encoding="utf-8")


def write_bytes_atomic(path: str | os.PathLike, data, *, inputs: Iterable = ()) -> None:
    """Write ``data`` (bytes-like) to ``path`` atomically, with the checks of :func:`atomic_path`."""
    with atomic_path(path, inputs=inputs) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)


def write_with(path: str | os.PathLike, write: Callable[[BinaryIO], None], *, inputs: Iterable = (),
               durable: bool | LaterFlush = True) -> None:
    """Call ``write(binary file)`` on a temporary beside ``path``, then rename it into place
    (:func:`atomic_path`): for writers that stream (``np.save``, a shard's ids)."""
    with atomic_path(path, inputs=inputs, durable=durable) as tmp:
        with open(tmp, "wb") as f:
            write(f)


class StreamedFile:
    """A file written in pieces as they come, through :func:`atomic_path`: the pieces go to its temporary
    (each hashed with sha256 as it is written), ``close()`` renames it into place and returns
    ``(bytes, "sha256:<hex>")``, ``abort()`` removes it. For a writer whose data arrives over time (a token
    store shard's ids, job by job: no shard-sized block to join and hash at its end)."""

    def __init__(self, path: str | os.PathLike, *, inputs: Iterable = (), durable: bool | LaterFlush = True):
        self._cm = atomic_path(path, inputs=inputs, durable=durable)
        tmp = self._cm.__enter__()
        try:
            self._f = open(tmp, "wb")
        except BaseException as e:
            self._cm.__exit__(type(e), e, e.__traceback__)
            raise
        self._hash = hashlib.sha256()
        self.size = 0
        self._open = True

    def write(self, data) -> None:
        view = memoryview(data).cast("B")
        if not len(view):
            return
        self._f.write(view)
        self._hash.update(view)
        self.size += len(view)

    def close(self) -> tuple[int, str]:
        self._open = False
        try:
            self._f.close()
        except BaseException as e:
            self._cm.__exit__(type(e), e, e.__traceback__)
            raise
        self._cm.__exit__(None, None, None)
        return self.size, "sha256:" + self._hash.hexdigest()

    def abort(self) -> None:
        """Remove the temporary (nothing once closed or aborted)."""
        if not self._open:
            return
        self._open = False
        with contextlib.suppress(OSError):
            self._f.close()
        stop = RuntimeError("write aborted")
        self._cm.__exit__(RuntimeError, stop, None)  # (removes the temporary; returns False: nothing raised here)


def write_cache(path: str | os.PathLike, write: Callable[[BinaryIO], None]) -> bool:
    """Best effort :func:`write_with` for a cache file: False (nothing written, no temporary left)
    where it cannot be written, for a cache is never needed to be right."""
    try:
        write_with(path, write, durable=False)
        return True
    except (OSError, ConfigError):
        return False


def _arrays_digest(arrays: dict) -> str:
    """sha256 of named arrays: each one's name, dtype, shape and bytes, in name order."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = arrays[name]
        h.update(json.dumps([name, a.dtype.str, list(a.shape)]).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def write_cache_arrays(path: str | os.PathLike, arrays: dict, *, stale: Iterable[Path] = ()) -> bool:
    """A cache file of named numpy arrays (``.npz``, no pickle) with their sha256, through :func:`write_cache`;
    ``stale``: older cache files this one replaces (other layouts or versions), removed once it is written."""
    import numpy as np

    digest = _arrays_digest(arrays)
    done = write_cache(path, lambda f: np.savez(f, **arrays, sha256=np.array(digest)))
    if done:
        for old in stale:
            if os.fspath(old) != os.fspath(path):
                with contextlib.suppress(OSError):
                    os.unlink(old)
    return done


def read_cache_arrays(path: str | os.PathLike, names: Iterable[str]) -> dict | None:
    """The arrays :func:`write_cache_arrays` wrote at ``path``, exactly ``names`` and their sha256 checked; None
    when the file is absent or anything about it is off (cut short, emptied, edited, another layout): a cache
    is rebuilt then, never trusted and never an error."""
    import numpy as np

    names = set(names)
    if not is_regular_file(path):  # (a FIFO left in its place: np.load had waited for a writer forever)
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            if set(z.files) != names | {"sha256"}:
                return None
            arrays = {n: z[n] for n in names}
            want = str(z["sha256"])
        return arrays if _arrays_digest(arrays) == want else None
    except Exception:  # noqa: BLE001 -- whatever a damaged file raises (EOFError, BadZipFile, ...): rebuilt
        return None


def is_regular_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a regular file (links followed): what a reader of a cache asks before it opens one, so a FIFO,
    a device or a folder in its place reads as a missing entry instead of an open that waits or acts."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def older_caches(folder: Path, prefix: str, layout: int) -> list[Path]:
    """The cache files ``<prefix><n>-...`` in ``folder`` of a layout ``n`` before ``layout``, and those of the
    ``.npy`` form before sha256-checked files: what a cache written now replaces (another install's entries of
    the same or a later layout are left alone: two environments may share the folder)."""
    out = []
    for p in folder.glob(f"{prefix}*"):
        n = p.name[len(prefix):].split("-", 1)[0]
        if p.suffix == ".npy" or (n.isdigit() and int(n) < layout):
            out.append(p)
    return out


FIGURE_FORMATS = ("png", "svg", "pdf")


def save_figure(fig, path: str | os.PathLike, *, what: str = "plot", inputs: Iterable = ()) -> Path:
    """Save a matplotlib figure to exactly ``path`` (its extension picks the format: .png, .svg or
    .pdf), atomically and with the checks of :func:`atomic_path`; returns the path written.

    matplotlib would append ``.png`` to a name without extension and report a file that does not
    exist; here such a name is refused.
    """
    raw = os.fspath(path)
    ext = os.path.splitext(raw)[1].lower().lstrip(".")
    if ext not in FIGURE_FORMATS:
        raise ConfigError(f"{what} {raw!r} must end in {', '.join('.' + f for f in FIGURE_FORMATS)} (the "
                          "extension picks the image format), e.g. lengths.png")
    # the same bytes every run: no date in the file (svg, pdf), the svg's element ids from a fixed salt (random else)
    meta = {"png": None, "svg": {"Date": None}, "pdf": {"CreationDate": None, "ModDate": None}}[ext]

    def write(f):
        import matplotlib

        with matplotlib.rc_context({"svg.hashsalt": "tokenmill"}):
            fig.savefig(f, format=ext, dpi=110, metadata=meta)

    write_with(raw, write, inputs=inputs)
    return Path(raw)


def canonical_hash(obj: Any) -> str:
    """sha256 of the canonical JSON of ``obj`` (sorted keys, no whitespace), as ``sha256:<hex>``."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(blob.encode("utf-8")).hexdigest()


def max_file_bytes() -> int:
    """The size cap for files that must be small (tokenizer files, rank files, manifests, records):
    ``$TOKENMILL_MAX_FILE_BYTES`` (default 1 GiB)."""
    from ._validate import env_limit

    return env_limit("TOKENMILL_MAX_FILE_BYTES", 1 << 30, "bytes")


_READ_CHUNK = 1 << 20  # bytes per read once a file holds more than its size said


def _kind_of_mode(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    return ("a FIFO (a pipe)" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a directory" if stat.S_ISDIR(mode) else "not a regular file")


def _refuse_irregular(raw: str, what: str, mode: int, error) -> None:
    if stat.S_ISDIR(mode):
        raise error(f"{what} file {raw!r} is a directory; pass a file")
    if not stat.S_ISREG(mode):
        raise error(f"{what} file {raw!r} is {_kind_of_mode(mode)}, not a regular file; "
                    "write it to a regular file first")


def _read_fd_limited(fd: int, size: int, limit: int) -> bytes | None:
    """The bytes of an open regular file of ``size`` bytes (its fstat): one read of ``size + 1``
    bytes (the extra byte tells a file that grew since), then reads of at most 1 MiB, never more
    than ``limit + 1`` bytes in all; None when the file holds more than ``limit`` bytes."""
    parts: list[bytes] = []
    total, first = 0, min(size, limit) + 1
    while total <= limit:
        b = os.read(fd, first - total if total < first else min(_READ_CHUNK, limit + 1 - total))
        if not b:
            break
        parts.append(b)
        total += len(b)
    if total > limit:
        return None
    return parts[0] if len(parts) == 1 else b"".join(parts)


def read_bytes_limited(path: str | os.PathLike, *, what: str, limit: int | None = None,
                       error=FormatError) -> bytes:
    """The bytes of a file that must be small: a regular file of at most ``limit`` bytes (default
    :func:`max_file_bytes`), read by its size (plus one byte, to notice a file that grows while it is
    read), so a small file costs its size in memory, not the limit. FIFOs, devices (/dev/zero),
    sockets, directories and missing files are errors that name the file: a FIFO is opened
    non-blocking and refused, so a pipe without a writer in place of a manifest cannot hang."""
    limit = max_file_bytes() if limit is None else limit
    raw = os.fspath(path)
    try:
        st = os.stat(raw)  # devices are refused before they are opened (opening one may act)
    except FileNotFoundError:
        raise error(f"{what} file {raw!r} does not exist") from None
    except OSError as e:
        raise error(f"cannot read {what} file {raw!r}: {e.strerror or e}") from None
    _refuse_irregular(raw, what, st.st_mode, error)
    try:
        fd = os.open(raw, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise error(f"{what} file {raw!r} does not exist") from None
    except OSError as e:
        raise error(f"cannot read {what} file {raw!r}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)  # what was opened: the path may have been replaced since the stat above
        _refuse_irregular(raw, what, st.st_mode, error)
        if st.st_size > limit:
            raise error(f"{what} file {raw!r} has {st.st_size:,d} bytes, more than the {limit:,d} allowed; "
                        "if it is genuine, raise TOKENMILL_MAX_FILE_BYTES")
        os.set_blocking(fd, True)
        data = _read_fd_limited(fd, st.st_size, limit)
    except OSError as e:
        raise error(f"cannot read {what} file {raw!r}: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if data is None:
        raise error(f"{what} file {raw!r} holds more than the {limit:,d} bytes allowed; "
                    "if it is genuine, raise TOKENMILL_MAX_FILE_BYTES")
    return data
