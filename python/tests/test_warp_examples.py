"""The concurrency examples of reference 002 (Warp's streams, events and capture) written with
sluice: a context plays a Warp stream, and the tracker makes most of the manual waits
unnecessary (kept here where Warp's example has them, to show they still work)."""

import threading

import numpy as np

import sluice


def test_scoped_stream(device):
    """`with wp.ScopedStream(stream):` — work without an explicit stream goes to it."""
    stream = sluice.Context(device, name="stream")
    with stream:
        a = sluice.zeros(16)
        b = sluice.empty(16)
        sluice.copy(b, a)
    assert a.context == stream and b.context == stream
    np.testing.assert_array_equal(b.numpy(), np.zeros(16))


def test_compute_and_transfer_streams_overlap(device):
    """A kernel on a compute stream and a host-to-device copy on a transfer stream."""
    compute = sluice.Context(device, name="compute")
    transfer = sluice.Context(device, name="transfer")
    with compute:
        a = sluice.zeros(1024)
        b = sluice.empty(1024)
    c = sluice.PinnedBuffer(1024, device=device)
    np.asarray(c)[:] = 1.0
    with compute:
        sluice.memset(a, 0)  # the "kernel"
    with transfer:
        sluice.copy(b, c)  # waits for b's allocation on compute through the tracker
    np.testing.assert_array_equal(b.numpy(), np.ones(1024))


def test_producer_consumer_with_an_event(device):
    """Warp's example: a producer copies into `a` and records an event; the consumer does other
    work, waits for the event and consumes `a`."""
    producer = sluice.Context(device, name="producer")
    consumer = sluice.Context(device, name="consumer")
    with producer:
        a = sluice.empty(4096)
    b = sluice.PinnedBuffer(4096, device=device)
    np.asarray(b)[:] = 1.0
    out = sluice.PinnedBuffer(4096, device=device)
    with producer:
        sluice.copy(a, b)
        event = producer.record_event()
        sluice.host_task(lambda: None)  # unrelated producer work
    with consumer:
        sluice.host_task(lambda: None)  # unrelated consumer work
        consumer.wait_event(event)
        sluice.copy(out, a)
    consumer.synchronize()
    np.testing.assert_array_equal(np.asarray(out), np.ones(4096))


def test_synchronize_event_readback(device):
    """Two asynchronous readbacks, each waited for by its own event, in order."""
    stream = sluice.Context(device, name="stream")
    N = 1 << 12
    a_host = sluice.PinnedBuffer(N, device=device)
    b_host = sluice.PinnedBuffer(N, device=device)
    with stream:
        a = sluice.array(np.full(N, 17.0))
        sluice.copy(a_host, a)
        a_event = stream.record_event()
        b = sluice.array(np.full(N, 42.0))
        sluice.copy(b_host, b)
        b_event = stream.record_event()
    a_event.synchronize()
    np.testing.assert_array_equal(np.asarray(a_host), np.full(N, 17.0))
    b_event.synchronize()
    np.testing.assert_array_equal(np.asarray(b_host), np.full(N, 42.0))


def test_stream_usage_guidance(device):
    """Warp's race: an array made on one stream, used by a kernel on another. With Warp the
    fix is wait_stream (or ScopedStream); with sluice the tracker orders it — and wait_stream
    still works."""
    main = sluice.Context(device, name="main")
    s = sluice.Context(device, name="s")
    with main:
        a = sluice.array(np.arange(1 << 16, dtype=np.float64))
    out = sluice.PinnedBuffer(1 << 16, device=device)
    sluice.copy(out, a, ctx=s)  # no wait needed
    s.synchronize()
    np.testing.assert_array_equal(np.asarray(out), np.arange(1 << 16))
    s.wait_stream(main)
    with main.scope():  # ScopedStream: syncs with the previous stream on entry
        pass


def test_stream_priorities(device):
    info = sluice.device_info(device)
    lo = sluice.Context(device, priority=info.priority_lowest, name="lo")
    hi = sluice.Context(device, priority=info.priority_highest, name="hi")
    assert hi.priority <= lo.priority  # lower is more urgent (CUDA's and Warp's convention)
    start_lo, end_lo = sluice.Event(timing=True), sluice.Event(timing=True)
    start_hi, end_hi = sluice.Event(timing=True), sluice.Event(timing=True)
    n = 1 << 20
    with lo:
        x = sluice.zeros(n)
    with hi:
        y = sluice.zeros(n)
    start_lo.record(lo)
    start_hi.record(hi)
    for _ in range(4):
        sluice.copy(x, x, ctx=lo)
        sluice.copy(y, y, ctx=hi)
    end_lo.record(lo)
    end_hi.record(hi)
    assert sluice.Event.elapsed_ms(start_lo, end_lo) >= 0
    assert sluice.Event.elapsed_ms(start_hi, end_hi) >= 0


def test_multi_stream_capture_fork_and_join(device):
    """A capture begun on stream0 that forks stream1 (wait_stream) and joins it back."""
    stream0 = sluice.Context(device, name="stream0")
    stream1 = sluice.Context(device, name="stream1")
    x = sluice.zeros(256, ctx=stream0)
    y = sluice.zeros(256, ctx=stream0)
    src = sluice.array(np.arange(256.0), ctx=stream0)
    stream0.synchronize()
    with sluice.Capture(stream0) as capture:
        stream1.wait_stream(stream0)  # fork: stream1 joins the capture
        sluice.copy(x, src, ctx=stream0)
        sluice.copy(y, src, ctx=stream1)
        stream0.wait_stream(stream1)  # join
    sluice.capture_launch(capture.graph, stream0)
    np.testing.assert_array_equal(x.numpy(), np.arange(256.0))
    np.testing.assert_array_equal(y.numpy(), np.arange(256.0))


def test_concurrent_work_on_two_contexts_really_overlaps():
    """Warp: 'kernels launched on different devices/streams can execute concurrently'. Each
    host task waits for the other at a barrier: serialized, they would time out."""
    a = sluice.Context("host", name="a")
    b = sluice.Context("host", name="b")
    barrier = threading.Barrier(2, timeout=20)
    a.host_task(barrier.wait)
    b.host_task(barrier.wait)
    a.synchronize()
    b.synchronize()
