"""A step that takes scratch memory from cudaMalloc and gives it back with cudaFree, 8 times.

Workload: out = x + sum_j x * j for j = 1..8 over 4M floats, each term built
in a fresh 16 MiB scratch buffer (alloc_kernels.cu, `step_malloc`), the way
C++ code that does not trust a pool is first written. cudaFree blocks until
the whole device is idle, so every scratch buffer costs a host stall plus a
drained GPU queue, and the next kernel launch starts from cold.

Per call: x. Prepared once: the output buffer and the compiled kernels.

Bound: launch (synchronization). 16 small memory-bound kernels of ~15 µs
each, separated by 8 device-wide syncs and 16 driver allocation calls.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload
from common.cuda_ext import load_extension

BOUND = "launch"
DEVICES = ("cuda",)
N, K = 4 << 20, 8


def kernels():
    return load_extension("ch11_alloc_kernels", "ch11/alloc_kernels.cu", "ch11/alloc_kernels_binding.cpp")


def workload(seed: int, device, quick: bool = False) -> Workload:
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(N, device=device, generator=g)
    # the fewest bytes: x read once, out written once (the scratch buffers' passes are the lesson's overhead, the
    # same in both variants: fill reads x and writes tmp, accumulate reads tmp and out and writes out)
    return Workload(inputs={"x": x}, flops=2.0 * K * N, bytes_moved=4.0 * N * 2, launches=2 * K)


def prepare(w: Workload):
    ext, x = kernels(), w.inputs["x"]
    out = torch.empty_like(x)

    def step():
        out.copy_(x)
        return ext.step_malloc(x, out, K)
    return step


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
