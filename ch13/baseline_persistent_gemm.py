"""A Triton GEMM, one program per output tile (ch13/triton_kernels.py), at a shape where the last wave is thin.

Workload: C = A @ B, M = N = 2304, K = 8192, bf16, tiles of 128 x 128 (K step 64, 4 stages, 8 warps):
18 x 18 = 324 tiles over 132 SMs is 2.45 waves (one 128x128 tile per SM at a time with this tile's
shared memory): the third wave keeps 60 of 132 SMs busy. The hardware scheduler starts each program, which
sets up its pointers and its pipeline prologue and drains the epilogue before the SM takes the next.

Per call: A. Prepared once: B. GPU only (a Triton kernel).

Bound: compute. Napkin math: 2 x 2304^2 x 8192 = 87 GFLOP ≈ 0.13 ms at ~650 TFLOP/s; the wave tail alone
costs up to (3 - 2.45)/3 ≈ 18% of that for any one-tile-per-program schedule.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload

BOUND = "compute"
DEVICES = ("cuda",)
REQUIRES = ("triton",)
CONFIG = (128, 128, 64, 4, 8)  # BLOCK_M, BLOCK_N, BLOCK_K, stages, warps: the same for both variants


def workload(seed: int, device, quick: bool = False) -> Workload:
    m, n, k = (1152, 1152, 2048) if quick else (2304, 2304, 8192)
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(m, k, device=device, generator=g).to(torch.bfloat16)
    b = (torch.randn(k, n, device=device, generator=g) / k**0.5).to(torch.bfloat16)
    return Workload(inputs={"a": a, "b": b}, once=("b",), flops=2.0 * m * n * k, bytes_moved=2.0 * (m * k + k * n + m * n))


def prepare(w: Workload):
    from ch13 import triton_kernels as tk
    a, b = w.inputs["a"], w.inputs["b"]
    out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    return lambda: tk.gemm(a, b, None, out, gelu=False, config=CONFIG)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
