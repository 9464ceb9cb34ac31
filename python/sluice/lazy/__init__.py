"""sluice.lazy — lazily evaluated array programs (reference 001), not built yet.

The C++ lazy array layer (issue 25: placeholders, element-wise index expressions, reductions,
einsum and gathers, fused into generated kernels and mapped onto a concurrent graph that is
cached and rebound per launch) is being written. When it lands, this package becomes its
Pytato-style front end: NumPy-like functions building an array program and a ``compile``
decorator that turns a Python function over placeholders into a cached executable.

Until then every name here raises NotImplementedError; ``sluice.lazy.available`` is False.
"""

available = False


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise NotImplementedError(
        f"sluice.lazy.{name}: the lazy array layer is not built yet (the C++ layer of issue 25 "
        "is being written; this Python front end follows it)"
    )
