"""The producer–consumer race between sluice and another library, on the host backend: without
sluice's ordering the consumer reads stale data, with it the right data; the wait covers the
pending work on that buffer only. (The cuda versions, with PyTorch and CuPy, are in
test_gpu.py.)"""

import threading

import numpy as np

import sluice


class NoSync:
    """Hands `a`'s DLPack capsule over without ordering (the protocol's stream=-1)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(stream=-1)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def slow_fill(gate, value):
    def task(view):
        assert gate.wait(30), "the test never opened the gate"
        view[:] = value

    return task


def test_export_without_ordering_races_and_with_it_is_right():
    n = 1 << 16
    writer = sluice.Context("host", name="writer")
    x = sluice.zeros(n, ctx=writer)
    writer.synchronize()
    gate = threading.Event()
    sluice.host_task(slow_fill(gate, 1.0), sluice.write(x), ctx=writer)

    unordered = np.from_dlpack(NoSync(x)).copy()  # the write is still queued
    threading.Timer(0.05, gate.set).start()
    assert (unordered == 0).all(), "expected the race: the consumer read before the write"

    ordered = np.from_dlpack(x)  # waits (GIL released) for the pending write
    assert (ordered == 1).all()


def test_buffer_protocol_export_is_ordered_too():
    writer = sluice.Context("host", name="writer")
    x = sluice.zeros(1000, "int64", ctx=writer)
    gate = threading.Event()
    sluice.host_task(slow_fill(gate, 7), sluice.write(x), ctx=writer)
    threading.Timer(0.05, gate.set).start()
    assert (np.asarray(x) == 7).all()


def test_export_waits_for_that_buffers_work_only():
    a = sluice.Context("host", name="a")
    b = sluice.Context("host", name="b")
    x = sluice.zeros(100, ctx=a)
    y = sluice.zeros(100, ctx=b)
    x.numpy(), y.numpy()
    held = threading.Event()
    sluice.host_task(slow_fill(held, 5.0), sluice.write(y), ctx=b)  # stays queued
    sluice.host_task(lambda v: v.fill(2.0), sluice.write(x), ctx=a)
    assert (np.from_dlpack(x) == 2).all()  # returns although b's work on y is held
    assert not b.idle()
    held.set()
    assert (np.asarray(y) == 5).all()


def test_a_consumer_that_writes_waits_for_pending_readers():
    ctx = sluice.Context("host", name="reader")
    x = sluice.array(np.ones(1000), ctx=ctx)
    gate = threading.Event()
    seen = []

    def slow_reader(view):
        assert gate.wait(30)
        seen.append(float(view.sum()))

    sluice.host_task(slow_reader, sluice.read(x), ctx=ctx)
    threading.Timer(0.05, gate.set).start()
    v = np.asarray(x)  # a writable view: waits for the pending read as well
    v[:] = 0
    ctx.synchronize()
    assert seen == [1000.0]
