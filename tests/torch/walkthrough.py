"""The six-collective walkthrough of the torch.distributed tutorial, on the "gyre" backend:
4 processes from torch.multiprocessing.spawn, MASTER_ADDR/MASTER_PORT, init_process(rank,
size, fn, backend="gyre"); each checks the values the tutorial states."""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import gyre_torch  # noqa: F401  registers "gyre"

from common import free_port


def check(name, got, want):
    if not torch.equal(got, want):
        raise AssertionError(f"rank {dist.get_rank()}: {name}: got {got.tolist()}, want {want.tolist()}")


def run(rank, size):
    # reduce: one-element ones reduced to rank 0 give 4 there.
    t = torch.ones(1)
    dist.reduce(t, dst=0, op=dist.ReduceOp.SUM)
    if rank == 0:
        check("reduce", t, torch.tensor([4.0]))
    # all_reduce of ones gives 4 everywhere.
    t = torch.ones(1)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    check("all_reduce", t, torch.tensor([4.0]))
    # scatter of [1, 2, 3, 4] from rank 0 gives rank i the value i + 1.
    t = torch.full((1,), -1.0)
    scatter_list = [torch.tensor([float(i + 1)]) for i in range(size)] if rank == 0 else None
    dist.scatter(t, scatter_list=scatter_list, src=0)
    check("scatter", t, torch.tensor([float(rank + 1)]))
    # gather of each rank's value (rank + 1) to rank 0 gives [1, 2, 3, 4] there.
    gather_list = [torch.full((1,), -1.0) for _ in range(size)] if rank == 0 else None
    dist.gather(torch.tensor([float(rank + 1)]), gather_list=gather_list, dst=0)
    if rank == 0:
        check("gather", torch.cat(gather_list), torch.tensor([1.0, 2.0, 3.0, 4.0]))
    # all_gather of rank + 1 gives [1, 2, 3, 4] everywhere.
    out = [torch.full((1,), -1.0) for _ in range(size)]
    dist.all_gather(out, torch.tensor([float(rank + 1)]))
    check("all_gather", torch.cat(out), torch.tensor([1.0, 2.0, 3.0, 4.0]))
    # broadcast of rank 0's value (0) reaches every rank.
    t = torch.tensor([float(rank)])
    dist.broadcast(t, src=0)
    check("broadcast", t, torch.tensor([0.0]))
    dist.barrier()
    print(f"rank {rank}: walkthrough correct", flush=True)


def init_process(rank, size, fn, backend="gyre"):
    dist.init_process_group(backend, rank=rank, world_size=size)
    fn(rank, size)
    dist.destroy_process_group()


if __name__ == "__main__":
    size = 4
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(free_port())
    mp.spawn(init_process, args=(size, run), nprocs=size, join=True)
    print("walkthrough: 4 ranks, all correct")
    sys.exit(0)
