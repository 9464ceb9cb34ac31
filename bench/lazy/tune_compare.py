#!/usr/bin/env python3
"""Per-call time of the fused dataflow programs with tuning off (the size rule) and on (each
kernel's shape, each matrix product's BLAS-or-generated choice and each einsum's contraction
order chosen by timing), from two JSON files of sluice_lazy_bench (schema sluice-bench-lazy/1:
{"schema", "device", "results": [{"program", "mode", "size": {...}, "per_call_us", ...}]}).

    tune_compare.py [--labels OFF,ON] OFF.json ON.json

Any two runs of the same cases compare the same way (--labels names their columns): e.g. generated
kernels against BLAS (sluice_lazy_bench --gemm generated / auto).
"""
import json
import sys

MODE = "fused-dataflow"


def rows(path):
    with open(path) as f:
        data = json.load(f)
    results = data.get("results")
    if results is None:
        sys.exit(f"{path}: no 'results' list (schema {data.get('schema', '?')!r}); "
                 "expected the JSON that sluice_lazy_bench --json writes")
    out = {}
    for r in results:
        if r.get("mode") != MODE or "per_call_us" not in r:
            continue
        size = " ".join(f"{k}={int(v)}" for k, v in sorted(r.get("size", {}).items()))
        out[(r.get("program", "?"), size)] = r
    return data.get("device", "?"), out


def count(row, name):
    return int(row.get(name, 0))


def floor_ratio(row):
    """Per-call time over the memory floor (the DG right-hand side's rows have one)."""
    floor = row.get("floor_us", 0)
    return f"{row['per_call_us'] / floor:.1f}x" if floor > 0 else "-"


def rebind(a, b):
    """Host time a rebinding adds to a run, in each file (rebind_extra_us)."""
    if "rebind_extra_us" not in a or "rebind_extra_us" not in b:
        return "-"
    return f"{a['rebind_extra_us']:.1f}->{b['rebind_extra_us']:.1f}"


def table(off, on, labels=("off", "on")):
    a_name, b_name = labels
    lines = [f"{'program':8} {'size':34} {a_name + ' us':>9} {b_name + ' us':>9} "
             f"{b_name + '/' + a_name:>9} "
             f"{'blas':>9} {'kernels':>9} {'groups':>6} {'cands':>6} {'tune ms':>8} "
             f"{b_name + '/floor':>12} {'rebind us':>13}"]
    for key in sorted(set(off) & set(on)):
        a, b = off[key], on[key]
        t0, t1 = a["per_call_us"], b["per_call_us"]
        ratio = f"{t1 / t0:9.2f}" if t0 > 0 else f"{'-':>9}"
        blas = f"{count(a, 'blas')}->{count(b, 'blas')}"
        kernels = f"{count(a, 'kernels')}->{count(b, 'kernels')}"
        lines.append(f"{key[0]:8} {key[1]:34} {t0:9.1f} {t1:9.1f} {ratio} {blas:>9} {kernels:>9} "
                     f"{count(b, 'tuned_groups'):6d} {count(b, 'tune_candidates'):6d} "
                     f"{b.get('tune_ms', 0):8.0f} {floor_ratio(b):>12} {rebind(a, b):>13}")
    for key in sorted(set(off) ^ set(on)):
        lines.append(f"{key[0]:8} {key[1]:34} only in the "
                     f"{a_name if key in off else b_name} file")
    return lines


def main():
    args = sys.argv[1:]
    labels = ("off", "on")
    if len(args) >= 2 and args[0] == "--labels":
        labels = tuple(args[1].split(","))
        args = args[2:]
    if len(args) != 2 or len(labels) != 2:
        sys.exit(__doc__)
    dev_off, off = rows(args[0])
    dev_on, on = rows(args[1])
    if dev_off != dev_on:
        print(f"note: measured on different devices ({dev_off!r} and {dev_on!r})")
    print("\n".join(table(off, on, labels)))


if __name__ == "__main__":
    main()
