"""Leaving while gyre's completion thread still runs Python. A second group's async all-reduce
has a slow Python callback; the script waits for it (the wait returns before the callbacks
run), destroys that group but keeps a reference, so torch frees its backend only as the
interpreter finalizes, and ends. Once the interpreter finalizes, a thread that takes the GIL
is ended by pthread_exit, and unwinding through a destructor aborts the process: gyre stops
its completion threads at exit, before that. A collective issued after that stop (from an
atexit handler that runs later) completes on the caller's thread. Every rank exits 0."""
import atexit
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist


def late_collective():
    t = torch.full((2,), float(rank + 1))
    work = dist.all_reduce(t, async_op=True)
    work.wait(timeout=datetime.timedelta(seconds=30))
    if not torch.equal(t, torch.full((2,), expected)):
        print(f"rank {rank}: the all-reduce at exit gave {t.tolist()}, not {expected}", flush=True)
        os._exit(1)
    print(f"rank {rank}: an all-reduce after gyre stopped its threads completed", flush=True)


# Registered before gyre_torch's own handler, so it runs after it (atexit runs last first).
atexit.register(late_collective)
import gyre_torch  # noqa: E402,F401

dist.init_process_group("gyre")
rank, size = dist.get_rank(), dist.get_world_size()
expected = float(sum(range(1, size + 1)))
group = dist.new_group()
t = torch.full((4,), float(rank + 1))
work = dist.all_reduce(t, group=group, async_op=True)


def slow(fut):
    time.sleep(0.05)  # the GIL is released here; the main thread goes on to exit
    return fut.value()


work.get_future().then(slow)
work.wait()
if not torch.equal(t, torch.full((4,), expected)):
    print(f"rank {rank}: all-reduce gave {t.tolist()}, not {expected}", flush=True)
    sys.exit(1)
keep = group  # torch frees the backend only when the interpreter tears this module down
dist.destroy_process_group(group)
print(f"rank {rank}: leaving while the completion thread runs the callback", flush=True)
