"""Every collective x dtype x op x shape on "gyre" against the same call on "gloo", in the
same processes (gyre is the default group, gloo a second group of the same ranks), and
against a reference every rank computes from every rank's seeded inputs where gloo lacks the
dtype. Integers exact; floats within TOLERANCE (sums in another order)."""
import sys
import zlib

import torch
import torch.distributed as dist

import gyre_torch  # noqa: F401

from common import spawn_ranks

TOLERANCE = {  # (rtol, atol) for floats
    torch.float32: (1e-5, 1e-5),
    torch.float64: (1e-12, 1e-12),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (2e-2, 2e-2),
}
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
          torch.int32, torch.int64]
OPS = {"sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
       "max": dist.ReduceOp.MAX}
# Shapes: empty, scalar-ish, awkward, and a non-contiguous view (every other column).
SHAPES = [(0,), (1,), (7,), (3, 5), (1000,), "noncontig"]


def make(rank, dtype, shape, salt):
    g = torch.Generator().manual_seed(1000 * rank + salt)
    if shape == "noncontig":
        base = torch.randint(1, 4, (6, 10), generator=g)
        return base.to(dtype)[:, ::2]
    # Small values: products and sums of 4 ranks stay exact in every integer type.
    return torch.randint(1, 4, shape, generator=g).to(dtype)


def close(name, got, want):
    if got.dtype in TOLERANCE:
        rtol, atol = TOLERANCE[got.dtype]
        ok = torch.allclose(got.double(), want.double(), rtol=rtol, atol=atol)
    else:
        ok = torch.equal(got, want)
    if not ok:
        raise AssertionError(f"rank {dist.get_rank()}: {name}: gyre {got.flatten()[:8].tolist()} "
                             f"!= reference {want.flatten()[:8].tolist()}")


def reference_reduce(tensors, op):
    acc = tensors[0].clone()
    for t in tensors[1:]:
        if op == "sum":
            acc = acc + t
        elif op == "product":
            acc = acc * t
        elif op == "min":
            acc = torch.minimum(acc, t)
        else:
            acc = torch.maximum(acc, t)
    return acc.to(tensors[0].dtype)


def gloo_or_reference(fn, reference):
    """gloo's answer where it has the dtype, else the locally computed reference."""
    try:
        return fn()
    except RuntimeError:
        return reference()


def run(rank, size, gloo):
    cases = 0
    for dtype in DTYPES:
        for shape in SHAPES:
            salt = zlib.crc32(f"{dtype} {shape}".encode()) % 997  # the same in every process
            mine = make(rank, dtype, shape, salt)
            everyone = [make(r, dtype, shape, salt) for r in range(size)]
            for opname, op in OPS.items():
                # all_reduce, reduce (root 1)
                t = mine.clone() if shape != "noncontig" else make(rank, dtype, shape, salt)
                dist.all_reduce(t, op=op)
                g = mine.clone()
                want = gloo_or_reference(lambda: (dist.all_reduce(g, op=op, group=gloo), g)[1],
                                         lambda: reference_reduce(everyone, opname))
                close(f"all_reduce {dtype} {shape} {opname}", t, want)
                t = mine.clone()
                dist.reduce(t, dst=1 % size, op=op)
                if rank == 1 % size:
                    close(f"reduce {dtype} {shape} {opname}", t, reference_reduce(everyone, opname))
                # reduce_scatter of size blocks: block r of every rank reduced on rank r
                blocks = [make(rank, dtype, shape, salt + b) for b in range(size)]
                out = torch.empty_like(mine)
                dist.reduce_scatter(out, blocks, op=op)
                theirs = [make(r, dtype, shape, salt + rank) for r in range(size)]
                close(f"reduce_scatter {dtype} {shape} {opname}", out,
                      reference_reduce(theirs, opname))
                cases += 3
            # broadcast from rank 2
            t = mine.clone()
            dist.broadcast(t, src=2 % size)
            close(f"broadcast {dtype} {shape}", t, everyone[2 % size])
            # all_gather into a list and into one tensor
            outs = [torch.full_like(mine, 99) for _ in range(size)]
            dist.all_gather(outs, mine)
            for r in range(size):
                close(f"all_gather {dtype} {shape} from {r}", outs[r], everyone[r])
            flat = torch.full((size * mine.numel(),), 99, dtype=dtype)
            dist.all_gather_into_tensor(flat, mine.contiguous())
            close(f"all_gather_into_tensor {dtype} {shape}", flat,
                  torch.cat([e.reshape(-1) for e in everyone]))
            # reduce_scatter_tensor
            big = torch.cat([make(rank, dtype, shape, salt + b).reshape(-1) for b in range(size)])
            out = torch.full((mine.numel(),), 99, dtype=dtype)
            dist.reduce_scatter_tensor(out, big)
            theirs = [make(r, dtype, shape, salt + rank).reshape(-1) for r in range(size)]
            close(f"reduce_scatter_tensor {dtype} {shape}", out, reference_reduce(theirs, "sum"))
            # gather / scatter with root 3
            root = 3 % size
            gl = [torch.full_like(mine, 99) for _ in range(size)] if rank == root else None
            dist.gather(mine, gather_list=gl, dst=root)
            if rank == root:
                for r in range(size):
                    close(f"gather {dtype} {shape} from {r}", gl[r], everyone[r])
            sl = [make(root, dtype, shape, salt + r) for r in range(size)] if rank == root else None
            t = torch.full_like(mine, 99)
            dist.scatter(t, scatter_list=sl, src=root)
            close(f"scatter {dtype} {shape}", t, make(root, dtype, shape, salt + rank))
            # all_to_all (lists) and all_to_all_single (equal and uneven splits)
            ins = [make(rank, dtype, shape, salt + 10 + r) for r in range(size)]
            outs = [torch.full_like(mine, 99) for _ in range(size)]
            dist.all_to_all(outs, ins)
            for r in range(size):
                close(f"all_to_all {dtype} {shape} from {r}", outs[r],
                      make(r, dtype, shape, salt + 10 + rank))
            rows = [r + 1 for r in range(size)]  # rank r sends r' rows r'+1 ... uneven
            src = torch.cat([torch.full((rows[d], 2), rank * 10 + d, dtype=dtype) for d in range(size)])
            dst = torch.full((size * rows[rank], 2), 99, dtype=dtype)
            dist.all_to_all_single(dst, src, output_split_sizes=[rows[rank]] * size,
                                   input_split_sizes=rows)
            want = torch.cat([torch.full((rows[rank], 2), s * 10 + rank, dtype=dtype)
                              for s in range(size)])
            close(f"all_to_all_single uneven {dtype}", dst, want)
            cases += 9
    # Average, bool and the ops gyre lacks.
    t = torch.tensor([float(rank), 2.0 * rank])
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    close("all_reduce avg", t, torch.tensor([1.5, 3.0]) * (size - 1) / 3)
    check_premul_sum(rank, size)
    check_complex(rank, size)
    b = torch.tensor([rank == 0, True, False])
    dist.all_reduce(b)  # sum of bools: "any"
    close("all_reduce bool", b, torch.tensor([True, True, False]))
    for op in (dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR):
        try:
            dist.all_reduce(torch.ones(2, dtype=torch.int32), op=op)
            raise AssertionError(f"{op} was accepted")
        except RuntimeError as e:
            if "not supported" not in str(e):
                raise
    dist.barrier()
    print(f"rank {rank}: {cases} differential cases correct", flush=True)


def check_premul_sum(rank, size):
    """ReduceOp.PREMUL_SUM (NCCL's premul sum; FSDP2's gradient divide factor): every input
    times the factor, summed; inputs left as they were. gloo lacks it: the reference is local."""
    premul = dist._make_nccl_premul_sum
    ranks = torch.arange(1, size + 1, dtype=torch.float64)  # rank r contributes r + 1
    t = torch.tensor([1.0, 2.0, -3.0]) * (rank + 1)
    dist.all_reduce(t, op=premul(0.5))
    close("all_reduce premul_sum", t, torch.tensor([1.0, 2.0, -3.0]) * 0.5 * ranks.sum().float())
    v = torch.full((4, 6), float(rank + 1), dtype=torch.float64)[:, ::2]  # not contiguous
    factor = torch.tensor([0.25], dtype=torch.float64)
    torch1 = int(torch.__version__.split(".")[0]) < 2  # there a list: one factor per device
    dist.all_reduce(v, op=premul([factor] if torch1 else factor))
    close("all_reduce premul_sum tensor factor", v, torch.full((4, 3), 0.25 * ranks.sum().item(),
                                                               dtype=torch.float64))
    src = torch.arange(size * 3, dtype=torch.float32) + rank
    kept = src.clone()
    out = torch.full((3,), -1.0)
    dist.reduce_scatter_tensor(out, src, op=premul(1.0 / size))
    want = (torch.arange(size * 3, dtype=torch.float64) + (size - 1) / 2).float()
    close("reduce_scatter_tensor premul_sum", out, want[rank * 3:rank * 3 + 3])
    close("reduce_scatter_tensor premul_sum input", src, kept)
    h = torch.full((5,), float(rank + 1), dtype=torch.float16)
    dist.reduce(h, dst=0, op=premul(2.0))
    want = torch.full((5,), 2.0 * ranks.sum().item()) if rank == 0 else torch.full((5,), rank + 1.0)
    close("reduce premul_sum", h, want.half())
    try:
        dist.all_reduce(torch.ones(2, dtype=torch.int32), op=premul(2.0))
        raise AssertionError("PREMUL_SUM of integers was accepted")
    except RuntimeError as e:
        if "floating-point" not in str(e):
            raise


def check_complex(rank, size):
    """Complex tensors travel as their real and imaginary parts, as ProcessGroupNCCL sends them:
    every collective that moves them, and the sums (SUM, AVG, PREMUL_SUM); PRODUCT, MIN and MAX
    are refused. Small integers in both parts: every result exact."""
    for dtype in (torch.complex64, torch.complex128):
        def value(r, n=6):  # rank r's input
            base = torch.arange(n, dtype=torch.float64)
            return torch.complex(base + r, -2 * base - r).to(dtype)

        def total(n=6):
            return sum(value(r, n) for r in range(size))

        t = value(rank)
        dist.all_reduce(t)
        close(f"all_reduce {dtype}", t, total())
        t = value(rank)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        close(f"all_reduce avg {dtype}", t, total() / size)
        t = value(rank)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
        close(f"all_reduce premul_sum {dtype}", t, total() / 2)
        strided = value(rank, 12)[::2]  # not contiguous
        dist.all_reduce(strided)
        close(f"all_reduce strided {dtype}", strided, total(12)[::2])
        b = value(rank) if rank == size - 1 else torch.zeros(6, dtype=dtype)
        dist.broadcast(b, src=size - 1)
        close(f"broadcast {dtype}", b, value(size - 1))
        everyone = torch.cat([value(r) for r in range(size)])
        out = torch.zeros(size * 6, dtype=dtype)
        dist.all_gather_into_tensor(out, value(rank))
        close(f"all_gather_into_tensor {dtype}", out, everyone)
        parts = [torch.zeros(6, dtype=dtype) for _ in range(size)]
        dist.all_gather(parts, value(rank))
        close(f"all_gather {dtype}", torch.cat(parts), everyone)
        rs = torch.zeros(3, dtype=dtype)
        dist.reduce_scatter_tensor(rs, value(rank, 3 * size))
        close(f"reduce_scatter_tensor {dtype}", rs, total(3 * size)[3 * rank:3 * rank + 3])
        r = value(rank)
        dist.reduce(r, dst=0)
        close(f"reduce {dtype}", r, total() if rank == 0 else value(rank))
        rows = [d + 1 for d in range(size)]  # rank r sends d + 1 rows to rank d
        src = torch.cat([value(rank * 10 + d, 2 * rows[d]).view(rows[d], 2) for d in range(size)])
        dst = torch.zeros(size * rows[rank], 2, dtype=dtype)
        dist.all_to_all_single(dst, src, output_split_sizes=[rows[rank]] * size,
                               input_split_sizes=rows)
        want = torch.cat([value(s * 10 + rank, 2 * rows[rank]).view(rows[rank], 2)
                          for s in range(size)])
        close(f"all_to_all_single uneven {dtype}", dst, want)
        for op in (dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX):
            try:  # torch's all_reduce refuses these itself; its reduce_scatter_tensor does not
                dist.reduce_scatter_tensor(rs, value(rank, 3 * size), op=op)
                raise AssertionError(f"{op} of complex tensors was accepted")
            except (RuntimeError, ValueError) as e:
                if "complex" not in str(e):
                    raise


def main(rank, size):
    dist.init_process_group("gyre", rank=rank, world_size=size)
    gloo = dist.new_group(backend="gloo")
    run(rank, size, gloo)
    dist.destroy_process_group()


if __name__ == "__main__":
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    spawn_ranks(main, size)
    print(f"differential: {size} ranks, all correct")
