#!/usr/bin/env python3
"""Peers of `sluice_lazy_bench` (bench/lazy): the same array programs, at the same sizes, with
JAX (jax.jit), PyTorch eager, torch.compile (default, and mode="reduce-overhead", which uses CUDA
graphs), CuPy eager, NumPy on the host, and for the wide DAG a hand-placed multi-stream CUDA graph
(torch-graph-streams: each branch on its own stream, forked from and joined into one captured
graph, replayed). Appends rows of the same JSON schema
("sluice-bench-lazy/1") so that one file holds sluice and its peers.

    # on the GPU machine, after `sluice_lazy_bench --backend cuda --dump-dg out/dg --json out/lazy.json`
    python3 bench/peers/lazy_peers.py --dg out/dg --from out/lazy.json --json out/lazy_peers.json
    # on the host: NumPy only, the same cores as sluice's host backend
    /usr/bin/python3 bench/peers/lazy_peers.py --peers numpy --dg out/dg --from out/lazy_host.json \
        --json out/lazy_peers_host.json

Programs (sizes from --from, else the defaults below): the DG-FEM wave right-hand side (upwind
flux, the operators and inputs that sluice_lazy_bench --dump-dg wrote; the result is checked
against the expected output it wrote beside them), Figure 1's where(x > y, 2x, sin y) + 1, the wide
DAG (W branches of einsum("ij,ej->ei", M, X_i), tanh(y) * X_i + 1, a sum over axis 1, all summed)
and the chain y = y * a_k + b_k. Each peer is timed as sluice is: first-call time (tracing and
compiling where there is any), the median over batches of back-to-back calls (each batch ended by
a device synchronization), and one-call latency (a call and a synchronization). A peer that is
missing or fails is reported and skipped, never fatal. torch.compile compiles each shape
statically (as jax.jit does). Cases run one after another, every peer on a case before the next
starts, the cases that the goals of issue 25 name first. With --case-limit, a peer that spends
longer on one case (compiling included) is stopped and skips its cases of that program as large;
with --deadline, cases that would start later than that many seconds after the start are reported
as skipped, and a case running at the deadline is stopped 20 s after it. The JSON is rewritten
after every case.
"""

import argparse
import json
import math
import os
import signal
import statistics
import sys
import time
import traceback

# ---- backends ---------------------------------------------------------------------------------


class Peer:
    """An array library: how to make arrays, synchronize, and wrap a function."""

    name = "?"

    def asarray(self, a):
        raise NotImplementedError

    def sync(self):
        pass

    def wrap(self, f):
        return f

    def to_numpy(self, a):
        return a

    def reset(self):
        """After a case was interrupted: drop what it left half-built."""


class NumpyPeer(Peer):
    name = "numpy"

    def __init__(self):
        import numpy as np

        self.xp = np

    def asarray(self, a):
        return self.xp.asarray(a)

    def einsum(self, spec, *ops):
        return self.xp.einsum(spec, *ops, optimize=True)


class CupyPeer(Peer):
    name = "cupy"

    def __init__(self):
        import cupy as cp

        self.xp = cp

    def asarray(self, a):
        return self.xp.asarray(a)

    def sync(self):
        self.xp.cuda.Device().synchronize()

    def einsum(self, spec, *ops):
        return self.xp.einsum(spec, *ops)

    def to_numpy(self, a):
        return self.xp.asnumpy(a)


class JaxPeer(Peer):
    name = "jax-jit"

    def __init__(self):
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        self.jax = jax
        self.xp = jnp

    def asarray(self, a):
        return self.jax.device_put(self.xp.asarray(a))

    def sync(self):
        pass  # results are waited for with block_until_ready (see call)

    def wrap(self, f):
        return self.jax.jit(f)

    def einsum(self, spec, *ops):
        return self.xp.einsum(spec, *ops)

    def to_numpy(self, a):
        import numpy as np

        return np.asarray(a)


class TorchPeer(Peer):
    def __init__(self, mode=None):
        import torch

        self.torch = torch
        self.mode = mode
        self.name = "torch-eager" if mode is None else ("torch-compile" if mode == "default" else
                                                         "torch-compile-reduce-overhead")
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.xp = _TorchNamespace(torch)

    def asarray(self, a):
        t = self.torch.as_tensor(a)
        return t.to(self.device)

    def sync(self):
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def wrap(self, f):
        if self.mode is None:
            return f
        # One static compilation per shape, like jax.jit (not dynamic shapes after the second).
        for knob in ("cache_size_limit", "recompile_limit"):  # the name differs across versions
            try:
                setattr(self.torch._dynamo.config, knob, 256)
            except (AttributeError, KeyError):
                pass
        if self.mode == "default":
            return self.torch.compile(f, dynamic=False)
        return self.torch.compile(f, mode="reduce-overhead", dynamic=False)

    def einsum(self, spec, *ops):
        return self.torch.einsum(spec, *ops)

    def to_numpy(self, a):
        return a.detach().cpu().numpy()

    def reset(self):
        if self.mode is not None:
            self.torch._dynamo.reset()
        self.sync()


class _TorchNamespace:
    """The few NumPy names the programs use, on torch."""

    def __init__(self, torch):
        self.t = torch

    def where(self, c, a, b):
        return self.t.where(c, a, b)

    def sin(self, x):
        return self.t.sin(x)

    def tanh(self, x):
        return self.t.tanh(x)

    def sum(self, x, axis):
        return x.sum(axis)


class TorchStreamsGraphPeer(TorchPeer):
    """The wide DAG as one would place it by hand: every branch on its own stream, forked from
    and joined into the capturing stream, captured once into a CUDA graph and replayed."""

    programs = ("wide",)

    def __init__(self):
        super().__init__(None)
        self.name = "torch-graph-streams"
        if self.device != "cuda":
            raise RuntimeError("needs a CUDA device")

    def wide_graph(self, M, Xs):
        torch = self.torch

        def branch(X):
            return torch.sum(torch.tanh(torch.einsum("ij,ej->ei", M, X)) * X + 1.0, 1)

        streams = [torch.cuda.Stream() for _ in Xs]
        # Warm up (cuBLAS handles and workspaces on every stream) before capturing.
        for s, X in zip(streams, Xs):
            with torch.cuda.stream(s):
                branch(X)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        capture = torch.cuda.Stream()
        with torch.cuda.graph(graph, stream=capture):
            home = torch.cuda.current_stream()
            parts = []
            for s, X in zip(streams, Xs):
                s.wait_stream(home)
                with torch.cuda.stream(s):
                    parts.append(branch(X))
            for s in streams:
                home.wait_stream(s)
            total = parts[0]
            for q in parts[1:]:
                total = total + q

        def replay(*_):
            graph.replay()
            return total

        return replay


def make_peer(name):
    if name == "numpy":
        return NumpyPeer()
    if name == "cupy":
        return CupyPeer()
    if name == "jax-jit":
        return JaxPeer()
    if name == "torch-eager":
        return TorchPeer(None)
    if name == "torch-compile":
        return TorchPeer("default")
    if name == "torch-compile-reduce-overhead":
        return TorchPeer("reduce-overhead")
    if name == "torch-graph-streams":
        return TorchStreamsGraphPeer()
    raise ValueError(name)


def block(out):
    """Waits for a JAX result (other peers synchronize through Peer.sync)."""
    leaves = out if isinstance(out, (tuple, list)) else (out,)
    for x in leaves:
        if hasattr(x, "block_until_ready"):
            x.block_until_ready()


# ---- timing -----------------------------------------------------------------------------------


def measure(peer, f, args, quick):
    """First call, per-call (median of batches of back-to-back calls) and latency, in us. Long
    calls get fewer samples: about 0.3 s of latency samples and 0.5 s of batches per case."""
    t = time.perf_counter()
    out = f(*args)
    block(out)
    peer.sync()
    first = (time.perf_counter() - t) * 1e6
    t = time.perf_counter()
    for _ in range(2):
        block(f(*args))
    peer.sync()
    warm = max(1.0, (time.perf_counter() - t) * 1e6 / 2)
    lat = []
    for _ in range(max(3, min(5 if quick else 20, int(3e5 / warm)))):
        t = time.perf_counter()
        block(f(*args))
        peer.sync()
        lat.append((time.perf_counter() - t) * 1e6)
    one = max(1.0, statistics.median(lat))
    batches = 3 if quick else 5
    batch = max(3, min(50 if quick else 500, int(5e5 / batches / one)))
    per = []
    for _ in range(batches):
        t = time.perf_counter()
        for _ in range(batch):
            out = f(*args)
        block(out)
        peer.sync()
        per.append((time.perf_counter() - t) * 1e6 / batch)
    return {"first_call_us": first, "per_call_us": statistics.median(per),
            "latency_us": statistics.median(lat)}, out


# ---- programs ---------------------------------------------------------------------------------


def dg_rhs(peer, o, u, v):
    xp = peer.xp
    u_in = u[o["elem"], o["fmask"]]
    u_ex = xp.where(o["boundary"], -u_in, u[o["nbr_elem"], o["nbr_node"]])
    v_in = v[:, o["elem"], o["fmask"]]
    v_ex = xp.where(o["boundary"], v_in, v[:, o["nbr_elem"], o["nbr_node"]])
    vn_in = xp.sum(o["normal"] * v_in, 0)
    vn_ex = xp.sum(o["normal"] * v_ex, 0)
    u_star = (u_in + u_ex) * 0.5 + (vn_in - vn_ex) * 0.5
    vn_star = (vn_in + vn_ex) * 0.5 + (u_in - u_ex) * 0.5
    e = peer.einsum
    grad = e("xrej,rij,ej->xei", o["ijm"], o["S"], u)
    div = e("xrej,rij,xej->ei", o["ijm"], o["S"], v)
    lift_u = e("ifj,fej,fej->ei", o["Lift"], o["sJ"], vn_star)
    lift_v = e("ifj,fej,xfej->xei", o["Lift"], o["sJ"], o["normal"] * u_star)
    return (e("ei,ij,ej->ei", o["Jinv"], o["Minv"], div - lift_u),
            e("ei,ij,xej->xei", o["Jinv"], o["Minv"], grad - lift_v))


def load_dg(np, path):
    names = ["ijm", "S", "Lift", "sJ", "Jinv", "Minv", "normal", "fmask", "nbr_elem", "nbr_node",
             "boundary", "u", "v", "du", "dv"]
    d = {n: np.load(os.path.join(path, n + ".npy")) for n in names}
    E = d["u"].shape[0]
    d["elem"] = np.arange(E, dtype=np.int32).reshape(1, E, 1)
    return d


def bench_dg(peer, args, rows, sizes):
    import numpy as np

    for (p, scale) in sizes:
        if out_of_time(args, rows, peer, 'dg'):
            continue
        path = os.path.join(args.dg, "p%d_s%d" % (p, scale))
        if not os.path.isdir(path):
            print("  dg p=%d 1/%d: no data at %s (run sluice_lazy_bench --dump-dg)" % (p, scale, path))
            continue
        d = load_dg(np, path)
        # Index arrays as the library wants them (torch indexes with int64).
        o = {}
        for k, a in d.items():
            if k in ("u", "v", "du", "dv"):
                continue
            if a.dtype.kind == "i" and peer.name.startswith("torch"):
                a = a.astype(np.int64)
            o[k] = peer.asarray(a)
        u, v = peer.asarray(d["u"]), peer.asarray(d["v"])
        # The operators travel as an argument (jax.jit would otherwise embed them as constants).
        f = peer.wrap(lambda o, u, v: dg_rhs(peer, o, u, v))
        try:
            res, out = measure(peer, f, (o, u, v), args.quick)
        except Exception:
            # An einsum that does not broadcast extents of 1: expand them (a copy per call).
            o = dict(o)
            E, Np = d["u"].shape
            o["ijm"] = peer.asarray(np.broadcast_to(d["ijm"], (3, 3, E, Np)).copy())
            o["Jinv"] = peer.asarray(np.broadcast_to(d["Jinv"], (E, Np)).copy())
            f = peer.wrap(lambda o, u, v: dg_rhs(peer, o, u, v))
            res, out = measure(peer, f, (o, u, v), args.quick)
            res["note"] = "extents of 1 expanded for einsum"
        du, dv = peer.to_numpy(out[0]), peer.to_numpy(out[1])
        scale_ref = max(1.0, float(np.abs(d["du"]).max()))
        err = max(float(np.abs(du - d["du"]).max()), float(np.abs(dv - d["dv"]).max())) / scale_ref
        res["max_rel_error"] = err
        E = d["u"].shape[0]
        rows.append({"program": "dg_rhs", "mode": peer.name,
                     "size": {"p": p, "scale": scale, "elements": E, "unknowns": int(d["u"].size)},
                     **res})
        print("  dg p=%d 1/%-3d %-32s %12.1f us per call (error %.1e)" %
              (p, scale, peer.name, res["per_call_us"], err))


def bench_figure1(peer, args, rows, sizes):
    import numpy as np

    xp = peer.xp
    for n in sizes:
        if out_of_time(args, rows, peer, 'figure1'):
            continue
        rng = np.random.default_rng(5)
        x = peer.asarray(rng.uniform(-1, 1, n))
        y = peer.asarray(rng.uniform(-1, 1, n))
        f = peer.wrap(lambda x, y: xp.where(x > y, 2 * x, xp.sin(y)) + 1)
        res, _ = measure(peer, f, (x, y), args.quick)
        rows.append({"program": "figure1", "mode": peer.name, "size": {"n": n}, **res})
        print("  figure1 n=%-9d %-32s %12.1f us per call" % (n, peer.name, res["per_call_us"]))


def bench_wide(peer, args, rows, sizes):
    import numpy as np

    xp = peer.xp
    for (W, e) in sizes:
        if out_of_time(args, rows, peer, 'wide'):
            continue
        n = 64
        rng = np.random.default_rng(7)
        M = peer.asarray(rng.uniform(-1, 1, (n, n)))
        Xs = [peer.asarray(rng.uniform(-1, 1, (e, n))) for _ in range(W)]

        def wide(M, *Xs):
            total = None
            for X in Xs:
                b = xp.sum(xp.tanh(peer.einsum("ij,ej->ei", M, X)) * X + 1.0, 1)
                total = b if total is None else total + b
            return total

        if isinstance(peer, TorchStreamsGraphPeer):
            f = peer.wide_graph(M, Xs)
        else:
            f = peer.wrap(wide)
        res, out = measure(peer, f, (M, *Xs), args.quick)
        if isinstance(peer, TorchStreamsGraphPeer):
            expect = wide(M, *Xs)  # eager: the replayed graph must give the same sums
            res["max_rel_error"] = float((out - expect).abs().max()) / max(
                1.0, float(expect.abs().max()))
        rows.append({"program": "wide", "mode": peer.name,
                     "size": {"branches": W, "rows": e, "cols": n}, **res})
        print("  wide W=%-3d rows=%-6d %-32s %12.1f us per call" % (W, e, peer.name, res["per_call_us"]))


def bench_chain(peer, args, rows, sizes):
    import numpy as np

    for L in sizes:
        if out_of_time(args, rows, peer, 'chain'):
            continue
        n = 1 << 20
        y0 = peer.asarray(np.random.default_rng(9).uniform(-1, 1, n))

        def chain(y):
            for k in range(L):
                y = y * (1.0 - 1.0 / (k + 2)) + 1.0 / (k + 3)
            return y

        f = peer.wrap(chain)
        res, _ = measure(peer, f, (y0,), args.quick)
        rows.append({"program": "chain", "mode": peer.name, "size": {"length": L, "n": n}, **res})
        print("  chain L=%-5d %-32s %12.1f us per call" % (L, peer.name, res["per_call_us"]))


def out_of_time(args, rows, peer, program):
    """Past the deadline: the case is reported as skipped. Else the rows so far are saved."""
    if args.json:
        save(args.json, rows)
    if args.deadline and time.monotonic() - START > args.deadline:
        print("  %s %s: skipped (past --deadline %g s)" % (program, peer.name, args.deadline))
        return True
    return False


def save(path, rows):
    with open(path, "w") as f:
        json.dump({"schema": "sluice-bench-lazy/1", "device": "peers", "results": rows}, f,
                  indent=1)


START = time.monotonic()

# ---- sizes ------------------------------------------------------------------------------------


def sizes_from(path):
    """The cases sluice_lazy_bench measured (so both cover the same sizes)."""
    with open(path) as f:
        data = json.load(f)
    out = {"dg": [], "figure1": [], "wide": [], "chain": []}
    for r in data.get("results", []):
        s = r["size"]
        key = {"dg_rhs": ("dg", lambda: (int(s["p"]), int(s["scale"]))),
               "figure1": ("figure1", lambda: int(s["n"])),
               "wide": ("wide", lambda: (int(s["branches"]), int(s["rows"]))),
               "chain": ("chain", lambda: int(s["length"]))}.get(r["program"])
        if key is None:
            continue
        value = key[1]()
        if value not in out[key[0]]:
            out[key[0]].append(value)
    return out


def default_sizes():
    return {"dg": [(p, s) for p in (1, 2, 3, 4) for s in (1, 8, 64)],
            "figure1": [1 << k for k in range(10, 25, 2)],
            "wide": [(W, e) for e in (64, 16384) for W in (1, 2, 4, 8, 16, 32, 64)],
            "chain": [10, 30, 100, 300, 1000]}


def ordered_cases(sizes, programs):
    """The cases, those the goals of issue 25 name first: the DG right-hand side at full size, the
    wide DAG at large branches, then the DG at 1/8 and 1/64, the small wide DAG, Figure 1 and the
    chain. Every peer runs a case before the next case starts, so that when time runs out the
    least important cases are missing for every peer, not every case for the last peers."""
    def rank(case):
        prog, size = case
        if prog == "dg":
            p, scale = size
            return ({1: 0, 8: 2, 64: 3}.get(scale, 4), p)
        if prog == "wide":
            W, e = size
            return (1 if e >= 1024 else 5, W)
        return ({"figure1": 6, "chain": 7}[prog], size)
    cases = [(prog, size) for prog in programs for size in sizes.get(prog, [])]
    return sorted(cases, key=rank)


def case_cost(prog, size):
    """A rough order of the time of a case (a peer that ran over the limit on a case skips those
    of its program that cost as much or more). Compiling dominates: torch.compile's time grows
    with the wide DAG's branches and the chain's length (30 s for 16 branches on an H100)."""
    if prog == "dg":
        return size[0] ** 2 / size[1]
    if prog == "wide":
        return size[0]
    return size


class CaseTimeout(Exception):
    pass


def on_alarm(signum, frame):
    raise CaseTimeout()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers", default="jax-jit,torch-compile,torch-compile-reduce-overhead,"
                    "torch-graph-streams,cupy,torch-eager")
    ap.add_argument("--programs", default="dg,figure1,wide,chain")
    ap.add_argument("--dg", default="out/dg", help="directory of sluice_lazy_bench --dump-dg")
    ap.add_argument("--from", dest="from_json", help="take the sizes from a sluice_lazy_bench JSON")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--deadline", type=float, default=0,
                    help="seconds after which no new case starts (0: none)")
    ap.add_argument("--case-limit", type=float, default=45,
                    help="seconds one peer may spend on one case, compiling included; a peer "
                    "that runs over skips the cases of that program as large (0: no limit)")
    args = ap.parse_args()

    sizes = sizes_from(args.from_json) if args.from_json else default_sizes()
    peers = []
    for name in args.peers.split(","):
        try:
            peers.append(make_peer(name))
        except Exception as e:  # a peer that is not installed
            print("%s: skipped (%s)" % (name, e))
    fns = {"dg": bench_dg, "figure1": bench_figure1, "wide": bench_wide, "chain": bench_chain}
    gave_up = {}  # (peer, program) -> the cost of the case that ran over the limit
    rows = []
    signal.signal(signal.SIGALRM, on_alarm)
    for prog, size in ordered_cases(sizes, args.programs.split(",")):
        print("%s %s:" % (prog, size))
        for peer in peers:
            if prog not in getattr(peer, "programs", (prog,)):
                continue
            if case_cost(prog, size) >= gave_up.get((peer.name, prog), math.inf):
                print("  %s: skipped (a case as large ran over --case-limit %g s)" %
                      (peer.name, args.case_limit))
                continue
            start = time.monotonic()
            # A case started just before the deadline ends at most 20 s after it.
            limit = args.case_limit if args.case_limit > 0 else math.inf
            if args.deadline:
                limit = min(limit, max(1.0, args.deadline + 20 - (start - START)))
            if limit < math.inf:
                signal.setitimer(signal.ITIMER_REAL, limit)
            try:
                fns[prog](peer, args, rows, [size])
            except CaseTimeout:
                if limit < args.case_limit:
                    print("  %s: stopped at the deadline" % peer.name)
                    continue
                cost = case_cost(prog, size)
                gave_up[(peer.name, prog)] = min(cost, gave_up.get((peer.name, prog), math.inf))
                print("  %s: over --case-limit %g s, skips %s cases as large" %
                      (peer.name, args.case_limit, prog))
                peer.reset()
            except Exception:
                print("  %s %s failed:" % (peer.name, prog))
                traceback.print_exc(limit=3)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            print("    (%s: %.1f s)" % (peer.name, time.monotonic() - start))
    if args.json:
        save(args.json, rows)
        print("wrote %s" % args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
