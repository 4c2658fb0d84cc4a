"""Linear + bias + GELU as three PyTorch ops (matmul, add, GELU): chapter 1's fused_gelu workload, profiled.

The workload and the timed call are chapter 1's (ch1/baseline_fused_gelu.py): 16384 tokens x 4096 -> 4096,
bf16, W and b prepared once, x per call. Here the pair gains a Triton kernel whose epilogue applies the
bias and the GELU, beside cuBLASLt's epilogue.
At --quick (chapter 1's small size, 512 tokens x 512 -> 512) the pair is a smoke test that the code runs, not the
chapter's result.

Bound: compute. Napkin math: 550 GFLOP ≈ 0.85 ms at ~650 TFLOP/s; the two element-wise kernels move
4 x 128 MiB = 512 MiB ≈ 0.18 ms at ~3 TB/s, so fusing can save ~15-20%.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch1.baseline_fused_gelu import BOUND, prepare, workload  # noqa: F401

if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
