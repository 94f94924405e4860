"""torch.distributed all_reduce of CUDA tensors on "gyre", "nccl" and "gloo" in the same run:
float32 sums on 2 and 4 processes, rank r on GPU r % device_count (so ranks share a GPU where
there are fewer GPUs than ranks). A backend that cannot run here (NCCL refuses two ranks on one
GPU unless the NCCL in use allows it) is reported with its error, and the others go on.

    torch_cuda_bench.py [--sizes 64K,1M,16M,256M] [--procs 2,4] [--repeats 5]
                        [--backends gyre,nccl,gloo] [--device cuda|cpu]

Each timed repeat is `iters` calls back to back on torch's current stream, synchronized before
and after; the time of a repeat is the slowest rank's, and each cell gives min/median/max over
the repeats. The sums are checked: each repeat starts from ones, so after k calls every element
is n^k (exact in float32 while it is below 2^127). --device cpu runs the same on CPU tensors
(gyre and gloo), for a check of the script without a GPU.
"""
import argparse
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
ITERS = 20  # n^20 stays exact in float32 for n <= 64


def parse_size(text):
    return int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text)


def size_label(nbytes):
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"


def cpu_all_reduce(value, op):
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=op)  # the default group: gyre, on CPU
    return t.item()


def worker(rank, size, port, device_kind, sizes, repeats, backends, results):
    torch.set_num_threads(1)
    if device_kind == "cuda":
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
        sync = torch.cuda.synchronize
    else:
        device = torch.device("cpu")
        def sync():
            pass
    dist.init_process_group("gyre", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=size, timeout=datetime.timedelta(seconds=120))
    groups, refused = {}, {}
    for backend in backends:
        groups[backend] = dist.group.WORLD if backend == "gyre" else dist.new_group(
            backend=backend, timeout=datetime.timedelta(seconds=60))
    rows = []
    for nbytes in sizes:
        t = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
        want = float(size) ** ITERS
        for backend, group in groups.items():
            if backend in refused:
                continue
            error = ""
            try:
                for _ in range(2):  # warm-up (and the backend's communicator set-up)
                    dist.all_reduce(t, group=group)
                sync()
            except Exception as e:  # noqa: BLE001 (reported, and every rank agrees to skip)
                error = str(e).strip().splitlines()[0][:200] if str(e).strip() else repr(e)
            if cpu_all_reduce(0.0 if error else 1.0, dist.ReduceOp.MIN) == 0.0:
                refused[backend] = error or "refused on another rank"
                continue
            times = []
            for _ in range(repeats):
                t.fill_(1.0)
                sync()
                cpu_all_reduce(0.0, dist.ReduceOp.SUM)  # start together
                start = time.perf_counter()
                for _ in range(ITERS):
                    dist.all_reduce(t, group=group)
                sync()
                elapsed = time.perf_counter() - start
                wrong = int((t != want).sum().item())
                if wrong:
                    raise SystemExit(f"rank {rank}: {backend} all_reduce of {nbytes} B: {wrong} "
                                     f"elements differ from {want}")
                times.append(cpu_all_reduce(elapsed / ITERS, dist.ReduceOp.MAX))
            rows.append((backend, size, nbytes, times))
        del t
    if rank == 0:
        results.put((rows, refused))
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="64K,1M,16M,256M")
    parser.add_argument("--procs", default="2,4")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backends", default="gyre,nccl,gloo")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("torch_cuda_bench: torch sees no CUDA device here")
        return 77
    backends = [b for b in args.backends.split(",")
                if not (b == "nccl" and (args.device == "cpu" or not dist.is_nccl_available()))]
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    ctx = mp.get_context("spawn")
    rows, refused = [], {}
    for n in [int(p) for p in args.procs.split(",")]:
        results = ctx.SimpleQueue()
        mp.start_processes(worker, args=(n, free_port(), args.device, sizes, args.repeats, backends,
                                         results), nprocs=n, join=True, start_method="spawn")
        got, why = results.get()
        rows += got
        refused.update({f"{b} at n = {n}": e for b, e in why.items()})
    gpus = torch.cuda.device_count() if args.device == "cuda" else 0
    name = torch.cuda.get_device_name(0) if gpus else "CPU tensors"
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if gpus else "-"
    print(f"# torch {torch.__version__} (NCCL {nccl}), {name} x {gpus}, float32 sum, {ITERS} calls "
          f"a repeat; time per call min/median/max over {args.repeats} repeats (slowest rank), "
          f"busbw = bytes * 2(n-1)/n / median")
    table = {(b, n, s): times for b, n, s, times in rows}
    print("\n| procs | size | " + " | ".join(f"{b} time" for b in backends) + " | " +
          " | ".join(f"{b} busbw GB/s" for b in backends) + " |")
    print("| --- | --- |" + " --- |" * (2 * len(backends)))
    for n in sorted({r[1] for r in rows}):
        for s in sizes:
            cells, bws = [], []
            for b in backends:
                times = table.get((b, n, s))
                if not times:
                    cells.append("-")
                    bws.append("-")
                    continue
                lo, med, hi = min(times), statistics.median(times), max(times)
                cells.append(" / ".join(f"{x * 1e6:.0f}" for x in (lo, med, hi)) + " us")
                bws.append(f"{s * 2 * (n - 1) / n / med / 1e9:.2f}")
            print(f"| {n} | {size_label(s)} | " + " | ".join(cells + bws) + " |")
    for what, error in refused.items():
        print(f"\n{what}: not run: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
