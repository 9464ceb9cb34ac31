#!/usr/bin/env python3
"""Plots of `sluice bench` and its peers (bench/peers/jax_cupy_cg.py on a GPU,
bench/peers/host_peers.py on the host: PETSc and SciPy): any number of JSON files of the schema
"sluice-bench-la/1" drawn together.

    python3 bench/plot.py out/bench_la.json out/peers.json --out out/plots

Writes, per solver (cg, tfqmr):
  time_<ksp>.png    minimum solve time against NNZ, one panel per stencil, a line per
                    implementation (sluice sync and async, matrix-free and CSR; JAX; CuPy)
  ratio_<ksp>.png   async / sync and graph / async time against NNZ (below 1: the first is
                    faster), as the reference's figures 3 and 8
  gbps_<ksp>.png    achieved bandwidth (bytes of sluice's kernels / time) against NNZ, with the
                    measured copy bandwidth
and check_sweep.png if the file has a check-interval sweep. Prints the goals of issue 6 as a
table (issue 6's on a GPU, issue 18's on the host). Without matplotlib it prints the table only.
"""

import argparse
import collections
import json
import os
import sys


def load(paths):
    rows, meta = [], {}
    for p in paths:
        with open(p) as f:
            d = json.load(f)
        for r in d.get("results", []):
            r = dict(r)
            r.setdefault("operator", "matrix-free")
            rows.append(r)
        if d.get("tool") == "sluice":
            meta = d
    return rows, meta


def series_key(r):
    impl = r["impl"]
    if impl.startswith("sluice"):
        return f"{impl} ({r['operator']})"
    return impl


def goals(rows, meta):
    """The goals of the run's device. cuda (issue 6): async >= 1.8x sync for NNZ <= 1e6 (2d5,
    3d7), matrix-free within 1.25x of the bandwidth floor for NNZ >= 1e7, both modes ahead of
    CuPy everywhere; graph mode (issue 15) never slower than async, and CG on 2D 5-point 64x64 in
    at most 0.06 ms. host (issue 18): both modes ahead of PETSc and SciPy everywhere, matrix-free
    within 1.3x of the floor (STREAM triad) for NNZ >= 1e6. "ratio" is sync / async (both fused);
    "unfused" is the PETSc-style synchronous CG / async."""
    host = str(meta.get("device", "")).startswith("host")
    by = collections.defaultdict(dict)
    for r in rows:
        by[(r["ksp"], r["stencil"], r["nnz"], r["operator"])][r["impl"]] = r
    peers = collections.defaultdict(dict)
    for r in rows:
        if not r["impl"].startswith("sluice") and r["impl"] != "petsc-style-sync":
            peers[(r["ksp"], r["stencil"], tuple(r["grid"]))][r["impl"]] = r
    names = ["petsc", "scipy-cg"] if host else ["cupy-cg", "jax-jit"]
    short = {"petsc": "petsc", "scipy-cg": "scipy", "cupy-cg": "cupy", "jax-jit": "jax"}
    lines = ["goal check (min times):",
             f"{'ksp':<6}{'stencil':<8}{'operator':<12}{'nnz':>10} {'sync ms':>9} {'async ms':>9} "
             f"{'graph ms':>9} {'ratio':>6} {'unfused':>8} {'floor x':>8} "
             + " ".join(f"{short[n] + ' ms':>9}" for n in names) + "  verdict"]
    fmt = lambda v, scale=1e3, w=9: f"{v * scale:>{w}.3f}" if v is not None else " " * (w - 1) + "-"
    for key in sorted(by, key=lambda k: (k[0], k[1], k[3], k[2])):
        ksp, stencil, nnz, op = key
        d = by[key]
        s, a, g = d.get("sluice-sync"), d.get("sluice-async"), d.get("sluice-graph")
        if not s or not a:
            continue
        ratio = s["min_s"] / a["min_s"]
        u = d.get("petsc-style-sync")
        unfused = f"{u['min_s'] / a['min_s']:8.2f}" if u else "       -"
        floor = a.get("floor_ratio")
        p = peers.get((ksp, stencil, tuple(a["grid"])), {})
        times = {n: p.get(n, {}).get("min_s") for n in names}
        slowest = max(s["min_s"], a["min_s"])
        verdict = []
        if host:
            if op == "matrix-free" and nnz >= 1e6 and floor is not None:
                verdict.append("floor ok" if floor <= 1.3 else "FLOOR > 1.3")
            for n in names:
                if times[n] is not None:
                    verdict.append(f"beats {short[n]}" if slowest < times[n] else f"{short[n].upper()} FASTER")
        else:
            if stencil in ("2d5", "3d7") and nnz <= 1e6:
                verdict.append("ratio ok" if ratio >= 1.8 else "RATIO < 1.8")
            if op == "matrix-free" and nnz >= 1e7 and floor is not None:
                verdict.append("floor ok" if floor <= 1.25 else "FLOOR > 1.25")
            if times["cupy-cg"] is not None:
                verdict.append("beats cupy" if slowest < times["cupy-cg"] else "CUPY FASTER")
            if g:
                # Medians: a minimum is one lucky run, and the two modes differ by little at
                # sizes where both are one kernel.
                verdict.append("graph <= async" if g["median_s"] <= a["median_s"] * 1.02
                               else "GRAPH SLOWER")
                if ksp == "cg" and stencil == "2d5" and list(g["grid"]) == [64, 64]:
                    verdict.append("64^2 ok" if g["median_s"] <= 0.06e-3 else "64^2 > 0.06 ms")
        lines.append(f"{ksp:<6}{stencil:<8}{op:<12}{nnz:>10.3g} {fmt(s['min_s'])} {fmt(a['min_s'])} "
                     f"{fmt(g['min_s'] if g else None)} {ratio:>6.2f} {unfused} {(f'{floor:8.2f}' if floor else '       -')} "
                     + " ".join(fmt(times[n]) for n in names) + f"  {', '.join(verdict)}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out", default="plots")
    args = ap.parse_args()
    rows, meta = load(args.files)
    print(goals(rows, meta))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plots", file=sys.stderr)
        return 0
    os.makedirs(args.out, exist_ok=True)
    device = meta.get("device_name", "")
    iters = meta.get("iterations", 20)

    for ksp in sorted({r["ksp"] for r in rows}):
        ks = [r for r in rows if r["ksp"] == ksp]
        stencils = sorted({r["stencil"] for r in ks})
        # time against NNZ
        fig, axes = plt.subplots(1, len(stencils), figsize=(5 * len(stencils), 4), squeeze=False)
        for ax, st in zip(axes[0], stencils):
            groups = collections.defaultdict(list)
            for r in ks:
                if r["stencil"] == st:
                    groups[series_key(r)].append((r["nnz"], r["min_s"]))
            for name, pts in sorted(groups.items()):
                pts.sort()
                ax.loglog([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=name)
            ax.set_title(f"{ksp.upper()} {st}")
            ax.set_xlabel("NNZ")
            ax.set_ylabel(f"time to solution, {iters} its (s)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle(f"{ksp.upper()} with Jacobi, lower is better ({device})")
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, f"time_{ksp}.png"), dpi=120)
        plt.close(fig)

        # async / sync ratio
        fig, ax = plt.subplots(figsize=(6, 4))
        def times(st, op, impl, key):
            return {r["nnz"]: r[key] for r in ks
                    if r["stencil"] == st and r["operator"] == op and r["impl"] == impl}

        # (numerator, denominator, statistic, marker, line style, label)
        ratios = [("sluice-async", "sluice-sync", "min_s", "o", "-", "async / sync"),
                  ("sluice-async", "petsc-style-sync", "min_s", "x", ":", "async / unfused sync"),
                  ("sluice-graph", "sluice-async", "median_s", "s", "--", "graph / async (medians)")]
        for st in stencils:
            for num, den, key, marker, ls, what in ratios:
                for op in ("matrix-free", "csr"):
                    a, b = times(st, op, num, key), times(st, op, den, key)
                    common = sorted(set(a) & set(b))
                    if common:
                        ax.semilogx(common, [a[n] / b[n] for n in common], marker=marker, ms=3,
                                    ls=ls, label=f"{st} {op}: {what}")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.axhline(1 / 1.8, color="r", lw=0.8, ls="--", label="goal: 1.8x")
        ax.set_xlabel("NNZ")
        ax.set_ylabel("time ratio")
        ax.set_title(f"{ksp.upper()}: below 1, the first mode of a ratio is faster")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, f"ratio_{ksp}.png"), dpi=120)
        plt.close(fig)

        # bandwidth
        fig, ax = plt.subplots(figsize=(6, 4))
        for r_impl in ("sluice-sync", "sluice-async", "sluice-graph"):
            for st in stencils:
                for op in ("matrix-free", "csr"):
                    pts = sorted((r["nnz"], r["gbps"]) for r in ks if r["impl"] == r_impl and r["stencil"] == st and r["operator"] == op and "gbps" in r)
                    if pts:
                        ax.semilogx([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3,
                                    ls={"sluice-async": "-", "sluice-graph": "--"}.get(r_impl, ":"),
                                    label=f"{r_impl} {st} {op}")
        if meta.get("triad_bandwidth_gbps"):
            ax.axhline(meta["triad_bandwidth_gbps"], color="k", lw=0.8, ls="--", label="STREAM triad (floor)")
        elif meta.get("copy_bandwidth_gbps"):
            ax.axhline(meta["copy_bandwidth_gbps"], color="k", lw=0.8, ls="--", label="device copy")
        ax.set_xlabel("NNZ")
        ax.set_ylabel("GB/s (bytes of sluice's kernels)")
        ax.set_title(f"{ksp.upper()}: achieved bandwidth, higher is better")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6)
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, f"gbps_{ksp}.png"), dpi=120)
        plt.close(fig)

    if meta.get("check_sweep"):
        fig, ax = plt.subplots(figsize=(6, 4))
        by_n = collections.defaultdict(list)
        for c in meta["check_sweep"]:
            by_n[c["n"]].append(c)
        for n, cs in sorted(by_n.items()):
            sync = [c["min_s"] for c in cs if c["check_every"] == 0]
            base = sync[0] if sync else 1.0
            pts = sorted((c["check_every"], c["min_s"] / base) for c in cs if c["check_every"] > 0)
            ax.semilogx([p[0] for p in pts], [p[1] for p in pts], marker="o", base=2, label=f"2d5 n={n}")
        ax.set_xlabel("iterations per convergence check (async)")
        ax.set_ylabel("time / sync time")
        ax.set_title("CG to rtol 1e-6: choosing check_every")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, "check_sweep.png"), dpi=120)
        plt.close(fig)
    print(f"plots in {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
