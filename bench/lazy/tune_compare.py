#!/usr/bin/env python3
"""Per-call time of the fused dataflow programs with tuning off (the size rule) and on (each
kernel's shape chosen by timing), from two JSON files of sluice_lazy_bench.

    tune_compare.py OFF.json ON.json
"""
import json
import sys


def rows(path):
    with open(path) as f:
        data = json.load(f)
    out = {}
    for r in data["rows"]:
        if r.get("mode") != "fused-dataflow":
            continue
        size = " ".join(f"{k}={int(v)}" for k, v in sorted(r["size"].items()))
        out[(r["program"], size)] = r
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    off, on = rows(sys.argv[1]), rows(sys.argv[2])
    print(f"{'program':8} {'size':34} {'off us':>9} {'on us':>9} {'on/off':>7} "
          f"{'groups':>6} {'cands':>6} {'tune ms':>8}")
    for key in sorted(set(off) & set(on)):
        a, b = off[key], on[key]
        t0, t1 = a["per_call_us"], b["per_call_us"]
        print(f"{key[0]:8} {key[1]:34} {t0:9.1f} {t1:9.1f} {t1 / t0:7.2f} "
              f"{int(b.get('tuned_groups', 0)):6d} {int(b.get('tune_candidates', 0)):6d} "
              f"{b.get('tune_ms', 0):8.0f}")


if __name__ == "__main__":
    main()
