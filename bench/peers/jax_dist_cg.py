#!/usr/bin/env python3
"""The JAX peer of `sluice bench --scaling` (scripts/gpu-dist): CG with Jacobi on the 3D 7-point
Laplacian (centre 6, neighbours -1, Dirichlet boundaries), the grid sharded along z over the
GPUs with shard_map, each shard's ghost planes exchanged with ppermute and every dot product a
psum, a fixed number of iterations from x = 0 with b = A 1, the whole solve one jitted call.
One process drives all the GPUs (JAX's single controller). Prints one JSON object per solve:

    python3 bench/peers/jax_dist_cg.py --gpus 1,2 --grid 256,256,256 --weak --iterations 50
"""
import argparse
import json
import statistics
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gpus", default="1,2")
    ap.add_argument("--grid", default="128,128,128", help="NX,NY,NZ (with --weak: per GPU)")
    ap.add_argument("--weak", action="store_true", help="the grid per GPU, stacked along z")
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    try:
        from jax import shard_map
    except ImportError:  # before JAX 0.6
        from jax.experimental.shard_map import shard_map
    jax.config.update("jax_enable_x64", True)

    nx, ny, nz0 = (int(v) for v in args.grid.split(","))
    for g in (int(v) for v in args.gpus.split(",")):
        devices = jax.devices()[:g]
        if len(devices) < g:
            print(json.dumps({"peer": "jax", "gpus": g, "skipped": f"{len(jax.devices())} devices"}))
            continue
        nz = nz0 * g if args.weak else nz0
        if nz % g != 0:
            print(json.dumps({"peer": "jax", "gpus": g, "skipped": f"nz={nz} not divisible by {g}"}))
            continue
        mesh = Mesh(np.array(devices), ("z",))
        spec = P("z", None, None)
        to_next = [(i, i + 1) for i in range(g - 1)]
        to_prev = [(i + 1, i) for i in range(g - 1)]

        def lap(u):
            # Ghost planes: the plane below from the rank below, the one above from the rank
            # above; a rank without that neighbour receives zeros (the Dirichlet boundary).
            if g > 1:
                lo = jax.lax.ppermute(u[-1:], "z", to_next)
                hi = jax.lax.ppermute(u[:1], "z", to_prev)
            else:
                lo = jnp.zeros_like(u[:1])
                hi = jnp.zeros_like(u[:1])
            e = jnp.concatenate([lo, u, hi], axis=0)
            e = jnp.pad(e, ((0, 0), (1, 1), (1, 1)))
            c = e[1:-1, 1:-1, 1:-1]
            return 6.0 * c - (e[:-2, 1:-1, 1:-1] + e[2:, 1:-1, 1:-1] + e[1:-1, :-2, 1:-1] +
                              e[1:-1, 2:, 1:-1] + e[1:-1, 1:-1, :-2] + e[1:-1, 1:-1, 2:])

        def dot(a, b):
            return jax.lax.psum(jnp.vdot(a, b), "z")

        iterations = args.iterations

        def cg(b):
            c = 1.0 / 6.0
            x = jnp.zeros_like(b)
            r = b
            z = c * r
            p = z
            rz = dot(r, z)

            def body(_, s):
                x, r, p, rz = s
                w = lap(p)
                a = rz / dot(p, w)
                x = x + a * p
                r = r - a * w
                z = c * r
                rz_new = dot(r, z)
                p = z + (rz_new / rz) * p
                return x, r, p, rz_new

            x, r, p, rz = jax.lax.fori_loop(0, iterations, body, (x, r, p, rz))
            return x, jnp.sqrt(dot(r, r))

        smap = lambda f, i, o: shard_map(f, mesh=mesh, in_specs=i, out_specs=o)  # noqa: E731
        rhs = jax.jit(smap(lap, (spec,), spec))
        solve = jax.jit(smap(cg, (spec,), (spec, P())))
        ones = jax.device_put(jnp.ones((nz, ny, nx)), NamedSharding(mesh, spec))
        b = rhs(ones)
        x, res = solve(b)  # compile and warm up
        jax.block_until_ready(x)
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            x, res = solve(b)
            jax.block_until_ready((x, res))
            times.append(time.perf_counter() - t0)
        print(json.dumps({"peer": "jax", "gpus": g, "grid": [nx, ny, nz],
                          "weak": args.weak, "iterations": iterations,
                          "time_s": min(times), "median_s": statistics.median(times),
                          "residual": float(res)}), flush=True)


if __name__ == "__main__":
    main()
