"""What every chapter-4 pair shares: who am I, seeded inputs, nccl-tests bandwidth, symmetric memory.

Inputs are drawn on the CPU from (seed, rank) and then moved to the device, so that a pair's
reference() can regenerate every rank's inputs in one CPU process and get the same values
(a CUDA generator would draw different numbers for the same seed).
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from common.physics import BUS_FACTOR  # nccl-tests' bus-bandwidth factors, the harness's own


def rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def generator(seed: int, rank_: int, stream: int = 0) -> torch.Generator:
    """A CPU generator for one rank's inputs (stream separates independent draws of that rank)."""
    return torch.Generator().manual_seed(seed * 1_000_003 + rank_ * 1009 + stream)


def randn(shape, g: torch.Generator, device, dtype=torch.float32, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(shape, generator=g) * scale).to(device=device, dtype=dtype)


def link_bytes(collective: str, message_bytes: float, n: int) -> float:
    """Bytes one rank sends over its link per call (busbw x t): a "link" pair's bytes_moved.

    nccl-tests: algbw = S / t for a per-rank message of S bytes; busbw = algbw x factor(n), e.g.
    2(n-1)/n for an all-reduce, the rate each rank's link must sustain whatever the algorithm.
    """
    return message_bytes * BUS_FACTOR[collective](n)


def all_gather_into(out: torch.Tensor, shard: torch.Tensor, async_op: bool = False, group=None):
    """all_gather_single where torch has it (2.13+), else all_gather_into_tensor (the same collective)."""
    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    return fn(out, shard, group=group, async_op=async_op)


def plan_buckets(tensors: list[torch.Tensor], cap_bytes: int) -> list[list[int]]:
    """Tensor indices per bucket, filled from the last tensor back (the order backward produces
    gradients, as DDP does); a bucket closes when the next tensor would take it past cap_bytes."""
    buckets, current, filled = [], [], 0
    for i in reversed(range(len(tensors))):
        size = tensors[i].numel() * tensors[i].element_size()
        if current and filled + size > cap_bytes:
            buckets.append(current)
            current, filled = [], 0
        current.append(i)
        filled += size
    if current:
        buckets.append(current)
    return buckets


def bucket_cap(tensors: list[torch.Tensor], cap_bytes: int = 25 << 20) -> int:
    """DDP's default 25 MiB, or a quarter of the total when that is smaller, so that a small (quick)
    model still has several buckets and the bucketing logic is exercised."""
    total = sum(t.numel() * t.element_size() for t in tensors)
    return min(cap_bytes, max(1, total // 4))


def bucket_views(tensors: list[torch.Tensor], plan: list[list[int]], alloc=None):
    """One flat buffer per bucket, and a view into it shaped like each tensor (DDP's gradient_as_bucket_view).

    alloc(numel, dtype, device) makes a bucket (default torch.empty; symmetric memory for a bucket
    that a symmetric-memory all-reduce works on in place)."""
    alloc = alloc or (lambda numel, dtype, device: torch.empty(numel, dtype=dtype, device=device))
    flats, views = [], [None] * len(tensors)
    for idx in plan:
        flat = alloc(sum(tensors[i].numel() for i in idx), tensors[0].dtype, tensors[0].device)
        offset = 0
        for i in idx:
            n = tensors[i].numel()
            views[i] = flat[offset:offset + n].view(tensors[i].shape)
            offset += n
        flats.append(flat)
    return flats, views


def reduce_scatter_into(out: torch.Tensor, full: torch.Tensor, group=None):
    """reduce_scatter_single where torch has it (2.13+), else reduce_scatter_tensor (the same collective)."""
    fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    return fn(out, full, group=group)


# ---- symmetric memory (CUDA only) -------------------------------------------------------------

def symm_mem_module():
    """torch.distributed._symmetric_memory, or a clear error where it cannot work."""
    if not torch.cuda.is_available():
        raise RuntimeError("symmetric memory needs CUDA GPUs; this process has none")
    import torch.distributed._symmetric_memory as symm_mem
    return symm_mem


def use_symm_backend(name: str | None) -> None:
    """Select the symmetric-memory backend before the first symmetric tensor of this process.

    The backend cannot change once a symmetric tensor exists, so each backend runs in its own
    processes (its own pair, or its own torchrun in nvshmem_vs_nccl_benchmark.py).
    """
    if name is None:
        return
    symm_mem = symm_mem_module()
    if name == "NVSHMEM" and not symm_mem.is_nvshmem_available():
        raise RuntimeError("NVSHMEM is not available in this torch build or on this machine")
    current = symm_mem.get_backend(torch.device("cuda", torch.cuda.current_device()))
    if current != name:
        symm_mem.set_backend(name)


def symm_empty(shape, dtype, device, backend: str | None = None):
    """A symmetric tensor on every rank of the default group, and its handle (rendezvous is collective)."""
    use_symm_backend(backend)
    symm_mem = symm_mem_module()
    buf = symm_mem.empty(tuple(shape), dtype=dtype, device=device)
    handle = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)
    return buf, handle


def group_name() -> str:
    return dist.group.WORLD.group_name
