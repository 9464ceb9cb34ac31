#!/usr/bin/env python3
"""The PyTorch peer of `sluice bench --scaling` (scripts/gpu-dist): CG with Jacobi on the 3D
7-point Laplacian (centre 6, neighbours -1, Dirichlet boundaries), the grid split along z over
the processes (one GPU each), ghost planes exchanged with NCCL sends and receives, every dot
product an NCCL all-reduce of a device tensor (no host round trip), eager PyTorch, a fixed number
of iterations from x = 0 with b = A 1. Launch one process per GPU:

    mpirun -np 2 python3 bench/peers/torch_dist_cg.py --grid 256,256,256 --weak --iterations 50

(ranks from OMPI_COMM_WORLD_* or torchrun's RANK/WORLD_SIZE). Rank 0 prints one JSON object.
"""
import argparse
import json
import os
import statistics
import time


def env_int(*names, default=0):
    for n in names:
        if n in os.environ:
            return int(os.environ[n])
    return default


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--grid", default="128,128,128", help="NX,NY,NZ (with --weak: per GPU)")
    ap.add_argument("--weak", action="store_true")
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--port", type=int, default=29511)
    args = ap.parse_args()

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    rank = env_int("RANK", "OMPI_COMM_WORLD_RANK")
    size = env_int("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", default=1)
    local = env_int("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK")
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    if size > 1:
        kw = dict(init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=size)
        try:
            dist.init_process_group("nccl", device_id=dev, **kw)
        except TypeError:  # PyTorch before 2.3
            dist.init_process_group("nccl", **kw)

    nx, ny, nz = (int(v) for v in args.grid.split(","))
    if args.weak:
        nz *= size
    planes = [nz // size + (1 if r < nz % size else 0) for r in range(size)]
    nzl = planes[rank]

    def exchange(u):
        """(nzl + 2) planes: u between the ghost planes from the ranks below and above."""
        lo = torch.zeros((1, ny, nx), dtype=u.dtype, device=dev)
        hi = torch.zeros_like(lo)
        if size > 1:
            ops = []
            if rank > 0:
                ops += [dist.P2POp(dist.irecv, lo, rank - 1), dist.P2POp(dist.isend, u[:1].contiguous(), rank - 1)]
            if rank + 1 < size:
                ops += [dist.P2POp(dist.irecv, hi, rank + 1), dist.P2POp(dist.isend, u[-1:].contiguous(), rank + 1)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()  # the compute stream waits for NCCL's; the host does not
        return torch.cat([lo, u, hi], dim=0)

    def lap(u):
        e = F.pad(exchange(u), (1, 1, 1, 1))
        c = e[1:-1, 1:-1, 1:-1]
        return 6.0 * c - (e[:-2, 1:-1, 1:-1] + e[2:, 1:-1, 1:-1] + e[1:-1, :-2, 1:-1] +
                          e[1:-1, 2:, 1:-1] + e[1:-1, 1:-1, :-2] + e[1:-1, 1:-1, 2:])

    def dot(a, b):
        d = torch.dot(a.reshape(-1), b.reshape(-1)).reshape(1)
        if size > 1:
            dist.all_reduce(d)
        return d

    def cg(b):
        c = 1.0 / 6.0
        x = torch.zeros_like(b)
        r = b.clone()
        z = c * r
        p = z.clone()
        rz = dot(r, z)
        for _ in range(args.iterations):
            w = lap(p)
            a = rz / dot(p, w)
            x += a * p
            r -= a * w
            z = c * r
            rz_new = dot(r, z)
            p = z + (rz_new / rz) * p
            rz = rz_new
        return x, torch.sqrt(dot(r, r))

    b = lap(torch.ones((nzl, ny, nx), dtype=torch.float64, device=dev))
    cg(b)  # warm-up
    torch.cuda.synchronize()
    times = []
    for _ in range(args.repeat):
        if size > 1:
            dist.barrier()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        x, res = cg(b)
        torch.cuda.synchronize()
        t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64, device=dev)
        if size > 1:
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
        times.append(float(t))
    if rank == 0:
        print(json.dumps({"peer": "torch", "gpus": size, "grid": [nx, ny, nz],
                          "weak": args.weak, "iterations": args.iterations,
                          "time_s": min(times), "median_s": statistics.median(times),
                          "residual": float(res)}), flush=True)
    if size > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
