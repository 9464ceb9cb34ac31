"""Interop with CuPy, PyTorch and JAX on cuda: round trips without a copy, and the
producer–consumer races that are wrong without sluice's ordering and right with it (in both
directions), with no device synchronize. These skip with the reason where there is no GPU or
the library is missing (the GPU machine has all three: scripts/gpu-python runs them)."""

import gc
import sys
import time

import numpy as np
import pytest

import sluice
from conftest import gpu_library

SLOW_FILL = r"""
extern "C" __global__ void slow_fill(float* x, int n, long long cycles, float value) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    x[i] = value;
}
"""
CYCLES = 400_000_000  # about 0.2 s at 2 GHz: far longer than a consumer needs to race


class NoSync:
    """Hands a capsule over without ordering (the protocol's stream=-1)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(stream=-1)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


@pytest.fixture
def cuda_ctx():
    gpu_library("numpy")  # skips with the reason where there is no cuda device
    return sluice.Context("cuda:0", name="gpu")


def slow_fill_kernel():
    spec = sluice.KernelSpec("slow_fill", 4).add_cuda_source(SLOW_FILL)
    return sluice.Kernel(spec, ["float32*", "int32", "int64", "float32"], "cuda:0")


def test_torch_round_trip_without_a_copy(cuda_ctx):
    torch = gpu_library("torch")
    x = sluice.array(np.arange(1000, dtype=np.float32), ctx=cuda_ctx)
    t = torch.from_dlpack(x)
    assert t.device.type == "cuda" and t.data_ptr() == x.ptr
    t.mul_(2)  # on torch's stream
    back = sluice.from_dlpack(t, ctx=cuda_ctx)  # ordered after torch's stream
    assert back.ptr == x.ptr and back.object_id == x.object_id
    np.testing.assert_array_equal(back.numpy(), 2 * np.arange(1000, dtype=np.float32))
    u = torch.arange(10, device="cuda", dtype=torch.float64)
    s = sluice.from_dlpack(u, ctx=cuda_ctx)
    assert s.ptr == u.data_ptr() and s.memory == "device"
    np.testing.assert_array_equal(s.numpy(), np.arange(10.0))


def test_cupy_round_trips(cuda_ctx):
    cupy = gpu_library("cupy")
    x = sluice.array(np.arange(64, dtype=np.int32), ctx=cuda_ctx)
    via_dlpack = cupy.from_dlpack(x)
    via_cai = cupy.asarray(x)  # __cuda_array_interface__ v3 with its stream
    assert via_dlpack.data.ptr == x.ptr == via_cai.data.ptr
    np.testing.assert_array_equal(cupy.asnumpy(via_cai), np.arange(64))
    c = cupy.arange(32, dtype=cupy.float64)
    s = sluice.from_cuda_array_interface(c, ctx=cuda_ctx)
    assert s.ptr == c.data.ptr
    np.testing.assert_array_equal(s.numpy(), np.arange(32.0))
    s2 = sluice.asarray(c, ctx=cuda_ctx)  # DLPack first
    assert s2.ptr == c.data.ptr


def test_jax_round_trip(cuda_ctx):
    jax = gpu_library("jax")
    jnp = pytest.importorskip("jax.numpy")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX has no GPU here")
    x = sluice.array(np.arange(16, dtype=np.float32), ctx=cuda_ctx)
    j = jnp.from_dlpack(x)
    np.testing.assert_array_equal(np.asarray(j), np.arange(16, dtype=np.float32))
    y = jnp.arange(8, dtype=jnp.float32) * 3
    s = sluice.from_dlpack(y, ctx=cuda_ctx)
    np.testing.assert_array_equal(s.numpy(), np.arange(8, dtype=np.float32) * 3)


def test_export_race_sluice_to_torch(cuda_ctx):
    """sluice writes slowly; torch reads on its own stream. Without ordering torch sees the old
    values; with it the new ones, and the export returns without waiting for the kernel."""
    torch = gpu_library("torch")
    n = 1 << 20
    k = slow_fill_kernel()
    x = sluice.zeros(n, "float32", ctx=cuda_ctx)
    cuda_ctx.synchronize()

    k.launch(64, 256, sluice.write(x), n, CYCLES, 1.0, ctx=cuda_ctx)
    unordered = torch.from_dlpack(NoSync(x)).clone()
    torch.cuda.current_stream().synchronize()
    assert float(unordered.sum()) == 0.0, "expected the race without ordering"
    cuda_ctx.synchronize()

    k.launch(64, 256, sluice.write(x), n, CYCLES, 2.0, ctx=cuda_ctx)
    t0 = time.perf_counter()
    ordered = torch.from_dlpack(x)  # torch's current stream waits for the kernel on the device
    copy = ordered.clone()
    export_s = time.perf_counter() - t0
    assert export_s < 0.1, f"the export took {export_s:.3f} s: a host wait?"
    torch.cuda.current_stream().synchronize()
    assert float(copy.min()) == 2.0 and float(copy.max()) == 2.0


def test_import_race_torch_to_sluice(cuda_ctx):
    """torch writes slowly on a side stream; sluice copies the tensor out."""
    torch = gpu_library("torch")
    n = 1 << 20
    side = torch.cuda.Stream()
    host = sluice.PinnedBuffer(n, "float32", device="cuda:0")

    t = torch.zeros(n, device="cuda", dtype=torch.float32)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(CYCLES)
        t.fill_(3.0)
        unordered = sluice.from_dlpack(t, ctx=cuda_ctx, sync=False)
    sluice.copy(host, unordered, ctx=cuda_ctx)
    cuda_ctx.synchronize()
    assert float(np.asarray(host).sum()) == 0.0, "expected the race without ordering"
    torch.cuda.synchronize()

    known = sluice._sluice._import_paths()["known_stream"]
    with torch.cuda.stream(side):
        torch.cuda._sleep(CYCLES)
        t.fill_(4.0)
        # sluice finds torch's current stream (side) itself, asks torch for no handshake
        # (stream -1) and makes its stream wait for side's work on the device.
        t0 = time.perf_counter()
        ordered = sluice.from_dlpack(t, ctx=cuda_ctx)
        import_s = time.perf_counter() - t0
    assert sluice._sluice._import_paths()["known_stream"] == known + 1
    assert import_s < 0.1, f"the import took {import_s:.3f} s: a host wait?"
    sluice.copy(host, ordered, ctx=cuda_ctx)
    cuda_ctx.synchronize()
    assert (np.asarray(host) == 4.0).all()


def test_import_race_cupy_to_sluice_through_dlpack(cuda_ctx):
    """CuPy writes slowly on a side stream; sluice orders itself after CuPy's current stream."""
    cupy = gpu_library("cupy")
    n = 1 << 20
    slow = cupy.RawKernel(SLOW_FILL, "slow_fill")
    host = sluice.PinnedBuffer(n, "float32", device="cuda:0")
    c = cupy.zeros(n, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()
    side = cupy.cuda.Stream(non_blocking=True)
    args = (c, np.int32(n), np.int64(CYCLES))
    with side:
        slow((64,), (256,), args + (np.float32(5.0),))
        unordered = sluice.from_dlpack(c, ctx=cuda_ctx, sync=False)
    sluice.copy(host, unordered, ctx=cuda_ctx)
    cuda_ctx.synchronize()
    assert float(np.asarray(host).sum()) == 0.0, "expected the race without ordering"
    side.synchronize()

    known = sluice._sluice._import_paths()["known_stream"]
    with side:
        slow((64,), (256,), args + (np.float32(6.0),))
        ordered = sluice.from_dlpack(c, ctx=cuda_ctx)
    assert sluice._sluice._import_paths()["known_stream"] == known + 1
    sluice.copy(host, ordered, ctx=cuda_ctx)
    cuda_ctx.synchronize()
    assert (np.asarray(host) == 6.0).all()


def test_export_race_sluice_to_cupy_through_the_array_interface(cuda_ctx):
    cupy = gpu_library("cupy")
    n = 1 << 20
    k = slow_fill_kernel()
    x = sluice.zeros(n, "float32", ctx=cuda_ctx)
    k.launch(64, 256, sluice.write(x), n, CYCLES, 5.0, ctx=cuda_ctx)
    c = cupy.asarray(x)  # the interface's stream follows the kernel
    assert float(cupy.asnumpy(c).min()) == 5.0


def test_release_waits_for_the_consumer(cuda_ctx):
    """torch uses a sluice buffer and drops it; the buffer's memory is released after torch's
    queued work, and sluice's next write of it waits for that work."""
    torch = gpu_library("torch")
    n = 1 << 20
    x = sluice.zeros(n, "float32", ctx=cuda_ctx)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        t = torch.from_dlpack(x)
        torch.cuda._sleep(CYCLES)
        total = t.sum()  # reads x after the sleep
    del t  # the capsule's deleter: sluice orders later work after `side`
    sluice.memset(x, 0xFF, ctx=cuda_ctx)  # must not overwrite before torch's read
    side.synchronize()
    assert float(total) == 0.0
    cuda_ctx.synchronize()


def test_an_import_dropped_inside_a_cuda_host_task_is_released_later(cuda_ctx):
    """A host task's Python drops the last view of a CuPy import. CUDA calls are forbidden in a
    host task, so the release's marks wait for the next call on a Python thread; before, the
    release tried them there and failed (seen under load as a later test's error)."""
    cupy = gpu_library("cupy")
    c = cupy.arange(1 << 10, dtype=cupy.float64)
    cupy.cuda.Device().synchronize()
    first = sluice.from_dlpack(cupy.zeros(4), ctx=cuda_ctx)  # its release makes the module's
    del first  # interop context, so that the release below reaches the stream
    gc.collect()
    sluice._sluice._collect()
    box = [sluice.from_dlpack(c, ctx=cuda_ctx)]
    host = sluice.PinnedBuffer(1 << 10, "float64", device="cuda:0")
    sluice.copy(host, box[0], ctx=cuda_ctx)
    cuda_ctx.host_task(lambda: box.clear())
    cuda_ctx.synchronize()
    assert not box
    sluice._sluice._collect()
    assert sluice._sluice._pending_releases() == 0
    sluice.synchronize_device("cuda:0")  # no context of the device holds a failure
    assert (np.asarray(host) == np.arange(1 << 10)).all()
    again = sluice.from_dlpack(c, ctx=cuda_ctx)  # the interop context still works
    sluice.copy(host, again, ctx=cuda_ctx)
    cuda_ctx.synchronize()
    assert (np.asarray(host) == np.arange(1 << 10)).all()


def test_the_last_view_of_an_import_dropped_inside_a_cuda_host_task(cuda_ctx):
    """As above, but with the import's work finished and collected before the host task runs, so
    that the task's drop is the last reference: the release must then wait for a Python thread
    (one pending) and leave no failure behind. The test above drops it while the copy's own
    reference may still be held, in which case the release happens on a Python thread anyway."""
    cupy = gpu_library("cupy")
    c = cupy.arange(1 << 10, dtype=cupy.float64)
    cupy.cuda.Device().synchronize()
    first = sluice.from_dlpack(cupy.zeros(4), ctx=cuda_ctx)  # makes the interop context
    del first
    gc.collect()
    sluice._sluice._collect()
    box = [sluice.from_dlpack(c, ctx=cuda_ctx)]
    host = sluice.PinnedBuffer(1 << 10, "float64", device="cuda:0")
    sluice.copy(host, box[0], ctx=cuda_ctx)
    cuda_ctx.synchronize()
    gc.collect()
    sluice._sluice._collect()
    refs = sys.getrefcount(box[0])  # outside the assert: pytest's rewriting holds its operands
    assert refs == 2  # the list's and this call's: the task's drop is the last
    cuda_ctx.host_task(lambda: box.clear())
    cuda_ctx.synchronize()
    assert not box
    assert sluice._sluice._pending_releases() == 1  # dropped in the task, not marked there
    sluice._sluice._collect()  # marks it on this thread
    sluice.synchronize_device("cuda:0")  # no context of the device holds a failure
    sluice._sluice._collect()
    assert sluice._sluice._pending_releases() == 0
    assert (np.asarray(host) == np.arange(1 << 10)).all()


def test_dataflow_with_an_nvrtc_kernel_on_cuda():
    gpu_library("numpy")
    df = sluice.dataflow
    q = df.Queue("cuda:0")
    spec = sluice.KernelSpec("twice").add_cuda_source(
        'extern "C" __global__ void twice(double* y, int n) {'
        " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] *= 2; }")
    k = sluice.Kernel(spec, ["float64*", "int32"], "cuda:0")
    v = np.arange(100.0)
    b = df.Buffer(v)
    q.submit(lambda h: h.launch(k, 1, 128, b.access(h, "read_write"), 100)).wait()
    with b.host_access("read") as a:
        np.testing.assert_array_equal(a, 2 * np.arange(100.0))


# sluice first, then another GPU library, each in a fresh process: the order in which a user's
# program meets them must not matter (libsluice once exported the standard library's copies it
# carried, and JAX's and CuPy's imports crashed in them after sluice's cuda work:
# docs/python.md#library-load-order).
LOAD_ORDER_START = """
import numpy as np, sluice
from sluice import la
ctx = sluice.Context("cuda:0", name="first")
with ctx:
    A = la.Mat.stencil_csr("2d5", 32, 32)
    b = la.Vec(np.ones(1024)); x = la.Vec(1024)
    assert la.Ksp(A, rtol=1e-8, atol=0, mode="async").solve(b, x).converged
    y = sluice.lazy.eval(sluice.lazy.sin(sluice.lazy.asarray(np.arange(8.0))) + 1)
ctx.synchronize()
"""
LOAD_ORDER_THEN = {
    "torch": "import torch; assert torch.ones(3, device='cuda').sum().item() == 3",
    "cupy": "import cupy; assert float(cupy.ones(3).sum()) == 3",
    "jax": "import jax, jax.numpy as jnp; jax.devices(); assert float(jnp.arange(4.0).sum()) == 6",
}


@pytest.mark.parametrize("then", ["torch", "cupy", "jax", "torch,cupy,jax"])
def test_sluice_first_then_another_gpu_library(then):
    for name in then.split(","):
        gpu_library(name)  # skips with the reason where it is missing
    from conftest import run_isolated

    code = LOAD_ORDER_START + "\n".join(LOAD_ORDER_THEN[n] for n in then.split(",")) + "\nprint('ok')"
    assert "ok" in run_isolated(code, timeout=240)
