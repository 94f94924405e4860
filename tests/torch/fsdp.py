"""FullyShardedDataParallel on CPU over "gyre" (all_gather_into_tensor, reduce_scatter_tensor
and their coalesced forms): a model trained 5 steps on per-rank data ends with the parameters
one process gets training the full model on every rank's data. Launched by torchrun or
gyre-run. torch 1.13's FSDP does not import on Python 3.11 (pytorch#92301): skipped there."""
import sys

import torch
import torch.distributed as dist

import gyre_torch  # noqa: F401

try:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
except Exception as e:  # noqa: BLE001  the import itself fails on 1.13 + Python 3.11
    print(f"fsdp: skipped: torch {torch.__version__} cannot import FSDP here ({type(e).__name__})")
    sys.exit(77)

STEPS = 5


def make():
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def data(rank, step):
    g = torch.Generator().manual_seed(100 * rank + step)
    return torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)


dist.init_process_group("gyre")
rank, size = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = make()
reference = make()
reference.load_state_dict(model.state_dict())
sharded = FSDP(model, device_id=torch.device("cpu"), use_orig_params=True)
opt = torch.optim.SGD(sharded.parameters(), lr=0.1)
ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
for step in range(STEPS):
    x, y = data(rank, step)
    opt.zero_grad()
    torch.nn.functional.mse_loss(sharded(x), y).backward()
    opt.step()
    # The same step for one process that sees every rank's batch: the mean of their losses.
    ref_opt.zero_grad()
    loss = sum(torch.nn.functional.mse_loss(reference(xr), yr)
               for xr, yr in (data(r, step) for r in range(size))) / size
    loss.backward()
    ref_opt.step()
with FSDP.summon_full_params(sharded):
    for p, q in zip(sharded.parameters(), reference.parameters()):
        if not torch.allclose(p, q, rtol=1e-5, atol=1e-6):
            raise AssertionError(f"rank {rank}: FSDP parameters differ from the reference by "
                                 f"{(p - q).abs().max().item()}")
print(f"rank {rank}: FSDP on gyre matches the one-process reference after {STEPS} steps", flush=True)
dist.destroy_process_group()
