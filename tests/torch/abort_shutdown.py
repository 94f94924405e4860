"""destroy_process_group and _abort_process_group reach gyre (torch 2.7's Backend.shutdown and
Backend.abort; older torch: skipped, saying so). Under gyre-run, two ranks:
- shutdown: three asynchronous all-reduces left unwaited are complete, with exact values, once
  destroy_process_group returns; a new default group then works;
- abort: rank 0's all-reduce, which rank 1 never joins, fails "aborted" within seconds of
  _abort_process_group though its timeout is 60 s; the next default group works again."""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
if version < (2, 7):
    print(f"abort_shutdown: skipped: torch {torch.__version__} has no Backend.abort/shutdown (2.7)")
    sys.exit(77)

import gyre_torch  # noqa: E402,F401

TIMEOUT = datetime.timedelta(seconds=60)
# One store for the whole run, a prefix per group: a default group made again over env:// would
# bind MASTER_PORT again while the last one's store may still be closing.
rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
base = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), size, rank == 0,
                     timeout=TIMEOUT)
rounds = 0


def new_default_group():
    global rounds
    rounds += 1
    dist.init_process_group("gyre", store=dist.PrefixStore(f"group{rounds}", base), rank=rank,
                            world_size=size, timeout=TIMEOUT)


def fail(message):
    print(f"rank {rank}: {message}", flush=True)
    sys.exit(1)


new_default_group()

# shutdown: what was issued completes before destroy_process_group returns.
tensors = [torch.full((1 << 16,), float(rank + 1 + k)) for k in range(3)]
works = [dist.all_reduce(t, async_op=True) for t in tensors]
dist.destroy_process_group()
for k, (w, t) in enumerate(zip(works, tensors)):
    want = float(sum(r + 1 + k for r in range(size)))
    if not w.is_completed() or not torch.equal(t, torch.full_like(t, want)):
        fail(f"all-reduce {k} after destroy_process_group: completed {w.is_completed()}, "
             f"value {t[0].item()} (want {want})")

# A new default group after the shutdown, then abort: rank 1 never joins rank 0's call, and
# aborts its own group only once rank 0 says it is done (its leaving would fail that call).
new_default_group()
if rank == 0:
    lonely = torch.ones(8)
    work = dist.all_reduce(lonely, async_op=True)
    time.sleep(0.5)  # the call waits for rank 1 by now
    start = time.monotonic()
    dist.distributed_c10d._abort_process_group()
    try:
        work.wait()
        fail("the all-reduce rank 1 never joined succeeded after the abort")
    except RuntimeError as e:
        took = time.monotonic() - start
        if "aborted" not in str(e) or took > 15:
            fail(f"after the abort: {took:.1f} s, {type(e).__name__}: {e}")
        print(f"rank 0: the lonely all-reduce failed {took:.2f} s after the abort: "
              f"{str(e)[:160]}", flush=True)
    base.set("rank 0 aborted", "1")
else:
    base.wait(["rank 0 aborted"], TIMEOUT)
    dist.distributed_c10d._abort_process_group()

# Every rank can start over.
new_default_group()
t = torch.full((3,), float(rank + 1))
dist.all_reduce(t)
if not torch.equal(t, torch.full((3,), float(size * (size + 1) // 2))):
    fail(f"the all-reduce of the group made after the abort gave {t.tolist()}")
dist.destroy_process_group()
print(f"rank {rank}: shutdown and abort reached gyre", flush=True)
