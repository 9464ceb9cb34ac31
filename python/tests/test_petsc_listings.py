"""The listings of reference 000 (PETSc's asynchronous model) written in Python: marked intent
around user work (Listings 4 and 6), executable expressions (9), implicitly synchronous managed
scalars (10), the asynchronous normalization (11), the mixed CG of three streams (12), and the
timing loop (13)."""

import time

import numpy as np
import pytest

import sluice

la = sluice.la


def test_listing_4_and_6_marked_intent_around_user_work(device):
    """VecScale written by a user: the work on the array is marked, so a later copy on another
    context waits for it. Listing 6 registers a plain host buffer for the same."""
    dctx_a = sluice.Context(device, name="a")
    dctx_b = sluice.Context(device, name="b")
    x = sluice.PinnedBuffer(1000, device=device)
    sluice.memset(x, 0, ctx=dctx_a)

    def scale_kernel(view, alpha):
        time.sleep(0.02)  # slow enough that an unordered reader would see the old values
        view[:] = np.arange(view.size) * alpha

    sluice.host_task(scale_kernel, sluice.read_write(x), 3.0, ctx=dctx_a)
    y = sluice.empty(1000, ctx=dctx_b)
    sluice.copy(y, x, ctx=dctx_b)  # MarkIntent(b, x, READ): waits for the kernel
    np.testing.assert_array_equal(y.numpy(), 3.0 * np.arange(1000))

    registered = np.zeros(1000)  # Listing 6: PetscDeviceRegisterMemory on a host region
    r = sluice.asarray(registered)
    assert r.object_id != 0
    sluice.host_task(lambda v: v.fill(1.0), sluice.write(r), ctx=dctx_a)
    out = sluice.empty(1000, ctx=dctx_b)
    sluice.copy(out, r, ctx=dctx_b)
    np.testing.assert_array_equal(out.numpy(), np.ones(1000))


def test_listing_9_executable_expression(device):
    dctx = sluice.Context(device)
    with dctx:
        x = sluice.Managed(1.0)
        y = sluice.Managed(2.0)
        z = sluice.Managed(3.0)
        expr = sluice.compile(x * y + z / (x - y))
        result = sluice.Managed(dtype="float64")
        expr.run(result)
        assert result.value() == 2.0 + 3.0 / -1.0
        assert expr.info["loads"] == 3


def test_listing_10_managed_scalars_are_implicitly_synchronous(device):
    """x = 2 * y; then the host reads it: value() waits for the producer only."""
    with sluice.Context(device, kind="blocking"):
        y = sluice.Managed(21.0)
        x = sluice.eval(2 * y)
        assert x.value() == 42.0


def test_listing_11_asynchronous_normalization(device):
    """Listing 1 (norm, then scale by 1/norm) with the norm kept on the device."""
    dctx = sluice.Context(device)
    v = la.Vec(np.arange(1.0, 101.0), ctx=dctx)
    norm = sluice.Managed(dtype="float64")
    la.norm(v, "two", ctx=dctx, out=norm)  # VecNormAsync
    la.scale(v, 1.0 / norm, ctx=dctx)  # VecScaleAsync: 1/norm evaluated on the device
    assert la.norm(v) == pytest.approx(1.0)
    assert sluice.scalar_stats()["host_reads"] >= 0


def test_listing_12_mixed_cg_on_three_contexts(device):
    """The preconditioned CG loop of Listing 12 with synchronous and asynchronous calls mixed
    over three contexts, no wait_for and no synchronize; against the library's CG."""
    dctx_a = sluice.Context(device, name="a")
    dctx_b = sluice.Context(device, name="b")
    dctx_c = sluice.Context(device, name="c")
    A = la.Mat.stencil("2d5", 24, 24, ctx=dctx_a)
    n = A.rows
    B = la.Vec(n, ctx=dctx_a)
    one = la.Vec(np.ones(n), ctx=dctx_a)
    la.mult(A, one, B)
    P, W = la.Vec(n, ctx=dctx_a), la.Vec(n, ctx=dctx_a)
    Z, D = la.Vec(n, ctx=dctx_c), la.Vec(n, ctx=dctx_c)
    X, R = la.Vec(n, ctx=dctx_b), la.Vec(n, ctx=dctx_b)
    la.diagonal(A, D)
    ones_c = la.Vec(np.ones(n), ctx=dctx_c)
    la.pointwise_divide(D, ones_c, D)  # Jacobi: 1 / diag(A)
    a, beta, betaold, dp = (sluice.Managed(dtype="float64") for _ in range(4))
    rtol, max_it = 1e-8, 1000

    la.set(X, 0.0)
    la.copy(B, R)
    la.pointwise_mult(Z, R, D)
    la.norm(Z, "two", ctx=dctx_a, out=dp)
    ttol = rtol * dp.value()
    la.dot(Z, R, ctx=dctx_b, out=beta)
    la.copy(Z, P)
    la.mult(A, P, W)
    la.dot(P, W, ctx=dctx_b, out=a)
    a = sluice.eval(beta / a, ctx=dctx_c)
    betaold = sluice.eval(beta, ctx=dctx_a)
    la.axpy(X, a, P, ctx=dctx_b)
    la.axpy(R, -a, W, ctx=dctx_c)
    la.pointwise_mult(Z, R, D)
    la.norm(Z, "two", ctx=dctx_a, out=dp)
    its = 1
    done = dp.value() <= ttol
    if not done:
        la.dot(Z, R, ctx=dctx_b, out=beta)
    for _ in range(1, max_it):
        if done:
            break
        b = sluice.eval(beta / betaold, ctx=dctx_a)  # asynchronous, on the device
        la.aypx(P, b.value(), Z)  # synchronous: b.value() waits for b alone
        la.mult(A, P, W)
        la.dot(P, W, ctx=dctx_b, out=a)
        a = sluice.eval(beta / a, ctx=dctx_c)
        betaold = sluice.eval(beta, ctx=dctx_a)
        la.axpy(X, a, P, ctx=dctx_b)
        la.axpy(R, -a, W, ctx=dctx_c)
        la.pointwise_mult(Z, R, D)
        la.norm(Z, "two", ctx=dctx_a, out=dp)
        its += 1
        done = dp.value() <= ttol
        if not done:
            la.dot(Z, R, ctx=dctx_b, out=beta)

    x = la.Vec(n, ctx=dctx_c)
    r = la.Ksp(A, type="cg", pc="jacobi", rtol=rtol, atol=0, mode="sync").solve(B, x)
    assert its == r.iterations
    np.testing.assert_allclose(X.to_numpy(), x.to_numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(X.to_numpy(), np.ones(n), atol=1e-6)


def test_listing_13_timing_loop(device):
    """One warm-up solve, then timed solves: the end-to-end duration of each solve call."""
    ctx = sluice.Context(device)
    A = la.Mat.stencil("2d5", 32, 32, ctx=ctx)
    b = la.Vec(np.ones(A.rows), ctx=ctx)
    x = la.Vec(A.rows, ctx=ctx)
    ksp = la.Ksp(A, rtol=1e-8, atol=0, mode="async")
    ksp.solve(b, x)  # warm-up
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        r = ksp.solve(b, x)
        times.append(time.perf_counter() - t0)
        assert r.converged
    assert min(times) > 0
