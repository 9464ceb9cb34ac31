"""The la layer from Python: Vec (an Array too), Mat from SciPy, Matrix Market files and
stencils, Ksp in sync, async and graph modes against SciPy."""

import os

import numpy as np
import pytest

import sluice
from conftest import MATRIX_DIR

la = sluice.la
sp = pytest.importorskip("scipy.sparse")


def laplacian_2d(n):
    d = sp.diags([4.0] * (n * n))
    ex = sp.kron(sp.eye(n), sp.diags([-1.0, -1.0], [-1, 1], shape=(n, n)))
    ey = sp.kron(sp.diags([-1.0, -1.0], [-1, 1], shape=(n, n)), sp.eye(n))
    return (d + ex + ey).tocsr()


def test_vec_is_an_array(ctx):
    with ctx:
        v = la.Vec(np.arange(5.0))
        assert isinstance(v, sluice.Array) and v.shape == (5,) and v.dtype == "float64"
        np.testing.assert_array_equal(v.to_numpy(), np.arange(5.0))
        np.testing.assert_array_equal(v.numpy(), np.arange(5.0))
        w = v.duplicate()
        la.copy(v, w)
        la.scale(w, 2.0)
        np.testing.assert_array_equal(w.to_numpy(), 2 * np.arange(5.0))
        assert la.dot(v, w) == pytest.approx(2 * 30.0)
        assert la.norm(v, "inf") == 4.0 and la.sum(v) == 10.0
        assert la.max(v) == 4.0 and la.min(v) == 0.0


def test_sync_and_async_forms_mix(device):
    a = sluice.Context(device, name="a")
    b = sluice.Context(device, name="b")
    x = la.Vec(np.ones(100), ctx=a)
    y = la.Vec(np.full(100, 2.0), ctx=a)
    nrm = sluice.Managed(dtype="float64")
    la.norm(x, "two", ctx=b, out=nrm)  # async on b
    la.scale(y, 1.0 / nrm, ctx=a)  # async on a: an expression, waits for the norm on b
    assert la.dot(x, y) == pytest.approx(100 * 2.0 / 10.0)  # sync
    la.axpby(y, sluice.Managed(1.0, ctx=a), 0.0, x, ctx=a)  # one device scalar, one host
    np.testing.assert_allclose(y.to_numpy(), np.ones(100))
    with pytest.raises(TypeError):
        la.scale(y, sluice.Managed(1, dtype="int32"), ctx=a)


@pytest.mark.parametrize("mode", ["sync", "async", "graph"])
@pytest.mark.parametrize("ksp", ["cg", "tfqmr", "cg1"])
def test_ksp_against_scipy(device, mode, ksp):
    ctx = sluice.Context(device)
    n = 24
    A_sp = laplacian_2d(n)
    A = la.Mat.from_scipy(A_sp, ctx=ctx)
    assert A.shape == A_sp.shape and A.nnz == A_sp.nnz
    x_true = np.random.default_rng(3).standard_normal(n * n)
    b = la.Vec(A_sp @ x_true, ctx=ctx)
    x = la.Vec(n * n, ctx=ctx)
    variant = "single-reduction" if ksp == "cg1" else "classic"
    solver = la.Ksp(A, type=ksp[:2] if ksp == "cg1" else ksp, cg_variant=variant, rtol=1e-10,
                    atol=0, mode=mode, history=True)
    assert solver.options["cg_variant"] == variant
    r = solver.solve(b, x)
    assert r.converged and r.reason == "CONVERGED_RTOL" and r.iterations > 0
    np.testing.assert_allclose(x.to_numpy(), x_true, rtol=1e-6, atol=1e-6)
    assert len(r.history) > 0


def test_modes_agree_bit_for_bit(device):
    ctx = sluice.Context(device)
    A = la.Mat.stencil("2d5", 32, 32, ctx=ctx)
    b = la.Vec(A.rows, ctx=ctx)
    one = la.Vec(np.ones(A.rows), ctx=ctx)
    la.mult(A, one, b)
    results = {}
    for mode in ("sync", "async", "graph"):
        x = la.Vec(A.rows, ctx=ctx)
        r = la.Ksp(A, rtol=1e-8, atol=0, mode=mode).solve(b, x)
        results[mode] = (r.iterations, x.to_numpy())
    assert results["sync"][0] == results["async"][0] == results["graph"][0]
    np.testing.assert_array_equal(results["sync"][1], results["async"][1])
    np.testing.assert_array_equal(results["sync"][1], results["graph"][1])


def test_stencils_and_csr_agree(ctx):
    with ctx:
        free = la.Mat.stencil("3d7", 6, 5, 4)
        csr = la.Mat.stencil_csr("3d7", 6, 5, 4)
        assert free.is_matrix_free and not csr.is_matrix_free
        x = la.Vec(np.random.default_rng(0).standard_normal(free.rows))
        y1, y2 = la.Vec(free.rows), la.Vec(free.rows)
        la.mult(free, x, y1)
        la.mult(csr, x, y2)
        np.testing.assert_allclose(y1.to_numpy(), y2.to_numpy(), rtol=1e-14)
        s = csr.to_scipy()
        np.testing.assert_allclose(s @ x.to_numpy(), y2.to_numpy(), rtol=1e-14)
        with pytest.raises(sluice.Error):
            free.to_scipy()


def test_matrix_market_file(ctx):
    path = os.path.join(MATRIX_DIR, "bcsstk01.mtx")
    if not os.path.exists(path):
        pytest.skip(f"{path} is not here")
    scipy_io = pytest.importorskip("scipy.io")
    with ctx:
        A = la.Mat.read_matrix_market(path)
        ref = scipy_io.mmread(path).tocsr()
        assert A.shape == ref.shape
        np.testing.assert_allclose(A.to_scipy().toarray(), ref.toarray())
        b = la.Vec(ref @ np.ones(A.rows))
        x = la.Vec(A.rows)
        r = la.Ksp(A, rtol=1e-10, atol=0, max_it=5000).solve(b, x)
        assert r.converged
        np.testing.assert_allclose(x.to_numpy(), np.ones(A.rows), rtol=1e-4)
    with pytest.raises(sluice.Error, match="no-such-file"):
        la.Mat.read_matrix_market("/no-such-file.mtx", ctx=ctx)


def test_monitor_and_options(ctx):
    with ctx:
        A = la.Mat.stencil("2d5", 16, 16)
        b = la.Vec(np.ones(A.rows))
        x = la.Vec(A.rows)
        seen = []
        solver = la.Ksp(A, mode="async", monitor=lambda i, r: seen.append((i, r)))
        r = solver.solve(b, x)
        assert [i for i, _ in seen] == list(range(len(seen))) and len(seen) >= r.iterations
        assert solver.options["mode"] == "async"
        solver.set_options(mode="sync", monitor=None)
        assert solver.options["mode"] == "sync"
        with pytest.raises(TypeError, match="unknown option"):
            la.Ksp(A, tolerance=1)


def test_vec_goes_to_numpy_without_a_copy(ctx):
    with ctx:
        v = la.Vec(np.zeros(8))
        if v.device.backend != "host":
            pytest.skip("device memory")
        a = np.asarray(v)  # the buffer protocol; np.from_dlpack gives a read-only view in NumPy 1.x
        a[:] = 3.0
        assert np.from_dlpack(v).ctypes.data == v.ptr
        assert la.sum(v) == 24.0
