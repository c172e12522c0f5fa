"""LLVM intrinsics numba does not expose, for the kernels (importing this module imports numba).

``prefetch(array, index)``: ask the CPU to start loading the cache line of ``array[index]`` now
(``llvm.prefetch``, read, high locality). It is a hint: it never faults, returns nothing and reads
no value, so an index past the end is harmless; kernels still pass only indices they have checked.
``array`` is a 1-D array or a ``tokenizer._wide.raw`` pointer. Two users: the layout pass of packed
batches reads each segment's ids from a random place of a memory-mapped store, and prefetching the
next segments while writing the current one hides the memory latency (bench/packing.py: 1.3-1.5x on
64 x 2048 batches); the BPE encoder's loop prefetches the table rows of the chunk 24 ahead.
``emit_prefetch`` is its code generation, for other intrinsics (``tokenizer._cpython`` prefetches an
object before writing it).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def emit_prefetch(builder, ptr, write: bool) -> None:
    """Emit ``llvm.prefetch`` of the i8 pointer ``ptr`` (high locality, data cache), for a read or a write."""
    i32 = ir.IntType(32)
    fn = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer(), i32, i32, i32]), "llvm.prefetch.p0i8")
    builder.call(fn, [ptr, ir.Constant(i32, int(write)), ir.Constant(i32, 3), ir.Constant(i32, 1)])


@intrinsic
def prefetch(typingctx, array, index):
    if not ((isinstance(array, types.Array) and array.ndim == 1) or isinstance(array, types.CPointer)) \
            or not isinstance(index, types.Integer):
        return None
    sig = types.void(array, index)

    def codegen(context, builder, signature, args):
        typ = signature.args[0]
        data = args[0] if isinstance(typ, types.CPointer) else context.make_array(typ)(context, builder, args[0]).data
        i = context.cast(builder, args[1], signature.args[1], types.intp)
        emit_prefetch(builder, builder.bitcast(builder.gep(data, [i]), ir.IntType(8).as_pointer()), write=False)
        return context.get_dummy_value()

    return sig, codegen
