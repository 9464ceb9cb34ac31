#!/usr/bin/env python3
"""sluice's own host cost of a DLPack hand-off, on the host backend (no GPU needed).

    PYTHONPATH=build/host/python python3 python/bench/bench_handoff_host.py [--json out.json]

The Python binding's work per hand-off is the same code on both backends; only the stream
ordering differs (a host wait here, event waits on cuda). Measured per call, as the median over
--rounds rounds of --count calls each, after a warm-up, with the context idle, so that what is
timed is sluice's bookkeeping and not waiting: wall time (time.perf_counter_ns) and the calling
thread's CPU time (time.thread_time_ns; steadier on a shared machine, and what the "own share"
line uses):

- export:          x.__dlpack__() and the capsule's release
- dlpack_device:   x.__dlpack_device__()
- import_own:      sluice.from_dlpack(v), v a NumPy view of x: sluice memory coming back through
                   another library (as a PyTorch tensor made by torch.from_dlpack(x) does)
- import_foreign:  sluice.from_dlpack(n) of one NumPy array again and again (memory sluice does
                   not own: registered with the tracker, released after each import)
- round_trip:      export x and import it back (both of the above for sluice's memory)
- import_known:    sluice.from_dlpack(q) of an array of a library whose queue sluice knows
                   (registered with _stream_source): the import orders itself after that queue
                   (an event recorded there, waited for by the importing context, and the
                   import's marks), the path PyTorch and CuPy tensors take on cuda
- numpy_side:      NumPy's own part of an import (its __dlpack_device__ and __dlpack__), which
                   the "own share" line subtracts
"""

import argparse
import json
import statistics
import sys
import time


def per_call_us(fn, count, rounds):
    for _ in range(max(count // 10, 10)):
        fn()
    wall, cpu = [], []
    for _ in range(rounds):
        c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
        for _ in range(count):
            fn()
        wall.append((time.perf_counter_ns() - t0) / count / 1e3)
        cpu.append((time.thread_time_ns() - c0) / count / 1e3)
    return {"median_us": statistics.median(wall), "min_us": min(wall),
            "cpu_median_us": statistics.median(cpu), "cpu_min_us": min(cpu)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--elements", type=int, default=1 << 16)
    ap.add_argument("--json")
    args = ap.parse_args()

    import numpy as np

    import sluice

    ctx = sluice.Context("host", name="bench")
    x = sluice.zeros(args.elements, "float32", ctx=ctx)
    n = np.zeros(args.elements, np.float32)
    ctx.synchronize()
    v = np.asarray(x)  # a writable NumPy view of sluice's memory (the buffer protocol)

    def export():
        c = x.__dlpack__()
        del c

    class QueueArray:  # another library's array, written on a queue of its own
        __module__ = "bench_queuelib"

        def __init__(self, data, queue):
            self.data, self.queue = data, queue

        def __dlpack__(self, **kwargs):
            return self.data.__dlpack__()

        def __dlpack_device__(self):
            return self.data.__dlpack_device__()

    known = sluice.Context("host", name="bench producer")
    q = QueueArray(v, known)
    have_sources = hasattr(sluice._sluice, "_stream_source")
    if have_sources:
        sluice._sluice._stream_source("bench_queuelib", lambda obj, device: obj.queue)

    def round_trip():
        c = x.__dlpack__()
        sluice.from_dlpack(v, ctx=ctx)
        del c

    cases = {
        "export": export,
        "dlpack_device": lambda: x.__dlpack_device__(),
        "import_own": lambda: sluice.from_dlpack(v, ctx=ctx),
        "import_foreign": lambda: sluice.from_dlpack(n, ctx=ctx),
        "round_trip": round_trip,
        **({"import_known": lambda: sluice.from_dlpack(q, ctx=ctx)} if have_sources else {}),
        "numpy_side": lambda: (n.__dlpack_device__(), n.__dlpack__()),
    }
    results = {k: per_call_us(f, args.count, args.rounds) for k, f in cases.items()}
    sluice._sluice._collect()
    numpy_side = results["numpy_side"]["cpu_median_us"]
    own = {
        "export": results["export"]["cpu_median_us"],
        "import_own": results["import_own"]["cpu_median_us"] - numpy_side,
        "import_foreign": results["import_foreign"]["cpu_median_us"] - numpy_side,
    }
    print(f"{'what':<16} {'median us':>9} {'min us':>8} {'cpu median us':>14} {'cpu min us':>11}")
    for k, v in results.items():
        print(f"{k:<16} {v['median_us']:>9.2f} {v['min_us']:>8.2f} {v['cpu_median_us']:>14.2f} "
              f"{v['cpu_min_us']:>11.2f}")
    print(f"sluice's own share (CPU time): export {own['export']:.2f} us, "
          f"import of its own memory {own['import_own']:.2f} us, "
          f"import of a NumPy array {own['import_foreign']:.2f} us")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"schema": "sluice-bench-handoff-host/1", "results": results, "own": own}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
