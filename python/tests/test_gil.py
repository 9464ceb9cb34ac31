"""The GIL: released while sluice waits, taken by host tasks that call Python; a host task and the
main thread both needing it never deadlock. Each scenario runs in a fresh interpreter with a
time limit, so a deadlock fails the test instead of hanging the suite."""

import pytest

from conftest import run_isolated

BACKENDS = ["host", "cuda"]


def scenario(backend, body):
    return run_isolated(
        f"""
import threading, time, sys
import numpy as np
import sluice
if not sluice.has_backend({backend!r}):
    print("SKIP"); sys.exit(0)
dev = sluice.Device({backend!r}, 0)
{body}
print("OK")
""",
        timeout=60,
    )


def check(backend, body):
    out = scenario(backend, body)
    if "SKIP" in out:
        pytest.skip(f"no {backend} device")
    assert "OK" in out, out


@pytest.mark.parametrize("backend", BACKENDS)
def test_synchronize_releases_the_gil_for_a_python_host_task(backend):
    # The task needs the GIL while the main thread waits for it.
    check(backend, """
c = sluice.Context(dev)
box = []
c.host_task(lambda: box.append(sum(range(100000))))
c.synchronize()
assert box == [sum(range(100000))]
""")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_wait_lets_another_python_thread_run(backend):
    # The host task waits for an event that another Python thread sets: if synchronize held the
    # GIL, that thread could never run.
    check(backend, """
c = sluice.Context(dev)
gate = threading.Event()
c.host_task(lambda: gate.wait(30) or (_ for _ in ()).throw(RuntimeError("gate timed out")))
threading.Thread(target=lambda: (time.sleep(0.1), gate.set())).start()
c.synchronize()
""")


@pytest.mark.parametrize("backend", BACKENDS)
def test_busy_python_main_thread_and_a_host_task(backend):
    # The main thread keeps running Python (holding the GIL between switches) while a host task
    # needs it.
    check(backend, """
c = sluice.Context(dev)
done = []
c.host_task(lambda: done.append(1))
deadline = time.time() + 30
while not c.idle():
    assert time.time() < deadline
    sum(range(1000))
assert done == [1]
""")


@pytest.mark.parametrize("backend", BACKENDS)
def test_value_waits_across_contexts_for_a_python_task(backend):
    check(backend, """
a = sluice.Context(dev, name="a")
b = sluice.Context(dev, name="b")
x = sluice.PinnedBuffer(1000, device=dev)
def produce(v):
    time.sleep(0.05)
    v[:] = 2.0
sluice.host_task(produce, sluice.write(x), ctx=a)
m = sluice.Managed(0.0, ctx=b)
b.wait_for(a)
m.assign(m + 1.0, ctx=b)
assert m.value() == 1.0
assert float(np.asarray(x).sum()) == 2000.0
""")


@pytest.mark.parametrize("backend", BACKENDS)
def test_host_task_that_calls_sluice_while_main_waits(backend):
    # The task issues and waits for work on another context (releasing the GIL it holds).
    check(backend, """
a = sluice.Context(dev, name="a")
b = sluice.Context(dev, name="b")
box = []
def task():
    b.host_task(lambda: box.append("inner"))
    b.synchronize()
    box.append("outer")
if dev.backend == "cuda":
    # cuda host tasks must not wait for cuda work (they share one thread): use a host context
    a = sluice.Context("host", name="a")
    b = sluice.Context("host", name="b")
a.host_task(task)
a.synchronize()
assert box == ["inner", "outer"], box
""")


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropping_a_context_with_pending_python_tasks(backend):
    # The destructor waits for the tasks, which need the GIL.
    check(backend, """
box = []
for i in range(20):
    c = sluice.Context(dev)
    c.host_task(lambda i=i: (time.sleep(0.001), box.append(i)))
    del c
assert sorted(box) == list(range(20))
""")


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_threads_issuing_and_waiting_at_once(backend):
    check(backend, """
errors = []
def worker(k):
    try:
        c = sluice.Context(dev)
        for i in range(50):
            c.host_task(lambda: sum(range(100)))
            if i % 10 == 0:
                c.synchronize()
        c.synchronize()
    except Exception as e:
        errors.append(e)
threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
for t in threads: t.start()
for t in threads: t.join(30)
assert not errors and not any(t.is_alive() for t in threads)
""")


def test_pending_python_tasks_at_exit_run_before_the_interpreter_goes():
    out = run_isolated(
        """
import sluice, time
c = sluice.Context("host")
c.host_task(lambda: (time.sleep(0.1), print("task ran", flush=True)))
print("main done", flush=True)
"""
    )
    assert "main done" in out and "task ran" in out
