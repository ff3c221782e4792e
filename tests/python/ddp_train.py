"""A few DistributedDataParallel training steps of a small jagged-attention
model on 2 GPUs, checked against the same steps on one GPU.

    torchrun --nproc_per_node=2 tests/python/ddp_train.py

Each rank trains on its own shard of jagged sequences; DDP averages the
gradients. Rank 0 then replays the same steps on one GPU (both shards, the
gradients averaged by hand) and compares the final parameters and the first
step's gradients. Exit status 0 when they match. Run by
tests/python/test_distributed.py where at least 2 GPUs are visible.
"""

import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import blockattn
from blockattn import workloads

STEPS, HQ, HKV, D, C = 3, 4, 2, 64, 96


class JaggedAttention(torch.nn.Module):
    """x [T, C] -> qkv projection -> block attention (bf16) -> output projection."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(C, (HQ + 2 * HKV) * D)
        self.out = torch.nn.Linear(HQ * D, C)

    def forward(self, x, offsets):
        z = self.qkv(x).to(torch.bfloat16)
        q, k, v = z.split([HQ * D, HKV * D, HKV * D], dim=1)
        t = x.shape[0]
        o = blockattn.block_attention(q.reshape(t, HQ, D), k.reshape(t, HKV, D), v.reshape(t, HKV, D), offsets)
        return self.out(o.reshape(t, HQ * D).float())


def shard(rank: int, step: int, device):
    """The (x, offsets, target) of one rank's shard at one step, the same wherever it is drawn."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    lengths = torch.randint(1, 300, (6,), generator=g)
    t = int(lengths.sum())
    x = torch.randn(t, C, generator=g).to(device)
    target = torch.randn(t, C, generator=g).to(device)
    return x, workloads.offsets_from_lengths(lengths, device), target


def loss_of(model, rank, step, device):
    x, offsets, target = shard(rank, step, device)
    return torch.nn.functional.mse_loss(model(x, offsets), target)


def fresh_model(device):
    torch.manual_seed(0)
    return JaggedAttention().to(device)


def main() -> int:
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)

    model = DistributedDataParallel(fresh_model(device), device_ids=[device.index])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    first_grads = None
    for step in range(STEPS):
        opt.zero_grad()
        loss_of(model, rank, step, device).backward()
        if step == 0:
            first_grads = [p.grad.detach().clone() for p in model.parameters()]
        opt.step()
    params = [p.detach().clone() for p in model.parameters()]

    ok = True
    if rank == 0:
        ref = fresh_model(device)
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
        ref_first = None
        for step in range(STEPS):
            ref_opt.zero_grad()
            for r in range(world):  # DDP averages: the mean of the shards' losses has the same gradient
                (loss_of(ref, r, step, device) / world).backward()
            if step == 0:
                ref_first = [p.grad.detach().clone() for p in ref.parameters()]
            ref_opt.step()

        def worst(a, b):
            return max(((x - y).norm() / y.norm().clamp_min(1e-30)).item() for x, y in zip(a, b))

        grad_err, param_err = worst(first_grads, ref_first), worst(params, list(ref.parameters()))
        ok = grad_err < 1e-3 and param_err < 1e-4
        print(f"ddp vs single GPU: first-step gradients rel err {grad_err:.2e}, "
              f"parameters after {STEPS} steps rel err {param_err:.2e}: {'ok' if ok else 'MISMATCH'}")
    flag = torch.tensor([1 if ok else 0], device=device)
    dist.broadcast(flag, 0)
    dist.destroy_process_group()
    return 0 if flag.item() else 1


if __name__ == "__main__":
    sys.exit(main())
