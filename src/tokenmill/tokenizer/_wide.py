"""Word-at-a-time helpers for the tokenizer's numba kernels (the encoders' and the splitters'): 8 bytes
of a uint8 array in one unaligned load or store, per-byte tests on such a word (``ascii_letters``,
``letters_from``), trailing- and leading-zero counts, ``ix`` (an index numba
does not wrap) and ``raw`` (an array's data as a pointer).

numba has no unaligned view of a byte buffer as 64-bit words; ``load_u64`` is one LLVM ``load i64,
align 1`` (a single ``mov`` on x86-64, ``ldr`` on arm64), little-endian as ``int.from_bytes(...,
"little")`` (the byte order of every machine numba supports). It checks no bounds, not even under
``NUMBA_BOUNDSCHECK=1``: every caller tests ``i + 8 <= arr.size`` first (tested: tests/tokenizer).
"""

from __future__ import annotations

import sys

import numpy as np
from llvmlite import ir
from numba import config, types
from numba.core import cgutils
from numba.extending import intrinsic

from .._jit import njit

if sys.byteorder != "little":  # pragma: no cover
    raise ImportError("tokenmill's wide loads assume a little-endian machine")


def _is_vector(arr, dtype=None) -> bool:
    """A 1-D C-contiguous array (of ``dtype`` if given): element i at data + i."""
    return (isinstance(arr, types.Array) and arr.ndim == 1 and arr.layout == "C"
            and (dtype is None or arr.dtype == dtype))


def _is_bytes(arr) -> bool:
    """A 1-D C-contiguous uint8 array or a ``raw`` pointer to one."""
    return _is_vector(arr, types.uint8) or arr == types.CPointer(types.uint8)


def _data_pointer(context, builder, typ, value):
    """The address of element 0 of a 1-D C-contiguous array, or the pointer itself (``raw``)."""
    if isinstance(typ, types.CPointer):
        return value
    return context.make_array(typ)(context, builder, value).data


@intrinsic
def raw(typingctx, arr):
    """A 1-D C-contiguous array's data as a typed pointer (``p[i]`` loads and stores element i): no bounds
    check, no wraparound, no reference count, so a numba function taking pointers is called with no
    atomic increments of its arrays' reference counts (~60 ns a call for seven arrays), which is what makes
    the encoder's hot loop a function of its own. Under ``NUMBA_BOUNDSCHECK=1`` (``make test-boundscheck``)
    it returns the array itself, so the same code indexes arrays with their bounds checked. The caller
    validates every index it will use, as for ``load_u64``."""
    if not _is_vector(arr):
        return None
    if config.BOUNDSCHECK:
        def same(context, builder, sig, args):
            context.nrt.incref(builder, sig.args[0], args[0])
            return args[0]

        return arr(arr), same

    def codegen(context, builder, sig, args):
        return _data_pointer(context, builder, sig.args[0], args[0])

    return types.CPointer(arr.dtype)(arr), codegen


@intrinsic
def load_u64(typingctx, arr, idx):
    """``arr[idx:idx + 8]`` of a 1-D uint8 array (or a ``raw`` pointer to one) as a little-endian uint64
    (the caller checks bounds)."""
    if not (_is_bytes(arr) and isinstance(idx, types.Integer)):  # contiguous only: byte i is at data + i
        return None
    sig = types.uint64(arr, idx)

    def codegen(context, builder, sig, args):
        i = context.cast(builder, args[1], sig.args[1], types.intp)
        ptr = builder.gep(_data_pointer(context, builder, sig.args[0], args[0]), [i])
        return builder.load(builder.bitcast(ptr, ir.IntType(64).as_pointer()), align=1)

    return sig, codegen


@intrinsic
def store_u64(typingctx, arr, idx, value):
    """Write uint64 ``value`` little-endian to ``arr[idx:idx + 8]`` of a 1-D uint8 array in one
    unaligned store (the caller checks bounds)."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.uint8 and arr.ndim == 1 and arr.layout == "C"
            and arr.mutable and isinstance(idx, types.Integer) and isinstance(value, types.Integer)):
        return None
    sig = types.void(arr, idx, value)

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        i = context.cast(builder, args[1], sig.args[1], types.intp)
        v = context.cast(builder, args[2], sig.args[2], types.uint64)
        ptr = builder.gep(ary.data, [i])
        builder.store(v, builder.bitcast(ptr, ir.IntType(64).as_pointer()), align=1)
        return context.get_dummy_value()

    return sig, codegen


def _bit_count_intrinsic(name: str, llvm_name: str, doc: str):
    """An intrinsic: one LLVM bit-count call (``llvm.cttz.i64``, ``llvm.ctlz.i64``: defined at 0, 64 there;
    ``llvm.ctpop.i64``) on a uint64."""
    flagged = llvm_name != "llvm.ctpop.i64"  # cttz/ctlz take an "undefined at 0" flag, passed false

    def count(typingctx, value):
        if not isinstance(value, types.Integer):
            return None
        sig = types.uint64(value)

        def codegen(context, builder, sig, args):
            v = context.cast(builder, args[0], sig.args[0], types.uint64)
            i64 = ir.IntType(64)
            fnty = ir.FunctionType(i64, [i64, ir.IntType(1)] if flagged else [i64])
            fn = cgutils.get_or_insert_function(builder.module, fnty, llvm_name)
            return builder.call(fn, [v, ir.Constant(ir.IntType(1), 0)] if flagged else [v])

        return sig, codegen

    count.__name__ = count.__qualname__ = name
    count.__doc__ = doc
    return intrinsic(count)


ctz64 = _bit_count_intrinsic("ctz64", "llvm.cttz.i64", "The number of trailing zero bits of a uint64 (64 for 0): one ``tzcnt``/``bsf``.")
clz64 = _bit_count_intrinsic("clz64", "llvm.ctlz.i64", "The number of leading zero bits of a uint64 (64 for 0): one ``lzcnt``/``bsr``.")
popc64 = _bit_count_intrinsic("popc64", "llvm.ctpop.i64", "The number of set bits of a uint64: one ``popcnt``.")


_V64 = ir.VectorType(ir.IntType(8), 64)


def _load64(context, builder, sig, args):
    """The 64 bytes at ``args[0][args[1]:]`` as one ``<64 x i8>`` vector (one unaligned load)."""
    i = context.cast(builder, args[1], sig.args[1], types.intp)
    ptr = builder.gep(_data_pointer(context, builder, sig.args[0], args[0]), [i])
    return builder.load(builder.bitcast(ptr, _V64.as_pointer()), align=1)


def _splat64(c: int):
    return ir.Constant(_V64, [ir.Constant(ir.IntType(8), c)] * 64)


def _within64(builder, v, lo: int, hi: int):
    """lo <= byte <= hi per byte of ``v``, unsigned: (byte - lo) <= hi - lo."""
    return builder.icmp_unsigned("<=", builder.sub(v, _splat64(lo)), _splat64(hi - lo))


def _mask64(builder, bits):
    """A ``<64 x i1>`` as a uint64, bit ``j`` for byte ``j``."""
    return builder.bitcast(bits, ir.IntType(64))


@intrinsic
def byte_classes64(typingctx, arr, idx):
    """The bytes ``arr[idx:idx + 64]`` of a 1-D uint8 array (the caller checks bounds) as nine 64-bit masks,
    bit ``j`` for byte ``idx + j``: a-z, A-Z, 0-9, ' ', tab/VT/FF, LF/CR, the apostrophe, '/', and bytes >=
    0x80. One unaligned 64-byte vector load and a vector compare per class, each turned into a mask
    (LLVM: ``bitcast <64 x i1> to i64``, which x86 lowers to ``pcmpeqb``/``pcmpgtb`` + ``pmovmskb``, or a
    mask register with AVX-512): a few dozen instructions for what eight 8-byte words and carry-free byte
    arithmetic did in ~500 (the splitters' ASCII windows)."""
    if not (_is_bytes(arr) and isinstance(idx, types.Integer)):
        return None
    sig = types.UniTuple(types.uint64, 9)(arr, idx)

    def codegen(context, builder, sig, args):
        v = _load64(context, builder, sig, args)

        def eq(c):
            return builder.icmp_unsigned("==", v, _splat64(c))

        def within(lo, hi):
            return _within64(builder, v, lo, hi)

        masks = [within(0x61, 0x7A), within(0x41, 0x5A), within(0x30, 0x39), eq(0x20),
                 builder.or_(eq(0x09), within(0x0B, 0x0C)), builder.or_(eq(0x0A), eq(0x0D)), eq(0x27), eq(0x2F),
                 builder.icmp_signed("<", v, _splat64(0))]
        return context.make_tuple(builder, sig.return_type, [_mask64(builder, m) for m in masks])

    return sig, codegen


@intrinsic
def punct3_starts64(typingctx, arr, idx):
    """The first bytes of the characters U+2010-U+2027 (UTF-8 ``E2 80 90``-``E2 80 A7``: dashes, curly quotes)
    that lie whole in ``arr[idx:idx + 64]`` (a 1-D uint8 array; the caller checks bounds), as a 64-bit mask,
    bit ``j`` for byte ``idx + j``: one 64-byte vector load and three vector compares, their masks shifted
    onto each character's first byte (``byte_classes64``' way)."""
    if not (_is_bytes(arr) and isinstance(idx, types.Integer)):
        return None
    sig = types.uint64(arr, idx)

    def codegen(context, builder, sig, args):
        v = _load64(context, builder, sig, args)
        i64 = ir.IntType(64)
        lead = _mask64(builder, builder.icmp_unsigned("==", v, _splat64(0xE2)))
        second = _mask64(builder, builder.icmp_unsigned("==", v, _splat64(0x80)))
        third = _mask64(builder, _within64(builder, v, 0x90, 0xA7))
        return builder.and_(lead, builder.and_(builder.lshr(second, ir.Constant(i64, 1)),
                                               builder.lshr(third, ir.Constant(i64, 2))))

    return sig, codegen


@intrinsic
def eq_mask64(typingctx, arr, idx, value):
    """The bytes of ``arr[idx:idx + 64]`` (a 1-D uint8 array; the caller checks bounds) equal to ``value``
    (0-255) as a 64-bit mask, bit ``j`` for byte ``idx + j``: one vector load and one vector compare
    (``byte_classes64``' way)."""
    if not (_is_bytes(arr) and isinstance(idx, types.Integer) and isinstance(value, types.Integer)):
        return None
    sig = types.uint64(arr, idx, value)

    def codegen(context, builder, sig, args):
        v = _load64(context, builder, sig, args)
        b = builder.trunc(context.cast(builder, args[2], sig.args[2], types.int64), ir.IntType(8))
        splat = builder.insert_element(ir.Constant(_V64, None), b, ir.Constant(ir.IntType(32), 0))
        splat = builder.shuffle_vector(splat, ir.Constant(_V64, None),
                                       ir.Constant(ir.VectorType(ir.IntType(32), 64), [0] * 64))
        return _mask64(builder, builder.icmp_unsigned("==", v, splat))

    return sig, codegen


_HIGH = np.uint64(0x8080808080808080)
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)


@njit(cache=True, nogil=True, inline="always")
def ix(i):
    """``i`` as an unsigned index: ``arr[ix(i)]`` is ``arr[i]`` for ``i >= 0`` without numba's negative-index
    wraparound (for a signed index it emits a sign test and an add per access that LLVM keeps unless it
    proves ``i >= 0``: without them the encoder's kernel is 1.04-1.09x faster on English and code). Bounds checks
    (``NUMBA_BOUNDSCHECK=1``: ``make test-boundscheck``, run in CI) still apply, and catch a negative ``i`` as a huge one."""
    return np.uint64(i)


@njit(cache=True, nogil=True, inline="always")
def ascii_letters(w, which):
    """Bit 7 of each byte of the uint64 ``w`` set where that byte is an ASCII letter of the kinds in
    ``which`` (1: a-z, 2: A-Z, 3: both) or, with 4 in ``which``, a space, every other bit clear. Two additions per kind on the low 7
    bits of each byte, which never carry into the next byte; bytes >= 0x80 are masked out after. The
    number of such letters at the start of the word: ``ctz64(~ascii_letters(w, k) & _HIGH) >> 3``."""
    a = w & _LOW7
    m = np.uint64(0)
    if which & 1:  # 0x61 <= byte <= 0x7A
        m |= (a + np.uint64(0x1F1F1F1F1F1F1F1F)) & ~(a + np.uint64(0x0505050505050505))
    if which & 2:  # 0x41 <= byte <= 0x5A
        m |= (a + np.uint64(0x3F3F3F3F3F3F3F3F)) & ~(a + np.uint64(0x2525252525252525))
    if which & 4:  # byte == 0x20 (the space): bit 7 of (a ^ 0x20) + 0x7F is clear only where a == 0x20
        m |= ~((a ^ np.uint64(0x2020202020202020)) + _LOW7)
    return m & ~w & _HIGH


@njit(cache=True, nogil=True, inline="always")
def letters_from(data, i, e, which):
    """The end of the run of ASCII letters of the kinds in ``which`` (``ascii_letters``) that starts at
    ``data[i]``, looked at 8 bytes at a time while 8 are left before ``e`` (a shorter tail is left to the
    caller's loop, so the run found may stop short of the real one; never past it)."""
    j = i
    while j + 8 <= e:
        other = ~ascii_letters(load_u64(data, j), which) & _HIGH
        if other != 0:
            return j + np.int64(ctz64(other) >> np.uint64(3))
        j += 8
    return j
