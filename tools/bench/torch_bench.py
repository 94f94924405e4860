"""torch.distributed all_reduce on "gyre" and "gloo" in the same run: float32 tensors of the
given sizes on 2, 4 and 6 processes, warm-up first, the time of each call averaged over the
iterations and aggregated across ranks (the slowest rank's average, as a step would see it),
with the effective bandwidth (bytes / time). Repeats give the spread (min/median/max of the
per-repeat averages). Also one DDP training step of a ~25 M-parameter model on each backend,
and how much of an async all_reduce hides behind computation.

    torch_bench.py --out DIR [--sizes 1M,10M,100M,1G] [--procs 2,4,6] [--repeats 3]
                   [--allreduce-only] [--async-wait] [--bind]

--async-wait times `all_reduce(t, async_op=True).wait()` instead of the synchronous call.
--bind pins each rank's process to its block of the CPUs, as `gyre-run --bind auto` does
(spawned processes otherwise float, as under torchrun).

Writes DIR/allreduce.csv, DIR/ddp.csv, DIR/overlap.csv and prints markdown tables.
"""
import argparse
import csv
import datetime
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "torch"))
import gyre_torch  # noqa: E402,F401
from common import free_port  # noqa: E402

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    return int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text)


def iterations(nbytes):
    # Small calls take microseconds: enough of them to time, as the large ones take 50 at most.
    return max(3, min(50 if nbytes >= 1 << 20 else 2000, (200 << 20) // max(nbytes, 1)))


def size_label(nbytes):
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"


def time_label(seconds):
    return f"{seconds * 1e3:.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} us"


def timed(fn, iters):
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - start) / iters


def slowest(value):
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def bind_block(rank, size):
    # gyre-run's blocks: with more ranks than CPUs consecutive ranks share one, else each rank
    # gets an even share.
    cpus = sorted(os.sched_getaffinity(0))
    if size > len(cpus):
        mine = {cpus[rank * len(cpus) // size]}
    else:
        share = len(cpus) // size
        mine = set(cpus[rank * share:(rank + 1) * share])
    os.sched_setaffinity(0, mine)


def worker(rank, size, port, sizes, repeats, allreduce_only, async_wait, bind, results):
    if bind:
        bind_block(rank, size)
    # One compute thread per process: the ranks share the machine's cores already.
    torch.set_num_threads(1)
    dist.init_process_group("gyre", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=size, timeout=datetime.timedelta(seconds=600))
    groups = {"gyre": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    rows = []
    for nbytes in sizes:
        t = torch.ones(nbytes // 4, dtype=torch.float32)
        for backend, group in groups.items():
            if async_wait:
                def call():
                    dist.all_reduce(t, group=group, async_op=True).wait()
            else:
                def call():
                    dist.all_reduce(t, group=group)
            for _ in range(2):  # warm-up
                call()
            times = [slowest(timed(call, iterations(nbytes))) for _ in range(repeats)]
            rows.append(("allreduce", backend, size, nbytes, times))
        del t
    if allreduce_only:
        if rank == 0:
            results.put(rows)
        dist.destroy_process_group()
        return
    # One DDP step (forward, backward, gradient all-reduce, optimizer) of ~25 M parameters.
    for backend, group in groups.items():
        torch.manual_seed(0)
        model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(6)])
        net = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
        opt = torch.optim.SGD(net.parameters(), lr=1e-4)
        x = torch.randn(8, 2048)

        def step():
            opt.zero_grad()
            net(x).sum().backward()
            opt.step()
        step()
        times = [slowest(timed(step, 3)) for _ in range(repeats)]
        params = sum(p.numel() for p in model.parameters())
        rows.append(("ddp", backend, size, params, times))
    # Overlap: an async all_reduce of 64 MiB beside as much matmul work as the all_reduce takes
    # alone, against the two in turn.
    t = torch.ones(16 << 20)
    a = torch.randn(256, 256)
    comm_alone = slowest(timed(lambda: dist.all_reduce(t), 3))
    one = slowest(timed(lambda: a @ a, 20))
    reps = max(1, int(comm_alone / one))

    def compute():
        for _ in range(reps):
            a @ a
    compute_alone = slowest(timed(compute, 3))

    def both():
        work = dist.all_reduce(t, async_op=True)
        compute()
        work.wait()
    together = slowest(timed(both, 3))
    rows.append(("overlap", "gyre", size, 64 << 20, [comm_alone, compute_alone, together]))
    if rank == 0:
        results.put(rows)
    dist.destroy_process_group()


def spread(times):
    return min(times), statistics.median(times), max(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--sizes", default="1M,10M,100M,1G")
    parser.add_argument("--procs", default="2,4,6")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--allreduce-only", action="store_true",
                        help="only the all_reduce table (no DDP step, no overlap)")
    parser.add_argument("--async-wait", action="store_true",
                        help="time all_reduce(async_op=True).wait() instead of all_reduce()")
    parser.add_argument("--bind", action="store_true",
                        help="pin each rank to its block of CPUs, as gyre-run --bind auto does")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    ctx = mp.get_context("spawn")
    rows = []
    for n in [int(p) for p in args.procs.split(",")]:
        results = ctx.SimpleQueue()
        mp.start_processes(worker, args=(n, free_port(), sizes, args.repeats, args.allreduce_only, args.async_wait, args.bind, results), nprocs=n,
                           join=True, start_method="spawn")
        rows += results.get()
    call = "all_reduce(async_op=True).wait()" if args.async_wait else "all_reduce()"
    call += ", ranks bound in blocks" if args.bind else ", ranks floating"
    print(f"# torch {torch.__version__}, {os.cpu_count()} CPUs, {call}; time = slowest rank's "
          f"average per call, min/median/max over {args.repeats} repeats")
    with open(os.path.join(args.out, "allreduce.csv"), "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["backend", "procs", "bytes", "time_ms_min", "time_ms_median", "time_ms_max",
                      "busbw_GBps_median", "algbw_GBps_median"])
        print("\n| procs | size | gyre time (min/med/max) | gloo time (min/med/max) | gyre GB/s | gloo GB/s | gyre / gloo |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        table = {}
        for kind, backend, n, nbytes, times in rows:
            if kind != "allreduce":
                continue
            lo, med, hi = spread(times)
            algbw = nbytes / med / 1e9
            busbw = algbw * 2 * (n - 1) / n
            out.writerow([backend, n, nbytes, lo * 1e3, med * 1e3, hi * 1e3, busbw, algbw])
            table[(n, nbytes, backend)] = (lo, med, hi, algbw)
        for (n, nbytes, backend) in sorted(table):
            if backend != "gyre":
                continue
            g, o = table[(n, nbytes, "gyre")], table[(n, nbytes, "gloo")]
            print(f"| {n} | {size_label(nbytes)} | {' / '.join(time_label(x) for x in g[:3])} | "
                  f"{' / '.join(time_label(x) for x in o[:3])} | {g[3]:.2f} | {o[3]:.2f} | "
                  f"{o[1] / g[1]:.2f}x |")
    if args.allreduce_only:
        return
    with open(os.path.join(args.out, "ddp.csv"), "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["backend", "procs", "params", "step_ms_min", "step_ms_median", "step_ms_max"])
        print("\n| procs | DDP step, ~25 M params | gyre ms (min/med/max) | gloo ms (min/med/max) |")
        print("| --- | --- | --- | --- |")
        steps = {}
        for kind, backend, n, params, times in rows:
            if kind == "ddp":
                lo, med, hi = spread(times)
                out.writerow([backend, n, params, lo * 1e3, med * 1e3, hi * 1e3])
                steps[(n, backend)] = (lo, med, hi, params)
        for n in sorted({k[0] for k in steps}):
            g, o = steps[(n, "gyre")], steps[(n, "gloo")]
            print(f"| {n} | {g[3] / 1e6:.1f} M | {g[0]*1e3:.1f} / {g[1]*1e3:.1f} / {g[2]*1e3:.1f} | "
                  f"{o[0]*1e3:.1f} / {o[1]*1e3:.1f} / {o[2]*1e3:.1f} |")
    with open(os.path.join(args.out, "overlap.csv"), "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["procs", "allreduce_ms", "compute_ms", "together_ms", "hidden_fraction"])
        print("\n| procs | all_reduce 64 MiB ms | compute ms | async all_reduce + compute ms | hidden (of the shorter) |")
        print("| --- | --- | --- | --- | --- |")
        for kind, backend, n, nbytes, times in rows:
            if kind != "overlap":
                continue
            comm, comp, both = times
            hidden = (comm + comp - both) / min(comm, comp)  # of the shorter one
            out.writerow([n, comm * 1e3, comp * 1e3, both * 1e3, hidden])
            print(f"| {n} | {comm*1e3:.1f} | {comp*1e3:.1f} | {both*1e3:.1f} | {hidden:.0%} |")


if __name__ == "__main__":
    main()
