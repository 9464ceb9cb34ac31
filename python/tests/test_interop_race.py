"""The producer–consumer race between sluice and another library, on the host backend: without
sluice's ordering the consumer reads stale data, with it the right data; the wait covers the
pending work on that buffer only. (The cuda versions, with PyTorch and CuPy, are in
test_gpu.py.)"""

import threading

import numpy as np
import pytest

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


# ---- imports ordered after a producer's known stream ---------------------------------------------
# sluice finds the current stream of PyTorch and CuPy arrays itself (by the type's module), asks
# them for no ordering (__dlpack__(stream=-1)) and orders its own work after that stream in C++.
# The same path serves any library registered with _stream_source; here a library that writes host
# memory on a queue of its own (a sluice host context whose work sluice's tracker does not see,
# as it does not see PyTorch's), which is what PyTorch's stream is on cuda.


class QueueArray:
    """An array of a library that writes it asynchronously on its own queue."""

    __module__ = "queuelib"

    def __init__(self, data, queue):
        self.data, self.queue, self.requests = data, queue, []

    def __dlpack__(self, **kwargs):
        self.requests.append(kwargs)
        return self.data.__dlpack__()

    def __dlpack_device__(self):
        return self.data.__dlpack_device__()


class SubclassedQueueArray(QueueArray):
    __module__ = "someone_else"  # its base's module decides


@pytest.fixture
def queuelib():
    sluice._sluice._stream_source("queuelib", lambda obj, device: obj.queue)
    yield
    sluice._sluice._stream_source("queuelib", None)


def slow_write(gate, buf, value):
    def task():
        assert gate.wait(30), "the test never opened the gate"
        buf[:] = value

    return task


@pytest.mark.parametrize("cls", [QueueArray, SubclassedQueueArray])
def test_import_waits_for_the_producers_queue(queuelib, cls):
    n = 1 << 14
    queue = sluice.Context("host", name="queuelib")
    consumer = sluice.Context("host", name="consumer")
    out = sluice.zeros(n, ctx=consumer)
    buf = np.zeros(n)
    gate = threading.Event()
    queue.host_task(slow_write(gate, buf, 1.0), "the library's kernel")  # untracked
    arr = cls(buf, queue)

    before = sluice._sluice._import_paths()
    unordered = sluice.from_dlpack(arr, ctx=consumer, sync=False)
    sluice.copy(out, unordered, ctx=consumer)  # done when it returns: read before the write
    assert (out.numpy() == 0).all(), "expected the race without ordering"
    assert sluice._sluice._import_paths() == before

    ordered = sluice.from_dlpack(arr, ctx=consumer)  # returns at once: ordered on the queues
    assert not queue.idle()
    assert sluice._sluice._import_paths()["known_stream"] == before["known_stream"] + 1
    assert arr.requests[-1] == {}, "host memory: no stream is passed to the producer"
    threading.Timer(0.05, gate.set).start()
    sluice.copy(out, ordered, ctx=consumer)  # waits for the library's write, on the queues
    assert (out.numpy() == 1).all()
    consumer.synchronize()


def test_later_work_on_any_context_follows_the_producer(queuelib):
    queue = sluice.Context("host", name="queuelib")
    importer = sluice.Context("host", name="importer")
    other = sluice.Context("host", name="other")
    buf = np.zeros(100, np.int64)
    gate = threading.Event()
    queue.host_task(slow_write(gate, buf, 5), "the library's kernel")
    a = sluice.from_dlpack(QueueArray(buf, queue), ctx=importer)
    seen = []
    sluice.host_task(lambda v: seen.append(int(v.sum())), sluice.read(a), ctx=other)
    threading.Timer(0.05, gate.set).start()
    other.synchronize()
    assert seen == [500]  # [0] without the ordering: the task would not wait for the gate


def test_a_source_that_says_none_leaves_the_handshake(queuelib):
    sluice._sluice._stream_source("queuelib", lambda obj, device: None)
    before = sluice._sluice._import_paths()
    a = sluice.from_dlpack(QueueArray(np.arange(4.0), None))
    assert list(np.asarray(a)) == [0.0, 1.0, 2.0, 3.0]
    assert sluice._sluice._import_paths() == before


def test_a_source_that_returns_nonsense_is_an_error(queuelib):
    sluice._sluice._stream_source("queuelib", lambda obj, device: "stream 7")
    with pytest.raises(sluice.Error, match="a stream source returned <class 'str'>") as e:
        sluice.from_dlpack(QueueArray(np.arange(4.0), None))
    assert e.value.code == "invalid_argument"


class TorchLike:
    """A type of torch's package: sluice asks it for stream -1 and reads the device from the
    capsule (on cuda it then records on torch's current stream; host memory needs nothing)."""

    __module__ = "torch.sluice_test"
    refuse_opt_out = False

    def __init__(self, data):
        self.data, self.requests, self.device_queries = data, [], 0

    def __dlpack__(self, **kwargs):
        self.requests.append(kwargs)
        if self.refuse_opt_out and kwargs.get("stream") == -1:
            raise BufferError("this producer does not take stream=-1")
        return self.data.__dlpack__()

    def __dlpack_device__(self):
        self.device_queries += 1
        return self.data.__dlpack_device__()


class TorchLikeRefusingOptOut(TorchLike):
    refuse_opt_out = True


def test_a_torch_type_is_asked_for_no_handshake_and_no_device_query():
    t = TorchLike(np.arange(4.0))
    a = sluice.from_dlpack(t)
    assert list(np.asarray(a)) == [0.0, 1.0, 2.0, 3.0]
    assert t.requests == [{"stream": -1}] and t.device_queries == 0


def test_a_producer_refusing_the_opt_out_falls_back_to_the_protocol_for_good():
    t = TorchLikeRefusingOptOut(np.arange(3.0))
    assert list(np.asarray(sluice.from_dlpack(t))) == [0.0, 1.0, 2.0]
    assert t.requests == [{"stream": -1}, {}] and t.device_queries == 1
    u = TorchLikeRefusingOptOut(np.arange(2.0))
    assert list(np.asarray(sluice.from_dlpack(u))) == [0.0, 1.0]
    assert u.requests == [{}], "the type is remembered"
