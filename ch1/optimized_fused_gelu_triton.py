"""Pitfall: the same epilogue by hand, a Triton GEMM that applies the bias and the tanh GELU before its one store.

cuBLASLt's GELU_BIAS epilogue (optimized_fused_gelu.py) is a library's kernel; this is the fusion written
out, chapter 13's GEMM (ch13/triton_kernels.py, `gemm(..., gelu=True)`): each program's fp32 accumulator
tile gets `+ b` and the GELU (x * sigmoid(2u), the tanh form the baseline computes) in registers, then is
stored once in bf16, so the 128 MiB activation crosses memory once, as with cuBLASLt. Both remove the
baseline's GELU pass (≈ 0.07 ms at 16384 tokens); what is left between them is the GEMM's main loop, a
library's tuned kernel against a tile shape picked from eight stated configurations, and that loop is ~10%
slower here (~690 against ~760-775 TFLOP/s with the epilogue): the pass saved is spent in the main loop.

Why a pitfall: fusing by hand pays only where the hand-written GEMM is as fast as the library's. Against
nn.Linear + GELU (cuBLAS's GEMM with the bias, then one GELU kernel) this variant ties at 16384 tokens
(0.993x and 0.994x on the H100 at 67da15a, profiles/h100/ch1-fused-gelu-67da15a) and loses at 1024 (0.737x:
its 128 x 256 tiles make 128 programs for 132 SMs). Against the three-op baseline this pair had before (the
bias as its own op, now optimized_fused_gelu_separate_bias.py) it read 1.23x (eae4ffc), which was the saved
bias pass, not a better kernel. KIND = "pitfall": reported with its ratio.

Prepared once: the autotuning (the first call benchmarks ch13/triton_kernels.py's GEMM_CONFIGS for this
shape, reported as prepare_s; the choice is printed to stderr) and the output buffer, beside the
baseline's W and b. Per call: one kernel launch that reads x, W and b and writes y. CUDA only: a CPU run
skips it with the reason.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch13 import triton_kernels as tk
from common import Workload

KIND = "pitfall"
DEVICES = ("cuda",)
REQUIRES = ("triton",)


def prepare(wl: Workload):
    x, w, b = wl.inputs["x"], wl.inputs["w"], wl.inputs["b"]  # w is (K, N): y = x @ w, as tk.gemm computes
    out = torch.empty(x.shape[0], w.shape[1], dtype=x.dtype, device=x.device)
    tk.gemm(x, w, b, out, gelu=True)  # autotune now, not in a timed call
    print(f"fused_gelu_triton: autotuner chose {tk.best_config()}", file=sys.stderr)
    return lambda: tk.gemm(x, w, b, out, gelu=True)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
