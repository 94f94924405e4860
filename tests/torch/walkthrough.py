"""The six-collective walkthrough of the torch.distributed tutorial, on the "gyre" backend:
4 processes from torch.multiprocessing.spawn, MASTER_ADDR/MASTER_PORT, init_process(rank,
size, fn, backend="gyre"); each checks the values the tutorial states."""
import datetime
import gc
import os
import sys
import threading
import time
import weakref

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
    # new_group: a gyre sub-communicator of ranks 0 and 2; ranks 1 and 3 are not in it.
    sub = dist.new_group([0, 2])
    t = torch.ones(3)
    if rank in (0, 2):
        dist.all_reduce(t, group=sub)
        check("all_reduce on new_group([0, 2])", t, torch.full((3,), 2.0))
    else:
        check("untouched outside the group", t, torch.ones(3))
    # async_op: a Work whose wait(), is_completed() and future work.
    t = torch.full((1000,), float(rank))
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future()
    work.wait()
    if not work.is_completed():
        raise AssertionError("work not completed after wait()")
    check("async all_reduce", fut.wait()[0], torch.full((1000,), 6.0))
    # Once waited for and let go of, a call's tensor is gyre's no more: nothing keeps it alive.
    t = torch.full((1000,), float(rank))
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    check("async all_reduce, waited for", t, torch.full((1000,), 6.0))
    alive = weakref.ref(t)
    del work, t
    gc.collect()
    if alive() is not None:
        raise AssertionError(f"rank {rank}: a tensor waited for and let go of is still referenced")
    # Calls left in flight, then a synchronous one (on torch 2 it runs on this thread): all run
    # in issue order, or the sizes would mismatch across ranks.
    pending = [torch.full((4096,), float(rank + k)) for k in range(4)]
    works = [dist.all_reduce(p, async_op=True) for p in pending]
    last = torch.full((8,), float(rank))
    dist.all_reduce(last)
    check("a synchronous all_reduce after four in flight", last, torch.full((8,), 6.0))
    for k, (w, p) in enumerate(zip(works, pending)):
        w.wait()
        check(f"in-flight all_reduce {k}", p, torch.full((4096,), 6.0 + 4 * k))
    # A wait that gives up while the call runs elsewhere, and the work still completes.
    gave_up_once_each(rank, size)
    # Objects travel over the other collectives.
    objects = [None] * size
    dist.all_gather_object(objects, {"rank": rank, "name": f"r{rank}"})
    if objects != [{"rank": r, "name": f"r{r}"} for r in range(size)]:
        raise AssertionError(f"all_gather_object: {objects}")
    box = [f"from rank 0", 42] if rank == 0 else [None, None]
    dist.broadcast_object_list(box, src=0)
    if box != ["from rank 0", 42]:
        raise AssertionError(f"broadcast_object_list: {box}")
    # Point to point: isend/irecv around the ring and batch_isend_irecv.
    nxt, prv = (rank + 1) % size, (rank + size - 1) % size
    got = torch.full((5,), -1.0)
    reqs = [dist.isend(torch.full((5,), float(rank)), nxt), dist.irecv(got, prv)]
    for r in reqs:
        r.wait()
    check("isend/irecv", got, torch.full((5,), float(prv)))
    got = torch.full((5,), -1.0)
    ops = [dist.P2POp(dist.isend, torch.full((5,), 10.0 + rank), nxt),
           dist.P2POp(dist.irecv, got, prv)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    check("batch_isend_irecv", got, torch.full((5,), 10.0 + prv))
    dist.barrier()
    print(f"rank {rank}: walkthrough correct", flush=True)


def gave_up_once_each(rank, size):
    """On ranks 1-3, the communicator's worker runs `first`, which waits for rank 0, while this
    thread waits 50 ms for `second`, queued behind it: the wait gives up, nobody waits for
    `second` after that, and its future completes all the same (the completion thread settles
    it). Rank 0 joins once the others have tried, or after 2 s. Whether the worker took `first`
    before the wait came cannot be seen from here: where this thread ran `first` itself, the
    wait returns when rank 0 joins, and the round is repeated, each time leaving the worker
    longer to take it, until every rank saw its wait give up."""
    store = dist.distributed_c10d._get_default_store()
    gave_up = rank == 0
    for attempt in range(6):
        first, second = torch.full((64,), float(rank)), torch.full((16,), float(rank))
        tried = f"walkthrough/gave_up/{attempt}"
        if rank == 0:
            try:
                store.wait([tried + "/all"], datetime.timedelta(seconds=2))
            except RuntimeError:
                pass  # a rank ran `first` itself and returns only once rank 0 joins
        w1 = dist.all_reduce(first, async_op=True)
        w2 = dist.all_reduce(second, async_op=True)
        ended = threading.Event()
        w2.get_future().then(lambda _: ended.set())
        if rank != 0:
            time.sleep(0.02 * 2 ** attempt)  # leaves the worker time to take `first`
            try:
                w2.wait(timeout=datetime.timedelta(milliseconds=50))
            except RuntimeError as e:
                if "not completed" not in str(e):
                    raise
                gave_up = True
            if store.add(tried, 1) == size - 1:
                store.set(tried + "/all", "1")
        if not ended.wait(timeout=60):
            raise AssertionError(f"rank {rank}: the future of a work whose wait gave up did not "
                                 "complete in 60 s")
        check("future of a work whose wait gave up", w2.get_future().wait()[0],
              torch.full((16,), 6.0))
        w1.wait()
        check("the call in front of it", first, torch.full((64,), 6.0))
        everyone = torch.tensor([1 if gave_up else 0])
        dist.all_reduce(everyone, op=dist.ReduceOp.MIN)
        if everyone.item() == 1:
            return
    raise AssertionError(f"rank {rank}: in 6 rounds some rank's worker never took the call in "
                         f"front before the short wait (gave up here: {gave_up})")


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
