"""All-reduce (sum) one 256 MiB bf16 message across 2 ranks with NCCL (Gloo on CPUs).

Workload: 128 Mi bf16 values per rank (a large gradient bucket), each rank's from its own
seed; every rank gets the sum. Quick: 1 MiB.

Bound: link. nccl-tests: busbw = algbw x 2(n-1)/n; for n = 2 each rank sends half its message
to the peer (reduce-scatter) and receives the other half back (all-gather): 256 MiB over each
link per call. Napkin math at NV18's measured P2P copy rate (395 GB/s in the issue's
exploration, to be replaced by the committed report): ≥ 0.68 ms.

Prepared once: the output buffer. Per call: the message.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch4.baseline_small_allreduce import allreduce_reference, allreduce_workload, prepare  # noqa: F401

BOUND = "link"
NPROC = 2
MESSAGE_BYTES, QUICK_MESSAGE_BYTES = 256 << 20, 1 << 20


def workload(seed, device, quick=False):
    size = QUICK_MESSAGE_BYTES if quick else MESSAGE_BYTES
    return allreduce_workload(seed, device, size, f"{size >> 20} MiB bf16")


def reference(seed, rank, world_size, quick=False):
    return allreduce_reference(seed, world_size, QUICK_MESSAGE_BYTES if quick else MESSAGE_BYTES)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
