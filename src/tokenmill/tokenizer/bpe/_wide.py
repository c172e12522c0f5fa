"""Wide loads for the tokenizer's numba kernels: 8 bytes of a uint8 array in one unaligned load.

numba has no unaligned view of a byte buffer as 64-bit words; ``load_u64`` is one LLVM ``load i64,
align 1`` (a single ``mov`` on x86-64, ``ldr`` on arm64), little-endian as ``int.from_bytes(...,
"little")`` (the byte order of every machine numba supports). It checks no bounds, not even under
``NUMBA_BOUNDSCHECK=1``: every caller tests ``i + 8 <= arr.size`` first (tested: tests/tokenizer).
"""

from __future__ import annotations

import sys

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

if sys.byteorder != "little":  # pragma: no cover
    raise ImportError("tokenmill's wide loads assume a little-endian machine")


@intrinsic
def load_u64(typingctx, arr, idx):
    """``arr[idx:idx + 8]`` of a 1-D uint8 array as a little-endian uint64 (the caller checks bounds)."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.uint8 and arr.ndim == 1 and arr.layout == "C"
            and isinstance(idx, types.Integer)):  # contiguous only: byte i is at data + i
        return None
    sig = types.uint64(arr, idx)

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        i = context.cast(builder, args[1], sig.args[1], types.intp)
        ptr = builder.gep(ary.data, [i])
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
