"""A 256-bin histogram of 256 M bytes with one global atomicAdd per byte.

Every thread of every SM adds into the same 256 counters in L2: the atomic units serialize updates to one
address, so throughput is bound by contention, not by the 256 MiB read. The bytes follow a skewed
distribution (a rounded normal, sd 20, around 128: most land in ~100 bins), which is what makes the hot
bins hotter. Kernel: ch13/bottlenecks.cuh, histogram_global. ncu: lts__t_requests_op_red.sum, one L2
reduction per element (256 M).

Per call: x. Prepared once: the counters and the extension. Returns the 256 counts (int32). GPU only.

Bound: memory. Napkin math: 256 MiB read ≈ 0.09 ms at ~3 TB/s, if the atomics kept up.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch13.baseline_bank_conflicts import kernels
from common import Workload

BOUND = "memory"
DEVICES = ("cuda",)


def workload(seed: int, device, quick: bool = False) -> Workload:
    n = (32 if quick else 256) << 20
    g = torch.Generator(device=device).manual_seed(seed)
    x = (128 + 20 * torch.randn(n, device=device, generator=g)).round().clamp(0, 255).to(torch.uint8)
    return Workload(inputs={"x": x}, bytes_moved=float(n), items=n, item_name="bytes")


def prepare(w: Workload, privatized: bool = False):
    ext, x = kernels(), w.inputs["x"]
    hist = torch.empty(256, dtype=torch.int32, device=x.device)
    return lambda: ext.histogram(x, hist, privatized)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
