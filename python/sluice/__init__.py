"""sluice: asynchronous accelerator work, made safe and fast — from Python.

Contexts are a device plus one ordered stream of work; sluice orders work across contexts from
what each operation reads and writes, keeps scalars on the device (``Managed``), records work
into graphs (``Capture``, ``Replay``), and hands its arrays to NumPy, CuPy, PyTorch and JAX
without a copy, ordered on the device (DLPack, ``__cuda_array_interface__``, the buffer
protocol). Blocking calls release the GIL; host tasks that call Python take it.

    import sluice, numpy as np
    ctx = sluice.Context()
    x = sluice.array(np.arange(8.0), ctx=ctx)   # a copy, issued asynchronously on ctx
    y = np.from_dlpack(x)                       # a view: waits for the copy only

See docs/python.md for the whole API.
"""

import functools as _functools
import sys as _sys

from . import _sluice
from ._sluice import (  # noqa: F401  (re-exported)
    Array,
    BackendInfo,
    Capture,
    Context,
    ContextScope,
    Device,
    DeviceBuffer,
    DeviceInfo,
    Error,
    Event,
    Expr,
    Graph,
    GraphExec,
    Kernel,
    KernelSpec,
    Managed,
    Marked,
    Node,
    OutOfMemory,
    PinnedBuffer,
    Program,
    Timer,
    WorkFailed,
    abs,
    array,
    asarray,
    backends,
    cast,
    compile,
    conj,
    constant,
    copy,
    cos,
    current_context,
    current_device,
    dataflow,
    default_context,
    default_device,
    device_info,
    devices,
    empty,
    eval,
    exp,
    fill,
    from_cuda_array_interface,
    from_dlpack,
    graph_stats,
    has_backend,
    host_task,
    imag,
    la,
    log,
    maximum,
    memset,
    minimum,
    pow,
    read,
    read_write,
    real,
    scalar_stats,
    sin,
    sqrt,
    synchronize,
    synchronize_device,
    tan,
    task_view,
    write,
    zeros,
)
from . import lazy  # noqa: F401,E402  (a placeholder until the C++ layer lands)

__version__ = "0.1.0"

# `import sluice.la` and `import sluice.dataflow` find the compiled submodules.
_sys.modules[__name__ + ".la"] = la
_sys.modules[__name__ + ".dataflow"] = dataflow


class Replay:
    """Record and replay: the first run of a region captures it into a graph, instantiates and
    launches it; later runs capture again, compare with the cached topology, update the
    parameters in place and launch (or re-instantiate, reported through ``on_event``).

    Three forms, on the current context unless ``ctx`` is given:

    - ``replay.run(key, body)``: ``body()`` is the region. If it hits the capture guard (a host
      wait, a copy of pageable memory...), it is run again eagerly instead (reported as
      'eager').
    - ``@replay`` or ``@replay(key=..., ctx=...)`` on a function: each call is a run of the
      function's body (key: the function's qualified name); it returns what the function
      returned.
    - ``with replay.scope(key):`` or ``with replay(key):``: the block is the region. A block
      cannot be re-run, so a capture-guard error propagates (nothing of the block ran).
    """

    def __init__(self):
        self._impl = _sluice._Replay()

    def run(self, key, body, ctx=None):
        self._impl.run(ctx if ctx is not None else current_context(), key, body)

    def scope(self, key, ctx=None):
        return self._impl.scope(key, ctx if ctx is not None else current_context())

    def on_event(self, callback):
        """``callback({'kind', 'key', 'reason'})`` when a run instantiates, re-instantiates or
        runs eagerly (None removes it)."""
        self._impl.on_event(callback)

    @property
    def size(self):
        """Cached executables."""
        return self._impl.size

    def __call__(self, fn=None, *, key=None, ctx=None):
        if isinstance(fn, str):
            return self.scope(fn, ctx)
        if fn is None:
            return lambda f: self(f, key=key, ctx=ctx)
        name = key if key is not None else f"{fn.__module__}.{fn.__qualname__}"

        @_functools.wraps(fn)
        def replayed(*args, **kwargs):
            result = []

            def body():
                result.clear()
                result.append(fn(*args, **kwargs))

            self.run(name, body, ctx)
            return result[0] if result else None

        return replayed


#: The process-wide Replay: ``@sluice.replay``, ``with sluice.replay("step"):``.
replay = Replay()


def capture_launch(graph, ctx=None):
    """Warp's ``capture_launch``: instantiates ``graph`` (a Graph or GraphExec) if needed and
    launches it on ``ctx`` (default: the current context). Returns the GraphExec."""
    ctx = ctx if ctx is not None else current_context()
    # Instantiated for the device of the context that launches it (not the default device).
    exec_ = graph if isinstance(graph, GraphExec) else graph.instantiate(ctx.device)
    exec_.launch(ctx)
    return exec_
