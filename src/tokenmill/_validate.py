"""The one validating boundary in front of every compiled kernel.

numba does not check bounds: an array that reaches a kernel with a wrong dtype, shape, range or
offsets reads or writes memory it does not own. Every Python function that calls a kernel first
passes its arguments through these checks, which either return exactly the value the kernel will
see (converted without loss) or raise a :class:`~tokenmill.errors.ConfigError` /
:class:`~tokenmill.errors.InputError` that names the parameter, the value and the fix. Nothing is
coerced in silence: ``True`` is not ``1``, ``1.5`` is not ``1``, ``2**64 - 1`` is not ``-1``.

>>> check_int(3, "block_size", min=1)
3
>>> check_int(1.5, "pad_id")
Traceback (most recent call last):
...
tokenmill.errors.ConfigError: pad_id=1.5 must be an integer (got a float)
>>> check_array([3, 0, 5], "lengths", min=0).tolist()
[3, 0, 5]
>>> check_offsets([0, 2, 2, 5], "doc_offsets", n=5).tolist()
[0, 2, 2, 5]
"""

from __future__ import annotations

import math
import numbers
import os

import numpy as np

from ._arrays import readonly
from ._words import counted
from .errors import ConfigError, InputError

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def check_int(value, name: str, *, min: int | None = None, max: int | None = None,
              none: bool = False, error=ConfigError) -> int | None:
    """``value`` as a Python int in ``[min, max]`` (and within int64), else ``error`` naming ``name``.

    Refuses bool, float (even ``2.0``), numpy floats, str and None (unless ``none=True``).
    """
    if value is None and none:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        v = _scalar_index(value)
        if v is None:
            kind = type(value).__name__
            raise error(f"{name}={value!r} must be an integer (got a {kind})")
    else:
        v = int(value)
    lo = INT64_MIN if min is None else min
    hi = INT64_MAX if max is None else max
    if v < lo or v > hi:
        if min is not None and max is not None and max < INT64_MAX:
            want = f"in {min:,d} .. {max:,d}"
        elif v < lo:  # (below int64 without a min: the bound it is below, not the upper one)
            want = f">= {lo:,d}"
        else:
            want = f"<= {hi:,d}"
        raise error(f"{name}={v:,d} is out of range; pass an integer {want}")
    return v


def as_index(value) -> int | None:
    """``value`` as an int where it is an integer index: a Python int (not a bool), a numpy integer, or a 0-d
    integer array (a torch scalar tensor: ``store[ids[0]]``); else None, for the caller's own message."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    return _scalar_index(value)


def _scalar_index(value) -> int | None:
    """The int of a 0-d integer array that is no numpy scalar, as ``operator.index`` reads it (a torch scalar
    tensor: ``lengths.max()``, ``ids[0]``), else None (a bool one, a float one, one of more dimensions, anything
    else)."""
    import operator

    dtype = getattr(value, "dtype", None)
    if (getattr(value, "ndim", None) != 0 or dtype is None or "bool" in str(dtype)
            or not hasattr(type(value), "__index__")):
        return None
    try:
        return operator.index(value)
    except (TypeError, ValueError, RuntimeError):
        return None


def check_float(value, name: str, *, min: float | None = None, max: float | None = None,
                error=ConfigError) -> float:
    """``value`` as a finite float in ``[min, max]``; NaN and infinities are refused (a check must
    never pass because a comparison with NaN is False)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise error(f"{name}={value!r} must be a number (got a {type(value).__name__})")
    v = float(value)
    if not math.isfinite(v):
        raise error(f"{name}={v!r} must be a finite number")
    if (min is not None and v < min) or (max is not None and v > max):
        want = (f"a finite number >= {min:g}" if max is None else f"a number <= {max:g}" if min is None else
                f"a number in [{min:g}, {max:g}]")  # (not "[0, inf]": infinity is refused above)
        raise error(f"{name}={v:g} is out of range; pass {want}")
    return v


def check_path(value, name: str = "path"):
    """``value`` if it is a path (str, bytes or ``os.PathLike``), else a ConfigError naming ``name`` (a
    loader handed an int or None raised Python's bare TypeError from deep inside)."""
    if isinstance(value, (str, bytes, os.PathLike)):
        return value
    raise ConfigError(f"{name}={value!r} is a {type(value).__name__}; pass a file path (a str or a pathlib.Path)")


def check_bool(value, name: str, *, error=ConfigError) -> bool:
    """``value`` as a bool when it is a real ``bool`` or ``numpy.bool_``; anything else (``"no"``,
    ``"False"``, ``0``, ``1``, ``None``) is ``error`` naming ``name``: ``bool("no")`` is True.

    >>> check_bool(False, "shuffle")
    False
    >>> check_bool("no", "shuffle")
    Traceback (most recent call last):
    ...
    tokenmill.errors.ConfigError: shuffle='no' must be True or False (got a str)
    """
    if not isinstance(value, (bool, np.bool_)):
        raise error(f"{name}={value!r} must be True or False (got a {type(value).__name__})")
    return bool(value)


def check_array(a, name: str, *, ndim: int | None = 1, dtype=np.int64, min: int | None = None,
                max: int | None = None, shape: tuple | None = None, error=InputError,
                item: str | None = None) -> np.ndarray:
    """An integer array as a C-contiguous ``dtype`` array, converted exactly or refused.

    Accepts any integer dtype (and empty arrays of any dtype, since ``np.asarray([])`` is float64).
    Refuses bool, float, complex, object and str arrays, values that ``dtype`` cannot hold (e.g.
    uint64 above 2**63 - 1 for int64), values outside ``[min, max]``, and a wrong ``ndim``/``shape``.
    ``item``: how to name one entry in a range error, e.g. ``"document {i} has length {v}"``.
    """
    try:
        arr = np.asarray(a)
    except (ValueError, TypeError, OverflowError, RuntimeError) as e:  # (RuntimeError: a tensor that requires grad)
        raise error(f"{name} is not an array of integers numpy can read ({e})") from None
    if isinstance(a, np.ma.MaskedArray) and np.ma.is_masked(a):  # (np.asarray keeps the values under the mask)
        i = int(np.argmax(np.ma.getmaskarray(a).ravel()))
        raise error(f"{name} is a masked array with {counted(int(np.ma.count_masked(a)), 'masked entry', 'masked entries')} (the first at "
                    f"flat index {i:,d}); their values would be read as they are: fill or drop them first "
                    "(a.filled(value) or a.compressed())")
    if arr.dtype.kind in "US":  # (text where ids or lengths go: "has shape (); it must be 1-D" said nothing useful)
        raise error(f"{name} is text ({type(a).__name__}), not integers; where token ids are expected, encode the "
                    "text with a tokenizer first (tok.encode(text))")
    if ndim is not None and arr.ndim != ndim:
        raise error(f"{name} has shape {arr.shape}; it must be {ndim}-D")
    if shape is not None and arr.shape != shape:
        raise error(f"{name} has shape {arr.shape}; it must have shape {shape}")
    target = np.dtype(dtype)
    if arr.size == 0:
        return np.zeros(arr.shape, target)
    if arr.dtype == object:
        arr = _exact_object_ints(arr, name, error)
    if arr.dtype.kind not in "iu":
        raise error(f"{name} has dtype {arr.dtype}; it must hold integers (no bool, float or str values: "
                    "nothing is rounded or truncated)")
    if isinstance(a, (list, tuple)) and arr.ndim == 1:  # (numpy reads [True, 5] as [1, 5]: a bool among ints)
        i = next((i for i, v in enumerate(a) if isinstance(v, (bool, np.bool_))), None)
        if i is not None:
            raise error(f"{name} holds {a[i]!r} at index {i:,d}; it must hold integers (True is not 1)")
    info = np.iinfo(target)
    lo = info.min if min is None else builtins_max(min, info.min)
    hi = info.max if max is None else builtins_min(max, info.max)
    amin, amax = int(arr.min()), int(arr.max())
    if amin < lo or amax > hi:
        bad = amin if amin < lo else amax
        i = int(np.argmax(arr.ravel() == bad))
        what = f"{name} holds {bad:,d} (at index {i:,d})" if item is None else item.format(i=f"{i:,d}", v=f"{bad:,d}")
        raise error(f"{what}; {name} must be in {lo:,d} .. {hi:,d}")
    return np.ascontiguousarray(arr, dtype=target)


builtins_max, builtins_min = max, min


def _exact_object_ints(arr: np.ndarray, name: str, error) -> np.ndarray:
    """An object array of Python ints (e.g. a list with a value >= 2**64) as int64 or refused."""
    flat = arr.ravel().tolist()
    for i, v in enumerate(flat):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise error(f"{name} holds {v!r} at index {i:,d}; it must hold integers")
        if not INT64_MIN <= int(v) <= INT64_MAX:
            raise error(f"{name} holds {int(v):,d} at index {i:,d}, outside the int64 range")
    return np.array(flat, np.int64).reshape(arr.shape)


def check_doc_ids(docs, *, what: str = "", vocab_size: int | None = None, error=InputError) -> None:
    """Every id of the in-memory documents ``docs`` (1-D integer arrays) is in ``0 .. vocab_size - 1``
    (``0 .. int64 max`` without a vocabulary), else ``error`` naming the document index (``what``
    prefixes it, e.g. ``"mixture part 1 ('code'): "``). A vectorized min/max over the documents
    concatenated in chunks of about 4 M ids: a negative id would otherwise reach batches as input.

    >>> check_doc_ids([np.array([1, 2]), np.array([3, -4])])
    Traceback (most recent call last):
    ...
    tokenmill.errors.InputError: document 1 holds token id -4 at position 1; token ids must be >= 0
    """
    hi = INT64_MAX if vocab_size is None else int(vocab_size) - 1
    chunk: list = []
    first = size = 0  # index of chunk[0]; ids in the chunk
    docs = list(docs)
    for i, d in enumerate(docs):
        chunk.append(d)
        size += d.size
        if size >= 1 << 22 or i == len(docs) - 1:
            if size:
                flat = np.concatenate(chunk)
                lo_v, hi_v = int(flat.min()), int(flat.max())
                if lo_v < 0 or hi_v > hi:
                    bad = lo_v if lo_v < 0 else hi_v
                    pos = int(np.argmax(flat == bad))
                    ends = np.cumsum([c.size for c in chunk])
                    k = int(np.searchsorted(ends, pos, side="right"))
                    at = pos - (int(ends[k - 1]) if k else 0)
                    want = ">= 0" if vocab_size is None else f"in 0 .. {hi:,d} (vocab_size={int(vocab_size):,d})"
                    raise error(f"{what}document {first + k:,d} holds token id {bad:,d} at position {at:,d}; "
                                f"token ids must be {want}")
            first, chunk, size = i + 1, [], 0


def check_texts(texts, what: str, noun: str = "texts", fix: str = "pass [text]", items: str = "strs"):
    """``texts`` as it is (a generator is not consumed) if it is an iterable other than one str or bytes, which
    would be one item per character; else a ConfigError naming what it is (``noun``: what the items are;
    ``fix``: what to do about one str; ``items``: what they must be)."""
    from collections.abc import Iterable

    if isinstance(texts, (str, bytes)):
        raise ConfigError(f"{what} takes an iterable of {noun}, not one {type(texts).__name__} (each of its "
                          f"characters would be one of them); {fix}")
    if not isinstance(texts, Iterable):
        raise ConfigError(f"{what} takes an iterable of {noun} ({items}), not {type(texts).__name__}")
    if type(texts).__name__ == "DataFrame" and hasattr(texts, "columns"):  # (iterated: its column names)
        raise ConfigError(f"{what} takes an iterable of {noun}, not a {type(texts).__name__} (iterating one gives its "
                          "column names); pass one column, e.g. df['text']")
    return texts


def check_ids(ids) -> list[int]:
    """The token ids a ``decode`` is given, as a list of ints: a 1-D integer array (numpy, or anything with
    ``__array__``: a torch tensor on the CPU, as ``generate`` returns them), or an iterable of exact ints
    (``104.7``, ``True`` or ``"104"`` are refused, never truncated). A str, bytes, None, one int, or an array
    of two or more dimensions (a batch, which flattened would read as one text) is a ConfigError naming what
    it is. Ranges are the tokenizer's to check."""
    ids = _ids_source(ids)
    if isinstance(ids, np.ndarray):
        return ids.tolist()
    # exact ints within int64, checked for the whole list at once (one check_int an id cost ~1.6 us: decoding
    # 322K ids took 0.5 s); anything else is checked id by id, which names the first one at fault
    if set(map(type, ids)) <= {int} and (not ids or (min(ids) >= INT64_MIN and max(ids) <= INT64_MAX)):
        return ids
    return [check_token_id(i) for i in ids]


def check_token_id(value) -> int:
    """One id of a decode's list: an exact int (``check_int``'s refusals); one past int64 holds no token, an
    UnknownTokenError (a KeyError), as an id past the vocabulary is (a ConfigError alone had not been one)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) \
            and not INT64_MIN <= int(value) <= INT64_MAX:
        from .errors import UnknownTokenError

        raise UnknownTokenError(f"token id={int(value):,d} is out of range (past int64, where no vocabulary "
                                "reaches): it holds no token")
    return check_int(value, "token id")


def check_ids_array(ids) -> np.ndarray:
    """:func:`check_ids` as a 1-D int64 array, made without a Python loop over the ids: a list of ints goes
    through ``array.array`` (C; it refuses floats, strs and ints past int64, and those fall back to the
    id-by-id check that names the first at fault), and the bools it lets through (as 0 and 1) are looked for
    only where an id is 0 or 1."""
    import array

    ids = _ids_source(ids)
    if isinstance(ids, np.ndarray):
        return ids
    try:
        arr = np.frombuffer(array.array("q", ids), np.int64)
    except (TypeError, OverflowError, ValueError):
        return np.array(check_ids(ids), np.int64)
    for i in np.flatnonzero((arr & ~1) == 0).tolist():  # an id of 0 or 1: True or False would read so
        if type(ids[i]) is not int:
            check_int(ids[i], "token id")
    return arr


def _ids_source(ids) -> list | tuple | np.ndarray:
    """``ids`` as a 1-D int64 array (an array's ids checked: integers, within int64) or a list or tuple (its
    items not checked yet); a ConfigError for what cannot be one sequence of ids."""
    from collections.abc import Iterable

    if type(ids) is np.ndarray and ids.ndim == 1 and (ids.dtype == np.int64 or (ids.dtype.kind in "iu"
                                                                                  and ids.dtype.itemsize <= 4)):
        return np.ascontiguousarray(ids, np.int64)  # (every value fits: no range to check)
    if not isinstance(ids, (np.ndarray, list, tuple, str, bytes)) and hasattr(ids, "__array__"):
        try:  # a torch tensor, a jax or pandas array
            ids = np.asarray(ids)
        except (TypeError, ValueError, RuntimeError) as e:
            raise ConfigError(f"ids is a {type(ids).__name__} that numpy cannot read ({e}); pass a list of ints or "
                              "an array in main memory (a torch tensor: ids.cpu())") from None
    if isinstance(ids, np.ndarray):
        if ids.ndim > 1:
            raise ConfigError(f"ids is a {ids.ndim}-D array of shape {ids.shape}; decode one sequence at a time: "
                              "[tok.decode(row) for row in ids]")
        if ids.ndim == 0:  # (as one int is refused)
            raise ConfigError(f"ids is one id (a 0-d array, {ids!r}); pass a sequence of ids: [token_id]")
        if ids.dtype == np.uint64 and ids.size and int(ids.max()) > INT64_MAX:
            check_token_id(int(ids.max()))
        return check_array(ids, "ids", ndim=None, error=ConfigError).ravel()
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise ConfigError(f"ids must be an iterable of token ids (ints), not {type(ids).__name__}")
    from collections.abc import Mapping, Set

    if isinstance(ids, (Set, Mapping)):  # (a dict decoded its keys, a set its ids in hash order)
        what = "its keys would be decoded" if isinstance(ids, Mapping) else "it keeps no order of its own"
        raise ConfigError(f"ids is a {type(ids).__name__} ({what}); pass the ids in order, as a list or array")
    return ids if isinstance(ids, (list, tuple)) else list(ids)


def check_decode_errors(errors) -> str:
    """``errors`` of a ``decode``: a name of a registered codec error handler ("replace", "strict",
    "ignore", "backslashreplace", ...), checked up front (Python looks it up only when a byte needs it, so
    a typo passed unnoticed until the first invalid byte raised a bare LookupError)."""
    import codecs

    try:
        if not isinstance(errors, str):
            raise LookupError
        codecs.lookup_error(errors)
    except LookupError:
        raise ConfigError(f"errors={errors!r} is not a codec error handler; use 'replace' (invalid bytes become "
                          "U+FFFD), 'strict', 'ignore' or 'backslashreplace'") from None
    return errors


def check_offsets(offsets, name: str, *, n: int, error=InputError) -> np.ndarray:
    """int64 offsets ``[0, ..., n]``, non-decreasing (the boundaries of consecutive pieces of ``n`` items)."""
    if (type(offsets) is np.ndarray and offsets.dtype == np.int64 and offsets.ndim == 1  # fast path (hot loops)
            and offsets.flags.c_contiguous and offsets.size and offsets[0] == 0 and offsets[-1] == n
            and not (offsets[1:] < offsets[:-1]).any()):
        return offsets
    offs = check_array(offsets, name, error=error)
    if offs.size < 1 or offs[0] != 0 or offs[-1] != n:
        first = offs[:1].tolist()
        last = offs[-1:].tolist()
        raise error(f"{name} must run from 0 to {n:,d}; got {offs.size:,d} values from {first} to {last}")
    if offs.size > 1:
        d = np.diff(offs)
        if d.min() < 0:
            i = int(np.argmax(d < 0))
            raise error(f"{name} decreases at index {i + 1:,d} ({int(offs[i]):,d} -> {int(offs[i + 1]):,d}); "
                        "offsets must never decrease")
    return offs


def check_spans(start: np.ndarray, length: np.ndarray, size: int, name: str, *, error=InputError) -> None:
    """Every ``[start[k], start[k] + length[k])`` lies inside ``0 .. size`` (``length >= 0``)."""
    if start.size == 0:
        return
    if length.min() < 0:
        raise error(f"{name}: a length is negative ({int(length.min()):,d})")
    if start.min() < 0:
        k = int(np.argmin(start))
        raise error(f"{name}: span {k:,d} starts at {int(start[k]):,d}, before 0")
    end = start + length  # both in 0 .. int64 max / 2 in practice; checked against overflow below
    if (end < start).any() or end.max() > size:
        k = int(np.argmax((end < start) | (end > size)))
        raise error(f"{name}: span {k:,d} [{int(start[k]):,d}, {int(start[k]) + int(length[k]):,d}) reaches past "
                    f"the {size:,d} items it reads from")


def check_out(out, name: str, *, shape: tuple, dtype=None, error=ConfigError) -> np.ndarray:
    """A writeable output array with at least ``shape`` (each dimension) and the given ``dtype`` kind."""
    if not isinstance(out, np.ndarray):
        raise error(f"{name} must be a numpy array (got a {type(out).__name__})")
    if isinstance(out, np.ma.MaskedArray):  # (its mask would be ignored; the kernels do not take the type)
        raise error(f"{name} is a masked array; pass a plain numpy array (np.empty or np.zeros)")
    if out.ndim != len(shape):
        raise error(f"{name} has shape {out.shape}; it must be {len(shape)}-D, at least {shape}")
    if any(have < need for have, need in zip(out.shape, shape)):
        raise error(f"{name} has shape {out.shape}, too small for {shape}; pass a larger array or out=None")
    if not out.flags.writeable:
        raise error(f"{name} is read-only; pass a writeable array")
    if dtype is not None and out.dtype != np.dtype(dtype):
        raise error(f"{name} has dtype {out.dtype}; it must be {np.dtype(dtype)}")
    if out.dtype.kind not in "iu":
        raise error(f"{name} has dtype {out.dtype}; it must be an integer array")
    return out


def check_total(lengths: np.ndarray, name: str, *, limit: int = 2**62, error=InputError) -> int:
    """The sum of non-negative int64 ``lengths`` as an exact int, refused when it exceeds ``limit``
    (int64 sums wrap silently; the planners add lengths, starts and counts together)."""
    if lengths.size == 0:
        return 0
    approx = float(lengths.sum(dtype=np.float64))
    if approx > limit:
        raise error(f"{name} add up to about {approx:.3g}, more than {limit:,d} (2**62) tokens; "
                    "these cannot be real document lengths")
    return int(lengths.sum())


def document_lengths(lengths, name: str = "lengths", *, error=InputError) -> np.ndarray:
    """Documents' lengths as a 1-D int64 array (each >= 0, their total within 2**62), from an array-like of
    them (a list, a numpy array, a torch tensor), a token source (its ``lengths``), or a list of the documents
    themselves (1-D arrays, tensors or lists of ids: their lengths; a list of tensors was refused as an
    "inhomogeneous shape"). One rule for the planners (``pack``, the windows, ``LengthGroupedBatches``); a read-only view."""
    if hasattr(lengths, "lengths") and not isinstance(lengths, np.ndarray):  # a token source
        lengths = lengths.lengths
    elif isinstance(lengths, (list, tuple)) and lengths and np.ndim(lengths[0]) >= 1:  # the documents
        sizes = np.empty(len(lengths), np.int64)
        for i, d in enumerate(lengths):
            if np.ndim(d) != 1:
                raise error(f"{name}: item {i:,d} has shape {np.shape(d)}, not 1-D; pass the documents' lengths, or "
                            "the documents themselves (each a 1-D sequence of ids)")
            sizes[i] = len(d)
        lengths = sizes
    a = check_array(lengths, name, min=0, item="document {i} has length {v}", error=error)
    check_total(a, name, error=error)
    # a read-only view whatever the caller's flags (a store's lengths are read-only, a list's are not): one argument
    # type for the planners' kernels, which the warm-up compiles, and no planner writes the caller's array
    return readonly(a)[0]


def max_plan_rows() -> int:
    """The most rows (windows, segments, samples) one plan may hold: ``$TOKENMILL_MAX_PLAN_ROWS``
    (default 2**30, about 24 GB of int64 columns). A plan is arrays in memory: a block or window of a
    few tokens over huge lengths would otherwise allocate until the machine runs out."""
    return env_limit("TOKENMILL_MAX_PLAN_ROWS", 2**30, "rows")


def env_limit(name: str, default: int, unit: str) -> int:
    """The whole number >= 1 of ``$name`` (``default`` where unset), else a ConfigError naming the variable (0 or
    -1 had been taken, and read as a fault of the data: "36 rows, more than the -1 allowed")."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = int(raw.strip()) if raw.strip().isascii() and raw.strip().isdigit() else 0
    if value < 1:
        raise ConfigError(f"{name}={raw!r} is not a whole number of {unit} >= 1 (the default is {default:,d}); set "
                          "it to the limit wanted, or unset it")
    return value


def check_rows(n: int, what: str, fix: str) -> int:
    """``n`` rows for ``what``, or a ConfigError when that exceeds :func:`max_plan_rows`."""
    limit = max_plan_rows()
    if n > limit:
        raise ConfigError(f"{what} would hold {n:,d} rows, more than the {limit:,d} allowed; {fix} "
                          "(or raise TOKENMILL_MAX_PLAN_ROWS)")
    return n
