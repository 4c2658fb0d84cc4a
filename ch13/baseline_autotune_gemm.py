"""A Triton GEMM with one tile configuration picked by hand: 128 x 128 tiles, K step 64, 4 stages, 4 warps.

Workload: C = A @ B, M = 8192 tokens, K = 4096, N = 14336 (an MLP's up-projection), bf16. The kernel is
ch13/triton_kernels.py's; the configuration is the pick one makes without measuring: the square 128 x 128
tile in the middle of GEMM_CONFIGS, with Triton's default 4 warps. A BM x BN tile uses each element it
loads 2 BM BN / (BM + BN) times: 64 for a 64 x 64 tile, 128 here, ~171 for 128 x 256, whose registers
and shared memory (194 and 144 KB on an H100) leave room for one program per SM. Whether the middle pick
is the best for this shape is what the autotuner measures. GPU only.
At --quick (M = 2048, K = 1024, N = 3584) the pair is a smoke test that the code runs, not the chapter's result.

Per call: A. Prepared once: B.

Bound: compute. Napkin math: 2 x 8192 x 4096 x 14336 = 962 GFLOP ≈ 1.5 ms at ~650 TFLOP/s.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload

BOUND = "compute"
DEVICES = ("cuda",)
REQUIRES = ("triton",)
HAND_CONFIG = (128, 128, 64, 4, 4)


def workload(seed: int, device, quick: bool = False) -> Workload:
    m, k, n = (2048, 1024, 3584) if quick else (8192, 4096, 14336)
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(m, k, device=device, generator=g).to(torch.bfloat16)
    b = (torch.randn(k, n, device=device, generator=g) / k**0.5).to(torch.bfloat16)
    return Workload(inputs={"a": a, "b": b}, once=("b",), flops=2.0 * m * n * k, bytes_moved=2.0 * (m * k + k * n + m * n))


def output(w):
    a, b = w.inputs["a"], w.inputs["b"]
    return torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)


def prepare(w: Workload):
    from ch13 import triton_kernels as tk
    a, b, out = w.inputs["a"], w.inputs["b"], output(w)
    return lambda: tk.gemm(a, b, None, out, gelu=False, config=HAND_CONFIG)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
