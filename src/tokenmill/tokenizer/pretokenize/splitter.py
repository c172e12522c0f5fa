"""Compiled splitting for any pattern tokenmill knows how to run compiled, behind one entry point.

``compiled_offsets(data, pattern)`` returns the chunk boundaries of UTF-8 ``data`` (like
``pretokenize.split_offsets``) or None when the pattern has no compiled matcher; callers then use
``regex`` (``patterns.split_with_gaps``). Compiled today:

* the presets ``gpt2``, ``gpt4``/``cl100k``, ``o200k`` (``_pretok_kernels``);
* the family of today's open models (``_family_kernels``): ``llama3`` (Llama 3 / 3.1 / 3.2 / 3.3),
  ``qwen2`` (Qwen 2, 2.5, 3) and ``qwen3.5``, matched by the exact regex string their files carry;
* any other pattern of the tokenizer-regex family (``regex_compile`` + ``_regex_vm``): an anchored
  DFA (built by subset construction over the VM's ordered thread lists, so leftmost-first) finds the
  match at each chunk start in one table step per character, and a Pike VM (linear time whatever the
  pattern) finds the next match where none starts; 25-55 MB/s on the presets' regexes, against
  0.5-5 MB/s for the ``regex`` module. A pattern outside the family falls back to ``regex`` with one
  warning naming the construct. ``TOKENMILL_GENERAL_SPLITTER=0`` turns the general path off.

Equality with ``regex.findall`` is tested on the corpora and on generated text and patterns
(tests/tokenizer).
"""

from __future__ import annotations

import functools
import os
import unicodedata

import numpy as np

from ..._io import older_caches, read_cache_arrays, write_cache_arrays
from .patterns import LLAMA3, QWEN2, QWEN3_5, preset_name, resolve_pattern
from .presets import PRESET_IDS, as_readonly_bytes, raise_not_utf8, split_offsets
from .unicode import as_unicode16_table

# name -> (regex, digits K, letters include \p{M})
FAMILY = {"llama3": (LLAMA3, 3, False), "qwen2": (QWEN2, 1, False), "qwen3.5": (QWEN3_5, 1, True)}
_BY_REGEX = {rx: (k, marks) for rx, k, marks in FAMILY.values()}


def resolve(pattern: str | None) -> str | None:
    """The regex of a pattern: a preset name (gpt2, gpt4/cl100k, o200k, and the model family: llama3,
    qwen2, qwen3.5), a regex (checked), or None (no split): ``resolve_pattern``, which knows every name
    (training resolved the family's names as literal regexes before, and split nothing)."""
    return resolve_pattern(pattern)


def pattern_name(regex_str: str | None) -> str | None:
    """The preset or family name of a resolved regex, or None for any other pattern."""
    for name, (rx, _, _) in FAMILY.items():
        if rx == regex_str:
            return name
    return preset_name(regex_str)


def family_params(pattern: str | None) -> tuple[int, bool] | None:
    """(K, marks) when ``pattern`` (a resolved regex or a family name) is one of the family's, else None."""
    if pattern in FAMILY:
        _, k, marks = FAMILY[pattern]
        return k, marks
    return _BY_REGEX.get(pattern)


def has_kernel(pattern: str | None) -> bool:
    """A hand-written kernel runs ``pattern`` (the presets and the model family)."""
    return pattern is not None and (pattern in PRESET_IDS or family_params(pattern) is not None)


def has_compiled(pattern: str | None) -> bool:
    """A compiled matcher runs ``pattern`` (a hand-written kernel, or the general DFA/VM)."""
    if pattern is None:
        return False
    return has_kernel(pattern) or (use_general() and general(pattern) is not None)


def use_general() -> bool:
    return os.environ.get("TOKENMILL_GENERAL_SPLITTER", "1") not in ("", "0")


@functools.lru_cache(maxsize=64)
def general(pattern: str):
    """The general compiled program for ``pattern``, or None (with one warning naming the construct)."""
    from ...errors import warn
    from .regex_compile import Unsupported, build_dfa, compile_pattern

    try:
        prog = compile_pattern(pattern)
        prog.class_table()
        prog.dfa = build_dfa(prog)  # None past its state limit: the VM alone then
        return prog
    except Unsupported as e:
        warn(f"split pattern runs through the regex module (slower), not compiled: {e}")
        return None


def compiled_offsets(data: bytes, pattern: str, *, allow_general: bool | None = None,
                     doc_offsets: np.ndarray | None = None, compact: bool = True,
                     out_buf: np.ndarray | None = None) -> np.ndarray | None:
    """Chunk boundaries ``[0, e1, ..., len(data)]`` of UTF-8 ``data`` (matches and the gaps between
    them, as ``patterns.split_with_gaps``), or None (no compiled matcher). ``allow_general``: use the
    general VM for other patterns (default: ``$TOKENMILL_GENERAL_SPLITTER``). ``doc_offsets``: split
    each ``data[doc_offsets[d]:doc_offsets[d + 1]]`` on its own (as ``pretokenize.split_offsets``); the
    result holds every document boundary. ``compact=False``: possibly a view of a larger buffer (as
    ``split_offsets``), for a caller that drops it soon; ``out_buf``: the buffer to write the offsets into
    (``split_offsets``; the presets and the family patterns, the general VM makes its own)."""
    if pattern in PRESET_IDS:
        return split_offsets(data, pattern, doc_offsets=doc_offsets, compact=compact, out_buf=out_buf)
    params = family_params(pattern)
    if params is None:
        if not (use_general() if allow_general is None else allow_general):
            return None
        prog = general(pattern)
        if prog is None:
            return None
        buf = as_readonly_bytes(data)
        return regex_offsets(buf, prog, _docs(doc_offsets, len(buf)), pattern=pattern)
    k, marks = params
    buf = as_readonly_bytes(data)
    from . import _family_kernels as K

    offsets, bad = K.split_family(buf, family_table(marks), _docs(doc_offsets, len(buf)), K.family_machine(k), k,
                                  out_buf)
    if bad >= 0:
        raise_not_utf8(buf, bad)
    return offsets.copy() if compact else offsets


def kernel_splitter(pattern: str) -> tuple:
    """The hand-written kernel of ``pattern`` (``has_kernel``) and its bound tables: ``(kernel, table, tail)``,
    called as ``kernel(buf, table, docs, *tail, out_buf)`` -> ``(offsets, bad)`` with what ``split_offsets``'
    kernel call takes, checked by the caller (a read-only uint8 ``buf``, int64 ``docs`` from 0 to its size,
    an int64 ``out_buf`` of its size + 2 slots or more). Resolved once, for a caller that splits one short
    text after another (``split_offsets``' lookups and checks cost more than the kernel on a sentence)."""
    if pattern in PRESET_IDS:
        from .presets import class_table, preset_kernel

        return preset_kernel(pattern), class_table(), ()
    k, marks = family_params(pattern)
    from . import _family_kernels as K

    if k in (1, 3):  # the compiled kernel itself (``split_family`` picks it by K and checks ``out_buf``)
        return (K.split_family_k3 if k == 3 else K.split_family_k1), family_table(marks), ()
    return K.split_family, family_table(marks), (K.family_machine(k), k)


def split_kernel(pattern: str):
    """The compiled dispatcher that splits ``pattern`` (``has_compiled``): the hand-written kernel, or the
    general VM's. For checking whether it is compiled yet (``_jit.python_first``)."""
    if has_kernel(pattern):
        return kernel_splitter(pattern)[0]
    from ._regex_vm import split

    return split


# The arrays of "no DFA" (same dtypes as a real one, so the kernel compiles once): never read.
_NO_DFA = (np.zeros(1, np.uint16), np.zeros((2, 1), np.int32), np.zeros((2, 1), np.uint8), 0, 0)


def regex_offsets(buf: np.ndarray, prog, docs: np.ndarray, *, use_dfa: bool = True, pattern: str = "") -> np.ndarray:
    """Chunk boundaries of the documents of ``buf`` (read-only uint8) under a compiled pattern ``prog``
    (``regex_compile.compile_pattern``): its DFA at each chunk start and the VM where no match starts
    there, or (``use_dfa=False``, or a pattern with no DFA) the VM alone. A ConfigError naming ``pattern`` where
    it runs out of the time budget (``patterns.regex_budget``, as steps)."""
    from ._regex_vm import split
    from .patterns import regex_budget, timed_out

    dfa = prog.dfa if use_dfa else None
    cls, trans, accept, lastnl, end = _NO_DFA if dfa is None else (dfa.cls, dfa.trans, dfa.accept, dfa.lastnl,
                                                                    dfa.end)
    # the time budget of the `regex` path (TOKENMILL_REGEX_TIMEOUT), counted in steps of ~10 ns (a DFA step or a
    # VM thread step takes ~5-8 ns here): the same for any machine or thread count, so a text is split or
    # refused alike everywhere
    seconds = regex_budget(len(buf))
    budget = _NO_LIMIT if seconds is None else min(int(seconds * _STEPS_A_SECOND), _NO_LIMIT)
    offs = split(buf, dfa is not None, cls, trans, accept, lastnl, end, prog.class_table(), prog.op, prog.a,
                 prog.b, docs, np.int64(budget))
    if offs.size == 0:  # (the budget ran out)
        raise timed_out(pattern, seconds, len(buf), "bytes")
    return offs


_STEPS_A_SECOND = 100_000_000
_NO_LIMIT = 2**62


def _docs(doc_offsets, n: int) -> np.ndarray:
    from .presets import check_doc_offsets, single_document

    return single_document(n) if doc_offsets is None else check_doc_offsets(doc_offsets, n)


def split_text_compiled(text: str, pattern: str, *, allow_general: bool | None = None) -> list[str] | None:
    """The chunks of ``text`` (``patterns.split_with_gaps``; ``regex.findall`` when matches cover the
    text) through the compiled matcher, or None."""
    data = text.encode("utf-8")
    offs = compiled_offsets(data, pattern, allow_general=allow_general)
    if offs is None:
        return None
    from . import _pretok_kernels as pk
    from .presets import as_readonly_bytes

    if len(data) != len(text):
        offs = pk.char_offsets(as_readonly_bytes(data), offs)
    b = offs.tolist()
    return [text[x:y] for x, y in zip(b, b[1:])]


@functools.cache
def family_table(marks: bool) -> np.ndarray:
    """The class table; with ``marks`` its L bit also holds ``\\p{M}`` (Qwen 3.5's letter class).

    Derived from the ``regex`` module like the base table, and cached on disk next to it."""
    from .presets import cache_dir, class_table

    base = class_table()
    if not marks:
        return base
    import regex

    from ._pretok_kernels import L_

    path = cache_dir() / f"pretok-marks-v4-regex{regex.__version__}-ucd{unicodedata.unidata_version}.npz"
    table = (read_cache_arrays(path, ["table"]) or {}).get("table")  # (its sha256 checked: None if off)
    if table is not None and table.dtype == np.uint16 and table.shape == base.shape and table[0x301] & L_ and \
            table[0x61] == base[0x61]:
        table.setflags(write=False)
        return table
    every = "".join(map(chr, range(base.shape[0])))
    table = base.copy()
    for m in regex.finditer(r"\p{M}+", every):
        table[m.start() : m.end()] |= L_
    as_unicode16_table(table)  # (Unicode 16's marks: see ``unicode``)
    write_cache_arrays(path, {"table": table}, stale=older_caches(path.parent, "pretok-marks-v", 4))
    table.setflags(write=False)
    return table
