"""One strict schema layer for every file tokenmill reads.

Each file format declares its shape once, as a :mod:`msgspec` ``Struct`` (exact types, ranges, string
patterns, no unknown fields) with a ``__post_init__`` for what spans fields (counts against sizes,
names unique). :func:`load_json` reads a file through the bounded reader of :mod:`tokenmill._io`,
parses it and checks it against its schema before any caller sees a value; :func:`check` does the
same for an object already in memory (a state dict handed back by a user). Nothing is coerced:
``"false"`` is not a bool, ``1.0`` and ``true`` are not integers, ``"7"`` is not 7. A violation is a
:class:`~tokenmill.errors.FormatError` naming the file, the field path and the value::

    store manifest file 'st/manifest.json': field shards[0].documents = true: expected int, got bool

msgspec was chosen over pydantic (strict mode) and jsonschema because it is one small compiled
dependency without dependencies of its own, is strict by default (bool is not int, no str -> number),
reports the path of the first violation, and checks a 100k-entry vocabulary in milliseconds.

>>> from typing import Annotated
>>> class Point(Struct):
...     x: Annotated[int, Meta(ge=0)]
>>> check({"x": 3}, Point, what="point").x
3
>>> try:
...     check({"x": True}, Point, what="point")
... except FormatError as e:
...     print(e)
point: field x = true: expected int, got bool
"""

from __future__ import annotations

import os
import re
from typing import Annotated, Any, TypeVar

import msgspec
from msgspec import Meta

from ._io import read_bytes_limited
from .errors import FormatError

__all__ = ["Struct", "Meta", "check", "load_json", "parse_json", "read_json", "show_value", "Count", "Sha256", "Id", "BIG"]

T = TypeVar("T")

# Largest count or size a file may state: all of tokenmill's arithmetic is int64.
BIG = 2**62
Count = Annotated[int, Meta(ge=0, le=BIG)]
Id = Annotated[int, Meta(ge=0, lt=2**31)]  # token ids: the kernels' pair keys hold two 31-bit ids
Sha256 = Annotated[str, Meta(pattern=r"^sha256:[0-9a-f]{64}$")]


class Struct(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Base of every schema: unknown fields are an error, values are immutable."""


_AT = re.compile(r" - at `\$(.*)`$")


def _describe(obj: Any, path: str) -> str:
    """``field a.b[2] = <value>`` for a msgspec error path ``.a.b[2]`` (value looked up in ``obj``)."""
    shown = path.lstrip(".") or "(top level)"
    value: Any = obj
    try:
        for m in re.finditer(r"\.([^.\[]+)|\[(\d+)\]", path):
            value = value[m.group(1)] if m.group(1) is not None else value[int(m.group(2))]
    except (KeyError, IndexError, TypeError):
        return f"field {shown}"
    r = show_value(value)
    return f"field {shown} = {r}"


def show_value(value: Any) -> str:
    if value is True or value is False or value is None:
        r = {True: "true", False: "false", None: "null"}[value]
    elif isinstance(value, (dict, list)):
        r = f"a JSON {'object' if isinstance(value, dict) else 'array'} of {len(value):,d} entries"
    elif isinstance(value, int) and value.bit_length() > 100:
        r = f"an integer of {len(str(abs(value))):,d} digits"
    else:
        r = repr(value)
    return r if len(r) <= 80 else r[:77] + "..."


def _message(err: msgspec.ValidationError, obj: Any) -> str:
    text = str(err)
    m = _AT.search(text)
    reason = text[: m.start()] if m else text
    reason = reason.replace("`", "")
    reason = reason[0].lower() + reason[1:] if reason else "invalid value"
    if m:
        return f"{_describe(obj, m.group(1))}: {reason}"
    return reason


def check(obj: Any, schema: type[T], *, what: str, hint: str = "") -> T:
    """``obj`` (parsed JSON or a user's dict) checked against ``schema``; FormatError otherwise.

    ``what`` names the object in the message (e.g. ``"store manifest file 'st/manifest.json'"``);
    ``hint`` says what to do (appended after a semicolon).
    """
    try:
        return msgspec.convert(obj, schema, strict=True)
    except msgspec.ValidationError as e:
        raise FormatError(f"{what}: {_message(e, obj)}" + (f"; {hint}" if hint else "")) from None
    except RecursionError:
        raise FormatError(f"{what}: nests too deeply to check" + (f"; {hint}" if hint else "")) from None


def parse_json(data: bytes, *, what: str, fix: str = "write it again") -> Any:
    """Bytes of a JSON document as Python objects; FormatError naming ``what`` for anything that is
    not UTF-8 JSON (bad syntax, nesting deep enough to exhaust the stack, numbers out of range); ``fix``:
    what to do about a damaged one (a store's manifest is rebuilt, not written)."""
    try:
        return msgspec.json.decode(data)
    except RecursionError:
        raise FormatError(f"{what} nests JSON too deeply to read; it is not a file tokenmill reads") from None
    except msgspec.ValidationError as e:  # e.g. an integer of 5,000 digits
        raise FormatError(f"{what} holds a value JSON cannot represent here ({e})") from None
    except msgspec.DecodeError as e:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as u:
            raise FormatError(f"{what} is not UTF-8 (byte offset {u.start:,d}: {u.reason})") from None
        raise FormatError(f"{what} is not valid JSON ({e}); the file is corrupted or truncated: {fix}") from None


def _unique_keys(data: bytes, where: str) -> None:
    """A FormatError naming ``where`` and the key where an object of the JSON ``data`` (parsed already) holds a
    key twice: msgspec, as Python's json, keeps the last copy, and a manifest edited to carry two (``"documents"``
    twice) had passed its checks and its hash (computed over what was kept), while a reader keeping the first
    copy saw other values. For the files :func:`load_json` and :func:`read_json` read (manifests, journals, plan
    caches: small); a second parse, by Python's json."""
    import json

    def pairs(items):
        keys = [k for k, _ in items]
        if len(set(keys)) != len(keys):
            seen: set = set()
            twice = next(k for k in keys if k in seen or seen.add(k))
            raise FormatError(f"{where} holds the key {twice!r} twice in one object; tokenmill never writes that: the "
                              "file was edited or damaged (rebuild or write it again)")
        return dict(items)

    try:
        json.loads(data, object_pairs_hook=pairs)
    except FormatError:
        raise
    except (ValueError, RecursionError):  # (what msgspec read, Python's json may refuse: its own limits)
        pass


def read_json(path: str | os.PathLike, *, what: str, limit: int | None = None) -> Any:
    """A JSON file without a declared shape, parsed (:func:`parse_json`) after a bounded read; files
    with a shape use :func:`load_json`, which also checks it."""
    data, where = read_bytes_limited(path, what=what, limit=limit), f"{what} file {os.fspath(path)!r}"
    out = parse_json(data, what=where)
    _unique_keys(data, where)
    return out


def load_json(path: str | os.PathLike, schema: type[T] | None, *, what: str, limit: int | None = None,
              hint: str = "", pre=None, fix: str = "write it again") -> tuple[Any, T | None]:
    """Read ``path`` (bounded: a regular file of at most ``limit`` bytes), parse it, check it against
    ``schema``; return ``(raw object, checked struct)``. ``pre(raw)`` runs between parsing and the
    schema check (for messages that must come first, e.g. "written by a newer tokenmill")."""
    where = f"{what} file {os.fspath(path)!r}"
    data = read_bytes_limited(path, what=what, limit=limit)
    raw = parse_json(data, what=where, fix=fix)
    _unique_keys(data, where)
    if pre is not None:
        pre(raw)
    return raw, (None if schema is None else check(raw, schema, what=where, hint=hint))
