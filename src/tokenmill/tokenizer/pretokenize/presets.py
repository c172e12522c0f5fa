"""Pre-tokenization: split text into the chunks a split regex finds, fast.

For the presets ``gpt2``, ``gpt4`` (``cl100k``) and ``o200k``, compiled kernels (``_pretok_kernels``)
split UTF-8 bytes into exactly the chunks ``regex.findall(pattern, text)`` returns, 8-13 times as
fast as the ``regex`` module (70-210 MB/s on one core; docs/benchmarks.md). Any other pattern goes
through ``regex.findall``. The kernels release the GIL, so threads can split documents in parallel.

The kernels look characters up in a class table: one uint16 per code point (0x110000 entries,
2.2 MB) whose bits say \\p{L}, \\p{N}, \\s, the o200k letter classes and the case-insensitive
contraction letters. The table is derived by running the ``regex`` module itself over every code
point, so it agrees with the regex engine whatever Unicode version that engine ships (its ``\\s`` is
Unicode White_Space: U+0085 and U+00A0 are in, U+001C..U+001F are not; ``(?i:s)`` also matches
U+017F LATIN SMALL LETTER LONG S). Building it takes about 0.2 s, so it is cached on disk under
``$TOKENMILL_CACHE_DIR`` (default ``$XDG_CACHE_HOME/tokenmill`` or ``~/.cache/tokenmill``), keyed by
the ``regex`` version and ``unicodedata.unidata_version``. Nothing is built or compiled at import.
"""

from __future__ import annotations

import functools
import itertools
import os
import unicodedata
from pathlib import Path

import numpy as np

from ..._io import older_caches, read_cache_arrays, write_cache_arrays
from ..._validate import check_offsets
from ...errors import ConfigError, InputError
from .patterns import GPT2, GPT4, O200K, findall_bounded, resolve_pattern
from .unicode import as_unicode16_table

# preset name or resolved regex -> preset id: the index in _KERNEL_NAMES and (GPT2, GPT4, O200K)
# preset name or regex -> kernel id of the hand-written matchers (the compiled presets)
PRESET_IDS = {"gpt2": 0, "gpt4": 1, "cl100k": 1, "o200k": 2, GPT2: 0, GPT4: 1, O200K: 2}
_KERNEL_NAMES = ("split_gpt2", "split_gpt4", "split_o200k")
_TABLE_LAYOUT = 3  # bump when the meaning of the table's bits changes (2: Unicode 16's classes; 3: U+0295 an Ll)
_N_CODE_POINTS = 0x110000

__all__ = ["split_offsets", "split_text", "class_table", "build_class_table"]


def split_offsets(data: bytes, preset: str, *, doc_offsets: np.ndarray | None = None, compact: bool = True,
                  out_buf: np.ndarray | None = None) -> np.ndarray:
    """Byte offsets of the chunk boundaries of UTF-8 ``data`` under a preset split pattern.

    Returns int64 ``[0, e1, e2, ..., len(data)]``, strictly increasing (``[0]`` for empty input):
    chunk ``k`` is ``data[offs[k]:offs[k + 1]]``, exactly the ``k``-th item of
    ``regex.findall(pattern, data.decode())``. ``preset`` is ``"gpt2"``, ``"gpt4"``/``"cl100k"``,
    ``"o200k"`` or one of those regex strings. ``data`` may be any bytes-like object or 1-D uint8
    array; it must be well-formed UTF-8 (checked while splitting, at no extra cost: InputError).

    ``doc_offsets`` (int64, non-decreasing, from 0 to ``len(data)``) splits many documents in one
    call: each ``data[doc_offsets[d]:doc_offsets[d + 1]]`` is split on its own (no chunk crosses a
    document boundary, and trailing whitespace is judged per document), and the result holds every
    document boundary, as if the per-document results were concatenated (a call costs about 3 us).

    ``compact=False`` (the encoder, which drops the offsets once its kernel has read them): the result may
    be a view of the kernel's buffer of one slot per input byte (~4x the offsets), where the default
    copies the offsets into an array of their own size (~0.2 ms a MB of text). ``out_buf`` (with
    ``compact=False``): an int64 array of ``len(data) + 2`` slots or more for the kernel to write into,
    so that a caller splitting again and again reuses one buffer (``offsets_buffer``; the result is
    then a view of it, valid until the next split into it).

    >>> split_offsets("Hello world's  end".encode(), "gpt2").tolist()
    [0, 5, 11, 13, 14, 18]
    >>> split_offsets(b"a b  c d ", "gpt2", doc_offsets=[0, 4, 9]).tolist()  # "a b " + " c d "
    [0, 1, 3, 4, 6, 8, 9]
    """
    pid = _preset_id(preset)
    buf = as_readonly_bytes(data)
    docs = single_document(len(buf)) if doc_offsets is None else check_doc_offsets(doc_offsets, len(buf))
    offsets, bad = _split(buf, pid, docs, scratch(out_buf, len(buf)))
    if bad >= 0:
        raise_not_utf8(buf, bad)
    return offsets.copy() if compact else offsets


def split_text(text: str, pattern: str | None) -> list[str]:
    """The chunks of ``text``: ``regex.findall(pattern, text)``, compiled for the presets.

    ``pattern`` is a preset name, a resolved regex (the presets' strings use the kernels), any other
    regex (``regex.findall``), or ``None`` (the whole text is one chunk; empty text gives none).

    >>> split_text("Hello world's  end", "gpt2")
    ['Hello', ' world', "'s", ' ', ' end']
    >>> split_text("x", None), split_text("", None)
    (['x'], [])
    """
    if pattern is None:
        return [text] if text else []
    pid = PRESET_IDS.get(pattern)
    if pid is None:
        return findall_bounded(resolve_pattern(pattern), text)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: not UTF-8, so leave them to the regex engine
        return findall_bounded(_preset_regex(pid), text)
    buf = as_readonly_bytes(data)
    offs, _ = _split(buf, pid, single_document(len(buf)))  # str.encode() is always well-formed
    if len(data) != len(text):  # not ASCII: byte offsets -> code point offsets
        from . import _pretok_kernels as K

        offs = K.char_offsets(buf, offs)
    bounds = offs.tolist()
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


_KERNELS: list = []  # the compiled split kernels, by preset id (numba loads on the first split, not at import)


_NO_BUF = np.empty(0, np.int64)  # a split kernel's "make a new offsets array"


def scratch(out_buf: np.ndarray | None, n: int) -> np.ndarray:
    """``out_buf`` checked for a split kernel of ``n`` bytes to write its offsets into (int64, C-contiguous,
    writable, ``n + 2`` slots or more: the kernels write one slot per byte and two more), or the
    kernels' "make a new array" where it is None."""
    if out_buf is None:
        return _NO_BUF
    if (not isinstance(out_buf, np.ndarray) or out_buf.dtype != np.int64 or out_buf.ndim != 1
            or not out_buf.flags.c_contiguous or not out_buf.flags.writeable or out_buf.shape[0] < n + 2):
        raise ValueError(f"out_buf must be a writable C-contiguous int64 array of at least {n + 2:,d} slots "
                         "(one per byte of the text and two more)")
    return out_buf


def _split(buf: np.ndarray, pid: int, docs: np.ndarray, out_buf: np.ndarray = _NO_BUF) -> tuple[np.ndarray, int]:
    if not _KERNELS:
        from . import _pretok_kernels as K

        _KERNELS.extend(getattr(K, name) for name in _KERNEL_NAMES)
    return _KERNELS[pid](buf, class_table(), docs, out_buf)


def preset_kernel(preset: str):
    """The compiled split kernel of a preset (loads numba): for checking whether it is compiled yet."""
    from . import _pretok_kernels as K

    return getattr(K, _KERNEL_NAMES[_preset_id(preset)])


def single_document(n: int) -> np.ndarray:
    """Document offsets ``[0, n]``: the whole buffer as one document."""
    return np.array([0, n], np.int64)


def check_doc_offsets(doc_offsets, n: int) -> np.ndarray:
    """``doc_offsets`` as int64, or an error unless they run non-decreasing from 0 to ``n``."""
    # exact int64 (no float truncation, no wrap-around), from 0 to n, never decreasing
    return check_offsets(doc_offsets, "doc_offsets", n=n, error=ConfigError)


def _preset_id(preset: str) -> int:
    pid = PRESET_IDS.get(preset) if isinstance(preset, str) else None
    if pid is None:
        raise ConfigError(
            f"preset={preset!r} has no compiled splitter; use 'gpt2', 'gpt4', 'cl100k' or 'o200k' "
            "(or split_text for a custom regex)"
        )
    return pid


def as_readonly_bytes(data) -> np.ndarray:
    """A read-only, contiguous 1-D uint8 view (copied only if not contiguous).

    The kernels always see this one array type, so numba compiles (and caches) them only once.
    """
    if type(data) is bytes:  # the common case (an encoder's UTF-8): already read-only and contiguous
        return np.frombuffer(data, dtype=np.uint8)
    if isinstance(data, str):
        raise ConfigError("data is a str; pass its UTF-8 bytes (text.encode()) or use split_text(text, preset)")
    buf = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data
    if buf.dtype != np.uint8 or buf.ndim != 1:
        raise ConfigError(f"data has dtype {buf.dtype} and shape {buf.shape}; pass bytes or a 1-D uint8 array")
    buf = np.ascontiguousarray(buf).view()
    buf.flags.writeable = False
    return buf


def _preset_regex(pid: int) -> str:
    return (GPT2, GPT4, O200K)[pid]


def raise_not_utf8(buf: np.ndarray, bad: int) -> None:
    """Raise the InputError for invalid UTF-8 found by a kernel at byte ``bad`` of ``buf``."""
    reason = "invalid UTF-8"
    try:  # Python's decoder words the problem better; the kernel found where
        str(memoryview(buf[bad : bad + 4]), "utf-8")
    except UnicodeDecodeError as e:
        reason = e.reason
    raise InputError(
        f"data is not valid UTF-8 at byte offset {bad:,d} ({reason}); decode and re-encode it, "
        "e.g. data.decode('utf-8', errors='replace').encode()"
    )


# ----------------------------------------------------------------------------------------------
# the class table


def _class_regexes() -> list[tuple[int, str]]:
    """(bit, regex class) pairs: bit is set for a code point iff the class matches it."""
    from . import _pretok_kernels as k

    return [
        (k.L_, r"\p{L}"),
        (k.N_, r"\p{N}"),
        (k.S_, r"\s"),
        (k.U_, r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"),
        (k.W_, r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"),
        (k.F_S, r"(?i:s)"),
        (k.F_D, r"(?i:d)"),
        (k.F_M, r"(?i:m)"),
        (k.F_T, r"(?i:t)"),
        (k.F_L, r"(?i:l)"),
        (k.F_V, r"(?i:v)"),
        (k.F_E, r"(?i:e)"),
        (k.F_R, r"(?i:r)"),
    ]


def build_class_table() -> np.ndarray:
    """Compute the class table (uint16, one entry per code point) from the ``regex`` module.

    Every code point (lone surrogates included, which UTF-8 never holds) is tested by letting the
    regex engine find the runs of each class in the string of all code points in order.
    """
    import regex

    every = "".join(map(chr, range(_N_CODE_POINTS)))
    table = np.zeros(_N_CODE_POINTS, np.uint16)
    for bit, cls in _class_regexes():
        for m in regex.finditer(f"(?:{cls})+", every):
            table[m.start() : m.end()] |= bit
    return as_unicode16_table(table)  # (Unicode 16's classes, as tiktoken's and HF's: see ``unicode``)


@functools.cache
def class_table() -> np.ndarray:
    """The class table, loaded from the on-disk cache or built (and cached) on first use."""
    path = cache_dir() / _table_file_name()
    table = _load_table(path)
    if table is None:
        table = build_class_table()
        _save_table(path, table)
    table.setflags(write=False)
    return table


def cache_dir() -> Path:
    """tokenmill's disk cache folder: ``$TOKENMILL_CACHE_DIR``, else ``$XDG_CACHE_HOME/tokenmill`` or ``~/.cache/tokenmill``."""
    env = os.environ.get("TOKENMILL_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tokenmill"


def _table_file_name() -> str:
    import regex

    return f"pretok-classes-v{_TABLE_LAYOUT}-regex{regex.__version__}-ucd{unicodedata.unidata_version}.npz"


def _load_table(path: Path) -> np.ndarray | None:
    """The cached table, or None when absent or unusable (cut short, edited: its sha256 is checked; it is
    then rebuilt and rewritten)."""
    got = read_cache_arrays(path, ["table"])
    if got is None:
        return None
    table = got["table"]
    if table.dtype != np.uint16 or table.shape != (_N_CODE_POINTS,):
        return None
    from . import _pretok_kernels as k

    spot = {0x61: k.L_ | k.W_, 0x20: k.S_, 0x35: k.N_, 0x4E00: k.L_ | k.U_ | k.W_, 0x17F: k.L_ | k.W_ | k.F_S}
    if any(int(table[cp]) != bits for cp, bits in spot.items()):
        return None
    return table


def _save_table(path: Path, table: np.ndarray) -> None:
    """Write atomically (temporary name, then rename); a cache that cannot be written is skipped."""
    write_cache_arrays(path, {"table": table}, stale=older_caches(path.parent, "pretok-classes-v", _TABLE_LAYOUT))
