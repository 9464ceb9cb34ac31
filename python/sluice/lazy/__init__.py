"""sluice.lazy — lazily evaluated array programs (reference 001): the Python front end is not
built yet.

The C++ lazy array layer (issue 25, ``sluice/lazy.hpp``, docs/lazy.md: placeholders, element-wise
math, reductions, einsum, gathers and index lambdas, fused into generated kernels on a graph that
is cached and rebound per run) has landed. This package is to become its Pytato-style front end:
NumPy-like functions building an array program and a ``compile`` decorator that turns a Python
function over placeholders into a cached executable. Until it binds that layer, every name here
raises NotImplementedError; ``sluice.lazy.available`` is False.
"""

available = False


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise NotImplementedError(
        f"sluice.lazy.{name}: the Python front end of the lazy array layer is not built yet (the "
        "C++ layer, sluice/lazy.hpp, is there: see docs/lazy.md)"
    )
