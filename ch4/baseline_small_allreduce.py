"""All-reduce (sum) one 64 KiB bf16 message across 2 ranks with NCCL (Gloo on CPUs).

Workload: 32768 bf16 values per rank (a tensor-parallel layer's activations at decode time, a
small gradient), each rank's from its own seed; every rank gets the sum.

Bound: link latency, not bandwidth: NCCL pays ~20-30 µs per collective (kernel launch, the
protocol's handshake through its channels) while 64 KiB crosses NV18 (~400 GB/s) in 0.2 µs.
The size sweep in nvshmem_vs_nccl_benchmark.py shows where the fixed cost stops mattering.

Prepared once: the output buffer. Per call: the message (copied into the output, then reduced
in place, so the input stays intact for the next call).
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch
import torch.distributed as dist

from common import Workload
from ch4.dist_common import generator, link_bytes, rank, randn, world_size

BOUND = "link"
NPROC = 2
MESSAGE_BYTES = 64 << 10
DTYPE = torch.bfloat16


def make_inputs(seed: int, rank_: int, device, quick: bool, message_bytes: int = MESSAGE_BYTES) -> dict:
    n = message_bytes // DTYPE.itemsize
    return {"x": randn((n,), generator(seed, rank_), device, DTYPE)}


def allreduce_workload(seed, device, message_bytes: int, note: str) -> Workload:
    inputs = make_inputs(seed, rank(), device, False, message_bytes)
    n = world_size()
    return Workload(inputs=inputs, bytes_moved=link_bytes("all_reduce", message_bytes, n), collective="all_reduce",
                    message_bytes=message_bytes, items=1, item_name="all-reduces", note=f"{note}, {n} ranks")


def workload(seed, device, quick=False):
    return allreduce_workload(seed, device, MESSAGE_BYTES, "64 KiB bf16")


def allreduce_reference(seed, world_size, message_bytes):
    """Every rank gets the sum of every rank's message, rounded to bf16 once (as NCCL's sum of two)."""
    xs = [make_inputs(seed, r, "cpu", False, message_bytes)["x"].float() for r in range(world_size)]
    return sum(xs).to(DTYPE)


def reference(seed, rank, world_size, quick=False):
    return allreduce_reference(seed, world_size, MESSAGE_BYTES)


def prepare(w):
    x = w.inputs["x"]
    out = torch.empty_like(x)

    def call():
        out.copy_(x)
        dist.all_reduce(out)
        return out
    return call


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
