"""LLVM intrinsics numba does not expose, for the kernels (importing this module imports numba).

``prefetch(array, index)``: ask the CPU to start loading the cache line of ``array[index]`` now
(``llvm.prefetch``, read, high locality). It is a hint: it never faults, returns nothing and reads
no value, so an index past the end is harmless; kernels still pass only indices they have checked.
The layout pass of packed batches reads each segment's ids from a random place of a memory-mapped
store; prefetching the next segments while writing the current one hides the memory latency
(bench/packing.py: 1.3-1.5x on 64 x 2048 batches).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def prefetch(typingctx, array, index):
    if not isinstance(array, types.Array) or not isinstance(index, types.Integer):
        return None
    sig = types.void(array, index)

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        address = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [address.type, i32, i32, i32]),
                                            "llvm.prefetch.p0")
        # rw = 0 (read), locality = 3 (keep in all cache levels), cache type = 1 (data)
        builder.call(fn, [address, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen
