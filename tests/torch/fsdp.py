"""Fully sharded data parallel on CPU over "gyre": FullyShardedDataParallel (FSDP1:
all_gather_into_tensor, reduce_scatter_tensor and their coalesced forms) and, where torch has
it, fully_shard (FSDP2: DTensor parameters on a device mesh, each layer its own group). Each
trains a model 5 steps on per-rank data and must end with the parameters one process gets
training the full model on every rank's data. Launched by torchrun or gyre-run. torch 1.13's
FSDP does not import on Python 3.11 (pytorch#92301): skipped there."""
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


def fully_shard_api():
    """FSDP2's fully_shard: public from torch 2.6, composable-only in 2.4-2.5, absent before."""
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        try:
            from torch.distributed._composable.fsdp import fully_shard
        except ImportError:
            return None
    return fully_shard


def make():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def data(rank, step):
    g = torch.Generator().manual_seed(100 * rank + step)
    return torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)


def train(model, rank, lr=0.1):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for step in range(STEPS):
        x, y = data(rank, step)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def reference(size, lr=0.1):
    """The same steps for one process that sees every rank's batch: the mean of their losses."""
    model = make()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for step in range(STEPS):
        opt.zero_grad()
        loss = sum(torch.nn.functional.mse_loss(model(xr), yr)
                   for xr, yr in (data(r, step) for r in range(size))) / size
        loss.backward()
        opt.step()
    return [p.detach() for p in model.parameters()]


def check(what, params, expected, rank):
    if len(params) != len(expected):
        raise AssertionError(f"rank {rank}: {what} has {len(params)} parameters, not {len(expected)}")
    for i, (p, q) in enumerate(zip(params, expected)):
        if p.shape != q.shape or not torch.allclose(p, q, rtol=1e-5, atol=1e-6):
            diff = (p - q).abs().max().item() if p.shape == q.shape else f"shape {tuple(p.shape)}"
            raise AssertionError(f"rank {rank}: {what} parameter {i} differs from the reference "
                                 f"by {diff}")
    print(f"rank {rank}: {what} on gyre matches the one-process reference after {STEPS} steps",
          flush=True)


dist.init_process_group("gyre")
rank, size = dist.get_rank(), dist.get_world_size()
expected = reference(size)

sharded = FSDP(make(), device_id=torch.device("cpu"), use_orig_params=True)
train(sharded, rank)
with FSDP.summon_full_params(sharded):
    check("FSDP", [p.detach().clone() for p in sharded.parameters()], expected, rank)

fully_shard = fully_shard_api()
if fully_shard is None:
    print(f"rank {rank}: fully_shard: not in torch {torch.__version__}", flush=True)
else:
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (size,))
    model = make()
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    train(model, rank)
    # Each parameter is a DTensor sharded over the mesh: full_tensor() all-gathers it.
    check("fully_shard", [p.full_tensor().detach() for p in model.parameters()], expected, rank)
    if hasattr(model, "set_gradient_divide_factor"):
        # Gradients summed and divided by twice the ranks, which FSDP2 asks of the backend as
        # ReduceOp.PREMUL_SUM(1 / factor) (gloo refuses it): the mean's steps at half the rate.
        model = make()
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        for module in model.modules():  # each layer's group reduces its own gradients
            if hasattr(module, "set_gradient_divide_factor"):
                module.set_gradient_divide_factor(2.0 * size)
        train(model, rank, lr=0.1)
        check("fully_shard with a gradient divide factor",
              [p.full_tensor().detach() for p in model.parameters()], reference(size, lr=0.05), rank)
dist.destroy_process_group()
