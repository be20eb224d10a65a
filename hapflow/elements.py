"""Elements of a run's arrays through a pointer: how generated code indexes ``f``, ``m``, ``si``.

A generated function starts with ``f = elements(f)`` for each run array it
only ever indexes (:func:`hapflow.codegen.element_prologue`); from there
``f[76]`` is a load through a pointer and ``f[12:20]`` a view of the 8
elements from ``f + 12``, made in place as numba's ``carray`` makes one.
Interpreted, ``elements`` returns the array itself, so the same source runs
as plain Python.

Why: numba lowers an array element ``f[76]`` in Python, building the
array's struct, normalising the index and computing the address, several
milliseconds per access, and a kernel has hundreds; a pointer element is
one address computation and a load.  The machine code does the same work
either way (the generated indices are never negative: :mod:`hapflow.inline`
wraps a kernel's run-time index that could be).  Measured on three graphs
with a prototype of the change, numba's compile of the fused ``run`` alone
(its helpers compiled, three alternating compiles each): ``piano_action_a`` 2.29, 2.15, 2.53 ->
1.79, 1.92, 1.85 s; ``cart_pendulum`` 2.05, 2.04, 2.03 -> 1.56, 1.80,
1.74 s; ``colton2005_sweep`` 2.77, 2.16, 2.44 -> 1.72, 1.48, 1.47 s (views
as pointer slices too), with bit-identical arrays and logs after 4000 and
40 000 ticks.  The 300-block graph of distinct blocks (``bench/compile.py``'s
cold child, 67 units, one run each at load 1): 126.7 -> 97.1 s CPU,
peak RSS 715 -> 622 MB, and 26.3 -> 20.9 us per tick (a unit's views were
slices, normalised every tick).

Only numeric arrays: numba keeps a boolean as a byte in an array and as a
bit in a value, and its pointer loads do not convert (``sb`` stays an array).
"""
from __future__ import annotations

import operator

from numba import types
from numba.core import cgutils, errors
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic, lower_builtin, type_callable


@intrinsic
def elements(typingctx, array):
    """A pointer to the first element of ``array`` (1-D, C-contiguous, float or integer).

    ``elements(a)[i]`` reads and writes ``a[i]`` for ``0 <= i < a.size`` (no
    bounds check, no wrap-around); ``elements(a)[lo:hi]`` is the view
    ``a[lo:hi]`` for ``0 <= lo <= hi <= a.size``, ``elements(a)[lo:hi:step]``
    the view ``a[lo:hi:step]`` for ``step > 0``.  The array must outlive the
    pointer: generated code takes it from its own argument.
    """
    if not (isinstance(array, types.Array) and array.ndim == 1 and array.layout == "C"
            and isinstance(array.dtype, (types.Float, types.Integer))):
        raise errors.TypingError(f"elements() takes a 1-D C-contiguous float or integer "
                                 f"array, not {array}")

    def codegen(context, builder, signature, args):
        return context.make_array(signature.args[0])(context, builder, args[0]).data
    return types.CPointer(array.dtype)(array), codegen


@type_callable(operator.getitem)
def _type_view(context):
    def typer(pointer, span):
        if isinstance(pointer, types.CPointer) and isinstance(span, types.SliceType):
            return types.Array(pointer.dtype, 1, "C" if span.members == 2 else "A")
        return None
    return typer


@lower_builtin(operator.getitem, types.CPointer, types.SliceType)
def _view(context, builder, signature, args):
    """``pointer[lo:hi]``: the array of the ``hi - lo`` elements from ``pointer + lo``;
    ``pointer[lo:hi:step]`` (``step > 0``): every ``step``-th of them, as a strided array.

    Built in place as numba's ``carray`` builds one (an overload calling ``carray``
    would return a new array, which code compiled without reference counting may not),
    without a reference to count: the batched kernel makes a lane's strided views in
    every tick, and the atomic counts of array views kept its lane loop scalar."""
    pointer, span = args
    array_type = signature.return_type
    span = context.make_helper(builder, signature.args[1], span)
    array = context.make_array(array_type)(context, builder)
    itemsize = context.get_constant(
        types.intp, context.get_abi_sizeof(context.get_data_type(array_type.dtype)))
    length = builder.sub(span.stop, span.start)
    stride = itemsize
    if signature.args[1].members == 3:
        one = context.get_constant(types.intp, 1)
        length = builder.sdiv(builder.add(length, builder.sub(span.step, one)), span.step)
        stride = builder.mul(span.step, itemsize)
    context.populate_array(array, data=builder.gep(pointer, [span.start]),
                           shape=cgutils.pack_array(builder, [length]),
                           strides=cgutils.pack_array(builder, [stride]),
                           itemsize=itemsize, meminfo=None)
    return impl_ret_borrowed(context, builder, array_type, array._getvalue())
