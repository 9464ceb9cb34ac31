#!/usr/bin/env python3
"""A short table of sluice_lazy_bench's JSON and its peers' (bench/peers/lazy_peers.py), with the
goals of issue 25 checked against what was measured in the same run.

    python3 bench/lazy/summary.py lazy_cuda.json lazy_peers.json [--plot lazy.png] > summary.txt

Per-call times in microseconds (median of batches of back-to-back calls). Columns: the four
sluice modes (f = fused, u = unfused; df = dataflow, se = serial), then each peer. A goal is
"ok" or "MISSED" only where both sides were measured; otherwise "not measured". --plot draws the DG right-hand side (per call against p, one panel per scale)
and the wide DAG (per call against W, one panel per row count), where matplotlib is installed.
"""

import json
import sys

MODES = ["fused-dataflow", "fused-serial", "unfused-dataflow", "unfused-serial"]
SHORT = {"fused-dataflow": "f-df", "fused-serial": "f-se", "unfused-dataflow": "u-df",
         "unfused-serial": "u-se", "jax-jit": "jax", "torch-eager": "t-eager",
         "torch-compile": "t-comp", "torch-compile-reduce-overhead": "t-comp-ro",
         "torch-graph-streams": "t-streams", "cupy": "cupy", "numpy": "numpy",
         "plain-loops": "loops"}


def key(row):
    s = row["size"]
    if row["program"] == "dg_rhs":
        return "p=%d 1/%d" % (s["p"], s["scale"])
    if row["program"] == "figure1":
        return "n=2^%d" % (int(s["n"]).bit_length() - 1)
    if row["program"] == "wide":
        return "W=%d rows=%d" % (s["branches"], s["rows"])
    if row["program"] == "chain":
        return "L=%d" % s["length"]
    return str(s)


def fmt(v):
    if v is None:
        return "-"
    return "%.1f" % v if v < 1000 else "%.0f" % v


def plot(table, cols, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print("(no plot: %s)" % e)
        return
    panels = {}
    for (prog, k), t in table.items():
        if prog not in ("dg_rhs", "wide"):
            continue
        any_row = next(iter(t.values()))
        s = any_row["size"]
        if prog == "dg_rhs":
            panel, x = ("DG right-hand side, 1/%d of Table 2" % s["scale"], "p"), s["p"]
        else:
            panel, x = ("wide DAG, %d rows per branch" % s["rows"], "branches W"), s["branches"]
        for mode, r in t.items():
            if "per_call_us" in r:
                panels.setdefault(panel, {}).setdefault(mode, []).append((x, r["per_call_us"]))
        floor = t.get("fused-dataflow", {}).get("floor_us")
        if floor:
            panels.setdefault(panel, {}).setdefault("memory floor", []).append((x, floor))
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for ax, ((title, xlabel), series) in zip(axes[0], sorted(panels.items())):
        for mode in [c for c in cols if c in series] + [m for m in series if m not in cols]:
            pts = sorted(series[mode])
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                    linestyle="--" if mode == "memory floor" else "-", label=mode)
        ax.set_yscale("log")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("us per call")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print("(plot: %s)" % path)


def main(argv):
    plot_path = None
    if "--plot" in argv:
        i = argv.index("--plot")
        plot_path = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    paths = argv
    rows, device = [], "?"
    for p in paths:
        try:
            with open(p) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            print("(%s: %s)" % (p, e))
            continue
        if data.get("device") not in (None, "peers"):
            device = data["device"]
        rows += data.get("results", [])
    print("lazy programs on %s: per-call us (median)" % device)
    table = {}
    cols = []
    for r in rows:
        t = table.setdefault((r["program"], key(r)), {})
        t[r["mode"]] = r
        if r["mode"] not in cols:
            cols.append(r["mode"])
    cols = [m for m in MODES if m in cols] + [m for m in cols if m not in MODES]
    extra = ["floor", "kern"]
    print("%-8s %-18s " % ("program", "size") +
          " ".join("%9s" % SHORT.get(c, c[:9]) for c in cols + extra))
    for (prog, k), t in table.items():
        fd = t.get("fused-dataflow", {})
        vals = [fmt(t[c]["per_call_us"]) if c in t and "per_call_us" in t[c] else "-"
                for c in cols]
        kernels = fd.get("kernels")
        vals += [fmt(fd.get("floor_us")), "-" if kernels is None else "%d" % kernels]
        print("%-8s %-18s " % (prog[:8], k) + " ".join("%9s" % v for v in vals))

    print("\ngoals (issue 25):")
    missed = 0

    def goal(text, ok):
        nonlocal missed
        if ok is None:
            print("  not measured  %s" % text)
            return
        missed += 0 if ok else 1
        print("  %-12s  %s" % ("ok" if ok else "MISSED", text))

    def us(t, mode):
        r = t.get(mode)
        return r.get("per_call_us") if r else None

    host = device.startswith("host")
    for (prog, k), t in table.items():
        ours = us(t, "fused-dataflow")
        if prog == "dg_rhs" and host:
            best = min((v for v in (ours, us(t, "fused-serial")) if v is not None), default=None)
            numpy, loops = us(t, "numpy"), us(t, "plain-loops")
            goal("dg %s: sluice (best fused) %s us < NumPy %s us" % (k, fmt(best), fmt(numpy)),
                 None if best is None or numpy is None else best < numpy)
            goal("dg %s: sluice (best fused) %s us <= 2x plain loops %s us" %
                 (k, fmt(best), fmt(loops)),
                 None if best is None or loops is None else best <= 2 * loops)
        elif prog == "dg_rhs":
            for peer in ("jax-jit", "torch-compile", "torch-compile-reduce-overhead"):
                theirs = us(t, peer)
                goal("dg %s: sluice %s us < %s %s us" % (k, fmt(ours), peer, fmt(theirs)),
                     None if ours is None or theirs is None else ours < theirs)
            floor = t.get("fused-dataflow", {}).get("floor_us")
            goal("dg %s: within 3x of the memory floor (%s us; %.1fx)" %
                 (k, fmt(floor), ours / floor if ours and floor else 0),
                 None if ours is None or not floor else ours <= 3 * floor)
            fd = t.get("fused-dataflow", {})
            if "compile_cold_ms" in fd:
                goal("dg %s: cold compile %.0f ms <= 2000" % (k, fd["compile_cold_ms"]),
                     fd["compile_cold_ms"] <= 2000)
            if "compile_disk_ms" in fd:
                goal("dg %s: compile from the disk cache %.1f ms <= 50 (%s)" %
                     (k, fd["compile_disk_ms"], fd.get("build_origin_warm",
                                                       fd.get("build_origin", "?"))),
                     fd["compile_disk_ms"] <= 50)
        if prog == "wide":
            theirs = us(t, "torch-graph-streams")
            goal("wide %s: sluice %s us <= hand-placed multi-stream graph %s us" %
                 (k, fmt(ours), fmt(theirs)),
                 None if ours is None or theirs is None else ours <= theirs)
        for mode in MODES:
            r = t.get(mode)
            if r and "rebind_extra_us" in r and mode == "fused-dataflow":
                goal("%s %s: rebinding %.1f us of host time per call <= 10 (run alone %.1f us)" %
                     (prog, k, r["rebind_extra_us"], r.get("host_us", 0)),
                     r["rebind_extra_us"] <= 10)
    print("\n%d goal(s) missed" % missed)
    if plot_path:
        plot(table, cols, plot_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
