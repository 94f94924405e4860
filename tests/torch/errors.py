"""Failures reach Python as RuntimeError with gyre's message, bounded in time: a rank killed
mid-training makes every other rank raise naming it; mismatched collectives raise naming
both sides; a dtype or op gyre lacks is refused saying so."""
import datetime
import os
import queue
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from common import free_port

SIZE = 4
VICTIM = 2
# torch's exception for a failed backend: DistBackendError (a RuntimeError) from torch 2.
EXCEPTION = "DistBackendError" if hasattr(dist, "DistBackendError") else "RuntimeError"


def killed(rank, results):
    import gyre_torch  # noqa: F401
    dist.init_process_group("gyre", rank=rank, world_size=SIZE,
                            timeout=datetime.timedelta(seconds=60))
    t = torch.ones(1 << 18)
    start = None
    try:
        for step in range(1000):
            if rank == VICTIM and step == 20:
                os.kill(os.getpid(), signal.SIGKILL)
            if step == 20:
                start = time.monotonic()
            dist.all_reduce(t)
            t.fill_(1.0)
        results.put((rank, "no error", 0.0))
    except RuntimeError as e:
        results.put((rank, f"{type(e).__name__}: {e}", time.monotonic() - (start or time.monotonic())))


def mismatched(rank, results):
    import gyre_torch  # noqa: F401
    start = time.monotonic()
    try:
        # A rank still setting up when the others already fail their first call fails its set-up,
        # naming that first failure (runtime/core/communicator.cc): it reports like the others.
        dist.init_process_group("gyre", rank=rank, world_size=SIZE,
                                timeout=datetime.timedelta(seconds=60))
        start = time.monotonic()
        dist.all_reduce(torch.ones(10 if rank == 0 else 11))
        results.put((rank, "no error", 0.0))
    except RuntimeError as e:
        results.put((rank, f"{type(e).__name__}: {e}", time.monotonic() - start))


def run(target, expect):
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(free_port())
    procs = [ctx.Process(target=target, args=(r, results)) for r in range(SIZE)]
    for p in procs:
        p.start()
    got = {}
    deadline = time.monotonic() + 90
    while len(got) < SIZE - (1 if target is killed else 0) and time.monotonic() < deadline:
        try:
            rank, message, seconds = results.get(timeout=1)
            got[rank] = (message, seconds)
        except queue.Empty:
            pass
    for p in procs:
        p.join(10)
        if p.is_alive():
            p.kill()
    for rank, (message, seconds) in sorted(got.items()):
        print(f"{target.__name__}: rank {rank} after {seconds:.1f} s: {message[:300]}")
        expect(rank, message, seconds)
    wanted = SIZE - (1 if target is killed else 0)
    if len(got) != wanted:
        raise AssertionError(f"{target.__name__}: {wanted - len(got)} ranks never reported")


def expect_killed(rank, message, seconds):
    if not message.startswith(f"{EXCEPTION}: gyre: remote error: rank {VICTIM} is gone"):
        raise AssertionError(f"rank {rank} did not name rank {VICTIM} first: {message}")
    if seconds > 15:
        raise AssertionError(f"rank {rank} took {seconds:.1f} s (timeout 60 s)")


def expect_mismatch(rank, message, seconds):
    named = (message.startswith(f"{EXCEPTION}: gyre: invalid usage")
             or message.startswith("RuntimeError: gyre init failed (invalid usage)"))
    if (not named or "ranks disagree" not in message
            or "count 10" not in message or "count 11" not in message):
        raise AssertionError(f"rank {rank} did not name both sides of the mismatch: {message}")
    if seconds > 15:
        raise AssertionError(f"rank {rank} took {seconds:.1f} s (timeout 60 s)")


if __name__ == "__main__":
    run(killed, expect_killed)
    run(mismatched, expect_mismatch)
    print("errors: killed rank and mismatch named on every rank")
    sys.exit(0)
