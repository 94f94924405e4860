"""CUDA tensors on "gyre": all_reduce, broadcast, all_gather_into_tensor and
reduce_scatter_tensor of tensors on the GPU (ranks sharing the GPUs there are), issued on
torch's current stream. Skipped, saying why, without a GPU or a gyre_torch built with CUDA."""
import sys
import time

import torch
import torch.distributed as dist

import gyre_torch  # noqa: F401

if not torch.cuda.is_available():
    print("cuda_tensors: skipped: torch sees no CUDA device here")
    sys.exit(77)

dist.init_process_group("gyre")
rank, size = dist.get_rank(), dist.get_world_size()
device = torch.device("cuda", rank % torch.cuda.device_count())
torch.cuda.set_device(device)
try:
    t = torch.full((1 << 20,), float(rank + 1), device=device)
    dist.all_reduce(t)
except RuntimeError as e:
    if "only CPU tensors" in str(e):
        print(f"cuda_tensors: skipped: {e}")
        sys.exit(77)
    raise
want = size * (size + 1) / 2
torch.cuda.synchronize()
assert torch.all(t == want).item(), f"rank {rank}: all_reduce gave {t[0].item()}, want {want}"
pm = torch.full((1000,), float(rank + 1), device=device)
dist.all_reduce(pm, op=dist._make_nccl_premul_sum(0.5))
assert torch.all(pm == want / 2).item(), f"rank {rank}: premul_sum all_reduce gave {pm[0].item()}"
b = torch.full((4097,), float(rank), device=device)
dist.broadcast(b, src=size - 1)
assert torch.all(b == size - 1).item(), f"rank {rank}: broadcast"
out = torch.full((size * 1000,), -1.0, device=device)
dist.all_gather_into_tensor(out, torch.full((1000,), float(rank), device=device))
assert torch.equal(out.cpu(), torch.arange(size).repeat_interleave(1000).float()), "all_gather"
rs = torch.empty(1000, device=device)
dist.reduce_scatter_tensor(rs, torch.ones(size * 1000, device=device))
assert torch.all(rs == size).item(), f"rank {rank}: reduce_scatter_tensor"
# As ProcessGroupNCCL's: wait() makes the caller's stream wait for the call, not the CPU, and the
# future is complete once the call is on the stream. Behind a second of the stream's time, the
# stream must still be busy when both return.
x = torch.full((1 << 16,), float(rank + 1), device=device)
torch.cuda._sleep(1 << 31)
work = dist.all_reduce(x, async_op=True)
work.wait()
value = work.get_future().wait()
stream_busy = not torch.cuda.current_stream().query()
torch.cuda.synchronize()
assert stream_busy, f"rank {rank}: wait() held the CPU until the stream had run the call"
assert torch.all(x == want).item(), f"rank {rank}: async all_reduce gave {x[0].item()}"
assert value[0].data_ptr() == x.data_ptr(), f"rank {rank}: the future's value is not the tensor"
deadline = time.monotonic() + 30
while not work.is_completed() and time.monotonic() < deadline:
    time.sleep(0.01)
assert work.is_completed() and work.is_success(), f"rank {rank}: the work never completed"
# A coalesced batch (DDP's and FSDP's buckets): one gyre group on the stream.
from torch.distributed.distributed_c10d import _coalescing_manager  # noqa: E402

parts = [torch.full((n,), float(rank + 1), device=device) for n in (1000, 1 << 18, 3)]
with _coalescing_manager(device=device, async_ops=True) as cm:
    for p in parts:
        dist.all_reduce(p)
cm.wait()
for p in parts:
    assert torch.all(p == want).item(), f"rank {rank}: coalesced all_reduce of {p.numel()}"
print(f"rank {rank}: CUDA tensors correct on {device}", flush=True)
dist.destroy_process_group()
