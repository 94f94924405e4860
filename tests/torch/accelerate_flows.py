"""The flows people write with Hugging Face accelerate, on a default process group that is
gyre: accelerator.gather of per-rank predictions, and accelerator.accumulate(model) gradient
accumulation (all-reduces only every ACCUMULATE steps, counted by a DDP comm hook). Launched
by torchrun or gyre-run. accelerate picks the backend itself on CPU (gloo), so the group is
made first and accelerate uses the existing one."""
import sys

import torch
import torch.distributed as dist

import gyre_torch  # noqa: F401

try:
    from accelerate import Accelerator
except ImportError:
    print("accelerate_flows: skipped: accelerate is not installed for this Python")
    sys.exit(77)

ACCUMULATE = 4
STEPS = 12

dist.init_process_group("gyre")
if dist.get_backend() != "gyre":
    raise AssertionError(f"default group is {dist.get_backend()}")
accelerator = Accelerator(cpu=True, gradient_accumulation_steps=ACCUMULATE)
rank, size = accelerator.process_index, accelerator.num_processes

# gather: every rank's predictions, in rank order, on every rank.
predictions = torch.tensor([rank * 10 + i for i in range(3)])
gathered = accelerator.gather(predictions)
want = torch.tensor([r * 10 + i for r in range(size) for i in range(3)])
if not torch.equal(gathered, want):
    raise AssertionError(f"rank {rank}: gather gave {gathered.tolist()}, want {want.tolist()}")

# accumulate: a model trained with accelerate's accumulation context.
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
model, optimizer = accelerator.prepare(model, optimizer)
reduces = [0]


def counting_hook(state, bucket):
    reduces[0] += 1
    tensor = bucket.buffer().div_(size)
    return dist.all_reduce(tensor, async_op=True).get_future().then(lambda f: f.value()[0])


model.register_comm_hook(None, counting_hook)
initial = [p.detach().clone() for p in model.parameters()]
for step in range(STEPS):
    g = torch.Generator().manual_seed(100 * rank + step)
    x, y = torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)
    with accelerator.accumulate(model):
        loss = torch.nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
buckets = reduces[0] // (STEPS // ACCUMULATE) if reduces[0] else 0
if reduces[0] == 0 or reduces[0] != buckets * (STEPS // ACCUMULATE):
    raise AssertionError(f"rank {rank}: {reduces[0]} all-reduces for {STEPS} steps with "
                         f"accumulation {ACCUMULATE}")
flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
if torch.equal(flat, torch.cat([p.reshape(-1) for p in initial])):
    raise AssertionError(f"rank {rank}: the parameters did not change")
everyone = accelerator.gather(flat.unsqueeze(0))
for r in range(size):
    if not torch.equal(everyone[r], flat):
        raise AssertionError(f"rank {rank}: parameters differ from rank {r}'s")
print(f"rank {rank}: accelerate gather and accumulate correct on gyre "
      f"({reduces[0]} all-reduces for {STEPS} steps)", flush=True)
dist.destroy_process_group()
