"""DistributedDataParallel on "gyre" against "gloo": a small model trained from one seed on
per-rank data ends with the same parameters on both backends; gradient accumulation with
no_sync() gives the parameters accumulation with a sync every step gives, with a quarter of
the all-reduces (counted by a comm hook that chains on gyre's futures)."""
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import gyre_torch  # noqa: F401

from common import spawn_ranks

STEPS = 6
ACCUMULATE = 4


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))


def batch(rank, step):
    g = torch.Generator().manual_seed(100 * rank + step)
    return torch.randn(16, 32, generator=g), torch.randn(16, 8, generator=g)


def counting_hook(counter):
    def hook(group, bucket):
        counter[0] += 1
        tensor = bucket.buffer()
        tensor.div_(dist.get_world_size(group))
        fut = dist.all_reduce(tensor, group=group, async_op=True).get_future()
        return fut.then(lambda f: f.value()[0])
    return hook


def train(rank, group, accumulate_with_no_sync, counter=None):
    net = DDP(model(), process_group=group)
    if counter is not None:
        net.register_comm_hook(group, counting_hook(counter))
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    for step in range(STEPS):
        opt.zero_grad()
        for micro in range(ACCUMULATE):
            x, y = batch(rank, step * ACCUMULATE + micro)
            last = micro == ACCUMULATE - 1
            if accumulate_with_no_sync and not last:
                with net.no_sync():
                    torch.nn.functional.mse_loss(net(x), y).backward()
            else:
                torch.nn.functional.mse_loss(net(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in net.parameters()]


def main(rank, size):
    dist.init_process_group("gyre", rank=rank, world_size=size)
    gyre = dist.group.WORLD
    gloo = dist.new_group(backend="gloo")
    with_gyre = train(rank, gyre, False)
    with_gloo = train(rank, gloo, False)
    for a, b in zip(with_gyre, with_gloo):
        if not torch.allclose(a, b, rtol=1e-5, atol=1e-6):
            raise AssertionError(f"rank {rank}: gyre and gloo DDP parameters differ by "
                                 f"{(a - b).abs().max().item()}")
    synced, accumulated = [0], [0]
    every_step = train(rank, gyre, False, synced)
    no_sync = train(rank, gyre, True, accumulated)
    for a, b in zip(every_step, no_sync):
        if not torch.allclose(a, b, rtol=1e-5, atol=1e-6):
            raise AssertionError(f"rank {rank}: no_sync accumulation differs by "
                                 f"{(a - b).abs().max().item()}")
    if accumulated[0] * ACCUMULATE != synced[0] or synced[0] == 0:
        raise AssertionError(f"rank {rank}: {synced[0]} all-reduces with a sync every micro-step, "
                             f"{accumulated[0]} with no_sync (want a quarter)")
    # Every rank ends with the same parameters.
    flat = torch.cat([p.reshape(-1) for p in with_gyre])
    everyone = [torch.empty_like(flat) for _ in range(size)]
    dist.all_gather(everyone, flat)
    for r, other in enumerate(everyone):
        if not torch.equal(other, flat):
            raise AssertionError(f"rank {rank}: parameters differ from rank {r}'s")
    print(f"rank {rank}: DDP matches gloo; no_sync {accumulated[0]} vs {synced[0]} all-reduces",
          flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    spawn_ranks(main, size)
    print(f"ddp: {size} ranks, all correct")
