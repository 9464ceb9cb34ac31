#!/usr/bin/env python3
"""The short table of a scripts/gpu-python run: the pytest outcome (pytest.xml), the CG benchmark
(bench_python_cg.json: Python beside C++, JAX and CuPy) and the hand-off to PyTorch and back
(bench_python_interop.json, with its peers) and sluice.lazy against JAX, PyTorch and CuPy
(bench_python_lazy.json). What a step did not write is reported missing.

    python3 python/bench/summary.py OUT_DIR > OUT_DIR/summary.md
"""

import json
import os
import sys
import xml.etree.ElementTree as ET


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"missing": f"{os.path.basename(path)}: {type(e).__name__}"}


def pytest_line(out):
    path = os.path.join(out, "pytest.xml")
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        return f"pytest: no result ({type(e).__name__})"
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    n = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    passed = n["tests"] - n["failures"] - n["errors"] - n["skipped"]
    return (f"pytest: {passed} passed, {n['failures']} failed, {n['errors']} errors, "
            f"{n['skipped']} skipped ({float(suite.get('time', 0)):.0f} s)")


def ms(seconds):
    return f"{seconds * 1e3:.3f}" if seconds is not None else "—"


def cg_table(cg):
    if "missing" in cg:
        return [f"CG: not measured ({cg['missing']})"]
    lines = [f"CG, Jacobi, {cg['iterations']} iterations, {cg['device_name']} (min ms of "
             f"{cg['repeat']} solves; overhead = Python median / C++ median - 1, goal "
             f"{cg['goal_overhead'] * 100:.0f} %)", "",
             "| problem | mode | Python | C++ | overhead | JAX jit | CuPy |", "|---|---|---|---|---|---|---|"]
    peers = {}
    for p in cg.get("peers", []):
        g = p["grid"]
        n = g[0]
        peers[(p["stencil"], n, p["impl"])] = p["min_s"]
    for r in cg.get("results", []):
        key = (r["stencil"], r["n"])
        lines.append(f"| {r['stencil']} {r['n']} | {r['mode']} | {ms(r['python_min_s'])} | "
                     f"{ms(r['cpp_min_s'])} | {r['overhead_median'] * 100:+.1f} % | "
                     f"{ms(peers.get(key + ('jax-jit',)))} | {ms(peers.get(key + ('cupy-cg',)))} |")
    for e in cg.get("peer_errors", []):
        lines.append(f"peer: {e[:200]}")
    return lines


def interop_table(io):
    if "missing" in io:
        return [f"interop: not measured ({io['missing']})"]
    lines = [f"Hand-off to PyTorch and back, {io['device_name']}, torch {io['torch']} (host us per "
             f"hand-off, median / min; goal {io['goal_us']:.0f} us for sluice's own share)", "",
             "| what | median us | min us |", "|---|---|---|"]
    for k, v in list(io["results"].items()) + list(io.get("peers", {}).items()):
        lines.append(f"| {k} | {v['median_us']:.2f} | {v['min_us']:.2f} |")
    lines.append(f"| hand-off and back (export + import) | {io['sluice_side_us']:.2f} | |")
    if "sluice_own_us" in io:
        lines.append(f"| sluice's own share (less torch's `__dlpack__(stream=-1)`) | "
                     f"{io['sluice_own_us']:.2f} | |")
        lines.append(f"import paths: {io.get('import_paths')}")
    for k, v in io.get("peer_errors", {}).items():
        lines.append(f"{k}: not measured ({v[:200]})")
    lines.append(f"no device synchronize: kernel still running after the hand-offs: "
                 f"{io['hand_offs_done_while_kernel_ran']}; values after: {io['values_after']}")
    return lines


def lazy_table(lz):
    if "missing" in lz:
        return [f"lazy: not measured ({lz['missing']})"]
    impls = []
    for r in lz["results"]:
        if r["impl"] not in impls:
            impls.append(r["impl"])
    lines = [f"sluice.lazy against its peers, {lz['device_name']} ({lz['backend']}; us per call, "
             f"median of batches; sluice's kernels per call in brackets; budget "
             f"{lz['budget_s']:.0f} s, {len(lz['skipped'])} cases skipped)", "",
             "| program | N | " + " | ".join(impls) + " |",
             "|---|---|" + "---|" * len(impls)]
    rows = {}
    for r in lz["results"]:
        key = (r["program"], r["n"], r.get("w"))
        cell = "wrong" if not r["correct"] else f"{r['per_call_s'] * 1e6:.1f}"
        if "kernels" in r and r["correct"]:
            cell += f" [{r['kernels']}]"
        rows.setdefault(key, {})[r["impl"]] = cell
    for (program, n, w), cells in sorted(rows.items()):
        name = program if w is None else f"{program} W={w}"
        lines.append(f"| {name} | {n} | " + " | ".join(cells.get(i, "—") for i in impls) + " |")
    for k, v in lz.get("errors", {}).items():
        lines.append(f"{k}: {v[:200]}")
    return lines


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "out"
    lines = [pytest_line(out), ""]
    lines += cg_table(load(os.path.join(out, "bench_python_cg.json"))) + [""]
    lines += interop_table(load(os.path.join(out, "bench_python_interop.json"))) + [""]
    lines += lazy_table(load(os.path.join(out, "bench_python_lazy.json")))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
