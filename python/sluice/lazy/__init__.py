"""sluice.lazy — lazily evaluated array programs (reference 001), NumPy-like, from Python.

A ``LazyArray`` is a node of a DAG of array operations (the C++ layer ``sluice/lazy.hpp``,
docs/lazy.md): nothing runs until the arrays are compiled into a ``Program`` (fused generated
kernels on a graph whose independent branches run concurrently, instantiated once per set of input
shapes and rebound to new buffers at every run) or evaluated once with ``eval``.

    import sluice, sluice.lazy as lz, numpy as np

    @lz.compile                          # traced once per input shapes and dtypes, then cached
    def f(x, y):
        return lz.where(x > y, 2 * x, lz.sin(y)) + 1       # Figure 1 of reference 001

    out = f(np.random.rand(1000), np.random.rand(1000))    # a new sluice DeviceBuffer
    f(xs, ys, out=out)                   # rebinds new inputs, writes the caller's buffer
    print(f.program(xs, ys).stats(), f.cache_info())

    x = lz.placeholder("x", (4, 3))
    p = lz.compile([lz.sum(lz.exp(x), axis=1)])            # a Program: p(x=a) or p.run(...)
    lz.eval(lz.asarray(np.arange(6.0)).reshape(2, 3).T)   # one-off evaluation

Element types: bool, int32, int64, float32, float64. Types follow NumPy's promotion (Python
numbers are weak: ``x * 2`` keeps x's type; float32 with float64, or an integer with float32,
gives float64; ``/`` of integers and the math functions of integers give float64). Shapes
broadcast as in NumPy; a mismatch raises ``sluice.Error`` naming the operation and the shapes.
Programs run on a context (default: the current one), as one tracked operation: they start after
the work that writes their inputs on any context, and later work on their outputs waits for them.
"""

import builtins as _builtins
import collections as _collections
import functools as _functools
import inspect as _inspect
import numbers as _numbers

from .. import _sluice

_lz = _sluice._lazy

available = True

_DTYPES = ("bool", "int32", "int64", "float32", "float64")
_FLOATS = ("float32", "float64")
_INTS = ("int32", "int64")


def _dtype_name(dtype):
    """'float64' etc. from a name, a NumPy dtype or scalar type, or float/int/bool."""
    if dtype is None:
        return "float64"
    if dtype is float:
        return "float64"
    if dtype is int:
        return "int64"
    if dtype is bool:
        return "bool"
    name = getattr(dtype, "name", None)
    if not isinstance(name, str):
        name = getattr(dtype, "__name__", None) if not isinstance(dtype, str) else dtype
    if name == "bool_":
        name = "bool"
    if name not in _DTYPES:
        raise TypeError(f"sluice.lazy: unsupported dtype {dtype!r} (one of {', '.join(_DTYPES)})")
    return name


def _promote(a, b):
    """NumPy's promotion of two array dtypes (of the five sluice.lazy holds)."""
    if a == b:
        return a
    if a == "bool":
        return b
    if b == "bool":
        return a
    if a in _INTS and b in _INTS:
        return "int64"
    if a == "float64" or b == "float64":
        return "float64"
    # float32 with an integer: NumPy gives float64 (int32 and int64 do not fit float32).
    return "float64"


def _is_number(x):
    return isinstance(x, (bool, _numbers.Number)) and not isinstance(x, complex)


class LazyArray:
    """A lazily evaluated array: a node of a program's DAG (immutable; cheap to copy)."""

    __slots__ = ("_node", "_dev")
    __array_priority__ = 1000  # NumPy defers `ndarray <op> LazyArray` to us

    def __init__(self, node, device=None):
        self._node = node
        self._dev = device  # (backend, index) of the constants it reads, None without any

    # ---- what it is ---------------------------------------------------------------------------
    @property
    def shape(self):
        """The shape (as declared for placeholders)."""
        return self._node.shape

    @property
    def dtype(self):
        """'bool', 'int32', 'int64', 'float32' or 'float64'."""
        return self._node.dtype

    @property
    def ndim(self):
        return len(self._node.shape)

    @property
    def size(self):
        n = 1
        for s in self._node.shape:
            n *= s
        return n

    @property
    def T(self):
        return transpose(self)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a rank-0 lazy array")
        return self.shape[0]

    def __repr__(self):
        return f"LazyArray(shape={self.shape}, dtype={self.dtype})"

    def __bool__(self):
        raise TypeError("a lazy array has no truth value until it is evaluated; use "
                        "sluice.lazy.where(...) for element-wise choices")

    def __iter__(self):
        raise TypeError("a lazy array cannot be iterated; index it (a[i]) or evaluate it")

    __hash__ = None

    # ---- arithmetic ----------------------------------------------------------------------------
    def __add__(self, o):
        return _arith("add", self, o)

    def __radd__(self, o):
        return _arith("add", o, self)

    def __sub__(self, o):
        return _arith("sub", self, o)

    def __rsub__(self, o):
        return _arith("sub", o, self)

    def __mul__(self, o):
        return _arith("mul", self, o)

    def __rmul__(self, o):
        return _arith("mul", o, self)

    def __truediv__(self, o):
        return divide(self, o)

    def __rtruediv__(self, o):
        return divide(o, self)

    def __floordiv__(self, o):
        return floor_divide(self, o)

    def __rfloordiv__(self, o):
        return floor_divide(o, self)

    def __mod__(self, o):
        return remainder(self, o)

    def __rmod__(self, o):
        return remainder(o, self)

    def __pow__(self, o):
        return power(self, o)

    def __rpow__(self, o):
        return power(o, self)

    def __matmul__(self, o):
        return matmul(self, o)

    def __rmatmul__(self, o):
        return matmul(o, self)

    def __neg__(self):
        return negative(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return absolute(self)

    def __invert__(self):
        return invert(self)

    def __and__(self, o):
        return _bits("and", self, o)

    def __rand__(self, o):
        return _bits("and", o, self)

    def __or__(self, o):
        return _bits("or", self, o)

    def __ror__(self, o):
        return _bits("or", o, self)

    def __xor__(self, o):
        return _bits("xor", self, o)

    def __rxor__(self, o):
        return _bits("xor", o, self)

    def __eq__(self, o):  # noqa: D105 (element-wise, as NumPy)
        return _compare("eq", self, o)

    def __ne__(self, o):
        return _compare("ne", self, o)

    def __lt__(self, o):
        return _compare("lt", self, o)

    def __le__(self, o):
        return _compare("le", self, o)

    def __gt__(self, o):
        return _compare("gt", self, o)

    def __ge__(self, o):
        return _compare("ge", self, o)

    # ---- methods ------------------------------------------------------------------------------
    def __getitem__(self, key):
        return _index(self, key)

    def astype(self, dtype):
        """The elements converted to ``dtype`` (C++ conversion rules; bool is 0 or 1)."""
        return astype(self, dtype)

    def reshape(self, *shape):
        return reshape(self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int)
                       else shape)

    def transpose(self, *axes):
        return transpose(self, axes[0] if len(axes) == 1 and not isinstance(axes[0], int)
                         else (axes or None))

    def sum(self, axis=None, keepdims=False):
        return sum(self, axis, keepdims)

    def prod(self, axis=None, keepdims=False):
        return prod(self, axis, keepdims)

    def min(self, axis=None, keepdims=False):
        return min(self, axis, keepdims)

    def max(self, axis=None, keepdims=False):
        return max(self, axis, keepdims)

    def mean(self, axis=None, keepdims=False):
        return mean(self, axis, keepdims)

    def eval(self, ctx=None, **inputs):
        """Evaluates this array once (see ``sluice.lazy.eval``): a new sluice DeviceBuffer."""
        return eval(self, ctx=ctx, **inputs)

    def numpy(self, ctx=None, **inputs):
        """Evaluates this array and returns it as a NumPy array (waits for the result)."""
        return eval(self, ctx=ctx, **inputs).numpy()


# ---- building blocks -------------------------------------------------------------------------


def _wrap(node):
    return LazyArray(node)


def _unwrap(v, devs):
    if isinstance(v, LazyArray):
        if v._dev is not None:
            devs.add(v._dev)
        return v._node
    if isinstance(v, (list, tuple)):
        return type(v)(_unwrap(e, devs) for e in v)
    return v


def _op(fn, *args):
    """fn(*args) over the nodes of lazy arrays: a new lazy array that remembers the device of the
    constants it reads (a program reads them where they are, so it must run there)."""
    devs = set()
    node = fn(*(_unwrap(a, devs) for a in args))
    if len(devs) > 1:
        raise _sluice.Error(f"sluice.lazy: constants on different devices ({_devices(devs)}) "
                            "in one array; make them on one (asarray(x, ctx=...))")
    return LazyArray(node, next(iter(devs)) if devs else None)


def _devices(devs):
    return ", ".join(f"{b}:{i}" for b, i in sorted(devs))


def _check_device(arrays, ctx):
    """Refuses to run arrays whose constants lie on another device than ``ctx``'s."""
    here = _device_key(ctx.device)
    devs = {a._dev for a in arrays if a._dev is not None}
    if devs and devs != {here}:
        raise _sluice.Error(f"sluice.lazy: the program reads constants on {_devices(devs)} but "
                            f"runs on {here[0]}:{here[1]}; make the constants there "
                            "(sluice.lazy.asarray(x, ctx=ctx)) or run it there")


def _operands(a, b):
    """Two operands as lazy arrays of one dtype; Python numbers are weak (NumPy's rules)."""
    if isinstance(a, LazyArray) and isinstance(b, LazyArray):
        t = _promote(a.dtype, b.dtype)
        return astype(a, t), astype(b, t)
    if isinstance(a, LazyArray) or isinstance(b, LazyArray):
        arr, other, first = (a, b, False) if isinstance(a, LazyArray) else (b, a, True)
        if _is_number(other):
            t = arr.dtype
            if isinstance(other, bool):
                pass
            elif isinstance(other, _numbers.Integral):
                t = "int64" if t == "bool" else t
            else:
                t = t if t in _FLOATS else "float64"
            arr = astype(arr, t)
            lit = _op(_lz.fill, other, t, ())
            return (lit, arr) if first else (arr, lit)
        other = asarray(other)
        return _operands(other, arr) if first else _operands(arr, other)
    return _operands(asarray(a), b)


def _arith(op, a, b):
    a, b = _operands(a, b)
    if a.dtype == "bool":
        raise TypeError(f"sluice.lazy: {op} of bool arrays; convert them first (astype)")
    return _op(_lz.binary, op, a, b)


def _compare(op, a, b):
    a, b = _operands(a, b)
    return _op(_lz.binary, op, a, b)


def _bits(op, a, b):
    a, b = _operands(a, b)
    if a.dtype == "bool":
        name = {"and": "logical_and", "or": "logical_or", "xor": "ne"}[op]
    elif a.dtype in _INTS:
        name = "bit_" + op
    else:
        raise TypeError(f"sluice.lazy: bitwise {op} of {a.dtype} arrays (bool or integers only)")
    return _op(_lz.binary, name, a, b)


def _float_of(a):
    a = asarray(a)
    return a if a.dtype in _FLOATS else astype(a, "float64")


def _unary_float(op, a):
    return _op(_lz.unary, op, _float_of(a))


# ---- sources ---------------------------------------------------------------------------------


def placeholder(name, shape, dtype="float64"):
    """A named input of ``shape`` and ``dtype``; a program's run binds an array to it by name."""
    return _op(_lz.placeholder, name, shape, _dtype_name(dtype))


def asarray(x, dtype=None, ctx=None):
    """``x`` as a lazy array: a LazyArray as is, a Python number as a rank-0 constant, any other
    array (sluice, NumPy, CuPy, PyTorch, JAX, a list) as a constant holding a copy of it made on
    ``ctx`` (default: the context a compiled function runs on while it is traced, else the current
    context), except a sluice array, which is read where it is. A program reads its constants
    where they are: it runs only on their device (else sluice.Error)."""
    if isinstance(x, LazyArray):
        return x if dtype is None else astype(x, dtype)
    if _is_number(x):
        t = _dtype_name(dtype) if dtype is not None else (
            "bool" if isinstance(x, bool) else
            "int64" if isinstance(x, _numbers.Integral) else "float64")
        return _op(_lz.fill, x, t, ())
    if ctx is None:
        ctx = _trace_ctx[-1] if _trace_ctx else _sluice.current_context()
    if not isinstance(x, _sluice.Array):
        x = _sluice.array(x, dtype=dtype, ctx=ctx)
    node = LazyArray(_lz.constant(x, ctx), _device_key(x.device))
    return node if dtype is None else astype(node, dtype)


constant = asarray


def full(shape, value, dtype=None):
    """An array of ``shape`` whose every element is ``value``."""
    if dtype is None:
        dtype = "bool" if isinstance(value, bool) else (
            "int64" if isinstance(value, _numbers.Integral) else "float64")
    return _op(_lz.fill, value, _dtype_name(dtype), shape)


def zeros(shape, dtype="float64"):
    return full(shape, 0, dtype)


def ones(shape, dtype="float64"):
    return full(shape, 1, dtype)


# ---- element-wise ----------------------------------------------------------------------------


def astype(a, dtype):
    """``a``'s elements converted to ``dtype``."""
    a = asarray(a)
    t = _dtype_name(dtype)
    return a if a.dtype == t else _op(_lz.cast, a, t)


cast = astype


def add(a, b):
    return _arith("add", a, b)


def subtract(a, b):
    return _arith("sub", a, b)


def multiply(a, b):
    return _arith("mul", a, b)


def divide(a, b):
    """True division (integers give float64, as in NumPy)."""
    a, b = _operands(a, b)
    if a.dtype not in _FLOATS:
        a, b = astype(a, "float64"), astype(b, "float64")
    return _op(_lz.binary, "div", a, b)


true_divide = divide


def floor_divide(a, b):
    """Division rounded toward minus infinity (NumPy's //)."""
    a, b = _operands(a, b)
    if a.dtype in _FLOATS:
        return floor(divide(a, b))
    if a.dtype == "bool":
        raise TypeError("sluice.lazy: // of bool arrays; convert them first")
    q = _op(_lz.binary, "div", a, b)  # C++: toward zero
    inexact = (q * b) != a
    return where(inexact & ((a < 0) ^ (b < 0)), q - 1, q)


def remainder(a, b):
    """Remainder with the divisor's sign (NumPy's %; C++'s % has the dividend's)."""
    a, b = _operands(a, b)
    if a.dtype in _FLOATS:
        return a - floor(divide(a, b)) * b
    if a.dtype == "bool":
        raise TypeError("sluice.lazy: % of bool arrays; convert them first")
    r = _op(_lz.binary, "mod", a, b)
    return where((r != 0) & ((r < 0) ^ (b < 0)), r + b, r)


mod = remainder


def power(a, b):
    """``a ** b``; a small non-negative integer exponent is repeated multiplication (exact for
    integers), other integer powers go through float64."""
    if isinstance(a, LazyArray) and isinstance(b, _numbers.Integral) and 0 <= b <= 16 and \
            not isinstance(b, bool) and a.dtype != "bool":
        result, base, e = None, a, int(b)
        if e == 0:
            return full(a.shape, 1, a.dtype)
        while e:
            if e & 1:
                result = base if result is None else result * base
            e >>= 1
            if e:
                base = base * base
        return result
    a, b = _operands(a, b)
    if a.dtype in _FLOATS:
        return _op(_lz.binary, "pow", a, b)
    if a.dtype == "bool":
        raise TypeError("sluice.lazy: ** of bool arrays; convert them first")
    f = _op(_lz.binary, "pow", astype(a, "float64"), astype(b, "float64"))
    return astype(floor(f + 0.5), a.dtype)


def minimum(a, b):
    a, b = _operands(a, b)
    return _op(_lz.binary, "minimum", a, b)


def maximum(a, b):
    a, b = _operands(a, b)
    return _op(_lz.binary, "maximum", a, b)


def negative(a):
    a = asarray(a)
    if a.dtype == "bool":
        raise TypeError("sluice.lazy: negative of a bool array; use ~ or logical_not")
    return _op(_lz.unary, "neg", a)


def absolute(a):
    a = asarray(a)
    return a if a.dtype == "bool" else _op(_lz.unary, "abs", a)


abs = absolute


def invert(a):
    """Logical not of a bool array, bitwise not of an integer array (NumPy's ~)."""
    a = asarray(a)
    if a.dtype == "bool":
        return _op(_lz.unary, "logical_not", a)
    if a.dtype in _INTS:
        return _op(_lz.unary, "bit_not", a)
    raise TypeError(f"sluice.lazy: ~ of a {a.dtype} array (bool or integers only)")


def logical_not(a):
    return invert(astype(a, "bool"))


def logical_and(a, b):
    return _bits("and", astype(a, "bool"), astype(b, "bool"))


def logical_or(a, b):
    return _bits("or", astype(a, "bool"), astype(b, "bool"))


def logical_xor(a, b):
    return _bits("xor", astype(a, "bool"), astype(b, "bool"))


def equal(a, b):
    return _compare("eq", a, b)


def not_equal(a, b):
    return _compare("ne", a, b)


def less(a, b):
    return _compare("lt", a, b)


def less_equal(a, b):
    return _compare("le", a, b)


def greater(a, b):
    return _compare("gt", a, b)


def greater_equal(a, b):
    return _compare("ge", a, b)


def sqrt(a):
    return _unary_float("sqrt", a)


def exp(a):
    return _unary_float("exp", a)


def log(a):
    return _unary_float("log", a)


def sin(a):
    return _unary_float("sin", a)


def cos(a):
    return _unary_float("cos", a)


def tan(a):
    return _unary_float("tan", a)


def tanh(a):
    return _unary_float("tanh", a)


def floor(a):
    return _unary_float("floor", a)


def ceil(a):
    return _unary_float("ceil", a)


def where(condition, a, b):
    """``a`` where ``condition`` holds, else ``b``, element by element (shapes broadcast)."""
    c = asarray(condition)
    if c.dtype != "bool":
        c = c != 0
    a, b = _operands(a, b)
    return _op(_lz.where, c, a, b)


# ---- reductions ------------------------------------------------------------------------------


def _axes(axis):
    return None if axis is None else ((axis,) if isinstance(axis, int) else tuple(axis))


def _reduce(op, a, axis, keepdims):
    a = asarray(a)
    if a.dtype == "bool" and op in ("min", "max"):
        r = _op(_lz.reduce, op, astype(a, "int32"), _axes(axis), keepdims)
        return astype(r, "bool")
    if op in ("sum", "prod") and a.dtype in ("bool", "int32"):
        a = astype(a, "int64")  # NumPy sums small integers in int64
    return _op(_lz.reduce, op, a, _axes(axis), keepdims)


def sum(a, axis=None, keepdims=False):
    """Sum over ``axis`` (an int, a tuple, or None for all)."""
    return _reduce("sum", a, axis, keepdims)


def prod(a, axis=None, keepdims=False):
    return _reduce("prod", a, axis, keepdims)


def min(a, axis=None, keepdims=False):
    return _reduce("min", a, axis, keepdims)


def max(a, axis=None, keepdims=False):
    return _reduce("max", a, axis, keepdims)


amin, amax = min, max


def mean(a, axis=None, keepdims=False):
    a = _float_of(a)
    axes = range(a.ndim) if axis is None else _axes(axis)
    n = 1
    for ax in axes:
        n *= a.shape[ax]
    return sum(a, axis, keepdims) / n


# ---- einsum and products ---------------------------------------------------------------------


def einsum(spec, *operands):
    """Einstein summation, NumPy's notation ("ij,jk->ik"; without "->", the output is the
    letters that appear once, in alphabetical order). Operands are promoted to one dtype."""
    spec = spec.replace(" ", "")
    if "->" not in spec:
        letters = spec.replace(",", "")
        spec += "->" + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    ops = [asarray(o) for o in operands]
    t = ops[0].dtype if ops else "float64"
    for o in ops[1:]:
        t = _promote(t, o.dtype)
    if t == "bool":
        t = "int64"
    return _op(_lz.einsum, spec, [astype(o, t) for o in ops])


def matmul(a, b):
    """NumPy's ``a @ b`` for arrays of rank 1 to 3 (rank 3: a batch of matrices)."""
    a, b = asarray(a), asarray(b)
    specs = {(1, 1): "i,i->", (2, 1): "ij,j->i", (1, 2): "j,jk->k", (2, 2): "ij,jk->ik",
             (3, 3): "bij,bjk->bik", (3, 2): "bij,jk->bik", (2, 3): "ij,bjk->bik"}
    spec = specs.get((a.ndim, b.ndim))
    if spec is None:
        raise TypeError(f"sluice.lazy: matmul of ranks {a.ndim} and {b.ndim}; use einsum")
    return einsum(spec, a, b)


def dot(a, b):
    return matmul(a, b)


# ---- gathers, slicing, shapes ----------------------------------------------------------------


def _index_array(x):
    a = asarray(x) if not isinstance(x, LazyArray) else x
    if a.dtype not in _INTS:
        raise TypeError(f"sluice.lazy: index arrays are int32 or int64, not {a.dtype} (boolean "
                        "masks give data-dependent shapes: use where instead)")
    return a


def _index(a, key):
    items = key if isinstance(key, tuple) else (key,)
    conv = []
    for k in items:
        if k is None or k is Ellipsis or isinstance(k, slice):
            conv.append(k)
        elif isinstance(k, bool):
            raise TypeError("sluice.lazy: boolean indices are not supported")
        elif isinstance(k, _numbers.Integral):
            conv.append(int(k))
        else:
            conv.append(_index_array(k))
    return _op(_lz.index, a, tuple(conv))


def take(a, indices, axis=None):
    """Elements of ``a`` at ``indices`` along ``axis`` (of ``a`` flattened without one)."""
    a = asarray(a)
    if _is_number(indices):
        indices = asarray(int(indices))
    return _op(_lz.take, a, _index_array(indices), axis)


def take_along_axis(a, indices, axis):
    a = asarray(a)
    return _op(_lz.take_along_axis, a, _index_array(indices), axis)


def reshape(a, shape):
    """The same elements in a new shape (one extent may be -1)."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return _op(_lz.reshape, asarray(a), shape)


def transpose(a, axes=None):
    """Axes permuted (reversed without ``axes``)."""
    return _op(_lz.transpose, asarray(a), None if axes is None else tuple(axes))


def swapaxes(a, axis1, axis2):
    a = asarray(a)
    perm = list(range(a.ndim))
    perm[axis1], perm[axis2] = perm[axis2], perm[axis1]
    return transpose(a, perm)


def expand_dims(a, axis):
    a = asarray(a)
    axis = axis + a.ndim + 1 if axis < 0 else axis
    return reshape(a, a.shape[:axis] + (1,) + a.shape[axis:])


def squeeze(a, axis=None):
    a = asarray(a)
    axes = [i for i, s in enumerate(a.shape) if s == 1] if axis is None else \
        [x % a.ndim for x in _axes(axis)]
    for x in axes:
        if a.shape[x] != 1:
            raise ValueError(f"sluice.lazy: squeeze of axis {x}, of extent {a.shape[x]}")
    return reshape(a, tuple(s for i, s in enumerate(a.shape) if i not in axes))


def ravel(a):
    return reshape(a, (-1,))


def broadcast_to(a, shape):
    return _op(_lz.broadcast_to, asarray(a), tuple(shape))


def _same_dtype(arrays):
    arrays = [asarray(x) for x in arrays]
    t = arrays[0].dtype
    for x in arrays[1:]:
        t = _promote(t, x.dtype)
    return [astype(x, t) for x in arrays]


def concatenate(arrays, axis=0):
    """Arrays joined along an existing axis."""
    return _op(_lz.concatenate, _same_dtype(arrays), axis)


def stack(arrays, axis=0):
    """Arrays of one shape joined along a new axis."""
    return _op(_lz.stack, _same_dtype(arrays), axis)


def roll(a, shift, axis=None):
    """Elements shifted by ``shift`` along ``axis`` with wrap-around (of ``a`` flattened without
    an axis); a tuple of shifts takes a tuple of axes."""
    a = asarray(a)
    if isinstance(shift, tuple) or isinstance(axis, tuple):
        shifts = shift if isinstance(shift, tuple) else (shift,) * len(axis)
        for s, ax in zip(shifts, axis):
            a = _op(_lz.roll, a, int(s), ax)
        return a
    return _op(_lz.roll, a, int(shift), axis)


# ---- programs --------------------------------------------------------------------------------


# The contexts of the compiled functions being traced (innermost last): constants made while
# tracing go to the device the program runs on.
_trace_ctx = []


def _context(ctx):
    return ctx if ctx is not None else _sluice.current_context()


def _device_key(device):
    return (device.backend, device.index)


def _bind(x, ctx):
    """``x`` as a sluice array that ``ctx``'s device reads: as is when it can, else a copy."""
    if not isinstance(x, _sluice.Array):
        try:
            x = _sluice.asarray(x)
        except (TypeError, _sluice.Error):
            return _sluice.array(x, ctx=ctx)
    dev = ctx.device
    if dev.backend == "host":
        if x.memory == "device" and x.device.backend != "host":
            return _sluice.array(x, ctx=ctx)
    elif x.memory == "host" or _device_key(x.device) != _device_key(dev):
        return _sluice.array(x, ctx=ctx)
    return x


def _new_outputs(shapes_dtypes, ctx):
    return [_sluice.empty(s, d, ctx=ctx) for s, d in shapes_dtypes]


class Program:
    """Compiled lazy arrays: fused generated kernels on a graph, instantiated once per set of
    input shapes, rebound to new buffers at every run (a C++ ``sluice::lazy::Program``)."""

    def __init__(self, impl, outputs):
        self._impl = impl
        self._outputs = [(o.shape, o.dtype) for o in outputs]
        self._arrays = list(outputs)

    def run(self, inputs, outputs, ctx=None):
        """Runs on ``ctx`` (default: the current context) as one tracked operation: binds
        ``inputs`` (placeholder name -> array) and writes ``outputs`` (the caller's arrays, one
        per compiled output, in order). Arrays another device cannot read are copied first."""
        ctx = _context(ctx)
        _check_device(self._arrays, ctx)
        ins = {k: _bind(v, ctx) for k, v in inputs.items()}
        self._impl.run(ctx, ins, list(outputs))

    def __call__(self, ctx=None, out=None, **inputs):
        """Runs with ``inputs`` by name; returns new sluice DeviceBuffers (a tuple when there
        are several outputs) unless ``out`` gives them."""
        ctx = _context(ctx)
        _check_device(self._arrays, ctx)
        ins = {k: _bind(v, ctx) for k, v in inputs.items()}
        if out is None:
            shapes = self._impl.output_shapes({k: tuple(v.shape) for k, v in ins.items()})
            outs = _new_outputs(zip(shapes, (d for _, d in self._outputs)), ctx)
        else:
            outs = list(out) if isinstance(out, (list, tuple)) else [out]
        self._impl.run(ctx, ins, outs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def output_shapes(self, **shapes):
        """The outputs' shapes for these input shapes (by name; others as declared)."""
        return self._impl.output_shapes(shapes)

    def placeholders(self):
        """(name, declared shape, dtype) of each placeholder, in order of first use."""
        return self._impl.placeholders()

    def dot(self):
        """DOT of the DAG, fused groups as clusters (the most recent instance)."""
        return self._impl.dot()

    def stats(self):
        """Kernels, graph nodes, concurrency width, temporaries, build times and cache counters
        (a dict; see sluice::lazy::Stats)."""
        return self._impl.stats()

    def source(self):
        """The generated source of the most recent instance."""
        return self._impl.source()

    def kernels(self):
        """The kernels of the most recent instance: name, kind, source, elements, ops."""
        return self._impl.kernels()


def _compile_arrays(outputs, fusion, schedule, debug, cache_capacity, name, device):
    outs = [asarray(o) for o in outputs]
    impl = _lz.compile([o._node for o in outs], fusion, schedule, debug, cache_capacity, name,
                       device)
    return Program(impl, outs)


class CompiledFunction:
    """A Python function over lazy arrays, traced once per input shapes and dtypes (and values of
    its other arguments) into a Program that is cached and run on every call."""

    def __init__(self, fn, fusion, schedule, debug, cache_capacity):
        self._fn = fn
        self._sig = _inspect.signature(fn)
        # Calls with every parameter given by position skip inspect's binding (host time).
        params = list(self._sig.parameters.values())
        plain = all(p.kind == p.POSITIONAL_OR_KEYWORD for p in params)
        self._names = tuple(p.name for p in params) if plain else None
        self._options = (fusion, schedule, debug, cache_capacity)
        self._cache = _collections.OrderedDict()
        self._capacity = cache_capacity
        self._traces = 0
        self._hits = 0
        self._evictions = 0
        _functools.update_wrapper(self, fn)

    def _split(self, args, kwargs, ctx):
        """Binds the arguments: arrays (as sluice arrays ``ctx`` reads) and static values."""
        if not kwargs and self._names is not None and len(args) == len(self._names):
            items = zip(self._names, args)
        else:
            bound = self._sig.bind(*args, **kwargs)
            bound.apply_defaults()
            items = bound.arguments.items()
        arrays, static = {}, []
        for name, v in items:
            if isinstance(v, _sluice.Array):
                arrays[name] = _bind(v, ctx)
            elif v is None or _is_number(v) or isinstance(v, (str, tuple, frozenset)):
                static.append((name, v))
            else:
                arrays[name] = _bind(v, ctx)
        return arrays, tuple(static)

    def _entry(self, arrays, static, ctx):
        dev = ctx.device
        key = (tuple((k, a.shape, a.dtype) for k, a in arrays.items()), static, dev.backend,
               dev.index)
        entry = self._cache.get(key)
        if entry is not None:
            self._hits += 1
            self._cache.move_to_end(key)
            return entry
        placeholders = {k: placeholder(k, tuple(a.shape), a.dtype) for k, a in arrays.items()}
        _trace_ctx.append(ctx)
        try:
            result = self._fn(**placeholders, **dict(static))
        finally:
            _trace_ctx.pop()
        single = isinstance(result, LazyArray) or _is_number(result)
        outs = [result] if single else list(result)
        fusion, schedule, debug, capacity = self._options
        name = getattr(self._fn, "__name__", "lazy")
        program = _compile_arrays(outs, fusion, schedule, debug, capacity, name, ctx.device)
        _check_device(program._arrays, ctx)
        entry = (program, single)
        self._cache[key] = entry
        self._traces += 1
        if len(self._cache) > self._capacity:
            self._cache.popitem(last=False)
            self._evictions += 1
        return entry

    def __call__(self, *args, out=None, ctx=None, **kwargs):
        """Runs the function's program on ``ctx`` (default: the current context). Returns new
        sluice DeviceBuffers (a tuple for several outputs), or writes ``out`` and returns it."""
        ctx = _context(ctx)
        arrays, static = self._split(args, kwargs, ctx)
        program, single = self._entry(arrays, static, ctx)
        if out is None:
            outs = _new_outputs(program._outputs, ctx)
        else:
            outs = [out] if single and not isinstance(out, (list, tuple)) else list(out)
        program._impl.run(ctx, arrays, outs)
        if out is not None:
            return out
        return outs[0] if single else tuple(outs)

    def program(self, *args, ctx=None, **kwargs):
        """The Program for these arguments (traced and compiled if it is not cached yet)."""
        ctx = _context(ctx)
        arrays, static = self._split(args, kwargs, ctx)
        return self._entry(arrays, static, ctx)[0]

    def cache_info(self):
        """{'traces': programs traced and compiled, 'hits': calls that found theirs cached,
        'entries': programs cached (at most cache_capacity, least recently used dropped),
        'evictions'}."""
        return {"traces": self._traces, "hits": self._hits, "entries": len(self._cache),
                "evictions": self._evictions}


def compile(fn=None, *, fusion="full", schedule="dataflow", debug=False, cache_capacity=8):
    """Compiles lazy arrays, or a function over them.

    - ``compile([a, b, ...])`` (lazy arrays): a ``Program``.
    - ``@compile`` or ``@compile(fusion=..., schedule=..., debug=...)`` on a function: a
      ``CompiledFunction``. Its array arguments become placeholders named after the parameters;
      other arguments (numbers, strings, tuples, None) are static. The function is traced once per
      input shapes and dtypes and static values; each call runs the cached program (the C++
      layer rebinds the new buffers in place), returning new sluice DeviceBuffers, or writing
      ``out=``. At most ``cache_capacity`` traced programs are kept (least recently used dropped),
    and each program keeps as many instances.

    fusion: 'none' (one kernel per operation), 'elementwise' or 'full'; schedule: 'dataflow'
    (independent branches concurrent) or 'serial'; debug: check gathered indices (an index out of
    range fails the run)."""
    if isinstance(fn, LazyArray):
        fn = [fn]
    if isinstance(fn, (list, tuple)):
        return _compile_arrays(fn, fusion, schedule, debug, cache_capacity, "lazy", None)
    if fn is None:
        return lambda f: compile(f, fusion=fusion, schedule=schedule, debug=debug,
                                 cache_capacity=cache_capacity)
    return CompiledFunction(fn, fusion, schedule, debug, cache_capacity)


def eval(*arrays, ctx=None, fusion="full", schedule="dataflow", debug=False, **inputs):
    """Evaluates lazy arrays once on ``ctx`` (default: the current context) into new sluice
    DeviceBuffers (a tuple for several). Placeholders are bound by name from ``inputs``, with
    their declared shapes. Programs are cached by the structure of the DAG, so evaluating the
    same expression again does not compile again."""
    ctx = _context(ctx)
    ins = {k: _bind(v, ctx) for k, v in inputs.items()}
    outs = []
    arrays = [asarray(a) for a in arrays]
    _check_device(arrays, ctx)
    for a in arrays:
        out = _sluice.empty(a.shape, a.dtype, ctx=ctx)
        _lz.eval_into(ctx, a._node, ins, out, fusion, schedule, debug)
        outs.append(out)
    return outs[0] if len(outs) == 1 else tuple(outs)


def global_stats():
    """Process-wide counters: programs compiled, modules built, module memory and disk cache
    hits, eval cache hits."""
    return _lz.global_stats()


del _builtins
