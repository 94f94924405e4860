"""Helpers the torch tests share."""
import socket


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn_ranks(fn, size, *args):
    """fn(rank, size, *args) on `size` spawned processes, torch-style: MASTER_ADDR/MASTER_PORT
    set to a free loopback port."""
    import os
    import torch.multiprocessing as mp
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(free_port())
    mp.spawn(fn, args=(size, *args), nprocs=size, join=True)
