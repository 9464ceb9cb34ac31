#!/usr/bin/env python3
"""Jacobi-preconditioned CG from Python, beside the same solves from C++ (`sluice solve`), JAX and
CuPy, on the same device in one run (goal: Python within 5 % of C++ per solve).

    PYTHONPATH=build/python python3 python/bench/bench_cg.py --sluice build/tools/sluice/sluice \
        --json out.json [--problems 2d5:64,2d5:1024,3d7:128] [--modes async,graph,sync]

Each problem is the matrix-free Laplacian (sluice.la.Mat.stencil) with b = A 1, solved for a
fixed number of iterations (--iterations, as GPU.md's table: 20). Methodology as the C++ tool's
(tools/sluice/la_problem.cpp, time_solve): one warm-up solve, then --repeat timed solves, each
between two synchronizes of the solving context; minimum and median reported. The C++ figures come
from `sluice solve --json` run here in the same session; JAX and CuPy from
bench/peers/jax_cupy_cg.py (skipped with the reason where they are missing).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def parse_problems(text):
    out = []
    for item in text.split(","):
        stencil, n = item.split(":")
        out.append((stencil, int(n)))
    return out


def grid(stencil, n):
    return [n, n, n] if stencil.startswith("3d") else [n, n, 1]


def python_solve_times(stencil, n, mode, iterations, repeat, device):
    import sluice

    la = sluice.la
    ctx = sluice.Context(device, name="bench")
    g = grid(stencil, n)
    A = la.Mat.stencil(stencil, g[0], g[1], g[2], ctx=ctx)
    b = la.Vec(A.rows, ctx=ctx)
    one = la.Vec(A.rows, ctx=ctx)
    la.set(one, 1.0)
    la.mult(A, one, b)
    x = la.Vec(A.rows, ctx=ctx)
    ksp = la.Ksp(A, type="cg", pc="jacobi", mode=mode, fixed_iterations=True, max_it=iterations)
    times = []
    for i in range(repeat + 1):
        ctx.synchronize()
        t0 = time.perf_counter()
        r = ksp.solve(b, x, ctx)
        ctx.synchronize()
        if i > 0:  # the first is the warm-up
            times.append(time.perf_counter() - t0)
    return times, r.iterations, A.nnz


def cpp_solve_times(cli, stencil, n, mode, iterations, repeat, device):
    cmd = [cli, "solve", "--stencil", stencil, "--n", str(n), "--mode", mode, "--ksp", "cg",
           "--pc", "jacobi", "--fixed", "--max-it", str(iterations), "--repeat", str(repeat),
           "--device", device, "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip()}")
    j = json.loads(done.stdout)
    return j["times_s"], j["iterations"]


def peers(problems, iterations, repeat):
    script = os.path.join(ROOT, "bench", "peers", "jax_cupy_cg.py")
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "problems.json")
        with open(src, "w") as f:
            json.dump({"results": [{"ksp": "cg", "stencil": s, "grid": grid(s, n)} for s, n in problems]}, f)
        out = os.path.join(tmp, "peers.json")
        done = subprocess.run([sys.executable, script, "--from", src, "--iterations", str(iterations),
                               "--repeat", str(repeat), "--peers", "jax-jit,cupy-cg", "--json", out],
                              capture_output=True, text=True, timeout=1800)
        if done.returncode != 0 or not os.path.exists(out):
            return [], [f"peers failed: {done.stderr.strip()[-2000:]}"]
        with open(out) as f:
            data = json.load(f)
        return data.get("results", []), data.get("errors", [])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sluice", required=True, help="the sluice program (C++ figures)")
    ap.add_argument("--problems", default="2d5:64,2d5:1024,3d7:128,2d5:4096,3d7:256")
    ap.add_argument("--modes", default="async,graph,sync")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--json", default="bench_python_cg.json")
    args = ap.parse_args()

    import sluice

    problems = parse_problems(args.problems)
    rows = []
    for stencil, n in problems:
        for mode in args.modes.split(","):
            py_times, its, nnz = python_solve_times(stencil, n, mode, args.iterations, args.repeat, args.device)
            cpp_times, cpp_its = cpp_solve_times(args.sluice, stencil, n, mode, args.iterations, args.repeat,
                                                 args.device)
            row = {
                "stencil": stencil, "n": n, "nnz": nnz, "mode": mode, "iterations": its,
                "python_min_s": min(py_times), "python_median_s": statistics.median(py_times),
                "cpp_min_s": min(cpp_times), "cpp_median_s": statistics.median(cpp_times),
                "python_times_s": py_times, "cpp_times_s": cpp_times,
            }
            row["overhead_min"] = row["python_min_s"] / row["cpp_min_s"] - 1
            row["overhead_median"] = row["python_median_s"] / row["cpp_median_s"] - 1
            if cpp_its != its:
                row["note"] = f"iterations differ: C++ {cpp_its}"
            rows.append(row)
            print(f"{stencil} {n:>5} {mode:<6} python {row['python_min_s'] * 1e3:8.3f} ms "
                  f"C++ {row['cpp_min_s'] * 1e3:8.3f} ms  overhead min {row['overhead_min'] * 100:+6.1f} % "
                  f"median {row['overhead_median'] * 100:+6.1f} %", flush=True)
    out = {
        "schema": "sluice-bench-python-cg/1",
        "device": args.device,
        "device_name": sluice.device_info(args.device).name,
        "iterations": args.iterations,
        "repeat": args.repeat,
        "goal_overhead": 0.05,
        "results": rows,
        "peers": [],
        "peer_errors": ["not run (the run ended before the peers finished)"],
    }

    def write():
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)

    write()  # sluice's figures are kept even if the peers' run is cut short
    peer_rows, peer_errors = ([], ["skipped (--no-peers)"]) if args.no_peers else peers(
        problems, args.iterations, args.repeat)
    for p in peer_rows:
        print(f"{p['impl']:<8} {p['stencil']} {p['grid']}  min {p['min_s'] * 1e3:8.3f} ms", flush=True)
    for e in peer_errors:
        print("peer:", e)
    out["peers"], out["peer_errors"] = peer_rows, peer_errors
    write()
    worst = max((r["overhead_median"] for r in rows if r["mode"] != "sync"), default=0.0)
    print(f"largest median overhead of Python over C++ (async, graph): {worst * 100:+.1f} % (goal 5 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
