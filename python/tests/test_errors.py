"""Errors as Python exceptions: sluice.Error with the caller's line, WorkFailed once with the
operation, the issuing line and (for a Python host task) its traceback; nothing left behind."""

import threading

import numpy as np
import pytest

import sluice


def fail_deep(message):
    def inner():
        raise ValueError(message)

    inner()


def test_host_task_exception_is_workfailed_with_traceback(ctx):
    ctx.host_task(lambda: fail_deep("no good"), what="load inputs")
    issued_line = test_host_task_exception_is_workfailed_with_traceback.__code__.co_firstlineno + 1
    with pytest.raises(sluice.WorkFailed) as e:
        ctx.synchronize()
    err = e.value
    assert err.operation == "load inputs"
    assert err.file == __file__ and err.line == issued_line
    assert "Traceback (most recent call last)" in err.cause
    assert "in inner" in err.cause and "ValueError: no good" in err.cause
    assert "load inputs" in str(err)
    assert err.code == "work_failed"
    assert isinstance(err, sluice.Error)


def test_failure_is_reported_once_and_later_work_is_skipped(ctx):
    ran = []
    ctx.host_task(lambda: 1 / 0, what="divide")
    ctx.host_task(lambda: ran.append(1))
    ctx.host_task(lambda: ran.append(2))
    with pytest.raises(sluice.WorkFailed) as e:
        ctx.synchronize()
    assert e.value.skipped == 2 and ran == []
    assert "ZeroDivisionError" in e.value.cause
    ctx.synchronize()  # reported once: the next wait is clean
    ctx.host_task(lambda: ran.append(3))
    ctx.synchronize()
    assert ran == [3]


def test_a_context_waiting_on_failed_work_carries_the_failure(device):
    a = sluice.Context(device, name="a")
    b = sluice.Context(device, name="b")
    a.host_task(lambda: fail_deep("upstream"), what="producer")
    b.wait_for(a)
    with pytest.raises(sluice.WorkFailed) as e:
        b.synchronize()
    assert e.value.operation == "producer"
    a.synchronize()  # already reported through b


def test_tracked_host_task_failure(ctx):
    x = sluice.PinnedBuffer(4)

    def bad(view):
        view[:] = 1
        raise RuntimeError("after writing")

    sluice.host_task(bad, sluice.write(x), ctx=ctx, what="writer")
    with pytest.raises(sluice.WorkFailed) as e:
        ctx.synchronize()
    assert e.value.operation == "writer" and "RuntimeError: after writing" in e.value.cause


def test_misuse_errors_name_the_problem(ctx):
    a = sluice.zeros(4, ctx=ctx)
    b = sluice.zeros(5, ctx=ctx)
    with pytest.raises(sluice.Error) as e:
        sluice.copy(a, b, ctx=ctx)
    assert e.value.code == "invalid_argument" and "bytes" in str(e.value)
    with pytest.raises(sluice.Error):
        sluice.copy(a, sluice.zeros(4, "float32", ctx=ctx), ctx=ctx)
    with pytest.raises(sluice.Error) as e:
        sluice.DeviceBuffer(4, "float128")
    assert "dtype" in str(e.value)
    with pytest.raises(sluice.Error) as e:
        sluice.Managed(dtype="float64").value()
    assert "never assigned" in str(e.value) and e.value.file == __file__


def test_out_of_memory_is_also_a_memory_error(ctx):
    with pytest.raises(MemoryError) as e:
        sluice.DeviceBuffer(1 << 62, "float64", ctx)
    assert isinstance(e.value, sluice.OutOfMemory) and isinstance(e.value, sluice.Error)


def test_strided_arrays_are_refused_with_advice():
    a = np.arange(16.0).reshape(4, 4)[:, ::2]
    with pytest.raises(sluice.Error) as e:
        sluice.asarray(a)
    assert "contiguous" in str(e.value)


def test_failure_nobody_waits_for_goes_to_stderr_at_exit():
    from conftest import run_isolated

    out = run_isolated(
        """
        import sluice
        c = sluice.Context(name="forgotten")
        c.host_task(lambda: 1 / 0, what="lost work")
        print("end")
        """
    )
    assert "end" in out and "forgotten" in out and "lost work" in out
    assert "ZeroDivisionError" in out


def test_errors_from_other_threads_do_not_leak(device):
    errors = []

    def worker():
        try:
            c = sluice.Context(device)
            c.host_task(lambda: fail_deep("thread"))
            c.synchronize()
        except sluice.WorkFailed as e:
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 4 and all("thread" in e.cause for e in errors)


def test_caller_line_cache_tells_call_sites_apart():
    # The module caches the Python line of each call site (code object and instruction). Repeated
    # calls, and new code objects (more than the cache holds, each dropped after use so that
    # addresses are reused), must each report their own file and line.
    for i in range(5000):
        src = "\n" * (i % 7) + (
            "def f():\n"
            "    try:\n"
            "        sluice.empty((-1,))\n"
            "    except sluice.Error as e:\n"
            "        return e.file, e.line\n")
        ns = {"sluice": sluice}
        exec(compile(src, f"<site {i}>", "exec"), ns)
        for _ in range(2):
            assert ns["f"]() == (f"<site {i}>", i % 7 + 3)
