"""Arrays: NumPy round trips without a copy through the buffer protocol and DLPack, dtypes and
shapes, imports and their release, copies, memset, tracked host tasks."""

import gc
import threading

import numpy as np
import pytest

import sluice


def host_ctx():
    return sluice.Context("host", name="arrays")


def test_buffer_protocol_is_a_view_without_a_copy():
    c = host_ctx()
    b = sluice.array(np.arange(12, dtype=np.int32).reshape(3, 4), ctx=c)
    assert b.shape == (3, 4) and b.dtype == "int32" and b.nbytes == 48 and b.ndim == 2
    v = np.asarray(b)  # waits for the copy only
    assert v.ctypes.data == b.ptr and v.dtype == np.int32 and v.shape == (3, 4)
    np.testing.assert_array_equal(v, np.arange(12).reshape(3, 4))
    v[0, 0] = 99  # the same memory
    np.testing.assert_array_equal(b.numpy()[0, 0], 99)
    m = memoryview(b)
    assert m.format == "i" and m.shape == (3, 4) and not m.readonly


def test_dlpack_export_to_numpy_is_the_same_memory():
    c = host_ctx()
    b = sluice.zeros(16, "float32", ctx=c)
    assert b.__dlpack_device__() == (1, 0)
    v = np.from_dlpack(b)  # NumPy 1.x marks DLPack imports read-only
    assert v.ctypes.data == b.ptr and v.dtype == np.float32
    np.asarray(b)[:] = 3  # the buffer protocol gives a writable view of the same memory
    np.testing.assert_array_equal(v, np.full(16, 3, np.float32))


def test_dlpack_import_from_numpy_is_the_same_memory():
    a = np.arange(10.0)
    s = sluice.from_dlpack(a)
    assert s.ptr == a.ctypes.data and s.memory == "host" and s.shape == (10,)
    c = host_ctx()
    d = sluice.empty(10, ctx=c)
    sluice.copy(d, s, ctx=c)
    np.testing.assert_array_equal(d.numpy(), a)


def test_round_trip_numpy_sluice_numpy_keeps_one_buffer():
    a = np.arange(6.0)
    back = np.from_dlpack(sluice.from_dlpack(a))
    assert back.ctypes.data == a.ctypes.data
    a[0] = -1
    assert back[0] == -1


@pytest.mark.parametrize(
    "dtype",
    ["float16", "float32", "float64", "complex64", "complex128", "int8", "int16", "int32",
     "int64", "uint8", "uint16", "uint32", "uint64", "bool"],
)
def test_every_dtype_round_trips(dtype):
    c = host_ctx()
    src = (np.arange(8) % 2).astype(dtype)
    b = sluice.array(src, ctx=c)
    assert b.dtype == np.dtype(dtype).name
    if dtype != "bool" or np.lib.NumpyVersion(np.__version__) >= "1.25.0":  # DLPack bool
        np.testing.assert_array_equal(np.from_dlpack(b), src)
    np.testing.assert_array_equal(np.asarray(b), src)
    np.testing.assert_array_equal(sluice.asarray(src).numpy(), src)


def test_readonly_arrays_import_through_the_buffer_protocol():
    a = np.arange(4.0)
    a.setflags(write=False)
    s = sluice.asarray(a)
    assert s.readonly
    c = host_ctx()
    with pytest.raises(sluice.Error):
        sluice.copy(s, np.zeros(4), ctx=c)
    assert memoryview(s).readonly
    with pytest.raises(ValueError):
        np.frombuffer(s, dtype=np.float64)[0] = 1  # a read-only view


def test_pinned_buffers_and_memset(backend):
    dev = sluice.Device(backend, 0)
    c = sluice.Context(dev)
    p = sluice.PinnedBuffer((2, 3), "int32", device=dev)
    assert p.memory == "pinned"
    sluice.memset(p, 0, ctx=c)
    np.testing.assert_array_equal(np.asarray(p), np.zeros((2, 3), np.int32))
    d = sluice.array(np.arange(6, dtype=np.int32).reshape(2, 3), ctx=c)
    sluice.copy(p, d, ctx=c)
    np.testing.assert_array_equal(p.numpy(), np.arange(6).reshape(2, 3))


def test_fill_converts_the_value_to_each_dtype(backend):
    dev = sluice.Device(backend, 0)
    c = sluice.Context(dev)
    for dtype, value in (("float32", 2.5), ("int16", -3), ("uint8", 200), ("complex64", 1 - 2j),
                         ("bool", True), ("float64", np.float64(0.1))):
        x = sluice.empty((3, 5), dtype, ctx=c)
        sluice.fill(x, value, ctx=c)
        np.testing.assert_array_equal(x.numpy(), np.full((3, 5), value, dtype=dtype))
    # without ctx: the current context; another library's host memory is filled on return by a
    # host context, and refused with the reason by a cuda one (a GPU cannot write pageable memory)
    host = np.zeros(7, np.int32)
    if backend == "cuda":
        with c, pytest.raises(sluice.Error, match="pageable host memory"):
            sluice.fill(host, 9)
        c = sluice.Context(sluice.Device("host", 0))
    with c:
        sluice.fill(host, 9)
        np.testing.assert_array_equal(host, np.full(7, 9, np.int32))
        sluice.memset(host, 0)
    np.testing.assert_array_equal(host, np.zeros(7, np.int32))
    ro = np.zeros(3)
    ro.flags.writeable = False
    with c, pytest.raises(sluice.Error, match="read-only"):
        sluice.fill(ro, 1.0)
    with c, pytest.raises(sluice.Error, match="read-only"):
        sluice.memset(ro, 0)


def test_fill_is_ordered_after_readers_on_other_contexts(backend):
    dev = sluice.Device(backend, 0)
    a, b = sluice.Context(dev, name="a"), sluice.Context(dev, name="b")
    x = sluice.array(np.arange(1000.0), ctx=a)
    out = sluice.empty(1000, ctx=a)
    gate = threading.Event()
    a.host_task(lambda: gate.wait(10))
    sluice.copy(out, x, ctx=a)   # reads x after the gate
    sluice.fill(x, -1.0, ctx=b)  # must wait for that read
    gate.set()
    np.testing.assert_array_equal(out.numpy(), np.arange(1000.0))
    np.testing.assert_array_equal(x.numpy(), np.full(1000, -1.0))


def test_device_arrays_on_each_backend(backend):
    dev = sluice.Device(backend, 0)
    c = sluice.Context(dev)
    src = np.random.default_rng(1).standard_normal(1000)
    d = sluice.array(src, ctx=c)
    e = sluice.empty(1000, ctx=c)
    sluice.copy(e, d, ctx=c)
    np.testing.assert_array_equal(e.numpy(), src)  # a view on the host, a copy on cuda
    if backend == "cuda":
        with pytest.raises(BufferError):
            memoryview(e)
        assert "__cuda_array_interface__" in dir(type(e)) and e.__cuda_array_interface__["version"] == 3
    else:
        assert not hasattr(e, "__cuda_array_interface__")


def test_reshape_is_a_view():
    c = host_ctx()
    b = sluice.array(np.arange(6.0), ctx=c)
    r = b.reshape(2, 3)
    assert r.shape == (2, 3) and r.ptr == b.ptr and r.object_id == b.object_id
    with pytest.raises(sluice.Error):
        b.reshape(4, 2)


def test_imports_are_released_after_the_work_on_them():
    c = host_ctx()
    before = sluice._sluice._pending_releases()
    d = sluice.empty(1 << 16, ctx=c)
    src = np.ones(1 << 16)
    sluice.copy(d, src, ctx=c)  # src is imported, registered and kept until the copy ran
    del src
    gc.collect()
    sluice._sluice._collect()
    assert sluice._sluice._pending_releases() == 0
    np.testing.assert_array_equal(d.numpy(), np.ones(1 << 16))
    assert before >= 0


def test_an_import_dropped_inside_a_host_task_is_released_after_the_next_call():
    """Python may drop the last view of an import inside a host task (the callable's own
    reference, or its garbage collector's): the release is marked by the next call into the
    module on a Python thread (on cuda a host task may not call CUDA; test_gpu.py)."""
    c = host_ctx()
    a = np.arange(64.0)
    box = [sluice.asarray(a)]
    held = box[0].object_id
    sluice._sluice._collect()
    c.host_task(lambda: box.clear())
    c.synchronize()
    assert not box
    assert sluice._sluice._pending_releases() == 1  # dropped, its mark waits for a Python thread
    sluice._sluice._collect()
    assert sluice._sluice._pending_releases() == 0
    sluice.synchronize_device("host")  # no context holds a failure
    again = sluice.asarray(a)  # registered anew: the old registration is gone
    assert again.object_id != held


def test_the_same_memory_imported_twice_shares_one_registration():
    a = np.zeros(32)
    x = sluice.asarray(a)
    y = sluice.asarray(a)
    assert x.object_id == y.object_id
    del x
    gc.collect()
    sluice._sluice._collect()
    z = sluice.asarray(a)  # still registered: y holds it
    assert z.object_id == y.object_id


def test_a_slice_of_an_imported_array_is_a_view_of_its_region():
    a = np.arange(100.0)
    whole = sluice.asarray(a)
    part = sluice.asarray(a[10:20])
    assert part.object_id == whole.object_id and part.ptr == whole.ptr + 80


def test_lists_are_not_arrays_but_array_copies_them():
    with pytest.raises(TypeError):
        sluice.asarray([1.0, 2.0])
    c = host_ctx()
    np.testing.assert_array_equal(sluice.array([1.0, 2.0], ctx=c).numpy(), [1.0, 2.0])
    assert sluice.array([1, 2], dtype="int16", ctx=c).dtype == "int16"


def test_tracked_host_task_sees_earlier_work_and_orders_later_work(device):
    a = sluice.Context(device, name="a")
    b = sluice.Context(device, name="b")
    n = 1 << 18
    x = sluice.PinnedBuffer(n, device=device)
    y = sluice.PinnedBuffer(n, device=device)
    src = sluice.array(np.arange(n, dtype=np.float64), ctx=a)
    sluice.copy(x, src, ctx=a)

    def double(inp, out):
        out[:] = 2 * inp

    sluice.host_task(double, sluice.read(x), sluice.write(y), ctx=b)  # waits for the copy on a
    got = sluice.empty(n, ctx=a)
    sluice.copy(got, y, ctx=a)  # waits for the task on b
    np.testing.assert_array_equal(got.numpy(), 2 * np.arange(n))


def test_host_tasks_refuse_device_memory(backend):
    if backend == "host":
        pytest.skip("host-backend device memory is host memory")
    c = sluice.Context(sluice.Device(backend, 0))
    with pytest.raises(sluice.Error):
        sluice.host_task(lambda v: None, sluice.read(sluice.zeros(4, ctx=c)), ctx=c)


def test_copy_to_numpy_has_completed_when_it_returns():
    import threading

    c = host_ctx()
    x = sluice.zeros(1 << 16, ctx=c)
    gate = threading.Event()

    def slow(view):
        assert gate.wait(30)
        view.fill(4.0)

    sluice.host_task(slow, sluice.write(x), ctx=c)
    threading.Timer(0.05, gate.set).start()
    out = np.zeros(1 << 16)
    sluice.copy(out, x, ctx=c)  # pageable NumPy memory: waits for this copy (and what it needs)
    assert (out == 4.0).all()
