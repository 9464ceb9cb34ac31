#!/usr/bin/env python3
"""Why a sync-mode CG solve from Python is slower than the same solve from `sluice solve`
(docs/python.md: +7..16.5 %, about 3.7 us per iteration on an H100), in one run:

    PYTHONPATH=build/python python3 python/bench/diag_cg_sync.py --sluice path/to/sluice

Each Python measurement runs in a fresh interpreter (this script with --child), so that the
variants do not disturb each other. It prints what tells the candidate causes apart:

1. files:     the libsluice and libsluice-cuda the module and the program load (the solve runs
              there, not in the module: the module's build flags cannot matter if they are the
              same files), and the CUDA runtimes each process maps.
2. work:      the tracker's counters per solve (marks, waits issued, events recorded) from
              Python and from C++: a difference means the two issue different work.
3. slope:     time per iteration (solves of 20 and 120 fixed iterations) from Python and C++:
              per-iteration costs, free of per-solve constants.
4. history:   Python's sync solve alone vs after an async and a graph solve in the same process
              (bench_cg.py's order): something left behind by earlier solves.
5. waiting:   the CUDA device flags in the Python process (cudaGetDeviceFlags; 0 = auto:
              spin unless more contexts than cores), the main thread's voluntary context switches
              and CPU time per solve in Python and the program's in C++ (a blocking or yielding
              host wait switches; a spinning one does not), and a Python solve with the flags set
              to spin and one set to blocking sync before sluice makes its context.
6. threads:   the CPU time each other thread of the Python process used during the timed solves
              (a thread competing with the waiting one).
"""

import argparse
import ctypes
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time

SCHEDULE = {"auto": 0, "spin": 1, "yield": 2, "blocking": 4}


def cuda_runtimes():
    paths = set()
    for line in open("/proc/self/maps"):
        p = line.split()[-1]
        if re.search(r"libcudart|libsluice|_sluice\.|libstdc\+\+|libgcc_s|libcuda\.so|malloc|libpython", p):
            paths.add(p)
    return sorted(paths)


def cudart():
    """The shared CUDA runtime that sluice's cuda module uses, as this process mapped it."""
    for p in cuda_runtimes():
        if "libcudart.so" in p:
            return ctypes.CDLL(p)
    return None


def thread_cpu():
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = open(f"/proc/self/task/{tid}/stat").read()
            comm = open(f"/proc/self/task/{tid}/comm").read().strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(tid)] = (comm, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
    return out


def child(args):
    """One Python measurement; prints one JSON line."""
    flags_rc = None
    if args.schedule != "default":
        # Before sluice makes a context: load the runtime sluice will use and set the flags.
        import sluice

        sluice.backends()  # loads sluice's cuda module, and with it the shared runtime
        lib = cudart()
        flags_rc = None if lib is None else lib.cudaSetDeviceFlags(SCHEDULE[args.schedule])
    import sluice

    la = sluice.la
    ctx = sluice.Context(args.device, name="diag")
    A = la.Mat.stencil("2d5", args.n, args.n, 1, ctx=ctx)
    b, x, one = la.Vec(A.rows, ctx=ctx), la.Vec(A.rows, ctx=ctx), la.Vec(A.rows, ctx=ctx)
    la.set(one, 1.0)
    la.mult(A, one, b)
    for mode in args.before.split(",") if args.before else []:
        k = la.Ksp(A, type="cg", pc="jacobi", mode=mode, fixed_iterations=True, max_it=20)
        for _ in range(5):
            k.solve(b, x, ctx)
        ctx.synchronize()
    out = {"schedule": args.schedule, "set_flags_rc": flags_rc, "before": args.before}
    lib = cudart()
    if lib is not None:
        f = ctypes.c_uint(0)
        out["device_flags_rc"] = lib.cudaGetDeviceFlags(ctypes.byref(f))
        out["device_flags"] = f.value
    for its in (20, 120):
        k = la.Ksp(A, type="cg", pc="jacobi", mode="sync", fixed_iterations=True, max_it=its)
        k.solve(b, x, ctx)
        ctx.synchronize()
        stats0 = sluice._sluice._tracker_stats()
        threads0 = thread_cpu()
        ru0, rs0 = resource.getrusage(resource.RUSAGE_THREAD), resource.getrusage(resource.RUSAGE_SELF)
        times = []
        for _ in range(args.repeat):
            ctx.synchronize()
            t0 = time.perf_counter()
            k.solve(b, x, ctx)
            ctx.synchronize()
            times.append(time.perf_counter() - t0)
        ru1, rs1 = resource.getrusage(resource.RUSAGE_THREAD), resource.getrusage(resource.RUSAGE_SELF)
        threads1 = thread_cpu()
        stats1 = sluice._sluice._tracker_stats()
        main_tid = threading_native_id()
        others = {f"{c}[{t}]": round(cpu - threads0.get(t, (c, 0.0))[1], 4)
                  for t, (c, cpu) in threads1.items() if t != main_tid}
        out[str(its)] = {
            "median_s": statistics.median(times), "min_s": min(times),
            "tracker_per_solve": {k2: (stats1[k2] - stats0[k2]) / args.repeat for k2 in
                                  ("marks", "waits_issued", "waits_elided", "events_recorded")},
            "main_thread_per_solve": {
                "voluntary_switches": (ru1.ru_nvcsw - ru0.ru_nvcsw) / args.repeat,
                "involuntary_switches": (ru1.ru_nivcsw - ru0.ru_nivcsw) / args.repeat,
                "cpu_s": (ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime) / args.repeat},
            "process_per_solve": {
                "voluntary_switches": (rs1.ru_nvcsw - rs0.ru_nvcsw) / args.repeat,
                "cpu_s": (rs1.ru_utime + rs1.ru_stime - rs0.ru_utime - rs0.ru_stime) / args.repeat},
            "other_threads_cpu_s": {k2: v for k2, v in others.items() if v > 0},
        }
    out["maps"] = cuda_runtimes()
    print(json.dumps(out))


def threading_native_id():
    import threading

    return threading.get_native_id()


def run_child(args, schedule="default", before=""):
    cmd = [sys.executable, __file__, "--child", "--device", args.device, "--n", str(args.n),
           "--repeat", str(args.repeat), "--schedule", schedule, "--before", before]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-1500:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_cli(args, its, repeat):
    cmd = [args.sluice, "solve", "--stencil", "2d5", "--n", str(args.n), "--mode", "sync", "--ksp",
           "cg", "--pc", "jacobi", "--fixed", "--max-it", str(its), "--repeat", str(repeat),
           "--device", args.device, "--json"]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-1500:]}
    j = json.loads(done.stdout)
    j["rusage"] = {"voluntary_switches": r1.ru_nvcsw - r0.ru_nvcsw,
                   "involuntary_switches": r1.ru_nivcsw - r0.ru_nivcsw,
                   "cpu_s": r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime}
    return j


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sluice", help="the sluice program")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--n", type=int, default=64, help="2d5 grid side (64: the worst case measured)")
    ap.add_argument("--repeat", type=int, default=100)
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--schedule", default="default", choices=["default", *SCHEDULE])
    ap.add_argument("--before", default="")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.child:
        child(args)
        return 0

    report = {"python": sys.executable, "version": sys.version.split()[0],
              "env": {k: v for k, v in os.environ.items() if k.startswith(("CUDA_", "LD_", "SLUICE_", "NVTX_", "PYTHON"))}}
    try:
        out = subprocess.run(["ldd", args.sluice], capture_output=True, text=True).stdout
        report["cli_libs"] = sorted(set(re.findall(r"(/\S*(?:libsluice|libcudart|libstdc\+\+|malloc)\S*)", out)))
    except OSError as e:
        report["cli_libs"] = str(e)
    py = {
        "fresh": run_child(args),
        "after_async_graph": run_child(args, before="async,graph"),
        "spin": run_child(args, schedule="spin"),
        "blocking": run_child(args, schedule="blocking"),
    }
    # The program: per-solve figures from the difference of two runs (startup cancels out).
    cli = {its: (run_cli(args, its, 5), run_cli(args, its, 5 + args.repeat)) for its in (20, 120)}
    report["python_runs"], report["cli_runs"] = py, {str(k): v for k, v in cli.items()}

    def per_it(r20, r120):
        return (r120 - r20) / 100 * 1e6

    print(f"python {report['python']} {report['version']}; env {report['env']}")
    print("1. files")
    print("   the program maps:", *report["cli_libs"], sep="\n     ")
    if "maps" in py["fresh"]:
        print("   the Python process maps:", *py["fresh"]["maps"], sep="\n     ")
    print("2-5. per solve (2d5 %d, sync, fixed iterations; medians)" % args.n)
    print("   (switches: voluntary context switches per 120-iteration solve, of the main thread and "
          "of the whole process; cpu/wall: CPU time over wall time, same two; C++: process only)")
    print(f"   {'variant':<26} {'20 it ms':>9} {'120 it ms':>9} {'us/it':>7} {'switches':>13} "
          f"{'cpu/wall':>11}  tracker per solve (20 it)")
    rows = {}
    for name, r in py.items():
        if "error" in r:
            print(f"   python {name:<19} ERROR {r['error'][-300:]}")
            continue
        a, b = r["20"], r["120"]
        rows[name] = per_it(a["median_s"], b["median_s"])
        m, p = b["main_thread_per_solve"], b["process_per_solve"]
        print(f"   python {name:<19} {a['median_s'] * 1e3:9.3f} {b['median_s'] * 1e3:9.3f} "
              f"{rows[name]:7.2f} {m['voluntary_switches']:6.1f} {p['voluntary_switches']:6.1f} "
              f"{m['cpu_s'] / b['median_s']:5.2f} {p['cpu_s'] / b['median_s']:5.2f}  "
              f"{a['tracker_per_solve']}")
    c20, c120 = cli[20], cli[120]
    if all("error" not in r for r in (*c20, *c120)):
        def med(r):
            return statistics.median(r["times_s"])

        def per_solve(pair, key):
            return (pair[1]["rusage"][key] - pair[0]["rusage"][key]) / args.repeat

        rows["cli"] = per_it(med(c20[1]), med(c120[1]))
        cpu120 = per_solve(c120, "cpu_s")
        print(f"   {'C++ sluice solve':<26} {med(c20[1]) * 1e3:9.3f} {med(c120[1]) * 1e3:9.3f} "
              f"{rows['cli']:7.2f} {'':6} {per_solve(c120, 'voluntary_switches'):6.1f} "
              f"{'':5} {cpu120 / med(c120[1]):5.2f}  {c20[1].get('tracker_per_solve')}")
    else:
        print("   C++ ERROR", [r.get("error", "")[-300:] for r in (*c20, *c120)])
    fresh = py.get("fresh", {})
    for name, r in py.items():
        if "device_flags" in r:
            print(f"   {name}: device flags {r['device_flags']:#x} (0 auto, 1 spin, 2 yield, 4 blocking; "
                  f"+8 map host), cudaSetDeviceFlags returned {r.get('set_flags_rc')} (None: not called)")
    print("6. other threads' CPU seconds during the 120-iteration solves (Python):",
          fresh.get("120", {}).get("other_threads_cpu_s"))
    if "cli" in rows and "fresh" in rows:
        d = rows["fresh"] - rows["cli"]
        print(f"verdict inputs: Python - C++ per iteration {d:+.2f} us (fresh), "
              f"{rows.get('after_async_graph', float('nan')) - rows['cli']:+.2f} us (after async, graph), "
              f"{rows.get('spin', float('nan')) - rows['cli']:+.2f} us (flags: spin), "
              f"{rows.get('blocking', float('nan')) - rows['cli']:+.2f} us (flags: blocking sync)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
