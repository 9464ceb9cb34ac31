#!/usr/bin/env python3
"""sluice.lazy from Python against JAX jit, torch.compile, PyTorch eager and CuPy, in one run on one
device (reference 001's programs):

- Figure 1: ``where(x > y, 2*x, sin(y)) + 1`` over N = 2^10 .. 2^24 float64 elements;
- the wide DAG: W independent branches ``sum(tanh(y) * X_i + 1, axis=1)`` with
  ``y = einsum("ij,ej->ei", M, X_i)`` (M 64 x 64, X_i E x 64), all summed.

    PYTHONPATH=build/python python3 python/bench/bench_lazy.py --json out.json [--budget 45]

Per call: the median over --rounds batches of back-to-back calls (each batch ends with the
library's device synchronize; the batch is sized to take about --batch-ms) of the batch time
divided by its calls; first call: the time of the first call with a new shape (trace and compile,
sluice's disk cache included); sluice also reports the host time per call (issue only) and its
kernels per call. Every result is checked against NumPy before it is timed. --budget (seconds)
bounds the whole run: each implementation gets an equal share, and what does not fit is recorded
as skipped, never silently dropped. A peer that is missing or fails is recorded with the reason.
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def fig1_np(x, y):
    return np.where(x > y, 2 * x, np.sin(y)) + 1


def wide_np(M, Xs):
    total = 0
    for X in Xs:
        y = np.einsum("ij,ej->ei", M, X)
        total = total + np.sum(np.tanh(y) * X + 1, axis=1)
    return total


def timed(call, sync, batch_ms, rounds):
    """Per-call seconds (median and min over rounds) of back-to-back calls, and host seconds."""
    call()
    sync()
    t0 = time.perf_counter()
    call()
    sync()
    one = max(time.perf_counter() - t0, 1e-7)
    count = int(min(max(batch_ms * 1e-3 / one, 1), 2000))
    samples, host = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(count):
            call()
        t1 = time.perf_counter()
        sync()
        t2 = time.perf_counter()
        samples.append((t2 - t0) / count)
        host.append((t1 - t0) / count)
    return {"per_call_s": statistics.median(samples), "min_s": min(samples),
            "host_per_call_s": statistics.median(host), "calls_per_batch": count,
            "one_call_s": one}


class Budget:
    def __init__(self, total, impls):
        self.share = total / max(len(impls), 1)
        self.used = {i: 0.0 for i in impls}

    def left(self, impl):
        return self.used[impl] < self.share

    def charge(self, impl, seconds):
        self.used[impl] += seconds


# ---- implementations: each makes (setup(case) -> (call, sync, result)) -------------------------


def sluice_impl(backend):
    import sluice
    import sluice.lazy as lz

    ctx = sluice.Context(backend, name="bench")
    fig1 = lz.compile(lambda x, y: lz.where(x > y, 2 * x, lz.sin(y)) + 1)
    wide_programs = {}

    def setup(case):
        if case["program"] == "figure1":
            x = sluice.array(case["x"], ctx=ctx)
            y = sluice.array(case["y"], ctx=ctx)
            out = sluice.empty(x.shape, ctx=ctx)
            t0 = time.perf_counter()
            fig1(x, y, out=out, ctx=ctx)
            ctx.synchronize()
            first = time.perf_counter() - t0
            stats = fig1.program(x, y, ctx=ctx).stats()
            return (lambda: fig1(x, y, out=out, ctx=ctx), ctx.synchronize,
                    lambda: out.numpy(), first, stats)
        W = len(case["Xs"])
        key = (W, case["Xs"][0].shape)
        t0 = time.perf_counter()
        if key not in wide_programs:
            M = lz.placeholder("M", case["M"].shape)
            total = None
            for i in range(W):
                X = lz.placeholder(f"X{i}", case["Xs"][i].shape)
                y = lz.einsum("ij,ej->ei", M, X)
                b = lz.sum(lz.tanh(y) * X + 1, axis=1)
                total = b if total is None else total + b
            wide_programs[key] = lz.compile([total])
        p = wide_programs[key]
        inputs = {"M": sluice.array(case["M"], ctx=ctx)}
        for i, X in enumerate(case["Xs"]):
            inputs[f"X{i}"] = sluice.array(X, ctx=ctx)
        out = sluice.empty(case["Xs"][0].shape[0], ctx=ctx)
        p(ctx=ctx, out=out, **inputs)
        ctx.synchronize()
        first = time.perf_counter() - t0
        return (lambda: p(ctx=ctx, out=out, **inputs), ctx.synchronize, lambda: out.numpy(),
                first, p.stats())

    return setup


def numpy_impl():
    def setup(case):
        res = {}
        if case["program"] == "figure1":
            x, y = case["x"], case["y"]
            fn = lambda: res.__setitem__("r", fig1_np(x, y))  # noqa: E731
        else:
            fn = lambda: res.__setitem__("r", wide_np(case["M"], case["Xs"]))  # noqa: E731
        fn()
        return fn, lambda: None, lambda: res["r"], 0.0, None

    return setup


def jax_impl():
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    dev = jax.devices("gpu")[0]
    f1 = jax.jit(lambda x, y: jnp.where(x > y, 2 * x, jnp.sin(y)) + 1)

    def wide(M, Xs):
        total = 0
        for X in Xs:
            y = jnp.einsum("ij,ej->ei", M, X)
            total = total + jnp.sum(jnp.tanh(y) * X + 1, axis=1)
        return total

    fw = jax.jit(wide)

    def setup(case):
        res = {}
        if case["program"] == "figure1":
            x, y = jax.device_put(case["x"], dev), jax.device_put(case["y"], dev)
            fn = lambda: res.__setitem__("r", f1(x, y))  # noqa: E731
        else:
            M = jax.device_put(case["M"], dev)
            Xs = [jax.device_put(X, dev) for X in case["Xs"]]
            fn = lambda: res.__setitem__("r", fw(M, Xs))  # noqa: E731
        t0 = time.perf_counter()
        fn()
        res["r"].block_until_ready()
        first = time.perf_counter() - t0
        return fn, lambda: res["r"].block_until_ready(), lambda: np.asarray(res["r"]), first, None

    return setup


def torch_impl(mode):
    import torch

    torch._dynamo.config.cache_size_limit = 64

    def f1(x, y):
        return torch.where(x > y, 2 * x, torch.sin(y)) + 1

    def wide(M, *Xs):
        total = 0
        for X in Xs:
            y = torch.einsum("ij,ej->ei", M, X)
            total = total + torch.sum(torch.tanh(y) * X + 1, dim=1)
        return total

    if mode == "eager":
        g1, gw = f1, wide
    else:
        kw = {"dynamic": False}
        if mode == "reduce-overhead":
            kw["mode"] = "reduce-overhead"
        g1, gw = torch.compile(f1, **kw), torch.compile(wide, **kw)

    def setup(case):
        res = {}
        dev = "cuda"
        if case["program"] == "figure1":
            x = torch.from_numpy(case["x"]).to(dev)
            y = torch.from_numpy(case["y"]).to(dev)
            fn = lambda: res.__setitem__("r", g1(x, y))  # noqa: E731
        else:
            M = torch.from_numpy(case["M"]).to(dev)
            Xs = [torch.from_numpy(X).to(dev) for X in case["Xs"]]
            fn = lambda: res.__setitem__("r", gw(M, *Xs))  # noqa: E731
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        return fn, torch.cuda.synchronize, lambda: res["r"].cpu().numpy(), first, None

    return setup


def cupy_impl():
    import cupy as cp

    def setup(case):
        res = {}
        if case["program"] == "figure1":
            x, y = cp.asarray(case["x"]), cp.asarray(case["y"])
            fn = lambda: res.__setitem__(  # noqa: E731
                "r", cp.where(x > y, 2 * x, cp.sin(y)) + 1)
        else:
            M = cp.asarray(case["M"])
            Xs = [cp.asarray(X) for X in case["Xs"]]

            def fn():
                total = 0
                for X in Xs:
                    yy = cp.einsum("ij,ej->ei", M, X)
                    total = total + cp.sum(cp.tanh(yy) * X + 1, axis=1)
                res["r"] = total

        t0 = time.perf_counter()
        fn()
        cp.cuda.Device().synchronize()
        first = time.perf_counter() - t0
        return fn, cp.cuda.Device().synchronize, lambda: cp.asnumpy(res["r"]), first, None

    return setup


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--backend", default=None, help="host or cuda (default: cuda if present)")
    ap.add_argument("--sizes", default="24,10,20,16,22,12,18,14",
                    help="log2 N of Figure 1 (in the order run: the spread first, so that a short "
                         "budget still covers the range)")
    ap.add_argument("--wide", default="1,4,16", help="branches W of the wide DAG")
    ap.add_argument("--wide-e", type=int, default=1024, help="rows E of each X_i (E x 64)")
    ap.add_argument("--peers", default="jax,torch-compile,torch-eager,cupy",
                    help="also: torch-reduce-overhead; on the host backend NumPy is the peer")
    ap.add_argument("--budget", type=float, default=float(os.environ.get("LAZY_BUDGET", 45)))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch-ms", type=float, default=20)
    args = ap.parse_args()
    start = time.perf_counter()

    import sluice

    backend = args.backend or ("cuda" if any(b.name == "cuda" and b.device_count > 0
                                             for b in sluice.backends()) else "host")
    peers = ["numpy"] if backend == "host" else [p for p in args.peers.split(",") if p]
    impls = ["sluice"] + peers
    makers = {"sluice": lambda: sluice_impl(backend), "numpy": numpy_impl, "jax": jax_impl,
              "torch-compile": lambda: torch_impl("default"),
              "torch-reduce-overhead": lambda: torch_impl("reduce-overhead"),
              "torch-eager": lambda: torch_impl("eager"), "cupy": cupy_impl}
    report = {"backend": backend, "device_name": sluice.device_info(sluice.Device(backend, 0)).name,
              "budget_s": args.budget, "results": [], "errors": {}, "skipped": []}
    setups = {}
    budget = Budget(args.budget, impls)
    for impl in impls:
        t0 = time.perf_counter()
        try:
            setups[impl] = makers[impl]()
        except Exception as e:  # a missing or broken peer is reported, not fatal
            report["errors"][impl] = f"{type(e).__name__}: {e}"
        budget.charge(impl, time.perf_counter() - t0)

    rng = np.random.default_rng(0)
    cases = []
    for k in (int(s) for s in args.sizes.split(",") if s):
        n = 1 << k
        cases.append({"program": "figure1", "n": n, "x": rng.random(n), "y": rng.random(n)})
    M = rng.standard_normal((64, 64)) / 8
    for w in (int(s) for s in args.wide.split(",") if s):
        Xs = [rng.standard_normal((args.wide_e, 64)) for _ in range(w)]
        cases.append({"program": "wide", "n": w * args.wide_e * 64, "w": w, "M": M, "Xs": Xs})

    for case in cases:
        expected = fig1_np(case["x"], case["y"]) if case["program"] == "figure1" else \
            wide_np(case["M"], case["Xs"])
        label = {"program": case["program"], "n": case["n"], "w": case.get("w")}
        for impl in impls:
            if impl not in setups:
                continue
            if not budget.left(impl):
                report["skipped"].append({**label, "impl": impl, "why": "budget"})
                continue
            t0 = time.perf_counter()
            try:
                call, sync, result, first, stats = setups[impl](case)
                got = result()
                ok = np.allclose(got, expected, rtol=1e-9, atol=1e-9)
                row = {**label, "impl": impl, "first_call_s": first, "correct": bool(ok)}
                if ok:
                    row.update(timed(call, sync, args.batch_ms, args.rounds))
                if stats:
                    row["kernels"] = stats["kernels"]
                    row["graph_nodes"] = stats["graph_nodes"]
                    row["concurrency"] = stats["concurrency"]
                    row["build_origin"] = stats["build_origin"]
                report["results"].append(row)
            except Exception as e:
                report["errors"][f"{impl} {case['program']} n={case['n']}"] = \
                    f"{type(e).__name__}: {str(e)[:300]}"
            budget.charge(impl, time.perf_counter() - t0)
        report["wall_s"] = time.perf_counter() - start
        with open(args.json, "w") as f:  # after every case: a run stopped by a limit keeps them
            json.dump(report, f, indent=1)
    wrong = [r for r in report["results"] if not r["correct"]]
    for r in sorted(report["results"], key=lambda r: (r["program"], r["n"])):
        us = f"{r['per_call_s'] * 1e6:10.1f} us" if "per_call_s" in r else "     WRONG"
        print(f"{r['program']:8} n={r['n']:>9} {r['impl']:22} {us}  "
              f"first {r['first_call_s']:.3f} s")
    for k, v in report["errors"].items():
        print(f"error: {k}: {v}")
    print(f"bench_lazy: {len(report['results'])} results, {len(report['skipped'])} skipped "
          f"(budget), {len(wrong)} wrong, {report['wall_s']:.1f} s")
    return 1 if wrong or "sluice" in report["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
