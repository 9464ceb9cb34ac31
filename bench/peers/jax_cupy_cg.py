#!/usr/bin/env python3
"""Peers of `sluice bench`: the same Jacobi-preconditioned CG, fixed iteration count, on the same
Laplace problems, with JAX (the whole solve jitted, and the matvec jitted with the loop in Python)
and CuPy (cupyx.scipy.sparse.linalg.cg on CSR). Writes the JSON schema of `sluice bench`
("sluice-bench-la/1") so that bench/plot.py draws everything together.

    python3 bench/peers/jax_cupy_cg.py --from out/bench_la.json --json out/peers.json

--from takes the problems (stencil, grid) from a sluice bench file; without it the sizes follow
the same rule as `sluice bench` (--min-nnz, --max-nnz, --per-decade). A peer that is missing or
fails is reported and skipped, never fatal. Methodology as sluice's (reference 000, 4.1): one
warm-up solve (which also compiles), then the minimum and median of --repeat timed solves, each
ended by a device synchronization.

The operators are sluice's (sluice/la.hpp): centre = number of neighbours, every neighbour -1,
Dirichlet boundaries (2d5: 4, 2d9: 8, 3d7: 6, 3d27: 26).
"""

import argparse
import itertools
import json
import math
import statistics
import sys
import time

STENCILS = {"2d5": (2, False), "2d9": (2, True), "3d7": (3, False), "3d27": (3, True)}


def offsets(stencil):
    dims, box = STENCILS[stencil]
    out = []
    for d in itertools.product((-1, 0, 1), repeat=dims):
        away = sum(abs(v) for v in d)
        if away == 0 or (not box and away > 1):
            continue
        out.append(d)
    return out


def points(stencil):
    return len(offsets(stencil)) + 1


def nnz_of(stencil, grid):
    dims = STENCILS[stencil][0]
    total = math.prod(grid[:dims])
    for d in offsets(stencil):
        total += math.prod(max(0, grid[k] - abs(d[k])) for k in range(dims))
    return total


def grid_for_nnz(stencil, nnz):
    dims = STENCILS[stencil][0]
    n = (nnz / points(stencil)) ** (1.0 / dims)
    return max(2, int(round(n)))


def problems_from_rule(args):
    out = []
    for s in args.stencils.split(","):
        ns = set()
        steps = math.ceil(math.log10(args.max_nnz / args.min_nnz) * args.per_decade - 1e-9)
        for i in range(steps + 1):
            target = min(args.min_nnz * 10 ** (i / args.per_decade), args.max_nnz)
            ns.add(grid_for_nnz(s, target))
        for n in sorted(ns):
            dims = STENCILS[s][0]
            out.append((s, [n] * dims + [1] * (3 - dims)))
    return out


def problems_from_file(path, ksp):
    with open(path) as f:
        data = json.load(f)
    seen = []
    for r in data.get("results", []):
        if r.get("ksp") != ksp:
            continue
        key = (r["stencil"], list(r["grid"]))
        if key not in seen:
            seen.append(key)
    return seen


def problem_arguments(doc, stencils, max_nnz, repeat):
    """The command-line options every peer script shares: where the problems come from."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from", dest="source", help="take the problems from a sluice bench JSON file")
    ap.add_argument("--stencils", default=stencils)
    ap.add_argument("--min-nnz", type=float, default=1e3)
    ap.add_argument("--max-nnz", type=float, default=max_nnz)
    ap.add_argument("--per-decade", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=repeat)
    return ap


def timed(fn, repeat):
    fn()  # warm-up (and compilation)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


# ---- JAX ---------------------------------------------------------------------------------------


def jax_setup():
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    return jax, jnp


def jax_operator(jnp, stencil, grid):
    dims = STENCILS[stencil][0]
    shape = tuple(reversed(grid[:dims]))  # (ny, nx) or (nz, ny, nx): x fastest, as sluice
    offs = offsets(stencil)
    centre = float(len(offs))

    def apply(u):
        u = u.reshape(shape)
        p = jnp.pad(u, 1)
        acc = jnp.zeros_like(u)
        for d in offs:
            # d is (dx, dy[, dz]); the array axes are reversed
            sl = tuple(slice(1 + d[dims - 1 - k], 1 + d[dims - 1 - k] + shape[k]) for k in range(dims))
            acc = acc + p[sl]
        return (centre * u - acc).reshape(-1)

    return apply, centre


def jax_solvers(stencil, grid, iterations):
    jax, jnp = jax_setup()
    apply, centre = jax_operator(jnp, stencil, grid)
    n = math.prod(grid)
    inv = 1.0 / centre

    def cg(b):
        x = jnp.zeros_like(b)
        r = b
        z = inv * r
        p = z
        rz = jnp.dot(r, z)

        def body(_, state):
            x, r, p, rz = state
            w = apply(p)
            a = rz / jnp.dot(p, w)
            x = x + a * p
            r = r - a * w
            z = inv * r
            rz_new = jnp.dot(r, z)
            p = z + (rz_new / rz) * p
            return x, r, p, rz_new

        x, r, p, rz = jax.lax.fori_loop(0, iterations, body, (x, r, p, rz))
        return x

    whole = jax.jit(cg)
    matvec = jax.jit(apply)

    def cg_loop(b):
        x = jnp.zeros_like(b)
        r = b
        z = inv * r
        p = z
        rz = jnp.dot(r, z)
        for _ in range(iterations):
            w = matvec(p)
            a = rz / jnp.dot(p, w)
            x = x + a * p
            r = r - a * w
            z = inv * r
            rz_new = jnp.dot(r, z)
            p = z + (rz_new / rz) * p
            rz = rz_new
        return x

    b = matvec(jnp.ones(n, dtype=jnp.float64))
    b.block_until_ready()
    run_whole = lambda: whole(b).block_until_ready()
    run_loop = lambda: cg_loop(b).block_until_ready()
    check = float(jnp.max(jnp.abs(whole(b))))
    return {"jax-jit": run_whole, "jax-loop": run_loop}, check


# ---- CuPy --------------------------------------------------------------------------------------


def laplacian_csr(stencil, grid):
    """The stencil's matrix as a SciPy CSR matrix (float64), as sluice assembles it."""
    import scipy.sparse as sp

    dims, box = STENCILS[stencil]
    ns = grid[:dims]

    def ones3(m):
        return sp.diags([1.0, 1.0, 1.0], [-1, 0, 1], shape=(m, m), format="csr")

    def lap1(m):
        return sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m), format="csr")

    if box:
        # centre = 3^dims - 1, every neighbour -1: (3^dims) I - (B x ... x B), B = tridiag(1, 1, 1)
        K = ones3(ns[0])
        for m in ns[1:]:
            K = sp.kron(ones3(m), K, format="csr")
        A = (3**dims) * sp.identity(K.shape[0], format="csr") - K
    else:
        A = None
        for axis in range(dims):
            term = None
            for k in range(dims):
                f = lap1(ns[k]) if k == axis else sp.identity(ns[k], format="csr")
                term = f if term is None else sp.kron(f, term, format="csr")
            A = term if A is None else A + term
    A = A.tocsr().astype("float64")
    A.eliminate_zeros()
    return A


def cupy_solver(stencil, grid, iterations):
    import cupy as cp
    import cupyx.scipy.sparse as csp
    import cupyx.scipy.sparse.linalg as csl

    A = csp.csr_matrix(laplacian_csr(stencil, grid))
    inv = 1.0 / A.diagonal()
    M = csl.LinearOperator(A.shape, matvec=lambda r: inv * r, dtype=cp.float64)
    b = A @ cp.ones(A.shape[0], dtype=cp.float64)

    def run():
        try:
            x, _ = csl.cg(A, b, rtol=0.0, atol=0.0, maxiter=iterations, M=M)
        except TypeError:  # CuPy before 13 spells it tol
            x, _ = csl.cg(A, b, tol=0.0, atol=0.0, maxiter=iterations, M=M)
        cp.cuda.Device().synchronize()
        return x

    return {"cupy-cg": run}, int(A.nnz)


# ---- main --------------------------------------------------------------------------------------


def device_name():
    try:
        import cupy as cp

        return cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception:
        pass
    try:
        import jax

        return str(jax.devices()[0])
    except Exception:
        return "unknown"


def main():
    ap = problem_arguments(__doc__, stencils="2d5,2d9,3d7,3d27", max_nnz=1e8, repeat=10)
    ap.add_argument("--peers", default="jax-jit,jax-loop,cupy-cg")
    ap.add_argument("--cupy-max-nnz", type=float, default=5e7,
                    help="largest problem for CuPy (its CSR is assembled on the host by SciPy)")
    ap.add_argument("--loop-max-nnz", type=float, default=1e7,
                    help="largest problem for jax-loop (a Python loop: slow and uninteresting above)")
    ap.add_argument("--json", default="peers.json")
    args = ap.parse_args()

    wanted = set(args.peers.split(","))
    problems = problems_from_file(args.source, "cg") if args.source else problems_from_rule(args)
    out = {
        "schema": "sluice-bench-la/1",
        "tool": "peers",
        "device": "cuda:0",
        "device_name": device_name(),
        "iterations": args.iterations,
        "pc": "jacobi",
        "repeat": args.repeat,
        "results": [],
        "errors": [],
    }
    for stencil, grid in problems:
        dims = STENCILS[stencil][0]
        label = f"{stencil} {'x'.join(str(g) for g in grid[:dims])}"
        nnz = nnz_of(stencil, grid)
        runners = {}
        if wanted & {"jax-jit", "jax-loop"}:
            try:
                r, _ = jax_solvers(stencil, grid, args.iterations)
                runners.update(
                    {k: (v, "matrix-free") for k, v in r.items()
                     if k in wanted and (k != "jax-loop" or nnz <= args.loop_max_nnz)})
            except Exception as e:  # noqa: BLE001 - a missing peer is reported, not fatal
                out["errors"].append(f"jax {label}: {type(e).__name__}: {e}")
        if "cupy-cg" in wanted and nnz <= args.cupy_max_nnz:
            try:
                r, cnnz = cupy_solver(stencil, grid, args.iterations)
                if cnnz != nnz:
                    out["errors"].append(f"cupy {label}: nnz {cnnz} differs from {nnz}")
                runners.update({k: (v, "csr") for k, v in r.items()})
            except Exception as e:  # noqa: BLE001
                out["errors"].append(f"cupy {label}: {type(e).__name__}: {e}")
        for impl, (fn, op) in runners.items():
            try:
                times = timed(fn, args.repeat)
            except Exception as e:  # noqa: BLE001
                out["errors"].append(f"{impl} {label}: {type(e).__name__}: {e}")
                continue
            out["results"].append(
                {
                    "impl": impl,
                    "mode": impl,
                    "ksp": "cg",
                    "stencil": stencil,
                    "operator": op,
                    "grid": grid,
                    "rows": math.prod(grid),
                    "nnz": nnz,
                    "iterations_done": args.iterations,
                    "times_s": times,
                    "min_s": min(times),
                    "median_s": statistics.median(times),
                }
            )
            print(f"{impl:<9} {label:<22} nnz {nnz:>11.3g}  min {min(times) * 1e3:9.3f} ms", flush=True)
    for e in out["errors"]:
        print("peer error:", e, file=sys.stderr)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
