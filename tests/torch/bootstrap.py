"""Every way torch users start a job reaches gyre: env:// (under torchrun and under gyre-run),
tcp://, an explicit store=, spawn with MASTER_ADDR/MASTER_PORT; and init_process_group's
timeout= is the one gyre's waits keep.

    bootstrap.py env          # launched by torchrun or gyre-run: RANK, WORLD_SIZE, MASTER_*
    bootstrap.py spawn        # tcp://, store=, and a timeout, on 3 spawned processes
"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import gyre_torch  # noqa: F401

from common import free_port


def check_all_reduce(how):
    rank, size = dist.get_rank(), dist.get_world_size()
    t = torch.full((1001,), float(rank + 1))
    dist.all_reduce(t)
    want = size * (size + 1) / 2
    if not torch.equal(t, torch.full((1001,), want)):
        raise AssertionError(f"{how}: rank {rank}: all_reduce gave {t[0].item()}, want {want}")
    print(f"{how}: rank {rank} of {size}: all_reduce correct", flush=True)


def spawned(rank, size, port, port2, port3):
    # tcp://
    dist.init_process_group("gyre", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=size)
    check_all_reduce("tcp://")
    dist.destroy_process_group()
    # An explicit store.
    store = dist.TCPStore("127.0.0.1", port2, size, rank == 0)
    dist.init_process_group("gyre", store=store, rank=rank, world_size=size)
    check_all_reduce("store=")
    dist.destroy_process_group()
    # timeout= bounds gyre's waits: a group made with a 3 s timeout (new_group, entered together
    # from a barrier, so that start-up skew does not count), rank 2 arrives 8 s late, the
    # others fail within ~3 s naming it.
    dist.init_process_group("gyre", init_method=f"tcp://127.0.0.1:{port3}", rank=rank,
                            world_size=size)
    dist.barrier()
    short = dist.new_group(timeout=datetime.timedelta(seconds=3))
    dist.barrier(group=short)
    if rank == 2:
        time.sleep(8)
        os._exit(0)
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(4), group=short)
        raise AssertionError(f"rank {rank}: all_reduce returned without rank 2")
    except RuntimeError as e:
        took = time.monotonic() - start
        if "timeout" not in str(e) or "rank 2" not in str(e) or not 2.5 < took < 10:
            raise AssertionError(f"rank {rank}: after {took:.1f} s: {e}")
        print(f"timeout=3s: rank {rank} failed after {took:.1f} s: {str(e)[:160]}", flush=True)
    # Stay until the other waiter's own timeout fired too: exiting at once would show it a
    # closed peer instead. Waited for in torch's store (rank 0 hosts it, so it leaves last).
    store = dist.distributed_c10d._get_default_store()
    store.set(f"timed_out/{rank}", "1")
    store.wait(["timed_out/0", "timed_out/1"], datetime.timedelta(seconds=20))
    store.set(f"left/{rank}", "1")
    if rank == 0:
        store.wait(["left/1"], datetime.timedelta(seconds=20))
    os._exit(0)  # the group cannot be destroyed cleanly without rank 2


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "env"
    if mode == "env":
        dist.init_process_group("gyre")  # init_method env://
        check_all_reduce("env://")
        dist.destroy_process_group()
    else:
        mp.spawn(spawned, args=(3, free_port(), free_port(), free_port()), nprocs=3, join=True)
        print("bootstrap: tcp://, store= and timeout= correct")
