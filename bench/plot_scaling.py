#!/usr/bin/env python3
"""Plots `sluice bench --scaling` JSON: time and parallel efficiency against ranks, one line per
solver and mode (and per file when several are given, e.g. one process driving the GPUs against
a process per GPU).

    python3 bench/plot_scaling.py bench_scaling.json [more.json ...] --out DIR
"""
import argparse
import json
import os


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("json", nargs="+")
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(args.out, exist_ok=True)
    fig, (ax_t, ax_e) = plt.subplots(1, 2, figsize=(11, 4.2))
    kinds = set()
    for path in args.json:
        with open(path) as f:
            d = json.load(f)
        kinds.add(d["scaling"])
        tag = os.path.splitext(os.path.basename(path))[0]
        lines = {}
        for r in d["runs"]:
            lines.setdefault((r["ksp"], r["mode"]), []).append(r)
        for (ksp, mode), rows in sorted(lines.items()):
            rows.sort(key=lambda r: r["ranks"])
            ranks = [r["ranks"] for r in rows]
            label = f"{tag}: {ksp} {mode}" if len(args.json) > 1 else f"{ksp} {mode}"
            ax_t.plot(ranks, [r["time_s"] * 1e3 for r in rows], "o-", label=label)
            ax_e.plot(ranks, [r["efficiency"] for r in rows], "o-", label=label)
    kind = "/".join(sorted(kinds))
    ax_t.set_xlabel("ranks")
    ax_t.set_ylabel("time per solve (ms)")
    ax_t.set_title(f"{kind} scaling: time")
    ax_e.set_xlabel("ranks")
    ax_e.set_ylabel("efficiency")
    ax_e.set_ylim(0, 1.1)
    ax_e.axhline(1.0, color="gray", lw=0.5)
    ax_e.set_title(f"{kind} scaling: efficiency against one rank")
    for ax in (ax_t, ax_e):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    out = os.path.join(args.out, f"scaling_{kind.replace('/', '_')}.png")
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
