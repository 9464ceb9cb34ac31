#!/usr/bin/env python3
"""sluice across MPI ranks on the host against PETSc with as many ranks, on the same Laplace
problems (CG with Jacobi, a fixed number of iterations from x = 0, b = A 1): `mpirun -np R sluice
solve --dist` in sync, async and graph modes, matrix-free and assembled (MPIAIJ), beside
`mpirun -np R petsc_cg` (bench/peers/petsc_cg.c: MATAIJ, KSPCG, PCJACOBI). The runs alternate so
that a busy machine slows both alike; each time is the minimum over the repeats of the slowest
rank's solve. Writes JSON and prints a table.

    python3 bench/dist_host.py --sluice build/default/tools/sluice/sluice --ranks 2 \\
        --problems 2d5:512,2d5:1024,3d7:48,3d7:96 --json docs/bench/dist_host.json
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "peers"))
from host_peers import petsc_driver  # noqa: E402


def mpirun(ranks):
    cmd = ["mpirun", "-np", str(ranks), "--bind-to", "none"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    if ranks > (os.cpu_count() or 1):
        cmd.append("--oversubscribe")
    return cmd


def sluice_solve(exe, ranks, stencil, n, mode, csr, ksp, iterations, repeat):
    cmd = mpirun(ranks) + [exe, "solve", "--dist", "--backend", "host", "--stencil", stencil,
                           "--n", str(n), "--ksp", ksp, "--mode", mode, "--fixed", "--max-it",
                           str(iterations), "--repeat", str(repeat), "--json"]
    if csr:
        cmd.append("--csr")
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout[out.stdout.index("{"):])


def petsc_solve(exe, ranks, stencil, n, ksp, iterations, repeat):
    out = subprocess.run(mpirun(ranks) + [exe, ksp, str(iterations), str(repeat), f"{stencil}:{n}"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"PETSc failed: {out.stderr[-2000:]}")
    return [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")][0]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sluice", required=True, help="the sluice program")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--problems", default="2d5:512,2d5:1024,3d7:48,3d7:96")
    ap.add_argument("--ksp", default="cg")
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default="dist_host.json")
    ap.add_argument("--build-dir", default="/tmp/sluice-petsc")
    args = ap.parse_args()
    petsc, why = petsc_driver(args.build_dir)
    if petsc is None:
        sys.exit(f"dist_host: {why}")
    load = os.getloadavg()[0]
    rows = []
    for spec in args.problems.split(","):
        stencil, n = spec.split(":")
        n = int(n)
        row = {"stencil": stencil, "n": n, "ranks": args.ranks, "ksp": args.ksp}
        p = petsc_solve(petsc, args.ranks, stencil, n, args.ksp, args.iterations, args.repeat)
        row["rows"], row["nnz"] = p["rows"], p["nnz"]
        row["petsc_s"] = min(p["times_s"])
        for csr in (False, True):
            for mode in ("sync", "async", "graph"):
                s = sluice_solve(args.sluice, args.ranks, stencil, n, mode, csr, args.ksp,
                                 args.iterations, args.repeat)
                key = f"sluice_{'csr' if csr else 'mf'}_{mode}_s"
                row[key] = s["time_s"]
                row["device_name"] = s["device_name"]
        p2 = petsc_solve(petsc, args.ranks, stencil, n, args.ksp, args.iterations, args.repeat)
        row["petsc_s"] = min(row["petsc_s"], min(p2["times_s"]))  # before and after
        rows.append(row)
        print(json.dumps(row), flush=True)
    doc = {"what": f"CG+Jacobi, {args.iterations} iterations, mpirun -np {args.ranks}, host",
           "load_average_at_start": load, "cpus": os.cpu_count(), "runs": rows}
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"\n{'problem':<14}{'nnz':>10}{'PETSc':>10}" +
          "".join(f"{k:>12}" for k in ("mf sync", "mf async", "mf graph", "csr sync", "csr async", "csr graph")) +
          "   speed-up over PETSc")
    for r in rows:
        ts = [r[f"sluice_{o}_{m}_s"] for o in ("mf", "csr") for m in ("sync", "async", "graph")]
        print(f"{r['stencil'] + ' ' + str(r['n']):<14}{r['nnz']:>10}{r['petsc_s']*1e3:>9.2f}m" +
              "".join(f"{t*1e3:>11.2f}m" for t in ts) + f"   {r['petsc_s'] / min(ts):>6.2f}x")


if __name__ == "__main__":
    main()
