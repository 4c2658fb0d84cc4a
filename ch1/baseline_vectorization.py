"""y = a*x + b over 256M bf16 values, one 2-byte load and store per thread.

Workload: 256M bf16 (512 MiB in, 512 MiB out). The kernel
(vector_loads.cu, `scale_shift_scalar`) is what one writes first: one
element per thread. Each warp-wide load moves only 64 bytes, so the GPU
needs many more load instructions and threads in flight to cover DRAM
latency than the bytes alone would ask for.

Per call: x. Prepared once: the output buffer and the compiled kernel.

Bound: memory. Napkin math: 1 GiB moved at ~3 TB/s ≈ 0.36 ms.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload
from common.cuda_ext import load_extension

BOUND = "memory"
DEVICES = ("cuda",)  # a custom CUDA kernel
A, B = 1.5, -0.25


def kernels():
    return load_extension("ch1_vector_loads", "ch1/vector_loads.cu", "ch1/vector_loads_binding.cpp")


def workload(seed: int, device, quick: bool = False) -> Workload:
    n = (32 if quick else 256) << 20
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(n, device=device, generator=g).to(torch.bfloat16)
    return Workload(inputs={"x": x}, flops=2.0 * n, bytes_moved=4.0 * n)  # 2 bytes in + 2 bytes out


def prepare(w: Workload):
    ext, x = kernels(), w.inputs["x"]
    y = torch.empty_like(x)
    return lambda: ext.scale_shift_scalar(x, A, B, y)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
