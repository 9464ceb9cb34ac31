#!/usr/bin/env python3
"""Host peers of `sluice bench --backend host`: the same Jacobi-preconditioned solves, fixed
iteration count, on the same Laplace problems, with PETSc (Debian's petsc-dev: CSR, KSPCG and
KSPTFQMR, preconditioned norm, KSPConvergedSkip, on as many MPI ranks as the machine has cores)
and SciPy (scipy.sparse.linalg.cg on CSR, one process). Writes the JSON schema of `sluice bench`
("sluice-bench-la/1") so that bench/plot.py draws everything together.

    python3 bench/peers/host_peers.py --from out/bench_host.json --json out/peers_host.json

Run it with the Python that has Debian's SciPy (/usr/bin/python3 on Debian). PETSc's driver
(bench/peers/petsc_cg.c) is compiled with mpicc against pkg-config's PETSc into --build-dir on
first use; without petsc-dev (apt-get install petsc-dev) PETSc is skipped with a message, as is
SciPy without python3-scipy. Methodology as sluice's (reference 000, 4.1): one warm-up solve,
then the minimum and median of --repeat timed solves from a zero guess (PETSc: the slowest
rank's time of each solve, ranks started together by a barrier).
"""

import json
import math
import os
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from jax_cupy_cg import (  # noqa: E402
    STENCILS,
    laplacian_csr,
    problem_arguments,
    nnz_of,
    problems_from_file,
    problems_from_rule,
    timed,
)

HERE = os.path.dirname(os.path.abspath(__file__))


def result(impl, ksp, stencil, grid, nnz, times, op="csr", **extra):
    r = {
        "impl": impl,
        "mode": impl,
        "ksp": ksp,
        "stencil": stencil,
        "operator": op,
        "grid": grid,
        "rows": math.prod(grid),
        "nnz": nnz,
        "times_s": times,
        "min_s": min(times),
        "median_s": statistics.median(times),
    }
    r.update(extra)
    return r


# ---- PETSc -------------------------------------------------------------------------------------


def petsc_driver(build_dir):
    """The compiled driver's path, or (None, why)."""
    if shutil.which("pkg-config") is None or subprocess.run(
            ["pkg-config", "--exists", "PETSc"]).returncode != 0:
        return None, "PETSc not found (pkg-config PETSc): apt-get install petsc-dev to compare with it"
    for tool in ("mpicc", "mpirun"):
        if shutil.which(tool) is None:
            return None, f"{tool} not found (it comes with petsc-dev's MPI)"
    os.makedirs(build_dir, exist_ok=True)
    exe = os.path.join(build_dir, "petsc_cg")
    src = os.path.join(HERE, "petsc_cg.c")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "PETSc"], capture_output=True,
                               text=True, check=True).stdout.split()
        build = subprocess.run(["mpicc", "-O2", "-o", exe, src] + flags, capture_output=True, text=True)
        if build.returncode != 0:
            return None, "building the PETSc driver failed:\n" + build.stderr[-2000:]
    return exe, None


def run_petsc(exe, ranks, ksp, problems, iterations, repeat):
    cmd = ["mpirun", "-np", str(ranks)]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    specs = [f"{s}:{grid[0]}" for s, grid in problems]
    proc = subprocess.run(cmd + [exe, ksp, str(iterations), str(repeat)] + specs,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"mpirun failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


# ---- SciPy -------------------------------------------------------------------------------------


def scipy_solver(stencil, grid, iterations):
    import numpy as np
    import scipy
    import scipy.sparse.linalg as sl

    A = laplacian_csr(stencil, grid)
    inv = 1.0 / A.diagonal()
    M = sl.LinearOperator(A.shape, matvec=lambda r: inv * r, dtype=np.float64)
    b = A @ np.ones(A.shape[0])
    major, minor = (int(v) for v in scipy.__version__.split(".")[:2])
    tol = {"rtol": 0.0} if (major, minor) >= (1, 12) else {"tol": 0.0}

    def run():
        x, _ = sl.cg(A, b, atol=0.0, maxiter=iterations, M=M, **tol)
        return x

    return run, int(A.nnz)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "host CPU"


def main():
    ap = problem_arguments(__doc__, stencils="2d5,3d7", max_nnz=1e7, repeat=5)
    ap.add_argument("--ksp", default="cg,tfqmr", help="solvers for PETSc (SciPy runs cg)")
    ap.add_argument("--peers", default="petsc,scipy-cg")
    ap.add_argument("--ranks", type=int, default=os.cpu_count() or 1,
                    help="PETSc's MPI ranks (default: the machine's cores)")
    ap.add_argument("--build-dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "sluice-peers"))
    ap.add_argument("--json", default="peers_host.json")
    args = ap.parse_args()

    wanted = set(args.peers.split(","))
    ksps = [k for k in args.ksp.split(",") if k]
    out = {
        "schema": "sluice-bench-la/1",
        "tool": "peers",
        "device": "host:0",
        "device_name": cpu_name(),
        "iterations": args.iterations,
        "pc": "jacobi",
        "repeat": args.repeat,
        "results": [],
        "errors": [],
    }
    per_ksp = {}
    for ksp in ksps:
        per_ksp[ksp] = problems_from_file(args.source, ksp) if args.source else problems_from_rule(args)

    if "petsc" in wanted:
        exe, why = petsc_driver(args.build_dir)
        if exe is None:
            print(f"PETSc skipped: {why}", file=sys.stderr)
            out["errors"].append(f"petsc: {why}")
        else:
            for ksp in ksps:
                try:
                    for r in run_petsc(exe, args.ranks, ksp, per_ksp[ksp], args.iterations, args.repeat):
                        grid = next(g for s, g in per_ksp[ksp] if s == r["stencil"] and g[0] == r["n"])
                        if r["nnz"] != nnz_of(r["stencil"], grid):
                            out["errors"].append(f"petsc {r['stencil']} n={r['n']}: nnz {r['nnz']} "
                                                 f"differs from {nnz_of(r['stencil'], grid)}")
                        out["results"].append(result("petsc", ksp, r["stencil"], grid, r["nnz"], r["times_s"],
                                                     ranks=r["ranks"], iterations_done=r["iterations_done"]))
                        print(f"petsc {ksp:<5} {r['stencil']:<4} n={r['n']:<6} nnz {r['nnz']:>11.3g}  "
                              f"min {min(r['times_s']) * 1e3:9.3f} ms ({r['ranks']} ranks)", flush=True)
                except Exception as e:  # noqa: BLE001 - a failing peer is reported, not fatal
                    out["errors"].append(f"petsc {ksp}: {type(e).__name__}: {e}")

    if "scipy-cg" in wanted and "cg" in per_ksp:
        try:
            import scipy  # noqa: F401
        except ImportError:
            why = "SciPy not found in this Python (apt-get install python3-scipy; run /usr/bin/python3)"
            print(f"SciPy skipped: {why}", file=sys.stderr)
            out["errors"].append(f"scipy: {why}")
        else:
            for stencil, grid in per_ksp["cg"]:
                label = f"{stencil} {'x'.join(str(g) for g in grid[:STENCILS[stencil][0]])}"
                try:
                    run, nnz = scipy_solver(stencil, grid, args.iterations)
                    times = timed(run, args.repeat)
                except Exception as e:  # noqa: BLE001
                    out["errors"].append(f"scipy-cg {label}: {type(e).__name__}: {e}")
                    continue
                out["results"].append(result("scipy-cg", "cg", stencil, grid, nnz, times,
                                             iterations_done=args.iterations))
                print(f"scipy-cg    {label:<16} nnz {nnz:>11.3g}  min {min(times) * 1e3:9.3f} ms", flush=True)

    for e in out["errors"]:
        print("peer error:", e, file=sys.stderr)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
