"""Backends, devices, contexts (kinds, wait_for, fork/join, priorities, `with ctx:`), events,
timers and host tasks."""

import threading
import time

import numpy as np
import pytest

import sluice


def test_backends_and_devices():
    names = [b.name for b in sluice.backends()]
    assert "host" in names
    host = [d for d in sluice.devices() if d.device.backend == "host"]
    assert host and host[0].compute_units >= 1
    info = sluice.device_info("host")
    assert info.device == sluice.Device("host", 0)
    assert str(sluice.Device("cuda:1")) == "cuda:1"
    with pytest.raises(sluice.Error) as e:
        sluice.device_info("host:7")
    assert e.value.code == "no_device"


def test_context_properties(device):
    c = sluice.Context(device, kind="blocking", priority=-1, name="mine")
    assert c.device == device and c.kind == "blocking" and c.name == "mine"
    lo, hi = sluice.device_info(device).priority_lowest, sluice.device_info(device).priority_highest
    assert min(lo, hi) <= c.priority <= max(lo, hi)
    assert c == c and hash(c) == hash(c)
    assert "mine" in repr(c)


def test_unknown_kind_names_the_line():
    with pytest.raises(sluice.Error) as e:
        sluice.Context(kind="sideways")
    assert e.value.code == "invalid_argument"
    assert e.value.file == __file__ and e.value.function.endswith("test_unknown_kind_names_the_line")


def test_host_tasks_run_in_issue_order(ctx):
    seen = []
    for i in range(50):
        ctx.host_task(lambda i=i: seen.append(i))
    ctx.synchronize()
    assert seen == list(range(50))
    assert ctx.idle()


def test_wait_for_orders_two_contexts(device):
    a = sluice.Context(device, name="a")
    b = sluice.Context(device, name="b")
    gate = threading.Event()
    order = []
    a.host_task(lambda: (gate.wait(10), order.append("a")))
    b.wait_for(a)
    b.host_task(lambda: order.append("b"))
    time.sleep(0.05)
    assert order == []  # b waits for a, which waits for the gate
    gate.set()
    b.synchronize()
    assert order == ["a", "b"]


def test_fork_and_join(ctx):
    seen = []
    ctx.host_task(lambda: seen.append("before"))
    children = ctx.fork(3)
    assert len(children) == 3
    for i, c in enumerate(children):
        c.host_task(lambda i=i: seen.append(i))
    ctx.join(children)
    ctx.host_task(lambda: seen.append("after"))
    ctx.synchronize()
    assert seen[0] == "before" and seen[-1] == "after" and sorted(seen[1:4]) == [0, 1, 2]


def test_with_context_makes_it_current(device):
    c = sluice.Context(device, name="scoped")
    default = sluice.current_context()
    with c:
        assert sluice.current_context() == c
        b = sluice.zeros(4)  # takes no context: issued on the current one
        assert b.context == c
        with sluice.Context(device, name="inner") as inner:
            assert sluice.current_context() == inner
        assert sluice.current_context() == c
    assert sluice.current_context() == default


def test_scope_sync_enter_orders_after_the_previous(device):
    first = sluice.Context(device, name="first")
    second = sluice.Context(device, name="second")
    gate = threading.Event()
    order = []
    with first:
        first.host_task(lambda: (gate.wait(10), order.append(1)))
        with second.scope(sync_enter=True):
            sluice.host_task(lambda: order.append(2))
    gate.set()
    second.synchronize()
    assert order == [1, 2]


def test_scope_sync_exit_orders_the_previous_after_it(device):
    outer = sluice.Context(device, name="outer")
    side = sluice.Context(device, name="side")
    gate = threading.Event()
    order = []
    with outer:
        with side.scope(sync_enter=False, sync_exit=True):
            sluice.host_task(lambda: (gate.wait(10), order.append("side")))
        assert sluice.current_context() == outer
        sluice.host_task(lambda: order.append("outer"))
    gate.set()
    outer.synchronize()
    assert order == ["side", "outer"]


def test_default_context_is_the_device_current_one(device):
    dflt = sluice.default_context(device)
    assert dflt == sluice.default_context(device)  # one per device and process
    c = sluice.Context(device, name="scoped")
    with c:
        assert sluice.default_context(device) == c
    assert sluice.default_context(device) == dflt


def test_with_device_makes_it_current(device):
    outside = sluice.current_device()
    c = sluice.Context(device, name="on device")
    with device as d:
        assert d == device and sluice.current_device() == device
        assert sluice.current_context() == sluice.default_context(device)
        with c:
            assert sluice.current_context() == c
        assert sluice.current_context() == sluice.default_context(device)
    assert sluice.current_device() == outside
    with pytest.raises(sluice.Error):
        with sluice.Device("host", 7):
            pass
    assert sluice.current_device() == outside


def test_synchronize_device_waits_for_every_context_of_it(device):
    a, b = sluice.Context(device, name="a"), sluice.Context(device, name="b")
    done = []
    a.host_task(lambda: (time.sleep(0.05), done.append("a")))
    b.host_task(lambda: (time.sleep(0.05), done.append("b")))
    sluice.synchronize_device(device)
    assert sorted(done) == ["a", "b"]
    b.host_task(lambda: 1 / 0, what="broken")
    with pytest.raises(sluice.WorkFailed, match="broken"):
        sluice.synchronize_device(device)
    b.synchronize()  # reported once


def test_events_and_timers(ctx):
    e = sluice.Event()
    assert not e.recorded and e.query()
    ctx.host_task(lambda: time.sleep(0.02))
    e.record(ctx)
    e.synchronize()
    assert e.recorded and e.query()
    start, stop = sluice.Event(timing=True), sluice.Event(timing=True)
    start.record(ctx)
    ctx.host_task(lambda: time.sleep(0.02))
    stop.record(ctx)
    assert sluice.Event.elapsed_ms(start, stop) >= 15
    t = sluice.Timer()
    t.start(ctx)
    ctx.host_task(lambda: time.sleep(0.01))
    t.stop(ctx)
    assert t.elapsed_ms() >= 8


def test_wait_on_an_event_orders_another_context(device):
    a = sluice.Context(device, name="a")
    b = sluice.Context(device, name="b")
    gate = threading.Event()
    order = []
    a.host_task(lambda: (gate.wait(10), order.append("a")))
    ev = a.record_event()
    a.host_task(lambda: order.append("a2"))
    b.wait_event(ev)
    b.host_task(lambda: order.append("b"))
    gate.set()
    b.synchronize()
    a.synchronize()
    assert order.index("a") < order.index("b")


def test_wrap_needs_a_stream():
    with pytest.raises(sluice.Error):
        sluice.Context.wrap("host", 0)


def test_copies_between_contexts_are_ordered_by_the_tracker(device):
    a = sluice.Context(device, name="a")
    b = sluice.Context(device, name="b")
    src = np.arange(1 << 16, dtype=np.float64)
    x = sluice.array(src, ctx=a)
    y = sluice.empty(src.shape, ctx=b)
    sluice.copy(y, x, ctx=b)  # b waits for a's copy through the tracker: no wait_for
    np.testing.assert_array_equal(y.numpy(), src)
