"""Kernels of the kernel layer from Python (host implementation here, NVRTC on cuda) and the
dataflow queue with them: the Y pattern, write-back, host accessors, errors."""

import threading

import numpy as np
import pytest

import sluice

df = sluice.dataflow

AXPY_SOURCE = r"""
extern "C" __global__ void axpy(double a, const double* x, double* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
"""


def axpy_spec():
    spec = sluice.KernelSpec("axpy", arity=4)
    spec.add_cuda_source(AXPY_SOURCE)

    def host(threads, a, x, y, n):
        y[:n] += a * x[:n]

    spec.add_host(host)
    return spec


PARAMS = ["float64", "const float64*", "float64*", "int32"]


def test_kernel_launch_is_tracked(device):
    a = sluice.Context(device, name="a")
    b = sluice.Context(device, name="b")
    k = sluice.Kernel(axpy_spec(), PARAMS, device)
    assert k.params == PARAMS and k.format in ("host", "cubin", "ptx", "cuda_source", "fatbin")
    n = 1000
    x = sluice.array(np.arange(n, dtype=np.float64), ctx=a)
    y = sluice.zeros(n, ctx=a)
    k.launch((n + 255) // 256, 256, 2.0, sluice.read(x), sluice.read_write(y), n, ctx=b)
    np.testing.assert_array_equal(y.numpy(), 2.0 * np.arange(n))


def test_kernel_argument_errors(device):
    k = sluice.Kernel(axpy_spec(), PARAMS, device)
    c = sluice.Context(device)
    x = sluice.zeros(4, ctx=c)
    with pytest.raises(sluice.Error, match="sluice.read"):
        k.launch(1, 32, 1.0, x, sluice.write(x), 4, ctx=c)
    with pytest.raises(sluice.Error, match="takes 4 arguments"):
        k.launch(1, 32, 1.0, ctx=c)
    with pytest.raises(sluice.Error, match="does not fit"):
        k.launch(1, 32, 1.0, sluice.read(x), sluice.write(x), 1 << 40, ctx=c)
    with pytest.raises(sluice.Error, match="float32"):
        k.launch(1, 32, 1.0, sluice.read(sluice.zeros(4, "float32", ctx=c)), sluice.write(x), 4, ctx=c)


def test_a_spec_without_host_code_cannot_load_on_the_host():
    spec = sluice.KernelSpec("k").add_cuda_source(AXPY_SOURCE)
    with pytest.raises(sluice.Error, match="host implementation"):
        sluice.Kernel(spec, PARAMS, "host")


def test_dataflow_y_pattern(backend):
    """A writes A, B writes B, C reads B and updates A, D updates A: A and B overlap on an
    out-of-order queue (each waits for the other in a rendezvous), C and D follow."""
    if backend == "cuda":
        pytest.skip("the rendezvous of this test needs host kernels; cuda runs test_gpu.py's")
    q = df.Queue("host")
    n = 64
    bufs = {name: df.Buffer(np.zeros(n)) for name in "AB"}
    arrived = threading.Barrier(2, timeout=20)

    def writer(value):
        def kernel(out):
            arrived.wait()  # both A and B must be running at once
            out[:] = value
        return kernel

    q.submit(lambda h: h.single_task(writer(1.0), bufs["A"].access(h, "write", no_init=True)))
    q.submit(lambda h: h.single_task(writer(2.0), bufs["B"].access(h, "write", no_init=True)))

    def c(h):
        def kernel(a, b):
            a += b
        h.single_task(kernel, bufs["A"].access(h, "read_write"), bufs["B"].access(h, "read"))

    q.submit(c)
    last = q.submit(lambda h: h.parallel_for(n, lambda count, a: a.__imul__(10), bufs["A"].access(h)))
    last.wait()
    with bufs["A"].host_access("read") as a:
        np.testing.assert_array_equal(a, np.full(n, 30.0))


def test_dataflow_with_a_kernel_of_the_kernel_layer(device):
    q = df.Queue(device)
    k = sluice.Kernel(axpy_spec(), PARAMS, device)
    n = 256
    xs = np.arange(n, dtype=np.float64)
    ys = np.ones(n)
    X = df.Buffer(xs)
    Y = df.Buffer(ys)
    e = q.submit(lambda h: h.launch(k, 1, n, 3.0, X.access(h, "read"), Y.access(h, "read_write"), n))
    e.wait()
    with Y.host_access("read") as y:
        np.testing.assert_array_equal(y, 1 + 3 * xs)
    del Y  # writes back
    np.testing.assert_array_equal(ys, 1 + 3 * xs)


def test_buffer_write_back_and_ranges():
    q = df.Queue("host")
    v = np.zeros(10)
    b = df.Buffer(v)

    def cg(h):
        part = b.access(h, "write", count=4, offset=3)
        h.single_task(lambda p: p.fill(5.0), part)

    q.submit(cg).wait()
    del b
    np.testing.assert_array_equal(v, [0, 0, 0, 5, 5, 5, 5, 0, 0, 0])
    with pytest.raises(sluice.Error, match="outside"):
        b2 = df.Buffer(np.zeros(4))
        q.submit(lambda h: b2.access(h, "read", count=5))


def test_no_init_and_the_sycl_1_2_mode_it_replaced():
    q = df.Queue("host")
    b = df.Buffer(np.arange(6.0))

    def overwrite(h):
        h.single_task(lambda a: a.__setitem__(slice(0, 2), -1.0),
                      b.access(h, "read_write", count=4, offset=2, no_init=True))

    q.submit(overwrite).wait()
    with b.host_access("read") as a:
        # a partial range keeps what lies outside it; inside, only what the kernel wrote is known
        np.testing.assert_array_equal(a[:2], [0.0, 1.0])
        np.testing.assert_array_equal(a[2:4], [-1.0, -1.0])
    with pytest.raises(sluice.Error, match="no_init=True"):
        q.submit(lambda h: b.access(h, "discard_write"))
    with pytest.raises(sluice.Error, match="nothing to read"):
        q.submit(lambda h: b.access(h, "read", no_init=True))
    with pytest.raises(sluice.Error, match="read, write or read_write"):
        q.submit(lambda h: b.access(h, "readwrite"))


def test_host_accessor_holds_device_work_back():
    q = df.Queue("host")
    b = df.Buffer(np.zeros(4))
    with b.host_access("read_write") as view:
        view[:] = 1
        e = q.submit(lambda h: h.single_task(lambda a: a.__iadd__(1), b.access(h)))
        assert not e.complete
        with pytest.raises(sluice.Error):
            e.wait()  # would never return while this accessor lives
    e.wait()
    with b.host_access("read") as view:
        np.testing.assert_array_equal(view, np.full(4, 2.0))


def test_dataflow_kernel_failure_is_reported_once():
    q = df.Queue("host", in_order=True)
    q.submit(lambda h: h.single_task(lambda: [][1]))
    with pytest.raises(sluice.WorkFailed) as e:
        q.wait()
    assert "IndexError" in e.value.cause
    q.wait()
